/*
 * runtime_test.c - the public API: open/close, options, handles, errors.
 */
#include <msgpack.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "testutil.h"

/* Waits up to 10 s for the runtime to count n stream subscribers (nng
 * adds and drops a pipe on its own threads; nothing tells when). */
static int
subscribers_become(mk_runtime *rt, uint64_t n)
{
	mk_stats st = MK_STATS_INIT;

	for (int i = 0; i < 1000; i++) {
		CHECK_EQ(mk_runtime_stats(rt, &st, 0), 0);
		if (st.stream_subscribers == n) {
			return (1);
		}
		nanosleep(&(struct timespec) {0, 10000000}, NULL);
	}
	return (0);
}

static void
open_close(void)
{
	mk_runtime *rt = NULL;
	mk_options  o;
	mk_stats    st = MK_STATS_INIT;

	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_WARN;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	CHECK(rt != NULL);
	CHECK_EQ(mk_runtime_stats(rt, &st, 0), 0);
	CHECK_EQ(st.actors, 2); /* the supervisor, the credential actor */
	CHECK(st.asks >= 1);
	CHECK_EQ(st.handler_errors, 0);
	CHECK_EQ(st.stream_subscribers, 0);
	nng_socket sub;
	CHECK_EQ(nng_sub0_open(&sub), 0);
	CHECK_EQ(nng_dial(sub, mk_stream_url(rt), NULL, 0), 0);
	CHECK(subscribers_become(rt, 1));
	nng_close(sub);
	CHECK(subscribers_become(rt, 0));
	CHECK_EQ(mk_runtime_stats(rt, NULL, 0), MK_EINVAL);
	mk_runtime_close(&rt);
	CHECK(rt == NULL);
	mk_runtime_close(&rt); /* twice */
	mk_runtime_close(NULL);
	CHECK_EQ(mk_runtime_stats(NULL, &st, 0), MK_EHANDLE);
}

static void
bad_options(void)
{
	mk_runtime *rt = (mk_runtime *)1;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.stack_size = 1024;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	CHECK(rt == NULL);
	mk_options_init(&o, sizeof(o));
	o.ask_timeout_ms = 0;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	mk_options_init(&o, sizeof(o));
	o.log_level = (mk_log_level)9;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	CHECK_EQ(mk_runtime_open(NULL, &o), MK_EINVAL);
}

static void
poisoned_handle(void)
{
	mk_runtime *rt, *copy;
	mk_stats    st = MK_STATS_INIT;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_WARN;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	copy = rt;
	/* a handle that is not a runtime is refused, not dereferenced
	 * beyond its tag */
	{
		struct {
			uint32_t tag;
			char     pad[64];
		} fake = {0x12345678u, {0}};
		CHECK_EQ(mk_runtime_stats((mk_runtime *)&fake, &st, 0),
		         MK_EHANDLE);
	}
	mk_runtime_close(&rt);
	(void)copy; /* freed: using it is the caller's bug */
}

static void
error_texts(void)
{
	for (int rc = MK_OK; rc <= MK_ESTATE; rc++) {
		const char *s = mk_strerror(rc);
		CHECK(s != NULL && strcmp(s, "unknown error") != 0);
	}
	CHECK(strcmp(mk_strerror(-1), "unknown error") == 0);
	CHECK(strcmp(mk_strerror(9999), "unknown error") == 0);
	CHECK(strcmp(mk_strerror(MK_ETIMEDOUT), "timed out") == 0);
}

static void
two_runtimes(void)
{
	mk_runtime *a, *b;
	mk_stats    st = MK_STATS_INIT;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_WARN;
	CHECK_EQ(mk_runtime_open(&a, &o), 0);
	CHECK(strcmp(mk_stream_url(a), "inproc://mcpkeep/state") == 0);
	/* the same stream address twice is refused, clearly */
	CHECK_EQ(mk_runtime_open(&b, &o), MK_EINVAL);
	o.stream_url = "inproc://mcpkeep/state-b";
	CHECK_EQ(mk_runtime_open(&b, &o), 0);
	CHECK_EQ(mk_runtime_stats(a, &st, 0), 0);
	CHECK_EQ(mk_runtime_stats(b, &st, 0), 0);
	mk_runtime_close(&a);
	CHECK_EQ(mk_runtime_stats(b, &st, 0), 0);
	mk_runtime_close(&b);
}

