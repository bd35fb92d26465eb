/*
 * loop.c - curl multi + fds + tickers in one wait (see loop.h).
 */
#include "transport/loop.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mcpkeep.h"

typedef struct watch {
	int      fd;     /* watched fd */
	short    events; /* poll events */
	tp_fd_fn fn;     /* callback */
	void    *arg;    /* callback argument */
} watch;

struct tp_loop {
	CURLM              *multi;     /* every transfer of this thread */
	watch              *watches;   /* watched fds */
	unsigned            nwatch;    /* entries in watches */
	unsigned            capwatch;  /* allocated watches */
	struct curl_waitfd *wfds;      /* scratch for curl_multi_poll */
	unsigned            capwfds;   /* allocated wfds */
	tp_ticker          *tickers;   /* linked tickers */
	tp_ticker          *tick_next; /* run_tickers' next one */
	tp_defer           *dhead;     /* deferred work, FIFO */
	tp_defer           *dtail;     /* last deferred */
	tp_owned           *owned;     /* closing connections */
	unsigned            running;   /* transfers in the multi handle */
	unsigned            lasting;   /* of them, without a deadline */
	long                idle_max;  /* tp_loop_set_maxconnects; 0: curl's */
	bool                resize;    /* cache_size is to be set again */
	int                 rest_ms;   /* tp_loop_set_rest; 0: never */
	int64_t             idle_at;   /* when running fell to 0, or -1 */
	/* the wake-up, any thread's: curl's while the multi handle exists,
	 * else (resting) woken and the condition */
	pthread_mutex_t wmtx;  /* guards multi's existence, woken */
	pthread_cond_t  wcv;   /* woken set, while resting */
	bool            woken; /* a wake-up since the last wait */
};

#define REST_PRESSED_MS 500 /* the rest when fds run short */
#define FDS_PER_AWAKE   3   /* a loop awake: the wake-up pair, a connection */

static atomic_uint awake; /* loops with a multi handle, process-wide */

/* Whether the loops awake hold half the process's fd limit or more:
 * then an idle one rests at once, not after its rest time - 10,000
 * clients do not all keep a connection while they boot. */
static bool
fds_pressed(void)
{
	static atomic_long limit; /* RLIMIT_NOFILE's soft limit, read once */
	long               lim = atomic_load(&limit);

	if (lim == 0) {
		struct rlimit rl;
		lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		                rl.rlim_cur != RLIM_INFINITY &&
		                rl.rlim_cur < LONG_MAX
		        ? (long)rl.rlim_cur
		        : LONG_MAX;
		atomic_store(&limit, lim);
	}
	return ((long)atomic_load(&awake) * FDS_PER_AWAKE >= lim / 2);
}

/* libcurl's cache: the idle connections kept, and the lasting ones.
 * Inside one of curl's callbacks (a stream's headers) the multi handle
 * refuses options: set after curl_multi_perform instead. */
static void
cache_size(tp_loop *l)
{
	l->resize = l->idle_max > 0 && l->multi != NULL &&
	        curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS,
	                          l->idle_max + (long)l->lasting) ==
	                CURLM_RECURSIVE_API_CALL;
}

/* x left the multi handle. */
static void
out_of_multi(tp_loop *l, tp_xfer *x)
{
	x->added = 0;
	if (--l->running == 0) {
		l->idle_at = tp_now_ns();
	}
	if (x->counted) {
		x->counted = false;
		l->lasting--;
		cache_size(l);
	}
}

void
tp_loop_own(tp_loop *l, tp_owned *o)
{
	o->prev = NULL;
	o->nxt  = l->owned;
	if (l->owned != NULL) {
		l->owned->prev = o;
	}
	l->owned = o;
}

void
tp_loop_disown(tp_loop *l, tp_owned *o)
{
	if (o->prev != NULL) {
		o->prev->nxt = o->nxt;
	} else if (l->owned == o) {
		l->owned = o->nxt;
	}
	if (o->nxt != NULL) {
		o->nxt->prev = o->prev;
	}
	o->prev = o->nxt = NULL;
}

