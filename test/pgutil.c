/*
 * pgutil.c - a real PostgreSQL server for a test (see pgutil.h).
 */
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pgutil.h"
#include "testutil.h"

/* A port nothing listens on now. */
static int
free_port(void)
{
	struct sockaddr_in a  = {.sin_family = AF_INET};
	socklen_t          n  = sizeof(a);
	int                fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &n) == 0);
	close(fd);
	return (ntohs(a.sin_port));
}

static void
pg_sh(pgt *p, const char *cmd)
{
	const char *sh = getenv("MK_PG_SH");
	char        line[512];

	snprintf(line, sizeof(line), "%s %s %s %d",
	         sh != NULL ? sh : "test/pg.sh", cmd, p->dir, p->port);
	if (system(line) != 0) {
		fprintf(stderr, "pgutil: failed: %s\n", line);
		exit(1);
	}
}

/* The server a failed check leaves behind: stopped at exit. */
static pgt *running;

static void
stop_at_exit(void)
{
	char line[256];

	if (running != NULL) {
		snprintf(line, sizeof(line),
		         "%s kill %s >/dev/null 2>&1; rm -rf %s",
		         getenv("MK_PG_SH") != NULL ? getenv("MK_PG_SH")
		                                    : "test/pg.sh",
		         running->dir, running->dir);
		running = NULL;
		if (system(line) != 0) {
			fprintf(stderr,
			        "pgutil: the server was not stopped\n");
		}
	}
}

void
pgt_start(pgt *p)
{
	snprintf(p->dir, sizeof(p->dir), "/tmp/mk-pg-XXXXXX");
	CHECK(mkdtemp(p->dir) != NULL);
	p->port = free_port();
	pg_sh(p, "start");
	running = p;
	atexit(stop_at_exit);
}

void
pgt_ctl(pgt *p, const char *cmd)
{
	pg_sh(p, cmd);
}

static void
quiet(void *arg, const char *message)
{
}

void
pgt_sql(const char *url, const char *sql, char *out, size_t len)
{
	PGconn   *c = PQconnectdb(url);
	PGresult *r;

	PQsetNoticeProcessor(c, quiet, NULL);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pgutil: connect: %s", PQerrorMessage(c));
		exit(1);
	}
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "pgutil: %s: %s", sql, PQerrorMessage(c));
		exit(1);
	}
	if (out != NULL) {
		snprintf(out, len, "%s",
		         PQntuples(r) > 0 && PQnfields(r) > 0
		                 ? PQgetvalue(r, 0, 0)
		                 : "");
	}
	PQclear(r);
	PQfinish(c);
}

void
pgt_db(pgt *p, const char *name, char *url, size_t len)
{
	char admin[128], sql[128];

	snprintf(admin, sizeof(admin), "postgresql://mk@127.0.0.1:%d/postgres",
	         p->port);
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", name);
	pgt_sql(admin, sql, NULL, 0);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	pgt_sql(admin, sql, NULL, 0);
	snprintf(url, len, "postgresql://mk:" PGT_PASSWORD "@127.0.0.1:%d/%s",
	         p->port, name);
}

void
pgt_stop(pgt *p)
{
	char line[128];

	running = NULL;
	pg_sh(p, "stop");
	snprintf(line, sizeof(line), "rm -rf %s", p->dir);
	CHECK(system(line) == 0);
}
