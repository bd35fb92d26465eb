/*
 * pgutil.h - a real PostgreSQL server for a test (test/pg.sh): started
 * in a temp folder on a free port, a fresh database per case, SQL run
 * beside mcpkeep's own connection, restarted or stopped on demand.
 */
#ifndef TEST_PGUTIL_H
#define TEST_PGUTIL_H

#include <stddef.h>

/* The password every URL carries: the server trusts local connections,
 * so it is never checked, but a test can look for it where it must not
 * be. */
#define PGT_PASSWORD "pw-SECRET-42"

typedef struct pgt {
	char dir[64]; /* the server's folder */
	int  port;
} pgt;

/* pgt_start starts a server (a failure fails the test). */
void pgt_start(pgt *p);

/* pgt_db creates database name (dropping one of that name) and writes
 * its URL, with PGT_PASSWORD, into url. */
void pgt_db(pgt *p, const char *name, char *url, size_t len);

/* pgt_sql runs sql on url: the first value of its first row into out
 * ("" for none or NULL), or fails the test on an error. */
void pgt_sql(const char *url, const char *sql, char *out, size_t len);

/* pgt_ctl runs test/pg.sh cmd ("stop", "kill", "restart") on p; start
 * again with pgt_ctl(p, "start"). */
void pgt_ctl(pgt *p, const char *cmd);

/* pgt_stop stops the server and removes its folder. */
void pgt_stop(pgt *p);

#endif /* TEST_PGUTIL_H */
