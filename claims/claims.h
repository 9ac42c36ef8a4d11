/* Claims: the record that says which box may run a host, and the stores that
 * keep it behind compare-and-swap.
 *
 * A claim is the fencing between boxes: a box starts a host only after it has
 * won a compare-and-swap on the host's claim (an "admission"), and the store
 * revision that CAS returns is the token every later step re-checks. This
 * library knows nothing of cgroups or releases; it models the record, reads
 * and writes it as strict JSON, answers small pure questions about it, and
 * stores it in a directory (one machine) or in etcd v3 (a fleet).
 *
 * Return convention: a negative errno with an act_error filled on failure.
 * Two outcomes are results, not errors, because callers branch on them:
 *   - reads return 1 when the claim exists and 0 when it is absent;
 *   - cas and delete return CLAIMS_CHANGED when the expected revision no longer
 *     holds, and fill the claim that is there now.
 */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "common/error.h"

typedef struct sd_event sd_event;

/* A claim's JSON body is refused above this size: a record this small never
 * needs more, and a huge value is corruption or an attack on the reader. */
#define CLAIM_JSON_MAX (64 * 1024)

/* A compare-and-swap or delete found a different revision than expected. It is
 * a distinct code (not an I/O failure) so a caller can re-read and retry, or
 * give up, knowing the store itself is fine. */
#define CLAIMS_CHANGED (-ESTALE)

/* What the current op on a host is doing. The kind decides which phases are
 * legal and who may wake the host:
 *
 *   kind      phases                                          a wake by op.exec
 *   --------  ----------------------------------------------  -------------------------
 *   serving   assigned, starting, serving, frozen, parked,    allowed (not a probe)
 *             failed
 *   hold      holding                                         allowed (the pinned start
 *                                                             of a swap), not a probe
 *   move      draining, moving                                refused: the host is
 *                                                             leaving this box
 *   probe     probing                                         only a probe wake
 *
 * An empty op.exec means the host is released: no box may wake it, whatever
 * the kind. "failed" still allows a wake because the daemon's failure-park
 * backoff, not the claim, decides when to try again; moving a host off a
 * failing box is the operator's move op.
 *
 * What the serving phases say, written by the admitting box by compare-and-
 * swap while the claim still describes its admission (claim_same_admission),
 * so that a reader of the claim alone can route traffic:
 *
 *   phase     written                          holder.handle   route to
 *   --------  -------------------------------  --------------  ---------------------------
 *   assigned  by whoever assigns the host      not meaningful  the executor box, whose
 *                                                              sockets wake the host
 *   starting  by the admission of a wake       empty           the executor box (the wake
 *                                                              answers once it serves)
 *   serving   by publication, once the         set             holder.handle: generation
 *             generation is ready                              holder.generation serves
 *   frozen    after an idle freeze             set             holder.handle: generation
 *             (ParkMode=freeze): the generation                holder.generation, frozen,
 *             keeps its admission and runs                     which its box thaws on the
 *             again on the next connection                     next connection
 *   parked    after an idle or operator park,  empty           the executor box (its next
 *             or the generation exited 0                       connection wakes the host)
 *   failed    after a wake gave up, or the     empty           the executor box, which
 *             serving generation failed;                       tries again after its
 *             `failure` says why                               failure-park backoff
 *
 * holder.handle means something only in phases serving and frozen; a reader
 * ignores it in any other phase. During a swap the claim keeps naming the serving
 * generation N (phase serving, N's handle) while its admission, with a new
 * session, records N+1 in holder.starting_generation; N+1's publication then
 * names N+1 in one compare-and-swap, and a swap that fails names N again. */
typedef enum claim_op_kind {
    CLAIM_OP_SERVING = 0,
    CLAIM_OP_HOLD,
    CLAIM_OP_MOVE,
    CLAIM_OP_PROBE,
} claim_op_kind;

/* The phase of an assignment (an operator's, or a box claiming a host nobody
 * claimed): its op.exec names the box to run the host next, whoever held it
 * before (see claim_executor). */
#define CLAIM_PHASE_ASSIGNED "assigned"

/* Who holds the host now: written by the box at each admission, so a reader
 * can tell which daemon start (incarnation) made which generation. */
typedef struct claim_holder {
    char box[65];         /* box id of the admitting daemon; empty = no holder yet */
    char incarnation[65]; /* that daemon's random per-start id; two starts never share one */
    uint64_t session;     /* bumped by every admission; only grows, so a stale writer is seen */
    uint64_t generation;  /* number N of the generation the admission started (cgroup g-N),
                           * or during a swap the one that serves until N+1 is published */
    uint64_t stamp_usec;  /* wall clock of the admission, for people and for same-admission */
    char handle[256];     /* what the published generation serves on (e.g. a socket path);
                           * meaningful only in phase serving */
    /* N+1 while a swap's admission starts it beside the serving N; 0 otherwise.
     * Always above generation when set. */
    uint64_t starting_generation;
    /* Set (wall clock) by the holder once it has proven every generation of
     * its admission stopped after the claim named another box: the handover
     * to that box may go on. 0 while the holder may still run the host; the
     * next admission clears it. */
    uint64_t released_usec;
} claim_holder;

/* The operation in progress, written by whoever orchestrates the fleet and by
 * the admitting box for the serving phases. */
typedef struct claim_op {
    char id[65];        /* names the op so a probe or a swap can tell it is still current */
    claim_op_kind kind; /* see the table above */
    char phase[32];     /* one of the kind's phases; anything else is refused by the codec */
    char exec[65];      /* the box that may act; empty = released */
    /* A move's two boxes, set by whoever starts the move and kept through
     * its phases (move/draining, move/moving, probe/probing) so that every
     * step, and a rollback, knows both ends: from = the box the host
     * leaves, to = the box it goes to. Outside a move, from names the dead
     * box a takeover took the host from (op id CLAIM_OP_ID_TAKEOVER), kept
     * until the next op; else both are empty. Written to the JSON only when
     * set. */
    char from[65];
    char to[65];
} claim_op;

