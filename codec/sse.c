/*
 * sse.c - incremental Server-Sent Events parser (see sse.h).
 *
 * p->state walks BOM0 -> BOM1 -> BOM2 -> LINE while the stream's first
 * bytes match EF BB BF; a mismatch puts the matched bytes back into the
 * line and goes to LINE.  After a line ended by CR the state is CR, and an
 * LF as the next byte (in this chunk or the next) is swallowed.
 *
 * The rate limit is a token bucket: p->tokens events may be dispatched
 * now; each feed first adds one token per 10^9 / rate ns since
 * p->fill_ns, up to the burst.
 */
#include "codec/sse.h"

#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

enum {
	ST_BOM0 = 0, /* nothing seen yet; BOM0..BOM2 = BOM bytes matched */
	ST_BOM1 = 1, /* EF seen */
	ST_BOM2 = 2, /* EF BB seen */
	ST_LINE = 3, /* inside the stream */
	ST_CR   = 4, /* the last line ended with CR: skip one LF */
};

#define DEF_MAX_LINE ((size_t)16 * 1024 * 1024 + 64)
#define DEF_MAX_DATA ((size_t)16 * 1024 * 1024)
#define MAX_LIMIT    (SIZE_MAX / 4) /* so cap arithmetic cannot wrap */
#define NS_PER_S     1000000000

static const char bom[3] = {'\xEF', '\xBB', '\xBF'};

/* Records why p stops (the first reason stays) and returns rv. */
static int
stop(codec_sse *p, codec_sse_fail why, int rv)
{
	if (p->failed == CODEC_SSE_OK) {
		p->failed = why;
	}
	return (rv);
}

/* A size limit (MK_ETOOBIG) or out of memory, from grow(). */
static int
stop_size(codec_sse *p, codec_sse_fail why, int rv)
{
	return (stop(p, rv == MK_ETOOBIG ? why : CODEC_SSE_NOMEM, rv));
}

/* Grows *buf to hold need bytes, doubling, but never beyond max. */
static int
grow(char **buf, size_t *cap, size_t need, size_t max)
{
	size_t n = *cap != 0 ? *cap : 64;
	char  *nb;

	if (need > max) {
		return (MK_ETOOBIG);
	}
	if (need <= *cap) {
		return (0);
	}
	while (n < need) {
		n *= 2;
	}
	if (n > max) {
		n = max;
	}
	if ((nb = realloc(*buf, n)) == NULL) {
		return (MK_ENOMEM);
	}
	*buf = nb;
	*cap = n;
	return (0);
}

/* Replaces the string *dst by the n bytes at v. */
static int
set_str(char **dst, const char *v, size_t n)
{
	char *s;

	if ((s = realloc(*dst, n + 1)) == NULL) {
		return (MK_ENOMEM);
	}
	memcpy(s, v, n);
	s[n] = '\0';
	*dst = s;
	return (0);
}

/* Appends n bytes to the partial line, within max_line. */
static int
line_append(codec_sse *p, const char *s, size_t n)
{
	int rv;

	if ((rv = grow(&p->line, &p->line_cap, p->line_len + n,
	               p->lim.max_line)) != 0) {
		return (stop_size(p, CODEC_SSE_LINE, rv));
	}
	if (n != 0) {
		memcpy(p->line + p->line_len, s, n);
		p->line_len += n;
	}
	return (0);
}

static void
set_retry(codec_sse *p, const char *v, size_t n)
{
	int64_t r = 0;

	if (n == 0) {
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int d = v[i] - '0';

		if (d < 0 || d > 9) {
			return;
		}
		r = r > (INT64_MAX - d) / 10 ? INT64_MAX : r * 10 + d;
	}
	p->retry_ms = r;
}

/* Handles an empty line: delivers the pending event, if it has data. */
static int
dispatch(codec_sse *p, codec_sse_fn fn, void *arg)
{
	codec_sse_event ev;
	int             rv;

	/* the event is complete: its id is now the stream's last event id
	 * (WHATWG: even when there is no data to dispatch) */
	if (strcmp(p->done_id, p->id) != 0 &&
	    set_str(&p->done_id, p->id, strlen(p->id)) != 0) {
		return (MK_ENOMEM);
	}
	/* data: lines end in "\n"; "" or "\n" means no data (MCP priming) */
	if (p->data_len <= 1) {
		p->data_len = 0;
		p->type[0]  = '\0';
		return (0);
	}
	if (p->lim.max_events != 0 && p->events >= p->lim.max_events) {
		return (stop(p, CODEC_SSE_EVENTS, MK_ETOOBIG));
	}
	if (p->lim.rate != 0) {
		if (p->tokens == 0) {
			return (stop(p, CODEC_SSE_RATE, MK_ETOOBIG));
		}
		p->tokens--;
	}
	p->events++;
	p->data[--p->data_len] = '\0'; /* the final "\n" */

	ev.type     = p->type[0] != '\0' ? p->type : "message";
	ev.type_len = strlen(ev.type);
	ev.data     = p->data;
	ev.data_len = p->data_len;
	ev.id       = p->id;
	ev.id_len   = strlen(p->id);
	ev.retry_ms = p->retry_ms;
	rv          = fn(arg, &ev);
	p->data_len = 0;
	p->type[0]  = '\0';
	return (rv != 0 ? stop(p, CODEC_SSE_STOPPED, rv) : 0);
}

#define FIELD_IS(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)

