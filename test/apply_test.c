/*
 * apply_test.c - what a configuration applies, through the public API:
 * the global tool_sync_interval and tool_execution_timeout of a
 * config.json (mk_runtime_load, mk_runtime_configure; a client's own
 * value wins), an update that changes only what changed (a stdio server
 * keeps its process unless a connection field changed), and clients
 * addressed by their client_id as well as by name (the list view, every
 * mk_* call, the state stream; an id that is another client's name is
 * refused), env. references resolved only from a config file (an API
 * client's are literal, in the store too; no view shows a resolved
 * value), and mk_runtime_reload's diff.  The MCP server is
 * test/peers/inject.mjs.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "testutil.h"

static peer srv;     /* inject.mjs over Streamable HTTP */
static char js[512]; /* inject.mjs */
static char dir[] = "/tmp/mk-apply-XXXXXX";

/* Waits until the client ran at least n health checks.  A passing check
 * publishes nothing on the stream (no state changes), so its counter is
 * polled, with a deadline. */
static void
wait_checks(mk_runtime *rt, const char *client, long n)
{
	int64_t until = now_ms() + WAIT_MS;

	while (client_metric(rt, client, "checks") < n) {
		CHECK(now_ms() < until);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling a counter, with a deadline */
	}
}

/* A `hang` call: it must time out; gives how long it took (ms). */
static int64_t
hang_ms(mk_runtime *rt, const char *client)
{
	int64_t t0 = now_ms();
	int     rc;
	char   *t = call_text(rt, client, "hang", NULL, &rc);

	if (rc != MK_ETIMEDOUT) {
		fprintf(stderr, "hang on %s: %s (%s)\n", client,
		        mk_strerror(rc), t);
	}
	CHECK_EQ(rc, MK_ETIMEDOUT);
	free(t);
	return (now_ms() - t0);
}

/* A sticky Streamable HTTP client of srv named name, with extra fields
 * (", ..." or ""), as a config.json entry. */
static void
sticky_entry(char *buf, size_t len, const char *name, const char *extra)
{
	snprintf(
	        buf, len,
	        "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]%s}",
	        name, srv.port, extra);
}

/* ---- item: every setting takes effect ------------------------------------
 */

/* mk_runtime_load applies the file's mcp.tool_sync_interval (checks tick
 * every second where the default is ten minutes) and
 * mcp.tool_execution_timeout (a hung call ends after one second, not
 * 30); a client's own value wins over the global one. */
static void
global_settings_load(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	char        a[512], b[512], file[1400], *err = NULL;
	int         at = 0;

	sticky_entry(a, sizeof(a), "gl", "");
	sticky_entry(b, sizeof(b), "own",
	             ", \"tool_execution_timeout\": \"3s\"");
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"tool_sync_interval\": \"1s\", \"tool_execution_timeout\": \"1s\", \"client_configs\": [%s, %s]}}",
	        a, b);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	wait_state(&sb, &at, "gl", "healthy", NULL);
	wait_checks(rt, "gl", 2);
	CHECK(hang_ms(rt, "gl") < 10000);
	int64_t own = hang_ms(rt, "own");
	CHECK(own >= 2900 && own < 15000);
	/* a client added later gets the global values too */
	sticky_entry(a, sizeof(a), "later", "");
	CHECK_EQ(mk_client_add(rt, a, NULL, &err), 0);
	CHECK(hang_ms(rt, "later") < 10000);
	rt_close(&rt, &sb);
}

/* mk_runtime_configure (what SIGHUP runs) applies them to running
 * clients; an invalid file applies nothing. */
static void
global_settings_configure(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	char        a[512], file[1024], *err = NULL;
	int         at = 0;

	sticky_entry(a, sizeof(a), "rl", "");
	snprintf(file, sizeof(file), "{\"mcp\": {\"client_configs\": [%s]}}",
	         a);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	wait_state(&sb, &at, "rl", "healthy", NULL);
	CHECK_EQ(client_metric(rt, "rl", "checks"), 0); /* ten minutes */
	CHECK_EQ(mk_runtime_configure(
	                 rt, "{\"mcp\": {\"tool_sync_interval\": \"0s\"}}",
	                 &err),
	         MK_EINVAL);
	CHECK(strstr(err, "mcp.tool_sync_interval") != NULL);
	mk_free(err);
	err = NULL;
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"tool_sync_interval\": \"1s\", \"tool_execution_timeout\": \"1s\", \"client_configs\": [%s]}}",
	        a);
	CHECK_EQ(mk_runtime_configure(rt, file, &err), 0);
	wait_checks(rt, "rl", 2);
	CHECK(hang_ms(rt, "rl") < 10000);
	rt_close(&rt, &sb);
}

