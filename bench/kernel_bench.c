/*
 * kernel_bench.c - the actor kernel measured beside its baselines in one
 * run: nng itself, and a mutex+condvar hand-off (the floor).
 *
 *   ask round trip    kn_ask -> actor -> reply    vs nng req0/rep0, condvar
 *   tell throughput   1 and 16 senders -> actor   vs nng push0 -> pull0
 *   spawn             actors per second, fds and RSS per idle actor
 *
 * Ratios are the portable figures; absolutes are this machine's.
 */
#include <dirent.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/kernel/clock.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "calls.h"

#define RTT_N     20000
#define TELL_N    100000
#define REPS      3 /* throughput runs, interleaved; the median is shown */
#define SPAWN_N   2000
#define MSG_BYTES 64

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x < y ? -1 : x > y);
}

typedef struct lat {
	double p50, p99; /* microseconds */
} lat;

static lat
percentiles(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	return ((lat) {v[n / 2] / 1e3, v[(int)(n * 0.99)] / 1e3});
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y ? -1 : x > y);
}

static double
median(double *v)
{
	qsort(v, REPS, sizeof(*v), cmp_dbl);
	return (v[REPS / 2]);
}

static void
kb_die(const char *what, int rv)
{
	fprintf(stderr, "bench: %s failed: %d\n", what, rv);
	exit(1);
}

/* ---- the actor under test ------------------------------------------- */

typedef struct sink {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	uint64_t        got;    /* tells counted (actor thread) */
	uint64_t        target; /* signal when got reaches it */
	int             done;
} sink;

static int
b_init(kn_actor *self, void *arg, void **statep)
{
	*statep = arg;
	return (0);
}

static int
b_handle(kn_actor *self, void *state, kn_msg *msg)
{
	sink *s = state;

	if (msg->env.corr != 0) {
		return (kn_reply(self, msg, 0, msg->env.payload,
		                 msg->env.payload_len));
	}
	if (++s->got == s->target) {
		pthread_mutex_lock(&s->mtx);
		s->done = 1;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mtx);
	}
	return (0);
}

static const kn_actor_ops b_ops = {.init = b_init, .handle = b_handle};

static lat
bench_ask(kn_actor *a)
{
	static int64_t v[RTT_N];
	char           payload[MSG_BYTES] = {0};
	kn_answer      r;

	for (int i = -1000; i < RTT_N; i++) {
		int64_t t0 = kn_now_ns();
		int rv = kn_ask(a, MSG_PING, payload, sizeof(payload), 5000,
		                &r);
		if (rv != 0) {
			kb_die("kn_ask", rv);
		}
		free(r.data);
		if (i >= 0) {
			v[i] = kn_now_ns() - t0;
		}
	}
	return (percentiles(v, RTT_N));
}

/* ---- nng req/rep ------------------------------------------------------ */

static void *
rep_main(void *arg)
{
	nng_socket s = *(nng_socket *)arg;
	nng_msg   *m;

	while (nng_recvmsg(s, &m, 0) == 0) {
		if (nng_sendmsg(s, m, 0) != 0) {
			nng_msg_free(m);
		}
	}
	return (NULL);
}

static lat
bench_reqrep(void)
{
	static int64_t v[RTT_N];
	nng_socket     req, rep;
	pthread_t      t;
	int            rv;

	if ((rv = nng_rep0_open(&rep)) != 0 ||
	    (rv = nng_listen(rep, "inproc://bench-rr", NULL, 0)) != 0 ||
	    (rv = nng_req0_open(&req)) != 0 ||
	    (rv = nng_dial(req, "inproc://bench-rr", NULL, 0)) != 0) {
		kb_die("req/rep setup", rv);
	}
	pthread_create(&t, NULL, rep_main, &rep);
	for (int i = -1000; i < RTT_N; i++) {
		nng_msg *m;
		int64_t  t0 = kn_now_ns();
		nng_msg_alloc(&m, MSG_BYTES);
		if ((rv = nng_sendmsg(req, m, 0)) != 0 ||
		    (rv = nng_recvmsg(req, &m, 0)) != 0) {
			kb_die("req/rep", rv);
		}
		nng_msg_free(m);
		if (i >= 0) {
			v[i] = kn_now_ns() - t0;
		}
	}
	nng_close(req);
	nng_close(rep);
	pthread_join(t, NULL);
	return (percentiles(v, RTT_N));
}

