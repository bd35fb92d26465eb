/*
 * sse.h - an incremental parser for Server-Sent Events streams
 * (WHATWG HTML "event stream interpretation"), for MCP's Streamable HTTP
 * and legacy HTTP+SSE transports.
 *
 * Feed it the bytes of a response body in chunks of any size, split at any
 * byte (inside a CRLF, inside a UTF-8 sequence, inside a field name); it
 * calls back once per dispatched event.  Pure: no threads, no logging, no
 * globals.  One parser per stream, used by one thread.
 *
 * Rules implemented (WHATWG):
 *  - lines end in CRLF, LF or CR; a CR at the end of one chunk followed by
 *    LF at the start of the next is one line end;
 *  - a UTF-8 BOM at the very start of the stream is skipped;
 *  - a line starting with ':' is a comment and ignored;
 *  - "field:value" (one leading space of value removed) or a bare "field"
 *    (empty value);
 *  - data: appends value + "\n" to the data buffer; event: sets the type;
 *    id: sets the last event id unless the value contains NUL; retry: sets
 *    the reconnection time when the value is all ASCII digits; other
 *    fields are ignored;
 *  - an empty line dispatches: if the data is empty (no data: line, or
 *    only empty ones) nothing is dispatched (MCP's "priming" event
 *    carrying only an id and an empty data: line), but the
 *    last event id is still updated; otherwise the final "\n" is removed
 *    and the event delivered with type "message" when none was given;
 *    then the data and type buffers are reset (the last id is kept);
 *  - an event still incomplete when the stream ends is discarded by
 *    codec_sse_fini().
 *  - after any failure (a limit, out of memory, the callback's stop) the
 *    parser refuses all further input with MK_ETOOBIG, and
 *    codec_sse_failure says what failed.
 *
 * Limits: the size of a line and of an event's data; optionally a total
 * of events (for a body that is one response) and a rate of events (for
 * a stream that lives for days: a token bucket holding up to `burst`
 * events, refilled at `rate` events per second by the caller's clock,
 * read once per feed).  Priming events (no data) count against neither.
 */
#ifndef CODEC_SSE_H
#define CODEC_SSE_H

#include <stddef.h>
#include <stdint.h>

/* Limits; 0 in a size means the default, 0 in a count or rate means
 * none. */
typedef struct codec_sse_limits {
	size_t   max_line;   /* bytes in one line; default 16 MiB + 64 */
	size_t   max_data;   /* bytes of data in one event; default 16 MiB */
	uint64_t max_events; /* events dispatched over the stream's life;
	                      * 0: no total */
	uint32_t rate;       /* events per second on average, at most 10^9;
	                      * 0: no rate limit */
	uint32_t burst;      /* events at once above the rate; 0: rate */
	int64_t (*now_ns)(void); /* the rate's clock (monotonic ns);
	                          * required when rate is set */
} codec_sse_limits;

/* What stopped a parser. */
typedef enum codec_sse_fail {
	CODEC_SSE_OK = 0,   /* nothing: the parser is alive */
	CODEC_SSE_LINE,     /* a line exceeded max_line */
	CODEC_SSE_DATA,     /* an event's data exceeded max_data */
	CODEC_SSE_EVENTS,   /* the events exceeded max_events */
	CODEC_SSE_RATE,     /* the events exceeded rate (with burst) */
	CODEC_SSE_NOMEM,    /* out of memory */
	CODEC_SSE_STOPPED,  /* the callback returned non-zero */
	CODEC_SSE_FINISHED, /* codec_sse_fini ran */
} codec_sse_fail;

/* One dispatched event.  Pointers are valid only during the callback; the
 * strings are NUL-terminated and their lengths given. */
typedef struct codec_sse_event {
	const char *type;     /* "message" when no event: field */
	size_t      type_len; /* bytes in type */
	const char *data;     /* data lines joined by "\n" */
	size_t      data_len; /* bytes in data */
	const char *id;       /* last event id so far ("" if none) */
	size_t      id_len;   /* bytes in id */
	int64_t     retry_ms; /* the latest retry: value, or -1 */
} codec_sse_event;

/* Called per event; a non-zero return stops the feed and is returned by
 * codec_sse_feed. */
typedef int (*codec_sse_fn)(void *arg, const codec_sse_event *ev);

typedef struct codec_sse {
	codec_sse_limits lim;      /* effective limits */
	char            *line;     /* current partial line */
	size_t           line_len; /* bytes in line */
	size_t           line_cap; /* allocated for line */
	char            *data;     /* data buffer of the pending event */
	size_t           data_len; /* bytes in data */
	size_t           data_cap; /* allocated for data */
	char            *type;     /* event type buffer ("" = none) */
	char            *id;       /* last event id buffer ("" = none) */
	char            *done_id;  /* last event id of a complete event */
	int64_t          retry_ms; /* latest retry, -1 if none */
	uint64_t         events;   /* events dispatched so far */
	uint64_t         tokens;   /* rate: events allowed now */
	int64_t          fill_ns;  /* rate: when tokens were last topped up */
	int              state;    /* private: BOM / CR bookkeeping */
	codec_sse_fail   failed;   /* what stopped the parser, or OK */
} codec_sse;

/*
 * codec_sse_init prepares p; lim may be NULL for the defaults (no total,
 * no rate).  Returns 0, MK_EINVAL (a rate without a clock, or over
 * 10^9) or MK_ENOMEM.
 */
int codec_sse_init(codec_sse *p, const codec_sse_limits *lim);

/*
 * codec_sse_feed parses len bytes (buf may be NULL when len is 0), calling
 * fn for each event completed by them.  Returns 0; MK_ETOOBIG when a line,
 * an event's data, the event count or the event rate exceeds its limit
 * (the parser then refuses all further input with MK_ETOOBIG);
 * MK_ENOMEM; or fn's non-zero result (the rest of buf is dropped and the
 * parser is dead, as above).
 */
int codec_sse_feed(codec_sse *p, const char *buf, size_t len, codec_sse_fn fn,
                   void *arg);

/* codec_sse_failure says what stopped p (CODEC_SSE_OK while alive). */
codec_sse_fail codec_sse_failure(const codec_sse *p);

/*
 * codec_sse_last_id returns the id of the last complete event, priming
 * events included ("" if none): an id: line of an event cut off by the
 * stream's end does not count, so a client resuming with it
 * (Last-Event-ID) is sent that event again.  Valid until the next feed
 * or fini.
 */
const char *codec_sse_last_id(const codec_sse *p);

/* codec_sse_fini frees p's buffers; safe twice. */
void codec_sse_fini(codec_sse *p);

#endif /* CODEC_SSE_H */
