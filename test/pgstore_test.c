/*
 * pgstore_test.c - the store on a real PostgreSQL server (started by
 * test/pg.sh): the store contract (clients, the tool-list gate, rows,
 * refusals naming what is wrong), secrets sealed in the database, two
 * nodes' handles on one database (one tool-list write between them,
 * nodes migrating and setting up the key at once), a newer schema
 * refused, the server restarted and stopped under an open handle, the
 * URL's password never shown, the cluster actor's first resync, and
 * a plain value written into a keyed database refused.
 */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "actors/cluster.h"
#include "actors/credential/credential.h"
#include "actors/kernel/kernel.h"
#include "actors/persister.h"
#include "actors/supervisor/supervisor.h"
#include "mcpkeep.h"
#include "persist/store.h"
#include "pgutil.h"
#include "storeutil.h"
#include "testutil.h"

#define KEY1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEY2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static pgt pg;

static store *
open_key(const char *url, const char *key)
{
	store *s;
	char   err[STORE_ERR_MAX];
	int    rv = store_open(&s, url, STORE_RW, key, err, sizeof(err));

	if (rv != 0) {
		fprintf(stderr, "open: %s\n", err);
	}
	CHECK_EQ(rv, 0);
	CHECK(strstr(err, PGT_PASSWORD) == NULL);
	return (s);
}

/* The store's last error, checked for the password. */
static const char *
error_of(store *s)
{
	CHECK(strstr(store_error(s), PGT_PASSWORD) == NULL);
	return (store_error(s));
}

static int
count_client(void *arg, const char *id, const char *name, const char *config,
             const char *tools, const char *hash)
{
	(*(int *)arg)++;
	return (0);
}

static int
gather(void *arg, json_t *row)
{
	json_array_append(arg, row);
	return (0);
}

static void
contract(void)
{
	char     url[160], h1[] = "1111", h2[] = "2222";
	store   *s;
	bool     w;
	int      n = 0;
	unsigned skipped;
	json_t  *r, *rows = json_array(), *got;

	pgt_db(&pg, "contract", url, sizeof(url));
	s = open_key(url, NULL);
	CHECK(!store_sealed(s));
	CHECK_EQ(store_client_put(s, "id-a", "a", "{\"name\":\"a\"}"), 0);
	CHECK_EQ(store_client_put(s, "id-b", "b", "{\"name\":\"b\"}"), 0);
	/* the same name twice is refused: a constraint, permanent */
	CHECK_EQ(store_client_put(s, "id-c", "a", "{}"), MK_EINVAL);
	CHECK(strstr(error_of(s), "duplicate key") != NULL);
	/* the gate: unchanged lists write nothing, a change once */
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[1]", NULL, &w), 0);
	CHECK(w);
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(store_tools_put(s, "id-a", h1, "[1]", NULL, &w), 0);
		CHECK(!w);
	}
	CHECK_EQ(store_tools_put(s, "id-a", h2, "[2]", NULL, &w), 0);
	CHECK(w);
	CHECK_EQ(store_tool_writes(s), 2);
	CHECK_EQ(store_tools_put(s, "nobody", h1, "[]", NULL, &w), MK_EINVAL);
	CHECK(strstr(error_of(s), "foreign key") != NULL);
	storeutil_versions(s, "id-b");
	storeutil_approvals(s, "id-x");
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 2);
	/* credential rows: a put replaces by key; types and checks refused
	 * with what is wrong named */
	r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "client_id",
	              "id-a", "mode", "user", "identity", "alice",
	              "access_token", "at-1", "refresh_token", "rt-1",
	              "expires_at", (json_int_t)1893456000, "status",
	              "active");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_object_set_new(r, "access_token", json_string("at-2"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 1);
	got = json_array_get(rows, 0);
	CHECK(strcmp(json_string_value(json_object_get(got, "access_token")),
	             "at-2") == 0);
	CHECK_EQ(json_integer_value(json_object_get(got, "expires_at")),
	         1893456000);
	CHECK(json_is_null(json_object_get(got, "scopes")));
	json_object_set_new(r, "status", json_string("sleepy"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(error_of(s), "violates check constraint") != NULL);
	json_object_set_new(r, "status", json_string("active"));
	json_object_set_new(r, "expires_at", json_string("soon"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(error_of(s), "invalid input syntax") != NULL);
	json_object_set_new(r, "colour", json_string("red"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(error_of(s), "oauth_tokens has no column colour"));
	json_decref(r);
	/* by key, and none */
	r = json_pack("{s:s, s:s, s:s}", "client_id", "id-a", "mode", "user",
	              "identity", "alice");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, r, &got), 0);
	CHECK(got != NULL);
	CHECK(strcmp(json_string_value(json_object_get(got, "refresh_token")),
	             "rt-1") == 0);
	json_decref(got);
	json_object_set_new(r, "identity", json_string("nobody"));
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, r, &got), 0);
	CHECK(got == NULL);
	json_decref(r);
	/* a transaction rolled back leaves nothing */
	CHECK_EQ(store_begin(s, true), 0);
	CHECK_EQ(store_client_put(s, "id-x", "x", "{}"), 0);
	store_rollback(s);
	n = 0;
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 2);
	/* a client's delete takes its tools and credential rows */
	CHECK_EQ(store_client_del(s, "id-a"), 0);
	json_array_clear(rows);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 0);
	json_decref(rows);
	store_close(&s);
}

