/*
 * calls.h - tools/call loops shared by the benchmarks (see calls.c).
 */
#ifndef BENCH_CALLS_H
#define BENCH_CALLS_H

#include <stdint.h>

#include "mcpkeep.h"
#include "transport/mcp.h"

#define CONC 16 /* the concurrent runs' width */

typedef struct stats {
	double calls_s;  /* throughput */
	double p50, p99; /* latency, microseconds */
	double cpu_us;   /* client thread CPU per call, microseconds */
} stats;

extern int64_t cpu0; /* thread CPU at the start of a measurement */

int64_t thread_cpu_ns(void);
stats   summarize(int64_t *lat, int n, int64_t t0);
void    die(const char *what) __attribute__((noreturn));

/* plain libcurl: initialize, then n calls; sequential or 16 at a time */
stats raw_seq(const char *url, int n);
stats raw_multi(const char *url, int n);

/* the MCP client alone on one loop: n calls, conc at a time */
stats mk_run(const char *url, int n, int conc);

/* The comma list s of positive numbers ("1,16,64") into out (at most
 * max): how many, or -1 when s is not one. */
int numbers_of(const char *s, int *out, int max);

/* Loads into rt n sticky HTTP clients prefix0.. of url, every tool
 * allowed, each with the JSON members more (e.g. ", \"k\": 1", or "");
 * blocks until every first connect ended; dies when the load fails. */
void load_sticky(mk_runtime *rt, const char *prefix, int n, const char *url,
                 const char *more);

/* open file descriptors / resident KiB of this process */
int  count_fds(void);
long rss_kib(void);

#endif /* BENCH_CALLS_H */