/* The op id of a takeover's assignment: its from names the dead box. */
#define CLAIM_OP_ID_TAKEOVER "takeover"

/* A registry reference of a build, with room for a registry name (253), a
 * repository (255) and "@sha256:" and 64 hex digits. */
#define CLAIM_SOURCE_SIZE 640

/* The build the next start must run exactly: a swap's choice. A failed swap
 * to this pin is recorded next to it so every box sees why it was abandoned.
 * A pin that failed is never run again by a cold wake: the wake runs the
 * fallback (the build that served when the pin failed) instead, or is
 * refused when there is none. A new swap writes a fresh pin, which clears
 * all of it; so do unpin and a promote of another version. */
typedef struct claim_pin {
    char version[65];          /* release version name */
    char digest[65];           /* SHA-256 of the build, 64 lowercase hex digits */
    char failure_reason[32];   /* short token ("not-ready", "digest"), empty = no failure */
    char failure_message[256]; /* the human sentence for that failure */
    /* Where and when it failed: the box whose swap failed, wall clock.
     * Written with the failure, only when known. */
    char failure_box[65];
    uint64_t failure_usec;
    /* The build that served when the pin's swap began (version and build
     * digest), which a cold wake runs instead of the pin once it failed;
     * empty when no build served. Written with the pin, so whoever records
     * its failure later keeps it; unused while the pin has not failed. */
    char fallback_version[65];
    char fallback_digest[65];
    /* Where a box that has not staged the fallback fetches it, as source is
     * for the pin: empty when the fallback came from no registry. Only
     * beside fallback_digest. */
    char fallback_source[CLAIM_SOURCE_SIZE];
    /* Where another box fetches the pinned build when it has not staged it:
     * the registry image it was staged from, resolved to its manifest's
     * digest ("docker://REGISTRY/REPO@sha256:<hex>"), as a tag can move.
     * Empty for a build staged from a directory or a local image layout,
     * which no other box can reach. */
    char source[CLAIM_SOURCE_SIZE];
} claim_pin;

/* Why the holder's last admission does not serve: written with phase
 * "failed" when a wake gave up or the serving generation failed, and cleared
 * by the next admission and by a publication. A move's rollback writes one
 * with phase and box set: that one is the op's, and stays through the
 * source's next admission and publication, until the next op (an
 * assignment, another move) replaces it. */
typedef struct claim_failure {
    char reason[32];    /* the refusal or failure code ("crashed", "ready_timeout"): a token
                         * of a-z, 0-9, '_' and '-' */
    char message[256];  /* the human sentence for it, cut short when longer */
    uint64_t attempts;  /* starts the admission made, at most CLAIM_FAILURE_ATTEMPTS_MAX; 0 when
                         * the generation failed after it served */
    uint64_t stamp_usec; /* wall clock of the failure */
    /* Where it failed, when that is not the holder's serving admission: a
     * move's rollback records the phase it failed in ("draining",
     * "moving", "probing") and the box that failed. Both empty otherwise. */
    char phase[32];
    char box[65];
} claim_failure;

/* An admission makes at most this many starts (MaxStarts). */
#define CLAIM_FAILURE_ATTEMPTS_MAX 5

/* The host's state directory as the claim names it: a checkpoint, which a
 * box restores before the first exec when its local copy differs. A move's
 * source writes it when it drains; the target verifies the archive against
 * sha256 before it restores. Only checkpoint is required in the JSON; the
 * rest is written when known (an ExecCheckpoint= hook may not know a size). */
typedef struct claim_state {
    char checkpoint[129];  /* the checkpoint's id; empty = no checkpoint named */
    char sha256[65];       /* of the archive, 64 lowercase hex digits; empty = not known */
    uint64_t size;         /* of the archive in bytes; 0 = not known */
    uint64_t generation;   /* the generation whose state it holds; 0 = not known */
    char box[65];          /* the box that wrote it; empty = not known */
    uint64_t stamp_usec;   /* wall clock when it was written; 0 = not known */
    /* The build that last ran against the state the checkpoint holds (its
     * version and build digest), so a restore on any box knows what wrote
     * it; empty = not known. build_digest only beside build_version. */
    char build_version[65];
    char build_digest[65];
} claim_state;

/* A failover policy names at most this many boxes. */
#define CLAIM_FAILOVER_BOXES_MAX 16

/* The failover policy of the host (Failover=yes, FailoverBoxes= in the
 * host file of the box that admitted it), copied into the claim at each
 * admission: host files are each box's own and may disagree, so fencing
 * and takeover act on this copy alone. Present (has_failover) only when
 * failover is on: the admitting box's lease fences it, and another box may
 * take it once that lease expired. boxes names the boxes that may; none
 * named: every box that configures the host. */
typedef struct claim_failover {
    size_t n_boxes;
    char boxes[CLAIM_FAILOVER_BOXES_MAX][65];
} claim_failover;

typedef struct claim {
    char host[65]; /* the store key; not in the JSON body, so a body cannot claim another host */
    claim_holder holder;
    claim_op op;
    bool has_pin;
    claim_pin pin;
    char held[65]; /* version an operator froze the host on; empty = not held */
    /* The held build's digest and registry source, as a pin's, when the
     * box that wrote the hold had it staged; empty otherwise. */
    char held_digest[65];
    char held_source[CLAIM_SOURCE_SIZE];
    claim_state state;
    bool has_failure;
    claim_failure failure;
    bool has_failover;
    claim_failover failover;
    /* The store revision this claim was read or written at: the fencing token.
     * Not part of the JSON body. 0 never names a stored claim, so a "current"
     * claim with revision 0 means "absent". */
    uint64_t revision;
} claim;

/* ---- model -------------------------------------------------------------- */

