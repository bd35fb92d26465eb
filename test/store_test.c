/*
 * store_test.c - the SQLite store on a real file: migrations (from an
 * empty file and from every earlier version), a newer schema refused,
 * not-a-database, clients and the tool-list hash gate, credential rows,
 * and secrets sealed at rest (AES-256-GCM): unreadable in the file, a
 * round trip with the key, refused without it or with another, a plain
 * store sealed in place, a value moved to another row refused, a plain
 * value written into a keyed store refused.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "persist/hash.h"
#include "persist/seal.h"
#include "persist/store.h"
#include "storeutil.h"
#include "testutil.h"

#define KEY1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEY2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static char dir[] = "/tmp/mk-store-XXXXXX";
static char path[256];

/* A fresh path in the test folder. */
static const char *
fresh(const char *name)
{
	static char p[300];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return (p);
}

static store *
open_key(const char *p, const char *key)
{
	store *s;
	char   err[STORE_ERR_MAX];
	int    rv = store_open(&s, p, STORE_RW, key, err, sizeof(err));

	if (rv != 0) {
		fprintf(stderr, "open: %s\n", err);
	}
	CHECK_EQ(rv, 0);
	return (s);
}

static store *
open_rw(void)
{
	return (open_key(path, NULL));
}

static void
exec_sql(const char *p, const char *sql)
{
	sqlite3 *db;
	char    *msg = NULL;

	CHECK_EQ(sqlite3_open(p, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "sql: %s\n", msg);
		CHECK(0);
	}
	sqlite3_close(db);
}

/* Whether needle appears in the database file or its WAL, as bytes. */
static int
file_has(const char *p, const char *needle)
{
	const char *suffix[] = {"", "-wal"};
	int         found    = 0;

	for (int i = 0; i < 2; i++) {
		char        f[320];
		struct stat sb;
		snprintf(f, sizeof(f), "%s%s", p, suffix[i]);
		int fd = open(f, O_RDONLY);
		if (fd < 0) {
			continue;
		}
		CHECK_EQ(fstat(fd, &sb), 0);
		char *buf = malloc((size_t)sb.st_size + 1);
		CHECK(buf != NULL);
		CHECK_EQ(read(fd, buf, (size_t)sb.st_size), sb.st_size);
		close(fd);
		found |= memmem(buf, (size_t)sb.st_size, needle,
		                strlen(needle)) != NULL;
		free(buf);
	}
	return (found);
}

/* A new store and its -wal and -shm are the owner's alone (0600), the
 * process umask notwithstanding: they hold credentials. */
static void
private_files(void)
{
	const char *suffix[] = {"", "-wal", "-shm"};
	char        p[300], f[320];
	mode_t      old = umask(022);
	store      *s;

	snprintf(p, sizeof(p), "%s/private.db", dir);
	s = open_key(p, NULL);
	for (int i = 0; i < 3; i++) {
		struct stat sb;
		snprintf(f, sizeof(f), "%s%s", p, suffix[i]);
		CHECK_EQ(stat(f, &sb), 0);
		if ((sb.st_mode & 0777) != 0600) {
			fprintf(stderr, "%s: mode %o\n", f, sb.st_mode & 0777);
		}
		CHECK_EQ(sb.st_mode & 0777, 0600);
	}
	store_close(&s);
	umask(old);
}

static void
migrations(void)
{
	store *s = open_rw();
	int    v;

	CHECK_EQ(store_version(s, &v), 0);
	CHECK_EQ(v, STORE_VERSION);
	store_close(&s);
	/* reopening applies nothing again */
	s = open_rw();
	CHECK_EQ(store_version(s, &v), 0);
	CHECK_EQ(v, STORE_VERSION);
	store_close(&s);
	CHECK(s == NULL);
	store_close(&s);
}

static int
count_client(void *arg, const char *id, const char *name, const char *config,
             const char *tools, const char *hash)
{
	(*(int *)arg)++;
	return (0);
}

static int
count_row(void *arg, json_t *row)
{
	(*(int *)arg)++;
	return (0);
}