void
tp_loop_defer(tp_loop *l, tp_defer *d)
{
	if (d->queued) {
		return;
	}
	d->queued = 1;
	d->next   = NULL;
	if (l->dtail != NULL) {
		l->dtail->next = d;
	} else {
		l->dhead = d;
	}
	l->dtail = d;
}

void
tp_loop_undefer(tp_loop *l, tp_defer *d)
{
	tp_defer **pp = &l->dhead, *prev = NULL;

	if (!d->queued) {
		return;
	}
	while (*pp != d) {
		prev = *pp;
		pp   = &(*pp)->next;
	}
	*pp = d->next;
	if (l->dtail == d) {
		l->dtail = prev;
	}
	d->queued = 0;
}

static void
run_deferred(tp_loop *l)
{
	tp_defer *d;

	while ((d = l->dhead) != NULL) {
		l->dhead = d->next;
		if (l->dhead == NULL) {
			l->dtail = NULL;
		}
		d->queued = 0;
		d->fn(d->arg);
	}
}

/* Makes l's multi handle (again, after a rest): 0, MK_ENOMEM, or MK_ESYS
 * out of file descriptors.  A wake-up that came while it rested is
 * passed on to it. */
static int
multi_up(tp_loop *l)
{
	CURLM *m;

	if ((m = curl_multi_init()) == NULL) {
		return (MK_ENOMEM);
	}
	/* curl makes its wake-up socket pair quietly: without file
	 * descriptors (EMFILE) the handle comes back and can never be
	 * woken.  A wake-up now proves the pair exists (the next wait just
	 * returns at once). */
	if (curl_multi_wakeup(m) != CURLM_OK) {
		curl_multi_cleanup(m);
		return (MK_ESYS);
	}
	/* a burst of calls to one server queues beyond this many
	 * connections instead of opening one socket each (the server's
	 * backlog and our file descriptors are finite); each transfer's
	 * deadline still runs while it waits */
	curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS,
	                  (long)TP_HOST_CONNS_MAX);
	pthread_mutex_lock(&l->wmtx);
	l->multi = m;
	l->woken = false; /* (the wake-up above stands for it) */
	pthread_mutex_unlock(&l->wmtx);
	atomic_fetch_add(&awake, 1);
	cache_size(l);
	return (0);
}

/* Gives the kernel back the pages of the calling thread's stack below
 * this frame (what a deeper call once touched: a dial, a TLS handshake):
 * a thread that rests holds only the stack it uses.  Pages touched again
 * come back zeroed.  (The main thread's stack, or one pthread cannot
 * describe, is left as it is.) */
static void
stack_trim(void)
{
	pthread_attr_t a;
	void          *lo;
	size_t         size;
	uintptr_t      page = (uintptr_t)sysconf(_SC_PAGESIZE), from, to;

	if (getpid() == (pid_t)gettid() ||
	    pthread_getattr_np(pthread_self(), &a) != 0) {
		return;
	}
	if (pthread_attr_getstack(&a, &lo, &size) == 0) {
		/* a page below this frame stays: madvise's own call */
		from = ((uintptr_t)lo + page - 1) & ~(page - 1);
		to   = ((uintptr_t)__builtin_frame_address(0) - page) &
		        ~(page - 1);
		if (to > from) {
			(void)madvise((void *)from, to - from, MADV_DONTNEED);
		}
	}
	pthread_attr_destroy(&a);
}

/* Frees l's multi handle, its wake-up pair and its idle connections:
 * nothing is in it. */
static void
multi_down(tp_loop *l)
{
	CURLM *m = l->multi;

	pthread_mutex_lock(&l->wmtx);
	l->multi = NULL;
	pthread_mutex_unlock(&l->wmtx);
	curl_multi_cleanup(m);
	atomic_fetch_sub(&awake, 1);
}

