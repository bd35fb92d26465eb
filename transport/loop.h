/*
 * loop.h - the I/O loop transports run in: one libcurl multi handle,
 * watched file descriptors (stdio pipes, pidfds) and tickers (request
 * deadlines), all driven by one thread through tp_loop_wait().
 *
 * DESIGN: a loop belongs to one thread (a client actor, or a test); every
 * callback runs on it from inside tp_loop_wait.  tp_loop_wait has poll(2)'s
 * contract for the caller's own fds, so an actor plugs it in as its kernel
 * wait hook and its inbox eventfd rides along in curl_multi_poll().
 */
#ifndef TP_LOOP_H
#define TP_LOOP_H

#include <curl/curl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec/clock.h"

typedef struct tp_loop tp_loop;

#define TP_HOST_CONNS_MAX 64 /* connections to one host at once, per loop */

/* tp_now_ns is codec_now_ns: CLOCK_MONOTONIC in ns, the clock of every
 * deadline here. */
static inline int64_t
tp_now_ns(void)
{
	return (codec_now_ns());
}

/* A libcurl transfer driven by the loop; the easy handle's
 * CURLOPT_PRIVATE must point at this struct. */
typedef struct tp_xfer tp_xfer;
struct tp_xfer {
	CURL *easy;                                /* the transfer */
	void (*done)(tp_xfer *x, CURLcode result); /* after it finished and
	                                            * left the multi handle */
	int      added;                            /* in the multi handle */
	tp_loop *loop;    /* the loop it was added to */
	bool     lasting; /* no deadline: may turn out a stream */
	bool     counted; /* a stream, in the loop's count (tp_loop_lasting) */
};

typedef void (*tp_fd_fn)(void *arg, short revents);

/* A deadline source: next() gives its earliest deadline (CLOCK_MONOTONIC
 * ns) or -1; expire(now) handles everything due; rest(), where set, runs
 * when the loop rests (tp_loop_set_rest): it lets go of what only
 * speeds up the next transfer (kept curl handles and their buffers). */
typedef struct tp_ticker tp_ticker;
struct tp_ticker {
	int64_t (*next)(void *arg);
	void (*expire)(void *arg, int64_t now_ns);
	void (*rest)(void *arg);
	void      *arg;
	tp_ticker *prev, *nxt; /* loop's list */
};

/* Work deferred to a safe point of the current tp_loop_wait: after curl
 * ran, outside every curl callback (where removing a transfer or closing
 * a connection is allowed).  The owner embeds it. */
typedef struct tp_defer tp_defer;
struct tp_defer {
	void (*fn)(void *arg);
	void     *arg;
	tp_defer *next;   /* loop's queue */
	int       queued; /* in the queue */
};

/* tp_loop_defer queues d (once; queuing it again before it ran is a
 * no-op); tp_loop_undefer takes it out if queued. */
void tp_loop_defer(tp_loop *l, tp_defer *d);
void tp_loop_undefer(tp_loop *l, tp_defer *d);

/* Something that outlives its owner inside the loop (a connection that
 * is closing gracefully): tp_loop_free kills what is still there. */
typedef struct tp_owned tp_owned;
struct tp_owned {
	void (*kill)(void *arg); /* stop now and free */
	void     *arg;
	tp_owned *prev, *nxt; /* loop's list */
};

void tp_loop_own(tp_loop *l, tp_owned *o);
void tp_loop_disown(tp_loop *l, tp_owned *o);

/* tp_loop_new creates a loop: curl's multi handle with its wake-up
 * socket pair (2 file descriptors).  Returns 0, MK_ENOMEM, or MK_ESYS
 * when the process is out of file descriptors. */
int tp_loop_new(tp_loop **lp);

/* tp_loop_free kills what the loop owns (closing connections), then
 * frees the loop and nulls *lp; every transfer must be gone by then.
 * Safe with NULL. */
void tp_loop_free(tp_loop **lp);

/* tp_loop_busy: transfers, watched fds, tickers or closing connections
 * are still in the loop (freeing it now would cut them short). */
bool tp_loop_busy(const tp_loop *l);

/* tp_loop_add starts a transfer; 0 or MK_ENOMEM. */
int tp_loop_add(tp_loop *l, tp_xfer *x);

/* tp_loop_remove stops a transfer without calling done; safe if it is not
 * running. */
void tp_loop_remove(tp_loop *l, tp_xfer *x);

/* tp_loop_watch / tp_loop_unwatch add and remove an fd; one watch per fd.
 * 0, MK_EEXIST, MK_ENOMEM / 0, MK_ENOENT. */
int tp_loop_watch(tp_loop *l, int fd, short events, tp_fd_fn fn, void *arg);
int tp_loop_unwatch(tp_loop *l, int fd);

/* tp_loop_ticker_add / _del link and unlink a ticker the caller owns. */
void tp_loop_ticker_add(tp_loop *l, tp_ticker *t);
void tp_loop_ticker_del(tp_loop *l, tp_ticker *t);

/*
 * tp_loop_wait waits up to timeout_ms (-1: until something happens) for
 * the caller's fds, the watched fds, curl's sockets and the tickers'
 * deadlines; then runs curl, finished transfers' done callbacks, deferred
 * work, watch callbacks and due tickers.  Sets revents of the caller's fds and
 * returns how many have events, 0, or -1 with errno set.
 */
int tp_loop_wait(tp_loop *l, struct pollfd *fds, unsigned nfds,
                 int timeout_ms);

/* tp_loop_set_maxconnects caps the idle connections curl keeps for
 * reuse at n; more are opened when needed.  (libcurl's cache,
 * CURLMOPT_MAXCONNECTS, counts the connections in use too, and closes
 * the oldest idle one past its size: the lasting transfers in the loop -
 * a session's GET or SSE stream - are counted on top, else with a stream
 * open each answer's connection was closed as it came back and no
 * request reused one.) */
void tp_loop_set_maxconnects(tp_loop *l, long n);

/* tp_loop_set_rest lets l rest once nothing has run in it for ms (0:
 * never, the default): it frees curl's multi handle, and with it the
 * wake-up pair and the idle connections, so that an idle client holds
 * no file descriptor; the next transfer makes it again (a new
 * connection).  While the loops awake hold half the process's fd limit,
 * an idle one rests after half a second.  A resting loop still runs its
 * tickers and deferred work, and tp_loop_wakeup still wakes it. */
void tp_loop_set_rest(tp_loop *l, int ms);

/* tp_loop_resting: l rests now (no multi handle). */
bool tp_loop_resting(const tp_loop *l);

/* tp_loop_lasting counts x, a transfer in l that turned out a stream (its
 * answer's headers are in), among the lasting ones until it leaves the
 * loop; once. */
void tp_loop_lasting(tp_loop *l, tp_xfer *x);

/* tp_loop_wakeup makes a tp_loop_wait in progress (or the next one)
 * return at once.  Any thread. */
void tp_loop_wakeup(tp_loop *l);

/* tp_loop_run runs the loop until *stop becomes non-zero or timeout_ms
 * passes; for tests and tools.  Returns 0, or MK_ETIMEDOUT. */
int tp_loop_run(tp_loop *l, const int *stop, int timeout_ms);

#endif /* TP_LOOP_H */
