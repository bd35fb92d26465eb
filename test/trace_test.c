/*
 * trace_test.c - the span exporter alone (telemetry/trace.c): what an
 * endpoint must be, a caller's context taken or refused, and a collector
 * that accepts the connection but never answers: nothing waits for it
 * but the close, which gives up, and what it did not take is counted
 * dropped, the queue bounded.  (The spans a runtime makes, and a real
 * collector's view of them, are recover_test traced and era_test
 * trace_exported.)
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "telemetry/trace.h"
#include "testutil.h"

static void
endpoints(void)
{
	tr_tracer *t        = NULL;
	char       err[256] = "";

	CHECK_EQ(tr_open(&t, "ftp://127.0.0.1:9", "n", NULL, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(t == NULL);
	CHECK(strstr(err,
	             "otlp_endpoint must be an http:// or https:// URL") !=
	      NULL);
	CHECK_EQ(tr_open(&t, "http://127.0.0.1:9/?x=1", "n", NULL, err,
	                 sizeof(err)),
	         MK_EINVAL);
	CHECK_EQ(tr_open(&t, "", "n", NULL, err, sizeof(err)), MK_EINVAL);
	/* tracing off: every call a no-op */
	tr_span *s = tr_start(NULL, "x", TR_INTERNAL, NULL, NULL);
	char     buf[TR_PARENT_LEN];
	CHECK(s == NULL);
	tr_attr(s, "k", "v");
	CHECK(tr_traceparent(s, buf) == NULL);
	CHECK(strcmp(tr_trace_id(s), "") == 0);
	tr_end(&s, NULL);
}

/* A socket that accepts connections (the kernel's backlog) and never
 * answers: a collector that hangs.  Its port into *port. */
static int
silent_collector(int *port)
{
	struct sockaddr_in a   = {.sin_family = AF_INET};
	socklen_t          len = sizeof(a);
	int                fd  = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(fd, 16), 0);
	CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return (fd);
}

static void
contexts(void)
{
	tr_tracer  *t = NULL;
	char        err[256], url[64], buf[TR_PARENT_LEN];
	int         port, fd = silent_collector(&port);
	const char *tp =
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	CHECK_EQ(tr_open(&t, url, "n", NULL, err, sizeof(err)), 0);
	/* a caller's context: its trace goes on, sampled */
	tr_span *s = tr_start(t, "call", TR_CLIENT, tp, NULL);
	CHECK(strcmp(tr_trace_id(s), "4bf92f3577b34da6a3ce929d0e0e4736") == 0);
	CHECK(strncmp(tr_traceparent(s, buf),
	              "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36) == 0);
	CHECK(strcmp(buf + 52, "-01") == 0);
	CHECK(strstr(buf, "00f067aa0ba902b7") == NULL); /* its own id */
	/* a child: the same trace */
	tr_span *c = tr_start(t, "recover", TR_INTERNAL, NULL, s);
	CHECK(strcmp(tr_trace_id(c), tr_trace_id(s)) == 0);
	tr_end(&c, NULL);
	CHECK(c == NULL);
	tr_end(&s, "failed");
	/* not sampled: kept going, never exported */
	s = tr_start(t, "call", TR_CLIENT,
	             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	             NULL);
	CHECK(strcmp(tr_traceparent(s, buf) + 52, "-00") == 0);
	tr_end(&s, NULL);
	/* not W3C (all zeros, upper case, too short): a new trace */
	const char *bad[] = {
	        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
	        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = tr_start(t, "call", TR_CLIENT, bad[i], NULL);
		CHECK(strcmp(tr_trace_id(s),
		             "4bf92f3577b34da6a3ce929d0e0e4736") != 0);
		CHECK(strlen(tr_trace_id(s)) == 32);
		tr_end(&s, NULL);
	}
	tr_close(&t);
	CHECK(t == NULL);
	close(fd);
}

/* A collector that never answers: spans past the queue are dropped at
 * once (the caller never waits), and the close gives the post in flight
 * a second and the last one a second: it returns well before a post's
 * own deadline would have let it, every span counted. */
static void
silent(void)
{
	tr_tracer      *t = NULL;
	tr_stats        st;
	char            err[256], url[64];
	int             port, fd = silent_collector(&port);
	struct timespec a, b;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	CHECK_EQ(tr_open(&t, url, "n", NULL, err, sizeof(err)), 0);
	for (int i = 0; i < TR_QUEUE_MAX + 1000; i++) {
		tr_span *s = tr_start(t, "call", TR_CLIENT, NULL, NULL);
		tr_attr_num(s, "i", i);
		tr_end(&s, NULL);
	}
	tr_stats_get(t, &st);
	/* the exporter may have taken a batch off meanwhile */
	CHECK(st.dropped >= 1000 - TR_BATCH_MAX);
	CHECK_EQ(st.exported, 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	tr_stats_get(t, &st);
	tr_close(&t);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double took = (double)(b.tv_sec - a.tv_sec) +
	        (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	fprintf(stderr, "   closed in %.2f s\n", took);
	/* (a post's deadline is 5 s: a close that waited for it would take
	 * 5 s and more) */
	CHECK(took < TR_POST_TIMEOUT_MS / 1000.0);
	close(fd);
}

int
main(int argc, char **argv)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	RUN_IF(endpoints);
	RUN_IF(contexts);
	RUN_IF(silent);
	curl_global_cleanup();
	return (0);
}