/* Writes a client with a header secret, a token and a flow. */
static void
write_secrets(store *s)
{
	json_t *r = json_pack(
	        "{s:s, s:s, s:s, s:s, s:s, s:s}", "client_id", "c1", "mode",
	        "shared", "identity", "", "access_token", "access-SECRET-1",
	        "refresh_token", "refresh-SECRET-1", "status", "active");

	CHECK_EQ(store_client_put(
	                 s, "c1", "c1",
	                 "{\"headers\":{\"Authorization\":\"HDR-SECRET\"}}"),
	         0);
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "state",
	              "s-1", "client_id", "c1", "mode", "admin", "identity",
	              "", "pkce_verifier", "PKCE-SECRET", "redirect_uri",
	              "http://127.0.0.1/cb", "status", "pending", "expires_at",
	              (json_int_t)99);
	CHECK_EQ(store_row_put(s, STORE_OAUTH_FLOWS, r), 0);
	json_decref(r);
}

static int
config_of(void *arg, const char *id, const char *name, const char *config,
          const char *tools, const char *hash)
{
	snprintf(arg, 256, "%s", config);
	return (0);
}

static void
read_secrets(store *s)
{
	char     config[256] = "";
	json_t  *rows        = json_array();
	unsigned skipped;

	CHECK_EQ(store_clients_each(s, config_of, config, &skipped), 0);
	CHECK_EQ(skipped, 0);
	CHECK(strstr(config, "HDR-SECRET") != NULL);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(skipped, 0);
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(rows, 0),
	                                               "refresh_token")),
	             "refresh-SECRET-1") == 0);
	json_decref(rows);
}

/* How many stored secret columns hold text in the clear. */
static int
plain_count(const char *url, const char *text)
{
	char sql[1024], out[32];

	snprintf(sql, sizeof(sql),
	         "SELECT (SELECT count(*) FROM mcp_clients WHERE "
	         "position('%s'::bytea in config) > 0) + (SELECT count(*) "
	         "FROM oauth_tokens WHERE position('%s'::bytea in "
	         "access_token) > 0 OR position('%s'::bytea in "
	         "refresh_token) > 0) + (SELECT count(*) FROM oauth_flows "
	         "WHERE position('%s'::bytea in pkce_verifier) > 0)",
	         text, text, text, text);
	pgt_sql(url, sql, out, sizeof(out));
	return (atoi(out));
}

static void
sealed(void)
{
	const char *secrets[] = {"HDR-SECRET", "access-SECRET-1",
	                         "refresh-SECRET-1", "PKCE-SECRET"};
	char        url[160], err[STORE_ERR_MAX];
	store      *s;

	/* written plain, then opened with a key: sealed in place */
	pgt_db(&pg, "sealed", url, sizeof(url));
	s = open_key(url, NULL);
	write_secrets(s);
	store_close(&s);
	CHECK_EQ(plain_count(url, "access-SECRET-1"), 1);
	s = open_key(url, KEY1);
	CHECK(store_sealed(s));
	read_secrets(s);
	store_close(&s);
	for (size_t i = 0; i < 4; i++) {
		CHECK_EQ(plain_count(url, secrets[i]), 0);
	}
	/* refused without the key, or with another, saying which */
	CHECK_EQ(store_open(&s, url, STORE_RW, NULL, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err, "it holds sealed secrets") != NULL);
	CHECK_EQ(store_open(&s, url, STORE_RW, KEY2, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err, "the encryption key does not match") != NULL);
	/* a sealed value moved to another row does not open there */
	s = open_key(url, KEY1);
	json_t *r =
	        json_pack("{s:s, s:s, s:s, s:s, s:s}", "client_id", "c1",
	                  "mode", "user", "identity", "mallory",
	                  "access_token", "mallory-own", "status", "active");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	pgt_sql(url,
	        "UPDATE oauth_tokens SET access_token = (SELECT access_token "
	        "FROM oauth_tokens WHERE mode = 'shared') WHERE identity = "
	        "'mallory'",
	        NULL, 0);
	json_t  *rows = json_array();
	unsigned skipped;
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 1);
	CHECK_EQ(skipped, 1);
	CHECK(strstr(error_of(s),
	             "oauth_tokens row c1: access_token does not "
	             "open with this key") != NULL);
	json_decref(rows);
	store_close(&s);
}

/* ---- nodes sharing one database ----------------------------------------- */

#define NODES 6

static char              shared_url[160];
static pthread_barrier_t start_line;

/* A node's first open of a new database, at the same moment as the
 * others': writes its own client, sealed. */
static void *
node_first(void *arg)
{
	char   id[8], config[64];
	store *s;

	pthread_barrier_wait(&start_line);
	s = open_key(shared_url, KEY1);
	snprintf(id, sizeof(id), "c%d", (int)(intptr_t)arg);
	snprintf(config, sizeof(config), "{\"secret\":\"HDR-SECRET-%s\"}", id);
	CHECK_EQ(store_client_put(s, id, id, config), 0);
	store_close(&s);
	return (NULL);
}

/* A node checking the same tool list as the others, at once. */
static void *
node_check(void *arg)
{
	store *s = open_key(shared_url, KEY1);
	bool   w;

	pthread_barrier_wait(&start_line);
	CHECK_EQ(store_tools_put(s, "c0", "hash-1", "[]", NULL, &w), 0);
	*(uint64_t *)arg = store_tool_writes(s);
	store_close(&s);
	return (NULL);
}

static int
check_secret(void *arg, const char *id, const char *name, const char *config,
             const char *tools, const char *hash)
{
	char want[64];

	snprintf(want, sizeof(want), "HDR-SECRET-%s", id);
	CHECK(strstr(config, want) != NULL);
	(*(int *)arg)++;
	return (0);
}

