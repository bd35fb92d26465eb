/*
 * cluster_test.c - three daemons (nodes a, b and c, the built program)
 * on one real PostgreSQL database (test/pg.sh): a client created on one
 * node is listed on the others, disabled on one it is disabled on all,
 * enabled again everywhere, deleted on one it is gone from all, and a
 * client a SIGHUP'd config brings to one node is on every node.  Lists
 * are polled (an HTTP client has no event for another node's change),
 * each wait bounded; the time a change took to reach the other nodes is
 * printed (bench/cluster_bench measures it).
 */
#include <jansson.h>
#include <signal.h>
#include <time.h>

#include "pgutil.h"
#include "svutil.h"
#include "testutil.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static pgt         pg;
static peer        mcp;
static peer        node[3];
static char        base[3][64];
static char        url[160];
static const char *names[] = {"a", "b", "c"};

/* The node the next request goes to. */
static void
on(int i)
{
	strcpy(sv_base, base[i]); /* as long as serve() wrote it */
}

static char *
node_config(int i, const char *clients)
{
	static char text[2048];

	snprintf(text, sizeof(text),
	         "{\"store\": {\"url\": \"%s\"}, \"cluster\": {\"node_id\": "
	         "\"%s\"}, \"mcp\": {\"client_configs\": [%s]}}",
	         url, names[i], clients);
	return (text);
}

/* Waits (bounded) until node i lists client (want) or not. */
static int64_t
wait_listed(int i, const char *client, bool want, int64_t since)
{
	for (int64_t deadline = now_ms() + WAIT_MS;;) {
		on(i);
		if (listed(client) == want) {
			return (now_ms() - since);
		}
		CHECK(now_ms() < deadline);
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the API, with a deadline */
	}
}

static void
shared_config(void)
{
	const char *env[] = {"MCPKEEP_ENCRYPTION_KEY=" KEY, NULL};
	char        body[512], cfg[64], file[1024];
	int64_t     t0;

	for (int i = 0; i < 3; i++) {
		snprintf(cfg, sizeof(cfg), "node-%s.json", names[i]);
		serve(&node[i], cfg, node_config(i, ""), env);
		snprintf(base[i], sizeof(base[i]), "%s", sv_base);
	}
	/* created on a: listed on b and c */
	snprintf(body, sizeof(body),
	         "{\"name\": \"shared1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	         "\"headers\": {\"X-Api-Key\": \"HDR-SECRET-1\"}}",
	         mcp.port);
	on(0);
	t0 = now_ms();
	expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	fprintf(stderr, "   created on a: on b in %lld ms, on c in %lld ms\n",
	        (long long)wait_listed(1, "shared1", true, t0),
	        (long long)wait_listed(2, "shared1", true, t0));
	on(1);
	CHECK(state_within("shared1", "healthy", WAIT_MS));
	/* disabled on b: disabled everywhere; enabled on c: everywhere */
	expect("POST", "/api/mcp/client/shared1/disable", "{}", NULL, 200, "");
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("shared1", "disabled", WAIT_MS));
	}
	on(2);
	expect("POST", "/api/mcp/client/shared1/enable", "{}", NULL, 200, "");
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("shared1", "healthy", WAIT_MS));
	}
	/* deleted on c: gone everywhere */
	on(2);
	t0 = now_ms();
	expect("DELETE", "/api/mcp/client/shared1", NULL, NULL, 200, "");
	wait_listed(0, "shared1", false, t0);
	wait_listed(1, "shared1", false, t0);
	/* a SIGHUP on a with a new client: on every node */
	snprintf(file, sizeof(file),
	         "{\"name\": \"declared1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	         mcp.port);
	write_config("node-a.json", node_config(0, file));
	t0 = now_ms();
	CHECK_EQ(kill(node[0].pid, SIGHUP), 0);
	for (int i = 0; i < 3; i++) {
		wait_listed(i, "declared1", true, t0);
		on(i);
		CHECK(state_within("declared1", "healthy", WAIT_MS));
	}
	/* the secret header went to the database sealed */
	char out[16];
	pgt_sql(url,
	        "SELECT count(*) FROM mcp_clients WHERE "
	        "position('HDR-SECRET-1'::bytea in config) > 0",
	        out, sizeof(out));
	CHECK(strcmp(out, "0") == 0);
}

int
main(int argc, char **argv)
{
	sv_begin(&mcp);
	pgt_start(&pg);
	pgt_db(&pg, "cluster", url, sizeof(url));
	RUN_IF(shared_config);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	pgt_stop(&pg);
	sv_end(&mcp);
	return (0);
}