/* mk_log: an embedder's lines in the runtime's log, at its level. */
static void
embedder_log(void)
{
	mk_runtime *rt;
	mk_options  o;
	int         fds[2];
	char        buf[4096];
	ssize_t     n;

	CHECK_EQ(pipe(fds), 0);
	unsetenv("MCPKEEP_LOG"); /* (the suite's would override the level) */
	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_WARN;
	o.log_fd    = fds[1];
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	mk_log(MK_LOG_WARN, "host", "one\ntwo %d", 2);
	mk_log(MK_LOG_INFO, "host", "below the level");
	mk_log((mk_log_level)7, "host", "no such level");
	mk_log(MK_LOG_ERROR, NULL, "no component");
	mk_log(MK_LOG_ERROR, "host", NULL);
	mk_runtime_close(&rt);
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	CHECK(n > 0);
	buf[n] = '\0';
	CHECK(strstr(buf, "Z WARN  host: one two 2\n") != NULL);
	CHECK(strstr(buf, "Z ERROR -: no component\n") != NULL);
	CHECK(strstr(buf, "below the level") == NULL);
	CHECK(strstr(buf, "no such level") == NULL);
}

/* Bytes [from, to) of p are all the guard byte. */
static int
guarded(const void *p, size_t from, size_t to)
{
	const unsigned char *b = p;

	for (size_t i = from; i < to; i++) {
		if (b[i] != 0xa5) {
			return (0);
		}
	}
	return (1);
}

/* Everything the pipe's read end holds now (NUL-terminated in buf). */
static void
drain(int fd, char *buf, size_t cap)
{
	ssize_t n;
	size_t  len = 0;

	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0) {
		len += (size_t)n;
	}
	buf[len] = '\0';
}

/* Occurrences of needle in hay. */
static int
count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
		n++;
	}
	return (n);
}

/* Two runtimes log each with its own settings: a, text at debug, to one
 * pipe; b, JSON at info, to another.  Their actor threads' lines (the
 * kernel's "actor ... stopped" at debug) and their open and close lines
 * go to their own fd, also while the other is the newest; mk_log from a
 * thread of neither uses the newest runtime still open. */
static void
two_logs(void)
{
	mk_runtime *a, *b;
	mk_options  o;
	int         pa[2], pb[2];
	char        la[16384], lb[16384];

	CHECK_EQ(pipe(pa), 0);
	CHECK_EQ(pipe(pb), 0);
	unsetenv("MCPKEEP_LOG"); /* (the suite's would override the level) */
	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_DEBUG;
	o.log_fd     = pa[1];
	o.stream_url = "inproc://mcpkeep/log-a";
	CHECK_EQ(mk_runtime_open(&a, &o), 0);
	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_INFO;
	o.log_json   = 1;
	o.log_fd     = pb[1];
	o.stream_url = "inproc://mcpkeep/log-b";
	CHECK_EQ(mk_runtime_open(&b, &o), 0);
	mk_log(MK_LOG_WARN, "host", "to the newest");
	mk_runtime_close(&a); /* while b is the newest */
	mk_log(MK_LOG_WARN, "host", "to b still");
	mk_runtime_close(&b);
	close(pa[1]);
	close(pb[1]);
	drain(pa[0], la, sizeof(la));
	drain(pb[0], lb, sizeof(lb));
	close(pa[0]);
	close(pb[0]);

	CHECK_EQ(count_of(la, "INFO  runtime: booted"), 1);
	CHECK_EQ(count_of(la, "DEBUG kernel: actor supervisor ready"), 1);
	CHECK_EQ(count_of(la, "DEBUG kernel: actor supervisor stopped"), 1);
	CHECK_EQ(count_of(la, "INFO  runtime: closed"), 1);
	CHECK_EQ(count_of(la, "{"), 0);
	CHECK_EQ(count_of(la, "host"), 0);

	CHECK_EQ(count_of(lb, "\"component\":\"runtime\",\"msg\":\"booted"),
	         1);
	CHECK_EQ(count_of(lb, "\"component\":\"runtime\",\"msg\":\"closed\""),
	         1);
	CHECK_EQ(count_of(lb, "\"msg\":\"to the newest\""), 1);
	CHECK_EQ(count_of(lb, "\"msg\":\"to b still\""), 1);
	CHECK_EQ(count_of(lb, "DEBUG"), 0);
	CHECK_EQ(count_of(lb, "\n"), count_of(lb, "{\"ts\":"));
}