/* Every earlier version, with rows in it, migrates and keeps them. */
static void
from_earlier_versions(void)
{
	char err[STORE_ERR_MAX];

	for (int from = 1; from < STORE_VERSION; from++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d.db", from);
		const char *p = fresh(name);
		CHECK_EQ(store_create_version(p, from, err, sizeof(err)), 0);
		exec_sql(
		        p,
		        "INSERT INTO mcp_clients VALUES ('id-old', 'old', '{\"name\":\"old\"}', 1, 1);INSERT INTO mcp_tools (client_id, hash, tools, updated_at) VALUES ('id-old', 'h', '[]', 1);INSERT INTO oauth_flows (state, client_id, mode, identity, pkce_verifier, redirect_uri, status, expires_at, created_at) VALUES ('st', 'id-old', 'admin', '', 'verifier', 'http://r', 'pending', 9, 1)");
		store *s = open_key(p, NULL);
		int    v, n = 0;
		CHECK_EQ(store_version(s, &v), 0);
		CHECK_EQ(v, STORE_VERSION);
		unsigned skipped;
		CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
		CHECK_EQ(n, 1);
		n = 0;
		CHECK_EQ(store_rows_each(s, STORE_OAUTH_FLOWS, count_row, &n,
		                         &skipped),
		         0);
		CHECK_EQ(n, 1);
		store_close(&s);
	}
	/* an unknown version cannot be made */
	CHECK_EQ(store_create_version(fresh("v0.db"), 0, err, sizeof(err)),
	         MK_EINVAL);
}

static void
newer_refused(void)
{
	const char *p = fresh("newer.db");
	char        err[STORE_ERR_MAX], want[128];
	store      *s;

	exec_sql(p, "PRAGMA user_version = 99");
	CHECK_EQ(store_open(&s, p, STORE_RW, NULL, err, sizeof(err)),
	         MK_EINVAL);
	snprintf(want, sizeof(want),
	         "schema version 99 is newer than this mcpkeep supports (%d)",
	         STORE_VERSION);
	CHECK(strstr(err, want) != NULL);
	CHECK(s == NULL);
}

static void
not_a_database(void)
{
	const char *p = fresh("garbage.db");
	char        err[STORE_ERR_MAX];
	FILE       *f;
	store      *s;

	f = fopen(p, "w");
	for (int i = 0; i < 2000; i++) {
		fputs("this is not a database ", f);
	}
	fclose(f);
	CHECK_EQ(store_open(&s, p, STORE_RW, NULL, err, sizeof(err)),
	         MK_EPROTO);
	CHECK(strstr(err, p) != NULL);
	CHECK(strstr(err, "not a database") != NULL);
	fprintf(stderr, "   %s\n", err);
	/* and it was not overwritten */
	CHECK(file_has(p, "this is not a database"));
}

static int
collect(void *arg, const char *id, const char *name, const char *config,
        const char *tools, const char *hash)
{
	int *n = arg;

	CHECK(id != NULL && name != NULL && config != NULL);
	if (strcmp(id, "id-a") == 0) {
		CHECK(strcmp(name, "a") == 0);
		CHECK(tools != NULL && hash != NULL);
	}
	(*n)++;
	return (0);
}

