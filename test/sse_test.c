/*
 * sse_test.c - the Server-Sent Events parser: WHATWG line and field rules,
 * MCP priming events, limits, and identical results for every way of
 * splitting a stream into chunks.
 */
#include <stdint.h>

#include "codec/sse.h"
#include "mcpkeep.h"
#include "testutil.h"

#define MAX_EV  32
#define STOP_RV 42
#define S(lit)  lit, sizeof(lit) - 1 /* a literal and its length */

typedef struct rec_ev {
	char   *type;     /* copy of the event's type */
	char   *data;     /* copy of its data */
	size_t  data_len; /* bytes in data */
	char   *id;       /* copy of its id */
	int64_t retry_ms; /* its retry_ms */
} rec_ev;

typedef struct rec {
	rec_ev ev[MAX_EV]; /* events received, in order */
	size_t n;          /* events in ev */
	size_t stop_at; /* return STOP_RV on this event (1-based); 0: never */
	char  *last_id; /* codec_sse_last_id after the last feed */
	int    rv;      /* the first non-zero feed result, or 0 */
} rec;

static char *
dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	CHECK(d != NULL);
	memcpy(d, s, n);
	d[n] = '\0';
	return (d);
}

static int
on_event(void *arg, const codec_sse_event *ev)
{
	rec *r = arg;

	CHECK(r->n < MAX_EV);
	CHECK(ev->type[ev->type_len] == '\0');
	CHECK_EQ(strlen(ev->type), ev->type_len);
	CHECK(ev->data[ev->data_len] == '\0');
	CHECK(ev->id[ev->id_len] == '\0');
	CHECK_EQ(strlen(ev->id), ev->id_len);
	r->ev[r->n].type     = dup_n(ev->type, ev->type_len);
	r->ev[r->n].data     = dup_n(ev->data, ev->data_len);
	r->ev[r->n].data_len = ev->data_len;
	r->ev[r->n].id       = dup_n(ev->id, ev->id_len);
	r->ev[r->n].retry_ms = ev->retry_ms;
	r->n++;
	return (r->n == r->stop_at ? STOP_RV : 0);
}

/* Counts events into *(uint64_t *)arg. */
static int
count_event(void *arg, const codec_sse_event *ev)
{
	(*(uint64_t *)arg)++;
	return (0);
}

static void
rec_free(rec *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->ev[i].type);
		free(r->ev[i].data);
		free(r->ev[i].id);
	}
	free(r->last_id);
	memset(r, 0, sizeof(*r));
}

/*
 * Parses s cut at the ncuts ascending offsets in cuts (pieces may be
 * empty), stopping at the first error, into r.
 */
static void
parse_cuts(const char *s, size_t len, const codec_sse_limits *lim,
           const size_t *cuts, size_t ncuts, rec *r)
{
	codec_sse p;
	size_t    at = 0;

	memset(r, 0, sizeof(*r));
	CHECK_EQ(codec_sse_init(&p, lim), 0);
	for (size_t i = 0; i <= ncuts && r->rv == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : len;

		r->rv = codec_sse_feed(&p, s + at, end - at, on_event, r);
		at    = end;
	}
	r->last_id =
	        dup_n(codec_sse_last_id(&p), strlen(codec_sse_last_id(&p)));
	codec_sse_fini(&p);
}

static void
parse(const char *s, size_t len, const codec_sse_limits *lim, rec *r)
{
	parse_cuts(s, len, lim, NULL, 0, r);
}

/* Checks event i of r. */
static void
expect(const rec *r, size_t i, const char *type, const char *data,
       size_t data_len, const char *id, int64_t retry_ms)
{
	CHECK(i < r->n);
	CHECK(strcmp(r->ev[i].type, type) == 0);
	CHECK_EQ(r->ev[i].data_len, data_len);
	CHECK(memcmp(r->ev[i].data, data, data_len) == 0);
	CHECK(strcmp(r->ev[i].id, id) == 0);
	CHECK_EQ(r->ev[i].retry_ms, retry_ms);
}