/* "serving", "hold", "move", "probe"; NULL for a value outside the enum. */
const char *claim_op_kind_to_string(claim_op_kind kind);
/* Parses a kind name; returns 0 or -EINVAL. */
int claim_op_kind_from_string(const char *name, claim_op_kind *out);
/* True when phase is one of kind's phases in the table above. */
bool claim_phase_is_valid(claim_op_kind kind, const char *phase);
/* True when a holder has been recorded (its box is set). */
bool claim_has_holder(const claim *c);
/* True when c's failover policy lets box take the host (failover on, and
 * box among its boxes or none named). */
bool claim_failover_allows(const claim *c, const char *box);
/* True when c is pinned and its pin failed: a cold wake must not run it. */
bool claim_pin_failed(const claim *c);
/* Checks every field against the rules the codec enforces (names, digest,
 * kind/phase) so a claim built in memory is refused before it is stored, with
 * the same kind of error a bad stored claim gets. */
int claim_validate(const claim *c, act_error *err);

/* The boxes a claim names, each once and in this order: holder.box, op.exec,
 * op.from, op.to (empty ones left out). They are the boxes the claim
 * concerns: each finds it in its own listing and watch (claims_list_box_at,
 * claims_watch_box_start). One claim names at most 4, so the boxes of two
 * claims (a write's before and after) fit in 8. */
#define CLAIM_BOXES_MAX 8
typedef struct claim_boxes {
    size_t n;
    char box[CLAIM_BOXES_MAX][65];
} claim_boxes;
void claim_named_boxes(const claim *c, claim_boxes *out);
/* True when box is one of the boxes c names. */
bool claim_names_box(const claim *c, const char *box);
/* Adds to into each box of more it does not hold yet. */
void claim_boxes_merge(claim_boxes *into, const claim_boxes *more);

/* ---- JSON codec ----------------------------------------------------------- */

/* Parses a claim body for host (the store key). Strict: wrong types, missing
 * required fields, unknown kind or phase, bad names and bodies over
 * CLAIM_JSON_MAX are refused with an error naming the host and the field.
 * out->revision is set to 0; the store fills it. Returns 0 or -EINVAL/-EFBIG. */
int claim_from_json(const char *host, const char *text, size_t len, claim *out, act_error *err);
/* Serializes every field except host and revision (which live in the key and
 * the store) into a malloc'd string; NULL only when out of memory. */
char *claim_to_json(const claim *c);

/* ---- predicates: pure, no I/O ---------------------------------------------- */

/* The box that may act on the host: the holder's box for a serving op whose
 * holder is set (the admitted box is the one serving), otherwise op.exec.
 * A serving op in phase "assigned" is an operator's assignment and names
 * its box in op.exec, which then wins over the holder (the box that ran the
 * host last). Returns "" when released. Never NULL for a non-NULL claim. */
const char *claim_executor(const claim *c);
/* True when box is the claim's executor (and the host is not released). */
bool claim_owned_by(const claim *c, const char *box);
/* May box wake the host now? probe says the wake is a probe. Refusals fill err
 * with why ("host web1: op move/draining does not allow a wake") and return
 * -EPERM; a claim that names another executor returns -EPERM too. */
int claim_phase_allows_wake(const claim *c, const char *box, bool probe, act_error *err);
/* A move's probe wake, made for op op_id: claim_phase_allows_wake for a
 * probe, and the claim's op must still be op_id (a probe never runs under
 * another op, nor under a move that was rolled back and started again). */
int claim_probe_allows_wake(const claim *c, const char *box, const char *op_id, act_error *err);
/* Verifies what a CAS admitted against what was observed before it: the
 * admitted holder carries our incarnation, its session grew, the
 * generation it starts (claim_admitted_generation) is not one the observed
 * claim named, and a move's probe is a probe of the same op. Anything else
 * means another writer got in between; -ESTALE. */
int claim_admission_ok(const claim *observed, const claim *admitted, const char *incarnation,
                       act_error *err);
/* True when two reads describe the same admission: same host, holder
 * incarnation, stamp, session, generation and starting generation, and the
 * same op (id, kind, phase, exec). The revision is deliberately not compared,
 * so a re-read that only saw an unrelated write still matches. */
bool claim_same_admission(const claim *a, const claim *b);
/* True when current is, field for field, the claim sent that a writer of
 * incarnation wrote: a compare-and-swap whose answer was lost (a member that
 * timed out after it committed) may have landed, and its retry on another
 * member then meets it. Equal content alone proves nothing, since two
 * writers can compute one claim from one read; what makes it this writer's
 * is the holder sent: its incarnation, stamp and session, which no other
 * writer makes. So sent must name incarnation as its holder's. */
bool claim_is_landed_write(const claim *sent, const claim *current, const char *incarnation);
/* Builds the claim a box writes to admit itself: a copy of observed with the
 * holder set to box/incarnation/stamp, session + 1, a generation above any the
 * claim names, op.exec = box, and phase "starting" (kind becomes serving; a
 * probe op, or a move in moving, becomes a probe in "probing" with the same
 * id and boxes, since the probe runs under its move's op). The
 * handle, the starting generation and the failure are cleared because the new
 * generation has published nothing yet. */
void claim_next_admission(const claim *observed, const char *box, const char *incarnation,
                          uint64_t stamp_usec, claim *next);
/* The admission of a swap, which starts N+1 beside the serving N: as
 * claim_next_admission (a new session, our holder, fencing everything N+1
 * does), except that the new generation goes to holder.starting_generation
 * and the generation, handle and phase "serving" stay N's, because N serves
 * until N+1 is published (a frozen N is thawed first, and stays named
 * as it is). An observed claim that does not say a generation serves
 * (claim_names_a_generation) gets claim_next_admission. */
void claim_next_swap_admission(const claim *observed, const char *box, const char *incarnation,
                               uint64_t stamp_usec, claim *next);
/* The generation an admission starts: holder.starting_generation during a
 * swap, holder.generation otherwise. */
uint64_t claim_admitted_generation(const claim *c);

/* What the admitting box writes afterwards, each a copy of current (which
 * must still describe its admission) changed as the phase table above says: */
/* the admitted generation published, serving on handle: phase serving, the
 * generation named, the starting generation and the failure cleared; */
