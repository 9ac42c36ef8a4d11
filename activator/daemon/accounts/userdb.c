/* The hosts' dynamic users in the box's user database (userdb.h). The
 * answers are built from the records alone (ad_userdb_answer); the socket
 * side only frames them, on the daemon's loop, where every step is a
 * non-blocking read or write of a few hundred bytes. A client is anyone on
 * the box: its call is bounded (USERDB_CALL_MAX), so are the connections
 * open at once (USERDB_CONNECTIONS_MAX) and the time one may stay
 * (USERDB_IDLE_USEC), and every event of this service runs at the loop's
 * lowest priority: a host's processes reach the socket too (their own
 * names resolve), and one that floods it delays names, never a wake. */
#include "activator/daemon/accounts/userdb.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-id128.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/names.h"

/* A call is a method name and a uid or a name: far below this. */
#define USERDB_CALL_MAX 4096
/* Lookups are one call per connection and answered at once. */
#define USERDB_CONNECTIONS_MAX 64
#define USERDB_IDLE_USEC (5 * 1000 * 1000ull)

#define ERROR_NO_RECORD "io.systemd.UserDatabase.NoRecordFound"
#define ERROR_BAD_SERVICE "io.systemd.UserDatabase.BadService"
#define ERROR_CONFLICT "io.systemd.UserDatabase.ConflictingRecordFound"
#define ERROR_EXPECTED_MORE "org.varlink.service.ExpectedMore"
#define ERROR_NO_METHOD "org.varlink.service.MethodNotFound"
#define ERROR_BAD_PARAMETER "org.varlink.service.InvalidParameter"

/* ---- the answers ------------------------------------------------------ */

typedef struct reply {
    char *text;
    size_t len, cap;
    bool failed; /* out of memory */
} reply;

static void put(reply *r, json_object *message)
{
    const char *text = json_object_to_json_string_ext(message, JSON_C_TO_STRING_PLAIN);
    size_t n = strlen(text) + 1; /* the NUL frames it */
    if (r->failed)
        return;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 512;
        while (cap < r->len + n)
            cap *= 2;
        char *grown = realloc(r->text, cap);
        if (!grown) {
            r->failed = true;
            return;
        }
        r->text = grown;
        r->cap = cap;
    }
    memcpy(r->text + r->len, text, n);
    r->len += n;
}

static void put_error(reply *r, const char *error, const char *parameter)
{
    _cleanup_(json_object_putp) json_object *message = json_object_new_object();
    json_object *parameters = json_object_new_object();
    if (parameter)
        act_json_add_string(parameters, "parameter", parameter);
    act_json_add_string(message, "error", error);
    json_object_object_add(message, "parameters", parameters);
    put(r, message);
}

/* The user (or, with group, the group) record of host's uid, as systemd's
 * own dynamic users look: locked, no shell, no home of its own. */
static json_object *record_of(const char *machine_id, uint32_t uid, const char *host, bool group)
{
    char name[sizeof(AD_USERDB_NAME_PREFIX) + ACT_NAME_MAX];
    snprintf(name, sizeof(name), AD_USERDB_NAME_PREFIX "%s", host);
    json_object *record = json_object_new_object();
    act_json_add_string(record, group ? "groupName" : "userName", name);
    act_json_add_u64(record, "gid", uid);
    if (!group) {
        act_json_add_u64(record, "uid", uid);
        char real_name[sizeof("activator host ") + ACT_NAME_MAX];
        snprintf(real_name, sizeof(real_name), "activator host %s", host);
        act_json_add_string(record, "realName", real_name);
        act_json_add_string(record, "homeDirectory", "/");
        act_json_add_string(record, "shell", "/usr/sbin/nologin");
        json_object_object_add(record, "locked", json_object_new_boolean(true));
    }
    act_json_add_string(record, "disposition", "dynamic");
    /* systemd's clients refuse a record that does not say, for this
     * machine, which service it came from. */
    json_object *status = json_object_new_object();
    json_object *here = json_object_new_object();
    act_json_add_string(here, "service", AD_USERDB_SERVICE);
    json_object_object_add(status, machine_id, here);
    json_object_object_add(record, "status", status);
    return record;
}

static void put_record(reply *r, const char *machine_id, uint32_t uid, const char *host, bool group,
                       bool continues)
{
    _cleanup_(json_object_putp) json_object *message = json_object_new_object();
    json_object *parameters = json_object_new_object();
    json_object_object_add(parameters, "record", record_of(machine_id, uid, host, group));
    json_object_object_add(parameters, "incomplete", json_object_new_boolean(false));
    json_object_object_add(message, "parameters", parameters);
    if (continues)
        json_object_object_add(message, "continues", json_object_new_boolean(true));
    put(r, message);
}

