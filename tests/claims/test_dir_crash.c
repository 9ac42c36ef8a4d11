/* What a power cut does to the dir store's claim files, which killing a
 * process cannot show (the page cache outlives the process): every write in
 * place a compare-and-swap makes is recorded, and each state a power cut
 * could leave is built from the file as it was, replayed up to each
 * fdatasync with the last write torn at every sector (as ALICE and
 * CrashMonkey replay block traces), then read by a store of its own. Each
 * must hold the old claim or the new one, whole, never neither nor a mix,
 * and take the next compare-and-swap. Also: readers racing a writer never
 * see a torn claim, and a store of layout 2 (one JSON file per claim) is
 * moved into claim files with its revisions. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "claims/store_dir.h"
#include "store_fixture.h"

#define SECTOR 512
#define MAX_OPS 16

static store_fixture fixture;

/* One recorded call: a pwrite (its bytes and offset) or an fdatasync. */
typedef struct recorded_op {
    bool sync;
    off_t offset;
    size_t len;
    unsigned char *bytes;
} recorded_op;

typedef struct recorder {
    recorded_op ops[MAX_OPS];
    size_t n;
} recorder;

static ssize_t recording_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t offset)
{
    recorder *rec = ctx;
    assert_true(rec->n < MAX_OPS);
    recorded_op *op = &rec->ops[rec->n++];
    *op = (recorded_op){.offset = offset, .len = len, .bytes = malloc(len)};
    memcpy(op->bytes, buf, len);
    return pwrite(fd, buf, len, offset);
}

static int recording_fdatasync(void *ctx, int fd)
{
    recorder *rec = ctx;
    assert_true(rec->n < MAX_OPS);
    rec->ops[rec->n++] = (recorded_op){.sync = true};
    return fdatasync(fd);
}

static void recorder_clear(recorder *rec)
{
    for (size_t i = 0; i < rec->n; i++)
        free(rec->ops[i].bytes);
    rec->n = 0;
}

