/*
 * fastmcp.h - a minimal, fast MCP server over HTTP/1.1 keep-alive, for
 * benchmarks only: it must never be the bottleneck.  One thread per
 * connection; answers initialize (with an Mcp-Session-Id), 202 to
 * notifications, and any other request with a fixed tools/call result
 * carrying the request's id.  Not a general HTTP server.
 */
#ifndef BENCH_FASTMCP_H
#define BENCH_FASTMCP_H

/* Starts the server on 127.0.0.1 (an ephemeral port); returns the port or
 * -1.  It runs until the process exits. */
int fastmcp_start(void);

#endif /* BENCH_FASTMCP_H */