static void
same(const rec *a, const rec *b)
{
	CHECK_EQ(a->rv, b->rv);
	CHECK_EQ(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		expect(b, i, a->ev[i].type, a->ev[i].data, a->ev[i].data_len,
		       a->ev[i].id, a->ev[i].retry_ms);
	}
	CHECK(strcmp(a->last_id, b->last_id) == 0);
}

/*
 * Parses s one-shot, then cut at every offset, at every pair of offsets,
 * and one byte at a time; every way must give the one-shot result.
 */
static void
every_split(const char *s, size_t len, const codec_sse_limits *lim)
{
	rec     ref, r;
	size_t  cuts[2];
	size_t *bytes = malloc((len + 1) * sizeof(size_t));

	CHECK(bytes != NULL);
	parse(s, len, lim, &ref);
	for (cuts[0] = 0; cuts[0] <= len; cuts[0]++) {
		parse_cuts(s, len, lim, cuts, 1, &r);
		same(&ref, &r);
		rec_free(&r);
		for (cuts[1] = cuts[0]; cuts[1] <= len; cuts[1]++) {
			parse_cuts(s, len, lim, cuts, 2, &r);
			same(&ref, &r);
			rec_free(&r);
		}
	}
	for (size_t i = 0; i <= len; i++) {
		bytes[i] = i;
	}
	parse_cuts(s, len, lim, bytes, len + 1, &r);
	same(&ref, &r);
	rec_free(&r);
	rec_free(&ref);
	free(bytes);
}

/* A stream exercising every rule; its events are checked in rich(). */
static const char rich_stream[] =
        "\xEF\xBB\xBF"
        ": comment at start\r\n"
        "retry: 1500\n"
        "event: greet\r\n"
        "data: hello\rdata:world\n"
        "data:  two spaces\n"
        "\r\n"
        "id: 1\n\n"
        "id: 2\ndata:\n\n"
        "data\n"
        "data\n"
        "\n"
        "id: 3\0x\n"
        "retry: 12a\n"
        "retry\n"
        "retry: -5\n"
        "unknown: field\n"
        "data : not data\n"
        "\n"
        "data: caf\xC3\xA9 \xE2\x82\xAC\r\r"
        "event: a\nid\ndata: {\"x\":1}\n\n"
        "data: type was reset\n\n"
        "id: last\r\nevent: x\r\ndata: 1\r\ndata: 2\r\n\r\n"
        "\xEF\xBB\xBF"
        "data: mid-stream BOM is not skipped\n\n"
        "data: with \0 nul\n\n"
        "event: dangling\ndata: incomplete\n"
        "data: no line end";

static void
rich(void)
{
	rec r;

	parse(S(rich_stream), NULL, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 7);
	expect(&r, 0, "greet", S("hello\nworld\n two spaces"), "", 1500);
	expect(&r, 1, "message", S("\n"), "2", 1500);
	expect(&r, 2, "message", S("caf\xC3\xA9 \xE2\x82\xAC"), "2", 1500);
	expect(&r, 3, "a", S("{\"x\":1}"), "", 1500);
	expect(&r, 4, "message", S("type was reset"), "", 1500);
	expect(&r, 5, "x", S("1\n2"), "last", 1500);
	expect(&r, 6, "message", S("with \0 nul"), "last", 1500);
	CHECK(strcmp(r.last_id, "last") == 0);
	rec_free(&r);
}

static void
rich_every_split(void)
{
	every_split(S(rich_stream), NULL);
}

static void
line_ends(void)
{
	static const char *streams[] = {
	        "data: a\n\n",   "data: a\r\n\r\n", "data: a\r\r",
	        "data: a\r\n\r", "data: a\r\n\n",
	};
	rec r;

	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		parse(streams[i], strlen(streams[i]), NULL, &r);
		CHECK_EQ(r.rv, 0);
		CHECK_EQ(r.n, 1);
		expect(&r, 0, "message", S("a"), "", -1);
		rec_free(&r);
	}
	parse(S("data: a\rdata: b\r\ndata: c\n\r"), NULL, &r);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("a\nb\nc"), "", -1);
	rec_free(&r);
	/* LF CR is two line ends: the event is dispatched at the CR */
	parse(S("data: a\n\rdata: b\n\n"), NULL, &r);
	CHECK_EQ(r.n, 2);
	expect(&r, 0, "message", S("a"), "", -1);
	expect(&r, 1, "message", S("b"), "", -1);
	rec_free(&r);
}

