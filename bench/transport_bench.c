/*
 * transport_bench.c - tools/call through the MCP client (transport/)
 * beside a plain libcurl keep-alive POST loop to the same server, in one
 * run: sequential and 16-way concurrent, against (a) fastmcp, a minimal C
 * server written so the server is not the bottleneck, and (b) the real
 * server-everything.  Goal: >= 0.90 of plain libcurl's calls/s on (a).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/peer.h"
#include "calls.h"
#include "fastmcp.h"

/* ---- the table ------------------------------------------------------------
 */

static void
row(const char *what, stats s, stats base)
{
	printf("  %-30s %10.0f %9.1f %9.1f %9.1f %7.2f\n", what, s.calls_s,
	       s.p50, s.p99, s.cpu_us, s.calls_s / base.calls_s);
}

static void
target(const char *name, const char *url, int n)
{
	stats cs = raw_seq(url, n);
	stats ms = mk_run(url, n, 1);
	stats cm = raw_multi(url, 2 * n);
	stats mm = mk_run(url, 2 * n, CONC);

	printf("\n%s (%s)\n", name, url);
	printf("  %-30s %10s %9s %9s %9s %7s\n", "", "calls/s", "p50 us",
	       "p99 us", "cpu us", "ratio");
	row("libcurl keep-alive, sequential", cs, cs);
	row("mcpkeep client, sequential", ms, cs);
	row("libcurl multi, 16-way", cm, cm);
	row("mcpkeep client, 16-way", mm, cm);
}

int
main(void)
{
	char url[128];
	int  port;
	peer p = {0};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf("mcpkeep transport benchmark: tools/call over Streamable HTTP (one run; ratio = calls/s vs plain libcurl; goal >= 0.90 on fastmcp)\n");
	if ((port = fastmcp_start()) < 0) {
		die("fastmcp did not start");
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	target("fastmcp, minimal C server", url, 20000);

	if (peer_dir() != NULL) {
		char        js[512], env0[32];
		const char *argv[] = {"node", js, "streamableHttp", NULL};
		const char *env[]  = {env0, NULL};
		snprintf(
		        js, sizeof(js),
		        "%s/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
		        peer_dir());
		snprintf(env0, sizeof(env0), "PORT=%d", peer_free_port());
		if (peer_start(&p, argv, env, "listening on port ([0-9]+)",
		               30000) != 0) {
			die("server-everything did not start");
		}
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", p.port);
		target("server-everything", url, 2000);
		peer_stop(&p);
	} else {
		printf("\nserver-everything: MK_PEERS_DIR unset, not measured\n");
	}
	curl_global_cleanup();
	return (0);
}