/* ---- item: an update changes only what changed ---------------------------
 */

/* The pid tool's answer: the stdio server's process id. */
static long
server_pid(mk_runtime *rt, const char *client)
{
	int     rc;
	char   *t = call_text(rt, client, "pid", NULL, &rc);
	json_t *j = json_loads(t, 0, NULL);
	long    pid;

	CHECK_EQ(rc, 0);
	pid = strtol(json_string_value(json_object_get(
	                     json_array_get(json_object_get(j, "content"), 0),
	                     "text")),
	             NULL, 10);
	CHECK(pid > 0);
	json_decref(j);
	free(t);
	return (pid);
}

static long
generation(mk_runtime *rt, const char *client)
{
	json_t *v = view_of(rt, client);
	long    g = (long)json_integer_value(json_object_get(v, "generation"));

	json_decref(v);
	return (g);
}

static void
update_in_place(void)
{
	static const char *const in_place[] = {
	        "{\"tool_sync_interval\": \"5m\"}",
	        "{\"tools_to_execute\": [\"pid\", \"echo\"]}",
	        "{\"tool_execution_timeout\": \"20s\"}",
	        "{\"is_ping_available\": false}", NULL};
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	char       *err = NULL;
	int         at  = 0;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"st\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"]}, \"tools_to_execute\": [\"*\"]}",
	            js),
	        0);
	wait_state(&sb, &at, "st", "healthy", NULL);
	long pid = server_pid(rt, "st"), gen = generation(rt, "st");
	for (int i = 0; in_place[i] != NULL; i++) {
		CHECK_EQ(mk_client_update(rt, "st", in_place[i], &err), 0);
		CHECK_EQ(server_pid(rt, "st"), pid);
		CHECK_EQ(generation(rt, "st"), gen);
	}
	/* it applied: a tool no longer allowed is refused */
	int   rc;
	char *t = call_text(rt, "st", "structured", NULL, &rc);
	CHECK_EQ(rc, MK_EINVAL);
	free(t);
	/* a connection field: a new process */
	char patch[1024];
	snprintf(
	        patch, sizeof(patch),
	        "{\"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"], \"envs\": [\"MK_APPLY=1\"]}}",
	        js);
	CHECK_EQ(mk_client_update(rt, "st", patch, &err), 0);
	CHECK(server_pid(rt, "st") != pid);
	CHECK(generation(rt, "st") > gen);
	rt_close(&rt, &sb);
}

/* ---- item: clients are addressable by their id ---------------------------
 */

typedef struct idmatch {
	const char *id;    /* client_id */
	const char *state; /* the state */
} idmatch;

static int
is_id_state(const event *e, const void *arg)
{
	const idmatch *m = arg;

	return (strcmp(e->topic, "state") == 0 &&
	        strcmp(e->client_id, m->id) == 0 &&
	        strcmp(e->state, m->state) == 0);
}

static const char *
config_id(json_t *v)
{
	return (json_string_value(
	        json_object_get(json_object_get(v, "config"), "client_id")));
}