static void
cr_lf_across_chunks(void)
{
	codec_sse p;
	rec       r = {0};

	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: a\r"), on_event, &r), 0);
	CHECK_EQ(codec_sse_feed(&p, S("\ndata: b\r"), on_event, &r), 0);
	/* empty feeds in between keep the pending CR */
	CHECK_EQ(codec_sse_feed(&p, NULL, 0, on_event, &r), 0);
	CHECK_EQ(codec_sse_feed(&p, S("\n"), on_event, &r), 0);
	CHECK_EQ(r.n, 0);
	CHECK_EQ(codec_sse_feed(&p, S("\r"), on_event, &r), 0);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("a\nb"), "", -1);
	/* this LF ends the CR's line, it is not an empty line */
	CHECK_EQ(codec_sse_feed(&p, S("\n"), on_event, &r), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: c\r"), on_event, &r), 0);
	CHECK_EQ(codec_sse_feed(&p, S("\r"), on_event, &r), 0);
	CHECK_EQ(r.n, 2);
	expect(&r, 1, "message", S("c"), "", -1);
	codec_sse_fini(&p);
	rec_free(&r);
	every_split(S("data: a\r\ndata: b\r\n\r\ndata: c\r\r\n\r\n"), NULL);
}

static void
multi_line_data(void)
{
	rec r;

	parse(S("data: a\ndata: b\ndata:\ndata: c\n\n"), NULL, &r);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("a\nb\n\nc"), "", -1);
	rec_free(&r);
}

static void
comments(void)
{
	rec r;

	parse(S(": hello\n:\ndata: x\n: in between\n\n: ping\n\n:\r\r"), NULL,
	      &r);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("x"), "", -1);
	rec_free(&r);
}

