/*
 * kernel_test.c - the actor kernel: lifecycle, ask/tell, ordering,
 * deadlines, shutdown, timers, handler errors, async asks, fd watches.
 *
 * No sleeps: the test thread waits on a condition its actors signal, or on
 * an ask's reply (FIFO per sender makes a ping a barrier).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "actors/kernel/clock.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "testutil.h"

#define ASK_MS 10000

/* What test actors share with the test thread (test code: a lock). */
typedef struct ctx {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             count;        /* events the test waits for */
	int             bad_order;    /* per-sender order violations */
	uint32_t        last[16];     /* last seq per sender */
	uint64_t        deferred[64]; /* corrs held back */
	int             ndeferred;
	int64_t         due[64];      /* timer deadlines (ns) */
	int64_t         fired_at[64]; /* when each timer fired */
	int             fire_order[64];
	int             nfired;
	int             async_status[8];
	int             nasync;
	int             waits;     /* custom wait hook calls */
	char            piped[16]; /* bytes read from a watched pipe */
	int             pipe_fd;   /* watched by 'w' */
	kn_actor       *peer;      /* target of async asks */
	kn_kernel      *k;
} ctx;

static void
ctx_init(ctx *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mtx, NULL);
	pthread_cond_init(&c->cv, NULL);
}

static void
ctx_bump(ctx *c)
{
	pthread_mutex_lock(&c->mtx);
	c->count++;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mtx);
}

static void
ctx_wait(ctx *c, int n)
{
	pthread_mutex_lock(&c->mtx);
	while (c->count < n) {
		pthread_cond_wait(&c->cv, &c->mtx);
	}
	pthread_mutex_unlock(&c->mtx);
}

static int
t_init(kn_actor *self, void *arg, void **statep)
{
	*statep = arg;
	return (0);
}

/* Timer args carry the ctx and the index. */
typedef struct targ {
	ctx *c;
	int  idx;
} targ;
static targ targs[64];

static void
on_timer(kn_actor *self, void *arg)
{
	targ *t = arg;

	pthread_mutex_lock(&t->c->mtx);
	t->c->fired_at[t->idx]           = kn_now_ns();
	t->c->fire_order[t->c->nfired++] = t->idx;
	pthread_mutex_unlock(&t->c->mtx);
	ctx_bump(t->c);
}

static void
on_async(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	ctx *c = arg;

	pthread_mutex_lock(&c->mtx);
	c->async_status[c->nasync++] = status;
	pthread_mutex_unlock(&c->mtx);
	ctx_bump(c);
}

static void
on_pipe(kn_actor *self, void *arg, short revents)
{
	ctx    *c = arg;
	char    b[16];
	ssize_t n = read(c->pipe_fd, b, sizeof(b) - 1);

	if (n > 0) {
		pthread_mutex_lock(&c->mtx);
		memcpy(c->piped, b, (size_t)n);
		pthread_mutex_unlock(&c->mtx);
		ctx_bump(c);
	}
}