/* Interprets one complete line s of n bytes (no line end). */
static int
process_line(codec_sse *p, const char *s, size_t n, codec_sse_fn fn, void *arg)
{
	const char *colon, *v = "";
	size_t      vlen = 0, nlen = n;
	int         rv;

	if (n == 0) {
		return (dispatch(p, fn, arg));
	}
	if (s[0] == ':') {
		return (0);
	}
	if ((colon = memchr(s, ':', n)) != NULL) {
		nlen = (size_t)(colon - s);
		v    = colon + 1;
		vlen = n - nlen - 1;
		if (vlen != 0 && v[0] == ' ') {
			v++;
			vlen--;
		}
	}
	if (FIELD_IS(s, nlen, "data")) {
		/* the event's data would be data_len + vlen bytes */
		if ((rv = grow(&p->data, &p->data_cap, p->data_len + vlen + 1,
		               p->lim.max_data + 1)) != 0) {
			return (stop_size(p, CODEC_SSE_DATA, rv));
		}
		memcpy(p->data + p->data_len, v, vlen);
		p->data_len += vlen;
		p->data[p->data_len++] = '\n';
	} else if (FIELD_IS(s, nlen, "event")) {
		return (set_str(&p->type, v, vlen));
	} else if (FIELD_IS(s, nlen, "id")) {
		if (memchr(v, '\0', vlen) == NULL) {
			return (set_str(&p->id, v, vlen));
		}
	} else if (FIELD_IS(s, nlen, "retry")) {
		set_retry(p, v, vlen);
	}
	return (0);
}

/* Feeds buf without the failure bookkeeping. */
static int
feed(codec_sse *p, const char *buf, size_t len, codec_sse_fn fn, void *arg)
{
	size_t i = 0, j;
	int    rv;

	while (i < len && p->state < ST_LINE) {
		if (buf[i] == bom[p->state]) {
			p->state++;
			i++;
			continue;
		}
		/* not a BOM: the bytes matched so far belong to the line */
		if ((rv = line_append(p, bom, p->state)) != 0) {
			return (rv);
		}
		p->state = ST_LINE;
	}
	while (i < len) {
		if (p->state == ST_CR) {
			p->state = ST_LINE;
			if (buf[i] == '\n') {
				i++;
				continue;
			}
		}
		for (j = i; j < len && buf[j] != '\n' && buf[j] != '\r'; j++) {
		}
		if ((rv = line_append(p, buf + i, j - i)) != 0) {
			return (rv);
		}
		if (j == len) {
			break;
		}
		if (buf[j] == '\r') {
			p->state = ST_CR;
		}
		rv          = process_line(p, p->line, p->line_len, fn, arg);
		p->line_len = 0;
		if (rv != 0) {
			return (rv);
		}
		i = j + 1;
	}
	return (0);
}

/* Tops the bucket up with the whole events earned since fill_ns. */
static void
refill(codec_sse *p, int64_t now)
{
	uint64_t per = NS_PER_S / p->lim.rate; /* ns per event */
	uint64_t n;

	if (now <= p->fill_ns) {
		return;
	}
	n = (uint64_t)(now - p->fill_ns) / per;
	if (n >= p->lim.burst - p->tokens) {
		p->tokens  = p->lim.burst;
		p->fill_ns = now;
	} else {
		p->tokens += n;
		p->fill_ns += (int64_t)(n * per);
	}
}

int
codec_sse_init(codec_sse *p, const codec_sse_limits *lim)
{
	memset(p, 0, sizeof(*p));
	if (lim != NULL) {
		p->lim = *lim;
	}
	if (p->lim.rate > NS_PER_S ||
	    (p->lim.rate != 0 && p->lim.now_ns == NULL)) {
		p->failed = CODEC_SSE_FINISHED;
		return (MK_EINVAL);
	}
	if (p->lim.rate != 0) {
		if (p->lim.burst == 0) {
			p->lim.burst = p->lim.rate;
		}
		p->tokens  = p->lim.burst;
		p->fill_ns = p->lim.now_ns();
	}
	if (p->lim.max_line == 0) {
		p->lim.max_line = DEF_MAX_LINE;
	}
	if (p->lim.max_data == 0) {
		p->lim.max_data = DEF_MAX_DATA;
	}
	if (p->lim.max_line > MAX_LIMIT) {
		p->lim.max_line = MAX_LIMIT;
	}
	if (p->lim.max_data > MAX_LIMIT) {
		p->lim.max_data = MAX_LIMIT;
	}
	p->retry_ms = -1;
	p->state    = ST_BOM0;
	if (set_str(&p->type, "", 0) != 0 || set_str(&p->id, "", 0) != 0 ||
	    set_str(&p->done_id, "", 0) != 0) {
		codec_sse_fini(p);
		return (MK_ENOMEM);
	}
	return (0);
}

int
codec_sse_feed(codec_sse *p, const char *buf, size_t len, codec_sse_fn fn,
               void *arg)
{
	int rv;

	if (p->failed != CODEC_SSE_OK) {
		return (MK_ETOOBIG);
	}
	if (buf == NULL && len != 0) {
		return (MK_EINVAL);
	}
	if (p->lim.rate != 0) {
		refill(p, p->lim.now_ns());
	}
	if ((rv = feed(p, buf, len, fn, arg)) != 0) {
		/* what no step named is set_str's out of memory */
		return (stop(p, CODEC_SSE_NOMEM, rv));
	}
	return (0);
}

codec_sse_fail
codec_sse_failure(const codec_sse *p)
{
	return (p->failed);
}

const char *
codec_sse_last_id(const codec_sse *p)
{
	return (p->done_id != NULL ? p->done_id : "");
}

void
codec_sse_fini(codec_sse *p)
{
	free(p->line);
	free(p->data);
	free(p->type);
	free(p->id);
	free(p->done_id);
	memset(p, 0, sizeof(*p));
	p->failed = CODEC_SSE_FINISHED; /* a later feed is refused */
}