static void
event_type(void)
{
	rec r;

	parse(S("event: add\ndata: 1\n\ndata: 2\n\nevent\ndata: 3\n\n"
	        "event: lost\n\ndata: 4\n\nevent:x\nevent: y\ndata: 5\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 5);
	expect(&r, 0, "add", S("1"), "", -1);
	expect(&r, 1, "message", S("2"), "", -1);
	expect(&r, 2, "message", S("3"), "", -1);
	expect(&r, 3, "message", S("4"), "", -1);
	expect(&r, 4, "y", S("5"), "", -1);
	rec_free(&r);
}

static void
id_field(void)
{
	rec r;

	parse(S("id: 7\ndata: a\n\ndata: b\n\nid: 8\0x\ndata: c\n\n"
	        "id:9\ndata: d\n\nid\ndata: e\n\nid: x:y \ndata: f\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 6);
	expect(&r, 0, "message", S("a"), "7", -1);
	expect(&r, 1, "message", S("b"), "7", -1);
	expect(&r, 2, "message", S("c"), "7", -1); /* NUL: ignored */
	expect(&r, 3, "message", S("d"), "9", -1);
	expect(&r, 4, "message", S("e"), "", -1); /* bare id clears */
	expect(&r, 5, "message", S("f"), "x:y ", -1);
	CHECK(strcmp(r.last_id, "x:y ") == 0);
	rec_free(&r);
}

static void
retry_field(void)
{
	rec r;

	parse(S("data: a\n\nretry: 3000\ndata: b\n\nretry: 12a\ndata: c\n\n"
	        "retry:\nretry: -1\nretry: 1.5\nretry:  7\ndata: d\n\n"
	        "retry:0\ndata: e\n\n"
	        "retry: 99999999999999999999999\ndata: f\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 6);
	expect(&r, 0, "message", S("a"), "", -1);
	expect(&r, 1, "message", S("b"), "", 3000);
	expect(&r, 2, "message", S("c"), "", 3000);
	expect(&r, 3, "message", S("d"), "", 3000);
	expect(&r, 4, "message", S("e"), "", 0);
	expect(&r, 5, "message", S("f"), "", INT64_MAX); /* saturates */
	rec_free(&r);
}

static void
field_without_colon(void)
{
	rec r;

	parse(S("data\n\ndata\ndata\n\nevent\ndata\ndata: z\n\n"), NULL, &r);
	CHECK_EQ(r.n, 2); /* the first has empty data: not dispatched */
	expect(&r, 0, "message", S("\n"), "", -1);
	expect(&r, 1, "message", S("\nz"), "", -1);
	rec_free(&r);
}

static void
value_without_space(void)
{
	rec r;

	parse(S("data:x\n\ndata:  x\n\ndata : x\n\nDATA: x\n\ndata:\tx\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 3);
	expect(&r, 0, "message", S("x"), "", -1);
	expect(&r, 1, "message", S(" x"), "", -1);
	expect(&r, 2, "message", S("\tx"), "", -1);
	rec_free(&r);
}

static void
priming(void)
{
	static const char *streams[] = {
	        "id: 1\ndata:\n\n",
	        "id: 1\n\n",
	        "id: 1\ndata: \n\n",
	        "event: message\nid: 1\ndata:\r\n\r\n",
	};
	codec_sse_limits lim = {.max_events = 1};
	rec              r;

	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		parse(streams[i], strlen(streams[i]), NULL, &r);
		CHECK_EQ(r.rv, 0);
		CHECK_EQ(r.n, 0);
		CHECK(strcmp(r.last_id, "1") == 0);
		rec_free(&r);
	}
	/* priming events do not count against max_events */
	parse(S("id: 1\ndata:\n\nid: 2\n\ndata: x\n\nid: 3\ndata: \n\n"), &lim,
	      &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("x"), "2", -1);
	CHECK(strcmp(r.last_id, "3") == 0);
	rec_free(&r);
}

static const char mcp_stream[] =
        "id: abc\ndata: \n\n"
        "event: message\nid: abc2\n"
        "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";

static void
mcp_example(void)
{
	rec r;

	parse(S(mcp_stream), NULL, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message",
	       S("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), "abc2", -1);
	CHECK(strcmp(r.last_id, "abc2") == 0);
	rec_free(&r);
	every_split(S(mcp_stream), NULL);
}

static void
several_in_one_chunk(void)
{
	rec r;

	parse(S("data: 1\n\ndata: 2\n\nevent: e\ndata: 3\n\nid: 4\ndata: 4\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 4);
	expect(&r, 0, "message", S("1"), "", -1);
	expect(&r, 1, "message", S("2"), "", -1);
	expect(&r, 2, "e", S("3"), "", -1);
	expect(&r, 3, "message", S("4"), "4", -1);
	rec_free(&r);
}

static void
bom(void)
{
	codec_sse_limits lim = {.max_line = 1};
	rec              r;

	parse(S("\xEF\xBB\xBF"
	        "data: a\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("a"), "", -1);
	rec_free(&r);
	/* only one BOM is skipped: the second is part of the field name */
	parse(S("\xEF\xBB\xBF\xEF\xBB\xBF"
	        "data: a\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 0);
	rec_free(&r);
	/* not at the start: part of the field name */
	parse(S("data: a\n\n\xEF\xBB\xBF"
	        "data: b\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", S("a"), "", -1);
	rec_free(&r);
	/* a partial BOM is not dropped but kept in the line */
	parse(S("\xEF"
	        "data: a\n\n\xEF\xBB"
	        "data: b\n\n"),
	      NULL, &r);
	CHECK_EQ(r.n, 0);
	rec_free(&r);
	parse(S("\xEF\xBB\n"), &lim, &r);
	CHECK_EQ(r.rv, MK_ETOOBIG);
	rec_free(&r);
	parse(S("\xEF\xBB\xBF\n"), &lim, &r);
	CHECK_EQ(r.rv, 0);
	rec_free(&r);
	every_split(S("\xEF\xBB\xBF"
	              "data: a\r\n\r\n"),
	            NULL);
	every_split(S("\xEF\xBB"
	              "data: a\n\ndata: b\r\n\r\n"),
	            NULL);
	every_split(S("\xEF\xBB\xBF\xEF\xBB\xBF\n"), &lim);
}

static void
line_limit(void)
{
	codec_sse_limits lim = {.max_line = 8};
	codec_sse        p;
	rec              r = {0};

	parse(S("data: ab\n\n"), &lim, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
	parse(S("data: ab\r\n\r\n: 123456\n"), &lim, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
	parse(S(": 12345678\n"), &lim, &r);
	CHECK_EQ(r.rv, MK_ETOOBIG);
	rec_free(&r);
	every_split(S("data: a\n\ndata: abc\n\n"), &lim);

	/* detected before the line ends, and the parser stays dead */
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: ab"), on_event, &r), 0);
	CHECK_EQ(codec_sse_feed(&p, S("c"), on_event, &r), MK_ETOOBIG);
	CHECK_EQ(codec_sse_feed(&p, S("\n\n"), on_event, &r), MK_ETOOBIG);
	CHECK_EQ(codec_sse_feed(&p, S("data: a\n\n"), on_event, &r),
	         MK_ETOOBIG);
	CHECK_EQ(codec_sse_feed(&p, NULL, 0, on_event, &r), MK_ETOOBIG);
	CHECK_EQ(r.n, 0);
	codec_sse_fini(&p);
}

static void
data_limit(void)
{
	codec_sse_limits lim = {.max_data = 5};
	rec              r;

	parse(S("data: hello\n\ndata: ab\ndata: cd\n\n"), &lim, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 2);
	expect(&r, 1, "message", S("ab\ncd"), "", -1);
	rec_free(&r);
	parse(S("data: a\n\ndata: hello!\n\n"), &lim, &r);
	CHECK_EQ(r.rv, MK_ETOOBIG);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
	parse(S("data: abc\ndata: de\n\n"), &lim, &r);
	CHECK_EQ(r.rv, MK_ETOOBIG);
	CHECK_EQ(r.n, 0);
	rec_free(&r);
	parse(S("data: hello\ndata\n\n"), &lim, &r);
	CHECK_EQ(r.rv, MK_ETOOBIG);
	rec_free(&r);
	every_split(S("data: ab\ndata: cd\n\ndata: ab\ndata: cde\n\n"), &lim);
}

static void
event_limit(void)
{
	codec_sse_limits lim = {.max_events = 2};
	codec_sse        p;
	rec              r = {0};

	parse(S("data: 1\n\nid: 1\n\ndata: 2\n\n"), &lim, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 2);
	rec_free(&r);
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: 1\n\ndata: 2\n\n"), on_event, &r),
	         0);
	CHECK_EQ(codec_sse_feed(&p, S("data: 3\n\n"), on_event, &r),
	         MK_ETOOBIG);
	CHECK_EQ(codec_sse_feed(&p, S("data: 4\n\n"), on_event, &r),
	         MK_ETOOBIG);
	CHECK_EQ(r.n, 2);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_EVENTS);
	codec_sse_fini(&p);
	rec_free(&r);
	every_split(S("data: 1\n\ndata: 2\n\ndata: 3\n\n"), &lim);
}

static void
callback_stops(void)
{
	codec_sse p;
	rec       r = {.stop_at = 2};

	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: 1\n\ndata: 2\n\ndata: 3\n\n"),
	                        on_event, &r),
	         STOP_RV);
	CHECK_EQ(r.n, 2);
	CHECK_EQ(codec_sse_feed(&p, S("data: 4\n\n"), on_event, &r),
	         MK_ETOOBIG);
	CHECK_EQ(r.n, 2);
	codec_sse_fini(&p);
	rec_free(&r);
}

static void
incomplete_last_event(void)
{
	rec r;

	parse(S("data: a\n\nid: 5\nevent: e\ndata: b\n"), NULL, &r);
	CHECK_EQ(r.rv, 0);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
	parse(S("data: a\n\ndata: b"), NULL, &r);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
	parse(S("data: a\n\ndata: b\r"), NULL, &r);
	CHECK_EQ(r.n, 1);
	rec_free(&r);
}

static void
defaults_and_fini(void)
{
	codec_sse p;
	rec       r = {.n = 0};

	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	CHECK_EQ(p.lim.max_line, 16 * 1024 * 1024 + 64);
	CHECK_EQ(p.lim.max_data, 16 * 1024 * 1024);
	CHECK_EQ(p.lim.max_events, 0); /* no total */
	CHECK_EQ(p.lim.rate, 0);       /* no rate */
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_OK);
	CHECK(strcmp(codec_sse_last_id(&p), "") == 0);
	CHECK_EQ(codec_sse_feed(&p, NULL, 0, on_event, NULL), 0);
	CHECK_EQ(codec_sse_feed(&p, S("id: 1\n\ndata: partial"), on_event,
	                        NULL),
	         0);
	CHECK(strcmp(codec_sse_last_id(&p), "1") == 0);
	/* an id of an event not yet complete is not the last event id */
	CHECK_EQ(codec_sse_feed(&p, S("\n\nid: 2\ndata: cut"), on_event, &r),
	         0);
	CHECK_EQ(r.n, 1); /* "partial" */
	CHECK(strcmp(codec_sse_last_id(&p), "1") == 0);
	CHECK_EQ(codec_sse_feed(&p, S("\n\n"), on_event, &r), 0);
	CHECK(strcmp(codec_sse_last_id(&p), "2") == 0);
	rec_free(&r);
	codec_sse_fini(&p);
	CHECK(p.line == NULL && p.data == NULL && p.id == NULL);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_FINISHED);
	codec_sse_fini(&p);
}

/* Feeds n copies of chunk (each holding per events) into p; returns the
 * events counted and leaves the first failure in *rv. */
static uint64_t
feed_many(codec_sse *p, const char *chunk, size_t len, uint64_t n, int *rv)
{
	uint64_t events = 0;

	*rv = 0;
	for (uint64_t i = 0; i < n && *rv == 0; i++) {
		*rv = codec_sse_feed(p, chunk, len, count_event, &events);
	}
	return (events);
}

/* A stream that lives long carries any number of events: no total by
 * default. */
static void
long_life_no_total(void)
{
	static const char ten[] = "data: 1\n\ndata: 2\n\ndata: 3\n\n"
	                          "data: 4\n\ndata: 5\n\ndata: 6\n\n"
	                          "data: 7\n\ndata: 8\n\ndata: 9\n\n"
	                          ": a comment\nid: 9\ndata: 10\n\n";
	codec_sse         p;
	int               rv;

	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	CHECK_EQ(feed_many(&p, S(ten), 25000, &rv), 250000);
	CHECK_EQ(rv, 0);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_OK);
	codec_sse_fini(&p);
}

/* The rate limit's clock, moved by the tests. */
static int64_t fake_ns;

static int64_t
fake_clock(void)
{
	return (fake_ns);
}

/* A token bucket: burst events at once, then rate per second; a long
 * life at the rate never hits it; idle time earns no more than burst. */
static void
rate_limit(void)
{
	codec_sse_limits lim = {.rate = 10, .burst = 5, .now_ns = fake_clock};
	codec_sse        p;
	int              rv;

	fake_ns = 1000;
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 5, &rv), 5);
	CHECK_EQ(rv, 0);
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 1, &rv), 0);
	CHECK_EQ(rv, MK_ETOOBIG);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_RATE);
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 1, &rv), 0);
	CHECK_EQ(rv, MK_ETOOBIG); /* and it stays dead */
	codec_sse_fini(&p);

	/* 1,000,000 events at 10 a second (a fake 28 hours): all pass */
	fake_ns = 0;
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	for (int i = 0; i < 1000000; i++) {
		fake_ns += 100 * 1000 * 1000;
		CHECK_EQ(feed_many(&p, S("data: x\n\n"), 1, &rv), 1);
	}
	CHECK_EQ(rv, 0);
	/* the bucket holds 4: empty it; 450 ms earn 4 more, and the 50 ms
	 * over them count toward the next */
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 4, &rv), 4);
	fake_ns += 450 * 1000 * 1000;
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 4, &rv), 4);
	CHECK_EQ(rv, 0);
	fake_ns += 50 * 1000 * 1000;
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 1, &rv), 1);
	CHECK_EQ(feed_many(&p, S("data: x\n\n"), 1, &rv), 0);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_RATE);
	codec_sse_fini(&p);

	/* a day idle: still only the burst at once; priming events and
	 * comments cost nothing */
	fake_ns = 0;
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	fake_ns += (int64_t)86400 * 1000 * 1000 * 1000;
	CHECK_EQ(feed_many(&p, S("id: 1\ndata:\n\n: ping\n\n"), 100, &rv), 0);
	CHECK_EQ(feed_many(&p,
	                   S("data: a\n\ndata: b\n\ndata: c\n\n"
	                     "data: d\n\ndata: e\n\ndata: f\n\n"),
	                   1, &rv),
	         5);
	CHECK_EQ(rv, MK_ETOOBIG);
	codec_sse_fini(&p);

	/* burst 0 is one second's worth; a rate needs a clock */
	lim.burst = 0;
	CHECK_EQ(codec_sse_init(&p, &lim), 0);
	CHECK_EQ(p.lim.burst, 10);
	codec_sse_fini(&p);
	lim.now_ns = NULL;
	CHECK_EQ(codec_sse_init(&p, &lim), MK_EINVAL);
	codec_sse_fini(&p);
	lim = (codec_sse_limits) {.rate = 2000000000, .now_ns = fake_clock};
	CHECK_EQ(codec_sse_init(&p, &lim), MK_EINVAL);
	codec_sse_fini(&p);
}