/* The host a user or group name names, if it is one of ours. */
static const char *host_of_name(const char *name)
{
    size_t prefix = strlen(AD_USERDB_NAME_PREFIX);
    return strncmp(name, AD_USERDB_NAME_PREFIX, prefix) == 0 ? name + prefix : NULL;
}

/* A lookup by id and/or name (either may be absent), or of every record
 * when both are. */
static void answer_lookup(reply *r, const ad_dynamic_users *users, const char *machine_id,
                          json_object *parameters, bool group, bool more)
{
    const char *id_key = group ? "gid" : "uid", *name_key = group ? "groupName" : "userName";
    json_object *id = NULL, *name = NULL;
    json_object_object_get_ex(parameters, id_key, &id);
    json_object_object_get_ex(parameters, name_key, &name);
    if ((id && !json_object_is_type(id, json_type_int)) ||
        (name && !json_object_is_type(name, json_type_string))) {
        put_error(r, ERROR_BAD_PARAMETER,
                  id && !json_object_is_type(id, json_type_int) ? id_key : name_key);
        return;
    }
    if (!id && !name) {
        if (!more) {
            put_error(r, ERROR_EXPECTED_MORE, NULL);
            return;
        }
        size_t cursor = 0;
        uint32_t uid = 0, previous_uid = 0;
        const char *host = NULL, *previous = NULL;
        /* Each record goes out once the next is known, so the last one
         * alone goes without "continues". */
        while (ad_dynamic_users_next(users, &cursor, &uid, &host)) {
            if (previous)
                put_record(r, machine_id, previous_uid, previous, group, true);
            previous = host;
            previous_uid = uid;
        }
        if (previous)
            put_record(r, machine_id, previous_uid, previous, group, false);
        else
            put_error(r, ERROR_NO_RECORD, NULL);
        return;
    }
    int64_t wanted = id ? json_object_get_int64(id) : -1;
    const char *by_id = id && wanted >= 0 && wanted <= UINT32_MAX
                            ? ad_dynamic_users_owner(users, (uint32_t)wanted)
                            : NULL;
    const char *by_name = name ? host_of_name(json_object_get_string(name)) : NULL;
    uint32_t named_uid = by_name ? ad_dynamic_users_uid_of(users, by_name) : 0;
    if (name && !named_uid)
        by_name = NULL;
    if (id && name) {
        if (!by_id && !by_name)
            put_error(r, ERROR_NO_RECORD, NULL);
        else if (!by_id || !by_name || strcmp(by_id, by_name) != 0)
            put_error(r, ERROR_CONFLICT, NULL);
        else
            put_record(r, machine_id, (uint32_t)wanted, by_id, group, false);
        return;
    }
    if (id && by_id)
        put_record(r, machine_id, (uint32_t)wanted, by_id, group, false);
    else if (name && by_name)
        put_record(r, machine_id, named_uid, by_name, group, false);
    else
        put_error(r, ERROR_NO_RECORD, NULL);
}

