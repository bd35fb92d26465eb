/*
 * persist_test.c - the store at runtime: restart loses
 * nothing; durable writes survive kill -9 in the middle of a write storm;
 * a read-only file, a full disk, a locked database and a damaged file
 * leave the runtime serving from memory with the failure reported, and
 * writes land once the file can be written again; secrets sealed with the
 * configured key, a wrong key refused at boot.
 *
 * The read-only and full-disk cases use a real file system the test
 * mounts (tmpfs: remounted read-only, or sized small and filled), so the
 * test runs as root - as CI does here; without root it fails saying so.
 * The MCP server is the real SDK server test/peers/inject.mjs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "actors/persister.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "peer.h"
#include "persist/store.h"
#include "rtutil.h"
#include "runtime/runtime_impl.h"
#include "testutil.h"

#define KEY1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEY2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

extern char **environ;

static peer srv; /* inject.mjs over Streamable HTTP, for every case */

/* A temporary folder (and, with mount, a tmpfs of size bytes on it). */
typedef struct place {
	char dir[64]; /* the folder */
	char db[128]; /* dir/mcpkeep.db */
	int  mounted; /* a tmpfs is mounted on dir */
} place;

static void
place_open(place *pl, long tmpfs_size)
{
	snprintf(pl->dir, sizeof(pl->dir), "/tmp/mk-persist-XXXXXX");
	CHECK(mkdtemp(pl->dir) != NULL);
	snprintf(pl->db, sizeof(pl->db), "%s/mcpkeep.db", pl->dir);
	pl->mounted = 0;
	if (tmpfs_size > 0) {
		char opts[64];
		snprintf(opts, sizeof(opts), "size=%ld", tmpfs_size);
		if (mount("tmpfs", pl->dir, "tmpfs", 0, opts) != 0) {
			fprintf(stderr,
			        "cannot mount a tmpfs on %s (%s): this test makes a real read-only and a real full file system and needs root\n",
			        pl->dir, strerror(errno));
			CHECK(0);
		}
		pl->mounted = 1;
	}
}

static void
place_remount(place *pl, int readonly)
{
	CHECK_EQ(mount("tmpfs", pl->dir, "tmpfs",
	               MS_REMOUNT | (readonly ? MS_RDONLY : 0), NULL),
	         0);
}

static void
place_close(place *pl)
{
	char cmd[128];

	if (pl->mounted) {
		CHECK_EQ(umount2(pl->dir, MNT_DETACH), 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", pl->dir);
	CHECK_EQ(system(cmd), 0);
}

/* A runtime on store path with key (NULL: none), logging to log_fd. */
static int
open_with(mk_runtime **rt, sub *sb, const char *path, const char *key,
          int log_fd)
{
	static int seq;
	mk_options o;
	char       url[64];
	int        rv;

	snprintf(url, sizeof(url), "inproc://persist-test-%d", ++seq);
	mk_options_init(&o, sizeof(o));
	o.log_level      = MK_LOG_WARN;
	o.stream_url     = url;
	o.store_path     = path;
	o.encryption_key = key;
	if (log_fd >= 0) {
		o.log_fd = log_fd;
	}
	if ((rv = mk_runtime_open(rt, &o)) == 0 && sb != NULL) {
		sub_open(sb, mk_stream_url(*rt));
	}
	return (rv);
}

static int
add_client(mk_runtime *rt, const char *name)
{
	char *err = NULL;
	int   rv  = add(
	           rt, &err,
	           "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
	           name, srv.port);

	if (rv != 0) {
		fprintf(stderr, "add %s: %s\n", name, err);
	}
	mk_free(err);
	return (rv);
}

/* The runtime serves: a tool call on client name answers. */
static void
serves(mk_runtime *rt, const char *name)
{
	int   rc;
	char *out = call_text(rt, name, "echo",
	                      "{\"message\": \"still here\"}", &rc);

	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "still here") != NULL);
	free(out);
}

static int
has_client(mk_runtime *rt, const char *name)
{
	char *out = NULL;
	char  quoted[80];
	int   found;

	CHECK_EQ(mk_clients_json(rt, "{\"limit\": 100}", &out), 0);
	snprintf(quoted, sizeof(quoted), "\"name\":\"%s\"", name);
	found = strstr(out, quoted) != NULL;
	mk_free(out);
	return (found);
}

static int
store_state(mk_runtime *rt)
{
	mk_stats st = MK_STATS_INIT;

	CHECK_EQ(mk_runtime_stats(rt, &st, WAIT_MS), 0);
	return (st.store_state);
}

/* Lines of the file at path containing needle. */
static int
count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char  line[4096];
	int   n = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		n += strstr(line, needle) != NULL;
	}
	fclose(f);
	return (n);
}

/* ---- restart ------------------------------------------------------------ */

/* A restart loses nothing: clients and tools come back from the store; a
 * per-call client with known tools makes no discovery request; unchanged
 * checks write no tool list. */
