/* Unit tests of the claim model: the strict codec and the pure predicates. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "claims/claims.h"

static const char *digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static claim full_claim(void)
{
    claim c = {0};
    snprintf(c.host, sizeof(c.host), "web1");
    snprintf(c.holder.box, sizeof(c.holder.box), "b1");
    snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "inc-a");
    c.holder.session = 7;
    c.holder.generation = 12;
    c.holder.stamp_usec = 1700000000123456ULL;
    snprintf(c.holder.handle, sizeof(c.holder.handle), "/run/activator/web1/g-12.sock \"q\"");
    snprintf(c.op.id, sizeof(c.op.id), "op-3");
    c.op.kind = CLAIM_OP_SERVING;
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.op.exec, sizeof(c.op.exec), "b1");
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "v2");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", digest);
    snprintf(c.pin.failure_reason, sizeof(c.pin.failure_reason), "not-ready");
    snprintf(c.pin.failure_message, sizeof(c.pin.failure_message), "v2 never said READY=1");
    snprintf(c.pin.failure_box, sizeof(c.pin.failure_box), "b1");
    c.pin.failure_usec = 1700000000222222ULL;
    snprintf(c.pin.fallback_version, sizeof(c.pin.fallback_version), "v1");
    snprintf(c.pin.fallback_digest, sizeof(c.pin.fallback_digest), "%s", digest);
    snprintf(c.pin.source, sizeof(c.pin.source),
             "docker://registry.example:5000/team/web@sha256:%s", digest);
    snprintf(c.pin.fallback_source, sizeof(c.pin.fallback_source),
             "docker://registry.example:5000/team/web@sha256:%s", digest);
    snprintf(c.held, sizeof(c.held), "v1");
    snprintf(c.held_digest, sizeof(c.held_digest), "%s", digest);
    snprintf(c.held_source, sizeof(c.held_source), "docker://registry.example/web@sha256:%s",
             digest);
    snprintf(c.state.checkpoint, sizeof(c.state.checkpoint), "ckpt-2024-01-01");
    snprintf(c.state.sha256, sizeof(c.state.sha256), "%s", digest);
    c.state.size = 52428800;
    c.state.generation = 11;
    snprintf(c.state.box, sizeof(c.state.box), "b1");
    c.state.stamp_usec = 1700000000111111ULL;
    snprintf(c.state.build_version, sizeof(c.state.build_version), "v1");
    snprintf(c.state.build_digest, sizeof(c.state.build_digest), "%s", digest);
    snprintf(c.op.from, sizeof(c.op.from), "b1");
    snprintf(c.op.to, sizeof(c.op.to), "b2");
    c.holder.starting_generation = 13;
    c.has_failure = true;
    snprintf(c.failure.reason, sizeof(c.failure.reason), "ready_timeout");
    snprintf(c.failure.message, sizeof(c.failure.message), "web1 never said \"READY=1\"");
    c.failure.attempts = 2;
    c.failure.stamp_usec = 1700000000654321ULL;
    snprintf(c.failure.phase, sizeof(c.failure.phase), "probing");
    snprintf(c.failure.box, sizeof(c.failure.box), "b2");
    c.has_failover = true;
    c.failover.n_boxes = 2;
    snprintf(c.failover.boxes[0], sizeof(c.failover.boxes[0]), "b2");
    snprintf(c.failover.boxes[1], sizeof(c.failover.boxes[1]), "b3");
    c.revision = 99;
    return c;
}

static void codec_round_trip_preserves_every_field(void **state)
{
    claim c = full_claim();
    c.holder.session = UINT64_MAX - 1; /* above INT64_MAX: json-c keeps it unsigned */
    char *text = claim_to_json(&c);
    assert_non_null(text);
    assert_null(strstr(text, "\"revision\""));
    claim back;
    act_error err = {0};
    assert_int_equal(claim_from_json("web1", text, strlen(text), &back, &err), 0);
    c.revision = 0; /* not part of the body */
    assert_memory_equal(&c, &back, sizeof(c));
    free(text);

    claim minimal = {0};
    snprintf(minimal.host, sizeof(minimal.host), "web2");
    snprintf(minimal.op.id, sizeof(minimal.op.id), "op-1");
    minimal.op.kind = CLAIM_OP_MOVE;
    snprintf(minimal.op.phase, sizeof(minimal.op.phase), "draining");
    text = claim_to_json(&minimal);
    assert_int_equal(claim_from_json("web2", text, strlen(text), &back, &err), 0);
    assert_memory_equal(&minimal, &back, sizeof(minimal));
    assert_false(back.has_pin);
    assert_false(back.has_failure);
    assert_false(claim_pin_failed(&back));
    assert_true(claim_pin_failed(&c));
    /* Outside a swap the body has no starting_generation, as before it existed. */
    assert_null(strstr(text, "starting_generation"));
    assert_null(strstr(text, "failure"));
    /* Outside a move the op has no from and to. */
    assert_null(strstr(text, "\"from\""));
    assert_null(strstr(text, "\"to\""));
    /* Without a registry source, neither a pin nor a hold writes one. */
    assert_null(strstr(text, "source"));
    assert_null(strstr(text, "held_digest"));
    /* Failover off: no policy is written, as before it existed. */
    assert_null(strstr(text, "failover"));
    assert_false(claim_failover_allows(&back, "b2"));
    free(text);

    /* Failover on for every box that configures the host: an empty list. */
    minimal.has_failover = true;
    text = claim_to_json(&minimal);
    assert_non_null(strstr(text, "\"failover\":{\"boxes\":[]}"));
    assert_int_equal(claim_from_json("web2", text, strlen(text), &back, &err), 0);
    assert_memory_equal(&minimal, &back, sizeof(minimal));
    assert_true(claim_failover_allows(&back, "any-box"));
    assert_true(claim_failover_allows(&c, "b3"));
    assert_false(claim_failover_allows(&c, "b4"));
    free(text);
}

static void expect_refusal(const char *text, int errnum, const char *field)
{
    claim out;
    act_error err = {0};
    int r = claim_from_json("web9", text, strlen(text), &out, &err);
    if (r != -errnum || !strstr(err.message, "web9") || (field && !strstr(err.message, field)))
        fail_msg("input %.80s: got %d \"%s\", wanted -%d naming %s", text, r, err.message, errnum,
                 field ? field : "(host only)");
}

