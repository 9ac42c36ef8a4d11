/* The fleet ops on claims and boxes (claims, boxes, claim.show, claim.wait,
 * claim.assign, claim.release, hold, unhold, unpin, move, move.abort,
 * box.drain, box.undrain), done
 * the same way by the daemon for a control request (asynchronously, on its
 * loop) and by
 * activatorctl --store against the store itself (synchronously, no daemon
 * needed): the decisions between the store calls, and the results and
 * refusals they reply, so both answer alike to the letter.
 *
 * An op runs as:
 *   claims        list claims                       -> ctrl_fleet_claims_result
 *   boxes         list boxes, list claims           -> ctrl_fleet_boxes_result
 *   claim.show    read                              -> ctrl_fleet_plan
 *   claim.wait    read [-> watch host -> read]      -> ctrl_fleet_wait_plan
 *   the edits     read -> ctrl_fleet_plan
 *   (and move,    [assign without force, move: list boxes for liveness
 *    move.abort)   -> ctrl_fleet_check_box]
 *                 CAS at the revision read          -> ctrl_fleet_written
 *                 [a CAS that lost to a write that left the op's decision as it
 *                  was: planned again on the claim now there, CAS again]
 * and any store call that fails                     -> ctrl_fleet_store_error.
 * boxes shows each lease's renewal and expiry (claims_box_list, on etcd a
 * request per box); the edits need only which boxes are live
 * (claims_box_list_live, one store request whatever the fleet's size).
 *
 * An edit's CAS can lose to a write that has nothing to do with it: the
 * daemon writes a host's claim back after its transitions (parked, serving,
 * an admission's holder and generation). Such a write changes nothing the
 * edit decided on (ctrl_fleet_same_decision), so the edit is planned again
 * on the claim now there and written again, as a wake's admission is, up to
 * CTRL_FLEET_WRITES_MAX writes in all; it is refused claim_changed only when
 * the claim now there changes what it decided (unpin of pin v2 while the
 * claim now pins v3, hold while another hold was written), or when it kept
 * losing.
 *
 * Results (the "result" of a success reply):
 *   claims      {"claims":[{"host","box","holder","op","phase","generation","session",
 *                "version","pin","held","stamp_usec","revision","handle"}]}
 *   boxes       {"boxes":[{"box","live","record","incarnation","version","started_usec",
 *                "control_url","events_url","lease_ttl_usec","refreshed_usec",
 *                "expires_usec","drained_usec","hosts"}]}
 *   box.drain, box.undrain  {"box","drained","drained_usec"}
 *   claim.show  {"host","claim":{...the claim...,"revision"}}
 *   the edits   {"host","executor","revision","changed","claim":{...}}
 *   move        as the edits, and "checkpoint_age_usec" after --force
 * box.drain and box.undrain put or remove the box's drain mark
 * (claims_box_drain): one store call, no claim read.
 * Refusal codes: no_claim, claim_changed, box_not_live, box_drained (an
 * assignment or a move to a drained box, --force or not), store_error; for a
 * move also move_refused (held, released, to the box that runs it, another
 * move in flight), unknown_box, source_live (--force while the source's
 * lease lives) and no_move (an abort with no move in flight); every refusal
 * of an existing claim names its revision and the box that holds it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "activator/control/request.h"
#include "claims/claims.h"

/* An edit's compare-and-swaps in all, the first included, before it gives
 * up on a claim that keeps changing under it. */
#define CTRL_FLEET_WRITES_MAX 8

/* The answer of a fleet op: a result, or a refusal. */
typedef struct ctrl_fleet_outcome {
    json_object *result; /* on success; the caller takes it */
    const char *code;    /* on a refusal: a stable code; NULL on success */
    act_error error;     /* on a refusal: the sentence */
} ctrl_fleet_outcome;

/* Whether op is one of the fleet ops above. */
bool ctrl_fleet_is_fleet_op(ctrl_op op);

/* Whether request's op must list the boxes before it writes: claim.assign
 * (the box's lease, unless --force, and its drain mark) and move. */
bool ctrl_fleet_lists_boxes(const ctrl_request *request);