int ad_userdb_answer(const ad_dynamic_users *users, const char *machine_id, const char *request,
                     size_t len, char **out, size_t *out_len)
{
    assert(users && machine_id && request && out && out_len);
    *out = NULL;
    *out_len = 0;
    reply r = {0};
    _cleanup_(json_tokener_freep) json_tokener *tokener = json_tokener_new();
    if (!tokener)
        return -ENOMEM;
    _cleanup_(json_object_putp) json_object *call =
        len <= USERDB_CALL_MAX ? json_tokener_parse_ex(tokener, request, (int)len) : NULL;
    bool complete = call && json_tokener_get_parse_end(tokener) == len;
    json_object *method = NULL, *parameters = NULL, *more = NULL, *oneway = NULL;
    if (!complete || !json_object_is_type(call, json_type_object) ||
        !json_object_object_get_ex(call, "method", &method) ||
        !json_object_is_type(method, json_type_string)) {
        put_error(&r, ERROR_BAD_PARAMETER, "method");
    } else {
        json_object_object_get_ex(call, "parameters", &parameters);
        json_object_object_get_ex(call, "more", &more);
        json_object_object_get_ex(call, "oneway", &oneway);
        if (oneway && json_object_get_boolean(oneway))
            return 0;
        const char *name = json_object_get_string(method);
        bool user = strcmp(name, "io.systemd.UserDatabase.GetUserRecord") == 0;
        bool group = strcmp(name, "io.systemd.UserDatabase.GetGroupRecord") == 0;
        bool memberships = strcmp(name, "io.systemd.UserDatabase.GetMemberships") == 0;
        json_object *service = NULL;
        if (parameters && !json_object_is_type(parameters, json_type_object))
            put_error(&r, ERROR_BAD_PARAMETER, "parameters");
        else if (!user && !group && !memberships)
            put_error(&r, ERROR_NO_METHOD, NULL);
        else if (!parameters || !json_object_object_get_ex(parameters, "service", &service) ||
                 !json_object_is_type(service, json_type_string) ||
                 strcmp(json_object_get_string(service), AD_USERDB_SERVICE) != 0)
            put_error(&r, ERROR_BAD_SERVICE, NULL);
        else if (memberships) /* a host's user is in its own group alone */
            put_error(&r, ERROR_NO_RECORD, NULL);
        else
            answer_lookup(&r, users, machine_id, parameters, group,
                          more && json_object_get_boolean(more));
    }
    if (r.failed) {
        free(r.text);
        return -ENOMEM;
    }
    *out = r.text;
    *out_len = r.len;
    return 0;
}

void ad_userdb_bypass_self(void)
{
    const char *before = getenv("SYSTEMD_BYPASS_USERDB");
    if (!before || !before[0]) {
        setenv("SYSTEMD_BYPASS_USERDB", AD_USERDB_SERVICE, 1);
        return;
    }
    /* "1" (or another true boolean) bypasses every service already. */
    if (strchr("1yYtT", before[0]) || strcmp(before, "on") == 0)
        return;
    _cleanup_free_ char *both = NULL;
    if (asprintf(&both, "%s:%s", before, AD_USERDB_SERVICE) >= 0)
        setenv("SYSTEMD_BYPASS_USERDB", both, 1);
}

/* ---- the socket --------------------------------------------------------- */

typedef struct connection connection;

struct ad_userdb {
    sd_event *loop;
    const ad_dynamic_users *users;
    char machine_id[SD_ID128_STRING_MAX];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int fd;
    dev_t dev;
    ino_t ino;
    sd_event_source *listening;
    connection *connections;
    size_t n_connections;
};

struct connection {
    ad_userdb *userdb;
    connection *next;
    int fd;
    sd_event_source *io, *idle;
    char in[USERDB_CALL_MAX + 1];
    size_t n_in;
    char *out;
    size_t out_len, out_sent;
    bool peer_done; /* the client shut its side: close once out is sent */
};

static void connection_free(connection *c)
{
    ad_userdb *userdb = c->userdb;
    for (connection **p = &userdb->connections; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    userdb->n_connections--;
    sd_event_source_disable_unref(c->io);
    sd_event_source_disable_unref(c->idle);
    close(c->fd);
    free(c->out);
    free(c);
}

/* Sends what it can of the answer; false on a failed write. */
static bool send_answers(connection *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN;
        c->out_sent += (size_t)n;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_sent = 0;
    return true;
}

/* Answers the calls in the buffer one at a time, each only once the last
 * answer is sent: a client that sends calls and reads nothing holds one
 * answer, never one per call. False when the connection must go (a call
 * too long, a failed write, no memory). */
static bool answer_calls(connection *c)
{
    char *end;
    while (!c->out_len && (end = memchr(c->in, '\0', c->n_in))) {
        size_t len = (size_t)(end - c->in);
        if (ad_userdb_answer(c->userdb->users, c->userdb->machine_id, c->in, len, &c->out,
                             &c->out_len) < 0)
            return false;
        c->n_in -= len + 1;
        memmove(c->in, end + 1, c->n_in);
        if (!send_answers(c))
            return false;
    }
    return c->n_in < USERDB_CALL_MAX;
}

static int on_connection(sd_event_source *source, int fd, uint32_t events, void *userdata)
{
    connection *c = userdata;
    bool failed = (events & EPOLLERR) != 0;
    if (!failed && c->out_len && !send_answers(c))
        failed = true;
    if (!failed && !c->out_len && !c->peer_done && (events & EPOLLIN)) {
        ssize_t n = recv(fd, c->in + c->n_in, USERDB_CALL_MAX - c->n_in, MSG_DONTWAIT);
        if (n == 0)
            c->peer_done = true;
        else if (n > 0)
            c->n_in += (size_t)n;
        else if (errno != EAGAIN)
            failed = true;
    }
    if (!failed && !answer_calls(c))
        failed = true;
    if (failed || (c->peer_done && !c->out_len)) {
        connection_free(c);
        return 0;
    }
    /* Reads only while no answer waits to be sent. */
    (void)sd_event_source_set_io_events(source, c->out_len ? EPOLLOUT : EPOLLIN);
    return 0;
}

static int on_idle(sd_event_source *source, uint64_t usec, void *userdata)
{
    connection_free(userdata);
    return 0;
}

static int on_accept(sd_event_source *source, int fd, uint32_t events, void *userdata)
{
    ad_userdb *userdb = userdata;
    int client = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0)
        return 0;
    if (userdb->n_connections >= USERDB_CONNECTIONS_MAX) {
        close(client); /* the client's lookup falls back to the next source */
        return 0;
    }
    connection *c = calloc(1, sizeof(*c));
    if (!c) {
        close(client);
        return 0;
    }
    *c = (connection){.userdb = userdb, .fd = client, .next = userdb->connections};
    userdb->connections = c;
    userdb->n_connections++;
    if (sd_event_add_io(userdb->loop, &c->io, client, EPOLLIN, on_connection, c) < 0 ||
        sd_event_source_set_priority(c->io, SD_EVENT_PRIORITY_IDLE) < 0 ||
        sd_event_add_time_relative(userdb->loop, &c->idle, CLOCK_MONOTONIC, USERDB_IDLE_USEC, 0,
                                   on_idle, c) < 0)
        connection_free(c);
    return 0;
}

