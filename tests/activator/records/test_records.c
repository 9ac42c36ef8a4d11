/* The daemon's on-disk records round-trip, and damaged ones are named. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/records/records.h"
#include "common/cleanup.h"
#include "common/fileio.h"

typedef struct fixture {
    char dir[64];
    int state_fd;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/act-records-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    f->state_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *state = f;
    return f->state_fd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char command[128];
    snprintf(command, sizeof(command), "rm -rf '%s'", f->dir);
    int r = system(command);
    close(f->state_fd);
    free(f);
    return r;
}

static rec_generation_record sample_record(void)
{
    rec_generation_record record = {
        .host = "web1",
        .generation = 7,
        .session = 12,
        .admission_revision = 4242,
        .incarnation = "inc-abc",
        .build = {.version = "v2", .digest = "aa", .build_digest = "bb"},
        .phase = REC_GEN_SERVING,
        .pid = 31337,
        .started_usec = 1700000000000000ull,
    };
    return record;
}

static void generation_record_round_trips(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    _cleanup_close_ int host_fd = rec_open_host(f->state_fd, "web1", &err);
    assert_true(host_fd >= 0);

    rec_generation_record written = sample_record();
    assert_int_equal(rec_write_generation(host_fd, &written, &err), 0);
    written.generation = 9;
    written.replica_pid = 31338;
    assert_int_equal(rec_write_generation(host_fd, &written, &err), 0);

    rec_generation_record read = {0};
    assert_int_equal(rec_read_generation(host_fd, "web1", 7, &read, &err), 0);
    assert_string_equal(read.host, "web1");
    assert_int_equal(read.generation, 7);
    assert_int_equal(read.session, 12);
    assert_int_equal(read.admission_revision, 4242);
    assert_string_equal(read.incarnation, "inc-abc");
    assert_string_equal(read.build.version, "v2");
    assert_string_equal(read.build.build_digest, "bb");
    assert_int_equal(read.phase, REC_GEN_SERVING);
    assert_int_equal(read.pid, 31337);
    assert_int_equal(read.started_usec, 1700000000000000ull);
    /* No replica: none is written, and none read back. */
    assert_int_equal(read.replica_pid, 0);
    assert_int_equal(rec_read_generation(host_fd, "web1", 9, &read, &err), 0);
    assert_int_equal(read.replica_pid, 31338);

    /* A temp file left by a crash mid-write is not a record. */
    _cleanup_close_ int gen_fd = openat(host_fd, "generations", O_RDONLY | O_DIRECTORY);
    assert_int_equal(act_write_atomic(gen_fd, ".8.json.tmp-1", "{", 1, 0644, &err), 0);

    _cleanup_free_ uint64_t *numbers = NULL;
    size_t count = 0;
    assert_int_equal(rec_list_generations(host_fd, &numbers, &count, &err), 0);
    assert_int_equal(count, 2);
    assert_int_equal(numbers[0], 7);
    assert_int_equal(numbers[1], 9);

    assert_int_equal(rec_remove_generation(host_fd, 7, &err), 0);
    assert_int_equal(rec_remove_generation(host_fd, 7, &err), 0);
    assert_int_equal(rec_read_generation(host_fd, "web1", 7, &read, &err), -ENOENT);
}

static void damaged_record_names_the_field(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    _cleanup_close_ int host_fd = rec_open_host(f->state_fd, "web1", &err);
    _cleanup_close_ int gen_fd = openat(host_fd, "generations", O_RDONLY | O_DIRECTORY);
    const char *broken = "{\"host\":\"web1\",\"generation\":3,\"session\":\"twelve\"}";
    assert_int_equal(act_write_atomic(gen_fd, "3.json", broken, strlen(broken), 0644, &err), 0);
    rec_generation_record read = {0};
    assert_int_equal(rec_read_generation(host_fd, "web1", 3, &read, &err), -EBADMSG);
    assert_non_null(strstr(err.message, "host web1"));
    assert_non_null(strstr(err.message, "\"session\""));

    assert_int_equal(act_write_atomic(gen_fd, "4.json", "not json", 8, 0644, &err), 0);
    assert_int_equal(rec_read_generation(host_fd, "web1", 4, &read, &err), -EBADMSG);
    assert_non_null(strstr(err.message, "not a JSON object"));

    /* A record copied under another number is refused, not trusted. */
    rec_generation_record record = sample_record();
    assert_int_equal(rec_write_generation(host_fd, &record, &err), 0);
    assert_int_equal(renameat(gen_fd, "7.json", gen_fd, "5.json"), 0);
    assert_int_equal(rec_read_generation(host_fd, "web1", 5, &read, &err), -EBADMSG);
    assert_non_null(strstr(err.message, "generation 7"));
}