/* codec_sse_failure names the limit that stopped the parser. */
static void
failure_reasons(void)
{
	static const struct {
		codec_sse_limits lim;
		const char      *s;
		codec_sse_fail   why;
	} cases[] = {
	        {{.max_line = 4}, "data: abc\n", CODEC_SSE_LINE},
	        {{.max_data = 2}, "data: abc\n", CODEC_SSE_DATA},
	        {{.max_events = 1},
	         "data: a\n\ndata: b\n\n",
	         CODEC_SSE_EVENTS},
	        {{.rate = 1, .now_ns = fake_clock},
	         "data: a\n\ndata: b\n\n",
	         CODEC_SSE_RATE},
	};
	codec_sse p;
	rec       r = {.stop_at = 1};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t n = 0;

		CHECK_EQ(codec_sse_init(&p, &cases[i].lim), 0);
		CHECK_EQ(codec_sse_feed(&p, cases[i].s, strlen(cases[i].s),
		                        count_event, &n),
		         MK_ETOOBIG);
		CHECK_EQ(codec_sse_failure(&p), cases[i].why);
		codec_sse_fini(&p);
	}
	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	CHECK_EQ(codec_sse_feed(&p, S("data: 1\n\n"), on_event, &r), STOP_RV);
	CHECK_EQ(codec_sse_failure(&p), CODEC_SSE_STOPPED);
	codec_sse_fini(&p);
	rec_free(&r);
}