void claim_next_published(const claim *current, const char *handle, claim *next);
/* generation (the one that serves on after a swap failed) named again as
 * serving on handle, the starting generation cleared; */
void claim_next_serving_again(const claim *current, uint64_t generation, const char *handle,
                              claim *next);
/* nothing runs after a park: phase parked, the handle and the starting
 * generation cleared; */
void claim_next_parked(const claim *current, claim *next);
/* the serving generation frozen (ParkMode=freeze): phase frozen, its
 * generation and handle kept, since the same admission serves again on the
 * next connection; a thaw writes claim_next_serving_again with them. */
void claim_next_frozen(const claim *current, claim *next);
/* True when c says a generation of its admission is there to route to:
 * phase serving or frozen of a serving op. */
bool claim_names_a_generation(const claim *c);

/* The handover between boxes. A claim that names another box as executor
 * (an operator's assignment) does not stop the holder's generation by
 * itself: the holder retires it with proof and then releases the claim. The
 * box named may admit itself only after that, so two boxes never run the
 * host at once; claim_phase_allows_wake refuses with -EAGAIN until then. */
/* True when c names box as executor while another box holds it unreleased:
 * after an assignment (a serving op), and in a move's moving phase (its
 * source releases with the CAS to moving; a forced move takes it as given). */
bool claim_release_pending(const claim *c, const char *box);
/* True when box holds c unreleased but no longer executes it: box must
 * release it once nothing of the host runs there. */
bool claim_release_due(const claim *c, const char *box);
/* current with the holder's release stamped (stamp_usec, or 1 for 0) and its
 * handle cleared: nothing of it runs any more. */
void claim_next_released(const claim *current, uint64_t stamp_usec, claim *next);
/* the admission did not serve, or its generation failed: phase failed with
 * failure, the handle and the starting generation cleared. */
void claim_next_failed(const claim *current, const claim_failure *failure, claim *next);

/* The pin's failure, as the build's own outcome: failed names the pin
 * (version, digest) and carries failure_reason and failure_message; box
 * and stamp_usec say where and when. Recorded on c only while c is pinned
 * to exactly that build and no failure is recorded yet (the first failure
 * stands; another pin is not ours to annotate). True when c changed. */
bool claim_record_pin_failure(claim *c, const claim_pin *failed, const char *box,
                              uint64_t stamp_usec);
/* A start of the pinned build (version, digest) served: whatever failure c
 * records of that pin is cleared, its fallback kept. True when c changed. */
bool claim_clear_pin_failure(claim *c, const char *version, const char *digest);

/* ---- stores --------------------------------------------------------------- */

typedef struct claim_store claim_store;

/* A claim store URL, the one grammar of Store= and claims_store_open:
 *
 *   dir:///ABSOLUTE/PATH
 *       the embedded store in a directory of this machine; the path has no
 *       "." or ".." component and no control character.
 *   etcd://HOST:PORT[,HOST:PORT...]/PREFIX[/PREFIX...]
 *       an etcd v3 cluster's JSON gateway: 1 to CLAIMS_URL_ENDPOINTS_MAX
 *       endpoints, tried in order on failure, each a DNS name, an IPv4
 *       address or an [IPv6] address with a port 1-65535; then the key
 *       prefix the claims live under, one or more names (A-Z a-z 0-9 . _ -,
 *       not starting with '.') separated by '/', so it cannot reach keys
 *       outside it. Trailing slashes are dropped. */
typedef enum claims_url_kind {
    CLAIMS_URL_DIR = 0,
    CLAIMS_URL_ETCD,
} claims_url_kind;

#define CLAIMS_URL_ENDPOINTS_MAX 16
/* "HOST:PORT" with the longest DNS name (253) and port, and the NUL. */
#define CLAIMS_URL_ENDPOINT_SIZE 260
/* The key prefix with its leading '/', and the NUL. */
#define CLAIMS_URL_PREFIX_SIZE 257

typedef struct claims_url {
    claims_url_kind kind;
    char path[PATH_MAX]; /* dir: the absolute directory, as written */
    char endpoints[CLAIMS_URL_ENDPOINTS_MAX][CLAIMS_URL_ENDPOINT_SIZE]; /* etcd: "HOST:PORT" */
    size_t n_endpoints;
    char prefix[CLAIMS_URL_PREFIX_SIZE]; /* etcd: "/activator", no trailing '/' */
} claims_url;

/* Parses and checks text completely into *out (zeroed on failure). Errors
 * (-EINVAL, -ENAMETOOLONG) say what is wrong with the URL, with the URL shown
 * escaped, and end with what to write "(write ...)". err may be NULL. */
int claims_parse_url(const char *text, claims_url *out, act_error *err);

typedef struct claims_store_options {
    int timeout_ms;         /* per call, across all endpoint attempts; 0 = 5000 */
    const char *ca_file;    /* etcd: CA bundle; setting it (or cert_file) switches to https */
    const char *cert_file;  /* etcd: client certificate (PEM) */
    const char *key_file;   /* etcd: client key (PEM) */
    const char *username;   /* etcd: user for /v3/auth/authenticate; NULL = no auth */
    const char *password;
    /* etcd: a watch stream silent this long is checked: unless the store
     * answers that nothing was written since the watch last heard from it,
     * the stream is taken for dead and the watch ends with an error. The
     * watch asks etcd for progress notifications, which reset the silence.
     * 0 = 30000. */
    int watch_timeout_ms;
    /* etcd: a list reads at most this many keys per request, every page at
     * the revision of the first, so that no answer grows with the fleet and
     * the pages together are the store at one revision. 0 = 256. */
    int list_page_keys;
    /* For tests: told after each page of a list but the last, on the loop,
     * so that a test can write between pages. NULL = not told. */
    void (*between_pages)(void *userdata);
    void *between_pages_userdata;
    /* For tests: told on the loop just before a silent watch asks the store
     * whether it missed a write, so that a test can write in that window.
     * NULL = not told. */
    void (*before_silence_probe)(void *userdata);
    void *before_silence_probe_userdata;
} claims_store_options;

