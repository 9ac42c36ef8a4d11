/* What the soak prints: the faults made (and those --only left out), each invariant with
 * checked/held/broken, the clients' requests and why those that failed
 * failed, and the closing line; or, when an invariant broke, what broke,
 * the seed to replay it, the last faults and what was seen of the host
 * it broke on. */
#include "soak.h"

#include <inttypes.h>
#include <stdio.h>

static uint64_t total_checks(const soak *s)
{
    uint64_t total = 0;
    for (int i = 0; i < I__COUNT; i++)
        total += atomic_load(&s->tally[i].checked);
    return total;
}

static uint64_t total_broken(const soak *s)
{
    uint64_t total = 0;
    for (int i = 0; i < I__COUNT; i++)
        total += atomic_load(&s->tally[i].broken);
    return total;
}

void soak_report(const soak *s)
{
    printf("faults injected (seed %" PRIu64 "):\n", s->seed);
    for (int k = 0; k < F__COUNT; k++) {
        if (s->fault_off[k])
            printf("  %-36s left out (--only)\n", soak_fault_name((soak_fault_kind)k));
        else
            printf("  %-36s %u\n", soak_fault_name((soak_fault_kind)k), s->fault_counts[k]);
    }

    printf("invariants:%*s checked       held  broken\n", 36, "");
    for (int i = 0; i < I__COUNT; i++) {
        uint64_t checked = atomic_load(&s->tally[i].checked);
        uint64_t broken = atomic_load(&s->tally[i].broken);
        printf("  %-44s %10" PRIu64 " %10" PRIu64 " %6" PRIu64 "\n",
               soak_invariant_name((soak_invariant)i), checked, checked - broken, broken);
    }

    unsigned requests = 0, answered = 0, failed = 0;
    for (size_t i = 0; i < s->n_hosts; i++) {
        requests += s->hosts[i].requests;
        answered += s->hosts[i].answered;
        failed += s->hosts[i].failed;
    }
    printf("client requests: %u made, %u answered, %u failed\n", requests, answered, failed);
    for (size_t i = 0; i < s->n_hosts; i++)
        printf("  %-10s %-17s %5u made %5u failed\n", s->hosts[i].name,
               soak_host_kind_name(s->hosts[i].kind), s->hosts[i].requests, s->hosts[i].failed);
    printf("failed requests by the fault whose window they fell in:\n");
    if (s->failures_declared)
        printf("  %-36s %u\n", "the crash-looping host's own crashes", s->failures_declared);
    for (int k = 0; k < F__COUNT; k++)
        if (s->failures_by_kind[k])
            printf("  %-36s %u\n", soak_fault_name((soak_fault_kind)k), s->failures_by_kind[k]);
    printf("failed requests by what the client saw:\n");
    for (size_t i = 0; i < 8 && s->failure_reasons[i][0]; i++)
        printf("  %-36s %u\n", s->failure_reasons[i], s->failure_reason_counts[i]);
    if (s->stale_serving_claims)
        printf("noticed: %u time(s) a host parked everywhere had a claim in phase serving "
               "(its park's write-back had not landed yet: a store outage delays it, and a killed "
               "daemon's successor writes it)\n",
               s->stale_serving_claims);
    for (size_t b = 0; b < s->n_boxes; b++)
        if (atomic_load(&s->links[b].stuck))
            printf("noticed: the soak's request link to %s stopped reaching it at +%.3f s while "
                   "fresh sockets were answered (NNG 1.5.2's dialer gave up redialing); its "
                   "requests went on fresh sockets from then on\n",
                   fl_box_name(b), (double)(s->links[b].stuck_at_ms - s->start_ms) / 1000.0);
    printf("daemons with every host parked, at the start and at the end:\n");
    for (size_t b = 0; b < s->n_boxes; b++)
        printf("  %s: fds %ld -> %ld (at the end %ld store connections, %ld host "
               "directories), RSS %ld -> %ld KiB\n",
               fl_box_name(b), s->baseline_fds[b], s->end_fds[b], s->end_store_fds[b],
               s->end_host_dir_fds[b], s->baseline_rss_kib[b], s->end_rss_kib[b]);
    for (size_t b = 0; b < s->n_boxes; b++)
        if (s->end_host_dir_fds[b])
            printf("noticed: %s keeps %ld parked host(s)' directories open (%s): a path "
                   "that opens one and never closes it while the host is parked\n",
                   fl_box_name(b), s->end_host_dir_fds[b], s->end_host_dir_names[b] + 1);
    printf("soak: %u faults, %" PRIu64 " invariant checks, %" PRIu64 " broken\n", s->faults_made,
           total_checks(s), total_broken(s));
    fflush(stdout);
}

void soak_report_broken(soak *s)
{
    printf("soak: BROKEN: %s\n", s->broken_what);
    printf("soak: replay with --seed %" PRIu64 "\n", s->seed);
    printf("soak: the last faults:\n");
    soak_fault_log_print(s);
    if (s->broken_host)
        soak_history_print(s, s->broken_host);
    fflush(stdout);
    soak_report(s);
}