static void codec_refuses_bad_input_naming_host_and_field(void **state)
{
    const char *op =
        "\"op\":{\"id\":\"o\",\"kind\":\"serving\",\"phase\":\"serving\",\"exec\":\"b\"}";
    char text[512];
    expect_refusal("{", EINVAL, NULL);
    /* The build that wrote a state: a name, and a digest only beside it. */
    snprintf(text, sizeof(text),
             "{%s,\"state\":{\"checkpoint\":\"c1\",\"build_version\":\"../v1\"}}", op);
    expect_refusal(text, EINVAL, "state.build_version");
    snprintf(text, sizeof(text),
             "{%s,\"state\":{\"checkpoint\":\"c1\",\"build_digest\":\"%064d\"}}", op, 1);
    expect_refusal(text, EINVAL, "state.build_digest");
    /* The failover policy: a list of box names, each once, at most 16. */
    snprintf(text, sizeof(text), "{%s,\"failover\":{}}", op);
    expect_refusal(text, EINVAL, "failover.boxes");
    snprintf(text, sizeof(text), "{%s,\"failover\":{\"boxes\":\"b2\"}}", op);
    expect_refusal(text, EINVAL, "failover.boxes");
    snprintf(text, sizeof(text), "{%s,\"failover\":{\"boxes\":[2]}}", op);
    expect_refusal(text, EINVAL, "failover.boxes");
    snprintf(text, sizeof(text), "{%s,\"failover\":{\"boxes\":[\"../b2\"]}}", op);
    expect_refusal(text, EINVAL, "failover.boxes[0]");
    snprintf(text, sizeof(text), "{%s,\"failover\":{\"boxes\":[\"b2\",\"b2\"]}}", op);
    expect_refusal(text, EINVAL, "twice");
    snprintf(text, sizeof(text), "{%s,\"failover\":{\"boxes\":[],\"grace\":3}}", op);
    expect_refusal(text, EINVAL, "failover.grace");
    char many[512];
    size_t len = (size_t)snprintf(many, sizeof(many), "{%s,\"failover\":{\"boxes\":[", op);
    for (int i = 0; i < 17; i++)
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%s\"b%d\"", i ? "," : "", i);
    snprintf(many + len, sizeof(many) - len, "]}}");
    expect_refusal(many, EINVAL, "more than 16");
    expect_refusal("[]", EINVAL, NULL);
    expect_refusal("{}", EINVAL, "op");
    expect_refusal("{\"op\":{\"id\":\"o\",\"kind\":\"serving\",\"phase\":\"serving\"}}", EINVAL,
                   "op.exec");
    expect_refusal("{\"op\":{\"id\":\"o\",\"kind\":\"sleeping\",\"phase\":\"x\",\"exec\":\"\"}}",
                   EINVAL, "op.kind");
    expect_refusal("{\"op\":{\"id\":\"o\",\"kind\":\"move\",\"phase\":\"serving\",\"exec\":\"\"}}",
                   EINVAL, "op.phase");
    expect_refusal("{\"op\":{\"id\":5,\"kind\":\"move\",\"phase\":\"moving\",\"exec\":\"\"}}",
                   EINVAL, "op.id");
    snprintf(text, sizeof(text),
             "{%s,\"holder\":{\"box\":\"b\",\"incarnation\":\"i\","
             "\"session\":\"3\",\"generation\":1,\"stamp_usec\":1}}",
             op);
    expect_refusal(text, EINVAL, "holder.session");
    snprintf(text, sizeof(text),
             "{%s,\"holder\":{\"box\":\"b\",\"incarnation\":\"i\","
             "\"session\":-3,\"generation\":1,\"stamp_usec\":1}}",
             op);
    expect_refusal(text, EINVAL, "holder.session");
    snprintf(text, sizeof(text),
             "{%s,\"holder\":{\"box\":\"b\",\"incarnation\":\"i\","
             "\"session\":3,\"stamp_usec\":1}}",
             op);
    expect_refusal(text, EINVAL, "holder.generation");
    snprintf(text, sizeof(text), "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"abc\"}}", op);
    expect_refusal(text, EINVAL, "pin.digest");
    /* A pin's failure: its reason a code, its fallback an exact build, and
     * no failure's details without its reason. A fallback without a failure
     * is the swap's, written with the pin (below, accepted). */
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"failure_reason\":\"Not Ready\"}}",
             op, digest);
    expect_refusal(text, EINVAL, "pin.failure_reason");
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"failure_reason\":\"crashed\",\"fallback_version\":\"v0\"}}",
             op, digest);
    expect_refusal(text, EINVAL, "pin.fallback_digest");
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"failure_box\":\"b1\"}}",
             op, digest);
    expect_refusal(text, EINVAL, "pin.failure_reason");
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"fallback_version\":\"v0\"}}",
             op, digest);
    expect_refusal(text, EINVAL, "pin.fallback_digest");
    {
        snprintf(text, sizeof(text),
                 "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
                 "\"fallback_version\":\"v0\",\"fallback_digest\":\"%s\"}}",
                 op, digest, digest);
        claim pinned;
        act_error err = {0};
        assert_int_equal(claim_from_json("web1", text, strlen(text), &pinned, &err), 0);
        assert_false(claim_pin_failed(&pinned));
        assert_string_equal(pinned.pin.fallback_version, "v0");
    }
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"failure_reason\":\"crashed\",\"failure_box\":\"../b\"}}",
             op, digest);
    expect_refusal(text, EINVAL, "pin.failure_box");
    snprintf(text, sizeof(text), "{%s,\"held\":\"../etc\"}", op);
    expect_refusal(text, EINVAL, "held");
    /* A build's source is a registry image by digest: a tag can move, and a
     * path names a file only its own box has. */
    const char *bad_sources[] = {"docker://r.example/web:v1",
                                 "oci:/srv/layout@sha256:", "docker://r.example/web@sha256:ABC",
                                 "http://r/web@sha256:"};
    for (size_t i = 0; i < sizeof(bad_sources) / sizeof(bad_sources[0]); i++) {
        snprintf(text, sizeof(text),
                 "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\",\"source\":\"%s%s\"}}", op,
                 digest, bad_sources[i],
                 strstr(bad_sources[i], "@sha256:") && i != 2 ? digest : "");
        expect_refusal(text, EINVAL, "pin.source");
    }
    /* The fallback's source: a registry image by digest, beside its digest. */
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\",\"fallback_version\":\"v0\","
             "\"fallback_digest\":\"%s\",\"fallback_source\":\"docker://r/w:v0\"}}",
             op, digest, digest);
    expect_refusal(text, EINVAL, "pin.fallback_source");
    snprintf(text, sizeof(text),
             "{%s,\"pin\":{\"version\":\"v1\",\"digest\":\"%s\","
             "\"fallback_source\":\"docker://r/w@sha256:%s\"}}",
             op, digest, digest);
    expect_refusal(text, EINVAL, "pin.fallback_source");
    snprintf(text, sizeof(text), "{%s,\"held\":\"v1\",\"held_source\":\"docker://r/w@sha256:%s\"}",
             op, digest);
    expect_refusal(text, EINVAL, "held_source");
    snprintf(text, sizeof(text), "{%s,\"held_digest\":\"%s\"}", op, digest);
    expect_refusal(text, EINVAL, "held_digest");
    snprintf(text, sizeof(text),
             "{%s,\"held\":\"v1\",\"held_digest\":\"%s\",\"held_source\":\"r/w\"}", op, digest);
    expect_refusal(text, EINVAL, "held_source");
    snprintf(text, sizeof(text), "{%s,\"sesion\":1}", op);
    expect_refusal(text, EINVAL, "sesion");
    snprintf(text, sizeof(text), "{%s} trailing", op);
    expect_refusal(text, EINVAL, NULL);
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":7}}", op);
    expect_refusal(text, EINVAL, "state.checkpoint");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"../../cp\"}}", op);
    expect_refusal(text, EINVAL, "state.checkpoint");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"cp\\nX=1\"}}", op);
    expect_refusal(text, EINVAL, "state.checkpoint");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"c\",\"sha256\":\"ab\"}}", op);
    expect_refusal(text, EINVAL, "state.sha256");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"c\",\"box\":\"../b\"}}", op);
    expect_refusal(text, EINVAL, "state.box");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"\",\"size\":5}}", op);
    expect_refusal(text, EINVAL, "state.checkpoint");
    snprintf(text, sizeof(text), "{%s,\"state\":{\"checkpoint\":\"c\",\"size\":-5}}", op);
    expect_refusal(text, EINVAL, "state.size");
    expect_refusal("{\"op\":{\"id\":\"o\",\"kind\":\"move\",\"phase\":\"moving\","
                   "\"exec\":\"\",\"to\":\"b/2\"}}",
                   EINVAL, "op.to");
    expect_refusal("{\"op\":{\"id\":\"o\",\"kind\":\"move\",\"phase\":\"moving\","
                   "\"exec\":\"\",\"from\":3}}",
                   EINVAL, "op.from");
    snprintf(text, sizeof(text),
             "{%s,\"failure\":{\"reason\":\"r\",\"message\":\"m\","
             "\"attempts\":0,\"stamp_usec\":1,\"phase\":\"Probing!\"}}",
             op);
    expect_refusal(text, EINVAL, "failure.phase");

    /* The starting generation is above the serving one, or absent. */
    const char *holder = "\"holder\":{\"box\":\"b\",\"incarnation\":\"i\",\"session\":3,"
                         "\"generation\":5,\"stamp_usec\":1";
    snprintf(text, sizeof(text), "{%s,%s,\"starting_generation\":5}}", op, holder);
    expect_refusal(text, EINVAL, "holder.starting_generation");
    snprintf(text, sizeof(text), "{%s,%s,\"starting_generation\":\"6\"}}", op, holder);
    expect_refusal(text, EINVAL, "holder.starting_generation");

    /* A failure has all four fields, a reason that is a code, a one-line
     * message and no more attempts than an admission makes. */
    const char *failure_fields[][2] = {
        {"\"message\":\"m\",\"attempts\":1,\"stamp_usec\":1", "failure.reason"},
        {"\"reason\":\"crashed\",\"attempts\":1,\"stamp_usec\":1", "failure.message"},
        {"\"reason\":\"crashed\",\"message\":\"m\",\"stamp_usec\":1", "failure.attempts"},
        {"\"reason\":\"crashed\",\"message\":\"m\",\"attempts\":1", "failure.stamp_usec"},
        {"\"reason\":\"Crashed Hard\",\"message\":\"m\",\"attempts\":1,\"stamp_usec\":1",
         "failure.reason"},
        {"\"reason\":\"\",\"message\":\"m\",\"attempts\":1,\"stamp_usec\":1", "failure.reason"},
        {"\"reason\":\"crashed\",\"message\":\"two\\nlines\",\"attempts\":1,\"stamp_usec\":1",
         "failure.message"},
        {"\"reason\":\"crashed\",\"message\":\"m\",\"attempts\":6,\"stamp_usec\":1",
         "failure.attempts"},
        {"\"reason\":\"crashed\",\"message\":\"m\",\"attempts\":-1,\"stamp_usec\":1",
         "failure.attempts"},
        {"\"reason\":\"crashed\",\"message\":\"m\",\"attempts\":1,\"stamp_usec\":1,"
         "\"atempts\":1",
         "failure.atempts"},
    };
    for (size_t i = 0; i < sizeof(failure_fields) / sizeof(failure_fields[0]); i++) {
        snprintf(text, sizeof(text), "{%s,\"failure\":{%s}}", op, failure_fields[i][0]);
        expect_refusal(text, EINVAL, failure_fields[i][1]);
    }
    snprintf(text, sizeof(text), "{%s,\"failure\":\"crashed\"}", op);
    expect_refusal(text, EINVAL, "failure");

    /* Oversize: refused before parsing, with the limit named. */
    size_t big = CLAIM_JSON_MAX + 1;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    claim out;
    act_error err = {0};
    assert_int_equal(claim_from_json("web9", huge, big, &out, &err), -EFBIG);
    assert_non_null(strstr(err.message, "web9"));
    free(huge);

    /* A string longer than its field is refused, not truncated. */
    char long_exec[200];
    memset(long_exec, 'x', 100);
    long_exec[100] = '\0';
    snprintf(text, sizeof(text),
             "{\"op\":{\"id\":\"o\",\"kind\":\"serving\",\"phase\":\"serving\","
             "\"exec\":\"%s\"}}",
             long_exec);
    expect_refusal(text, EINVAL, "op.exec");
}