static void
nodes(void)
{
	pthread_t th[NODES];
	uint64_t  writes[NODES], total = 0;
	store    *s;
	char      out[32];
	int       n = 0;
	unsigned  skipped;

	/* six nodes open a new database at once: one migration, one salt,
	 * and every node's secrets open on every other */
	pgt_db(&pg, "nodes", shared_url, sizeof(shared_url));
	CHECK(pthread_barrier_init(&start_line, NULL, NODES) == 0);
	for (intptr_t i = 0; i < NODES; i++) {
		CHECK(pthread_create(&th[i], NULL, node_first, (void *)i) ==
		      0);
	}
	for (int i = 0; i < NODES; i++) {
		pthread_join(th[i], NULL);
	}
	pgt_sql(shared_url, "SELECT count(*) FROM store_meta", out,
	        sizeof(out));
	CHECK(strcmp(out, "2") == 0); /* one salt, one check */
	pgt_sql(shared_url, "SELECT count(*) FROM mk_schema", out,
	        sizeof(out));
	CHECK(strcmp(out, "1") == 0);
	s = open_key(shared_url, KEY1);
	CHECK_EQ(store_clients_each(s, check_secret, &n, &skipped), 0);
	CHECK_EQ(n, NODES);
	CHECK_EQ(skipped, 0);
	store_close(&s);
	CHECK_EQ(plain_count(shared_url, "HDR-SECRET"), 0);
	/* six nodes check the same new list at once: one write in all */
	for (int i = 0; i < NODES; i++) {
		CHECK(pthread_create(&th[i], NULL, node_check, &writes[i]) ==
		      0);
	}
	for (int i = 0; i < NODES; i++) {
		pthread_join(th[i], NULL);
		total += writes[i];
	}
	CHECK_EQ(total, 1);
	pthread_barrier_destroy(&start_line);
}

/* ---- the server going away ---------------------------------------------- */

/* Begins a transaction, retrying until the server answers (bounded):
 * every failure is MK_ESYS, names the store and never the password. */
static void
begin_when_back(store *s, const char *name)
{
	int64_t deadline = now_ms() + 30000;
	int     rv, fails = 0;

	while ((rv = store_begin(s, false)) != 0) {
		CHECK_EQ(rv, MK_ESYS);
		CHECK(strstr(error_of(s), name) != NULL);
		CHECK(now_ms() < deadline);
		fails++;
		usleep(50 * 1000); /* polling the server, not synchronising */
	}
	fprintf(stderr, "   back after %d failed begins\n", fails);
}

static void
server_away(void)
{
	char     url[160], want[96], name[112], shown[160], err[STORE_ERR_MAX];
	char     out[32];
	store   *s;
	int      n = 0;
	unsigned skipped;

	pgt_db(&pg, "away", url, sizeof(url));
	snprintf(want, sizeof(want), "postgresql://mk@127.0.0.1:%d/away",
	         pg.port);
	snprintf(name, sizeof(name), "store %s:", want);
	store_display(url, shown, sizeof(shown));
	CHECK(strcmp(shown, want) == 0);
	s = open_key(url, KEY1);
	CHECK_EQ(store_client_put(s, "c1", "c1", "{}"), 0);
	/* restarted: the next calls fail until the handle has reconnected */
	pgt_ctl(&pg, "restart");
	begin_when_back(s, name);
	CHECK_EQ(store_client_put(s, "c2", "c2", "{}"), 0);
	CHECK_EQ(store_commit(s), 0);
	/* stopped: refused at once, saying so */
	pgt_ctl(&pg, "stop");
	CHECK_EQ(store_begin(s, false), MK_ESYS);
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), MK_ESYS);
	CHECK(strstr(error_of(s), name) != NULL);
	pgt_ctl(&pg, "start");
	begin_when_back(s, name);
	CHECK_EQ(store_commit(s), 0);
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 2);
	store_close(&s);
	/* a server that is not there: a clear error, no password */
	CHECK_EQ(store_open(&s,
	                    "postgresql://mk:" PGT_PASSWORD
	                    "@127.0.0.1:1/none",
	                    STORE_RW, NULL, err, sizeof(err)),
	         MK_ESYS);
	CHECK(strstr(err,
	             "store postgresql://mk@127.0.0.1:1/none: "
	             "connecting: ") != NULL);
	CHECK(strstr(err, PGT_PASSWORD) == NULL);
	/* a version 1 schema (no tool-list versions, no approvals)
	 * migrates, its rows kept */
	pgt_sql(url,
	        "ALTER TABLE mcp_tools DROP COLUMN versions; "
	        "DROP TABLE tool_approvals; "
	        "UPDATE mk_schema SET version = 1",
	        NULL, 0);
	CHECK_EQ(store_open(&s, url, STORE_RW, KEY1, err, sizeof(err)), 0);
	pgt_sql(url, "SELECT version FROM mk_schema", out, sizeof(out));
	CHECK(strcmp(out, "3") == 0);
	pgt_sql(url, "SELECT count(*) FROM tool_approvals", out, sizeof(out));
	CHECK(strcmp(out, "0") == 0);
	pgt_sql(url,
	        "SELECT count(*) FROM information_schema.columns WHERE "
	        "table_name = 'mcp_tools' AND column_name = 'versions'",
	        out, sizeof(out));
	CHECK(strcmp(out, "1") == 0);
	pgt_sql(url, "SELECT count(*) FROM mcp_clients", out, sizeof(out));
	CHECK(atoi(out) > 0);
	store_close(&s);
	/* a newer schema is refused */
	pgt_sql(url, "UPDATE mk_schema SET version = 99", NULL, 0);
	CHECK_EQ(store_open(&s, url, STORE_RW, KEY1, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err, "schema version 99 is newer than this mcpkeep") !=
	      NULL);
}

/* ---- changes told across nodes ----------------------------------------- */

typedef struct told {
	char what[512]; /* "put c1 del c2 ..." */
} told;

