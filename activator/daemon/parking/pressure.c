/* Memory pressure retires frozen generations: see parking/pressure.h. The kernel
 * tells us through a PSI trigger (POLLPRI on the file we wrote it to), so
 * nothing here polls. */
#include "activator/daemon/parking/pressure.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/host/host.h"
#include "common/log.h"

#define PRESSURE_FILE "/proc/pressure/memory"
/* PSI's window: the trigger fires at most once per window while the stall
 * in it passes the threshold. 2 s, because a process without
 * CAP_SYS_RESOURCE (a container's root) may only ask for multiples of 2 s. */
#define PRESSURE_WINDOW_USEC UINT64_C(2000000)

struct ad_pressure {
    int fd;
    sd_event_source *source;
};

static int on_pressure(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_daemon *daemon = userdata;
    if (revents & EPOLLERR) {
        act_log(LOG_ERR, "the memory pressure trigger ended; frozen generations are no longer "
                         "retired on pressure (reload to arm it again)");
        ad_pressure_close(daemon);
        return 0;
    }
    ad_host *coldest = ad_freeze_coldest(daemon);
    if (!coldest)
        return 0;
    if (daemon->metrics)
        met_metric_add(daemon->metrics->pressure_retirements, NULL, 1);
    char why[192];
    snprintf(why, sizeof(why),
             "the box's memory is under pressure (a stall of %" PRIu64
             " ms within 2 s, FreezeMemoryPressure=) and it was frozen longest ago",
             daemon->config.freeze_memory_pressure_usec / 1000);
    ad_freeze_retire(coldest, why);
    return 0;
}

void ad_pressure_close(ad_daemon *daemon)
{
    ad_pressure *p = daemon->pressure;
    if (!p)
        return;
    sd_event_source_disable_unref(p->source);
    if (p->fd >= 0)
        close(p->fd);
    free(p);
    daemon->pressure = NULL;
}

/* Opens path and writes trigger to it; the fd, or -errno. */
static int arm(const char *path, const char *trigger)
{
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* The trigger's text goes with its NUL, as the kernel's example has it. */
    if (write(fd, trigger, strlen(trigger) + 1) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

void ad_pressure_configure(ad_daemon *daemon)
{
    ad_pressure_close(daemon);
    uint64_t stall = daemon->config.freeze_memory_pressure_usec;
    if (!stall)
        return;
    ad_pressure *p = calloc(1, sizeof(*p));
    if (!p) {
        act_log(LOG_ERR, "out of memory; memory pressure is not watched");
        return;
    }
    char trigger[64];
    snprintf(trigger, sizeof(trigger), "some %" PRIu64 " %" PRIu64, stall, PRESSURE_WINDOW_USEC);
    /* Where /proc/pressure refuses triggers (some kernels do, to a process
     * without CAP_SYS_RESOURCE), the top of the cgroup2 hierarchy has the
     * same numbers: its pressure is the whole box's. */
    char top[PATH_MAX];
    snprintf(top, sizeof(top), "%s/memory.pressure", cg_root_v2_mount(daemon->cgroups));
    int first = arm(PRESSURE_FILE, trigger);
    p->fd = first >= 0 ? first : arm(top, trigger);
    if (p->fd < 0 ||
        sd_event_add_io(daemon->loop, &p->source, p->fd, EPOLLPRI, on_pressure, daemon) < 0) {
        act_log(LOG_WARNING,
                "cannot arm a memory pressure trigger (\"%s\") on %s (%s) nor on %s (%s); "
                "frozen generations are retired only by FrozenMaxSec= (a kernel with PSI, not "
                "booted with psi=0, has one)",
                trigger, PRESSURE_FILE, strerror(-first), top, strerror(p->fd < 0 ? -p->fd : EIO));
        if (p->fd >= 0)
            close(p->fd);
        free(p);
        return;
    }
    act_log(LOG_DEBUG, "memory pressure: trigger \"%s\" armed on %s", trigger,
            first >= 0 ? PRESSURE_FILE : top);
    daemon->pressure = p;
}
