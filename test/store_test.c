/*
 * store_test.c - the SQLite store on a real file: migrations, a newer
 * schema refused, clients and the tool-list hash gate, not-a-database,
 * and sealing secrets (AES-256-GCM).  The persister actor that drives the
 * store at runtime comes with issue 5.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "persist/hash.h"
#include "persist/seal.h"
#include "persist/store.h"
#include "testutil.h"

static char dir[] = "/tmp/mk-store-XXXXXX";
static char path[256];

static store *
open_rw(void)
{
	store *s;
	char   err[STORE_ERR_MAX];
	int    rv = store_open(&s, path, false, err, sizeof(err));

	if (rv != 0) {
		fprintf(stderr, "open: %s\n", err);
	}
	CHECK_EQ(rv, 0);
	return (s);
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

static void
newer_refused(void)
{
	char     p2[300], err[STORE_ERR_MAX];
	sqlite3 *db;
	store   *s;

	snprintf(p2, sizeof(p2), "%s/newer.db", dir);
	CHECK_EQ(sqlite3_open(p2, &db), SQLITE_OK);
	CHECK_EQ(
	        sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL),
	        SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(store_open(&s, p2, false, err, sizeof(err)), MK_EINVAL);
	CHECK(strstr(err,
	             "schema version 99 is newer than this mcpkeep "
	             "supports (1)") != NULL);
	CHECK(s == NULL);
}

static void
not_a_database(void)
{
	char   p2[300], err[STORE_ERR_MAX];
	FILE  *f;
	store *s;

	snprintf(p2, sizeof(p2), "%s/garbage.db", dir);
	f = fopen(p2, "w");
	for (int i = 0; i < 2000; i++) {
		fputs("this is not a database ", f);
	}
	fclose(f);
	CHECK_EQ(store_open(&s, p2, false, err, sizeof(err)), MK_EINVAL);
	CHECK(strstr(err, p2) != NULL);
	fprintf(stderr, "   %s\n", err);
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
	json_t *t1 = json_loads("[{\"name\":\"b\",\"description\":\"x\"},"
	                        "{\"description\":\"y\",\"name\":\"a\"}]",
	                        0, NULL);
	json_t *t2 = json_loads("[{\"name\":\"a\",\"description\":\"y\"},"
	                        "{\"description\":\"x\",\"name\":\"b\"}]",
	                        0, NULL);
	char    h1[TOOLS_HASH_HEX], h2[TOOLS_HASH_HEX];
	bool    w;
	int     n = 0;

	/* key and tool order never change the hash */
	CHECK_EQ(tools_hash(t1, h1), 0);
	CHECK_EQ(tools_hash(t2, h2), 0);
	CHECK(strcmp(h1, h2) == 0);
	CHECK_EQ(store_client_put(s, "id-a", "a", "{\"name\":\"a\"}"), 0);
	CHECK_EQ(store_client_put(s, "id-b", "b", "{\"name\":\"b\"}"), 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", &w), 0);
	CHECK(w);
	/* 10,000 unchanged lists: not one write */
	for (int i = 0; i < 10000; i++) {
		CHECK_EQ(store_tools_put(s, "id-a", h2, "[]", &w), 0);
		CHECK(!w);
	}
	CHECK_EQ(store_tool_writes(s), 1);
	/* a changed description: exactly one write */
	json_object_set_new(json_array_get(t1, 0), "description",
	                    json_string("changed"));
	CHECK_EQ(tools_hash(t1, h1), 0);
	CHECK(strcmp(h1, h2) != 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", &w), 0);
	CHECK(w);
	CHECK_EQ(store_tool_writes(s), 2);
	CHECK_EQ(store_clients_each(s, collect, &n), 0);
	CHECK_EQ(n, 2);
	/* deleting a client takes its tools (a later put is a write) */
	CHECK_EQ(store_client_del(s, "id-a"), 0);
	CHECK_EQ(store_client_put(s, "id-a", "a", "{\"name\":\"a\"}"), 0);
	CHECK_EQ(store_tools_put(s, "id-a", h1, "[]", &w), 0);
	CHECK(w);
	/* a tool list for an unknown client is refused (foreign key) */
	CHECK(store_tools_put(s, "nobody", h1, "[]", &w) == MK_EINVAL);
	CHECK(strstr(store_error(s), "FOREIGN KEY") != NULL);
	json_decref(t1);
	json_decref(t2);
	store_close(&s);
}

static void
sealing(void)
{
	seal_key k1, k2;
	uint8_t *c, *p;
	size_t   cl, pl;

	CHECK_EQ(seal_key_from("", &k1), MK_EINVAL);
	CHECK_EQ(seal_key_from("a passphrase", &k1), 0);
	CHECK_EQ(seal_key_from("0123456789abcdef0123456789abcdef"
	                       "0123456789abcdef0123456789abcdef",
	                       &k2),
	         0);
	CHECK_EQ(k2.k[0], 0x01);
	CHECK_EQ(seal(&k1, "token-secret", 12, &c, &cl), 0);
	CHECK(seal_is_sealed(c, cl));
	CHECK(memmem(c, cl, "token-secret", 12) == NULL); /* unreadable */
	CHECK_EQ(unseal(&k1, c, cl, &p, &pl), 0);
	CHECK(pl == 12 && strcmp((char *)p, "token-secret") == 0);
	free(p);
	/* the wrong key and a changed byte are errors, not garbage */
	CHECK_EQ(unseal(&k2, c, cl, &p, &pl), MK_EINVAL);
	c[cl - 1] ^= 1;
	CHECK_EQ(unseal(&k1, c, cl, &p, &pl), MK_EINVAL);
	CHECK_EQ(unseal(&k1, c, 10, &p, &pl), MK_EINVAL);
	free(c);
	/* two seals of the same value differ (a nonce per value) */
	uint8_t *c2;
	size_t   cl2;
	CHECK_EQ(seal(&k1, "x", 1, &c, &cl), 0);
	CHECK_EQ(seal(&k1, "x", 1, &c2, &cl2), 0);
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
	RUN(newer_refused);
	RUN(not_a_database);
	RUN(clients_and_gate);
	RUN(sealing);
	/* leave nothing behind */
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	return (0);
}