/* ---- mutex + condvar ping-pong (the floor) ---------------------------- */

typedef struct pp {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             turn; /* 0 main's, 1 peer's, -1 stop */
} pp;

static void *
pp_main(void *arg)
{
	pp *p = arg;

	pthread_mutex_lock(&p->mtx);
	for (;;) {
		while (p->turn == 0) {
			pthread_cond_wait(&p->cv, &p->mtx);
		}
		if (p->turn < 0) {
			break;
		}
		p->turn = 0;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mtx);
	return (NULL);
}

static lat
bench_condvar(void)
{
	static int64_t v[RTT_N];
	pp        p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	pthread_t t;

	pthread_create(&t, NULL, pp_main, &p);
	for (int i = -1000; i < RTT_N; i++) {
		int64_t t0 = kn_now_ns();
		pthread_mutex_lock(&p.mtx);
		p.turn = 1;
		pthread_cond_broadcast(&p.cv);
		while (p.turn != 0) {
			pthread_cond_wait(&p.cv, &p.mtx);
		}
		pthread_mutex_unlock(&p.mtx);
		if (i >= 0) {
			v[i] = kn_now_ns() - t0;
		}
	}
	pthread_mutex_lock(&p.mtx);
	p.turn = -1;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mtx);
	pthread_join(t, NULL);
	return (percentiles(v, RTT_N));
}

/* ---- throughput -------------------------------------------------------- */

typedef struct sender {
	kn_actor  *to;   /* kernel case */
	nng_socket push; /* nng case */
	int        n;    /* messages to send */
} sender;

static void *
tell_main(void *arg)
{
	sender *s                  = arg;
	char    payload[MSG_BYTES] = {0};

	for (int i = 0; i < s->n; i++) {
		int rv = kn_tell(s->to, NULL, MSG_USER, payload, MSG_BYTES);
		if (rv != 0) {
			kb_die("kn_tell", rv);
		}
	}
	return (NULL);
}

static double
bench_tell(kn_kernel *k, int nsenders)
{
	sink      s = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	               .cv  = PTHREAD_COND_INITIALIZER};
	kn_actor *a;
	pthread_t t[16];
	sender    sd[16];
	int64_t   t0;
	int       rv;

	s.target = (TELL_N / nsenders) * nsenders;
	if ((rv = kn_spawn(k, "tell-sink", &b_ops, &s, &a)) != 0) {
		kb_die("spawn", rv);
	}
	t0 = kn_now_ns();
	for (int i = 0; i < nsenders; i++) {
		sd[i] = (sender) {.to = a, .n = TELL_N / nsenders};
		pthread_create(&t[i], NULL, tell_main, &sd[i]);
	}
	pthread_mutex_lock(&s.mtx);
	while (!s.done) {
		pthread_cond_wait(&s.cv, &s.mtx);
	}
	pthread_mutex_unlock(&s.mtx);
	double secs = (kn_now_ns() - t0) / 1e9;
	for (int i = 0; i < nsenders; i++) {
		pthread_join(t[i], NULL);
	}
	kn_actor_destroy(&a);
	return (s.target / secs);
}

static void *
push_main(void *arg)
{
	sender *s = arg;

	for (int i = 0; i < s->n; i++) {
		nng_msg *m;
		nng_msg_alloc(&m, MSG_BYTES);
		if (nng_sendmsg(s->push, m, 0) != 0) {
			kb_die("push", 0);
		}
	}
	return (NULL);
}

static double
bench_pushpull(int nsenders)
{
	nng_socket push, pull;
	pthread_t  t[16];
	sender     sd[16];
	int        total = (TELL_N / nsenders) * nsenders;
	int64_t    t0;
	int        rv;

	if ((rv = nng_pull0_open(&pull)) != 0 ||
	    (rv = nng_listen(pull, "inproc://bench-pp", NULL, 0)) != 0 ||
	    (rv = nng_push0_open(&push)) != 0 ||
	    (rv = nng_dial(push, "inproc://bench-pp", NULL, 0)) != 0) {
		kb_die("push/pull setup", rv);
	}
	t0 = kn_now_ns();
	for (int i = 0; i < nsenders; i++) {
		sd[i] = (sender) {.push = push, .n = TELL_N / nsenders};
		pthread_create(&t[i], NULL, push_main, &sd[i]);
	}
	for (int i = 0; i < total; i++) {
		nng_msg *m;
		if (nng_recvmsg(pull, &m, 0) != 0) {
			kb_die("pull", 0);
		}
		nng_msg_free(m);
	}
	double secs = (kn_now_ns() - t0) / 1e9;
	for (int i = 0; i < nsenders; i++) {
		pthread_join(t[i], NULL);
	}
	nng_close(push);
	nng_close(pull);
	return (total / secs);
}