static claim serving_by(const char *exec, const char *holder_box)
{
    claim c = {0};
    snprintf(c.host, sizeof(c.host), "web1");
    snprintf(c.op.id, sizeof(c.op.id), "op-1");
    c.op.kind = CLAIM_OP_SERVING;
    snprintf(c.op.phase, sizeof(c.op.phase), "assigned");
    snprintf(c.op.exec, sizeof(c.op.exec), "%s", exec);
    if (holder_box) {
        snprintf(c.holder.box, sizeof(c.holder.box), "%s", holder_box);
        snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "inc-old");
        c.holder.session = 4;
        c.holder.generation = 9;
    }
    c.revision = 10;
    return c;
}

static void executor_is_holder_for_serving_else_exec(void **state)
{
    claim c = serving_by("b1", NULL);
    assert_string_equal(claim_executor(&c), "b1");
    /* Admitted and serving: the holder is the box running it. */
    c = serving_by("b1", "b2");
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    assert_string_equal(claim_executor(&c), "b2");
    assert_true(claim_owned_by(&c, "b2"));
    assert_false(claim_owned_by(&c, "b1"));
    c.op.kind = CLAIM_OP_MOVE;
    snprintf(c.op.phase, sizeof(c.op.phase), "moving");
    assert_string_equal(claim_executor(&c), "b1");
    /* Released: nobody owns it, even the holder. */
    c = serving_by("", "b2");
    assert_false(claim_owned_by(&c, "b2"));
    assert_false(claim_owned_by(&c, ""));
}

/* A host served by b1 and then assigned to b2: the assignment wins, so b2
 * may wake it and b1 reads a claim that is no longer its own. Once b2 admits
 * itself it is the holder, and b1 stays fenced out. */
static void assignment_to_a_new_box_wins_over_the_old_holder(void **state)
{
    claim served = serving_by("b1", "b1");
    snprintf(served.op.phase, sizeof(served.op.phase), "serving");
    assert_true(claim_owned_by(&served, "b1"));

    claim assigned = served;
    snprintf(assigned.op.phase, sizeof(assigned.op.phase), CLAIM_PHASE_ASSIGNED);
    snprintf(assigned.op.exec, sizeof(assigned.op.exec), "b2");
    assert_string_equal(claim_executor(&assigned), "b2");
    assert_true(claim_owned_by(&assigned, "b2"));
    assert_false(claim_owned_by(&assigned, "b1"));
    act_error err = {0};
    /* b2 waits until b1, which may still run the host, releases it. */
    assert_int_equal(claim_phase_allows_wake(&assigned, "b2", false, &err), -EAGAIN);
    assert_int_equal(claim_phase_allows_wake(&assigned, "b1", false, &err), -EPERM);
    assert_non_null(strstr(err.message, "b2"));
    claim released;
    claim_next_released(&assigned, 555, &released);
    assert_int_equal(claim_phase_allows_wake(&released, "b2", false, &err), 0);

    claim admitted;
    claim_next_admission(&released, "b2", "inc-b2", 777, &admitted);
    assert_int_equal(claim_admission_ok(&released, &admitted, "inc-b2", &err), 0);
    assert_string_equal(claim_executor(&admitted), "b2");
    assert_false(claim_owned_by(&admitted, "b1"));
    /* The generation numbers go on from b1's: a generation is the host's. */
    assert_int_equal(admitted.holder.generation, served.holder.generation + 1);
}

