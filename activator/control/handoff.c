#include "activator/control/handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/cleanup.h"

struct ctrl_handoff {
    pthread_mutex_t lock;
    ctrl_handoff_node *head, *tail; /* guarded by lock */
    int wake_fd;
    sd_event_source *source;
    ctrl_handoff_fn consume;
    void *userdata;
};

static ctrl_handoff_node *take_all(ctrl_handoff *handoff)
{
    pthread_mutex_lock(&handoff->lock);
    ctrl_handoff_node *list = handoff->head;
    handoff->head = handoff->tail = NULL;
    pthread_mutex_unlock(&handoff->lock);
    return list;
}

void ctrl_handoff_drain_with(ctrl_handoff *handoff, ctrl_handoff_fn fn, void *userdata)
{
    /* Taking the whole list under the lock and consuming outside it lets the
     * consumer push again (a reply that completes at once) without deadlock. */
    ctrl_handoff_node *node = take_all(handoff);
    while (node) {
        ctrl_handoff_node *next = node->next;
        node->next = NULL;
        fn(node, userdata);
        node = next;
    }
}

void ctrl_handoff_drain(ctrl_handoff *handoff)
{
    ctrl_handoff_drain_with(handoff, handoff->consume, handoff->userdata);
}

static int on_wake(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    uint64_t count;
    /* Read before draining: a push after the read either lands in this drain
     * or writes the eventfd again, so no item is ever left waiting. */
    (void)!read(fd, &count, sizeof(count));
    ctrl_handoff_drain(userdata);
    return 0;
}

int ctrl_handoff_new(sd_event *event, ctrl_handoff_fn consume, void *userdata, ctrl_handoff **out,
                     act_error *err)
{
    _cleanup_free_ ctrl_handoff *handoff = calloc(1, sizeof(*handoff));
    if (!handoff)
        return act_error_set(err, ENOMEM, "out of memory for the loop hand-off queue");
    handoff->consume = consume;
    handoff->userdata = userdata;
    handoff->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (handoff->wake_fd < 0)
        return act_error_set(err, errno, "eventfd for the loop hand-off queue: %m");
    int r = sd_event_add_io(event, &handoff->source, handoff->wake_fd, EPOLLIN, on_wake, handoff);
    if (r < 0) {
        close(handoff->wake_fd);
        return act_error_set(err, -r, "adding the hand-off eventfd to the event loop: %s",
                             strerror(-r));
    }
    pthread_mutex_init(&handoff->lock, NULL);
    *out = TAKE_PTR(handoff);
    return 0;
}

void ctrl_handoff_push(ctrl_handoff *handoff, ctrl_handoff_node *node)
{
    node->next = NULL;
    pthread_mutex_lock(&handoff->lock);
    bool was_empty = handoff->head == NULL;
    if (handoff->tail)
        handoff->tail->next = node;
    else
        handoff->head = node;
    handoff->tail = node;
    pthread_mutex_unlock(&handoff->lock);
    /* Only the push onto an empty queue needs to wake the loop; later ones
     * are picked up by the same drain. */
    if (was_empty) {
        uint64_t one = 1;
        (void)!write(handoff->wake_fd, &one, sizeof(one));
    }
}

bool ctrl_handoff_remove(ctrl_handoff *handoff, ctrl_handoff_node *node)
{
    bool removed = false;
    pthread_mutex_lock(&handoff->lock);
    ctrl_handoff_node *prev = NULL;
    for (ctrl_handoff_node *it = handoff->head; it; prev = it, it = it->next) {
        if (it != node)
            continue;
        if (prev)
            prev->next = it->next;
        else
            handoff->head = it->next;
        if (handoff->tail == it)
            handoff->tail = prev;
        it->next = NULL;
        removed = true;
        break;
    }
    pthread_mutex_unlock(&handoff->lock);
    return removed;
}

void ctrl_handoff_free(ctrl_handoff *handoff)
{
    if (!handoff)
        return;
    sd_event_source_disable_unref(handoff->source);
    close(handoff->wake_fd);
    pthread_mutex_destroy(&handoff->lock);
    free(handoff);
}