/* ---- footprint ------------------------------------------------------- */

int
main(void)
{
	static kn_actor *many[SPAWN_N];
	kn_kernel       *k;
	kn_actor        *echo = NULL;
	sink             s    = {0};
	int              rv;

	kn_log_configure(MK_LOG_WARN, 0, 2);
	if ((rv = kn_kernel_open(&k, 0)) != 0 ||
	    (rv = kn_spawn(k, "echo", &b_ops, &s, &echo)) != 0) {
		kb_die("kernel", rv);
	}
	lat ask = bench_ask(echo);
	lat rr  = bench_reqrep();
	lat cv  = bench_condvar();
	kn_actor_destroy(&echo);

	double r_tell1[REPS], r_pp1[REPS], r_tell16[REPS], r_pp16[REPS];
	for (int i = 0; i < REPS; i++) {
		r_pp1[i]    = bench_pushpull(1);
		r_tell1[i]  = bench_tell(k, 1);
		r_pp16[i]   = bench_pushpull(16);
		r_tell16[i] = bench_tell(k, 16);
	}
	double tell1  = median(r_tell1);
	double pp1    = median(r_pp1);
	double tell16 = median(r_tell16);
	double pp16   = median(r_pp16);

	int     fd0  = count_fds();
	long    rss0 = rss_kib();
	int64_t t0   = kn_now_ns();
	for (int i = 0; i < SPAWN_N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "idle-%d", i);
		if ((rv = kn_spawn(k, name, &b_ops, &s, &many[i])) != 0) {
			kb_die("spawn", rv);
		}
	}
	double spawn_s = SPAWN_N / ((kn_now_ns() - t0) / 1e9);
	double fds     = (double)(count_fds() - fd0) / SPAWN_N;
	double rss     = (double)(rss_kib() - rss0) / SPAWN_N;
	for (int i = 0; i < SPAWN_N; i++) {
		kn_actor_destroy(&many[i]);
	}
	kn_kernel_close(&k);

	printf("\nmcpkeep kernel benchmark (one run; ratios are the figures to compare)\n\n");
	printf("%-34s %12s %12s %10s\n", "round trip", "p50 us", "p99 us",
	       "p50 ratio");
	printf("%-34s %12.1f %12.1f %10s\n", "condvar hand-off (floor)",
	       cv.p50, cv.p99, "");
	printf("%-34s %12.1f %12.1f %10s\n", "nng req0/rep0 (baseline)",
	       rr.p50, rr.p99, "1.00");
	printf("%-34s %12.1f %12.1f %10.2f  goal <= 1.00\n",
	       "kernel ask (mcpkeep)", ask.p50, ask.p99, ask.p50 / rr.p50);
	printf("\n%-34s %12s %10s\n", "one-way throughput, 64 B (median)",
	       "msg/s", "ratio");
	printf("%-34s %12.0f %10s\n", "nng push0->pull0, 1 sender", pp1,
	       "1.00");
	printf("%-34s %12.0f %10.2f\n", "kernel tell, 1 sender", tell1,
	       tell1 / pp1);
	printf("%-34s %12.0f %10s\n", "nng push0->pull0, 16 senders", pp16,
	       "1.00");
	printf("%-34s %12.0f %10.2f  goal >= 1.00\n",
	       "kernel tell, 16 senders", tell16, tell16 / pp16);
	printf("\n%-34s %12s\n", "footprint", "");
	printf("%-34s %12.0f\n", "actors spawned per second", spawn_s);
	printf("%-34s %12.2f  goal <= 1\n", "file descriptors per idle actor",
	       fds);
	printf("%-34s %12.1f\n", "RSS KiB per idle actor", rss);
	return (0);
}