static int
on_change(void *arg, store_change what, const char *id)
{
	static const char *const verb[] = {"put", "del", "states", "row"};
	told                    *t      = arg;
	size_t                   n      = strlen(t->what);

	snprintf(t->what + n, sizeof(t->what) - n, "%s%s %s", n ? " " : "",
	         verb[what], id);
	return (0);
}

/* Waits (bounded) on b's socket until what has been told, reading what
 * arrives; *resync set when b reconnected on the way. */
static void
wait_told(store *b, int *fd, const char *want, bool *resync)
{
	int64_t deadline = now_ms() + 15000;
	told    t        = {{0}};
	bool    r;

	*resync = false;
	while (strcmp(t.what, want) != 0) {
		struct pollfd p = {.fd = *fd, .events = POLLIN};
		CHECK(now_ms() < deadline);
		if (*fd >= 0) {
			CHECK(poll(&p, 1, 200) >= 0);
		} else {
			usleep(100 * 1000); /* no socket yet: the server is
			                     * back soon */
		}
		int rv = store_changes(b, on_change, &t, &r, fd);
		CHECK(rv == 0 || rv == MK_ESYS);
		*resync |= r;
	}
}

static int
got_config(void *arg, const char *id, const char *name, const char *config,
           const char *tools, const char *hash)
{
	snprintf(arg, 256, "%s=%s", name, config);
	return (0);
}

static void
changes(void)
{
	char   url[160], got[256] = "";
	store *a, *b;
	int    fd;
	bool   resync;

	pgt_db(&pg, "changes", url, sizeof(url));
	a = open_key(url, KEY1);
	b = open_key(url, KEY1);
	CHECK_EQ(store_set_node(a, "node-a"), 0);
	CHECK_EQ(store_set_node(b, "node-b"), 0);
	CHECK_EQ(store_listen(b, &fd), 0);
	CHECK(fd >= 0);
	/* a's write is told to b at commit, its row readable there */
	CHECK_EQ(store_begin(a, false), 0);
	CHECK_EQ(store_client_put(a, "c1", "one", "{\"v\":1}"), 0);
	CHECK_EQ(store_commit(a), 0);
	wait_told(b, &fd, "put c1", &resync);
	CHECK(!resync);
	CHECK_EQ(store_client_get(b, "c1", got_config, got), 0);
	CHECK(strcmp(got, "one={\"v\":1}") == 0);
	/* the same config again tells nothing; b's own writes are not told
	 * to b: what arrives next is a's change of c2 alone */
	CHECK_EQ(store_client_put(a, "c1", "one", "{\"v\":1}"), 0);
	CHECK_EQ(store_client_put(b, "c3", "three", "{}"), 0);
	CHECK_EQ(store_client_put(a, "c2", "two", "{}"), 0);
	wait_told(b, &fd, "put c2", &resync);
	CHECK_EQ(store_client_del(a, "c1"), 0);
	CHECK_EQ(store_client_del(a, "c1"), 0); /* nothing: not told */
	CHECK_EQ(store_client_put(a, "c2", "two", "{\"v\":2}"), 0);
	wait_told(b, &fd, "del c1 put c2", &resync);
	got[0] = '\0';
	CHECK_EQ(store_client_get(b, "c1", got_config, got), 0);
	CHECK(got[0] == '\0');
	/* a restart loses what was told meanwhile: b says to resync */
	pgt_ctl(&pg, "restart");
	CHECK_EQ(store_client_put(a, "c4", "four", "{}"), MK_ESYS);
	begin_when_back(a, "store postgresql://");
	CHECK_EQ(store_client_put(a, "c4", "four", "{}"), 0);
	CHECK_EQ(store_commit(a), 0);
	for (int64_t deadline = now_ms() + 15000; !resync;) {
		told t = {{0}};
		CHECK(now_ms() < deadline);
		int rv = store_changes(b, on_change, &t, &resync, &fd);
		CHECK(rv == 0 || rv == MK_ESYS);
		CHECK(t.what[0] == '\0'); /* c4 was before b listened again */
		usleep(50 * 1000);        /* polling the reconnect */
	}
	CHECK_EQ(store_client_put(a, "c5", "five", "{}"), 0);
	wait_told(b, &fd, "put c5", &resync);
	store_close(&a);
	store_close(&b);
}

/* ---- heartbeats and states --------------------------------------------- */

static int
state_of(void *arg, const char *node, const char *client, const char *state,
         const char *failure)
{
	size_t n = strlen(arg);

	snprintf((char *)arg + n, 256 - n, "%s%s/%s=%s%s", n ? " " : "", node,
	         client, state, failure != NULL ? "+" : "");
	return (0);
}

/* What b reads of the others' states. */
static const char *
states_seen(store *b)
{
	static char out[256];

	out[0] = '\0';
	CHECK_EQ(store_node_states(b, state_of, out), 0);
	return (out);
}