/* Every lifecycle call by id. */
static void
lifecycle_by_id(mk_runtime *rt, sub *sb, int *at, const char *id)
{
	char   *err = NULL;
	idmatch dis = {id, "disabled"}, ok = {id, "healthy"};
	int     rc;

	CHECK_EQ(mk_client_disable(rt, id, &err), 0);
	wait_event(sb, at, is_id_state, &dis, "disabled, by id");
	CHECK_EQ(mk_client_enable(rt, id, &err), 0);
	wait_event(sb, at, is_id_state, &ok, "healthy again, by id");
	CHECK_EQ(mk_client_reconnect(rt, id, &err), 0);
	CHECK_EQ(mk_client_refresh_tools(rt, id, &err), 0);
	CHECK_EQ(mk_client_update(rt, id, "{\"tools_to_execute\": [\"echo\"]}",
	                          &err),
	         0);
	CHECK_EQ(mk_credentials_evict(rt, id, NULL, NULL, NULL, NULL, &err),
	         0);
	CHECK(client_metric(rt, id, "checks") >= 1);
	char *t = call_text(rt, id, "echo", "{\"message\": \"by id\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(t, "by id") != NULL);
	free(t);
}

static void
clients_by_id(void)
{
	sub         sb;
	mk_runtime *rt;
	char        path[128], a[512], *err = NULL, *gen_id = NULL;
	int         at = 0;

	snprintf(path, sizeof(path), "%s/ids.db", dir);
	rt = rt_open_store(&sb, path);
	sticky_entry(a, sizeof(a), "named", ", \"client_id\": \"named-1\"");
	CHECK_EQ(mk_client_add(rt, a, NULL, &err), 0);
	sticky_entry(a, sizeof(a), "gen", "");
	CHECK_EQ(mk_client_add(rt, a, &gen_id, &err), 0);
	/* the list view shows every client_id, generated ones too */
	json_t *v = view_of(rt, "named");
	CHECK(strcmp(config_id(v), "named-1") == 0);
	json_decref(v);
	v = view_of(rt, "gen");
	CHECK(config_id(v) != NULL && strcmp(config_id(v), gen_id) == 0);
	json_decref(v);
	/* the stream carries it */
	idmatch ok = {gen_id, "healthy"};
	wait_event(&sb, &at, is_id_state, &ok, "gen healthy, by id");
	lifecycle_by_id(rt, &sb, &at, gen_id);
	lifecycle_by_id(rt, &sb, &at, "named-1");
	/* the view's config, sent back whole, changes nothing */
	v         = view_of(rt, "gen");
	char *cfg = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "gen", cfg, &err), 0);
	free(cfg);
	/* an id that is another client's name, a name that is another's
	 * id: refused (which would {id} mean?) */
	sticky_entry(a, sizeof(a), "clash", ", \"client_id\": \"gen\"");
	CHECK_EQ(mk_client_add(rt, a, NULL, &err), MK_EEXIST);
	mk_free(err);
	err = NULL;
	sticky_entry(a, sizeof(a), "named_2", ", \"client_id\": \"zz9\"");
	CHECK_EQ(mk_client_add(rt, a, NULL, &err), 0);
	sticky_entry(a, sizeof(a), "zz9", "");
	CHECK_EQ(mk_client_add(rt, a, NULL, &err), MK_EEXIST);
	mk_free(err);
	err = NULL;
	/* and within one file */
	char b[512], file[1200];
	sticky_entry(a, sizeof(a), "fa", ", \"client_id\": \"fb\"");
	sticky_entry(b, sizeof(b), "fb", "");
	snprintf(file, sizeof(file),
	         "{\"mcp\": {\"client_configs\": [%s, %s]}}", a, b);
	CHECK_EQ(mk_runtime_load(rt, file, &err), MK_EINVAL);
	CHECK(strstr(err, "another client's name") != NULL);
	mk_free(err);
	err = NULL;
	/* a generated id is stored: the same after a restart */
	rt_close(&rt, &sb);
	rt = rt_open_store(&sb, path);
	v  = view_of(rt, "gen");
	CHECK(strcmp(config_id(v), gen_id) == 0);
	json_decref(v);
	CHECK_EQ(mk_client_remove(rt, gen_id, &err), 0);
	CHECK_EQ(mk_client_remove(rt, "named-1", &err), 0);
	CHECK_EQ(mk_client_remove(rt, gen_id, &err), MK_ENOENT);
	mk_free(err);
	mk_free(gen_id);
	rt_close(&rt, &sb);
}

/* The list view's config, secrets redacted, sent back whole as an update
 * (what an operator's edit-and-save does) keeps the secrets it could not
 * see: the header still reaches the server, the URL's query key too, and
 * nothing re-dials. */
static void
view_round_trip(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	char       *err = NULL, *cfg, *out;
	int         at  = 0, rc;
	json_t     *v;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"rt_keep\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp?key=q-s3cret\", \"needs_session_stickiness\": true, \"headers\": {\"x-api-key\": \"h-s3cret\"}, \"tools_to_execute\": [\"*\"]}",
	            srv.port),
	        0);
	wait_state(&sb, &at, "rt_keep", "healthy", NULL);
	v   = view_of(rt, "rt_keep");
	cfg = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	CHECK(strstr(cfg, "h-s3cret") == NULL &&
	      strstr(cfg, "q-s3cret") == NULL);
	long gen = (long)json_integer_value(json_object_get(v, "generation"));
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "rt_keep", cfg, &err), 0);
	free(cfg);
	out = call_text(rt, "rt_keep", "headers", NULL, &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "h-s3cret") != NULL);
	free(out);
	v = view_of(rt, "rt_keep");
	CHECK_EQ(json_integer_value(json_object_get(v, "generation")), gen);
	json_decref(v);
	mk_free(err);
	rt_close(&rt, &sb);
}

/* ---- item: env. only from a config file ---------------------------------
 */

#define MARKER   "mk-marker-7f3a"   /* MK_TEST_SECRET_X's value */
#define FILE_TOK "mk-file-tok-91c2" /* MK_TEST_FILE_TOK's value */