static int
t_handle(kn_actor *self, void *state, kn_msg *msg)
{
	ctx           *c = state;
	const uint8_t *p = msg->env.payload;

	if (msg->env.type == MSG_PING) {
		return (kn_reply(self, msg, 0, p, msg->env.payload_len));
	}
	CHECK(msg->env.type == MSG_USER && msg->env.payload_len >= 1);
	switch (p[0]) {
	case 'o': { /* ordering: sender index, seq */
		uint32_t seq;
		memcpy(&seq, p + 2, 4);
		if (seq != c->last[p[1]] + 1) {
			c->bad_order++;
		}
		c->last[p[1]] = seq;
		ctx_bump(c);
		return (0);
	}
	case 'e': /* a handler failure */
		return (MK_EPROTO);
	case 'd': /* hold the ask back */
		pthread_mutex_lock(&c->mtx);
		c->deferred[c->ndeferred++] = kn_defer(msg);
		pthread_mutex_unlock(&c->mtx);
		ctx_bump(c);
		return (0);
	case 'r': /* answer everything held back */
		for (int i = 0; i < c->ndeferred; i++) {
			kn_reply_corr(c->k, c->deferred[i], 0, "late", 4);
		}
		c->ndeferred = 0;
		return (0);
	case 't': /* arm p[1] timers with delays p[2..] ms */
		for (int i = 0; i < p[1]; i++) {
			targs[i]  = (targ) {c, i};
			c->due[i] = kn_now_ns() + p[2 + i] * KN_NS_PER_MS;
			CHECK(kn_timer_add(self, p[2 + i], on_timer,
			                   &targs[i]) != 0);
		}
		/* one cancelled timer must never fire */
		CHECK_EQ(kn_timer_cancel(
		                 self,
		                 kn_timer_add(self, 1, on_timer, &targs[63])),
		         0);
		return (0);
	case 'a': /* async ask to the peer with timeout p[1] ms */
		return (kn_ask_async(self, c->peer, p[2] ? MSG_USER : MSG_PING,
		                     p[2] ? "d" : "hi", p[2] ? 1 : 2,
		                     p[1] * 10, on_async, c));
	case 'w': /* watch pipe_fd */
		return (kn_watch_fd(self, c->pipe_fd, POLLIN, on_pipe, c));
	default:
		return (MK_EINVAL);
	}
}

static int
t_wait(kn_actor *self, void *state, struct pollfd *fds, unsigned nfds,
       int timeout)
{
	ctx *c = state;

	pthread_mutex_lock(&c->mtx);
	c->waits++;
	pthread_mutex_unlock(&c->mtx);
	return (poll(fds, nfds, timeout));
}

static const kn_actor_ops t_ops = {
        .init   = t_init,
        .handle = t_handle,
};
static const kn_actor_ops t_ops_wait = {
        .init   = t_init,
        .handle = t_handle,
        .wait   = t_wait,
};

static int
bad_init(kn_actor *self, void *arg, void **statep)
{
	return (MK_EPROTO);
}
static const kn_actor_ops bad_ops = {.init = bad_init, .handle = t_handle};

static kn_kernel *
kopen(void)
{
	kn_kernel *k;

	CHECK_EQ(kn_kernel_open(&k, 64 * 1024), 0);
	return (k);
}

static void
ping(kn_actor *a)
{
	kn_answer r;

	CHECK_EQ(kn_ask(a, MSG_PING, "x", 1, ASK_MS, &r), 0);
	CHECK(r.len == 1 && memcmp(r.data, "x", 1) == 0);
	free(r.data);
}

static void
start_stop_1000(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a[1000];
	ctx        c;
	mk_stats   st;
	char       name[32];

	ctx_init(&c);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "actor-%d", i);
		CHECK_EQ(kn_spawn(k, name, &t_ops, &c, &a[i]), 0);
	}
	kn_kernel_stats(k, &st);
	CHECK_EQ(st.actors, 1000);
	for (int i = 0; i < 1000; i += 97) {
		ping(a[i]);
	}
	for (int i = 0; i < 1000; i++) {
		kn_actor_destroy(&a[i]);
		CHECK(a[i] == NULL);
		kn_actor_destroy(&a[i]); /* twice is safe */
	}
	kn_kernel_stats(k, &st);
	CHECK_EQ(st.actors, 0);
	kn_kernel_close(&k);
	CHECK(k == NULL);
	kn_kernel_close(&k);
}

static void
registry_and_spawn_errors(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a, *b, *found;
	ctx        c;

	ctx_init(&c);
	CHECK_EQ(kn_spawn(k, "one", &t_ops, &c, &a), 0);
	CHECK_EQ(kn_spawn(k, "one", &t_ops, &c, &b), MK_EEXIST);
	CHECK(b == NULL);
	CHECK_EQ(kn_spawn(k, "", &t_ops, &c, &b), MK_EINVAL);
	CHECK_EQ(kn_spawn(k, "has space", &t_ops, &c, &b), MK_EINVAL);
	CHECK_EQ(kn_spawn(k, "bad", &bad_ops, &c, &b), MK_EPROTO);
	CHECK_EQ(kn_lookup(k, "bad", &found), MK_ENOENT);
	CHECK_EQ(kn_lookup(k, "one", &found), 0);
	CHECK(found == a);
	ping(found);
	kn_actor_release(&found);
	CHECK_EQ(kn_stop(a), 0);
	CHECK_EQ(kn_lookup(k, "one", &found), MK_ENOENT);
	/* stopped: sends fail fast */
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "o", 1), MK_ECLOSED);
	kn_answer r;
	CHECK_EQ(kn_ask(a, MSG_PING, NULL, 0, ASK_MS, &r), MK_ECLOSED);
	kn_actor_destroy(&a);
	/* the name is free again */
	CHECK_EQ(kn_spawn(k, "one", &t_ops, &c, &a), 0);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