/* Opens the store a URL names (see claims_parse_url); a dir store's directory
 * is created if missing. options may be NULL. Opening an etcd store does not
 * contact it; the first call does. */
int claims_store_open(const char *url, const claims_store_options *options, claim_store **out,
                      act_error *err);
/* Ends everything in flight without calling its callbacks (etcd calls are
 * cancelled; a dir store's calls already handed to its workers run to their
 * end), stops watches and frees the store. Do not call it from one of the
 * store's own callbacks. */
void claims_store_free(claim_store *store);
DEFINE_TRIVIAL_CLEANUP_FUNC(claim_store *, claims_store_free)
/* "dir" or "etcd", for messages. */
const char *claims_store_kind(const claim_store *store);

/* Told on the loop when an asynchronous read, cas, delete or list completes,
 * just before its callback: which ("read", "cas", "delete", "list"), how long
 * it took from the call (CLOCK_MONOTONIC, in microseconds) and its result as
 * the callback gets it. For metrics; it must not call the store. NULL stops
 * it. Calls made before it was set are not told. */
typedef void (*claims_observe_fn)(const char *operation, uint64_t duration_usec, int result,
                                  void *userdata);
void claims_store_set_observer(claim_store *store, claims_observe_fn fn, void *userdata);

/* What a store's calls cost on the wire, by operation: for etcd, each
 * gateway path ("kv/range", "kv/txn", "watch", "lease/keepalive", ...):
 * the requests sent (every attempt on every endpoint) and the bytes of
 * their bodies and of the answers (a watch's stream included). */
typedef struct claims_store_traffic {
    char operation[32];
    uint64_t requests;
    uint64_t bytes_sent;
    uint64_t bytes_received;
} claims_store_traffic;
/* Copies up to max of them into out and returns how many there are; 0 for
 * a dir store, whose calls are local files. */
size_t claims_store_traffic_get(const claim_store *store, claims_store_traffic *out, size_t max);

/* Synchronous calls, for the CLI and tests. They run the store's private
 * event loop (never the attached one) until the call completes or times out. */

/* Returns 1 and fills out (with its revision) when the claim exists, 0 when it
 * is absent, negative on failure (a malformed stored claim included). */
int claims_read(claim_store *store, const char *host, claim *out, act_error *err);
/* Writes c as host's claim if its revision is still expected_revision (0 =
 * the claim must not exist). Returns 0 and sets *new_revision, or
 * CLAIMS_CHANGED and fills current_on_conflict (revision 0 = now absent;
 * may be NULL), or a negative errno. */
int claims_cas(claim_store *store, const char *host, uint64_t expected_revision, const claim *c,
               uint64_t *new_revision, claim *current_on_conflict, act_error *err);
/* A takeover's write: claims_cas, landing only while dead_box (the box
 * whose host it takes) has no live record, in the same atomic step (etcd:
 * the txn also compares that the box's record key is absent, which it is
 * only once its lease expired, so a box that came back under a new lease is
 * never taken from; dir: the record is read under the store's lock). A box
 * found live: CLAIMS_BOX_LIVE, nothing written. */
#define CLAIMS_BOX_LIVE (-EALREADY)
int claims_cas_unless_live(claim_store *store, const char *host, uint64_t expected_revision,
                           const claim *c, const char *dead_box, uint64_t *new_revision,
                           claim *current_on_conflict, act_error *err);
/* Deletes host's claim if its revision is still expected_revision. Returns 0,
 * CLAIMS_CHANGED (current_on_conflict filled, may be NULL) or a negative
 * errno. Deleting an absent claim is CLAIMS_CHANGED with revision 0. */
int claims_delete(claim_store *store, const char *host, uint64_t expected_revision,
                  claim *current_on_conflict, act_error *err);

/* Told about each stored claim that list skipped because it does not parse
 * (host is the key as it can be shown when the key names no host). It runs
 * while the list is taken (on the dir store, under its lock): it must not
 * call the store. */
typedef void (*claims_problem_fn)(const char *host, const act_error *problem, void *userdata);
/* Every well-formed claim, sorted by host, in a malloc'd array. Malformed ones
 * are skipped and each is reported to problem (or logged when problem is
 * NULL), so one bad record never hides the rest. */
int claims_list(claim_store *store, claim **out, size_t *n_out, claims_problem_fn problem,
                void *userdata, act_error *err);
/* The same, and the store revision the whole list was taken at: every claim
 * in it is as it stood at that revision (etcd: one range and its header
 * revision; dir: read under the store lock), so a watch from revision + 1
 * misses nothing that came after. */
int claims_list_at(claim_store *store, claim **out, size_t *n_out, uint64_t *revision,
                   claims_problem_fn problem, void *userdata, act_error *err);

/* ---- a box's own claims -------------------------------------------------------
 *
 * A box reads and watches only the claims that concern it, so what it pays
 * grows with its own hosts, not with the fleet. The store keeps an index per
 * box, written with the claim in the same atomic step: every write of a
 * claim updates the entry of each box the claim names before or after the
 * write (claim_named_boxes). So a box's index holds
 *   - every claim that names the box, as it is now (same revision), and
 *   - for a host whose claim named the box once and no longer does: the
 *     claim as the write that stopped naming the box left it (it names other
 *     boxes, or none), or the claim's delete; a later write that names the
 *     box again replaces it.
 * A claim in a box's listing or watch that does not name the box says only
 * that the host is not the box's any more; to act on such a host, read its
 * claim. Layout and why the fencing still holds: docs/claim-protocol.md. */

/* The store layout this code reads and writes. Each store keeps a marker
 * (etcd: key "<prefix>.layout"; dir: file .layout), written by the first
 * store that checks it. */
#define CLAIMS_LAYOUT 2
/* Writes the marker when there is none; refuses (-EPROTONOSUPPORT, err
 * naming the store, the layout found and what to do) a store whose marker
 * says another layout or is not one. A daemon checks it before it lists. */