static void
heartbeats(void)
{
	char   url[160];
	store *a, *b;
	int    fd;
	bool   resync;

	pgt_db(&pg, "beats", url, sizeof(url));
	a = open_key(url, NULL);
	b = open_key(url, NULL);
	CHECK_EQ(store_heartbeat(a, 100), MK_EINVAL); /* no node id */
	CHECK(strstr(error_of(a), "no node id set") != NULL);
	CHECK_EQ(store_set_node(a, "a"), 0);
	CHECK_EQ(store_set_node(b, "b"), 0);
	CHECK_EQ(store_listen(b, &fd), 0);
	/* a's state, told to b; b's own never among what b reads */
	CHECK_EQ(store_heartbeat(a, 200), 0);
	CHECK_EQ(store_heartbeat(b, 200), 0);
	CHECK_EQ(store_node_state(a, "c1", "unstable",
	                          "{\"stage\":\"connect\"}"),
	         0);
	CHECK_EQ(store_node_state(b, "c1", "healthy", NULL), 0);
	wait_told(b, &fd, "states a", &resync);
	CHECK(strcmp(states_seen(b), "a/c1=unstable+") == 0);
	/* the same state again tells nothing; a change does */
	CHECK_EQ(store_node_state(a, "c1", "unstable",
	                          "{\"stage\":\"connect\"}"),
	         0);
	CHECK_EQ(store_node_state(a, "c2", "healthy", NULL), 0);
	wait_told(b, &fd, "states a", &resync);
	CHECK(strcmp(states_seen(b), "a/c1=unstable+ a/c2=healthy") == 0);
	/* a stops beating: out of b's view after 3 intervals */
	int64_t t0 = now_ms();
	while (states_seen(b)[0] != '\0') {
		CHECK(now_ms() - t0 < 15000);
		usleep(50 * 1000); /* polling the expiry, bounded */
	}
	/* back, then gone at once when it leaves */
	CHECK_EQ(store_heartbeat(a, 200), 0);
	CHECK(strcmp(states_seen(b), "a/c1=unstable+ a/c2=healthy") == 0);
	CHECK_EQ(store_node_state(a, "c2", NULL, NULL), 0);
	CHECK(strcmp(states_seen(b), "a/c1=unstable+") == 0);
	CHECK_EQ(store_node_leave(a), 0);
	CHECK(strcmp(states_seen(b), "") == 0);
	store_close(&a);
	store_close(&b);
}

/* ---- refresh leases ----------------------------------------------------- */

static json_t *
token(const char *refresh)
{
	return (json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "client_id",
	                  "c1", "mode", "shared", "identity", "",
	                  "access_token", "at", "refresh_token", refresh,
	                  "expires_at", (json_int_t)1893456000, "status",
	                  "active"));
}

static const char *
refresh_of(json_t *row)
{
	return (json_string_value(json_object_get(row, "refresh_token")));
}

static void
leases(void)
{
	char    url[160];
	store  *a, *b, *lite;
	json_t *key, *row, *t;
	int64_t ga, gb;
	int     fd;
	bool    resync, w;
	char    err[STORE_ERR_MAX], said[512];

	pgt_db(&pg, "leases", url, sizeof(url));
	a = open_key(url, KEY1);
	b = open_key(url, KEY1);
	CHECK_EQ(store_set_node(a, "a"), 0);
	CHECK_EQ(store_set_node(b, "b"), 0);
	CHECK_EQ(store_listen(b, &fd), 0);
	key = json_pack("{s:s, s:s, s:s}", "client_id", "c1", "mode", "shared",
	                "identity", "");
	/* a token written on a is said to b */
	CHECK_EQ(store_client_put(a, "c1", "c1", "{}"), 0);
	t = token("rt-1");
	CHECK_EQ(store_row_put(a, STORE_OAUTH_TOKENS, t), 0);
	json_decref(t);
	snprintf(said, sizeof(said), "put c1 row %s",
	         "{\"table\":\"oauth_tokens\",\"key\":{\"client_id\":\"c1\","
	         "\"mode\":\"shared\",\"identity\":\"\"}}");
	wait_told(b, &fd, said, &resync);
	/* a takes the lease; b, asking meanwhile, does not: both read the
	 * row as it is */
	CHECK_EQ(store_lease_take(a, STORE_OAUTH_TOKENS, key, 5000, &ga, &row),
	         0);
	CHECK(ga > 0 && strcmp(refresh_of(row), "rt-1") == 0);
	json_decref(row);
	CHECK_EQ(store_lease_take(b, STORE_OAUTH_TOKENS, key, 5000, &gb, &row),
	         0);
	CHECK_EQ(gb, 0);
	json_decref(row);
	/* a writes the refreshed tokens under its lease: b is said, and
	 * taking the lease then reads them (no refresh needed) */
	t = token("rt-2");
	CHECK_EQ(store_lease_put(a, STORE_OAUTH_TOKENS, t, ga, &w), 0);
	CHECK(w);
	json_decref(t);
	snprintf(said, sizeof(said), "row %s",
	         "{\"table\":\"oauth_tokens\",\"key\":{\"client_id\":\"c1\","
	         "\"mode\":\"shared\",\"identity\":\"\"}}");
	wait_told(b, &fd, said, &resync);
	CHECK_EQ(store_lease_take(b, STORE_OAUTH_TOKENS, key, 5000, &gb, &row),
	         0);
	CHECK(gb > ga && strcmp(refresh_of(row), "rt-2") == 0);
	json_decref(row);
	CHECK_EQ(store_lease_drop(b, STORE_OAUTH_TOKENS, key, gb), 0);
	wait_told(b, &fd, "", &resync);
	/* a lease that expired is another node's to take; the old holder's
	 * write is fenced off */
	CHECK_EQ(store_lease_take(a, STORE_OAUTH_TOKENS, key, 100, &ga, &row),
	         0);
	CHECK(ga > 0);
	json_decref(row);
	for (int64_t t0 = now_ms();;) {
		CHECK_EQ(store_lease_take(b, STORE_OAUTH_TOKENS, key, 5000,
		                          &gb, &row),
		         0);
		json_decref(row);
		if (gb > 0) {
			break;
		}
		CHECK(now_ms() - t0 < 10000);
		usleep(20 * 1000); /* polling the expiry, bounded */
	}
	CHECK(gb > ga);
	t = token("rt-late");
	CHECK_EQ(store_lease_put(a, STORE_OAUTH_TOKENS, t, ga, &w), 0);
	CHECK(!w);
	json_decref(t);
	CHECK_EQ(store_row_get(b, STORE_OAUTH_TOKENS, key, &row), 0);
	CHECK(strcmp(refresh_of(row), "rt-2") == 0);
	json_decref(row);
	/* a flow is claimed once across the nodes */
	json_t *flow =
	        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "state",
	                  "s-1", "client_id", "c1", "mode", "shared",
	                  "identity", "", "pkce_verifier", "PKCE-SECRET",
	                  "redirect_uri", "http://127.0.0.1/cb", "status",
	                  "pending", "expires_at", (json_int_t)1893456000);
	CHECK_EQ(store_row_put(a, STORE_OAUTH_FLOWS, flow), 0);
	json_decref(flow);
	CHECK_EQ(store_flow_claim(b, "s-1", &row), 0);
	CHECK(row != NULL &&
	      strcmp(json_string_value(json_object_get(row, "pkce_verifier")),
	             "PKCE-SECRET") == 0);
	json_decref(row);
	CHECK_EQ(store_flow_claim(a, "s-1", &row), 0);
	CHECK(row == NULL); /* b's now */
	CHECK_EQ(store_flow_claim(a, "nope", &row), 0);
	CHECK(row == NULL);
	/* other tables have no leases; SQLite has none */
	CHECK_EQ(store_lease_take(a, STORE_OAUTH_FLOWS, key, 100, &ga, &row),
	         MK_EINVAL);
	snprintf(err, sizeof(err), "/tmp/mk-pgstore-lite-%d.db",
	         (int)getpid());
	lite = open_key(err, NULL);
	CHECK_EQ(store_lease_take(lite, STORE_OAUTH_TOKENS, key, 100, &ga,
	                          &row),
	         MK_EINVAL);
	CHECK(strstr(store_error(lite), "not a PostgreSQL store") != NULL);
	CHECK_EQ(store_flow_claim(lite, "s-1", &row), MK_EINVAL);
	store_close(&lite);
	unlink(err);
	json_decref(key);
	store_close(&a);
	store_close(&b);
}