static void phase_table_decides_wakes_and_probes(void **state)
{
    const struct {
        claim_op_kind kind;
        const char *phase;
        bool wake, probe;
    } rows[] = {
        {CLAIM_OP_SERVING, "assigned", true, false}, {CLAIM_OP_SERVING, "starting", true, false},
        {CLAIM_OP_SERVING, "serving", true, false},  {CLAIM_OP_SERVING, "frozen", true, false},
        {CLAIM_OP_SERVING, "parked", true, false},   {CLAIM_OP_SERVING, "failed", true, false},
        {CLAIM_OP_HOLD, "holding", true, false},     {CLAIM_OP_MOVE, "draining", false, false},
        {CLAIM_OP_MOVE, "moving", false, true},      {CLAIM_OP_PROBE, "probing", false, true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        claim c = serving_by("b1", NULL);
        c.op.kind = rows[i].kind;
        snprintf(c.op.phase, sizeof(c.op.phase), "%s", rows[i].phase);
        act_error err = {0};
        assert_int_equal(claim_phase_allows_wake(&c, "b1", false, &err), rows[i].wake ? 0 : -EPERM);
        assert_int_equal(claim_phase_allows_wake(&c, "b1", true, &err), rows[i].probe ? 0 : -EPERM);
        /* Never for another box. */
        assert_int_equal(claim_phase_allows_wake(&c, "b2", rows[i].probe, &err), -EPERM);
        assert_non_null(strstr(err.message, "web1"));
    }
    claim released = serving_by("", NULL);
    act_error err = {0};
    assert_int_equal(claim_phase_allows_wake(&released, "b1", false, &err), -EPERM);
    assert_non_null(strstr(err.message, "released"));
}

static void next_admission_and_admission_check(void **state)
{
    claim observed = serving_by("b1", "b1");
    claim next;
    claim_next_admission(&observed, "b1", "inc-new", 555, &next);
    assert_int_equal(next.holder.session, 5);
    assert_int_equal(next.holder.generation, 10);
    assert_string_equal(next.holder.incarnation, "inc-new");
    assert_string_equal(next.op.phase, "starting");
    assert_string_equal(next.op.exec, "b1");
    assert_int_equal(next.holder.stamp_usec, 555);
    act_error err = {0};
    assert_int_equal(claim_validate(&next, &err), 0);
    assert_int_equal(claim_admission_ok(&observed, &next, "inc-new", &err), 0);
    /* Someone else's incarnation, or a session that did not grow, or the
     * same generation: another writer got in. */
    assert_int_equal(claim_admission_ok(&observed, &next, "inc-other", &err), -ESTALE);
    claim stale = next;
    stale.holder.session = observed.holder.session;
    assert_int_equal(claim_admission_ok(&observed, &stale, "inc-new", &err), -ESTALE);
    stale = next;
    stale.holder.generation = observed.holder.generation;
    assert_int_equal(claim_admission_ok(&observed, &stale, "inc-new", &err), -ESTALE);
    /* A failed admission's record goes with the next admission. */
    observed.has_failure = true;
    snprintf(observed.failure.reason, sizeof(observed.failure.reason), "crashed");
    observed.failure.attempts = 2;
    claim_next_admission(&observed, "b1", "inc-new", 557, &next);
    assert_false(next.has_failure);
    assert_string_equal(next.failure.reason, "");
    /* A swap that never published left its number behind: it is not reused. */
    observed = serving_by("b1", "b1");
    observed.holder.starting_generation = 10;
    claim_next_admission(&observed, "b1", "inc-new", 558, &next);
    assert_int_equal(next.holder.generation, 11);
    assert_int_equal(next.holder.starting_generation, 0);
    assert_int_equal(claim_admitted_generation(&next), 11);
    /* A hold's pinned start becomes the serving start; a probe stays a probe. */
    observed = serving_by("b1", "b1");
    observed.op.kind = CLAIM_OP_PROBE;
    snprintf(observed.op.phase, sizeof(observed.op.phase), "probing");
    claim_next_admission(&observed, "b1", "inc-new", 556, &next);
    assert_int_equal(next.op.kind, CLAIM_OP_PROBE);
    assert_string_equal(next.op.phase, "probing");
}

/* A claim whose generation 9 is published and serving on a handle. */
static claim published_by_b1(void)
{
    claim c = serving_by("b1", "b1");
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.holder.handle, sizeof(c.holder.handle), "127.0.0.1:8080");
    return c;
}

static void swap_admission_keeps_naming_the_serving_generation(void **state)
{
    claim serving = published_by_b1();
    claim admitted;
    claim_next_swap_admission(&serving, "b1", "inc-new", 600, &admitted);
    /* Fenced like any admission: our holder and a new session... */
    assert_string_equal(admitted.holder.incarnation, "inc-new");
    assert_int_equal(admitted.holder.session, serving.holder.session + 1);
    assert_int_equal(admitted.holder.stamp_usec, 600);
    /* ...but a router still reaches N: same generation, handle and phase. */
    assert_int_equal(admitted.holder.generation, 9);
    assert_string_equal(admitted.holder.handle, "127.0.0.1:8080");
    assert_string_equal(admitted.op.phase, "serving");
    assert_int_equal(admitted.holder.starting_generation, 10);
    assert_int_equal(claim_admitted_generation(&admitted), 10);
    act_error err = {0};
    assert_int_equal(claim_validate(&admitted, &err), 0);
    assert_int_equal(claim_admission_ok(&serving, &admitted, "inc-new", &err), 0);
    /* A swap admission that starts nothing new is someone else's write. */
    claim stale = admitted;
    stale.holder.starting_generation = 0;
    assert_int_equal(claim_admission_ok(&serving, &stale, "inc-new", &err), -ESTALE);
    /* The body carries the starting generation through the codec. */
    char *text = claim_to_json(&admitted);
    claim back;
    assert_int_equal(claim_from_json("web1", text, strlen(text), &back, &err), 0);
    free(text);
    assert_int_equal(back.holder.starting_generation, 10);

    /* Publication names N+1 in one write. */
    admitted.revision = 11;
    claim published;
    claim_next_published(&admitted, "127.0.0.1:8080", &published);
    assert_int_equal(published.holder.generation, 10);
    assert_int_equal(published.holder.starting_generation, 0);
    assert_int_equal(published.holder.session, admitted.holder.session);
    assert_string_equal(published.op.phase, "serving");
    assert_int_equal(claim_validate(&published, &err), 0);

    /* A failed swap names N again, with the swap's session (sessions only grow). */
    claim again;
    claim_next_serving_again(&published, 9, "127.0.0.1:8080", &again);
    assert_int_equal(again.holder.generation, 9);
    assert_int_equal(again.holder.starting_generation, 0);
    assert_int_equal(again.holder.session, admitted.holder.session);
    assert_string_equal(again.holder.handle, "127.0.0.1:8080");
    assert_string_equal(again.op.phase, "serving");

    /* Nothing serves that the claim could name: an ordinary admission. */
    claim parked = serving_by("b1", "b1");
    snprintf(parked.op.phase, sizeof(parked.op.phase), "parked");
    claim_next_swap_admission(&parked, "b1", "inc-new", 601, &admitted);
    assert_int_equal(admitted.holder.generation, 10);
    assert_int_equal(admitted.holder.starting_generation, 0);
    assert_string_equal(admitted.op.phase, "starting");
}