/* A caller built against an older, shorter mk_options (its struct ends
 * before credential_cache_max): init writes nothing past its size, and
 * open reads nothing past it - the guard bytes there would make
 * oauth_redirect_uri a wild pointer and raise_fd_limit non-zero - but
 * takes the defaults. */
static void
abi_options(void)
{
	union {
		mk_options    o;
		unsigned char b[sizeof(mk_options) + 64];
	} u;
	size_t      old = offsetof(mk_options, credential_cache_max);
	mk_runtime *rt;
	int         fds[2];
	char        buf[8192];

	memset(&u, 0xa5, sizeof(u));
	CHECK_EQ(mk_options_init(&u.o, old), MK_OK);
	CHECK_EQ(u.o.size, old);
	CHECK_EQ(u.o.log_fd, 2);
	CHECK_EQ(u.o.ask_timeout_ms, 5000);
	CHECK(guarded(&u, old, sizeof(u)));
	CHECK_EQ(pipe(fds), 0);
	unsetenv("MCPKEEP_LOG"); /* (the suite's would override the level) */
	u.o.log_level = MK_LOG_INFO;
	u.o.log_fd    = fds[1];
	CHECK_EQ(mk_runtime_open(&rt, &u.o), 0);
	mk_runtime_close(&rt);
	close(fds[1]);
	drain(fds[0], buf, sizeof(buf));
	close(fds[0]);
	CHECK(strstr(buf, "runtime: booted") != NULL);
	CHECK(strstr(buf, "file descriptors") == NULL); /* raise_fd_limit 0 */
	CHECK(guarded(&u, old, sizeof(u)));

	/* sizes this library cannot serve */
	CHECK_EQ(mk_options_init(&u.o, sizeof(size_t) - 1), MK_EINVAL);
	CHECK_EQ(mk_options_init(&u.o, sizeof(mk_options) + 8), MK_EINVAL);
	CHECK_EQ(mk_options_init(NULL, sizeof(mk_options)), MK_EINVAL);
	CHECK(guarded(&u, old, sizeof(u)));
	CHECK_EQ(mk_options_init(&u.o, sizeof(u.o)), MK_OK);
	CHECK_EQ(u.o.size, sizeof(mk_options));
	u.o.log_level = MK_LOG_WARN;
	u.o.size      = sizeof(mk_options) + 8; /* a newer header's */
	CHECK_EQ(mk_runtime_open(&rt, &u.o), MK_EINVAL);
	u.o.size = 0;
	CHECK_EQ(mk_runtime_open(&rt, &u.o), MK_EINVAL);
	CHECK(rt == NULL);
}

/* A caller whose mk_stats ends before store_state gets the counters it
 * knows and nothing written past them. */
static void
abi_stats(void)
{
	union {
		mk_stats      s;
		unsigned char b[sizeof(mk_stats) + 64];
	} u;
	size_t      old = offsetof(mk_stats, store_state);
	mk_stats    st  = MK_STATS_INIT;
	mk_runtime *rt;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_WARN;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	memset(&u, 0xa5, sizeof(u));
	u.s.size = old;
	CHECK_EQ(mk_runtime_stats(rt, &u.s, 0), 0);
	CHECK_EQ(u.s.size, old);
	CHECK_EQ(u.s.actors, 2);
	CHECK_EQ(u.s.handler_errors, 0);
	CHECK(guarded(&u, old, sizeof(u)));
	CHECK_EQ(st.size, sizeof(mk_stats));
	CHECK_EQ(mk_runtime_stats(rt, &st, 0), 0);
	CHECK_EQ(st.size, sizeof(mk_stats));
	CHECK_EQ(st.actors, 2);
	CHECK_EQ(st.store_state, MK_STORE_NONE);
	memset(&u, 0xa5, sizeof(u));
	u.s.size = 0;
	CHECK_EQ(mk_runtime_stats(rt, &u.s, 0), MK_EINVAL);
	u.s.size = sizeof(mk_stats) + 8;
	CHECK_EQ(mk_runtime_stats(rt, &u.s, 0), MK_EINVAL);
	CHECK(guarded(&u, sizeof(size_t), sizeof(u)));
	mk_runtime_close(&rt);
}

/* A stream message: topic, NUL, a msgpack map of n string pairs kv (a
 * value that is all digits is packed as a number).  Its length. */