/* ---- the cluster actor's first resync ---------------------------------- */

/* What a stand-in supervisor was handed (MSG_SV_SYNC), "id=config"
 * or "id-" for a delete, a space between them; or a stand-in credential
 * actor (MSG_CR_RESYNC), an "R" each; test code: a lock. */
typedef struct synced {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	char            got[512];
} synced;

static int
sy_init(kn_actor *self, void *arg, void **statep)
{
	*statep = arg;
	return (0);
}

static int
sy_handle(kn_actor *self, void *state, kn_msg *msg)
{
	synced     *y = state;
	sv_sync_msg m;
	size_t      n;

	if (msg->env.type == MSG_CR_RESYNC) {
		pthread_mutex_lock(&y->mtx);
		n = strlen(y->got);
		snprintf(y->got + n, sizeof(y->got) - n, "R");
		pthread_cond_broadcast(&y->cv);
		pthread_mutex_unlock(&y->mtx);
		return (0);
	}
	if (msg->env.type != MSG_SV_SYNC ||
	    sv_sync_msg_unpack(msg->env.payload, msg->env.payload_len, &m) !=
	            0) {
		return (0); /* (MSG_SV_PEERS: not this test's) */
	}
	pthread_mutex_lock(&y->mtx);
	n = strlen(y->got);
	snprintf(y->got + n, sizeof(y->got) - n, "%s%s%s%s", n ? " " : "",
	         m.id, m.config != NULL ? "=" : "-",
	         m.config != NULL ? m.config : "");
	pthread_cond_broadcast(&y->cv);
	pthread_mutex_unlock(&y->mtx);
	sv_sync_msg_clear(&m);
	return (0);
}

static void
sy_fini(kn_actor *self, void *state)
{
}

static const kn_actor_ops sy_ops = {
        .init = sy_init, .handle = sy_handle, .fini = sy_fini};

/* A client the boot read, deleted (by another node) before the cluster
 * actor first listened, is deleted here by its first resync; one still
 * stored is handed over. */
static void
boot_gap(void)
{
	char            url[160];
	store          *s;
	kn_kernel      *k;
	kn_actor       *sv, *cs;
	synced          y = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                     .cv  = PTHREAD_COND_INITIALIZER};
	struct timespec until;

	pgt_db(&pg, "boot_gap", url, sizeof(url));
	s = open_key(url, KEY1);
	CHECK_EQ(store_client_put(s, "id-kept", "kept", "{\"v\":1}"), 0);
	store_close(&s);
	CHECK_EQ(kn_kernel_open(&k, 0), 0);
	CHECK_EQ(kn_spawn(k, "supervisor", &sy_ops, &y, &sv), 0);
	cluster_args ca = {
	        .url        = url,
	        .secret     = KEY1,
	        .node_id    = "node-b",
	        .supervisor = sv,
	        .restored   = "[{\"id\": \"id-gone\", \"name\": \"gone\"}, "
	                      "{\"id\": \"id-kept\", \"name\": \"kept\"}]"};
	CHECK_EQ(kn_spawn(k, CLUSTER_NAME, &cluster_ops, &ca, &cs), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 15;
	pthread_mutex_lock(&y.mtx);
	while (strchr(y.got, ' ') == NULL) {
		CHECK(pthread_cond_timedwait(&y.cv, &y.mtx, &until) == 0);
	}
	pthread_mutex_unlock(&y.mtx);
	kn_actor_destroy(&cs);
	kn_actor_destroy(&sv);
	kn_kernel_close(&k);
	CHECK(strcmp(y.got, "id-kept={\"v\":1} id-gone-") == 0);
}

