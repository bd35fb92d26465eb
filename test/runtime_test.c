/*
 * runtime_test.c - the public API: open/close, options, handles, errors.
 */
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
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
	mk_stats st;

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
	mk_stats    st;

	mk_options_init(&o);
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

	mk_options_init(&o);
	o.stack_size = 1024;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	CHECK(rt == NULL);
	mk_options_init(&o);
	o.ask_timeout_ms = 0;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	mk_options_init(&o);
	o.log_level = (mk_log_level)9;
	CHECK_EQ(mk_runtime_open(&rt, &o), MK_EINVAL);
	CHECK_EQ(mk_runtime_open(NULL, &o), MK_EINVAL);
}

static void
poisoned_handle(void)
{
	mk_runtime *rt, *copy;
	mk_stats    st;
	mk_options  o;

	mk_options_init(&o);
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
	mk_stats    st;
	mk_options  o;

	mk_options_init(&o);
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
	mk_options_init(&o);
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

int
main(void)
{
	RUN(open_close);
	RUN(embedder_log);
	RUN(bad_options);
	RUN(poisoned_handle);
	RUN(error_texts);
	RUN(two_runtimes);
	return (0);
}