int claims_store_check_layout(claim_store *store, act_error *err);

/* The claims box's index holds (see above), sorted by host, as
 * claims_list_at: at one store revision. A deleted claim is left out. */
int claims_list_box_at(claim_store *store, const char *box, claim **out, size_t *n_out,
                       uint64_t *revision, claims_problem_fn problem, void *userdata,
                       act_error *err);

/* One change seen by a watch, in store revision order. */
typedef enum claim_change_kind {
    CLAIM_CHANGE_PUT = 0, /* claim holds the new value */
    CLAIM_CHANGE_DELETE,  /* the host's claim was deleted; claim.host is set */
    CLAIM_CHANGE_MALFORMED, /* a value was written that does not parse; problem says why */
} claim_change_kind;

typedef struct claim_change {
    claim_change_kind kind;
    uint64_t revision;
    claim claim;
    act_error problem;
} claim_change;

/* Collects changes with revision >= from_revision until want of them arrived
 * or timeout_ms passed (then it returns what it has; 0 changes is not an
 * error). For tests and "activatorctl watch"-style tools. */
int claims_watch_collect(claim_store *store, uint64_t from_revision, size_t want, int timeout_ms,
                         claim_change **out, size_t *n_out, act_error *err);

/* Asynchronous calls, for the daemon's sd-event loop. The store must be
 * attached to that loop first. Callbacks run on the loop, never inside the
 * calling function, and may start further calls. The err passed to a callback
 * is only valid during it. */

/* Attaches the store to the caller's loop (it takes a reference). The etcd
 * backend drives libcurl's multi interface from it; the dir backend completes
 * calls through deferred sources and watches through inotify. */
int claims_store_attach_event(claim_store *store, sd_event *event, act_error *err);

typedef void (*claims_read_fn)(claim_store *store, int result, const claim *c,
                               const act_error *err, void *userdata);
typedef void (*claims_cas_fn)(claim_store *store, int result, uint64_t new_revision,
                              const claim *current, const act_error *err, void *userdata);

/* result 0 with every well-formed claim sorted by host (claims is malloc'd
 * and handed over, even when n is 0) and the store revision of the list, as
 * claims_list_at; negative with err. Each malformed claim is told to problem
 * (or logged when problem is NULL) on the loop before fn runs. */
typedef void (*claims_list_fn)(claim_store *store, int result, claim *claims, size_t n,
                               uint64_t revision, const act_error *err, void *userdata);

/* result as claims_read: 1 found (c set), 0 absent, negative with err. */
int claims_read_async(claim_store *store, const char *host, claims_read_fn fn, void *userdata,
                      act_error *err);
/* result as claims_cas; current is set on CLAIMS_CHANGED (revision 0 = absent). */
int claims_cas_async(claim_store *store, const char *host, uint64_t expected_revision,
                     const claim *c, claims_cas_fn fn, void *userdata, act_error *err);
int claims_cas_unless_live_async(claim_store *store, const char *host, uint64_t expected_revision,
                                 const claim *c, const char *dead_box, claims_cas_fn fn,
                                 void *userdata, act_error *err);
/* result as claims_delete; new_revision is the delete's revision. */
int claims_delete_async(claim_store *store, const char *host, uint64_t expected_revision,
                        claims_cas_fn fn, void *userdata, act_error *err);
int claims_list_async(claim_store *store, claims_problem_fn problem, void *problem_userdata,
                      claims_list_fn fn, void *userdata, act_error *err);
/* Removes box's index entry of host, if it is still the entry written at
 * revision (the revision of the claim it copies), for a box that has seen
 * that the claim no longer names it: the entry told it so, and keeping it
 * would grow the box's listings with every host that ever left it. A
 * write that named the box again since has rewritten the entry, so the
 * compare keeps it (CLAIMS_CHANGED). The dir store keeps its index a
 * superset (see "a box's own claims"): 0 at once, nothing removed. fn
 * gets 0, CLAIMS_CHANGED, or a store error; it may be NULL. */
int claims_index_tidy_async(claim_store *store, const char *box, const char *host,
                            uint64_t revision, claims_cas_fn fn, void *userdata, act_error *err);
/* The same, synchronously, for tests and the CLI. */
int claims_index_tidy(claim_store *store, const char *box, const char *host, uint64_t revision,
                      act_error *err);
/* claims_list_box_at on the loop. */
int claims_list_box_async(claim_store *store, const char *box, claims_problem_fn problem,
                          void *problem_userdata, claims_list_fn fn, void *userdata,
                          act_error *err);

typedef struct claims_watch claims_watch;
/* Called for each change in revision order, or once with error < 0 when the
 * watch ended (server gone, a silent stream, history compacted, too many
 * changes queued: err says which). After an error the watch is dead: free it,
 * list the claims again (claims_list_async) and watch from that revision + 1.
 * -ENODATA says the history was compacted. A key or value that is not a
 * claim is a CLAIM_CHANGE_MALFORMED change, never another host's change. */
typedef void (*claims_watch_fn)(claims_watch *watch, const claim_change *change, int error,
                                const act_error *err, void *userdata);
/* Starts a long-lived watch on the attached loop: etcd's streaming /v3/watch,
 * or inotify on the dir store's change journal. */
int claims_watch_start(claim_store *store, uint64_t from_revision, claims_watch_fn fn,
                       void *userdata, claims_watch **out, act_error *err);
/* The same for box's index (see "a box's own claims"): a write that
 * concerns box is a put of the claim as the index holds it, a delete of a
 * claim that named box a delete. */
int claims_watch_box_start(claim_store *store, const char *box, uint64_t from_revision,
                           claims_watch_fn fn, void *userdata, claims_watch **out, act_error *err);
/* The same for host's claim alone: its puts and its delete. For a caller
 * that waits for one claim to change (claim.wait), at the cost of one
 * watch on the store; from_revision 0 = from now. */
