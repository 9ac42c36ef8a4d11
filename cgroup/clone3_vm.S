/* cg_clone3_vm: clone3 for a child that shares our memory (CLONE_VM) and
 * runs fn(arg) on its own stack, like glibc's posix_spawn does with clone.
 *
 *   long cg_clone3_vm(struct clone_args *args, size_t size,
 *                     void (*fn)(void *), void *arg);
 *
 * Returns the child's pid, or -errno, in the parent. The child never returns
 * here: fn must exec or exit. C cannot do this with syscall(): after clone3
 * with a new stack the child would return into a frame that is not there.
 * Only x86-64 has it; elsewhere the file is empty and spawn.c copies memory. */
#if defined(__x86_64__)
    .text
    .globl cg_clone3_vm
    .type cg_clone3_vm, @function
    .hidden cg_clone3_vm
cg_clone3_vm:
    .cfi_startproc
    /* syscall clobbers only rax, rcx and r11: fn and arg wait in r8, r9. */
    movq %rdx, %r8
    movq %rcx, %r9
    movl $435, %eax /* SYS_clone3 */
    syscall
    testq %rax, %rax
    jz 1f
    ret
    .cfi_endproc

1:  /* The child, on the stack the kernel switched to (aligned by the caller,
     * so fn is entered with the ABI's alignment after the call). */
    .cfi_startproc
    .cfi_undefined rip
    xorl %ebp, %ebp
    movq %r9, %rdi
    call *%r8
    movl $231, %eax /* SYS_exit_group: fn returned, which it must not */
    movl $127, %edi
    syscall
    hlt
    .cfi_endproc
    .size cg_clone3_vm, .-cg_clone3_vm
#endif
    .section .note.GNU-stack,"",@progbits
