/*
 * trace.h - spans of calls, recoveries, refreshes and connects, exported
 * over OTLP/HTTP (JSON) to a collector.
 *
 * DESIGN: a span is filled by the one thread that runs what it times and
 * handed to its tracer when it ends.  The tracer queues it (at most
 * TR_QUEUE_MAX) and its exporter thread posts batches of at most
 * TR_BATCH_MAX spans to <endpoint>/v1/traces, every TR_FLUSH_MS or as
 * soon as a batch is full.  Nothing waits for the collector: a span that
 * finds the queue full is dropped, a batch the collector did not take
 * (an error, no answer within TR_POST_TIMEOUT_MS) is dropped, both
 * counted (tr_stats).  A NULL tracer (tracing off) or span makes every
 * call below a no-op that allocates nothing.
 *
 * A span's parent is a W3C traceparent (a caller's: its trace goes on)
 * or another span; without either it starts a trace.  A parent that says
 * "not sampled" gives a span that keeps the trace going but is not
 * exported.  Attributes never carry a secret.
 */
#ifndef TELEMETRY_TRACE_H
#define TELEMETRY_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "actors/kernel/log.h"

#define TR_QUEUE_MAX       4096 /* spans waiting for the exporter */
#define TR_BATCH_MAX       512  /* spans in one post */
#define TR_FLUSH_MS        1000 /* a span waits at most this for a post */
#define TR_POST_TIMEOUT_MS 5000 /* a post's deadline */
#define TR_PARENT_LEN      56   /* a traceparent and its NUL */

typedef struct tr_tracer tr_tracer;
typedef struct tr_span   tr_span;

/* What a tracer has done, since its open. */
typedef struct tr_stats {
	uint64_t exported; /* spans the collector took */
	uint64_t dropped;  /* spans lost: a full queue or a failed post */
	uint64_t failures; /* posts that failed */
} tr_stats;

/* OTLP's span kinds used here. */
enum { TR_INTERNAL = 1, TR_CLIENT = 3 };

/*
 * tr_open starts a tracer posting to endpoint (the collector's base URL,
 * http:// or https://; "/v1/traces" is added) as service "mcpkeep",
 * instance node_id, logging through lg (NULL: the default).  MK_EINVAL
 * (err says why) for an endpoint that will not do.  Any thread; call
 * curl_global_init first.
 */
int tr_open(tr_tracer **tp, const char *endpoint, const char *node_id,
            const kn_logger *lg, char *err, size_t errlen);

/*
 * tr_close gives a post in flight one more second, posts what is queued
 * (one try, at most one second) and frees the tracer; every span of it
 * must have ended.  NULL is fine.
 */
void tr_close(tr_tracer **tp);

/* tr_stats_get copies t's counters (zeros for NULL).  Any thread. */
void tr_stats_get(tr_tracer *t, tr_stats *out);

/*
 * tr_start starts a span named name (static) of kind, now: its parent
 * is parent when not NULL, else the W3C traceparent when it is a valid
 * one, else none (a new trace).  NULL when t is NULL or memory is short.
 */
tr_span *tr_start(tr_tracer *t, const char *name, int kind,
                  const char *traceparent, const tr_span *parent);

/* tr_attr, tr_attr_num: an attribute (key static, the value copied). */
void tr_attr(tr_span *s, const char *key, const char *value);
void tr_attr_num(tr_span *s, const char *key, long long value);

/*
 * tr_traceparent writes the W3C traceparent that makes s the parent of
 * what it calls ("00-<trace>-<span>-<flags>") into buf (at least
 * TR_PARENT_LEN bytes); NULL when s is NULL.
 */
const char *tr_traceparent(const tr_span *s, char *buf);

/* tr_trace_id: s's trace id (32 hex digits), "" when s is NULL. */
const char *tr_trace_id(const tr_span *s);

/*
 * tr_end ends *sp now, with status error when error is not NULL (its
 * message), else ok, hands it to its tracer and sets *sp NULL.  Never
 * blocks but on the queue's lock.
 */
void tr_end(tr_span **sp, const char *error);

#endif /* TELEMETRY_TRACE_H */
