/* Where a generation's stdout and stderr go: never the daemon's own stream,
 * so a host that closes its output, floods it or prints lines that look
 * like activatord's touches nothing but its own log.
 *
 * Under journald (the daemon's stderr is a journal stream and journald's
 * stdout socket is there), every process a generation starts (its build,
 * ExecReplicate=, its probes) gets a journal stream of its own, with the
 * host's name as SYSLOG_IDENTIFIER. The child connects it itself, after it
 * joined the leaf and switched to the host's user (cgroup/spawn_child.c),
 * so journald records what is true of the sender, from the kernel: _PID,
 * _UID, and _SYSTEMD_CGROUP ".../hosts/<host>/g-<N>", which is the
 * generation. The stream protocol carries no fields but the identifier,
 * so HOST= and GENERATION= cannot ride on it, and a stream opened by the
 * daemon would be recorded as activatord's (its _PID, _COMM and unit) with
 * every line of the tenant's; hence the child's own connection, as systemd
 * does for a service. `journalctl -t <host>` shows a host,
 * `journalctl _SYSTEMD_CGROUP=<leaf>` one generation; the daemon's own
 * lines about the generation carry HOST= and GENERATION=.
 *
 * Without journald, the output is a pipe the box's log keeper drains into
 * <state>/hosts/<host>/log/output.log (a directory of root's, out of the
 * host's reach), rotated by size (HostLogMaxSize=) into output.log.1
 * (generations/log_keeper_link.h): the host never holds the file, so it
 * cannot grow it, and the daemon's loop never writes a host's output.
 * Where there is no keeper, and as the fallback when a journal stream
 * cannot be connected, the host's processes append to that file
 * themselves, and the daemon rotates it (ad_host_log_rotate_if_needed). */
#pragma once

#include <stdint.h>

#include "activator/daemon/host/host.h"

typedef struct ad_host_log ad_host_log;

/* Whether the hosts' output goes through the log keeper on this box: not
 * under journald, whose streams the hosts' processes connect themselves. */
bool ad_host_output_kept(void);

/* Opens the host's log file for the leaf that writes to it (a marker line
 * "-- activatord: host web1, <whose> --" notes where its output starts,
 * whose being "generation 7 starts", say; NULL leaves it to
 * ad_host_log_mark) and watches its size. */
int ad_host_log_open(ad_host *host, const char *whose, ad_host_log **out, act_error *err);
/* Writes the marker line now. */
void ad_host_log_mark(const ad_host_log *log, const char *whose);
/* The fd to give as stdout and stderr. */
int ad_host_log_fd(const ad_host_log *log);
/* The journal stream's socket and header for the spawn, or NULL (no
 * journald): see cg_spawn_spec.journal_*. */
const char *ad_host_log_journal_socket(const ad_host_log *log);
const char *ad_host_log_journal_header(const ad_host_log *log);
void ad_host_log_free(ad_host_log *log);

/* For a file the host holds (no keeper): rotates it now if it is past
 * max_bytes: its last max_bytes (what
 * was written since, too) are copied to output.log.1 (replacing it) and
 * the file is emptied in place, so that every fd the host's processes hold
 * (O_APPEND) goes on writing at its new start. Only the tail is read, and
 * holes are skipped: a host that grows its output with ftruncate() (to a
 * terabyte, sparse) costs a rotation no more than max_bytes. Blocking; the
 * daemon runs it off its loop. Exposed for tests. */
int ad_host_log_rotate_if_needed(int log_dirfd, int fd, uint64_t max_bytes, act_error *err);