static void parked_and_failed_clear_the_handle(void **state)
{
    claim serving = published_by_b1();
    serving.holder.starting_generation = 10;
    claim parked;
    claim_next_parked(&serving, &parked);
    assert_string_equal(parked.op.phase, "parked");
    assert_string_equal(parked.holder.handle, "");
    assert_int_equal(parked.holder.starting_generation, 0);
    assert_int_equal(parked.holder.session, serving.holder.session);
    assert_int_equal(parked.holder.generation, serving.holder.generation);
    assert_false(parked.has_failure);

    claim_failure failure = {.attempts = 2, .stamp_usec = 700};
    snprintf(failure.reason, sizeof(failure.reason), "crashed");
    snprintf(failure.message, sizeof(failure.message), "exited with status 3");
    claim failed;
    claim_next_failed(&serving, &failure, &failed);
    assert_string_equal(failed.op.phase, "failed");
    assert_string_equal(failed.holder.handle, "");
    assert_int_equal(failed.holder.starting_generation, 0);
    assert_true(failed.has_failure);
    assert_string_equal(failed.failure.reason, "crashed");
    assert_int_equal(failed.failure.attempts, 2);
    act_error err = {0};
    assert_int_equal(claim_validate(&failed, &err), 0);
    /* Round trip. */
    char *text = claim_to_json(&failed);
    claim back;
    assert_int_equal(claim_from_json("web1", text, strlen(text), &back, &err), 0);
    free(text);
    failed.revision = 0;
    assert_true(back.has_failure);
    assert_string_equal(back.failure.message, "exited with status 3");
    assert_int_equal(back.failure.stamp_usec, 700);
    /* The next publication clears the failure. */
    claim published;
    claim_next_published(&failed, "127.0.0.1:8080", &published);
    assert_false(published.has_failure);
    assert_string_equal(published.op.phase, "serving");
}

/* A frozen generation keeps its admission: the claim goes on naming it and
 * its handle, a thaw names it serving again in the same session, and a swap
 * of it starts N+1 beside it as beside a serving N. */
static void frozen_keeps_the_generation_and_its_handle(void **state)
{
    claim serving = published_by_b1();
    serving.revision = 20;
    claim frozen;
    claim_next_frozen(&serving, &frozen);
    assert_string_equal(frozen.op.phase, "frozen");
    assert_string_equal(frozen.holder.handle, "127.0.0.1:8080");
    assert_int_equal(frozen.holder.generation, 9);
    assert_int_equal(frozen.holder.session, serving.holder.session);
    assert_true(claim_names_a_generation(&frozen));
    act_error err = {0};
    assert_int_equal(claim_validate(&frozen, &err), 0);
    /* The codec carries the phase both ways. */
    char *text = claim_to_json(&frozen);
    assert_non_null(strstr(text, "\"frozen\""));
    claim back;
    assert_int_equal(claim_from_json("web1", text, strlen(text), &back, &err), 0);
    free(text);
    assert_string_equal(back.op.phase, "frozen");
    assert_string_equal(back.holder.handle, "127.0.0.1:8080");
    /* Frozen is a serving op's phase only. */
    claim wrong = frozen;
    wrong.op.kind = CLAIM_OP_MOVE;
    assert_int_equal(claim_validate(&wrong, &err), -EINVAL);
    assert_non_null(strstr(err.message, "frozen"));

    claim thawed;
    claim_next_serving_again(&frozen, 9, "127.0.0.1:8080", &thawed);
    assert_string_equal(thawed.op.phase, "serving");
    assert_int_equal(thawed.holder.session, serving.holder.session);

    claim admitted;
    claim_next_swap_admission(&frozen, "b1", "inc-new", 610, &admitted);
    assert_int_equal(admitted.holder.generation, 9);
    assert_int_equal(admitted.holder.starting_generation, 10);
    assert_string_equal(admitted.holder.handle, "127.0.0.1:8080");

    claim parked;
    claim_next_parked(&frozen, &parked);
    assert_false(claim_names_a_generation(&parked));
    assert_string_equal(parked.holder.handle, "");
}

/* An assignment to b2 of a host b1 holds: b2 may not wake it until b1 has
 * released it, and the next admission forgets the release. */
static void a_handover_waits_for_the_holders_release(void **state)
{
    claim assigned = published_by_b1();
    snprintf(assigned.op.id, sizeof(assigned.op.id), "assign");
    snprintf(assigned.op.phase, sizeof(assigned.op.phase), "assigned");
    snprintf(assigned.op.exec, sizeof(assigned.op.exec), "b2");
    assert_true(claim_release_pending(&assigned, "b2"));
    assert_false(claim_release_pending(&assigned, "b1"));
    assert_true(claim_release_due(&assigned, "b1"));
    assert_false(claim_release_due(&assigned, "b2"));
    act_error err = {0};
    assert_int_equal(claim_phase_allows_wake(&assigned, "b2", false, &err), -EAGAIN);
    assert_non_null(strstr(err.message, "b1"));

    claim released;
    claim_next_released(&assigned, 1234, &released);
    assert_int_equal(released.holder.released_usec, 1234);
    assert_string_equal(released.holder.handle, "");
    assert_false(claim_release_pending(&released, "b2"));
    assert_false(claim_release_due(&released, "b1"));
    assert_int_equal(claim_phase_allows_wake(&released, "b2", false, &err), 0);
    /* The release survives the codec. */
    char *text = claim_to_json(&released);
    claim back;
    assert_int_equal(claim_from_json("web1", text, strlen(text), &back, &err), 0);
    free(text);
    assert_int_equal(back.holder.released_usec, 1234);

    claim admitted;
    claim_next_admission(&back, "b2", "inc-new", 99, &admitted);
    assert_string_equal(admitted.holder.box, "b2");
    assert_int_equal(admitted.holder.released_usec, 0);
    /* A box that holds its own assignment has nothing to wait for. */
    claim own = published_by_b1();
    snprintf(own.op.phase, sizeof(own.op.phase), "assigned");
    assert_false(claim_release_pending(&own, "b1"));
    assert_false(claim_release_due(&own, "b1"));
}