int
tp_loop_new(tp_loop **lp)
{
	tp_loop           *l;
	pthread_condattr_t ca;
	int                rv;

	*lp = NULL;
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		return (MK_ENOMEM);
	}
	pthread_mutex_init(&l->wmtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->wcv, &ca);
	pthread_condattr_destroy(&ca);
	l->idle_at = -1;
	if ((rv = multi_up(l)) != 0) {
		pthread_cond_destroy(&l->wcv);
		pthread_mutex_destroy(&l->wmtx);
		free(l);
		return (rv);
	}
	*lp = l;
	return (0);
}

void
tp_loop_free(tp_loop **lp)
{
	tp_loop *l;

	if (lp == NULL || (l = *lp) == NULL) {
		return;
	}
	*lp = NULL;
	while (l->owned != NULL) {
		tp_owned *o = l->owned;
		tp_loop_disown(l, o);
		o->kill(o->arg); /* removes its transfers and watches */
	}
	if (l->multi != NULL) {
		multi_down(l);
	}
	pthread_cond_destroy(&l->wcv);
	pthread_mutex_destroy(&l->wmtx);
	free(l->watches);
	free(l->wfds);
	free(l);
}

int
tp_loop_add(tp_loop *l, tp_xfer *x)
{
	int rv;

	if (l->multi == NULL && (rv = multi_up(l)) != 0) {
		return (rv);
	}
	if (curl_multi_add_handle(l->multi, x->easy) != CURLM_OK) {
		return (MK_ENOMEM);
	}
	l->idle_at = -1;
	x->added   = 1;
	x->loop    = l;
	x->counted = false;
	l->running++;
	return (0);
}

void
tp_loop_lasting(tp_loop *l, tp_xfer *x)
{
	if (x->added && !x->counted) {
		x->counted = true;
		l->lasting++;
		cache_size(l);
	}
}

void
tp_loop_remove(tp_loop *l, tp_xfer *x)
{
	if (x->added) {
		curl_multi_remove_handle(l->multi, x->easy);
		out_of_multi(l, x);
	}
}

bool
tp_loop_busy(const tp_loop *l)
{
	return (l->owned != NULL || l->running > 0 || l->nwatch > 0 ||
	        l->tickers != NULL);
}

int
tp_loop_watch(tp_loop *l, int fd, short events, tp_fd_fn fn, void *arg)
{
	for (unsigned i = 0; i < l->nwatch; i++) {
		if (l->watches[i].fd == fd) {
			return (MK_EEXIST);
		}
	}
	if (l->nwatch == l->capwatch) {
		unsigned ncap = l->capwatch ? 2 * l->capwatch : 8;
		watch   *nw   = realloc(l->watches, ncap * sizeof(*nw));
		if (nw == NULL) {
			return (MK_ENOMEM);
		}
		l->watches  = nw;
		l->capwatch = ncap;
	}
	l->watches[l->nwatch++] = (watch) {fd, events, fn, arg};
	return (0);
}

int
tp_loop_unwatch(tp_loop *l, int fd)
{
	for (unsigned i = 0; i < l->nwatch; i++) {
		if (l->watches[i].fd == fd) {
			l->watches[i] = l->watches[--l->nwatch];
			return (0);
		}
	}
	return (MK_ENOENT);
}

void
tp_loop_ticker_add(tp_loop *l, tp_ticker *t)
{
	t->prev = NULL;
	t->nxt  = l->tickers;
	if (l->tickers != NULL) {
		l->tickers->prev = t;
	}
	l->tickers = t;
}

void
tp_loop_ticker_del(tp_loop *l, tp_ticker *t)
{
	if (t->prev != NULL) {
		t->prev->nxt = t->nxt;
	} else if (l->tickers == t) {
		l->tickers = t->nxt;
	}
	if (t->nxt != NULL) {
		t->nxt->prev = t->prev;
	}
	if (l->tick_next == t) {
		l->tick_next = t->nxt;
	}
	t->prev = t->nxt = NULL;
}