/* Waits (15 s at most) until y got n "R"s. */
static void
resyncs_wait(synced *y, int n)
{
	struct timespec until;
	int             got;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 15;
	pthread_mutex_lock(&y->mtx);
	for (;;) {
		got = 0;
		for (const char *c = y->got; *c != '\0'; c++) {
			got += *c == 'R';
		}
		if (got >= n) {
			break;
		}
		CHECK(pthread_cond_timedwait(&y->cv, &y->mtx, &until) == 0);
	}
	pthread_mutex_unlock(&y->mtx);
}

/* Ends the one mcpkeep connection to url's database (a cluster actor's)
 * and waits for the resync after it listens again (c's second "R"). */
static void
listener_cut(const char *url, synced *c)
{
	char out[64];

	pgt_sql(url,
	        "SELECT count(pg_terminate_backend(pid)) FROM "
	        "pg_stat_activity WHERE datname = current_database() AND "
	        "application_name = 'mcpkeep'",
	        out, sizeof(out));
	CHECK(strcmp(out, "1") == 0);
	resyncs_wait(c, 2);
}

/* What was written while the cluster actor did not listen (before its
 * first LISTEN, or while its connection was lost) was told to nobody:
 * each resync tells the credential actor to read its OAuth configs and
 * tokens again. */
static void
listen_gap(void)
{
	char       url[160];
	kn_kernel *k;
	kn_actor  *sv, *cr, *cs;
	synced     y = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                .cv  = PTHREAD_COND_INITIALIZER},
	       c     = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                .cv  = PTHREAD_COND_INITIALIZER};

	pgt_db(&pg, "listen_gap", url, sizeof(url));
	CHECK_EQ(kn_kernel_open(&k, 0), 0);
	CHECK_EQ(kn_spawn(k, "supervisor", &sy_ops, &y, &sv), 0);
	CHECK_EQ(kn_spawn(k, CREDENTIAL_NAME, &sy_ops, &c, &cr), 0);
	cluster_args ca = {.url        = url,
	                   .secret     = KEY1,
	                   .node_id    = "node-b",
	                   .supervisor = sv,
	                   .restored   = "[]"};
	CHECK_EQ(kn_spawn(k, CLUSTER_NAME, &cluster_ops, &ca, &cs), 0);
	resyncs_wait(&c, 1); /* the first LISTEN */
	/* its connection lost: the resync after the next LISTEN */
	listener_cut(url, &c);
	kn_actor_destroy(&cs);
	kn_actor_destroy(&cr);
	kn_actor_destroy(&sv);
	kn_kernel_close(&k);
}

/* A write PostgreSQL refuses (a name another row has) is dropped and
 * reported, and the rest of its batch stored: on PostgreSQL a failed
 * statement aborts its transaction, so the batch is written again
 * without it, not retried whole for ever. */
static void
refused_write(void)
{
	char       url[160], out[64], err[256];
	kn_kernel *k;
	kn_stream *stream;
	kn_actor  *ps;
	kn_answer  a = {0};

	pgt_db(&pg, "refused", url, sizeof(url));
	CHECK_EQ(kn_stream_open(&stream, "inproc://refused", NULL, err,
	                        sizeof(err)),
	         0);
	CHECK_EQ(kn_kernel_open(&k, 0), 0);
	ps_args pa = {.path = url, .secret = KEY1, .stream = stream};
	CHECK_EQ(kn_spawn(k, PERSISTER_NAME, &persister_ops, &pa, &ps), 0);
	const char *rows[][2] = {
	        {"id-x", "dup"}, {"id-y", "dup"}, {"id-z", "other"}};
	for (int i = 0; i < 3; i++) {
		ps_client_msg c = {.id     = (char *)rows[i][0],
		                   .name   = (char *)rows[i][1],
		                   .config = "{\"v\":1}"};
		CHECK_EQ(kn_tell_msg(ps, NULL, MSG_PS_CLIENT_PUT,
		                     CODEC_OF(ps_client_msg, &c)),
		         0);
	}
	/* one batch, stored but for the refused write */
	CHECK_EQ(kn_ask_msg(ps, MSG_PS_SYNC,
	                    CODEC_OF(ps_sync_msg, &(ps_sync_msg) {0}), 30000,
	                    &a),
	         0);
	free(a.data);
	pgt_sql(url, "SELECT string_agg(id, ' ' ORDER BY id) FROM mcp_clients",
	        out, sizeof(out));
	CHECK(strcmp(out, "id-x id-z") == 0);
	kn_actor_destroy(&ps);
	kn_kernel_close(&k);
	kn_stream_close(&stream);
}

/* Waits (15 s at most) until y got what. */
static void
got_wait(synced *y, const char *what)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 15;
	pthread_mutex_lock(&y->mtx);
	while (strstr(y->got, what) == NULL) {
		CHECK(pthread_cond_timedwait(&y->cv, &y->mtx, &until) == 0);
	}
	pthread_mutex_unlock(&y->mtx);
}

/* A stdio client written around the nodes (plain, as an unkeyed node
 * would write it), told to them. */
#define FORGED_CLIENT                                                         \
	"INSERT INTO mcp_clients (id, name, config, digest, created_at, "     \
	"updated_at) VALUES ('id-evil', 'evil', convert_to('{\"name\": "      \
	"\"evil\", \"connection_type\": \"stdio\", \"stdio_config\": "        \
	"{\"command\": \"touch\", \"args\": [\"/tmp/mk-forged\"]}}', "        \
	"'UTF8'), 'x', 0, 0); SELECT pg_notify('mk_clients', '{\"op\": "      \
	"\"put\", \"id\": \"id-evil\", \"node\": \"mallory\"}')"

