/* The log keeper (activatord --log-keeper) against messages no daemon
 * sends: the real keeper process, on its own socket, told to drain pipes
 * with the wrong number of descriptors, an inode that is not the pipe's, a
 * file that is no pipe, a host name that is a path, a bound of 0, too many
 * descriptors, a message too long, and words it does not know. Each is
 * refused and logged, every descriptor that came with it is closed (none of
 * the "bait" files sent along stays open in the keeper), and the keeper
 * still drains the one valid pipe it is given after them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/log_keeper/protocol.h"
#include "common/clock.h"

#ifndef ACTIVATORD_PATH
#error "ACTIVATORD_PATH must name the activatord executable"
#endif

#define BAITS 8
#define WAIT_USEC (10 * 1000 * 1000ull)

typedef struct keeper_run {
    char dir[64];
    char log_dir[96];
    pid_t pid;
    int connection;
    int log_dirfd;
    int baits[BAITS];
    uint64_t refused_pipes[4];
    size_t n_refused_pipes;
} keeper_run;

static void path_in(const keeper_run *run, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", run->dir, name);
}

/* The keeper, started as the daemon starts it: its listening socket on fd 3,
 * its stderr into keeper.log. */
static void start_keeper(keeper_run *run)
{
    snprintf(run->dir, sizeof(run->dir), "/tmp/act-keeper-XXXXXX");
    assert_non_null(mkdtemp(run->dir));
    path_in(run, "log", run->log_dir, sizeof(run->log_dir));
    assert_int_equal(mkdir(run->log_dir, 0755), 0);
    run->log_dirfd = open(run->log_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(run->log_dirfd >= 0);
    for (int i = 0; i < BAITS; i++) {
        char name[32], path[128];
        snprintf(name, sizeof(name), "bait-%d", i);
        path_in(run, name, path, sizeof(path));
        run->baits[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(run->baits[i] >= 0);
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    path_in(run, LK_SOCKET_NAME, addr.sun_path, sizeof(addr.sun_path));
    int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_true(listener >= 0);
    assert_int_equal(bind(listener, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(listener, 4), 0);
    char log_path[128];
    path_in(run, "keeper.log", log_path, sizeof(log_path));
    run->pid = fork();
    assert_true(run->pid >= 0);
    if (run->pid == 0) {
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log_fd < 0 || dup2(log_fd, STDERR_FILENO) < 0 || dup2(listener, LK_LISTEN_FD) < 0)
            _exit(127);
        execl(ACTIVATORD_PATH, ACTIVATORD_PATH, LK_ARGUMENT, (char *)NULL);
        _exit(127);
    }
    close(listener);
    run->connection = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_true(run->connection >= 0);
    assert_int_equal(connect(run->connection, (struct sockaddr *)&addr, sizeof(addr)), 0);
    /* Nothing held yet: its first word is the hello. */
    uint64_t deadline = act_now_usec() + WAIT_USEC;
    char text[LK_MESSAGE_MAX];
    int fds[LK_FDS_MAX];
    size_t n_fds = 0;
    ssize_t n;
    while ((n = lk_receive(run->connection, text, sizeof(text), fds, LK_FDS_MAX, &n_fds)) ==
           -EAGAIN) {
        assert_true(act_now_usec() < deadline);
        struct pollfd pfd = {.fd = run->connection, .events = POLLIN};
        poll(&pfd, 1, 100);
    }
    assert_true(n > 0);
    assert_int_equal(strncmp(text, "hello ", 6), 0);
}

static void send_or_fail(keeper_run *run, const char *text, const int *fds, size_t n_fds)
{
    int r = lk_send(run->connection, text, fds, n_fds, 0);
    if (r < 0)
        fail_msg("cannot send \"%.40s\" to the keeper: %s", text, strerror(-r));
}

/* A pipe whose read end rides on a message that is refused: the keeper
 * must not keep it. Returns the read end (ours to close once sent). */
static int refused_pipe(keeper_run *run, int *write_end)
{
    int ends[2];
    assert_int_equal(pipe2(ends, O_CLOEXEC), 0);
    struct stat st;
    assert_int_equal(fstat(ends[0], &st), 0);
    run->refused_pipes[run->n_refused_pipes++] = (uint64_t)st.st_ino;
    *write_end = ends[1];
    return ends[0];
}

static uint64_t inode_of(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_ino;
}

/* More descriptors than any message carries, sent by hand: lk_send will
 * not. */
static void send_too_many(keeper_run *run)
{
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } control = {0};
    const char *text = "add 1 1 web1";
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buffer,
                         .msg_controllen = sizeof(control.buffer)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * 3);
    memcpy(CMSG_DATA(cmsg), run->baits + 4, sizeof(int) * 3);
    assert_int_equal(sendmsg(run->connection, &msg, MSG_NOSIGNAL), (ssize_t)strlen(text));
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *text = calloc(1, 1 << 16);
    size_t n = text ? fread(text, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    fclose(f);
    return text;
}

/* Whether the keeper holds a descriptor whose target contains what. */
static bool keeper_holds(const keeper_run *run, const char *what)
{
    char dir_path[64];
    snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)run->pid);
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(dir));) {
        char link[PATH_MAX], target[PATH_MAX] = "";
        snprintf(link, sizeof(link), "%s/%s", dir_path, e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strstr(target, what) != NULL;
        }
    }
    closedir(dir);
    return found;
}

