#include "activator/control/handoff.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/cleanup.h"

struct act_handoff {
    pthread_mutex_t lock;
    act_handoff_node *head, *tail; /* guarded by lock */
    int wake_fd;
    sd_event_source *source;
    act_handoff_fn consume;
    void *userdata;
};

static act_handoff_node *take_all(act_handoff *handoff)
{
    pthread_mutex_lock(&handoff->lock);
    act_handoff_node *list = handoff->head;
    handoff->head = handoff->tail = NULL;
    pthread_mutex_unlock(&handoff->lock);
    return list;
}

void act_handoff_drain_with(act_handoff *handoff, act_handoff_fn fn, void *userdata)
{
    /* Taking the whole list under the lock and consuming outside it lets the
     * consumer push again (a reply that completes at once) without deadlock. */
    act_handoff_node *node = take_all(handoff);
    while (node) {
        act_handoff_node *next = node->next;
        node->next = NULL;
        fn(node, userdata);
        node = next;
    }
}

void act_handoff_drain(act_handoff *handoff)
{
    act_handoff_drain_with(handoff, handoff->consume, handoff->userdata);
}

static int on_wake(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    uint64_t count;
    /* Read before draining: a push after the read either lands in this drain
     * or writes the eventfd again, so no item is ever left waiting. */
    (void)!read(fd, &count, sizeof(count));
    act_handoff_drain(userdata);
    return 0;
}

int act_handoff_new(sd_event *event, act_handoff_fn consume, void *userdata, act_handoff **out,
                    act_error *err)
{
    _cleanup_free_ act_handoff *handoff = calloc(1, sizeof(*handoff));
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

void act_handoff_push(act_handoff *handoff, act_handoff_node *node)
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

bool act_handoff_remove(act_handoff *handoff, act_handoff_node *node)
{
    bool removed = false;
    pthread_mutex_lock(&handoff->lock);
    act_handoff_node *prev = NULL;
    for (act_handoff_node *it = handoff->head; it; prev = it, it = it->next) {
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

void act_handoff_free(act_handoff *handoff)
{
    if (!handoff)
        return;
    sd_event_source_disable_unref(handoff->source);
    close(handoff->wake_fd);
    pthread_mutex_destroy(&handoff->lock);
    free(handoff);
}