/* Whether a thread of this process is named name (/proc's comm). */
static bool
thread_named(const char *name)
{
	DIR           *d = opendir("/proc/self/task");
	struct dirent *t;
	char           path[300], comm[32];
	bool           found = false;

	CHECK(d != NULL);
	while (!found && (t = readdir(d)) != NULL) {
		FILE *f;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
		         t->d_name);
		if (t->d_name[0] != '.' && (f = fopen(path, "r")) != NULL) {
			found = fgets(comm, sizeof(comm), f) != NULL &&
			        strcmp(comm, name) == 0;
			fclose(f);
		}
	}
	closedir(d);
	return (found);
}

/* An actor's thread bears its name (top -H, perf and gdb show it), cut to
 * the 15 bytes a thread name holds. */
static void
threads_named(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;

	ctx_init(&c);
	CHECK(!thread_named("mcp:a-long-name\n"));
	CHECK_EQ(kn_spawn(k, "mcp:a-long-name-for-a-thread", &t_ops, &c, &a),
	         0);
	CHECK(thread_named("mcp:a-long-name\n"));
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

/* A second registry name: kn_lookup finds the actor by it; it is unique
 * among names and aliases; it goes with the actor. */
static void
registry_alias(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a, *b, *found;
	ctx        c;

	ctx_init(&c);
	CHECK_EQ(kn_spawn(k, "one", &t_ops, &c, &a), 0);
	CHECK_EQ(kn_spawn(k, "two", &t_ops, &c, &b), 0);
	CHECK_EQ(kn_alias(a, ""), MK_EINVAL);
	CHECK_EQ(kn_alias(a, "two"), MK_EEXIST); /* another's name */
	CHECK_EQ(kn_alias(a, "uno"), 0);
	CHECK_EQ(kn_alias(a, "eins"), MK_EEXIST); /* one at most */
	CHECK_EQ(kn_alias(b, "uno"), MK_EEXIST);  /* another's alias */
	CHECK_EQ(kn_lookup(k, "uno", &found), 0);
	CHECK(found == a);
	ping(found);
	kn_actor_release(&found);
	CHECK_EQ(kn_spawn(k, "uno", &t_ops, &c, &found), MK_EEXIST);
	kn_actor_destroy(&a);
	CHECK_EQ(kn_lookup(k, "uno", &found), MK_ENOENT);
	CHECK_EQ(kn_alias(b, "uno"), 0); /* free again */
	kn_actor_destroy(&b);
	kn_kernel_close(&k);
}

typedef struct sender_arg {
	kn_actor *to;
	uint8_t   idx;
	int       n;
} sender_arg;

static void *
sender_main(void *arg)
{
	sender_arg *s = arg;

	for (uint32_t seq = 1; seq <= (uint32_t)s->n; seq++) {
		uint8_t b[6] = {'o', s->idx};
		memcpy(b + 2, &seq, 4);
		CHECK_EQ(kn_tell(s->to, NULL, MSG_USER, b, sizeof(b)), 0);
	}
	return (NULL);
}

static void
per_sender_order(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;
	pthread_t  t[4];
	sender_arg s[4];
	const int  n = 5000;

	ctx_init(&c);
	CHECK_EQ(kn_spawn(k, "order", &t_ops, &c, &a), 0);
	for (int i = 0; i < 4; i++) {
		s[i] = (sender_arg) {a, (uint8_t)i, n};
		pthread_create(&t[i], NULL, sender_main, &s[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
	}
	ctx_wait(&c, 4 * n);
	pthread_mutex_lock(&c.mtx);
	CHECK_EQ(c.bad_order, 0);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(c.last[i], n);
	}
	pthread_mutex_unlock(&c.mtx);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

static void
deadline_and_late_reply(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;
	kn_answer  r;
	mk_stats   st;
	int64_t    t0;

	ctx_init(&c);
	c.k = k;
	CHECK_EQ(kn_spawn(k, "late", &t_ops, &c, &a), 0);
	CHECK_EQ(kn_ask(a, MSG_PING, NULL, 0, 0, &r), MK_EINVAL);
	t0 = kn_now_ns();
	CHECK_EQ(kn_ask(a, MSG_USER, "d", 1, 100, &r), MK_ETIMEDOUT);
	CHECK(kn_now_ns() - t0 >= 100 * KN_NS_PER_MS);
	CHECK(r.data == NULL);
	ctx_wait(&c, 1);
	/* answer it now: the asker is gone, the reply is dropped */
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "r", 1), 0);
	ping(a); /* FIFO: 'r' was handled before this ping */
	kn_kernel_stats(k, &st);
	CHECK_EQ(st.late_replies, 1);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

typedef struct asker_arg {
	kn_actor *to;
	int       rv;
} asker_arg;

static void *
asker_main(void *arg)
{
	asker_arg *s = arg;
	kn_answer  r;

	s->rv = kn_ask(s->to, MSG_USER, "d", 1, 60000, &r);
	free(r.data);
	return (NULL);
}

static void
shutdown_answers_asks(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;
	pthread_t  t[8];
	asker_arg  s[8];
	int64_t    t0;

	ctx_init(&c);
	CHECK_EQ(kn_spawn(k, "holder", &t_ops, &c, &a), 0);
	for (int i = 0; i < 8; i++) {
		s[i] = (asker_arg) {a, -1};
		pthread_create(&t[i], NULL, asker_main, &s[i]);
	}
	ctx_wait(&c, 8); /* all eight held by the actor */
	t0 = kn_now_ns();
	kn_actor_release(&a); /* the kernel still holds it */
	kn_kernel_close(&k);
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(s[i].rv, MK_ECLOSED);
	}
	/* answered at close, not at their 60 s deadline */
	CHECK(kn_now_ns() - t0 < 30 * KN_NS_PER_S);
}

static void
timers_in_order(void)
{
	static const uint8_t delays[] = {40, 5, 25, 5, 1, 30, 15, 10, 20, 2};
	kn_kernel           *k        = kopen();
	kn_actor            *a;
	ctx                  c;
	uint8_t              cmd[2 + sizeof(delays)] = {'t', sizeof(delays)};

	ctx_init(&c);
	memcpy(cmd + 2, delays, sizeof(delays));
	CHECK_EQ(kn_spawn(k, "timers", &t_ops, &c, &a), 0);
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, cmd, sizeof(cmd)), 0);
	ctx_wait(&c, sizeof(delays));
	ping(a);
	pthread_mutex_lock(&c.mtx);
	CHECK_EQ(c.nfired, (int)sizeof(delays)); /* not the cancelled one */
	for (int i = 0; i < c.nfired; i++) {
		int     x    = c.fire_order[i];
		int64_t late = c.fired_at[x] - c.due[x];
		CHECK(late >= 0);                 /* never early */
		CHECK(late < 500 * KN_NS_PER_MS); /* sanitizers are slow */
		if (i > 0) {
			int w = c.fire_order[i - 1];
			CHECK(c.due[w] <= c.due[x]);
		}
	}
	pthread_mutex_unlock(&c.mtx);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