static void same_admission_ignores_revision_only(void **state)
{
    claim a = serving_by("b1", "b1"), b = a;
    b.revision = 42;
    assert_true(claim_same_admission(&a, &b));
    snprintf(b.held, sizeof(b.held), "v3"); /* unrelated field */
    assert_true(claim_same_admission(&a, &b));
    b = a;
    b.holder.session++;
    assert_false(claim_same_admission(&a, &b));
    b = a;
    snprintf(b.op.phase, sizeof(b.op.phase), "serving");
    assert_false(claim_same_admission(&a, &b));
    b = a;
    b.holder.stamp_usec++;
    assert_false(claim_same_admission(&a, &b));
    b = a;
    b.holder.starting_generation = 11;
    assert_false(claim_same_admission(&a, &b));
    b = a;
    b.revision = 0; /* absent */
    assert_false(claim_same_admission(&a, &b));
}

/* A write's own landing is recognised by every field it wrote, and only
 * for the writer whose incarnation it names. */
static void landed_write_is_the_same_claim_of_our_incarnation(void **state)
{
    claim observed = serving_by("b1", "b1"), sent;
    claim_next_admission(&observed, "b1", "inc-new", 77, &sent);
    sent.revision = 0; /* what a writer holds before the answer */
    claim current = sent;
    current.revision = 11;
    assert_true(claim_is_landed_write(&sent, &current, "inc-new"));
    /* Another daemon (or an older one of this box) computing the same bytes
     * would name its own incarnation. */
    assert_false(claim_is_landed_write(&sent, &current, "inc-old"));
    /* A later writer changed an unrelated field: not the claim sent. */
    snprintf(current.held, sizeof(current.held), "v3");
    assert_false(claim_is_landed_write(&sent, &current, "inc-new"));
    current = sent;
    current.revision = 11;
    current.holder.stamp_usec++;
    assert_false(claim_is_landed_write(&sent, &current, "inc-new"));
    current = sent;
    current.revision = 0; /* the claim is gone */
    assert_false(claim_is_landed_write(&sent, &current, "inc-new"));
    /* A write that names no holder cannot be told from another's. */
    claim released = serving_by("b1", NULL);
    claim released_now = released;
    assert_false(claim_is_landed_write(&released, &released_now, "inc-new"));
}

static void edits_change_only_what_they_name(void **state)
{
    claim current = full_claim();
    claim next;
    act_error err = {0};

    claim_edit assign = {.kind = CLAIM_EDIT_ASSIGN};
    snprintf(assign.box, sizeof(assign.box), "b2");
    assert_int_equal(claim_apply_edit("web1", &current, &assign, &next, &err), 0);
    assert_string_equal(next.op.phase, CLAIM_PHASE_ASSIGNED);
    assert_string_equal(next.op.exec, "b2");
    assert_string_equal(claim_executor(&next), "b2");
    /* The holder stays but for what only its admission had, which the
     * fresh op ends: a swap's starting generation and the failure. */
    claim_holder kept = current.holder;
    kept.starting_generation = 0;
    assert_memory_equal(&next.holder, &kept, sizeof(kept));
    assert_false(next.has_failure);
    assert_string_equal(next.failure.reason, "");
    assert_string_equal(next.held, "v1");
    assert_true(next.has_pin);
    assert_int_equal(claim_validate(&next, &err), 0);
    /* The holder must release it first; --force says its box is gone. */
    assert_true(claim_release_pending(&next, "b2"));
    claim_edit forced = assign;
    forced.holder_gone = true;
    forced.stamp_usec = 4321;
    claim taken;
    assert_int_equal(claim_apply_edit("web1", &current, &forced, &taken, &err), 0);
    assert_false(claim_release_pending(&taken, "b2"));
    assert_int_equal(taken.holder.released_usec, 4321);
    assert_int_equal(claim_phase_allows_wake(&taken, "b2", false, &err), 0);
    assert_string_equal(taken.op.id, "assign");
    assert_string_equal(taken.op.from, "");
    /* A takeover's assignment says where the host came from, until the
     * next op; any other assignment or release ends a move's from and to. */
    claim_edit takeover = forced;
    snprintf(takeover.taken_from, sizeof(takeover.taken_from), "b1");
    assert_int_equal(claim_apply_edit("web1", &current, &takeover, &taken, &err), 0);
    assert_string_equal(taken.op.id, CLAIM_OP_ID_TAKEOVER);
    assert_string_equal(taken.op.from, "b1");
    assert_string_equal(taken.op.to, "");
    assert_int_equal(taken.holder.released_usec, 4321);
    assert_int_equal(claim_validate(&taken, &err), 0);
    claim moving = current;
    moving.op.kind = CLAIM_OP_MOVE;
    snprintf(moving.op.phase, sizeof(moving.op.phase), "draining");
    snprintf(moving.op.from, sizeof(moving.op.from), "b1");
    snprintf(moving.op.to, sizeof(moving.op.to), "b3");
    for (claim_edit_kind kind = CLAIM_EDIT_ASSIGN; kind <= CLAIM_EDIT_RELEASE; kind++) {
        claim_edit fresh = {.kind = kind};
        snprintf(fresh.box, sizeof(fresh.box), "b2");
        assert_int_equal(claim_apply_edit("web1", &moving, &fresh, &next, &err), 0);
        assert_string_equal(next.op.from, "");
        assert_string_equal(next.op.to, "");
    }

    claim_edit release = {.kind = CLAIM_EDIT_RELEASE};
    assert_int_equal(claim_apply_edit("web1", &current, &release, &next, &err), 0);
    assert_string_equal(next.op.exec, "");
    assert_false(claim_owned_by(&next, "b1"));
    assert_memory_equal(&next.holder, &kept, sizeof(kept));
    assert_false(next.has_failure);
    char text[128];
    claim_describe_owner(&next, text, sizeof(text));
    assert_string_equal(text, "revision 99, released");

    claim_edit hold = {.kind = CLAIM_EDIT_HOLD};
    snprintf(hold.version, sizeof(hold.version), "v3");
    assert_int_equal(claim_apply_edit("web1", &current, &hold, &next, &err), 0);
    assert_string_equal(next.held, "v3");
    assert_string_equal(next.op.exec, current.op.exec);
    /* The admission goes on under a hold: what it had stays. */
    assert_int_equal(next.holder.starting_generation, 13);
    assert_true(next.has_failure);
    /* Already held there, by a hold that knew no more. */
    snprintf(hold.version, sizeof(hold.version), "v1");
    claim plain = current;
    plain.held_digest[0] = plain.held_source[0] = '\0';
    assert_int_equal(claim_apply_edit("web1", &plain, &hold, &next, &err), 1);

    /* A hold that knows the build writes its digest and source beside it;
     * the same version with them is a change. */
    snprintf(hold.digest, sizeof(hold.digest), "%s", digest);
    snprintf(hold.source, sizeof(hold.source), "docker://r.example/web@sha256:%s", digest);
    assert_int_equal(claim_apply_edit("web1", &plain, &hold, &next, &err), 0);
    assert_string_equal(next.held_source, hold.source);
    assert_int_equal(claim_validate(&next, &err), 0);

    claim_edit unhold = {.kind = CLAIM_EDIT_UNHOLD};
    assert_int_equal(claim_apply_edit("web1", &current, &unhold, &next, &err), 0);
    assert_string_equal(next.held, "");
    assert_string_equal(next.held_digest, "");
    assert_string_equal(next.held_source, "");
    assert_int_equal(claim_apply_edit("web1", &next, &unhold, &next, &err), 1);

    claim_edit unpin = {.kind = CLAIM_EDIT_UNPIN};
    assert_int_equal(claim_apply_edit("web1", &current, &unpin, &next, &err), 0);
    assert_false(next.has_pin);
    assert_string_equal(next.pin.failure_message, "");
    assert_int_equal(claim_validate(&next, &err), 0);
    assert_int_equal(claim_apply_edit("web1", &next, &unpin, &next, &err), 1);

    /* No claim: an assignment creates one, anything else is refused. */
    claim absent = {0};
    assert_int_equal(claim_apply_edit("web7", &absent, &assign, &next, &err), 0);
    assert_string_equal(next.host, "web7");
    assert_int_equal(claim_validate(&next, &err), 0);
    assert_int_equal(claim_apply_edit("web7", &absent, &hold, &next, &err), -ENOENT);
    assert_non_null(strstr(err.message, "web7"));
    assert_non_null(strstr(err.message, "claim assign"));
}