/* The value of the x-* header name that the inject server saw on a
 * call (malloc'd), or NULL when it saw none. */
static char *
seen_header(mk_runtime *rt, const char *client, const char *name)
{
	int     rc;
	char   *t = call_text(rt, client, "headers", NULL, &rc), *v = NULL;
	json_t *r = json_loads(t, 0, NULL), *h;

	if (rc != 0) {
		fprintf(stderr, "headers on %s: %s (%s)\n", client,
		        mk_strerror(rc), t);
	}
	CHECK_EQ(rc, 0);
	h = json_loads(
	        json_string_value(json_object_get(
	                json_array_get(json_object_get(r, "content"), 0),
	                "text")),
	        0, NULL);
	CHECK(h != NULL);
	if (json_is_string(json_object_get(h, name))) {
		v = strdup(json_string_value(json_object_get(h, name)));
	}
	json_decref(h);
	json_decref(r);
	free(t);
	return (v);
}

/* Whether the header the server saw is want. */
static bool
saw(mk_runtime *rt, const char *client, const char *name, const char *want)
{
	char *v  = seen_header(rt, client, name);
	bool  ok = v != NULL && strcmp(v, want) == 0;

	if (!ok) {
		fprintf(stderr, "%s: header %s was \"%s\", not \"%s\"\n",
		        client, name, v != NULL ? v : "(none)", want);
	}
	free(v);
	return (ok);
}

/* Whether the whole list view (mk_clients_json) holds text. */
static bool
list_has(mk_runtime *rt, const char *text)
{
	char *out = NULL;
	bool  yes;

	CHECK_EQ(mk_clients_json(rt, "{\"limit\": 100}", &out), 0);
	yes = strstr(out, text) != NULL;
	mk_free(out);
	return (yes);
}

/* The attack of SPEC section 12: an API caller's "env.X" never reads
 * the environment - the server gets the text as written, a missing
 * variable is no error (nothing says whether one exists), a URL
 * "env.X" is just not a URL - and it stays so in the store, after a
 * restart, and through an update. */
static void
api_env_literal(void)
{
	sub         sb;
	mk_runtime *rt;
	char        path[128], *err = NULL;
	int         at = 0;

	setenv("MK_TEST_SECRET_X", MARKER, 1);
	unsetenv("MK_NOPE_Y");
	snprintf(path, sizeof(path), "%s/literal.db", dir);
	rt = rt_open_store(&sb, path);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"lit\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"auth_type\": \"headers\", \"headers\": {\"x-api-key\": \"env.MK_TEST_SECRET_X\", \"x-nope\": \"env.MK_NOPE_Y\"}, \"tools_to_execute\": [\"*\"]}",
	            srv.port),
	        0);
	wait_state(&sb, &at, "lit", "healthy", NULL);
	CHECK(saw(rt, "lit", "x-api-key", "env.MK_TEST_SECRET_X"));
	CHECK(saw(rt, "lit", "x-nope", "env.MK_NOPE_Y"));
	/* a literal header value is a value: redacted like any */
	CHECK(!list_has(rt, MARKER) && !list_has(rt, "env.MK_TEST_SECRET_X"));
	/* a URL from the API: the usual invalid-URL error, no lookup */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"lit_url\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_TEST_SECRET_X\"}"),
	        MK_EINVAL);
	CHECK(strstr(err, "must be an http:// or https:// URL") != NULL);
	CHECK(strstr(err, MARKER) == NULL);
	mk_free(err);
	err = NULL;
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"lit_nope\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_NOPE_Y\"}"),
	        MK_EINVAL);
	CHECK(strstr(err, "must be an http:// or https:// URL") != NULL);
	CHECK(strstr(err, "not set") == NULL);
	mk_free(err);
	err = NULL;
	/* restored from the store: still literal */
	rt_close(&rt, &sb);
	rt = rt_open_store(&sb, path);
	CHECK(saw(rt, "lit", "x-api-key", "env.MK_TEST_SECRET_X"));
	CHECK(saw(rt, "lit", "x-nope", "env.MK_NOPE_Y"));
	/* an update's env. strings too; the view sent back changes nothing */
	CHECK_EQ(
	        mk_client_update(
	                rt, "lit",
	                "{\"headers\": {\"x-api-key\": \"env.MK_TEST_SECRET_X\", \"x-more\": \"env.MK_TEST_SECRET_X\"}}",
	                &err),
	        0);
	CHECK(saw(rt, "lit", "x-more", "env.MK_TEST_SECRET_X"));
	json_t *v   = view_of(rt, "lit");
	char   *cfg = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "lit", cfg, &err), 0);
	free(cfg);
	CHECK(saw(rt, "lit", "x-api-key", "env.MK_TEST_SECRET_X"));
	CHECK(saw(rt, "lit", "x-more", "env.MK_TEST_SECRET_X"));
	CHECK(!list_has(rt, MARKER));
	rt_close(&rt, &sb);
	rt = rt_open_store(&sb, path);
	CHECK(saw(rt, "lit", "x-more", "env.MK_TEST_SECRET_X"));
	CHECK_EQ(mk_client_remove(rt, "lit", &err), 0);
	rt_close(&rt, &sb);
}