static void
clients_and_gate(void)
{
	store  *s  = open_rw();
	json_t *t1 = json_loads(
	        "[{\"name\":\"b\",\"description\":\"x\"},{\"description\":\"y\",\"name\":\"a\"}]",
	        0, NULL);
	json_t *t2 = json_loads(
	        "[{\"name\":\"a\",\"description\":\"y\"},{\"description\":\"x\",\"name\":\"b\"}]",
	        0, NULL);
	char     h1[TOOLS_HASH_HEX], h2[TOOLS_HASH_HEX];
	bool     w;
	int      n = 0;
	unsigned skipped;

	/* key and tool order never change the hash */
	CHECK_EQ(tools_hash(t1, h1), 0);
	CHECK_EQ(tools_hash(t2, h2), 0);
	CHECK(strcmp(h1, h2) == 0);
	CHECK_EQ(store_client_put(s, "id-a", "a", "{\"name\":\"a\"}"), 0);
	CHECK_EQ(store_client_put(s, "id-b", "b", "{\"name\":\"b\"}"), 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", NULL, &w), 0);
	CHECK(w);
	/* 10,000 unchanged lists: not one write */
	for (int i = 0; i < 10000; i++) {
		CHECK_EQ(store_tools_put(s, "id-a", h2, "[]", NULL, &w), 0);
		CHECK(!w);
	}
	CHECK_EQ(store_tool_writes(s), 1);
	/* a changed description: exactly one write */
	json_object_set_new(json_array_get(t1, 0), "description",
	                    json_string("changed"));
	CHECK_EQ(tools_hash(t1, h1), 0);
	CHECK(strcmp(h1, h2) != 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", NULL, &w), 0);
	CHECK(w);
	CHECK_EQ(store_tool_writes(s), 2);
	CHECK_EQ(store_clients_each(s, collect, &n, &skipped), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(skipped, 0);
	/* deleting a client takes its tools (a later put is a write) */
	CHECK_EQ(store_client_del(s, "id-a"), 0);
	CHECK_EQ(store_client_put(s, "id-a", "a", "{\"name\":\"a\"}"), 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", NULL, &w), 0);
	CHECK(w);
	/* a tool list for an unknown client is refused (foreign key) */
	CHECK(store_tools_put(s, "nobody", h1, "[]", NULL, &w) == MK_EINVAL);
	CHECK(strstr(store_error(s), "FOREIGN KEY") != NULL);
	storeutil_versions(s, "id-b");
	storeutil_approvals(s, "id-x");
	json_decref(t1);
	json_decref(t2);
	store_close(&s);
}

/* tools_diff: what changed between two lists, field by field, in name
 * order, whatever the servers' key and tool order. */
static void
tool_diff(void)
{
	json_t *old = json_loads(
	        "[{\"name\": \"send_mail\", \"description\": \"Sends\", "
	        "\"inputSchema\": {\"type\": \"object\"}, \"annotations\": "
	        "{\"destructiveHint\": false, \"title\": \"Mail\"}},"
	        " {\"name\": \"gone\"}, {\"name\": \"same\", \"title\": \"S\", "
	        "\"_meta\": {\"a\": 1, \"b\": 2}}, {\"description\": \"no name\"}]",
	        0, NULL);
	json_t *new = json_loads(
	        "[{\"name\": \"same\", \"_meta\": {\"b\": 2, \"a\": 1}, "
	        "\"title\": \"S\"}, {\"name\": \"new_one\"}, {\"annotations\": "
	        "{\"title\": \"Mail\", \"destructiveHint\": true}, \"name\": "
	        "\"send_mail\", \"description\": \"Sends mail to anyone\", "
	        "\"inputSchema\": {\"type\": \"object\", \"required\": [\"to\"]}, "
	        "\"outputSchema\": {}}]",
	        0, NULL);
	json_t *d    = tools_diff(old, new);
	char   *text = json_dumps(d, JSON_COMPACT);

	CHECK(strcmp(text,
	             "{\"removed\":[\"gone\"],\"added\":[\"new_one\"],"
	             "\"changed\":[{\"name\":\"send_mail\",\"fields\":["
	             "\"annotations.destructiveHint\",\"description\","
	             "\"inputSchema\",\"outputSchema\"]}]}") == 0 ||
	      !fprintf(stderr, "diff: %s\n", text));
	free(text);
	json_decref(d);
	/* a _meta key changed; nothing before: all added */
	json_object_set_new(json_object_get(json_array_get(new, 0), "_meta"),
	                    "a", json_integer(3));
	d = tools_diff(old, new);
	json_t *want =
	        json_loads("[{\"name\": \"same\", \"fields\": "
	                   "[\"_meta.a\"]}, {\"name\": \"send_mail\", "
	                   "\"fields\": [\"annotations.destructiveHint\", "
	                   "\"description\", \"inputSchema\", "
	                   "\"outputSchema\"]}]",
	                   JSON_DECODE_ANY, NULL);
	CHECK(json_equal(json_object_get(d, "changed"), want));
	json_decref(want);
	json_decref(d);
	d    = tools_diff(NULL, new);
	text = json_dumps(d, JSON_COMPACT);
	CHECK(strcmp(text,
	             "{\"added\":[\"new_one\",\"same\",\"send_mail\"]}") == 0);
	free(text);
	json_decref(d);
	/* the same list: an empty diff */
	d = tools_diff(new, new);
	CHECK(json_object_size(d) == 0);
	json_decref(d);
	/* bounded: 100 names, then how many more */
	json_t *many = json_array();
	for (int i = 0; i < 250; i++) {
		char n[16];
		snprintf(n, sizeof(n), "t%03d", i);
		json_array_append_new(many, json_pack("{s:s}", "name", n));
	}
	d = tools_diff(old, many);
	CHECK_EQ(json_array_size(json_object_get(d, "added")), 100);
	CHECK_EQ(json_integer_value(
	                 json_object_get(json_object_get(d, "more"), "added")),
	         150);
	CHECK_EQ(json_array_size(json_object_get(d, "removed")), 3);
	json_decref(d);
	json_decref(many);
	json_decref(old);
	json_decref(new);
}

static json_t *
token_row(const char *client, const char *identity, const char *access)
{
	return (json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s}",
	                  "client_id", client, "mode", "user", "identity",
	                  identity, "access_token", access, "refresh_token",
	                  "refresh-secret", "token_type", "Bearer",
	                  "expires_at", (json_int_t)1893456000, "status",
	                  "active"));
}

/* Collects rows into a JSON array. */
static int
gather(void *arg, json_t *row)
{
	json_array_append(arg, row);
	return (0);
}

static void
credential_rows(void)
{
	store   *s    = open_key(fresh("rows.db"), NULL);
	json_t  *rows = json_array(), *r;
	unsigned skipped;

	CHECK_EQ(store_client_put(s, "c1", "c1", "{}"), 0);
	r = token_row("c1", "alice", "at-1");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	/* the same key replaces */
	json_object_set_new(r, "access_token", json_string("at-2"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	r = token_row("c1", "bob", "at-b");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 2);
	r = json_array_get(rows, 0);
	CHECK(strcmp(json_string_value(json_object_get(r, "access_token")),
	             "at-2") == 0);
	CHECK_EQ(json_integer_value(json_object_get(r, "expires_at")),
	         1893456000);
	CHECK(json_is_null(json_object_get(r, "scopes")));
	json_array_clear(rows);
	/* bad rows are refused with the column named */
	r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "client_id", "c1",
	              "mode", "user", "identity", "x", "access_token", "t",
	              "status", "active", "colour", "red");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(store_error(s), "oauth_tokens has no column colour"));
	json_object_del(r, "colour");
	json_object_set_new(r, "status", json_string("sleepy"));
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(store_error(s), "CHECK constraint failed") != NULL);
	json_object_set_new(r, "status", json_true());
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	CHECK(strstr(store_error(s), "oauth_tokens.status: expected") != NULL);
	json_object_del(r, "identity");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), MK_EINVAL);
	json_decref(r);
	/* a flow and a header credential; the flow's data is kept */
	r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "state",
	              "s-1", "client_id", "c1", "mode", "admin", "identity",
	              "", "pkce_verifier", "v-1", "redirect_uri",
	              "http://127.0.0.1/cb", "status", "pending", "expires_at",
	              (json_int_t)99, "data", "{\"scopes\":[\"a\"]}");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_FLOWS, r), 0);
	json_decref(r);
	r = json_pack("{s:s, s:s, s:s, s:s, s:s}", "client_id", "c1", "mode",
	              "user", "identity", "alice", "headers",
	              "{\"x-api-key\":\"k\"}", "status", "active");
	CHECK_EQ(store_row_put(s, STORE_HEADER_CREDENTIALS, r), 0);
	json_decref(r);
	/* one row by its key, and none */
	json_t *got = NULL;
	r = json_pack("{s:s, s:s, s:s}", "client_id", "c1", "mode", "user",
	              "identity", "bob");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, r, &got), 0);
	CHECK(got != NULL);
	CHECK(strcmp(json_string_value(json_object_get(got, "access_token")),
	             "at-b") == 0);
	json_decref(got);
	json_object_set_new(r, "identity", json_string("nobody"));
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, r, &got), 0);
	CHECK(got == NULL);
	json_object_del(r, "mode");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, r, &got), MK_EINVAL);
	json_decref(r);
	/* deleting by key */
	r = json_pack("{s:s, s:s, s:s}", "client_id", "c1", "mode", "user",
	              "identity", "bob");
	CHECK_EQ(store_row_del(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 1);
	json_array_clear(rows);
	/* a client's delete takes every credential row of it */
	CHECK_EQ(store_client_del(s, "c1"), 0);
	for (int t = 0; t < STORE_NTABLES; t++) {
		CHECK_EQ(store_rows_each(s, (store_table)t, gather, rows,
		                         &skipped),
		         0);
	}
	CHECK_EQ(json_array_size(rows), 0);
	CHECK_EQ(store_table_find("oauth_flows"), STORE_OAUTH_FLOWS);
	CHECK_EQ(store_table_find("nope"), -1);
	json_decref(rows);
	store_close(&s);
}

