/*
 * sse_fuzz.c - libFuzzer target for the SSE parser.  The first three bytes
 * choose the limits, a callback stop and the chunk sizes; the rest is the
 * stream.  Fed in random chunks and one byte at a time, the stream must
 * give exactly the events, the result and the last id of a one-shot feed,
 * and every event must keep the limits and the string contract of sse.h.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/sse.h"

#define STOP_RV 7

typedef struct trace {
	const codec_sse_limits *lim;     /* the parser's effective limits */
	uint64_t                stop_at; /* stop on this event; 0: never */
	uint64_t                n;       /* events seen */
	uint8_t                *p;       /* the events, serialized */
	size_t                  len;     /* bytes in p */
	size_t                  cap;     /* allocated for p */
	char                   *last_id; /* codec_sse_last_id at the end */
	int                     rv;      /* the first non-zero feed result */
} trace;

static void
put(trace *t, const void *s, size_t n)
{
	if (t->len + n > t->cap) {
		size_t   cap = (t->len + n) * 2;
		uint8_t *np  = realloc(t->p, cap);

		if (np == NULL) {
			abort();
		}
		t->p   = np;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

/* A string of n bytes, NUL-terminated, without NUL, CR or LF inside. */
static void
check_str(const char *s, size_t n)
{
	if (s == NULL || s[n] != '\0' || strlen(s) != n ||
	    memchr(s, '\r', n) != NULL || memchr(s, '\n', n) != NULL) {
		abort();
	}
}

static int
on_event(void *arg, const codec_sse_event *ev)
{
	trace *t = arg;

	check_str(ev->type, ev->type_len);
	check_str(ev->id, ev->id_len);
	/* "message" is the only type that need not fit in a line */
	if (ev->type_len == 0 ||
	    (ev->type_len > t->lim->max_line &&
	     strcmp(ev->type, "message") != 0) ||
	    ev->id_len > t->lim->max_line || ev->data == NULL ||
	    ev->data_len == 0 || ev->data_len > t->lim->max_data ||
	    ev->data[ev->data_len] != '\0' ||
	    memchr(ev->data, '\r', ev->data_len) != NULL ||
	    ev->retry_ms < -1 ||
	    (++t->n > t->lim->max_events && t->lim->max_events != 0)) {
		abort();
	}
	put(t, &ev->type_len, sizeof(ev->type_len));
	put(t, ev->type, ev->type_len);
	put(t, &ev->data_len, sizeof(ev->data_len));
	put(t, ev->data, ev->data_len);
	put(t, &ev->id_len, sizeof(ev->id_len));
	put(t, ev->id, ev->id_len);
	put(t, &ev->retry_ms, sizeof(ev->retry_ms));
	return (t->n == t->stop_at ? STOP_RV : 0);
}

/*
 * Feeds s into a new parser in pieces of max_piece bytes when seed is 0,
 * else of 0..max_piece bytes drawn from seed.
 */
static void
run(const char *s, size_t len, const codec_sse_limits *lim, size_t max_piece,
    uint32_t seed, trace *t)
{
	codec_sse p;
	size_t    at = 0, k;

	if (codec_sse_init(&p, lim) != 0) {
		abort();
	}
	t->lim = &p.lim;
	do {
		k = max_piece;
		if (seed != 0) {
			seed ^= seed << 13;
			seed ^= seed >> 17;
			seed ^= seed << 5;
			k = seed % (max_piece + 1);
		}
		if (k > len - at) {
			k = len - at;
		}
		t->rv = codec_sse_feed(&p, s + at, k, on_event, t);
		at += k;
	} while (at < len && t->rv == 0);
	check_str(codec_sse_last_id(&p), strlen(codec_sse_last_id(&p)));
	if ((t->last_id = strdup(codec_sse_last_id(&p))) == NULL) {
		abort();
	}
	if (t->rv != 0 && codec_sse_feed(&p, "\n\n", 2, on_event, t) == 0) {
		abort(); /* a failed parser stays dead */
	}
	codec_sse_fini(&p);
	codec_sse_fini(&p);
}

static void
same(const trace *a, const trace *b)
{
	if (a->rv != b->rv || a->n != b->n || a->len != b->len ||
	    (a->len != 0 && memcmp(a->p, b->p, a->len) != 0) ||
	    strcmp(a->last_id, b->last_id) != 0) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	codec_sse_limits lim = {0}; /* no rate: the fuzzer has no clock */
	trace            t[3];
	const char      *s;
	uint32_t         seed;

	if (size < 3) {
		return (0);
	}
	/* mostly small limits the fuzzer can reach; 0 means the default */
	lim.max_line   = data[1] < 192 ? 1 + (size_t)(data[1] & 63) : 0;
	lim.max_data   = data[2] & 31;
	lim.max_events = 1 + (uint64_t)(data[2] >> 5) * 4;
	seed = ((uint32_t)data[0] << 16 | (uint32_t)data[1] << 8 | data[2]) |
	        1;
	s = (const char *)data + 3;
	memset(t, 0, sizeof(t));
	for (int i = 0; i < 3; i++) {
		t[i].stop_at = data[0] >= 0xc0 ? 1 + (data[0] & 3) : 0;
	}
	run(s, size - 3, &lim, size, 0, &t[0]);
	run(s, size - 3, &lim, 1 + (data[0] & 15), seed, &t[1]);
	run(s, size - 3, &lim, 1, 0, &t[2]);
	same(&t[0], &t[1]);
	same(&t[0], &t[2]);
	for (int i = 0; i < 3; i++) {
		free(t[i].p);
		free(t[i].last_id);
	}
	return (0);
}