/* A config file's env. references resolve; its client's list view shows
 * them as references and, sent back as an update, keeps them resolving;
 * what an API patch brings is literal, next to what the file gave, and
 * both stay so in the store. */
static void
file_env_update(void)
{
	sub         sb;
	mk_runtime *rt;
	char        path[128], file[1024], *err = NULL;
	int         at = 0;

	setenv("MK_TEST_SECRET_X", MARKER, 1);
	setenv("MK_TEST_FILE_TOK", FILE_TOK, 1);
	snprintf(path, sizeof(path), "%s/fileenv.db", dir);
	rt = rt_open_store(&sb, path);
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"fenv\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"auth_type\": \"headers\", \"headers\": {\"x-token\": \"env.MK_TEST_FILE_TOK\"}, \"tools_to_execute\": [\"*\"]}]}}",
	        srv.port);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	wait_state(&sb, &at, "fenv", "healthy", NULL);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	CHECK(list_has(rt, "env.MK_TEST_FILE_TOK") && !list_has(rt, FILE_TOK));
	/* the view sent back: resolved still, no re-dial */
	json_t *v   = view_of(rt, "fenv");
	char   *cfg = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	long gen = (long)json_integer_value(json_object_get(v, "generation"));
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "fenv", cfg, &err), 0);
	free(cfg);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	CHECK_EQ(generation(rt, "fenv"), gen);
	/* stored without a mask (as every row of an older store): restored,
	 * its references resolve as before */
	rt_close(&rt, &sb);
	rt = rt_open_store(&sb, path);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	/* a patch's new env. string is literal; the file's kept resolves */
	CHECK_EQ(
	        mk_client_update(
	                rt, "fenv",
	                "{\"headers\": {\"x-token\": \"env.MK_TEST_FILE_TOK\", \"x-more\": \"env.MK_TEST_SECRET_X\"}}",
	                &err),
	        0);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	CHECK(saw(rt, "fenv", "x-more", "env.MK_TEST_SECRET_X"));
	/* and the view of that, sent back, changes neither */
	v   = view_of(rt, "fenv");
	cfg = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "fenv", cfg, &err), 0);
	free(cfg);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	CHECK(saw(rt, "fenv", "x-more", "env.MK_TEST_SECRET_X"));
	CHECK(!list_has(rt, MARKER) && !list_has(rt, FILE_TOK));
	/* restored as it was: each string with its own meaning */
	rt_close(&rt, &sb);
	rt = rt_open_store(&sb, path);
	CHECK(saw(rt, "fenv", "x-token", FILE_TOK));
	CHECK(saw(rt, "fenv", "x-more", "env.MK_TEST_SECRET_X"));
	CHECK_EQ(mk_client_remove(rt, "fenv", &err), 0);
	rt_close(&rt, &sb);
}

/* stdio args from env. are never shown resolved: the list view shows
 * the reference (and a literal one as given), not the value - also
 * when the server fails. */
static void
env_args_hidden(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	char        file[1400], *err = NULL;
	int         at = 0;

	setenv("MK_TEST_ARG", "mk-arg-marker-55e1", 1);
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"argok\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"exec node %s stdio\", \"env.MK_TEST_ARG\"]}, \"tools_to_execute\": [\"*\"]}, {\"name\": \"argbad\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"exit 3\", \"env.MK_TEST_ARG\"]}}]}}",
	        js);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	wait_state(&sb, &at, "argok", "healthy", NULL);
	json_t *v = view_of(rt, "argbad");
	CHECK(strcmp(vstr(v, "state"), "unstable") == 0);
	json_decref(v);
	CHECK(list_has(rt, "\"env.MK_TEST_ARG\""));
	CHECK(!list_has(rt, "mk-arg-marker-55e1"));
	/* from the API: literal, shown as given */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"arglit\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"exec node %s stdio\", \"env.MK_TEST_ARG\"]}}",
	            js),
	        0);
	v          = view_of(rt, "arglit");
	char *dump = json_dumps(json_object_get(v, "config"), JSON_COMPACT);
	json_decref(v);
	CHECK(strstr(dump, "stdio\",\"env.MK_TEST_ARG\"]") != NULL);
	free(dump);
	CHECK(!list_has(rt, "mk-arg-marker-55e1"));
	rt_close(&rt, &sb);
}