/* Writes a client with a header secret and a token into s. */
static void
write_secrets(store *s)
{
	json_t *r = token_row("c1", "alice", "access-SECRET-1");

	CHECK_EQ(
	        store_client_put(
	                s, "c1", "c1",
	                "{\"name\":\"c1\",\"headers\":{\"Authorization\":\"Bearer HDR-SECRET\"}}"),
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

/* Reads back the secrets write_secrets wrote. */
static void
read_secrets(store *s)
{
	char     config[256] = "";
	json_t  *rows        = json_array();
	unsigned skipped;

	CHECK_EQ(store_clients_each(s, config_of, config, &skipped), 0);
	CHECK_EQ(skipped, 0);
	CHECK(strstr(config, "Bearer HDR-SECRET") != NULL);
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(skipped, 0);
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(rows, 0),
	                                               "access_token")),
	             "access-SECRET-1") == 0);
	json_array_clear(rows);
	CHECK_EQ(store_rows_each(s, STORE_OAUTH_FLOWS, gather, rows, &skipped),
	         0);
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(rows, 0),
	                                               "pkce_verifier")),
	             "PKCE-SECRET") == 0);
	json_decref(rows);
}

static void
encryption(void)
{
	const char *p         = fresh("sealed.db");
	const char *secrets[] = {"HDR-SECRET", "access-SECRET-1",
	                         "refresh-secret", "PKCE-SECRET"};
	char        err[STORE_ERR_MAX];
	store      *s = open_key(p, KEY1);

	CHECK(store_sealed(s));
	write_secrets(s);
	store_close(&s);
	/* nothing readable in the file, nor in its log */
	for (size_t i = 0; i < 4; i++) {
		CHECK(!file_has(p, secrets[i]));
	}
	/* a round trip with the key */
	s = open_key(p, KEY1);
	read_secrets(s);
	store_close(&s);
	/* without the key, or with another: refused, saying which */
	CHECK_EQ(store_open(&s, p, STORE_RW, NULL, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err,
	             "it holds sealed secrets: set its encryption key (MCPKEEP_ENCRYPTION_KEY)") !=
	      NULL);
	CHECK_EQ(store_open(&s, p, STORE_RW, KEY2, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err,
	             "the encryption key does not match the key its secrets were sealed with") !=
	      NULL);
	CHECK(s == NULL);
	/* a sealed value moved to another row does not open there */
	s         = open_key(p, KEY1);
	json_t *r = token_row("c1", "mallory", "mallory-own");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, r), 0);
	json_decref(r);
	store_close(&s);
	exec_sql(
	        p,
	        "UPDATE oauth_tokens SET access_token = (SELECT access_token FROM oauth_tokens WHERE identity = 'alice') WHERE identity = 'mallory'");
	s             = open_key(p, KEY1);
	json_t  *rows = json_array();
	unsigned skipped;
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 1); /* alice only */
	CHECK_EQ(skipped, 1);
	CHECK(strstr(store_error(s), "does not open with this key") != NULL);
	json_decref(rows);
	store_close(&s);
}

