/* The reason table: names and the policy per reason.
 *
 * | reason           | refusal | retry | blames build | why                                  |
 * |------------------|---------|-------|--------------|--------------------------------------|
 * | not_owner        | yes     | no    | no           | another box owns the host; a retry   |
 * |                  |         |       |              | would start against its claim         |
 * | wrong_phase      | yes     | no    | no           | only an operator or the owning op     |
 * |                  |         |       |              | moves the phase; waiting 1-8 s does   |
 * |                  |         |       |              | not                                   |
 * | unproven_stop    | yes     | no    | no           | only a proof of the old generation's  |
 * |                  |         |       |              | stop clears it (pl_host_report_proof)|
 * | claim_changed    | yes     | no    | no           | our admission is the fencing token;   |
 * |                  |         |       |              | once it moved, every later step of    |
 * |                  |         |       |              | this wake is fenced; a new wake must  |
 * |                  |         |       |              | read and admit again. (An admission   |
 * |                  |         |       |              | that lost to a write still letting    |
 * |                  |         |       |              | this box serve, a pin or a hold, is   |
 * |                  |         |       |              | made again inside `admit`, at most 3  |
 * |                  |         |       |              | times: nothing had started yet. At the|
 * |                  |         |       |              | gate, such a write keeps the waiting  |
 * |                  |         |       |              | clients for the next wake.)           |
 * | pin_mismatch     | yes     | no    | no           | the same link and pin resolve to the  |
 * |                  |         |       |              | same bytes on a retry                 |
 * | held_mismatch    | yes     | no    | no           | as pin_mismatch: the operator's hold  |
 * |                  |         |       |              | is what must change                   |
 * | digest_mismatch  | yes     | no    | no           | a tampered or half-staged build hashes|
 * |                  |         |       |              | the same on a retry; re-stage it      |
 * | not_staged       | yes     | no    | no           | staging is an operator action         |
 * | build_unavailable| yes     | no    | no           | the pin's build is not here and its   |
 * |                  |         |       |              | fetch failed or has no source; a      |
 * |                  |         |       |              | retry would fetch again, which the    |
 * |                  |         |       |              | next wake does                        |
 * | budget           | yes     | no    | no           | retrying would spend the budget that  |
 * |                  |         |       |              | just ran out; the next trigger asks   |
 * |                  |         |       |              | again                                 |
 * | release_pending  | yes     | no    | no           | the host was assigned to this box,    |
 * |                  |         |       |              | but the box that held it may still run|
 * |                  |         |       |              | it: no admission until it releases    |
 * | restore_failed   | no      | no    | no           | restore runs once per wake, before    |
 * |                  |         |       |              | the attempts; a second run could      |
 * |                  |         |       |              | restore over a half-written state     |
 * | store_error      | no      | no    | no           | the store's answer is unknown, so our |
 * |                  |         |       |              | admission may be fenced; a fresh wake |
 * |                  |         |       |              | re-reads and re-admits                |
 * | setup_failed     | no      | no    | no           | cgroup, file or socket setup fails    |
 * |                  |         |       |              | from the box's configuration or       |
 * |                  |         |       |              | resources, which 1-8 s do not change; |
 * |                  |         |       |              | retries would hide the cause          |
 * | exec_failed      | no      | yes   | yes          | clone3/exec can fail transiently      |
 * |                  |         |       |              | (EAGAIN, ENOMEM, pids limit)          |
 * | ready_timeout    | no      | yes   | yes          | a slow or unlucky start; the design's |
 * |                  |         |       |              | bounded retry with backoff exists for |
 * |                  |         |       |              | exactly this                          |
 * | crashed          | no      | yes   | yes          | as ready_timeout, for an exit before  |
 * |                  |         |       |              | ready                                 |
 * | publish_lost     | no      | no    | no           | after ready the outcome at the store  |
 * |                  |         |       |              | is uncertain: give up, never retry    |
 * | replicate_failed | no      | no    | no           | after ready: give up, as publish_lost |
 * |                  |         |       |              | (while serving, a required replica    |
 * |                  |         |       |              | that stays down: the host parks, as   |
 * |                  |         |       |              | for a crash); the replica is the      |
 * |                  |         |       |              | operator's tool, not the build        |
 * | unhealthy        | no      | no    | yes          | after publication: uncertain, give up |
 * |                  |         |       |              | (while serving: the host parks)       |
 * | watchdog         | no      | no    | yes          | only while serving, where nothing is  |
 * |                  |         |       |              | retried: the host parks, as for a     |
 * |                  |         |       |              | crash, and the failure-park backoff   |
 * |                  |         |       |              | paces the next wake                   |
 * | cancelled        | no      | no    | no           | somebody asked the wake to stop       |
 * | store_unavailable| yes     | no    | no           | the claim store is unreachable, so no |
 * |                  |         |       |              | admission can be fenced: no wake until|
 * |                  |         |       |              | it answers and the claims were listed |
 * |                  |         |       |              | again                                 |
 * | pin_failed       | yes     | no    | no           | the pinned build failed its swap and  |
 * |                  |         |       |              | no build that served can stand in: an |
 * |                  |         |       |              | operator unpins, promotes or swaps    |
 * | state_build_     | yes     | no    | no           | RestoreRequiresSameBuild=yes: the     |
 * |   mismatch       |         |       |              | state to restore is another build's;  |
 * |                  |         |       |              | an operator runs that build or drops  |
 * |                  |         |       |              | the requirement                       |
 * | fenced           | yes     | no    | no           | the box cannot prove its lease, and   |
 * |                  |         |       |              | another box may take a failover host  |
 * |                  |         |       |              | once it expired: only a renewal the   |
 * |                  |         |       |              | store acknowledges lifts it           |
 *
 * Whatever the table says, a refusal by the gate is never retried and never
 * recorded as a failed attempt, and nothing after ready is retried: those
 * two rules live in the pipeline, not here. */