static void
restart_restores(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	mk_stats    st  = MK_STATS_INIT;
	char       *err = NULL;
	json_t     *v;
	long        before;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	CHECK_EQ(add_client(rt, "r_pc"), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"r_st\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\"}",
	            srv.port),
	        0);
	/* several passing checks later: still one write per client */
	for (int i = 0;; i++) {
		CHECK_EQ(mk_runtime_stats(rt, &st, WAIT_MS), 0);
		if (st.ticks >= 4) {
			break;
		}
		CHECK(i < 400);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the tick counter */
	}
	CHECK_EQ(ps_stat(rt, "tool_writes"), 2);
	rt_close(&rt, &sb);

	before = admin(srv.port, "/admin/counters", NULL, "new_sessions");
	rt     = rt_open_store(&sb, pl.db);
	v      = view_of(rt, "r_pc");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	CHECK(json_array_size(json_object_get(v, "tools")) >= 10);
	json_decref(v);
	v = view_of(rt, "r_st");
	CHECK(strcmp(vstr(v, "connection_mode"), "sticky") == 0);
	json_decref(v);
	/* the sticky one connected again; the per-call one discovered
	 * nothing */
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "new_sessions"),
	         before + 1);
	/* restored tools were not written again */
	CHECK_EQ(ps_stat(rt, "tool_writes"), 0);
	CHECK_EQ(mk_client_remove(rt, "r_pc", &err), 0);
	rt_close(&rt, &sb);

	rt = rt_open_store(&sb, pl.db);
	CHECK(!has_client(rt, "r_pc") && has_client(rt, "r_st"));
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* A stored client that no longer starts (its config refused: a newer
 * version's field, a hand edit) is listed as `error`, its last_failure
 * saying why, with no actor: every ask but remove is refused, and remove
 * takes it out of the store. */
static void
stored_error(void)
{
	place         pl;
	sub           sb;
	mk_runtime   *rt;
	sqlite3      *db;
	sqlite3_stmt *q;
	char         *err = NULL;
	json_t       *v, *lf;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	CHECK_EQ(add_client(rt, "r_err"), 0);
	CHECK_EQ(add_client(rt, "r_ok"), 0);
	CHECK_EQ(add_client(rt, "r_bad"), 0);
	rt_close(&rt, &sb);
	CHECK_EQ(sqlite3_open(pl.db, &db), SQLITE_OK);
	CHECK_EQ(
	        sqlite3_prepare_v2(
	                db,
	                "UPDATE mcp_clients SET config = json_set(config, '$.connection_type', 'pigeon') WHERE name = 'r_err'",
	                -1, &q, NULL),
	        SQLITE_OK);
	CHECK_EQ(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	/* a row whose name could not be shown as it is: not listed */
	CHECK_EQ(
	        sqlite3_exec(
	                db,
	                "UPDATE mcp_clients SET name = 'r\"bad', config = json_set(config, '$.connection_type', 'pigeon') WHERE name = 'r_bad'",
	                NULL, NULL, NULL),
	        SQLITE_OK);
	sqlite3_close(db);

	rt = rt_open_store(&sb, pl.db);
	v  = view_of(rt, "r_err");
	CHECK(strcmp(vstr(v, "state"), "error") == 0);
	lf = json_object_get(v, "last_failure");
	CHECK(strcmp(json_string_value(json_object_get(lf, "stage")),
	             "connect") == 0);
	CHECK(strncmp(json_string_value(json_object_get(lf, "message")),
	              "the stored client could not be started: ", 40) == 0);
	CHECK(json_array_size(json_object_get(v, "tools")) >= 10);
	json_decref(v);
	v = view_of(rt, "r_ok");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	/* the list filters on it, as on any state */
	char *page = NULL;
	CHECK_EQ(mk_clients_json(rt, "{\"state\": \"error\"}", &page), 0);
	CHECK(strstr(page, "\"total_count\":1") != NULL);
	mk_free(page);
	CHECK_EQ(mk_client_enable(rt, "r_err", &err), MK_ESTATE);
	CHECK(strcmp(err,
	             "MCP client r_err could not be started from the store: remove it, or declare it again") ==
	      0);
	mk_free(err);
	err = NULL;
	CHECK_EQ(mk_client_update(rt, "r_err", "{}", &err), MK_ESTATE);
	mk_free(err);
	err = NULL;
	CHECK_EQ(mk_client_remove(rt, "r_err", &err), 0);
	CHECK(!has_client(rt, "r_err"));
	rt_close(&rt, &sb);

	rt = rt_open_store(&sb, pl.db);
	CHECK(!has_client(rt, "r_err") && has_client(rt, "r_ok"));
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* ---- kill -9 in a write storm ---------------------------------------------
 */

/* The storm, in a child process: durable token writes, each acknowledged
 * on stdout after its reply, between batched 8 KiB tool lists. */
static int
storm_main(const char *path)
{
	kn_kernel *k;
	kn_stream *stream;
	kn_actor  *ps;
	kn_answer  a;
	char       err[256], tools[9000], row[256];

	CHECK_EQ(kn_stream_open(&stream, "inproc://storm", NULL, err,
	                        sizeof(err)),
	         0);
	CHECK_EQ(kn_kernel_open(&k, 0), 0);
	ps_args pa = {.path = path, .secret = KEY1, .stream = stream};
	CHECK_EQ(kn_spawn(k, PERSISTER_NAME, &persister_ops, &pa, &ps), 0);
	ps_client_msg c = {.id     = "storm",
	                   .name   = "storm",
	                   .config = "{\"name\":\"storm\"}"};
	CHECK_EQ(kn_ask_msg(ps, MSG_PS_CLIENT_PUT, CODEC_OF(ps_client_msg, &c),
	                    WAIT_MS, &a),
	         0);
	free(a.data);
	for (long i = 0;; i++) {
		size_t n = (size_t)snprintf(
		        tools, sizeof(tools),
		        "[{\"name\":\"t\",\"description\":\"%ld ", i);
		memset(tools + n, 'x', 8192);
		snprintf(tools + n + 8192, sizeof(tools) - n - 8192, "\"}]");
		char hash[32];
		snprintf(hash, sizeof(hash), "h%ld", i);
		ps_tools_msg t = {.id = "storm", .hash = hash, .tools = tools};
		CHECK_EQ(kn_tell_msg(ps, NULL, MSG_PS_TOOLS_PUT,
		                     CODEC_OF(ps_tools_msg, &t)),
		         0);
		snprintf(
		        row, sizeof(row),
		        "{\"client_id\":\"storm\",\"mode\":\"user\",\"identity\":\"u%ld\",\"access_token\":\"tok-%ld\",\"status\":\"active\"}",
		        i, i);
		ps_row_msg put = {.table = "oauth_tokens", .row = row};
		int        rv  = kn_ask_msg(ps, MSG_PS_ROW_PUT,
		                            CODEC_OF(ps_row_msg, &put), WAIT_MS, &a);
		free(a.data);
		if (rv == 0) {
			/* told "stored": acknowledge it */
			char ack[32];
			int  len = snprintf(ack, sizeof(ack), "%ld\n", i);
			CHECK_EQ(write(1, ack, (size_t)len), len);
		}
	}
}

static int
gather(void *arg, json_t *row)
{
	json_array_append(arg, row);
	return (0);
}

/* Reads the child's acknowledgement lines until it has acknowledged
 * upto (-1: until EOF); returns the last one seen, or -1. */
static int
read_acks(int fd, int upto)
{
	static char   line[32];
	static size_t ll;
	char          buf[4096];
	ssize_t       n;
	int           last = -1;

	while ((upto < 0 || last < upto) &&
	       (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				line[ll] = '\0';
				last     = atoi(line);
				ll       = 0;
			} else if (ll < sizeof(line) - 1) {
				line[ll++] = buf[i];
			}
		}
	}
	return (last);
}

/* Runs this program as "mode path port" with stdout piped to *out. */
static pid_t
spawn_self(const char *mode, const char *path, int *out)
{
	posix_spawn_file_actions_t fa;
	pid_t                      pid;
	int                        p[2];
	char                       port[16];

	snprintf(port, sizeof(port), "%d", srv.port);
	char *const argv[] = {"/proc/self/exe", (char *)mode, (char *)path,
	                      port, NULL};
	CHECK_EQ(pipe(p), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	CHECK_EQ(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	*out = p[0];
	return (pid);
}

static void
kill9(pid_t pid)
{
	int status;

	CHECK_EQ(kill(pid, SIGKILL), 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* The child of kill9_added: adds a client, says so, waits to die. */
static int
add_main(const char *path, int port)
{
	mk_runtime *rt;

	srv.port = port;
	CHECK_EQ(open_with(&rt, NULL, path, NULL, -1), 0);
	CHECK_EQ(add_client(rt, "survivor"), 0);
	CHECK_EQ(write(1, "0\n", 2), 2); /* mk_client_add returned */
	for (;;) {
		pause();
	}
}

/* A client whose add returned survives a kill -9 right after it. */
static void
kill9_added(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	int         out;
	pid_t       pid;

	place_open(&pl, 0);
	pid = spawn_self("add", pl.db, &out);
	CHECK_EQ(read_acks(out, 0), 0);
	kill9(pid);
	close(out);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK(has_client(rt, "survivor"));
	rt_close(&rt, &sb);
	place_close(&pl);
}

static void
kill9_durable(void)
{
	place pl;
	int   out, acked, more;
	pid_t pid;

	place_open(&pl, 0);
	pid = spawn_self("storm", pl.db, &out);
	/* let it acknowledge a few hundred durable writes, then kill it
	 * mid-storm */
	acked = read_acks(out, 300);
	kill9(pid);
	/* acknowledgements written before the kill still count */
	if ((more = read_acks(out, -1)) > acked) {
		acked = more;
	}
	close(out);
	fprintf(stderr, "   killed after %d acknowledged writes\n", acked + 1);
	CHECK(acked >= 300);

	/* the file opens, is intact, and holds every acknowledged write */
	sqlite3      *db;
	sqlite3_stmt *q;
	CHECK_EQ(sqlite3_open(pl.db, &db), SQLITE_OK);
	CHECK_EQ(
	        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL),
	        SQLITE_OK);
	CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
	CHECK(strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	store   *s;
	char     err[STORE_ERR_MAX];
	json_t  *rows = json_array();
	unsigned skipped;
	CHECK_EQ(store_open(&s, pl.db, STORE_RW, KEY1, err, sizeof(err)), 0);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(skipped, 0);
	char   *seen = calloc((size_t)acked + 2, 1);
	size_t  i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		int id = atoi(
		        json_string_value(json_object_get(r, "identity")) + 1);
		char want[32];
		snprintf(want, sizeof(want), "tok-%d", id);
		CHECK(strcmp(json_string_value(
		                     json_object_get(r, "access_token")),
		             want) == 0);
		if (id <= acked) {
			seen[id] = 1;
		}
	}
	for (int j = 0; j <= acked; j++) {
		if (!seen[j]) {
			fprintf(stderr, "acknowledged write %d is missing\n",
			        j);
			CHECK(0);
		}
	}
	free(seen);
	json_decref(rows);
	store_close(&s);
	place_close(&pl);
}

/* ---- a change the store refuses --------------------------------------------
 */

#define REFUSED     "the store cannot write: "
#define REFUSE_ADDS 20

static void fill(const char *dir, char *filler, size_t len);

/* Prints "ok name" or "no name" for an API change's answer rc (err): a
 * refusal is MK_ESTORE saying so.  Returns whether it was refused. */
static int
said(int rc, char *err, const char *name)
{
	char line[96];
	int  n;

	if (rc != 0 &&
	    (rc != MK_ESTORE || err == NULL ||
	     strncmp(err, REFUSED, strlen(REFUSED)) != 0)) {
		fprintf(stderr, "%s: %d %s\n", name, rc, err ? err : "");
		CHECK(0);
	}
	mk_free(err);
	n = snprintf(line, sizeof(line), "%s %s\n", rc == 0 ? "ok" : "no",
	             name);
	CHECK_EQ(write(1, line, (size_t)n), n);
	return (rc != 0);
}

/* A client's config field as JSON text (malloc'd), from its view. */
static char *
config_field(mk_runtime *rt, const char *name, const char *field)
{
	json_t *v = view_of(rt, name);
	char   *t = json_dumps(
	          json_object_get(json_object_get(v, "config"), field),
	          JSON_COMPACT | JSON_ENCODE_ANY);

	json_decref(v);
	return (t);
}

#define REFUSE_USERS 4

/* Whether a call of tool "headers" as user_<i> on the per_user_headers
 * client "hd" sends the x-api-key user_<i> submitted; if not, it must be
 * told to submit (MK_EAUTH), and *sid (if given) gets that session's id
 * (malloc'd). */
static int
user_keyed(mk_runtime *rt, int i, char **sid)
{
	char       user[32], key[48];
	mk_call    c   = {.size      = sizeof(mk_call),
	                  .client    = "hd",
	                  .tool      = "headers",
	                  .arguments = "{}"};
	mk_result *res = NULL;
	json_t    *p;
	int        rc, keyed;

	snprintf(user, sizeof(user), "user_%d", i);
	snprintf(key, sizeof(key), "key-user_%d", i);
	c.user_id = user;
	rc        = mk_tool_call(rt, &c, &res);
	keyed     = rc == 0 && strstr(res->result, key) != NULL;
	if (!keyed) {
		if (rc != MK_EAUTH) {
			fprintf(stderr, "hd as %s: %d %s\n", user, rc,
			        res->error ? res->error : res->result);
		}
		CHECK_EQ(rc, MK_EAUTH);
		CHECK((p = json_loads(res->auth_required, 0, NULL)) != NULL);
		if (sid != NULL) {
			*sid = strdup(json_string_value(
			        json_object_get(p, "session_id")));
		}
		json_decref(p);
	}
	mk_result_free(&res);
	return (keyed);
}

/* Adds the per_user_headers client "hd" (its sample verified, healthy)
 * and opens a header session for each user_<i> (sids, malloc'd). */
static void
users_prepare(mk_runtime *rt, sub *sb, char **sids)
{
	char *err = NULL;
	int   at  = 0, rc;

	rc = add(
	        rt, &err,
	        "{\"name\": \"hd\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}",
	        srv.port);

	CHECK(!said(rc, err, "hd"));
	err = NULL;
	rc  = mk_client_verify_headers(rt, "hd",
	                               "{\"x-api-key\": \"key-admin\"}", &err);
	CHECK(!said(rc, err, "sample"));
	wait_state(sb, &at, "hd", "healthy", NULL);
	for (int i = 0; i < REFUSE_USERS; i++) {
		CHECK(!user_keyed(rt, i, &sids[i]));
	}
}

/* Each user_<i> submits its header values; each answer on stdout; a
 * refused one is not used and its session stays open, an acknowledged
 * one is used and its session ends. */
static void
users_submit(mk_runtime *rt, char **sids)
{
	char user[32], name[32], vals[96], *err = NULL;
	int  rc, no;

	for (int i = 0; i < REFUSE_USERS; i++) {
		snprintf(user, sizeof(user), "user_%d", i);
		snprintf(name, sizeof(name), "hd_%d", i);
		snprintf(vals, sizeof(vals), "{\"x-api-key\": \"key-%s\"}",
		         user);
		rc  = mk_user_headers_submit(rt, "hd", "user", user, sids[i],
		                             vals, &err);
		no  = said(rc, err, name);
		err = NULL;
		CHECK_EQ(user_keyed(rt, i, NULL), !no);
		/* a refused session stays open for another try; a stored
		 * one is used up */
		rc = mk_user_headers_submit(rt, "hd", "user", user, sids[i],
		                            vals, &err);
		CHECK_EQ(rc, no ? MK_ESTORE : MK_ENOENT);
		mk_free(err);
		err = NULL;
		free(sids[i]);
	}
}

static void check_once(kn_actor *cl);

/* Whether client "pin" holds echo back (once its approval is read: its
 * first connect waits for it). */
static bool
pin_holds(mk_runtime *rt, sub *sb)
{
	int     at = 0;
	json_t *v;
	bool    held;

	CHECK_EQ(mk_stream_snapshot(rt, 0), 0);
	(void)wait_state(sb, &at, "pin", "healthy", NULL);
	v    = view_of(rt, "pin");
	held = json_object_get(json_object_get(v, "tools_held"), "echo") !=
	        NULL;
	json_decref(v);
	return (held);
}

/* Adds the tool_changes hold client "pin" and changes echo's
 * description under it: held, its list's digest in digest. */
static void
pin_prepare(mk_runtime *rt, sub *sb, char *digest, size_t len)
{
	char     *err = NULL;
	kn_actor *cl;
	json_t   *v;
	int       at = 0;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"pin\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1h\", \"tools_to_execute\": [\"*\"], \"tool_changes\": \"hold\"}",
	            srv.port),
	        0);
	(void)wait_state(sb, &at, "pin", "healthy", NULL);
	admin(srv.port, "/admin/describe", "{\"description\": \"held back\"}",
	      NULL);
	CHECK_EQ(kn_lookup(rt->kernel, CLIENT_PREFIX "pin", &cl), 0);
	check_once(cl);
	kn_actor_release(&cl);
	CHECK(pin_holds(rt, sb));
	v = view_of(rt, "pin");
	snprintf(digest, len, "%s", vstr(v, "tools_pending"));
	json_decref(v);
}

/* The child of refused_*: two clients stored and a per_user_headers
 * client's callers told to submit, and a tool_changes hold client's tool
 * held, then the file system full (full) or read-only; adds, an update,
 * a disable, a remove, the callers' header values and the held list's
 * approval, each answered on stdout; then it waits to die. */
static int
refuse_main(const char *path, int port, int full)
{
	mk_runtime *rt;
	sub         sb;
	char        dir[128], filler[160], name[32], *err = NULL, *t;
	char       *sids[REFUSE_USERS], digest[80];
	int         rc;

	srv.port = port;
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	CHECK_EQ(open_with(&rt, &sb, path, NULL, -1), 0);
	CHECK(!said(add_client(rt, "keep_0"), NULL, "keep_0"));
	CHECK(!said(add_client(rt, "keep_1"), NULL, "keep_1"));
	users_prepare(rt, &sb, sids);
	pin_prepare(rt, &sb, digest, sizeof(digest));
	if (full) {
		fill(dir, filler, sizeof(filler));
	} else {
		/* a file open for writing keeps it writable: closed, the
		 * runtime boots again from the read-only store */
		rt_close(&rt, &sb);
		CHECK_EQ(mount("tmpfs", dir, "tmpfs", MS_REMOUNT | MS_RDONLY,
		               NULL),
		         0);
		CHECK_EQ(open_with(&rt, &sb, path, NULL, -1), 0);
	}
	users_submit(rt, sids);
	for (int i = 0; i < REFUSE_ADDS; i++) {
		snprintf(name, sizeof(name), "new_%d", i);
		rc = add(
		        rt, &err,
		        "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
		        name, port);
		if (said(rc, err, name)) {
			/* the runtime's view is as before */
			CHECK(!has_client(rt, name));
		}
		err = NULL;
	}
	rc = mk_client_update(rt, "keep_0",
	                      "{\"tools_to_execute\": [\"echo\"]}", &err);
	if (said(rc, err, "update")) {
		t = config_field(rt, "keep_0", "tools_to_execute");
		CHECK(strcmp(t, "[\"*\"]") == 0);
		free(t);
		serves(rt, "keep_0");
	}
	err = NULL;
	rc  = mk_client_disable(rt, "keep_1", &err);
	if (said(rc, err, "disable")) {
		serves(rt, "keep_1");
	}
	err = NULL;
	rc  = mk_client_remove(rt, "keep_0", &err);
	if (said(rc, err, "remove")) {
		CHECK(has_client(rt, "keep_0"));
		serves(rt, "keep_0");
	}
	err = NULL;
	rc  = mk_client_tools_approve(rt, "pin", digest, &err);
	CHECK_EQ(pin_holds(rt, &sb), said(rc, err, "approve"));
	CHECK_EQ(write(1, "done\n", 5), 5);
	for (;;) {
		pause();
	}
}

/* Every change the child was told is stored survives its kill -9, and
 * none it was told is refused is there. */
static void
refused(int full)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	int         out, refusals = 0;
	pid_t       pid;
	char        line[96], filler[160];
	FILE       *f;
	json_t     *ok = json_object(), *no = json_object();

	place_open(&pl, 2 << 20);
	pid = spawn_self(full ? "refuse_full" : "refuse_ro", pl.db, &out);
	CHECK((f = fdopen(out, "r")) != NULL);
	while (fgets(line, sizeof(line), f) != NULL &&
	       strcmp(line, "done\n") != 0) {
		line[strcspn(line, "\n")] = '\0';
		json_object_set_new(strncmp(line, "ok ", 3) == 0 ? ok : no,
		                    line + 3, json_true());
	}
	CHECK(strcmp(line, "done\n") == 0);
	kill9(pid);
	fclose(f);
	refusals = (int)json_object_size(no);
	fprintf(stderr, "   %d acknowledged, %d refused\n",
	        (int)json_object_size(ok), refusals);
	/* every add and every caller's values: 2 MiB hold no more */
	CHECK(refusals >= REFUSE_ADDS + REFUSE_USERS);
	if (full) {
		snprintf(filler, sizeof(filler), "%s/filler", pl.dir);
		CHECK_EQ(unlink(filler), 0);
	} else {
		place_remount(&pl, 0);
	}
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	const char *k;
	json_t     *v;
	json_object_foreach(ok, k, v)
	{
		if (strncmp(k, "keep_", 5) == 0 ||
		    strncmp(k, "new_", 4) == 0) {
			CHECK(has_client(rt, k));
		}
	}
	json_object_foreach(no, k, v)
	{
		if (strncmp(k, "new_", 4) == 0) {
			CHECK(!has_client(rt, k));
		}
	}
	char *t = config_field(rt, "keep_0", "tools_to_execute");
	CHECK(strcmp(t,
	             json_object_get(ok, "update") ? "[\"echo\"]"
	                                           : "[\"*\"]") == 0);
	free(t);
	CHECK_EQ(has_client(rt, "keep_0"),
	         json_object_get(ok, "remove") == NULL);
	for (int i = 0; i < REFUSE_USERS; i++) {
		snprintf(line, sizeof(line), "hd_%d", i);
		CHECK_EQ(user_keyed(rt, i, NULL),
		         json_object_get(ok, line) != NULL);
	}
	t = config_field(rt, "keep_1", "disabled");
	CHECK_EQ(t != NULL && strcmp(t, "true") == 0,
	         json_object_get(ok, "disable") != NULL);
	free(t);
	CHECK_EQ(pin_holds(rt, &sb), json_object_get(ok, "approve") == NULL);
	rt_close(&rt, &sb);
	admin(srv.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	json_decref(ok);
	json_decref(no);
	place_close(&pl);
}

static void
refused_full(void)
{
	refused(1);
}

static void
refused_read_only(void)
{
	refused(0);
}

/* ---- the content-hash gate, at runtime ------------------------------------
 */

#define UNCHANGED_TICKS 10000

/* Runs one health check on client name, synchronously. */
static void
check_once(kn_actor *cl)
{
	kn_answer a;

	CHECK_EQ(kn_ask(cl, MSG_CL_CHECK, CODEC_EMPTY, CODEC_EMPTY_LEN,
	                WAIT_MS, &a),
	         0);
	free(a.data);
}

static int
is_tools_of(const event *e, const void *name)
{
	return (strcmp(e->topic, "tools") == 0 && strcmp(e->name, name) == 0);
}

/* 10,000 checks of an unchanged list write nothing; a changed
 * description is exactly one write and one "tools" message. */
static void
unchanged_ticks(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	kn_actor   *cl;
	char       *err = NULL;
	int         tools0;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"tick\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1h\"}",
	            srv.port),
	        0);
	CHECK_EQ(ps_stat(rt, "tool_writes"), 1);
	/* the add's own "tools" message travels on its own: counted once
	 * it has arrived */
	int from = 0;
	(void)wait_event(&sb, &from, is_tools_of, "tick",
	                 "tick's first tools");
	tools0 = count_topic(&sb, "tools");
	CHECK_EQ(kn_lookup(rt->kernel, CLIENT_PREFIX "tick", &cl), 0);
	for (int i = 0; i < UNCHANGED_TICKS; i++) {
		check_once(cl);
	}
	CHECK_EQ(ps_stat(rt, "tool_writes"), 1);
	CHECK_EQ(count_topic(&sb, "tools"), tools0);
	/* a changed description: one write, one message, then quiet */
	admin(srv.port, "/admin/describe", "{\"description\": \"changed\"}",
	      NULL);
	for (int i = 0; i < 100; i++) {
		check_once(cl);
	}
	CHECK_EQ(ps_stat(rt, "tool_writes"), 2);
	CHECK_EQ(count_topic(&sb, "tools"), tools0 + 1);
	admin(srv.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	kn_actor_release(&cl);
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* The diff of the next "tools" event of name (a new object). */
static json_t *
next_diff(sub *sb, int *from, const char *name)
{
	event   e = wait_event(sb, from, is_tools_of, name, "a tools event");
	json_t *d = json_loads(e.diff, 0, NULL);

	CHECK(d != NULL);
	return (d);
}

/* The next "tools" event of "ver" carries exactly the diff want. */
static void
expect_diff(sub *sb, int *from, const char *want)
{
	json_t *d    = next_diff(sb, from, "ver");
	char   *text = json_dumps(d, JSON_COMPACT);

	CHECK(strcmp(text, want) == 0 || !fprintf(stderr, "diff: %s\n", text));
	free(text);
	json_decref(d);
}

/* The server's echo changed (POST path body), then a check: the next
 * "tools" event of "ver" says echo changed in exactly fields (JSON). */
static void
change_checked(kn_actor *cl, sub *sb, int *from, const char *path,
               const char *body, const char *fields)
{
	char want[256];

	admin(srv.port, path, body, NULL);
	check_once(cl);
	snprintf(want, sizeof(want),
	         "{\"changed\":[{\"name\":\"echo\",\"fields\":%s}]}", fields);
	expect_diff(sb, from, want);
}

/* Each change of a list is a version, its diff on the stream field by
 * field, and the last versions are the store's: the same after a
 * restart. */
static void
tool_versions(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	kn_actor   *cl;
	char       *err = NULL, *text = NULL, cfg[512];
	json_t     *d, *all, *v;
	int         from = 0;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"ver\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1h\"}",
	        srv.port);
	CHECK_EQ(mk_client_add(rt, cfg, NULL, &err), 0);
	/* the first list: every tool added */
	d = next_diff(&sb, &from, "ver");
	CHECK(json_array_size(json_object_get(d, "added")) > 5);
	CHECK(json_object_get(d, "changed") == NULL);
	json_decref(d);
	/* a description rewritten: that tool, that field */
	CHECK_EQ(kn_lookup(rt->kernel, CLIENT_PREFIX "ver", &cl), 0);
	change_checked(cl, &sb, &from, "/admin/describe",
	               "{\"description\": \"rewritten\"}",
	               "[\"description\"]");
	/* a tool added (tools/list_changed) */
	admin(srv.port, "/admin/add-tool", "{\"name\": \"zz_versioned\"}",
	      NULL);
	expect_diff(&sb, &from, "{\"added\":[\"zz_versioned\"]}");
	/* annotations: given, then one of them turned */
	change_checked(cl, &sb, &from, "/admin/annotate",
	               "{\"annotations\": {\"readOnlyHint\": false}}",
	               "[\"annotations\"]");
	change_checked(cl, &sb, &from, "/admin/annotate",
	               "{\"annotations\": {\"readOnlyHint\": false, "
	               "\"destructiveHint\": true}}",
	               "[\"annotations.destructiveHint\"]");
	/* a tool removed (tools/list_changed) */
	admin(srv.port, "/admin/remove-tool", "{\"name\": \"zz_versioned\"}",
	      NULL);
	expect_diff(&sb, &from, "{\"removed\":[\"zz_versioned\"]}");
	kn_actor_release(&cl);
	/* the view shows the last; the store has the six */
	v = view_of(rt, "ver");
	d = json_object_get(json_object_get(v, "tools_version"), "diff");
	CHECK(json_object_size(d) == 1 &&
	      json_array_size(json_object_get(d, "removed")) == 1);
	CHECK(strcmp(json_string_value(
	                     json_array_get(json_object_get(d, "removed"), 0)),
	             "zz_versioned") == 0);
	json_decref(v);
	for (int round = 0; round < 2; round++) {
		CHECK_EQ(mk_client_tool_versions_json(rt, "ver", &text), 0);
		CHECK((all = json_loads(text, 0, NULL)) != NULL);
		mk_free(text);
		CHECK_EQ(json_array_size(all), 6);
		CHECK(json_is_true(
		        json_object_get(json_array_get(all, 0), "first")));
		CHECK(json_is_false(
		        json_object_get(json_array_get(all, 5), "first")));
		CHECK_EQ(json_integer_value(json_object_get(
		                 json_array_get(all, 2), "count")),
		         json_integer_value(json_object_get(
		                 json_array_get(all, 0), "count")) +
		                 1);
		CHECK_EQ(json_integer_value(json_object_get(
		                 json_array_get(all, 5), "count")),
		         json_integer_value(json_object_get(
		                 json_array_get(all, 0), "count")));
		json_decref(all);
		/* restarted: the store's versions */
		rt_close(&rt, &sb);
		if (round == 0) {
			rt = rt_open_store(&sb, pl.db);
		}
	}
	CHECK_EQ(mk_client_tool_versions_json(NULL, "ver", &text), MK_EHANDLE);
	admin(srv.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	admin(srv.port, "/admin/annotate", "{\"annotations\": {}}", NULL);
	place_close(&pl);
}

/* tool_changes hold: the approval is the store's, across restarts - a
 * held tool stays held (a restart does not approve the list it finds), a
 * rejection stays, an approval stays. */
static void
tool_approvals(void)
{
	static const char *const want[] = {
	        "changed its description since the list was approved "
	        "(tool_changes hold: approve the list first)",
	        "(tool_changes hold: the change was rejected)", NULL};
	place       pl;
	sub         sb;
	mk_runtime *rt;
	char       *err  = NULL, *out, digest[80];
	int         from = 0, rc;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	pin_prepare(rt, &sb, digest, sizeof(digest));
	CHECK(strlen(digest) == 64);
	for (int round = 0; round < 3; round++) {
		rt_close(&rt, &sb);
		rt   = rt_open_store(&sb, pl.db);
		from = 0;
		CHECK_EQ(mk_stream_snapshot(rt, 0),
		         0); /* (it may be already) */
		(void)wait_state(&sb, &from, "pin", "healthy", NULL);
		out = call_text(rt, "pin", "echo", "{\"message\": \"m\"}",
		                &rc);
		fprintf(stderr, "   round %d: %d %s\n", round, rc, out);
		if (want[round] != NULL) {
			CHECK_EQ(rc, MK_ESTATE);
			CHECK(strstr(out, want[round]) != NULL);
		} else {
			CHECK_EQ(rc, 0);
		}
		free(out);
		if (round == 0) {
			CHECK_EQ(mk_client_tools_reject(rt, "pin", digest,
			                                &err),
			         0);
		} else if (round == 1) {
			CHECK_EQ(mk_client_tools_approve(rt, "pin", digest,
			                                 &err),
			         0);
		}
	}
	rt_close(&rt, &sb);
	admin(srv.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	place_close(&pl);
}

/* Reverses an object's keys (jansson keeps insertion order). */
static json_t *
reversed(json_t *o)
{
	json_t     *r = json_object();
	const char *keys[64];
	size_t      n = 0;
	const char *k;
	json_t     *v;

	json_object_foreach(o, k, v)
	{
		CHECK(n < 64);
		keys[n++] = k;
	}
	while (n-- > 0) {
		v = json_object_get(o, keys[n]);
		json_object_set_new(r, keys[n],
		                    json_is_object(v) ? reversed(v)
		                                      : json_incref(v));
	}
	return (r);
}

/* The stored list with every key order and the tool order reversed (and
 * its stored hash spoiled): restored, it hashes as the server's own list,
 * so a discovery writes nothing. */
static void
key_order(void)
{
	place         pl;
	sub           sb;
	mk_runtime   *rt;
	kn_actor     *cl;
	sqlite3      *db;
	sqlite3_stmt *q;
	json_t       *tools, *rev;
	char         *text;

	place_open(&pl, 0);
	rt = rt_open_store(&sb, pl.db);
	CHECK_EQ(add_client(rt, "order"), 0);
	rt_close(&rt, &sb);
	CHECK_EQ(sqlite3_open(pl.db, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_prepare_v2(db, "SELECT tools FROM mcp_tools", -1, &q,
	                            NULL),
	         SQLITE_OK);
	CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
	tools = json_loads((const char *)sqlite3_column_text(q, 0), 0, NULL);
	sqlite3_finalize(q);
	CHECK(json_array_size(tools) >= 10);
	rev = json_array();
	for (size_t i = json_array_size(tools); i-- > 0;) {
		json_array_append_new(rev, reversed(json_array_get(tools, i)));
	}
	text = json_dumps(rev, JSON_COMPACT);
	CHECK_EQ(sqlite3_prepare_v2(
	                 db,
	                 "UPDATE mcp_tools SET tools = ?1, hash = 'spoiled'",
	                 -1, &q, NULL),
	         SQLITE_OK);
	sqlite3_bind_text(q, 1, text, -1, SQLITE_STATIC);
	CHECK_EQ(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	sqlite3_close(db);
	free(text);
	json_decref(tools);
	json_decref(rev);

	rt = rt_open_store(&sb, pl.db);
	CHECK_EQ(kn_lookup(rt->kernel, CLIENT_PREFIX "order", &cl), 0);
	check_once(cl); /* a discovery against the server */
	kn_actor_release(&cl);
	CHECK_EQ(ps_stat(rt, "tool_writes"), 0);
	CHECK_EQ(count_topic(&sb, "tools"), 0);
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* ---- the file cannot be written ------------------------------------------
 */

/* A read-only file system: boot restores from it read-only and serves;
 * an add is refused (MK_ESTORE) and not kept; remounted writable, the
 * store is healthy again and the refused add never lands. */
static void
read_only(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	int         at = 0;

	place_open(&pl, 8 << 20);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK_EQ(add_client(rt, "ro_a"), 0);
	rt_close(&rt, &sb);
	place_remount(&pl, 1);

	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK_EQ(store_state(rt), MK_STORE_FAILING);
	CHECK(has_client(rt, "ro_a")); /* restored from the read-only file */
	serves(rt, "ro_a");
	CHECK_EQ(add_client(rt, "ro_b"), MK_ESTORE); /* refused, not kept */
	CHECK(!has_client(rt, "ro_b"));
	place_remount(&pl, 0);
	wait_store(&sb, &at, 1);
	CHECK_EQ(store_state(rt), MK_STORE_HEALTHY);
	CHECK_EQ(ps_stat(rt, "queued"), 0);
	rt_close(&rt, &sb);

	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK(has_client(rt, "ro_a") && !has_client(rt, "ro_b"));
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* Fills the file system at dir; returns the filler's path. */
static void
fill(const char *dir, char *filler, size_t len)
{
	char block[65536];
	int  fd;

	snprintf(filler, len, "%s/filler", dir);
	CHECK((fd = open(filler, O_WRONLY | O_CREAT, 0600)) >= 0);
	memset(block, 'f', sizeof(block));
	while (write(fd, block, sizeof(block)) > 0) {
	}
	/* the last partial blocks too */
	while (write(fd, block, 512) > 0) {
	}
	CHECK_EQ(errno, ENOSPC);
	close(fd);
}

/* A full disk: the failure is reported once, the runtime serves what it
 * has, adds are refused (MK_ESTORE), and after space comes back none of
 * them lands. */
static void
disk_full(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	char        filler[160], log[64] = "/tmp/mk-persist-log-XXXXXX";
	int         at = 0, logfd;

	CHECK((logfd = mkstemp(log)) >= 0);
	place_open(&pl, 2 << 20);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, logfd), 0);
	CHECK_EQ(add_client(rt, "full_a"), 0);
	CHECK_EQ(store_state(rt), MK_STORE_HEALTHY);
	fill(pl.dir, filler, sizeof(filler));
	/* each add's config cannot land: refused */
	char name[32];
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "full_%d", i);
		CHECK_EQ(add_client(rt, name), MK_ESTORE);
	}
	event e = wait_store(&sb, &at, 0);
	CHECK(strstr(e.message, "full") != NULL);
	fprintf(stderr, "   reported: %s\n", e.message);
	CHECK_EQ(store_state(rt), MK_STORE_FAILING);
	serves(rt, "full_a");
	CHECK(!has_client(rt, "full_3"));
	CHECK_EQ(unlink(filler), 0);
	/* nothing queued (the refused writes left): the next write says
	 * the store is writable again */
	CHECK_EQ(add_client(rt, "full_later"), 0);
	wait_store(&sb, &at, 1);
	rt_close(&rt, &sb);
	/* logged once for the whole failure run, however many retries */
	CHECK_EQ(count_lines(log, "serving from memory"), 1);

	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, logfd), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "full_%d", i);
		CHECK(!has_client(rt, name));
	}
	json_t *v = view_of(rt, "full_a");
	CHECK(json_array_size(json_object_get(v, "tools")) >= 10);
	json_decref(v);
	/* restored with their tools: no tool list written again */
	CHECK_EQ(ps_stat(rt, "tool_writes"), 0);
	rt_close(&rt, &sb);
	close(logfd);
	unlink(log);
	place_close(&pl);
}

/* Another process holds the database locked: an add is refused
 * (MK_ESTORE) and never lands, not even once it lets go. */
static void
locked(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	sqlite3    *db;
	int         at = 0;

	place_open(&pl, 0);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK_EQ(sqlite3_open(pl.db, &db), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL),
	         SQLITE_OK);
	CHECK_EQ(add_client(rt, "lk_a"), MK_ESTORE);
	event e = wait_store(&sb, &at, 0);
	CHECK(strstr(e.message, "locked") != NULL);
	CHECK(!has_client(rt, "lk_a"));
	CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(add_client(rt, "lk_later"), 0); /* the next write lands */
	wait_store(&sb, &at, 1);
	rt_close(&rt, &sb);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK(!has_client(rt, "lk_a"));
	rt_close(&rt, &sb);
	place_close(&pl);
}