static pthread_mutex_t hook_mtx = PTHREAD_MUTEX_INITIALIZER;
static char            hook_line[1024];

static void
capture(void *arg, mk_log_level level, const char *line)
{
	pthread_mutex_lock(&hook_mtx);
	if (level == MK_LOG_ERROR) {
		snprintf(hook_line, sizeof(hook_line), "%s", line);
	}
	pthread_mutex_unlock(&hook_mtx);
}

static void
handler_errors_reported(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;
	kn_answer  r;
	mk_stats   st;

	ctx_init(&c);
	kn_log_set_hook(capture, NULL);
	CHECK_EQ(kn_spawn(k, "failing", &t_ops, &c, &a), 0);
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "e", 1), 0);
	CHECK_EQ(kn_ask(a, MSG_USER, "e", 1, ASK_MS, &r), MK_EPROTO);
	CHECK_EQ(r.status, MK_EPROTO);
	CHECK_EQ(kn_actor_errors(a), 2);
	kn_kernel_stats(k, &st);
	CHECK_EQ(st.handler_errors, 2);
	pthread_mutex_lock(&hook_mtx);
	CHECK(strstr(hook_line,
	             "actor failing: handler for message user failed: protocol error") !=
	      NULL);
	pthread_mutex_unlock(&hook_mtx);
	kn_log_set_hook(NULL, NULL);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
}