/* web1 serving on b1, its generation 9 published. */
static claim serving_on_b1(void)
{
    claim c = serving_by("b1", "b1");
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.holder.handle, sizeof(c.holder.handle), "127.0.0.2:80");
    return c;
}

static void a_move_starts_draining_and_refuses_what_it_cannot_do(void **state)
{
    claim c = serving_on_b1(), next;
    act_error err = {0};
    assert_int_equal(claim_move_start("web1", &c, "b2", "move-1", false, 5, &next, &err), 0);
    assert_int_equal(next.op.kind, CLAIM_OP_MOVE);
    assert_string_equal(next.op.phase, "draining");
    assert_string_equal(next.op.exec, "b1");
    assert_string_equal(next.op.from, "b1");
    assert_string_equal(next.op.to, "b2");
    assert_string_equal(next.op.id, "move-1");
    assert_int_equal(claim_validate(&next, &err), 0);
    /* The source keeps the claim while it drains, and nobody may wake it. */
    assert_true(claim_owned_by(&next, "b1"));
    assert_int_equal(claim_phase_allows_wake(&next, "b1", false, &err), -EPERM);
    assert_int_equal(claim_phase_allows_wake(&next, "b1", true, &err), -EPERM);
    assert_string_equal(claim_move_phase(&next), "draining");

    /* The same move again resumes; another is refused and names the first. */
    next.revision = 11;
    claim again;
    assert_int_equal(claim_move_start("web1", &next, "b2", "move-2", false, 6, &again, &err), 1);
    assert_int_equal(claim_move_start("web1", &next, "b3", "move-2", false, 6, &again, &err),
                     -EPERM);
    assert_non_null(strstr(err.message, "move-1"));
    assert_non_null(strstr(err.message, "--abort"));
    /* To the box that runs it, a held host, a released one, no claim. */
    assert_int_equal(claim_move_start("web1", &c, "b1", "m", false, 6, &again, &err), -EPERM);
    assert_non_null(strstr(err.message, "already runs on box b1"));
    claim held = c;
    snprintf(held.held, sizeof(held.held), "v1");
    assert_int_equal(claim_move_start("web1", &held, "b2", "m", false, 6, &again, &err), -EPERM);
    assert_non_null(strstr(err.message, "unhold"));
    claim released = serving_by("", "b1");
    assert_int_equal(claim_move_start("web1", &released, "b2", "m", false, 6, &again, &err),
                     -EPERM);
    assert_non_null(strstr(err.message, "released"));
    claim none = {0};
    assert_int_equal(claim_move_start("web1", &none, "b2", "m", false, 6, &again, &err), -ENOENT);
}

static void the_source_drains_then_only_the_targets_probe_may_wake(void **state)
{
    claim c = serving_on_b1(), draining, moving;
    act_error err = {0};
    assert_int_equal(claim_move_start("web1", &c, "b2", "move-1", false, 5, &draining, &err), 0);
    claim_state written = {.size = 10, .generation = 9, .stamp_usec = 6};
    snprintf(written.checkpoint, sizeof(written.checkpoint), "web1-9");
    snprintf(written.box, sizeof(written.box), "b1");
    claim_move_next_moving(&draining, &written, 7, &moving);
    assert_string_equal(moving.op.phase, "moving");
    assert_string_equal(moving.op.exec, "b2");
    assert_string_equal(moving.state.checkpoint, "web1-9");
    assert_int_equal(moving.holder.released_usec, 7);
    assert_int_equal(claim_validate(&moving, &err), 0);
    /* The source is out; the target may make the probe of this op only. */
    assert_false(claim_owned_by(&moving, "b1"));
    assert_int_equal(claim_phase_allows_wake(&moving, "b2", false, &err), -EPERM);
    assert_int_equal(claim_phase_allows_wake(&moving, "b2", true, &err), 0);
    assert_int_equal(claim_probe_allows_wake(&moving, "b2", "move-1", &err), 0);
    assert_int_equal(claim_probe_allows_wake(&moving, "b2", "move-0", &err), -EPERM);
    assert_int_equal(claim_probe_allows_wake(&moving, "b1", "move-1", &err), -EPERM);
    /* Until the source's release is written, the target waits. */
    claim unreleased = moving;
    unreleased.holder.released_usec = 0;
    assert_int_equal(claim_phase_allows_wake(&unreleased, "b2", true, &err), -EAGAIN);

    /* The probe's admission keeps the op and its boxes. */
    moving.revision = 12;
    claim probing;
    claim_next_admission(&moving, "b2", "inc-b2", 8, &probing);
    probing.revision = 13;
    assert_int_equal(probing.op.kind, CLAIM_OP_PROBE);
    assert_string_equal(probing.op.phase, "probing");
    assert_string_equal(probing.op.id, "move-1");
    assert_string_equal(probing.op.from, "b1");
    assert_string_equal(probing.holder.box, "b2");
    assert_int_equal(probing.holder.generation, 10);
    assert_int_equal(claim_admission_ok(&moving, &probing, "inc-b2", &err), 0);
    claim other_op = probing;
    snprintf(other_op.op.id, sizeof(other_op.op.id), "move-2");
    assert_int_equal(claim_admission_ok(&moving, &other_op, "inc-b2", &err), -ESTALE);
    claim not_a_probe = probing;
    not_a_probe.op.kind = CLAIM_OP_SERVING;
    snprintf(not_a_probe.op.phase, sizeof(not_a_probe.op.phase), "starting");
    assert_int_equal(claim_admission_ok(&moving, &not_a_probe, "inc-b2", &err), -ESTALE);
    assert_int_equal(claim_probe_allows_wake(&probing, "b2", "move-1", &err), 0);
    assert_int_equal(claim_phase_allows_wake(&probing, "b2", false, &err), -EPERM);
    /* Its publication ends the move. */
    claim published;
    claim_next_published(&probing, "127.0.0.3:80", &published);
    assert_int_equal(published.op.kind, CLAIM_OP_SERVING);
    assert_string_equal(published.op.phase, "serving");
    assert_string_equal(published.op.from, "");
    assert_int_equal(claim_validate(&published, &err), 0);
    assert_true(claim_owned_by(&published, "b2"));
    assert_null(claim_move_phase(&published));
}