/* A damaged file: the runtime serves from memory, reports it, refuses
 * an add (MK_ESTORE), and never writes over it. */
static void
damaged(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	FILE       *f;
	char        garbage[4096];

	place_open(&pl, 0);
	memset(garbage, 'g', sizeof(garbage));
	CHECK((f = fopen(pl.db, "w")) != NULL);
	for (int i = 0; i < 4; i++) {
		fwrite(garbage, 1, sizeof(garbage), f);
	}
	fclose(f);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, -1), 0);
	CHECK_EQ(store_state(rt), MK_STORE_FAILING);
	mk_stats st = MK_STATS_INIT;
	CHECK_EQ(mk_runtime_stats(rt, &st, WAIT_MS), 0);
	CHECK(st.store_failures >= 1);
	CHECK_EQ(add_client(rt, "dm_a"), MK_ESTORE);
	CHECK(!has_client(rt, "dm_a"));
	rt_close(&rt, &sb);
	/* untouched */
	struct stat sbuf;
	CHECK_EQ(stat(pl.db, &sbuf), 0);
	CHECK_EQ(sbuf.st_size, 4 * 4096);
	CHECK((f = fopen(pl.db, "r")) != NULL);
	CHECK_EQ(fread(garbage, 1, sizeof(garbage), f), sizeof(garbage));
	fclose(f);
	for (size_t i = 0; i < sizeof(garbage); i++) {
		CHECK_EQ(garbage[i], 'g');
	}
	place_close(&pl);
}