int claims_watch_host_start(claim_store *store, const char *host, uint64_t from_revision,
                            claims_watch_fn fn, void *userdata, claims_watch **out, act_error *err);
/* The same, synchronously (for the CLI): waits up to timeout_ms for the
 * first change of host's claim from from_revision on. 1 with *out, 0 when
 * none came in time, or a store error. */
int claims_watch_host_next(claim_store *store, const char *host, uint64_t from_revision,
                           int timeout_ms, claim_change *out, act_error *err);
/* Stops and frees a watch; safe from inside its own callback. */
void claims_watch_free(claims_watch *watch);
DEFINE_TRIVIAL_CLEANUP_FUNC(claims_watch *, claims_watch_free)

/* ---- edits: what an operator's command does to a claim (pure) -------------- */

typedef enum claim_edit_kind {
    CLAIM_EDIT_ASSIGN,  /* a fresh serving op "assigned" that names box */
    CLAIM_EDIT_RELEASE, /* no executor: no box may wake the host */
    CLAIM_EDIT_HOLD,    /* held = version */
    CLAIM_EDIT_UNHOLD,  /* held cleared */
    CLAIM_EDIT_UNPIN,   /* the pin (and its recorded failure) dropped */
} claim_edit_kind;

typedef struct claim_edit {
    claim_edit_kind kind;
    char box[65];     /* assign: the box to run the host */
    char version[65]; /* hold: the version to freeze it on */
    /* hold: that build's digest and registry source, when known ("" when
     * not): written beside held (claim.held_digest, held_source). */
    char digest[65];
    char source[CLAIM_SOURCE_SIZE];
    /* assign: the operator says the box that holds the host runs nothing of
     * it any more (that box is gone): its release is taken as given, stamped
     * stamp_usec, and box may admit itself at once (claim_release_pending). */
    bool holder_gone;
    uint64_t stamp_usec;
    /* assign: the dead box a takeover takes the host from (with
     * holder_gone), or "": the op is then id "takeover" with from = that
     * box, which stays through the new box's admission until the next op,
     * so that the claim says where the host came from. */
    char taken_from[65];
} claim_edit;

/* Builds in *next the claim that edit makes of current, host's claim as read
 * (revision 0: host has no claim). Only an assignment creates a claim; the
 * others refuse an absent one with -ENOENT, err naming the host and what to
 * do. Returns 1 when the claim already is what the edit asks (nothing to
 * write; *next is current), else 0. The holder's box, incarnation, session
 * and generation are never touched: they say who ran the host last, and its
 * session only grows. An assignment or a release starts a fresh op and so
 * ends the holder's admission: they clear what only that admission had,
 * holder.starting_generation and the failure record; an assignment with
 * holder_gone also writes the holder's release, which clears its handle
 * (claim_next_released). */
int claim_apply_edit(const char *host, const claim *current, const claim_edit *edit, claim *next,
                     act_error *err);

/* Where a claim stands, for a refusal to name: "revision 57, box b2" (its
 * executor), "revision 57, box b2 (last run by b1)" when the holder is
 * another box, "revision 57, released" or "no claim" (revision 0). */
void claim_describe_owner(const claim *c, char *out, size_t size);

/* ---- moves: a host changes boxes with its state (claim_move.c, pure) -------- *
 *
 *   phase           written by                    who may act
 *   --------------  ----------------------------  ------------------------------------
 *   move/draining   the orchestrator (move)       op.from (exec): retire, checkpoint
 *   move/moving     the source, or move --force   op.to (exec): restore, probe wake
 *   probe/probing   the target's admission        op.to: the probe, under the op id
 *   serving/serving the target's publication      the target serves: the move is done
 *   serving/assigned a rollback (failure.phase)   op.from wakes again, once the target
 *                                                 released what it admitted
 */

/* The phase a move's op is in, for messages: "draining", "moving",
 * "probing"; NULL when c is not in a move. */
const char *claim_move_phase(const claim *c);
/* Starts a move of c (host's claim as read) to box to, under a new op id.
 * Refusals (-EPERM, err saying why and where the host serves now): no
 * claim (-ENOENT), released, held, to is the executor, a move or probe of
 * another op in flight. A move in flight to the same box is the same
 * move: returns 1 (nothing to write; re-running the command resumes the
 * wait). force: the source cannot drain (its box is gone), so the move
 * starts at moving from the checkpoint the claim names, the source's
 * release taken as given (stamp_usec). Returns 0 with *next to CAS. */
int claim_move_start(const char *host, const claim *current, const char *to, const char *op_id,
                     bool force, uint64_t stamp_usec, claim *next, act_error *err);
/* The source drained: move/draining becomes move/moving, exec = op.to,
 * state = written (when it names a checkpoint; a stateless host keeps no
 * state), and the holder's release stamped, since nothing runs. */
void claim_move_next_moving(const claim *current, const claim_state *written,
                            uint64_t stamp_usec, claim *next);
/* A move rolled back: serving/assigned, exec = op.from, from/to cleared,
 * and failure = {reason, message, phase (the move's phase it failed in),
 * box (where it failed)}. If the target admitted itself, it holds the
 * claim unreleased, so the source waits for its release
 * (claim_release_pending). Returns -EINVAL when current is not in a move. */
int claim_move_rollback(const claim *current, const char *reason, const char *message,
                        const char *box, uint64_t stamp_usec, claim *next, act_error *err);

/* ---- box records: which daemons are alive ---------------------------------- */