/* ---- item: mk_runtime_reload ----------------------------------------------
 */

/* A runtime as rt_open's, logging at info into fd. */
static mk_runtime *
rt_open_log(sub *sb, int fd)
{
	static int  seq;
	mk_runtime *rt;
	mk_options  o;
	char        url[64], *was = getenv("MCPKEEP_LOG");

	was = was != NULL ? strdup(was) : NULL;
	unsetenv("MCPKEEP_LOG"); /* (it would override the level) */
	snprintf(url, sizeof(url), "inproc://apply-log-%d", ++seq);
	mk_options_init(&o, sizeof(o));
	o.log_level         = MK_LOG_INFO;
	o.log_fd            = fd;
	o.stream_url        = url;
	o.unstable_check_ms = 1000;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	if (was != NULL) {
		setenv("MCPKEEP_LOG", was, 1);
		free(was);
	}
	sub_open(sb, mk_stream_url(rt));
	return (rt);
}

/* Whether the file at path holds text. */
static bool
file_has(const char *path, const char *text)
{
	FILE  *f = fopen(path, "r");
	char  *buf;
	long   n;
	bool   yes;
	size_t got;

	CHECK(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	CHECK((buf = calloc(1, (size_t)n + 1)) != NULL);
	got = fread(buf, 1, (size_t)n, f);
	fclose(f);
	buf[got] = '\0';
	yes      = strstr(buf, text) != NULL;
	free(buf);
	return (yes);
}

/* A Streamable HTTP entry of srv (per-call), with extra fields. */
static void
entry_of(char *buf, size_t len, const char *name, int port, const char *extra)
{
	snprintf(
	        buf, len,
	        "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]%s}",
	        name, port, extra);
}

/* Whether the list has the client. */
static bool
listed(mk_runtime *rt, const char *name)
{
	json_t *v = view_find(rt, name);

	json_decref(v);
	return (v != NULL);
}

/* The file's config of a client, as the list shows it. */
static json_t *
config_of(mk_runtime *rt, const char *name)
{
	json_t *v = view_of(rt, name);
	json_t *c = json_incref(json_object_get(v, "config"));

	json_decref(v);
	return (c);
}

/* mk_runtime_reload: the file again as a diff - new clients added,
 * changed ones updated (as a whole: a field the file dropped goes) or
 * replaced (a new connection_string: a new client), vanished ones
 * removed; an API client stays, also when the file names it (not
 * applied, failed); env. resolved as in any file; an invalid file
 * changes nothing; the log has the summary and each failure. */
static void
reload_diff(void)
{
	sub         sb;
	mk_runtime *rt;
	char        logp[128], a[512], b[512], c[512], d[512], e[512];
	char        file[4096], *err = NULL;
	int         fd;

	setenv("MK_TEST_FILE_TOK", FILE_TOK, 1);
	snprintf(logp, sizeof(logp), "%s/reload.log", dir);
	CHECK((fd = open(logp, O_CREAT | O_WRONLY | O_TRUNC, 0600)) >= 0);
	rt = rt_open_log(&sb, fd);
	entry_of(a, sizeof(a), "ra", srv.port,
	         ", \"tool_execution_timeout\": \"20s\"");
	entry_of(b, sizeof(b), "rb", srv.port, "");
	entry_of(d, sizeof(d), "rd", srv.port, "");
	snprintf(file, sizeof(file),
	         "{\"mcp\": {\"client_configs\": [%s, %s, %s]}}", a, b, d);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"rapi\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
	            srv.port),
	        0);
	json_t *cfg   = config_of(rt, "rd");
	char   *rd_id = strdup(vstr(cfg, "client_id"));
	json_decref(cfg);
	/* ra changed, rb gone, rc new (its header from the environment),
	 * rd's URL changed, rapi named by the file too */
	entry_of(a, sizeof(a), "ra", srv.port,
	         ", \"tool_sync_interval\": \"5m\"");
	entry_of(
	        c, sizeof(c), "rc", srv.port,
	        ", \"auth_type\": \"headers\", \"headers\": {\"x-token\": \"env.MK_TEST_FILE_TOK\"}");
	entry_of(d, sizeof(d), "rd", 1, "");
	entry_of(e, sizeof(e), "rapi", 1, "");
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"tool_execution_timeout\": \"1s\", \"client_configs\": [%s, %s, %s, %s]}}",
	        a, c, d, e);
	CHECK_EQ(mk_runtime_reload(rt, file, &err), 0);
	CHECK(!listed(rt, "rb"));
	cfg = config_of(rt, "ra");
	CHECK(strcmp(vstr(cfg, "tool_sync_interval"), "5m") == 0);
	CHECK(json_object_get(cfg, "tool_execution_timeout") == NULL);
	json_decref(cfg);
	CHECK(saw(rt, "rc", "x-token", FILE_TOK));
	cfg = config_of(rt, "rd");
	CHECK(strstr(vstr(cfg, "connection_string"), "127.0.0.1:1/") != NULL);
	CHECK(strcmp(vstr(cfg, "client_id"), rd_id) != 0);
	json_decref(cfg);
	cfg = config_of(rt, "rapi");
	CHECK(strstr(vstr(cfg, "connection_string"), "127.0.0.1:1/") == NULL);
	json_decref(cfg);
	/* the global timeout applied: ra has none of its own now */
	CHECK(hang_ms(rt, "ra") < 10000);
	/* invalid: nothing changes */
	CHECK_EQ(
	        mk_runtime_reload(
	                rt,
	                "{\"mcp\": {\"client_configs\": [{\"name\": \"bad name\"}]}}",
	                &err),
	        MK_EINVAL);
	CHECK(strstr(err, "bad name") != NULL);
	mk_free(err);
	err = NULL;
	CHECK_EQ(
	        mk_runtime_reload(
	                rt,
	                "{\"mcp\": {\"client_configs\": [{\"name\": \"rz\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_NOPE_Y\"}]}}",
	                &err),
	        MK_EINVAL);
	CHECK(strstr(err, "MK_NOPE_Y is not set") != NULL);
	mk_free(err);
	err = NULL;
	CHECK(listed(rt, "ra") && listed(rt, "rc") && listed(rt, "rd"));
	/* rapi was not the file's: a file without it leaves it */
	snprintf(file, sizeof(file),
	         "{\"mcp\": {\"client_configs\": [%s, %s]}}", a, c);
	CHECK_EQ(mk_runtime_reload(rt, file, &err), 0);
	CHECK(!listed(rt, "rd"));
	cfg = config_of(rt, "rapi");
	CHECK(strstr(vstr(cfg, "connection_string"), "127.0.0.1:1/") == NULL);
	json_decref(cfg);
	rt_close(&rt, &sb);
	close(fd);
	CHECK(file_has(
	        logp,
	        "runtime: reloaded: 2 added, 1 updated, 1 removed, 1 failed"));
	CHECK(file_has(logp,
	               "runtime: reload: rapi: an MCP client named rapi"));
	CHECK(file_has(
	        logp,
	        "runtime: reloaded: 0 added, 0 updated, 1 removed, 0 failed"));
	CHECK(!file_has(logp, FILE_TOK));
	free(rd_id);
}