/* A keyed store takes only what it sealed: a plain client, token or
 * OAuth config written into the database is refused where it is read -
 * told, at a resync, by key, in a walk - naming its table, key and
 * column, never its value; the cluster actor hands none of it over. */
static void
forged(void)
{
	char       url[160];
	store     *s;
	kn_kernel *k;
	kn_actor  *sv, *cr, *cs;
	json_t    *key, *row = NULL, *rows = json_array();
	unsigned   skipped = 0;
	int        fd, n = 0;
	bool       resync;
	synced     y = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                .cv  = PTHREAD_COND_INITIALIZER},
	       c     = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                .cv  = PTHREAD_COND_INITIALIZER};

	pgt_db(&pg, "forged", url, sizeof(url));
	s = open_key(url, KEY1);
	CHECK_EQ(store_client_put(s, "id-kept", "kept", "{\"v\":1}"), 0);
	store_close(&s);
	/* the cluster actor of node c, listening */
	CHECK_EQ(kn_kernel_open(&k, 0), 0);
	CHECK_EQ(kn_spawn(k, "supervisor", &sy_ops, &y, &sv), 0);
	CHECK_EQ(kn_spawn(k, CREDENTIAL_NAME, &sy_ops, &c, &cr), 0);
	cluster_args ca = {.url        = url,
	                   .secret     = KEY1,
	                   .node_id    = "node-c",
	                   .supervisor = sv,
	                   .restored   = "[]"};
	CHECK_EQ(kn_spawn(k, CLUSTER_NAME, &cluster_ops, &ca, &cs), 0);
	resyncs_wait(&c, 1);
	got_wait(&y, "id-kept=");
	/* a plain client, told: node b reads it and refuses it, naming its
	 * row and column, never its value */
	s = open_key(url, KEY1);
	CHECK_EQ(store_set_node(s, "node-b"), 0);
	CHECK_EQ(store_listen(s, &fd), 0);
	pgt_sql(url, FORGED_CLIENT, NULL, 0);
	wait_told(s, &fd, "put id-evil", &resync);
	CHECK_EQ(store_client_get(s, "id-evil", count_client, &n), MK_EPROTO);
	CHECK_EQ(n, 0);
	CHECK(strstr(error_of(s),
	             "mcp_clients row id-evil (client evil): "
	             "config is not sealed") != NULL);
	CHECK(strstr(error_of(s), "touch") == NULL);
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 1); /* kept */
	CHECK_EQ(skipped, 1);
	/* node c's cluster actor hands over a client written after it, not
	 * it: neither when told nor at a resync */
	CHECK_EQ(store_client_put(s, "id-late", "late", "{\"v\":2}"), 0);
	got_wait(&y, "id-late=");
	store_close(&s);
	listener_cut(url, &c);
	kn_actor_destroy(&cs);
	kn_actor_destroy(&cr);
	kn_actor_destroy(&sv);
	kn_kernel_close(&k);
	CHECK(strstr(y.got, "evil") == NULL);
	/* a plain token and a plain OAuth config: refused by key and in a
	 * walk */
	pgt_sql(url,
	        "INSERT INTO oauth_tokens (client_id, mode, identity, "
	        "access_token, status, updated_at) VALUES ('id-kept', "
	        "'shared', '', 'forged-AT'::bytea, 'active', 0); INSERT INTO "
	        "oauth_configs (id, client_id, config, updated_at) VALUES "
	        "('id-kept', 'id-kept', convert_to('{\"token_endpoint\": "
	        "\"http://mallory/token\"}', 'UTF8'), 0)",
	        NULL, 0);
	s   = open_key(url, KEY1);
	key = json_pack("{s:s, s:s, s:s}", "client_id", "id-kept", "mode",
	                "shared", "identity", "");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, key, &row), MK_EPROTO);
	CHECK(row == NULL);
	CHECK(strstr(error_of(s),
	             "oauth_tokens row id-kept: access_token is not sealed") !=
	      NULL);
	CHECK(strstr(error_of(s), "forged-AT") == NULL);
	json_decref(key);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 0);
	CHECK_EQ(skipped, 1);
	key = json_pack("{s:s}", "id", "id-kept");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_CONFIGS, key, &row), MK_EPROTO);
	CHECK(row == NULL);
	CHECK(strstr(error_of(s),
	             "oauth_configs row id-kept: config is not sealed") !=
	      NULL);
	CHECK(strstr(error_of(s), "mallory") == NULL);
	json_decref(key);
	CHECK_EQ(store_rows_each(s, STORE_OAUTH_CONFIGS, gather, rows,
	                         &skipped),
	         0);
	CHECK_EQ(json_array_size(rows), 0);
	CHECK_EQ(skipped, 1);
	json_decref(rows);
	/* a node's boot read (a fresh open) refuses the client as well */
	n = 0;
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(skipped, 1);
	/* nor does it write one: a sealed column takes a string or null */
	row = json_pack("{s:s, s:s, s:s, s:I, s:s}", "client_id", "id-kept",
	                "mode", "user", "identity", "x", "access_token",
	                (json_int_t)42, "status", "active");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, row), MK_EINVAL);
	CHECK(strstr(error_of(s),
	             "oauth_tokens.access_token: expected a "
	             "string or null (sealed)") != NULL);
	json_decref(row);
	store_close(&s);
}

int
main(int argc, char **argv)
{
	pgt_start(&pg);
	RUN_IF(contract);
	RUN_IF(sealed);
	RUN_IF(nodes);
	RUN_IF(server_away);
	RUN_IF(changes);
	RUN_IF(heartbeats);
	RUN_IF(leases);
	RUN_IF(boot_gap);
	RUN_IF(listen_gap);
	RUN_IF(refused_write);
	RUN_IF(forged);
	pgt_stop(&pg);
	return (0);
}