#include "activator/pipeline/reason.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "common/cleanup.h"

typedef struct reason_policy {
    const char *name;
    bool refusal;
    bool retryable;
    bool blames_build;
} reason_policy;

static const reason_policy reason_table[] = {
    [PL_REASON_NONE] = {"ok", false, false, false},
    [PL_REASON_NOT_OWNER] = {"not_owner", true, false, false},
    [PL_REASON_WRONG_PHASE] = {"wrong_phase", true, false, false},
    [PL_REASON_UNPROVEN_STOP] = {"unproven_stop", true, false, false},
    [PL_REASON_CLAIM_CHANGED] = {"claim_changed", true, false, false},
    [PL_REASON_PIN_MISMATCH] = {"pin_mismatch", true, false, false},
    [PL_REASON_HELD_MISMATCH] = {"held_mismatch", true, false, false},
    [PL_REASON_DIGEST_MISMATCH] = {"digest_mismatch", true, false, false},
    [PL_REASON_RESTORE_FAILED] = {"restore_failed", false, false, false},
    [PL_REASON_EXEC_FAILED] = {"exec_failed", false, true, true},
    [PL_REASON_READY_TIMEOUT] = {"ready_timeout", false, true, true},
    [PL_REASON_PUBLISH_LOST] = {"publish_lost", false, false, false},
    [PL_REASON_BUDGET] = {"budget", true, false, false},
    [PL_REASON_STORE_ERROR] = {"store_error", false, false, false},
    [PL_REASON_NOT_STAGED] = {"not_staged", true, false, false},
    [PL_REASON_SETUP_FAILED] = {"setup_failed", false, false, false},
    [PL_REASON_CRASHED] = {"crashed", false, true, true},
    [PL_REASON_REPLICATE_FAILED] = {"replicate_failed", false, false, false},
    [PL_REASON_UNHEALTHY] = {"unhealthy", false, false, true},
    [PL_REASON_WATCHDOG] = {"watchdog", false, false, true},
    [PL_REASON_CANCELLED] = {"cancelled", false, false, false},
    [PL_REASON_STORE_UNAVAILABLE] = {"store_unavailable", true, false, false},
    [PL_REASON_RELEASE_PENDING] = {"release_pending", true, false, false},
    [PL_REASON_PIN_FAILED] = {"pin_failed", true, false, false},
    [PL_REASON_CHECKPOINTING] = {"checkpointing", true, false, false},
    [PL_REASON_BUILD_UNAVAILABLE] = {"build_unavailable", true, false, false},
    [PL_REASON_STATE_BUILD_MISMATCH] = {"state_build_mismatch", true, false, false},
    [PL_REASON_FENCED] = {"fenced", true, false, false},
};
/* pl_reason_from_string walks the whole table: every reason needs its row. */
static_assert(ARRAY_SIZE(reason_table) == _PL_REASON_MAX, "a reason without a policy row");

static const reason_policy *policy_of(pl_reason reason)
{
    if ((unsigned)reason >= ARRAY_SIZE(reason_table))
        return NULL;
    return &reason_table[reason];
}

const char *pl_reason_to_string(pl_reason reason)
{
    const reason_policy *policy = policy_of(reason);
    return policy ? policy->name : "unknown";
}

int pl_reason_from_string(const char *name)
{
    if (!name)
        return -EINVAL;
    for (size_t i = 0; i < ARRAY_SIZE(reason_table); i++)
        if (strcmp(reason_table[i].name, name) == 0)
            return (int)i;
    return -EINVAL;
}

bool pl_reason_is_refusal(pl_reason reason)
{
    const reason_policy *policy = policy_of(reason);
    return policy && policy->refusal;
}

bool pl_reason_is_retryable(pl_reason reason)
{
    const reason_policy *policy = policy_of(reason);
    return policy && policy->retryable;
}

bool pl_reason_blames_build(pl_reason reason)
{
    const reason_policy *policy = policy_of(reason);
    return policy && policy->blames_build;
}