static size_t
stream_msg(char *buf, size_t cap, const char *topic, int n,
           const char *const *kv)
{
	msgpack_sbuffer sb;
	msgpack_packer  pk;
	size_t          len;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, (size_t)n);
	for (int i = 0; i < n; i++) {
		const char *k = kv[2 * i], *v = kv[2 * i + 1];
		msgpack_pack_str_with_body(&pk, k, strlen(k));
		if (v[0] != '\0' && strspn(v, "0123456789") == strlen(v)) {
			msgpack_pack_int64(&pk, atoll(v));
		} else {
			msgpack_pack_str_with_body(&pk, v, strlen(v));
		}
	}
	len = strlen(topic) + 1 + sb.size;
	CHECK(len <= cap);
	memcpy(buf, topic, strlen(topic) + 1);
	memcpy(buf + strlen(topic) + 1, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return (len);
}

/* A "tools" stream message. */
static size_t
tools_msg(char *buf, size_t cap)
{
	static const char *const kv[] = {"client_id", "c1",  "name",  "alpha",
	                                 "hash",      "abc", "count", "3"};

	return (stream_msg(buf, cap, "tools", 4, kv));
}

/* An event's strings are whole, however long, and "" when absent; an
 * unknown topic gives the topic alone; what is not a stream message is
 * refused. */
static void
stream_event(void)
{
	size_t           cap = 64 * 1024, len;
	char            *msg = malloc(cap), *big = malloc(20001);
	mk_stream_event *ev;

	CHECK(msg != NULL && big != NULL);
	memset(big, 'x', 20000);
	big[20000] = '\0';
	len        = stream_msg(msg, cap, "tools", 5,
	                        (const char *const[]) {"client_id", "c1", "name",
	                                               "alpha", "hash", "abc",
	                                               "count", "3", "diff", big});
	CHECK_EQ(mk_stream_event_parse(msg, len, &ev), MK_OK);
	CHECK(strcmp(ev->topic, "tools") == 0 &&
	      strcmp(ev->name, "alpha") == 0);
	CHECK_EQ(ev->count, 3);
	CHECK(strcmp(ev->diff, big) == 0); /* whole: 20,000 bytes */
	CHECK(strcmp(ev->state, "") == 0 && strcmp(ev->message, "") == 0 &&
	      strcmp(ev->node_id, "") == 0);
	mk_stream_event_free(ev);
	len = stream_msg(msg, cap, "store", 2,
	                 (const char *const[]) {"healthy", "0", "error", big});
	CHECK_EQ(mk_stream_event_parse(msg, len, &ev), MK_OK);
	CHECK(strcmp(ev->message, big) == 0 && ev->healthy == 0);
	mk_stream_event_free(ev);
	len = stream_msg(msg, cap, "later", 1,
	                 (const char *const[]) {"what", "new"});
	CHECK_EQ(mk_stream_event_parse(msg, len, &ev), MK_OK);
	CHECK(strcmp(ev->topic, "later") == 0 &&
	      strcmp(ev->client_id, "") == 0);
	mk_stream_event_free(ev);
	ev = (mk_stream_event *)msg;
	CHECK_EQ(mk_stream_event_parse(msg, 3, &ev), MK_EPROTO); /* no NUL */
	CHECK(ev == NULL);
	CHECK_EQ(mk_stream_event_parse(NULL, 0, &ev), MK_EPROTO);
	CHECK_EQ(mk_stream_event_parse("tools\0\x01", 7, &ev), MK_EPROTO);
	CHECK_EQ(mk_stream_event_parse(msg, len, NULL), MK_EINVAL);
	mk_stream_event_free(NULL);
	free(big);
	free(msg);
}