int ad_userdb_start(sd_event *loop, const char *directory, const ad_dynamic_users *users,
                    ad_userdb **out, act_error *err)
{
    assert(loop && directory && users && out);
    *out = NULL;
    struct stat st;
    if (stat(directory, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0; /* no userdb on this box */
    _cleanup_free_ ad_userdb *userdb = calloc(1, sizeof(*userdb));
    if (!userdb)
        return act_error_set(err, ENOMEM, "out of memory");
    *userdb = (ad_userdb){.loop = loop, .users = users, .fd = -1};
    sd_id128_t id;
    int r = sd_id128_get_machine(&id);
    if (r < 0)
        return act_error_set(err, -r, "the user database: no machine id (/etc/machine-id): %s",
                             strerror(-r));
    sd_id128_to_string(id, userdb->machine_id);
    int n = snprintf(userdb->path, sizeof(userdb->path), "%s/%s", directory, AD_USERDB_SERVICE);
    if (n < 0 || (size_t)n >= sizeof(userdb->path))
        return act_error_set(err, ENAMETOOLONG,
                             "the user database: %s/%s is too long for a socket's path", directory,
                             AD_USERDB_SERVICE);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return act_error_set(err, errno, "the user database: socket: %s", strerror(errno));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, userdb->path, strlen(userdb->path));
    /* A previous daemon's socket: the one that answers is the newest. */
    (void)unlink(userdb->path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || chmod(userdb->path, 0666) < 0 ||
        listen(fd, USERDB_CONNECTIONS_MAX) < 0 || stat(userdb->path, &st) < 0)
        return act_error_set(err, errno, "the user database: cannot listen on %s: %s", userdb->path,
                             strerror(errno));
    userdb->dev = st.st_dev;
    userdb->ino = st.st_ino;
    r = sd_event_add_io(loop, &userdb->listening, fd, EPOLLIN, on_accept, userdb);
    if (r >= 0)
        r = sd_event_source_set_priority(userdb->listening, SD_EVENT_PRIORITY_IDLE);
    if (r < 0) {
        sd_event_source_disable_unref(userdb->listening);
        unlink(userdb->path);
        return act_error_set(err, -r, "the user database: cannot watch %s: %s", userdb->path,
                             strerror(-r));
    }
    userdb->fd = TAKE_FD(fd);
    *out = TAKE_PTR(userdb);
    return 0;
}

void ad_userdb_free(ad_userdb *userdb)
{
    if (!userdb)
        return;
    while (userdb->connections)
        connection_free(userdb->connections);
    sd_event_source_disable_unref(userdb->listening);
    /* Another daemon may have bound the path since (a handover): only our
     * own socket is removed. */
    struct stat st;
    if (stat(userdb->path, &st) == 0 && st.st_dev == userdb->dev && st.st_ino == userdb->ino)
        unlink(userdb->path);
    close(userdb->fd);
    free(userdb);
}