static void a_rollback_hands_the_host_back_after_the_targets_release(void **state)
{
    claim c = serving_on_b1(), draining, moving, probing, back;
    act_error err = {0};
    claim_move_start("web1", &c, "b2", "move-1", false, 5, &draining, &err);
    claim_move_next_moving(&draining, NULL, 7, &moving);
    claim_next_admission(&moving, "b2", "inc-b2", 8, &probing);
    assert_int_equal(
        claim_move_rollback(&probing, "restore_failed", "bad\narchive", "b2", 9, &back, &err), 0);
    assert_int_equal(claim_validate(&back, &err), 0);
    assert_int_equal(back.op.kind, CLAIM_OP_SERVING);
    assert_string_equal(back.op.phase, "assigned");
    assert_string_equal(back.op.exec, "b1");
    assert_string_equal(back.failure.reason, "restore_failed");
    assert_string_equal(back.failure.message, "bad archive");
    assert_string_equal(back.failure.phase, "probing");
    assert_string_equal(back.failure.box, "b2");
    /* b2 admitted: b1 waits for its release, which b2 owes. */
    assert_int_equal(claim_phase_allows_wake(&back, "b1", false, &err), -EAGAIN);
    assert_true(claim_release_due(&back, "b2"));
    claim released;
    claim_next_released(&back, 10, &released);
    assert_int_equal(claim_phase_allows_wake(&released, "b1", false, &err), 0);
    /* The move's failure stays through b1's next admission and publication,
     * for whoever follows the move to read. */
    claim readmitted, republished;
    claim_next_admission(&released, "b1", "inc-b1", 11, &readmitted);
    assert_true(readmitted.has_failure);
    assert_string_equal(readmitted.failure.reason, "restore_failed");
    claim_next_published(&readmitted, "127.0.0.2:80", &republished);
    assert_string_equal(republished.failure.phase, "probing");
    /* Rolled back before the target admitted: b1 held it, b1 wakes. */
    assert_int_equal(claim_move_rollback(&moving, "aborted", "operator", "", 9, &back, &err), 0);
    assert_int_equal(claim_phase_allows_wake(&back, "b1", false, &err), 0);
    assert_string_equal(back.failure.phase, "moving");
    /* Not a move: nothing to roll back. */
    assert_int_equal(claim_move_rollback(&c, "aborted", "", "", 9, &back, &err), -EINVAL);
}

static void a_forced_move_starts_at_moving_with_the_release_given(void **state)
{
    claim c = serving_on_b1(), next;
    snprintf(c.state.checkpoint, sizeof(c.state.checkpoint), "web1-8");
    act_error err = {0};
    assert_int_equal(claim_move_start("web1", &c, "b2", "move-1", true, 5, &next, &err), 0);
    assert_string_equal(next.op.phase, "moving");
    assert_string_equal(next.op.exec, "b2");
    assert_string_equal(next.op.from, "b1");
    assert_string_equal(next.state.checkpoint, "web1-8");
    assert_int_equal(next.holder.released_usec, 5);
    assert_int_equal(claim_validate(&next, &err), 0);
    assert_int_equal(claim_probe_allows_wake(&next, "b2", "move-1", &err), 0);
}

/* The pin's failure is recorded on exactly that pin, once; a start of the
 * pin that serves clears it and keeps the fallback. */
static void a_pin_failure_lands_on_its_own_pin_once(void **state)
{
    (void)state;
    claim c = {0};
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "v2");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%064d", 2);
    snprintf(c.pin.fallback_version, sizeof(c.pin.fallback_version), "v1");
    claim_pin failed = c.pin;
    snprintf(failed.failure_reason, sizeof(failed.failure_reason), "crashed");
    snprintf(failed.failure_message, sizeof(failed.failure_message), "exited\nwith 1");

    /* Another build of the same version is not this pin. */
    claim_pin other = failed;
    snprintf(other.digest, sizeof(other.digest), "%064d", 3);
    assert_false(claim_record_pin_failure(&c, &other, "b1", 5));
    assert_false(claim_pin_failed(&c));

    assert_true(claim_record_pin_failure(&c, &failed, "b1", 5));
    assert_true(claim_pin_failed(&c));
    assert_string_equal(c.pin.failure_reason, "crashed");
    assert_string_equal(c.pin.failure_message, "exited with 1");
    assert_string_equal(c.pin.failure_box, "b1");
    assert_int_equal(c.pin.failure_usec, 5);
    /* The first failure stands. */
    snprintf(failed.failure_reason, sizeof(failed.failure_reason), "ready_timeout");
    assert_false(claim_record_pin_failure(&c, &failed, "b2", 6));
    assert_string_equal(c.pin.failure_box, "b1");

    assert_false(claim_clear_pin_failure(&c, "v1", c.pin.digest));
    assert_true(claim_clear_pin_failure(&c, "v2", c.pin.digest));
    assert_false(claim_pin_failed(&c));
    assert_string_equal(c.pin.failure_box, "");
    assert_string_equal(c.pin.fallback_version, "v1");
    /* No failure reason: nothing to record. */
    failed.failure_reason[0] = '\0';
    assert_false(claim_record_pin_failure(&c, &failed, "b1", 7));
}

static void describe_owner_names_revision_and_box(void **state)
{
    char text[128];
    claim c = serving_by("b1", "b1");
    claim_describe_owner(&c, text, sizeof(text));
    assert_string_equal(text, "revision 10, box b1");
    snprintf(c.op.exec, sizeof(c.op.exec), "b2");
    claim_describe_owner(&c, text, sizeof(text));
    assert_string_equal(text, "revision 10, box b2 (last run by b1)");
    c.op.exec[0] = '\0';
    claim_describe_owner(&c, text, sizeof(text));
    assert_string_equal(text, "revision 10, released");
    c.revision = 0;
    claim_describe_owner(&c, text, sizeof(text));
    assert_string_equal(text, "no claim");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(codec_round_trip_preserves_every_field),
        cmocka_unit_test(codec_refuses_bad_input_naming_host_and_field),
        cmocka_unit_test(executor_is_holder_for_serving_else_exec),
        cmocka_unit_test(assignment_to_a_new_box_wins_over_the_old_holder),
        cmocka_unit_test(phase_table_decides_wakes_and_probes),
        cmocka_unit_test(next_admission_and_admission_check),
        cmocka_unit_test(swap_admission_keeps_naming_the_serving_generation),
        cmocka_unit_test(parked_and_failed_clear_the_handle),
        cmocka_unit_test(frozen_keeps_the_generation_and_its_handle),
        cmocka_unit_test(same_admission_ignores_revision_only),
        cmocka_unit_test(landed_write_is_the_same_claim_of_our_incarnation),
        cmocka_unit_test(edits_change_only_what_they_name),
        cmocka_unit_test(describe_owner_names_revision_and_box),
        cmocka_unit_test(a_pin_failure_lands_on_its_own_pin_once),
        cmocka_unit_test(a_handover_waits_for_the_holders_release),
        cmocka_unit_test(a_move_starts_draining_and_refuses_what_it_cannot_do),
        cmocka_unit_test(the_source_drains_then_only_the_targets_probe_may_wake),
        cmocka_unit_test(a_rollback_hands_the_host_back_after_the_targets_release),
        cmocka_unit_test(a_forced_move_starts_at_moving_with_the_release_given),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
