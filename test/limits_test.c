/*
 * limits_test.c - running out of file descriptors is detected, never a
 * hang, and shutting down has a bound.
 *
 * Covered: a disabled client holds no file descriptor; under a low
 * RLIMIT_NOFILE a client that cannot get its descriptors is refused with
 * MK_ESYS and a message naming the limit, and the clients before it keep
 * working; mk_runtime_close with 2,000 clients, half of them stuck in a
 * dial (a listener that accepts and never answers), ends within 5 s.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"
#include "rtutil.h"
#include "testutil.h"

#define STUCK 1000 /* clients stuck in a dial */
/* The close bound: 5 s; the thread sanitizer slows the 2,000 threads'
 * teardown about fivefold (6 s measured where a plain build takes
 * 1.2 s), so there it is 25 s - still no hang (it was 10 minutes) */
#if defined(__SANITIZE_THREAD__)
#define CLOSE_BOUND_MS 25000
#else
#define CLOSE_BOUND_MS 5000
#endif
#define IDLE 1000 /* disabled ones beside them */

static char *
disabled_config(const char *prefix, int from, int n)
{
	json_t *list = json_array(), *cfg;
	char   *text, name[64];

	for (int i = from; i < from + n; i++) {
		snprintf(name, sizeof(name), "%s_%d", prefix, i);
		json_array_append_new(
		        list,
		        json_pack("{s:s, s:s, s:s, s:b, s:[s]}", "name", name,
		                  "connection_type", "http",
		                  "connection_string",
		                  "http://127.0.0.1:9/mcp", "disabled", 1,
		                  "tools_to_execute", "*"));
	}
	cfg  = json_pack("{s:{s:o}}", "mcp", "client_configs", list);
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	return (text);
}

/* 300 disabled clients cost no file descriptor (each used to hold
 * curl's wake-up pair). */
static void
disabled_no_fds(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	char       *cfg = disabled_config("lim_off", 0, 300), *err = NULL;
	int         before = peer_open_fds(), after;

	CHECK_EQ(mk_runtime_load(rt, cfg, &err), 0);
	after = peer_open_fds();
	fprintf(stderr, "300 disabled clients: %d fds more\n", after - before);
	CHECK(after - before < 15);
	free(cfg);
	mk_free(err);
	rt_close(&rt, &sb);
}

/* Under a low limit, adds until one is refused: MK_ESYS naming the
 * limit; the earlier clients still answer. */
static void
refused_at_limit(void)
{
	sub           sb;
	mk_runtime   *rt = rt_open(&sb);
	peer          p;
	char         *err = NULL, *out;
	struct rlimit lim, low;
	int           rc = 0, added = 0;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
	low          = lim;
	low.rlim_cur = (rlim_t)peer_open_fds() + 40;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	for (int i = 0; i < 100; i++) {
		rc = add(
		        rt, &err,
		        "{\"name\": \"lim_on_%d\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
		        i, p.port);
		if (rc != 0) {
			break;
		}
		added++;
		mk_free(err);
		err = NULL;
	}
	fprintf(stderr, "at %llu fds: %d clients, then rc %d: %s\n",
	        (unsigned long long)low.rlim_cur, added, rc,
	        err != NULL ? err : "");
	CHECK(added > 0);
	CHECK_EQ(rc, MK_ESYS);
	CHECK(strstr(err, "RLIMIT_NOFILE") != NULL);
	out = call_text(rt, "lim_on_0", "echo", "{\"message\": \"still\"}",
	                &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "still") != NULL);
	free(out);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
	mk_free(err);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* A listener that accepts and never answers; counts its connections. */
typedef struct sink {
	int             fd;
	pthread_t       thr;
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             accepted;
	int             conns[STUCK + 64];
} sink;

static void *
sink_main(void *arg)
{
	sink *s = arg;
	int   c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		pthread_mutex_lock(&s->mtx);
		if (s->accepted < STUCK + 64) {
			s->conns[s->accepted++] = c;
		} else {
			close(c);
		}
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mtx);
	}
	return (NULL);
}

/* Binds port (0: any) on loopback; its port. */
static int
bind_port(int fd, int port)
{
	struct sockaddr_in a   = {.sin_family = AF_INET,
	                          .sin_port   = htons((uint16_t)port)};
	socklen_t          len = sizeof(a);
	int                one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)),
	         0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return (ntohs(a.sin_port));
}

static void
close_bounded(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	sink        s  = {.accepted = 0};
	json_t     *list, *cfg;
	char       *text, *err  = NULL, name[64], url[64];
	int         port, probe = socket(AF_INET, SOCK_STREAM, 0);
	int64_t     t0;

	/* a free port, closed while the clients boot: their first connect
	 * is refused at once, the next ones (the backoff's) get stuck */
	port = bind_port(probe, 0);
	close(probe);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	text = disabled_config("lim_idle", 0, IDLE);
	CHECK_EQ(mk_runtime_load(rt, text, &err), 0);
	free(text);
	list = json_array();
	for (int i = 0; i < STUCK; i++) {
		snprintf(name, sizeof(name), "lim_stuck_%d", i);
		json_array_append_new(list,
		                      json_pack("{s:s, s:s, s:s, s:b, s:[s]}",
		                                "name", name,
		                                "connection_type", "http",
		                                "connection_string", url,
		                                "needs_session_stickiness", 1,
		                                "tools_to_execute", "*"));
	}
	cfg  = json_pack("{s:{s:o}}", "mcp", "client_configs", list);
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	CHECK_EQ(mk_runtime_load(rt, text, &err), 0);
	free(text);
	pthread_mutex_init(&s.mtx, NULL);
	pthread_cond_init(&s.cv, NULL);
	CHECK((s.fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	CHECK_EQ(bind_port(s.fd, port), port);
	CHECK_EQ(listen(s.fd, 4096), 0);
	CHECK_EQ(pthread_create(&s.thr, NULL, sink_main, &s), 0);
	/* every stuck client's retry is connected and waits for an answer
	 * (backoff: within a second or two) */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&s.mtx);
	while (s.accepted < STUCK) {
		CHECK(pthread_cond_timedwait(&s.cv, &s.mtx, &ts) == 0);
	}
	pthread_mutex_unlock(&s.mtx);
	t0 = now_ms();
	rt_close(&rt, &sb);
	fprintf(stderr,
	        "close with %d clients stuck in a dial, %d idle: %lld ms\n",
	        STUCK, IDLE, (long long)(now_ms() - t0));
	CHECK(now_ms() - t0 <= CLOSE_BOUND_MS);
	shutdown(s.fd, SHUT_RDWR);
	close(s.fd);
	pthread_join(s.thr, NULL);
	for (int i = 0; i < s.accepted; i++) {
		close(s.conns[i]);
	}
	mk_free(err);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	CHECK(peer_dir() != NULL);
	RUN_IF(disabled_no_fds);
	RUN_IF(refused_at_limit);
	RUN_IF(close_bounded);
	return (0);
}