/* Every daemon keeps a record of itself in the store, beside the claims and
 * outside their key range, so a claim list or watch never reads one, under
 * a lease of lease_ttl_usec that the daemon renews before it runs out:
 *   etcd: key "<prefix>.boxes/<box>" ('.' sorts before '/', so it is not in
 *         the claims' range "<prefix>/".."<prefix>0"), put with an etcd
 *         lease; etcd deletes the key when the lease expires or is revoked;
 *   dir:  <dir>/.boxes/<box>.json (the claim listing reads only
 *         "<host>.json" files in <dir>, and a host name never starts with
 *         '.'), rewritten with the time it expires; a record past that time
 *         stays on disk, dead.
 * A box whose lease expired is known dead: on etcd its record is gone, on
 * dir it is listed with live false.
 *
 * Two listings. A decision that needs only which boxes are live (claim
 * assign, move: the fleet's edits) lists for liveness: one store request
 * however many boxes the fleet has (etcd: one range; a record there is a
 * live lease, since etcd deletes the key with it). Only etcd's lease knows
 * when it was renewed and when it runs out, and asking it is one more
 * request per box, so only the full listing does that, for an operator's
 * display (activatorctl boxes). A liveness listing on etcd leaves
 * refreshed_usec and expires_usec 0 (unknown): the record says its
 * lease_ttl_usec, and since the lease was alive at the listing, it was
 * renewed less than that before it and lapses less than that after it. */

/* A daemon's control or events URL in a record, and its NUL. */
#define CLAIMS_BOX_URL_SIZE 256

typedef struct claims_box {
    char box[65];         /* the box id (Box=): the key */
    char incarnation[65]; /* the daemon start that wrote it */
    uint64_t started_usec; /* wall clock of that start */
    char version[65];      /* activatord's version */
    char control_url[CLAIMS_BOX_URL_SIZE]; /* where it takes control requests from other
                                              machines (ControlListen=); "" when it does not */
    char events_url[CLAIMS_BOX_URL_SIZE];  /* where it publishes events to other machines;
                                              "" when only locally */
    uint64_t lease_ttl_usec; /* the lease's length; etcd counts it in whole seconds */
    /* Set by the store on put, keepalive and list; ignored when writing. */
    uint64_t lease_id;       /* etcd's lease; 0 on dir */
    bool live;               /* the lease has not expired */
    uint64_t refreshed_usec; /* wall clock of the last renewal; 0 when unknown */
    uint64_t expires_usec;   /* wall clock at which the lease lapses unless renewed; 0 when
                              * unknown (an etcd liveness listing) */
    /* Set by a listing from the box's drain mark (claims_box_drain): the
     * wall clock at which an operator drained the box; 0 = not drained. A
     * mark outlives the lease, so a drained box that is down is listed
     * too, not live, with only box and drained_usec set. */
    uint64_t drained_usec;
} claims_box;

/* A keepalive found the lease gone (expired, revoked, the store lost it, or
 * another start of the same box replaced the record): put the record again. */
#define CLAIMS_LEASE_LOST (-ENOENT)

/* Checks a record's fields the way the store checks a stored one. */
int claims_box_validate(const claims_box *record, act_error *err);
/* The record named box among n, or NULL. */
const claims_box *claims_box_find(const claims_box *boxes, size_t n, const char *box);
/* Compare for qsort by box. */
int claims_box_compare(const void *a, const void *b);

/* Synchronous, for activatorctl and tests (see the synchronous calls above).
 * put writes record under a new lease and fills *out with it as stored
 * (lease_id, refreshed, expires): keepalive and remove take that. keepalive
 * renews the lease of record and fills *out (may be NULL), or returns
 * CLAIMS_LEASE_LOST. remove deletes record and revokes its lease; a record
 * already gone is not an error. list gives every record the store has,
 * sorted by box, in a malloc'd array, with each lease's refreshed and
 * expires time (on etcd a request per box: for display only); one that
 * does not parse is logged and skipped. list_live is the same list from one
 * store request, for liveness (see above): what a decision uses. */
int claims_box_put(claim_store *store, const claims_box *record, claims_box *out, act_error *err);
int claims_box_keepalive(claim_store *store, const claims_box *record, claims_box *out,
                         act_error *err);
int claims_box_remove(claim_store *store, const claims_box *record, act_error *err);
int claims_box_list(claim_store *store, claims_box **out, size_t *n_out, act_error *err);
int claims_box_list_live(claim_store *store, claims_box **out, size_t *n_out, act_error *err);

/* Drain marks: an operator's word that box takes no new host (no
 * assignment, no move to it, no host nobody claimed), kept apart from the
 * record and under no lease, so neither a restart of the box nor its death
 * forgets it. etcd: key "<prefix>.drain/<box>"; dir: <dir>/.drain/<box>.json;
 * the value {"box":..,"drained_usec":..}. Both box listings report it
 * (claims_box.drained_usec) in the same store request. drain puts the mark
 * (a box already drained keeps its first stamp, which *drained_usec, when
 * not NULL, gets); undrain removes it (a box
 * not drained is not an error). Neither needs the box to be live. */
int claims_box_drain(claim_store *store, const char *box, uint64_t stamp_usec,
                     uint64_t *drained_usec, act_error *err);
int claims_box_undrain(claim_store *store, const char *box, act_error *err);

/* Asynchronous, on the attached loop (see the asynchronous calls above).
 * record in a callback is the record as stored (put, keepalive), valid
 * during the callback only. */
typedef void (*claims_box_fn)(claim_store *store, int result, const claims_box *record,
                              const act_error *err, void *userdata);
typedef void (*claims_boxes_fn)(claim_store *store, int result, const claims_box *boxes,
                                size_t n, const act_error *err, void *userdata);
int claims_box_put_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                         void *userdata, act_error *err);
int claims_box_keepalive_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                               void *userdata, act_error *err);
int claims_box_remove_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                            void *userdata, act_error *err);
int claims_box_list_async(claim_store *store, claims_boxes_fn fn, void *userdata,
                          act_error *err);
int claims_box_list_live_async(claim_store *store, claims_boxes_fn fn, void *userdata,
                               act_error *err);
/* claims_box_drain and claims_box_undrain on the loop; record in fn names
 * the box and its drained_usec (0 after an undrain). */
int claims_box_drain_async(claim_store *store, const char *box, uint64_t stamp_usec,
                           claims_box_fn fn, void *userdata, act_error *err);
int claims_box_undrain_async(claim_store *store, const char *box, claims_box_fn fn, void *userdata,
                             act_error *err);