static void bad_host_name_creates_nothing(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    assert_int_equal(rec_open_host(f->state_fd, "../escape", &err), -EINVAL);
    assert_non_null(strstr(err.message, "host name"));
    struct stat st;
    assert_int_equal(fstatat(f->state_fd, "hosts", &st, 0), -1);
    assert_int_equal(errno, ENOENT);
}

static void build_state_and_checkpoint(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    _cleanup_close_ int host_fd = rec_open_host(f->state_fd, "db", &err);

    rec_build_state read = {0};
    assert_int_equal(rec_read_build_state(host_fd, "db", &read, &err), -ENOENT);
    rec_build_state written = {.build = {.version = "v1", .digest = "d1", .build_digest = "b1"},
                               .generation = 3,
                               .session = 4,
                               .written_usec = 99};
    assert_int_equal(rec_write_build_state(host_fd, &written, &err), 0);
    assert_int_equal(rec_read_build_state(host_fd, "db", &read, &err), 0);
    assert_string_equal(read.build.version, "v1");
    assert_int_equal(read.generation, 3);
    assert_int_equal(read.session, 4);

    /* The gate's note: the same build again keeps the file (and the
     * generation that first ran it); another build replaces it. */
    struct stat before, after;
    assert_int_equal(fstatat(host_fd, "build-state.json", &before, 0), 0);
    rec_build_state again = written;
    again.generation = 5;
    again.session = 6;
    assert_int_equal(rec_note_build_state(host_fd, "db", &again, &err), 0);
    assert_int_equal(fstatat(host_fd, "build-state.json", &after, 0), 0);
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(rec_read_build_state(host_fd, "db", &read, &err), 0);
    assert_int_equal(read.generation, 3);
    rec_build_state other = again;
    snprintf(other.build.version, sizeof(other.build.version), "v2");
    assert_int_equal(rec_note_build_state(host_fd, "db", &other, &err), 1);
    assert_int_equal(rec_read_build_state(host_fd, "db", &read, &err), 0);
    assert_string_equal(read.build.version, "v2");
    assert_int_equal(read.generation, 5);
    other.generation = 7;
    snprintf(other.build.digest, sizeof(other.build.digest), "d2");
    assert_int_equal(rec_note_build_state(host_fd, "db", &other, &err), 1);
    /* An unreadable file is rewritten, not trusted. */
    assert_int_equal(unlinkat(host_fd, "build-state.json", 0), 0);
    int planted = openat(host_fd, "build-state.json", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(planted >= 0);
    assert_int_equal(write(planted, "{", 1), 1);
    close(planted);
    assert_int_equal(rec_note_build_state(host_fd, "db", &other, &err), 1);
    assert_int_equal(rec_read_build_state(host_fd, "db", &read, &err), 0);
    assert_int_equal(read.generation, 7);

    char checkpoint[64] = "stale";
    assert_int_equal(rec_read_checkpoint(host_fd, "db", checkpoint, sizeof(checkpoint), &err), 0);
    assert_string_equal(checkpoint, "");
    assert_int_equal(rec_write_checkpoint(host_fd, "snap-42", &err), 0);
    assert_int_equal(rec_read_checkpoint(host_fd, "db", checkpoint, sizeof(checkpoint), &err), 0);
    assert_string_equal(checkpoint, "snap-42");
}

/* A move's probe deadline outlives the daemon that set it; a damaged
 * record is an error naming the field, not a deadline of 0. */
static void probe_record(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    _cleanup_close_ int host_fd = rec_open_host(f->state_fd, "db", &err);
    rec_probe probe = {0};
    assert_int_equal(rec_read_probe(host_fd, "db", &probe, &err), 0);
    rec_probe written = {.op_id = "move-1", .deadline_usec = 1234};
    assert_int_equal(rec_write_probe(host_fd, &written, &err), 0);
    assert_int_equal(rec_read_probe(host_fd, "db", &probe, &err), 1);
    assert_string_equal(probe.op_id, "move-1");
    assert_int_equal(probe.deadline_usec, 1234);
    int planted = openat(host_fd, "probe.json", O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_true(planted >= 0);
    assert_int_equal(write(planted, "{\"op\":\"m\"}", 10), 10);
    close(planted);
    assert_true(rec_read_probe(host_fd, "db", &probe, &err) < 0);
    assert_non_null(strstr(err.message, "deadline_usec"));
    assert_int_equal(rec_remove_probe(host_fd, &err), 0);
    assert_int_equal(rec_remove_probe(host_fd, &err), 0);
    assert_int_equal(rec_read_probe(host_fd, "db", &probe, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(generation_record_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_record_names_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_host_name_creates_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(build_state_and_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(probe_record, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