/* The deprecated mk_event: a caller whose mk_event ends before hash gets
 * the fields it knows and nothing written past them; strings are cut to
 * fit, a diff past 8 KiB is {"truncated": true}. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void
abi_event(void)
{
	union {
		mk_event      e;
		unsigned char b[sizeof(mk_event) + 64];
	} u;
	size_t   old = offsetof(mk_event, hash);
	mk_event ev  = MK_EVENT_INIT;
	char     msg[24 * 1024], big[10001];
	size_t   len = tools_msg(msg, sizeof(msg));

	memset(&u, 0xa5, sizeof(u));
	u.e.size = old;
	CHECK_EQ(mk_event_parse(msg, len, &u.e), MK_OK);
	CHECK_EQ(u.e.size, old);
	CHECK(strcmp(u.e.topic, "tools") == 0);
	CHECK(strcmp(u.e.name, "alpha") == 0);
	CHECK(strcmp(u.e.state, "") == 0);
	CHECK(guarded(&u, old, sizeof(u)));
	CHECK_EQ(mk_event_parse(msg, len, &ev), MK_OK);
	CHECK_EQ(ev.size, sizeof(mk_event));
	CHECK(strcmp(ev.hash, "abc") == 0);
	CHECK_EQ(ev.count, 3);
	CHECK_EQ(mk_event_parse(msg, 3, &ev), MK_EPROTO); /* no NUL */
	CHECK_EQ(ev.size, sizeof(mk_event));
	CHECK_EQ(mk_event_parse(msg, len, NULL), MK_EINVAL);
	memset(&u, 0xa5, sizeof(u));
	u.e.size = sizeof(size_t) - 1;
	CHECK_EQ(mk_event_parse(msg, len, &u.e), MK_EINVAL);
	u.e.size = sizeof(mk_event) + 8;
	CHECK_EQ(mk_event_parse(msg, len, &u.e), MK_EINVAL);
	CHECK(guarded(&u, sizeof(size_t), sizeof(u)));
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	len                  = stream_msg(msg, sizeof(msg), "tools", 2,
	                                  (const char *const[]) {"name", big, "diff", big});
	CHECK_EQ(mk_event_parse(msg, len, &ev), MK_OK);
	CHECK_EQ(strlen(ev.name), sizeof(ev.name) - 1);
	CHECK(strcmp(ev.diff, "{\"truncated\": true}") == 0);
}
#pragma GCC diagnostic pop

/* A caller whose mk_call ends before trace: nothing past its size is read
 * (the bytes there would be a wild pointer); a size not set, or a newer
 * header's, is refused. */
static void
abi_call(void)
{
	union {
		mk_call       c;
		unsigned char b[sizeof(mk_call) + 64];
	} u;
	size_t      old = offsetof(mk_call, trace);
	mk_runtime *rt;
	mk_result  *res = NULL;

	CHECK_EQ(mk_runtime_open(&rt, NULL), 0);
	u.c = (mk_call) {.client = "nope", .tool = "t"};
	memset(u.b + old, 0xa5, sizeof(u) - old);
	u.c.size = old;
	CHECK_EQ(mk_tool_call(rt, &u.c, &res), MK_ENOENT);
	mk_result_free(&res);
	u.c.size = 0; /* (no MK_CALL_INIT) */
	CHECK_EQ(mk_tool_call(rt, &u.c, &res), MK_EINVAL);
	u.c.size = sizeof(mk_call) + 8;
	CHECK_EQ(mk_tool_call(rt, &u.c, &res), MK_EINVAL);
	CHECK(res == NULL);
	mk_runtime_close(&rt);
}

/* The fixed names, by index: the seven states in their order (the
 * client actor's cl_state numbers them so), the six stages, the twelve
 * latency bounds; past the last, NULL or -1. */
static void
names(void)
{
	static const char *const states[] = {
	        "healthy",  "unstable", "needs_reauth", "pending_verification",
	        "disabled", "error",    "degraded"};
	static const char *const stages[] = {
	        "connect",        "ping",           "list_tools",
	        "tool_discovery", "transport_lost", "credential"};

	for (unsigned i = 0; i < 7; i++) {
		CHECK(strcmp(mk_state_name(i), states[i]) == 0);
	}
	CHECK(mk_state_name(7) == NULL);
	for (unsigned i = 0; i < 6; i++) {
		CHECK(strcmp(mk_stage_name(i), stages[i]) == 0);
	}
	CHECK(mk_stage_name(6) == NULL);
	CHECK_EQ(mk_latency_bound_ms(0), 5);
	CHECK_EQ(mk_latency_bound_ms(11), 30000);
	CHECK_EQ(mk_latency_bound_ms(12), -1);
	for (unsigned i = 1; i < 12; i++) {
		CHECK(mk_latency_bound_ms(i) > mk_latency_bound_ms(i - 1));
	}
}

int
main(void)
{
	RUN(open_close);
	RUN(embedder_log);
	RUN(bad_options);
	RUN(poisoned_handle);
	RUN(error_texts);
	RUN(two_runtimes);
	RUN(two_logs);
	RUN(abi_options);
	RUN(abi_stats);
	RUN(stream_event);
	RUN(abi_event);
	RUN(abi_call);
	RUN(names);
	return (0);
}
