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
 *    parser refuses all further input with MK_ETOOBIG.
 */
#ifndef CODEC_SSE_H
#define CODEC_SSE_H

#include <stddef.h>
#include <stdint.h>

/* Limits; 0 in a field means the default. */
typedef struct codec_sse_limits {
	size_t   max_line;   /* bytes in one line; default 16 MiB + 64 */
	size_t   max_data;   /* bytes of data in one event; default 16 MiB */
	uint64_t max_events; /* events dispatched over the stream's life;
	                      * default 100000 */
} codec_sse_limits;

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
	char            *id;       /* last event id ("" = none) */
	int64_t          retry_ms; /* latest retry, -1 if none */
	uint64_t         events;   /* events dispatched so far */
	int              state;    /* private: BOM / CR bookkeeping */
	int              failed;   /* a limit was hit: the parser is dead */
} codec_sse;

/*
 * codec_sse_init prepares p; lim may be NULL for the defaults.
 * Returns 0 or MK_ENOMEM.
 */
int codec_sse_init(codec_sse *p, const codec_sse_limits *lim);

/*
 * codec_sse_feed parses len bytes (buf may be NULL when len is 0), calling
 * fn for each event completed by them.  Returns 0; MK_ETOOBIG when a line,
 * an event's data or the event count exceeds its limit (the parser then
 * refuses all further input with MK_ETOOBIG); MK_ENOMEM; or fn's non-zero
 * result (the rest of buf is dropped and the parser is dead, as above).
 */
int codec_sse_feed(codec_sse *p, const char *buf, size_t len, codec_sse_fn fn,
                   void *arg);

/*
 * codec_sse_last_id returns the last event id seen ("" if none); valid
 * until the next feed or fini.
 */
const char *codec_sse_last_id(const codec_sse *p);

/* codec_sse_fini frees p's buffers; safe twice. */
void codec_sse_fini(codec_sse *p);

#endif /* CODEC_SSE_H */