/* A store written plain, then opened with a key: sealed in place. */
static void
plain_then_sealed(void)
{
	const char *p = fresh("plain.db");
	store      *s = open_key(p, NULL);

	CHECK(!store_sealed(s));
	write_secrets(s);
	store_close(&s);
	CHECK(file_has(p, "access-SECRET-1")); /* plain, as configured */
	s = open_key(p, "a passphrase, stretched");
	CHECK(store_sealed(s));
	read_secrets(s);
	store_close(&s);
	CHECK(!file_has(p, "access-SECRET-1"));
	CHECK(!file_has(p, "HDR-SECRET"));
	CHECK(!file_has(p, "PKCE-SECRET"));
	s = open_key(p, "a passphrase, stretched");
	read_secrets(s);
	store_close(&s);
}

/* A keyed store takes only what it sealed: a plain client, token or OAuth
 * config written into the file is refused (the walk skips it, a get says
 * MK_EPROTO), naming its table, key and column, never its value; what
 * was plain before the first key was sealed then, and reads. */
static void
forged(void)
{
	const char *p = fresh("forged.db");
	store      *s = open_key(p, NULL);
	json_t     *key, *row = NULL, *rows = json_array();
	unsigned    skipped = 0;
	int         n       = 0;

	write_secrets(s);
	store_close(&s);
	s = open_key(p, KEY1); /* the first key: sealed in place */
	read_secrets(s);
	store_close(&s);
	exec_sql(
	        p,
	        "INSERT INTO mcp_clients (id, name, config, created_at, "
	        "updated_at) VALUES ('id-evil', 'evil', '{\"name\": \"evil\", "
	        "\"connection_type\": \"stdio\", \"stdio_config\": "
	        "{\"command\": \"touch\", \"args\": [\"/tmp/mk-forged\"]}}', "
	        "0, 0); INSERT INTO "
	        "oauth_tokens (client_id, mode, identity, access_token, "
	        "status, updated_at) VALUES ('c1', 'shared', '', "
	        "'forged-AT', 'active', 0); INSERT INTO oauth_configs (id, "
	        "client_id, config, updated_at) VALUES ('c1', 'c1', "
	        "'{\"token_endpoint\": \"http://mallory/token\"}', 0); "
	        "INSERT INTO tool_approvals (client_id, digest, tools, "
	        "updated_at) VALUES ('c1', 'd-evil', '[{\"name\": "
	        "\"wipe\"}]', 0)");
	s = open_key(p, KEY1);
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 1); /* c1 */
	CHECK_EQ(skipped, 1);
	CHECK(strstr(store_error(s),
	             "mcp_clients row id-evil (client evil): "
	             "config is not sealed") != NULL);
	CHECK(strstr(store_error(s), "touch") == NULL);
	key = json_pack("{s:s, s:s, s:s}", "client_id", "c1", "mode", "shared",
	                "identity", "");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_TOKENS, key, &row), MK_EPROTO);
	CHECK(row == NULL);
	CHECK(strstr(store_error(s),
	             "oauth_tokens row c1: access_token is not sealed") !=
	      NULL);
	CHECK(strstr(store_error(s), "forged-AT") == NULL);
	json_decref(key);
	skipped = 0;
	CHECK_EQ(
	        store_rows_each(s, STORE_OAUTH_TOKENS, gather, rows, &skipped),
	        0);
	CHECK_EQ(json_array_size(rows), 1); /* alice's, sealed */
	CHECK_EQ(skipped, 1);
	key = json_pack("{s:s}", "id", "c1");
	CHECK_EQ(store_row_get(s, STORE_OAUTH_CONFIGS, key, &row), MK_EPROTO);
	CHECK(row == NULL);
	CHECK(strstr(store_error(s),
	             "oauth_configs row c1: config is not sealed") != NULL);
	CHECK(strstr(store_error(s), "mallory") == NULL);
	json_decref(key);
	/* nor approves a tool list */
	key = json_pack("{s:s}", "client_id", "c1");
	CHECK_EQ(store_row_get(s, STORE_TOOL_APPROVALS, key, &row), MK_EPROTO);
	CHECK(row == NULL);
	CHECK(strstr(store_error(s),
	             "tool_approvals row c1: digest is not sealed") != NULL);
	json_decref(key);
	json_decref(rows);
	/* nor does it write one: a sealed column takes a string or null */
	row = json_pack("{s:s, s:s, s:s, s:I, s:s}", "client_id", "c1", "mode",
	                "shared", "identity", "", "access_token",
	                (json_int_t)42, "status", "active");
	CHECK_EQ(store_row_put(s, STORE_OAUTH_TOKENS, row), MK_EINVAL);
	CHECK(strstr(store_error(s),
	             "oauth_tokens.access_token: expected a "
	             "string or null (sealed)") != NULL);
	json_decref(row);
	store_close(&s);
	/* without a key, plain values are what a store holds */
	s = open_key(fresh("unkeyed.db"), NULL);
	store_close(&s);
	exec_sql(
	        fresh("unkeyed.db"),
	        "INSERT INTO mcp_clients (id, name, config, created_at, "
	        "updated_at) VALUES ('id-p', 'p', '{\"name\": \"p\"}', 0, 0)");
	s = open_key(fresh("unkeyed.db"), NULL);
	n = 0;
	CHECK_EQ(store_clients_each(s, count_client, &n, &skipped), 0);
	CHECK_EQ(n, 1);
	store_close(&s);
}