static void refused_messages_leave_nothing_held(void **state)
{
    (void)state;
    keeper_run run = {0};
    start_keeper(&run);
    int writers[4], n_writers = 0;
    char text[4096];

    /* add with too few descriptors: none, then the pipe alone. */
    send_or_fail(&run, "add 1 4096 web1", NULL, 0);
    int pipe_alone = refused_pipe(&run, &writers[n_writers++]);
    snprintf(text, sizeof(text), "add %" PRIu64 " 4096 web1", inode_of(pipe_alone));
    send_or_fail(&run, text, (int[]){pipe_alone}, 1);
    close(pipe_alone);
    /* An inode that is not the pipe's. */
    int wrong_inode = refused_pipe(&run, &writers[n_writers++]);
    send_or_fail(&run, "add 999 4096 web1", (int[]){wrong_inode, run.log_dirfd}, 2);
    close(wrong_inode);
    /* A file that is no pipe, named by its own inode. */
    snprintf(text, sizeof(text), "add %" PRIu64 " 4096 web1", inode_of(run.baits[0]));
    send_or_fail(&run, text, (int[]){run.baits[0], run.baits[1]}, 2);
    /* A host name that is a path, and a bound of 0. */
    int bad_host = refused_pipe(&run, &writers[n_writers++]);
    snprintf(text, sizeof(text), "add %" PRIu64 " 4096 ../etc", inode_of(bad_host));
    send_or_fail(&run, text, (int[]){bad_host, run.log_dirfd}, 2);
    close(bad_host);
    int no_bound = refused_pipe(&run, &writers[n_writers++]);
    snprintf(text, sizeof(text), "add %" PRIu64 " 0 web1", inode_of(no_bound));
    send_or_fail(&run, text, (int[]){no_bound, run.log_dirfd}, 2);
    close(no_bound);
    /* Three descriptors; a message longer than any the keeper reads. */
    send_too_many(&run);
    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    memcpy(text, "add ", 4);
    send_or_fail(&run, text, (int[]){run.baits[2]}, 1);
    /* Words it does not know, or knows with arguments it refuses. */
    send_or_fail(&run, "held 1 web1", (int[]){run.baits[3]}, 1);
    send_or_fail(&run, "bound 0", NULL, 0);
    send_or_fail(&run, "bound many", NULL, 0);
    send_or_fail(&run, "mark", NULL, 0);
    send_or_fail(&run, "mark ../x words", (int[]){run.baits[7]}, 1);

    /* The control: after all that, a valid pipe is drained into the file. */
    int ends[2];
    assert_int_equal(pipe2(ends, O_CLOEXEC), 0);
    uint64_t valid_ino = inode_of(ends[0]);
    snprintf(text, sizeof(text), "add %" PRIu64 " 4096 web1", valid_ino);
    send_or_fail(&run, text, (int[]){ends[0], run.log_dirfd}, 2);
    close(ends[0]);
    const char line[] = "the keeper still drains\n";
    assert_int_equal(write(ends[1], line, sizeof(line) - 1), (ssize_t)sizeof(line) - 1);
    char output[160];
    snprintf(output, sizeof(output), "%s/output.log", run.log_dir);
    uint64_t deadline = act_now_usec() + WAIT_USEC;
    for (;;) {
        char *content = read_file(output);
        bool drained = content && strstr(content, line);
        free(content);
        if (drained)
            break;
        if (act_now_usec() > deadline)
            fail_msg("the keeper did not drain a valid pipe after the refused messages");
        usleep(5000);
    }
    /* Messages are read in order: every refusal is done by now. The scan
     * finds what the keeper does hold (its control), and nothing else. */
    char pipe_name[48];
    snprintf(pipe_name, sizeof(pipe_name), "pipe:[%" PRIu64 "]", valid_ino);
    assert_true(keeper_holds(&run, pipe_name));
    assert_false(keeper_holds(&run, "bait-"));
    for (size_t i = 0; i < run.n_refused_pipes; i++) {
        snprintf(pipe_name, sizeof(pipe_name), "pipe:[%" PRIu64 "]", run.refused_pipes[i]);
        if (keeper_holds(&run, pipe_name))
            fail_msg("the keeper kept the pipe of a refused message (%s)", pipe_name);
    }
    assert_int_equal(waitpid(run.pid, NULL, WNOHANG), 0);
    char log_path[128];
    path_in(&run, "keeper.log", log_path, sizeof(log_path));
    char *log = read_file(log_path);
    assert_non_null(log);
    if (!strstr(log, "refused \"add") || !strstr(log, "too many descriptors") ||
        !strstr(log, "unknown message \"held"))
        fail_msg("the refusals are not in the keeper's log:\n%s", log);
    free(log);

    /* Its last pipe ended and no daemon connected: the keeper exits. */
    close(ends[1]);
    for (int i = 0; i < n_writers; i++)
        close(writers[i]);
    close(run.connection);
    int status = 0;
    deadline = act_now_usec() + WAIT_USEC;
    while (waitpid(run.pid, &status, WNOHANG) == 0) {
        if (act_now_usec() > deadline) {
            kill(run.pid, SIGKILL);
            waitpid(run.pid, NULL, 0);
            fail_msg("the keeper did not exit with no pipe and no daemon left");
        }
        usleep(5000);
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < BAITS; i++)
        close(run.baits[i]);
    close(run.log_dirfd);
    char command[128];
    snprintf(command, sizeof(command), "rm -rf %s", run.dir);
    assert_int_equal(system(command), 0);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "log-keeper-messages: skipped: the keeper takes only root's "
                        "connections; run as root\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_messages_leave_nothing_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