/* ---- sealed at rest, through the runtime
 * ------------------------------------
 */

static void
sealed_runtime(void)
{
	place       pl;
	sub         sb;
	mk_runtime *rt;
	char       *err = NULL, log[64] = "/tmp/mk-persist-log-XXXXXX";
	int         logfd, rc;

	CHECK((logfd = mkstemp(log)) >= 0);
	place_open(&pl, 0);
	CHECK_EQ(open_with(&rt, &sb, pl.db, KEY1, logfd), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"sealed\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"], \"auth_type\": \"headers\", \"headers\": {\"x-api-key\": \"HDR-SECRET-42\"}}",
	            srv.port),
	        0);
	rt_close(&rt, &sb);
	/* not in the file, not in the log */
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "cat %s %s-wal 2>/dev/null | grep -q HDR-SECRET-42", pl.db,
	         pl.db);
	CHECK(system(cmd) != 0);
	CHECK_EQ(count_lines(log, "HDR-SECRET-42"), 0);
	CHECK_EQ(count_lines(log, "stored unencrypted"), 0);

	/* with the key: back, and its header still goes out */
	CHECK_EQ(open_with(&rt, &sb, pl.db, KEY1, logfd), 0);
	char *out = call_text(rt, "sealed", "headers", "{}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "HDR-SECRET-42") != NULL);
	free(out);
	rt_close(&rt, &sb);
	/* with another key, or none: the boot is refused, saying why */
	CHECK_EQ(open_with(&rt, NULL, pl.db, KEY2, logfd), MK_EINVAL);
	CHECK(rt == NULL);
	CHECK_EQ(count_lines(log, "the encryption key does not match"), 1);
	unsetenv("MCPKEEP_ENCRYPTION_KEY");
	CHECK_EQ(open_with(&rt, NULL, pl.db, NULL, logfd), MK_EINVAL);
	CHECK_EQ(count_lines(log, "it holds sealed secrets"), 1);
	/* the environment's key is the default */
	setenv("MCPKEEP_ENCRYPTION_KEY", KEY1, 1);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, logfd), 0);
	CHECK(has_client(rt, "sealed"));
	rt_close(&rt, &sb);
	unsetenv("MCPKEEP_ENCRYPTION_KEY");
	place_close(&pl);

	/* no key at all: one WARN at boot */
	place_open(&pl, 0);
	CHECK_EQ(open_with(&rt, &sb, pl.db, NULL, logfd), 0);
	rt_close(&rt, &sb);
	CHECK_EQ(count_lines(log, "secrets are stored unencrypted"), 1);
	place_close(&pl);
	close(logfd);
	unlink(log);
}