/* Milliseconds until the earliest ticker deadline, or -1. */
static int
ticker_timeout(tp_loop *l, int64_t now)
{
	int64_t best = -1;

	for (tp_ticker *t = l->tickers; t != NULL; t = t->nxt) {
		int64_t d = t->next(t->arg);
		if (d >= 0 && (best < 0 || d < best)) {
			best = d;
		}
	}
	if (best < 0) {
		return (-1);
	}
	if (best <= now) {
		return (0);
	}
	best = (best - now + 999999) / 1000000;
	return (best > INT_MAX ? INT_MAX : (int)best);
}

static void
finish_transfers(tp_loop *l)
{
	CURLMsg *m;
	int      left;

	while ((m = curl_multi_info_read(l->multi, &left)) != NULL) {
		tp_xfer *x = NULL;
		CURLcode rc;

		if (m->msg != CURLMSG_DONE) {
			continue;
		}
		rc = m->data.result;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &x);
		curl_multi_remove_handle(l->multi, m->easy_handle);
		if (x != NULL) {
			out_of_multi(l, x);
			x->done(x, rc);
		}
	}
}

static void
run_tickers(tp_loop *l)
{
	int64_t now = tp_now_ns();

	/* expire() may unlink any ticker, its own or the next one (freeing
	 * a session frees its connection's): ticker_del moves tick_next on */
	for (tp_ticker *t = l->tickers; t != NULL; t = l->tick_next) {
		int64_t d    = t->next(t->arg);
		l->tick_next = t->nxt;
		if (d >= 0 && d <= now) {
			t->expire(t->arg, now);
		}
	}
	l->tick_next = NULL;
}

/* Resting (no multi handle): sleeps until a wake-up or timeout_ms (-1:
 * none). */
static void
rest_wait(tp_loop *l, int timeout_ms)
{
	int64_t         at = tp_now_ns() + (int64_t)timeout_ms * 1000000;
	struct timespec ts = {.tv_sec  = at / 1000000000,
	                      .tv_nsec = at % 1000000000};

	pthread_mutex_lock(&l->wmtx);
	while (!l->woken && timeout_ms != 0) {
		if ((timeout_ms < 0
		             ? pthread_cond_wait(&l->wcv, &l->wmtx)
		             : pthread_cond_timedwait(&l->wcv, &l->wmtx,
		                                      &ts)) == ETIMEDOUT) {
			break;
		}
	}
	l->woken = false;
	pthread_mutex_unlock(&l->wmtx);
}

/* Whether l may give its multi handle back now, else the ms until it
 * may (-1: not while this lasts). */
static int
rest_in(tp_loop *l, unsigned nfds, int64_t now)
{
	if (l->rest_ms == 0 || l->multi == NULL || l->running > 0 ||
	    l->nwatch > 0 || nfds > 0 || l->owned != NULL ||
	    l->dhead != NULL || l->idle_at < 0) {
		return (-1);
	}
	int     ms   = fds_pressed() && l->rest_ms > REST_PRESSED_MS
	              ? REST_PRESSED_MS
	              : l->rest_ms;
	int64_t left = l->idle_at + (int64_t)ms * 1000000 - now;
	return (left <= 0 ? 0 : (int)((left + 999999) / 1000000));
}