static void
async_asks(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a, *b;
	ctx        ca, cb;
	mk_stats   st;

	ctx_init(&ca);
	ctx_init(&cb);
	cb.k = k;
	CHECK_EQ(kn_spawn(k, "b", &t_ops, &cb, &b), 0);
	ca.peer = b;
	CHECK_EQ(kn_spawn(k, "a", &t_ops, &ca, &a), 0);
	/* 1: answered */
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "a\144\0", 3), 0);
	ctx_wait(&ca, 1);
	/* 2: b holds it back; a's 50 ms deadline fires first */
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "a\5\1", 3), 0);
	ctx_wait(&ca, 2);
	/* b answers late: a drops it and counts it */
	ctx_wait(&cb, 1);
	CHECK_EQ(kn_tell(b, NULL, MSG_USER, "r", 1), 0);
	ping(b);
	ping(a);
	/* 3: outstanding when a stops -> MK_ECLOSED */
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "a\377\1", 3), 0);
	ctx_wait(&cb, 2);
	kn_actor_destroy(&a);
	pthread_mutex_lock(&ca.mtx);
	CHECK_EQ(ca.nasync, 3);
	CHECK_EQ(ca.async_status[0], 0);
	CHECK_EQ(ca.async_status[1], MK_ETIMEDOUT);
	CHECK_EQ(ca.async_status[2], MK_ECLOSED);
	pthread_mutex_unlock(&ca.mtx);
	kn_kernel_stats(k, &st);
	CHECK(st.late_replies >= 1);
	kn_actor_destroy(&b);
	kn_kernel_close(&k);
}

static void
watch_and_custom_wait(void)
{
	kn_kernel *k = kopen();
	kn_actor  *a;
	ctx        c;
	int        fds[2];

	ctx_init(&c);
	CHECK_EQ(pipe(fds), 0);
	c.pipe_fd = fds[0];
	CHECK_EQ(kn_spawn(k, "watcher", &t_ops_wait, &c, &a), 0);
	CHECK_EQ(kn_tell(a, NULL, MSG_USER, "w", 1), 0);
	ping(a); /* the watch is in place */
	CHECK_EQ(write(fds[1], "hello", 5), 5);
	ctx_wait(&c, 1);
	pthread_mutex_lock(&c.mtx);
	CHECK(strcmp(c.piped, "hello") == 0);
	CHECK(c.waits > 0);
	pthread_mutex_unlock(&c.mtx);
	kn_actor_destroy(&a);
	kn_kernel_close(&k);
	close(fds[0]);
	close(fds[1]);
}

int
main(void)
{
	kn_log_configure(MK_LOG_WARN, 0, 2);
	RUN(start_stop_1000);
	RUN(registry_and_spawn_errors);
	RUN(threads_named);
	RUN(registry_alias);
	RUN(per_sender_order);
	RUN(deadline_and_late_reply);
	RUN(shutdown_answers_asks);
	RUN(timers_in_order);
	RUN(handler_errors_reported);
	RUN(async_asks);
	RUN(watch_and_custom_wait);
	return (0);
}
