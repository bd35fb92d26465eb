/*
 * fastmcp.h - a minimal, fast MCP server over HTTP/1.1 keep-alive, for
 * benchmarks only: it must never be the bottleneck.  One thread per
 * connection; answers initialize (with an Mcp-Session-Id), 202 to
 * notifications, and any other request with a fixed tools/call result
 * carrying the request's id.  Not a general HTTP server.
 */
#ifndef BENCH_FASTMCP_H
#define BENCH_FASTMCP_H

#include <sys/types.h>

/* Starts the server on 127.0.0.1 (an ephemeral port); returns the port or
 * -1.  It runs until the process exits. */
int fastmcp_start(void);

/* Starts the server in a child process that dies with the caller (so that
 * its threads' memory and sockets are not the caller's); returns the port
 * and *pid the child, or -1. */
int fastmcp_child(pid_t *pid);

#endif /* BENCH_FASTMCP_H */