/* A claim was read for request (found: 1, or 0 with current zeroed). Returns
 * 0 with *next, the claim to CAS at current->revision, or 1 when the op is
 * answered already (claim.show, an edit that changes nothing, a refusal)
 * with *out filled. */
int ctrl_fleet_plan(const ctrl_request *request, int found, const claim *current, claim *next,
                    ctrl_fleet_outcome *out);

/* claim.wait: how long the request may wait. */
unsigned ctrl_fleet_wait_sec(const ctrl_request *request);

/* claim.wait, with host's claim as read (found: 1, or 0 with current
 * zeroed) after waited_usec. Returns 1 with *out when that answers it: the
 * claim was written after request->revision ("changed": true), is gone
 * after it (no_claim), or it is the last look, once the wait ran out
 * ("changed": false). Returns 0 when the caller must watch host's claim
 * from *watch_from (0: from now) and read it again on its first change,
 * or at the end of the wait with last_look. */
int ctrl_fleet_wait_plan(const ctrl_request *request, int found, const claim *current,
                         uint64_t waited_usec, bool last_look, uint64_t *watch_from,
                         ctrl_fleet_outcome *out);

/* An assignment or a move, once the boxes are listed: 0 when the box
 * named is not drained and has a live lease (an assignment with --force
 * needs no lease; a move checks its source's too), else 1 with the
 * refusal in *out. */
int ctrl_fleet_check_box(const ctrl_request *request, const claim *current,
                         const claims_box *boxes, size_t n, ctrl_fleet_outcome *out);

/* Whether now, the claim a write put in place after request's op planned
 * on read, leaves what the op decided as it was, so that it may plan again
 * on now and write: for unpin, the pin it drops is still the pin (or there
 * is none any more); for hold and unhold, the hold is still the one read (or
 * already what the op makes it); for claim.assign and claim.release, the op
 * on the claim is the same (id, kind, executor, a move's boxes), and for an
 * assignment with force the holder whose release it takes as given is too.
 * The daemon's own write-backs (phase, holder, generation, handle, a pin's
 * recorded failure) never change a decision. A claim created or deleted
 * meanwhile does, and so does any write under move and move.abort, whose
 * steps are fenced by the claim they read. false with why (a phrase: "its
 * pin is now v3 (it was v2)") when the decision changed. */
bool ctrl_fleet_same_decision(const ctrl_request *request, const claim *read, const claim *now,
                              char *why, size_t size);

/* The CAS of next, planned on *read, answered (as claims_cas: 0,
 * CLAIMS_CHANGED with current, or a negative errno with err); writes is how
 * many CAS the op made, this one included. Returns 1 with *out answered, or
 * 0 when the CAS lost to a write that left the op's decision as it was and
 * fewer than CTRL_FLEET_WRITES_MAX were made: *read is then current and
 * *next the claim planned on it, to CAS at read->revision. */
int ctrl_fleet_written(const ctrl_request *request, int result, uint64_t new_revision,
                       unsigned writes, claim *read, claim *next, const claim *current,
                       const act_error *err, ctrl_fleet_outcome *out);

/* A store call failed with err. */
void ctrl_fleet_store_error(const ctrl_request *request, const act_error *err,
                            ctrl_fleet_outcome *out);

/* The version a claim's host runs, when its holder's build is known to the
 * caller (the daemon knows its own generations); NULL when not. */
typedef const char *(*ctrl_fleet_version_fn)(const claim *c, void *userdata);

/* The claims result; version may be NULL (only pins are known then). */
json_object *ctrl_fleet_claims_result(const claim *claims, size_t n, ctrl_fleet_version_fn version,
                                      void *userdata);

/* box.drain and box.undrain, once the store put or removed the mark:
 * {"box","drained","drained_usec"} (the mark's first stamp; a box drained
 * twice keeps it). */
json_object *ctrl_fleet_drain_result(const ctrl_request *request, const claims_box *record);

/* The boxes result: every record, and every box a claim names that has no
 * record (a box that died long ago, or never ran), dead. */
json_object *ctrl_fleet_boxes_result(const claims_box *boxes, size_t n, const claim *claims,
                                     size_t n_claims);
