/*
 * wait.c - how a client actor waits, and what it costs in file
 * descriptors.
 *
 * DESIGN: a client's network I/O runs in its tp_loop (curl's multi
 * handle, which holds a wake-up socket pair: 2 file descriptors, plus one
 * per open connection).  The loop exists only while the client has
 * network work: it is made at the first dial or per-call call, and freed
 * once the client is disabled or waits for a reauthorization and nothing
 * is left in it (a graceful close still running keeps it a little
 * longer).  So a disabled or pending client holds no file descriptor.
 * And while it is in use, a loop with nothing in it for LOOP_REST_MS
 * rests (tp_loop_set_rest): curl's multi handle, its wake-up pair and
 * the idle connections go, and come back with the next request (a new
 * connection) - an idle client without a stream open holds none either.
 * (Longer than a busy check interval, so that a client checked every
 * 20 s keeps its connection; far shorter than the default 10 minutes,
 * and beyond libcurl's own 118 s no idle connection is reused anyway.)
 *
 * The kernel wakes a sleeping actor through cl_wake: with a loop, curl's
 * wake-up (curl_multi_wakeup, any thread); without one, a condition
 * variable the actor sleeps on.  waker.mtx orders the two: the actor
 * publishes and withdraws its loop under it, and a sender wakes under
 * it, so a sender never touches a loop being freed and never signals a
 * condition nobody will look at.
 *
 * Out of file descriptors (EMFILE), curl_multi_init still succeeds but
 * without its wake-up pair; tp_loop_new notices and fails with MK_ESYS,
 * and the client refuses the work with a message naming the limit
 * (MCP_E_LIMIT) rather than sleeping through every later message.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"

#define LOOP_RETRY_MS 1000  /* a busy loop is looked at again after */
#define LOOP_REST_MS  30000 /* idle this long, the loop rests: no fds */

void
cl_waker_init(cl_waker *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	w->woken = false;
	w->loop  = NULL;
}

void
cl_waker_fini(cl_waker *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mtx);
}

/* Any thread (the kernel, for a sender). */
void
cl_wake(void *arg)
{
	cl_waker *w = arg;

	pthread_mutex_lock(&w->mtx);
	if (w->loop != NULL) {
		tp_loop_wakeup(w->loop);
	} else {
		w->woken = true;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mtx);
}

/* Without a loop: sleeps until cl_wake or the timeout (ms, -1: none). */
static int
sleep_until_woken(cl_waker *w, int timeout_ms)
{
	int64_t         at = kn_deadline_ns(timeout_ms > 0 ? timeout_ms : 0);
	struct timespec ts = {.tv_sec  = at / KN_NS_PER_S,
	                      .tv_nsec = at % KN_NS_PER_S};

	pthread_mutex_lock(&w->mtx);
	while (!w->woken && timeout_ms != 0) {
		int rv = timeout_ms < 0
		        ? pthread_cond_wait(&w->cv, &w->mtx)
		        : pthread_cond_timedwait(&w->cv, &w->mtx, &ts);
		if (rv == ETIMEDOUT) {
			break;
		}
	}
	w->woken = false;
	pthread_mutex_unlock(&w->mtx);
	return (0);
}

int
cl_wait(kn_actor *self, void *state, struct pollfd *fds, unsigned nfds,
        int timeout_ms)
{
	client *cl = state;

	if (cl->loop != NULL) {
		return (tp_loop_wait(cl->loop, fds, nfds, timeout_ms));
	}
	/* a client watches no fds of its own through the kernel: its only
	 * fds are the loop's */
	assert(nfds == 0);
	return (sleep_until_woken(&cl->wk, timeout_ms));
}

int
cl_loop(client *cl, mcp_error *err)
{
	tp_loop *l;
	int      rv;

	if (cl->loop != NULL) {
		return (0);
	}
	if ((rv = tp_loop_new(&l)) != 0) {
		if (rv == MK_ESYS) {
			mcp_error_fd_limit(err, EMFILE);
		} else {
			mcp_error_set(err, MCP_E_LOCAL, "out of memory");
		}
		return (rv);
	}
	tp_loop_set_maxconnects(l, (long)cl->maxconn);
	tp_loop_set_rest(l, LOOP_REST_MS);
	pthread_mutex_lock(&cl->wk.mtx);
	cl->wk.loop = l;
	pthread_mutex_unlock(&cl->wk.mtx);
	cl->loop = l;
	return (0);
}

static void
loop_tick(kn_actor *self, void *arg)
{
	client *cl = arg;

	cl->loop_timer = 0;
	cl_loop_release(cl);
}

void
cl_loop_free(client *cl)
{
	if (cl->loop_timer != 0) {
		kn_timer_cancel(cl->self, cl->loop_timer);
		cl->loop_timer = 0;
	}
	pthread_mutex_lock(&cl->wk.mtx);
	cl->wk.loop = NULL;
	pthread_mutex_unlock(&cl->wk.mtx);
	tp_loop_free(&cl->loop); /* kills what is still closing */
}

void
cl_loop_release(client *cl)
{
	if (cl->loop == NULL || cl->loop_timer != 0 ||
	    (cl->state != CS_DISABLED && cl->state != CS_REAUTH)) {
		return; /* none, already looked after, or in use again */
	}
	if (tp_loop_busy(cl->loop)) {
		/* a graceful close (DELETE, a child's exit) or a call
		 * still runs: free the loop after it */
		cl->loop_timer =
		        kn_timer_add(cl->self, LOOP_RETRY_MS, loop_tick, cl);
		return;
	}
	KN_DEBUG("client", "%s: idle: its loop and file descriptors freed",
	         cl->cfg->name);
	cl_loop_free(cl);
}