/* A 1 MiB data line fed in odd-sized chunks grows the buffers. */
static void
large_event(void)
{
	size_t    n = 1024 * 1024, len = n + 8, at = 0;
	char     *s = malloc(len);
	codec_sse p;
	rec       r = {0};

	CHECK(s != NULL);
	memcpy(s, "data: ", 6);
	for (size_t i = 0; i < n; i++) {
		s[6 + i] = (char)('a' + i % 26);
	}
	memcpy(s + 6 + n, "\n\n", 2);
	CHECK_EQ(codec_sse_init(&p, NULL), 0);
	while (at < len) {
		size_t k = len - at < 4093 ? len - at : 4093;

		CHECK_EQ(codec_sse_feed(&p, s + at, k, on_event, &r), 0);
		at += k;
	}
	CHECK_EQ(r.n, 1);
	expect(&r, 0, "message", s + 6, n, "", -1);
	codec_sse_fini(&p);
	rec_free(&r);
	free(s);
}

int
main(void)
{
	RUN(rich);
	RUN(rich_every_split);
	RUN(line_ends);
	RUN(cr_lf_across_chunks);
	RUN(multi_line_data);
	RUN(comments);
	RUN(event_type);
	RUN(id_field);
	RUN(retry_field);
	RUN(field_without_colon);
	RUN(value_without_space);
	RUN(priming);
	RUN(mcp_example);
	RUN(several_in_one_chunk);
	RUN(bom);
	RUN(line_limit);
	RUN(data_limit);
	RUN(event_limit);
	RUN(callback_stops);
	RUN(incomplete_last_event);
	RUN(defaults_and_fini);
	RUN(large_event);
	RUN(long_life_no_total);
	RUN(rate_limit);
	RUN(failure_reasons);
	return (0);
}