/* A config file of n stdio clients, prefix000 and on, each running
 * command arg, at_once of them started at once (malloc'd). */
static char *
stdio_file(const char *prefix, int n, int at_once, const char *command,
           const char *arg)
{
	size_t cap = (size_t)n * 512 + 128, len = 0;
	char  *file;

	CHECK((file = malloc(cap)) != NULL);
	len += (size_t)snprintf(file, cap,
	                        "{\"mcp\": {\"stdio_start_concurrency\": %d, "
	                        "\"client_configs\": [",
	                        at_once);
	for (int i = 0; i < n; i++) {
		len += (size_t)snprintf(
		        file + len, cap - len,
		        "%s{\"name\": \"%s%03d\", \"connection_type\": "
		        "\"stdio\", \"stdio_config\": {\"command\": \"%s\", "
		        "\"args\": [\"%s\"]}, \"tools_to_execute\": [\"*\"]}",
		        i ? ", " : "", prefix, i, command, arg);
	}
	snprintf(file + len, cap - len, "]}}");
	return (file);
}

/* 200 stdio servers boot with at most stdio_start_concurrency of them
 * starting at once (stdio_count, a C stand-in: 200 Node servers would
 * not fit this machine, marks each start and its end in one file), all
 * of them; the boot log says how far it got. */