/* config.json's store.path, env. references resolved. */
static void
config_store_path(void)
{
	char *v = NULL, *err = NULL;

	setenv("MK_TEST_STORE", "/var/lib/mcpkeep/x.db", 1);
	CHECK_EQ(
	        mk_config_get("{\"store\": {\"path\": \"env.MK_TEST_STORE\"}}",
	                      "store.path", &v, &err),
	        0);
	CHECK(v != NULL && strcmp(v, "/var/lib/mcpkeep/x.db") == 0);
	mk_free(v);
	CHECK_EQ(mk_config_get("{}", "store.path", &v, &err), 0);
	CHECK(v == NULL);
	CHECK_EQ(mk_config_get("{\"store\": {\"path\": \"env.MK_NOPE_X\"}}",
	                       "store.path", &v, &err),
	         MK_EINVAL);
	CHECK(err != NULL && strstr(err, "MK_NOPE_X") != NULL);
	mk_free(err);
	CHECK_EQ(mk_config_get("{}", "store.colour", &v, &err), MK_EINVAL);
	CHECK(strstr(err, "store.colour") != NULL);
	mk_free(err);
}

/* mk_settings: one parse, every setting read from it; the table says
 * which a reload cannot change and which hold secrets. */
static void
settings_parsed(void)
{
	mk_settings *set = NULL;
	char        *v = NULL, *err = NULL;
	const char  *name;
	unsigned     at_start = 0, secret = 0, n = 0;

	CHECK_EQ(
	        mk_settings_parse(
	                "{\"server\": {\"listen\": \"127.0.0.1:9\", \"inputs\": [\"roots\", \"elicitation\"], \"stream_public\": true, \"admin_token\": \"t0ken-x\"}, \"cluster\": {\"heartbeat_interval\": 3}}",
	                &set, &err),
	        0);
	CHECK(err == NULL);
	CHECK_EQ(mk_settings_get(set, "server.listen", &v), 0);
	CHECK(strcmp(v, "127.0.0.1:9") == 0);
	mk_free(v);
	CHECK_EQ(mk_settings_get(set, "server.inputs", &v), 0);
	CHECK(strcmp(v, "[\"elicitation\",\"roots\"]") == 0);
	mk_free(v);
	CHECK_EQ(mk_settings_get(set, "server.stream_public", &v), 0);
	CHECK(strcmp(v, "true") == 0);
	mk_free(v);
	CHECK_EQ(mk_settings_get(set, "cluster.heartbeat_interval", &v), 0);
	CHECK(strcmp(v, "3000") == 0);
	mk_free(v);
	CHECK_EQ(mk_settings_get(set, "server.admin_token", &v), 0);
	CHECK(strcmp(v, "t0ken-x") == 0);
	mk_free_secret(v);
	CHECK_EQ(mk_settings_get(set, "server.stream", &v), 0);
	CHECK(v == NULL); /* unset */
	CHECK_EQ(mk_settings_get(set, "store.colour", &v), MK_ENOENT);
	mk_settings_free(&set);
	CHECK(set == NULL);
	mk_settings_free(&set); /* (twice: nothing) */
	for (unsigned i = 0; (name = mk_setting_name(i)) != NULL; i++, n++) {
		at_start += (mk_setting_flags(i) & MK_SETTING_AT_START) != 0;
		secret += (mk_setting_flags(i) & MK_SETTING_SECRET) != 0;
		/* every name is one mk_config_get knows */
		CHECK_EQ(mk_config_get("{}", name, &v, &err), 0);
		CHECK(v == NULL);
	}
	CHECK_EQ(n, 16);
	CHECK_EQ(at_start, 12);
	CHECK_EQ(secret, 3);
	CHECK_EQ(mk_setting_flags(n), -1);
	CHECK_EQ(mk_settings_parse("{\"store\": 1}", &set, &err), MK_EINVAL);
	CHECK(set == NULL && err != NULL);
	mk_free(err);
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "storm") == 0) {
		return (storm_main(argv[2]));
	}
	if (argc == 4 && strcmp(argv[1], "add") == 0) {
		return (add_main(argv[2], atoi(argv[3])));
	}
	if (argc == 4 && strncmp(argv[1], "refuse_", 7) == 0) {
		return (refuse_main(argv[2], atoi(argv[3]),
		                    strcmp(argv[1], "refuse_full") == 0));
	}
	signal(SIGPIPE, SIG_IGN);
	setenv("MCPKEEP_LOG", "warn", 1); /* the log lines looked for */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	char        js[512];
	const char *pargv[] = {"node", js, "http", "--port", "0", NULL};
	snprintf(js, sizeof(js), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(&srv, pargv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	RUN_IF(config_store_path);
	RUN_IF(settings_parsed);
	RUN_IF(kill9_durable);
	RUN_IF(kill9_added);
	RUN_IF(refused_full);
	RUN_IF(refused_read_only);
	RUN_IF(restart_restores);
	RUN_IF(stored_error);
	RUN_IF(key_order);
	RUN_IF(tool_approvals);
	RUN_IF(unchanged_ticks);
	RUN_IF(tool_versions);
	RUN_IF(sealed_runtime);
	RUN_IF(damaged);
	RUN_IF(locked);
	RUN_IF(read_only);
	RUN_IF(disk_full);
	peer_stop(&srv);
	curl_global_cleanup();
	return (0);
}