int
tp_loop_wait(tp_loop *l, struct pollfd *fds, unsigned nfds, int timeout_ms)
{
	unsigned n = l->nwatch + nfds;
	int      tt, running, ready = 0, numfds, rest;

	if ((rest = rest_in(l, nfds, tp_now_ns())) == 0) {
		multi_down(l); /* idle long enough: no fds while it rests */
		for (tp_ticker *t = l->tickers; t != NULL; t = t->nxt) {
			if (t->rest != NULL) {
				t->rest(t->arg); /* (no memory either) */
			}
		}
		free(l->wfds);
		l->wfds    = NULL;
		l->capwfds = 0;
		stack_trim();
	} else if (rest > 0 && (timeout_ms < 0 || rest < timeout_ms)) {
		timeout_ms = rest; /* (to rest then) */
	}
	if (l->multi == NULL && n > 0 && multi_up(l) != 0) {
		errno = EMFILE; /* (fds to watch: only curl's poll can) */
		return (-1);
	}
	if (l->multi == NULL) {
		tt = l->dhead != NULL ? 0 : ticker_timeout(l, tp_now_ns());
		rest_wait(l,
		          tt >= 0 && (timeout_ms < 0 || tt < timeout_ms)
		                  ? tt
		                  : timeout_ms);
		run_deferred(l);
		run_tickers(l);
		return (0);
	}

	if (n > l->capwfds) {
		struct curl_waitfd *nw = realloc(l->wfds, n * sizeof(*nw));
		if (nw == NULL) {
			errno = ENOMEM;
			return (-1);
		}
		l->wfds    = nw;
		l->capwfds = n;
	}
	for (unsigned i = 0; i < nfds; i++) {
		l->wfds[i] =
		        (struct curl_waitfd) {fds[i].fd, fds[i].events, 0};
	}
	for (unsigned i = 0; i < l->nwatch; i++) {
		l->wfds[nfds + i] = (struct curl_waitfd) {
		        l->watches[i].fd, l->watches[i].events, 0};
	}
	tt = ticker_timeout(l, tp_now_ns());
	if (tt >= 0 && (timeout_ms < 0 || tt < timeout_ms)) {
		timeout_ms = tt;
	}
	if (l->dhead != NULL) {
		timeout_ms = 0; /* deferred work is waiting */
	}
	if (timeout_ms < 0) {
		timeout_ms = INT_MAX; /* curl wants a bound */
	}
	if (curl_multi_poll(l->multi, l->wfds, n, timeout_ms, &numfds) !=
	    CURLM_OK) {
		errno = EINVAL;
		return (-1);
	}
	for (unsigned i = 0; i < nfds; i++) {
		fds[i].revents = l->wfds[i].revents;
		ready += fds[i].revents != 0;
	}
	curl_multi_perform(l->multi, &running);
	if (l->resize) {
		cache_size(l);
	}
	finish_transfers(l);
	run_deferred(l);
	/* Callbacks may change the watch list: find each by fd again. */
	for (unsigned i = nfds; i < n; i++) {
		if (l->wfds[i].revents == 0) {
			continue;
		}
		for (unsigned j = 0; j < l->nwatch; j++) {
			if (l->watches[j].fd == l->wfds[i].fd) {
				watch w = l->watches[j];
				w.fn(w.arg, l->wfds[i].revents);
				break;
			}
		}
	}
	run_tickers(l);
	return (ready);
}

void
tp_loop_set_maxconnects(tp_loop *l, long n)
{
	l->idle_max = n;
	cache_size(l);
}

void
tp_loop_wakeup(tp_loop *l)
{
	pthread_mutex_lock(&l->wmtx);
	if (l->multi != NULL) {
		curl_multi_wakeup(l->multi);
	} else {
		l->woken = true;
		pthread_cond_signal(&l->wcv);
	}
	pthread_mutex_unlock(&l->wmtx);
}

bool
tp_loop_resting(const tp_loop *l)
{
	return (l->multi == NULL);
}

void
tp_loop_set_rest(tp_loop *l, int ms)
{
	l->rest_ms = ms;
}

int
tp_loop_run(tp_loop *l, const int *stop, int timeout_ms)
{
	int64_t deadline = tp_now_ns() + (int64_t)timeout_ms * 1000000;

	while (!*stop) {
		int64_t left = deadline - tp_now_ns();
		if (left <= 0) {
			return (MK_ETIMEDOUT);
		}
		if (tp_loop_wait(l, NULL, 0,
		                 (int)((left + 999999) / 1000000)) < 0 &&
		    errno != EINTR) {
			return (MK_ESYS);
		}
	}
	return (0);
}