static void
cold_starts(void)
{
	enum { N = 200, AT_ONCE = 3 };
	sub         sb;
	mk_options  o;
	mk_runtime *rt;
	char        marks[256], logp[256], *err = NULL, *file, buf[4096];
	int         fd, at = 0, most = 0, starts = 0, ends = 0;
	ssize_t     n;

	CHECK(getenv("MK_STDIO_COUNT") != NULL);
	snprintf(marks, sizeof(marks), "%s/marks", dir);
	snprintf(logp, sizeof(logp), "%s/boot.log", dir);
	file = stdio_file("cold", N, AT_ONCE, getenv("MK_STDIO_COUNT"), marks);
	CHECK((fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
	unsetenv("MCPKEEP_LOG"); /* (its progress lines are INFO) */
	rt_options(&o, NULL);
	o.log_level = MK_LOG_INFO;
	o.log_fd    = fd;
	rt          = rt_open_options(&sb, &o);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	free(file);
	/* every start, and never more than AT_ONCE under way */
	CHECK((fd = open(marks, O_RDONLY)) >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			at += buf[i] == '+' ? 1 : -1;
			starts += buf[i] == '+';
			ends += buf[i] == '-';
			most = at > most ? at : most;
		}
	}
	close(fd);
	fprintf(stderr, "   %d starts, at most %d at once\n", starts, most);
	CHECK_EQ(starts, N);
	CHECK_EQ(ends, N);
	CHECK(most >= 1 && most <= AT_ONCE);
	json_t *v = view_of(rt, "cold199");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	rt_close(&rt, &sb);
	close(o.log_fd);
	setenv("MCPKEEP_LOG", "warn", 1);
	/* the boot's progress, every tenth */
	FILE *lf    = fopen(logp, "r");
	bool  first = false, last = false;
	CHECK(lf != NULL);
	while (fgets(buf, sizeof(buf), lf) != NULL) {
		first |= strstr(buf, "boot: connected 20/200\n") != NULL;
		last |= strstr(buf, "boot: connected 200/200\n") != NULL;
	}
	fclose(lf);
	CHECK(first && last);
}

static struct {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	bool            done;
	int             rc;
} loaded = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static void
on_loaded(void *arg, int rc, const char *err)
{
	(void)arg;
	(void)err;
	pthread_mutex_lock(&loaded.mtx);
	loaded.done = true;
	loaded.rc   = rc;
	pthread_cond_broadcast(&loaded.cv);
	pthread_mutex_unlock(&loaded.mtx);
}

/* A boot that takes longer than a minute is waited for: three stdio
 * servers that never answer, started one at a time, take three times a
 * first connect's 30 s.  Both loads (one async, one beside it) answer
 * MK_OK when the last connect ends, every client kept `unstable` at
 * stage `connect`.  (Before, both gave up at 60 s with MK_ETIMEDOUT, and
 * a daemon so booting stopped itself.) */
static void
long_boot(void)
{
	enum { N = 3 };
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	char       *a, *b, *err = NULL, name[16];

	a = stdio_file("silentA", N, 1, "sleep", "600");
	b = stdio_file("silentB", N, 1, "sleep", "600");
	CHECK_EQ(mk_runtime_load_async(rt, a, on_loaded, NULL, &err), 0);
	CHECK_EQ(mk_runtime_load(rt, b, &err), 0);
	CHECK(err == NULL);
	pthread_mutex_lock(&loaded.mtx);
	while (!loaded.done) {
		pthread_cond_wait(&loaded.cv, &loaded.mtx);
	}
	pthread_mutex_unlock(&loaded.mtx);
	CHECK_EQ(loaded.rc, 0);
	for (int i = 0; i < 2 * N; i++) {
		snprintf(name, sizeof(name), "silent%c%03d", "AB"[i / N],
		         i % N);
		json_t *v = view_of(rt, name);
		CHECK(strcmp(vstr(v, "state"), "unstable") == 0);
		CHECK(strcmp(vstr(json_object_get(v, "last_failure"), "stage"),
		             "connect") == 0);
		json_decref(v);
	}
	free(a);
	free(b);
	rt_close(&rt, &sb);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(js, sizeof(js), "%s/inject.mjs", peer_dir());
	const char *nodev[] = {"node", js, "http", "--port", "0", NULL};
	CHECK_EQ(peer_start(&srv, nodev, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	RUN_IF(global_settings_load);
	RUN_IF(global_settings_configure);
	RUN_IF(update_in_place);
	RUN_IF(clients_by_id);
	RUN_IF(view_round_trip);
	RUN_IF(api_env_literal);
	RUN_IF(file_env_update);
	RUN_IF(env_args_hidden);
	RUN_IF(reload_diff);
	RUN_IF(cold_starts);
	RUN_IF(long_boot);
	peer_stop(&srv);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	curl_global_cleanup();
	return (0);
}
