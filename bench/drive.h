/*
 * drive.h - the benchmarks' HTTP load driver: keep-alive connections to
 * one local port, each sending the same POST again the moment its answer
 * is in.  One thread and epoll, so the driver costs a few syscalls a call
 * and the same whatever stands behind the port: a ratio of two runs
 * compares only what answers (the upstream straight, or the daemon in
 * front of it).  For benchmarks only: answers must carry Content-Length
 * (no chunked bodies), and anything but a 200 ends the run.
 */
#ifndef BENCH_DRIVE_H
#define BENCH_DRIVE_H

#include "calls.h"

typedef struct drive_req {
	int         port; /* 127.0.0.1:port */
	const char *path; /* e.g. "/mcp" */
	const char
	        *headers;  /* more header lines, each ending "\r\n", or NULL */
	const char *body;  /* the POST's JSON */
	int         conns; /* connections, each with one request in flight */
	int         n;     /* answers measured (after a warm-up) */
} drive_req;

/* Runs q: opens its connections, warms them up (20 calls each), then
 * measures n answers.  Dies (naming what) on a refused connection, a
 * closed one or a status other than 200.  cpu_us is left 0. */
stats drive(const drive_req *q);

#endif /* BENCH_DRIVE_H */