static void
sealing(void)
{
	uint8_t  salt[SEAL_SALT_LEN] = {1, 2, 3};
	seal_key k1, k2, k3;
	uint8_t *c, *p;
	size_t   cl, pl;

	CHECK_EQ(seal_key_from("", salt, sizeof(salt), &k1), MK_EINVAL);
	CHECK_EQ(seal_key_from("a passphrase", salt, sizeof(salt), &k1), 0);
	CHECK_EQ(seal_key_from(KEY1, salt, sizeof(salt), &k2), 0);
	CHECK_EQ(k2.k[0], 0x01);
	/* another salt, another key */
	salt[0] = 9;
	CHECK_EQ(seal_key_from("a passphrase", salt, sizeof(salt), &k3), 0);
	CHECK(memcmp(k1.k, k3.k, SEAL_KEY_LEN) != 0);
	CHECK_EQ(seal(&k1, "row-1", "token-secret", 12, &c, &cl), 0);
	CHECK(seal_is_sealed(c, cl));
	CHECK(memmem(c, cl, "token-secret", 12) == NULL); /* unreadable */
	CHECK_EQ(unseal(&k1, "row-1", c, cl, &p, &pl), 0);
	CHECK(pl == 12 && strcmp((char *)p, "token-secret") == 0);
	free(p);
	/* another row, the wrong key, a changed byte: errors, not garbage */
	CHECK_EQ(unseal(&k1, "row-2", c, cl, &p, &pl), MK_EINVAL);
	CHECK_EQ(unseal(&k2, "row-1", c, cl, &p, &pl), MK_EINVAL);
	c[cl - 1] ^= 1;
	CHECK_EQ(unseal(&k1, "row-1", c, cl, &p, &pl), MK_EINVAL);
	CHECK_EQ(unseal(&k1, "row-1", c, 10, &p, &pl), MK_EINVAL);
	free(c);
	/* two seals of the same value differ (a nonce per value) */
	uint8_t *c2;
	size_t   cl2;
	CHECK_EQ(seal(&k1, NULL, "x", 1, &c, &cl), 0);
	CHECK_EQ(seal(&k1, NULL, "x", 1, &c2, &cl2), 0);
	CHECK(memcmp(c, c2, cl) != 0);
	free(c);
	free(c2);
}

int
main(void)
{
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/mcpkeep.db", dir);
	RUN(migrations);
	RUN(private_files);
	RUN(from_earlier_versions);
	RUN(newer_refused);
	RUN(not_a_database);
	RUN(clients_and_gate);
	RUN(tool_diff);
	RUN(credential_rows);
	RUN(encryption);
	RUN(plain_then_sealed);
	RUN(forged);
	RUN(sealing);
	/* leave nothing behind */
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	return (0);
}