static unsigned char *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    unsigned char *bytes = malloc((size_t)st.st_size);
    assert_int_equal(pread(fd, bytes, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return bytes;
}

static void write_whole(const char *path, const unsigned char *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* A claim whose body differs from its neighbours' all along: its handle's
 * length moves everything after it, so a write cut anywhere leaves a slot
 * that is neither claim. */
static claim versioned_claim(const char *host, unsigned version)
{
    claim c = fixture_claim(host, version);
    int n = snprintf(c.holder.handle, sizeof(c.holder.handle), "/run/app-%u/", version);
    size_t pad = (version * 97) % 200 + 20;
    memset(c.holder.handle + n, 'a' + version % 26, pad);
    c.holder.handle[n + pad] = '\0';
    return c;
}

static bool same_claim(const claim *a, const claim *b)
{
    char *x = claim_to_json(a), *y = claim_to_json(b);
    bool same = strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* One state a replay may read: a claim at its revision, or a tombstone
 * (c NULL, read as absent; a compare-and-swap after it names 0). */
typedef struct expected_state {
    const claim *c;
    uint64_t revision;
} expected_state;

static bool reads_as(int r, const claim *got, const expected_state *want)
{
    if (!want->c)
        return r == 0;
    return r == 1 && got->revision == want->revision && same_claim(got, want->c);
}

/* Reads host from a store made on dir, which holds image as host's claim
 * file: it must read as before or as after. Then a compare-and-swap on what
 * was read must take, and read back. Returns which it was (0 before, 1
 * after). */
static int check_state(const char *dir, const char *host, const unsigned char *image, size_t len,
                       const expected_state *before, const expected_state *after)
{
    char path[600], url[700];
    snprintf(path, sizeof(path), "%s/%s.claim", dir, host);
    write_whole(path, image, len);
    snprintf(url, sizeof(url), "dir://%s", dir);
    claim_store *store = NULL;
    act_error err = {0};
    assert_int_equal(claims_store_open(url, NULL, &store, &err), 0);
    claim got;
    int r = claims_read(store, host, &got, &err);
    if (r < 0)
        fail_msg("a replayed power cut left no readable claim: %s", err.message);
    int which = reads_as(r, &got, before) ? 0 : reads_as(r, &got, after) ? 1 : -1;
    if (which < 0)
        fail_msg("a replayed power cut left neither claim (read %d, revision %" PRIu64 ")", r,
                 r == 1 ? got.revision : 0);
    const expected_state *now = which == 0 ? before : after;
    claim next = versioned_claim(host, 999);
    uint64_t written = 0;
    assert_int_equal(
        claims_cas(store, host, now->c ? now->revision : 0, &next, &written, NULL, &err), 0);
    assert_int_equal(claims_read(store, host, &got, &err), 1);
    assert_true(same_claim(&got, &next));
    assert_int_equal(got.revision, written);
    claims_store_free(store);
    return which;
}

/* Applies ops [0, upto) of rec whole onto image. */
static void apply_whole(unsigned char *image, size_t len, const recorder *rec, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        const recorded_op *op = &rec->ops[i];
        if (op->sync)
            continue;
        assert_true((size_t)op->offset + op->len <= len);
        memcpy(image + op->offset, op->bytes, op->len);
    }
}

/* Every state a power cut during the recorded calls could leave: each
 * prefix of them applied whole, and for each write, the calls before it
 * whole and it cut at every sector (its first sectors on the disk, then
 * half of the next). Counts what each state read as. */
static void replay_every_cut(const char *host, const unsigned char *base, size_t len,
                             const recorder *rec, const expected_state *before,
                             const expected_state *after, unsigned seen[2])
{
    char scratch[] = "/tmp/act-dir-crash-XXXXXX";
    assert_non_null(mkdtemp(scratch));
    unsigned char *image = malloc(len);
    for (size_t prefix = 0; prefix <= rec->n; prefix++) {
        memcpy(image, base, len);
        apply_whole(image, len, rec, prefix);
        seen[check_state(scratch, host, image, len, before, after)]++;
    }
    for (size_t i = 0; i < rec->n; i++) {
        const recorded_op *op = &rec->ops[i];
        if (op->sync)
            continue;
        for (size_t whole = 0; whole * SECTOR < op->len; whole++) {
            memcpy(image, base, len);
            apply_whole(image, len, rec, i);
            size_t upto = whole * SECTOR + SECTOR / 2;
            memcpy(image + op->offset, op->bytes, upto < op->len ? upto : op->len);
            seen[check_state(scratch, host, image, len, before, after)]++;
        }
    }
    free(image);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", scratch);
    assert_int_equal(system(cmd), 0);
}

/* Successive writes in place (each into the other slot), a delete and a
 * write after it: each replayed at every cut. */
static void a_power_cut_leaves_the_old_claim_or_the_new_one(void **state)
{
    char url[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    recorder rec = {0};
    const claim_slots_io io = {recording_pwrite, recording_fdatasync, &rec};
    act_error err = {0};
    claim claims[7];
    claims[1] = versioned_claim("web1", 1);
    expected_state now = {&claims[1], 0};
    assert_int_equal(claims_cas(store, "web1", 0, &claims[1], &now.revision, NULL, &err), 0);
    char path[600];
    snprintf(path, sizeof(path), "%s/web1.claim", url + strlen("dir://"));
    unsigned seen[2] = {0, 0};
    for (unsigned version = 2; version <= 6; version++) {
        size_t len;
        unsigned char *base = read_whole(path, &len);
        claims[version] = versioned_claim("web1", version);
        expected_state next = {&claims[version], 0};
        claims_dir_use_io(store, &io);
        if (version == 5) {
            assert_int_equal(claims_delete(store, "web1", now.revision, NULL, &err), 0);
            next.c = NULL;
        } else {
            assert_int_equal(claims_cas(store, "web1", now.c ? now.revision : 0, &claims[version],
                                        &next.revision, NULL, &err),
                             0);
        }
        claims_dir_use_io(store, NULL);
        /* In place: one write and its fdatasync, nothing else. */
        assert_int_equal(rec.n, 2);
        assert_false(rec.ops[0].sync);
        assert_true(rec.ops[1].sync);
        size_t after_len;
        free(read_whole(path, &after_len));
        assert_int_equal(after_len, len);
        replay_every_cut("web1", base, len, &rec, &now, &next, seen);
        recorder_clear(&rec);
        free(base);
        now = next;
    }
    /* Both outcomes were seen: the replay reaches states before and after
     * each write, so it could tell a store that lost either. */
    assert_true(seen[0] > 0);
    assert_true(seen[1] > 0);
    claims_store_free(store);
}

/* A fresh store (its URL in url) holding host's first claim, at
 * *revision. */
static claim_store *store_with_claim(char *url, size_t size, const char *host, uint64_t *revision)
{
    claim_store *store = store_fixture_open_fresh(&fixture, url, size);
    act_error err = {0};
    claim first = versioned_claim(host, 1);
    assert_int_equal(claims_cas(store, host, 0, &first, revision, NULL, &err), 0);
    return store;
}

/* Readers never see a torn claim: a child writes 400 claims of varying
 * sizes (versioned_claim's) while the parent reads, and every read is a
 * whole claim whose revision never goes back. */
static void readers_racing_a_writer_see_whole_claims(void **state)
{
    char url[512];
    uint64_t revision = 0;
    claim_store *store = store_with_claim(url, sizeof(url), "race", &revision);
    act_error err = {0};
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        claim_store *writer = NULL;
        if (claims_store_open(url, NULL, &writer, &err) < 0)
            _exit(2);
        for (unsigned i = 2; i <= 400; i++) {
            claim next = versioned_claim("race", i);
            if (claims_cas(writer, "race", revision, &next, &revision, NULL, &err) != 0)
                _exit(3);
        }
        claims_store_free(writer);
        _exit(0);
    }
    uint64_t last = 0;
    unsigned reads = 0;
    int status = 0;
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        claim got;
        int r = claims_read(store, "race", &got, &err);
        if (r != 1)
            fail_msg("a read racing the writer failed: %s", err.message);
        assert_true(got.revision >= last);
        last = got.revision;
        reads++;
        if (done == child)
            break;
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(reads > 1);
    claims_store_free(store);
}

static void plant_text(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_whole(path, (const unsigned char *)text, strlen(text));
}

/* A store of layout 2: each claim keeps its revision and body, a
 * tombstone stays a tombstone, the JSON files go, and the marker says 3. */
static void a_store_of_json_files_is_moved_into_claim_files(void **state)
{
    char url[512];
    store_fixture_fresh_url(&fixture, url, sizeof(url));
    const char *dir = url + strlen("dir://");
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
    assert_int_equal(system(cmd), 0);
    claim web1 = versioned_claim("web1", 4);
    char *body = claim_to_json(&web1), *envelope = NULL;
    assert_true(asprintf(&envelope, "{\"revision\":41,\"claim\":%s}", body) > 0);
    plant_text(dir, "web1.json", envelope);
    plant_text(dir, "gone.json", "{\"revision\":42,\"deleted\":true}");
    plant_text(dir, ".revision", "1000\n");
    plant_text(dir, "junk.json", "{");
    plant_text(dir, ".layout", "{\"layout\":2}\n");
    free(body);
    free(envelope);

    claim_store *store = NULL;
    act_error err = {0};
    assert_int_equal(claims_store_open(url, NULL, &store, &err), 0);
    assert_int_equal(claims_store_check_layout(store, &err), 0);
    claim got;
    assert_int_equal(claims_read(store, "web1", &got, &err), 1);
    assert_int_equal(got.revision, 41);
    assert_true(same_claim(&got, &web1));
    assert_int_equal(claims_read(store, "gone", &got, &err), 0);
    /* The tombstone's revision still counts: a write after it is above. */
    claim again = versioned_claim("gone", 5);
    uint64_t written = 0;
    assert_int_equal(claims_cas(store, "gone", 0, &again, &written, NULL, &err), 0);
    assert_true(written > 42);
    char path[600];
    snprintf(path, sizeof(path), "%s/web1.json", dir);
    assert_int_equal(access(path, F_OK), -1);
    /* A JSON file that held no claim is left as it was, and is no claim. */
    snprintf(path, sizeof(path), "%s/junk.json", dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(claims_read(store, "junk", &got, &err), 0);
    size_t len;
    snprintf(path, sizeof(path), "%s/.layout", dir);
    unsigned char *marker = read_whole(path, &len);
    assert_memory_equal(marker, "{\"layout\":3}", 12);
    free(marker);
    assert_int_equal(claims_store_check_layout(store, &err), 0);
    claims_store_free(store);
}

/* A claim file whose both slots fail their checksums (damage, a hand
 * edit): every read names the file and says what to do, and a write is
 * refused, leaving the file as it was. */
static void a_damaged_claim_file_is_named_and_left_alone(void **state)
{
    char url[512];
    uint64_t revision = 0;
    claim_store *store = store_with_claim(url, sizeof(url), "hurt", &revision);
    act_error err = {0};
    char path[600];
    snprintf(path, sizeof(path), "%s/hurt.claim", url + strlen("dir://"));
    size_t len;
    unsigned char *image = read_whole(path, &len);
    image[100] ^= 0xff; /* slot 0's body; slot 1 was never written */
    write_whole(path, image, len);
    claim got;
    assert_int_equal(claims_read(store, "hurt", &got, &err), -EIO);
    assert_non_null(strstr(err.message, "hurt.claim"));
    assert_non_null(strstr(err.message, "checksums"));
    assert_non_null(strstr(err.message, "import"));
    claim next = versioned_claim("hurt", 2);
    assert_true(claims_cas(store, "hurt", revision, &next, NULL, NULL, &err) < 0);
    size_t after_len;
    unsigned char *after = read_whole(path, &after_len);
    assert_int_equal(after_len, len);
    assert_memory_equal(after, image, len);
    free(after);
    free(image);
    claims_store_free(store);
}

static int setup(void **state)
{
    return store_fixture_setup(&fixture, "dir") == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    store_fixture_teardown(&fixture);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_power_cut_leaves_the_old_claim_or_the_new_one),
        cmocka_unit_test(readers_racing_a_writer_see_whole_claims),
        cmocka_unit_test(a_store_of_json_files_is_moved_into_claim_files),
        cmocka_unit_test(a_damaged_claim_file_is_named_and_left_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
