/*
 * kernel.h - the actor kernel: threads with one inbox each.
 *
 * The kernel knows nothing of MCP.  An actor is one thread plus one inbox,
 * an nng pull0 socket listening on a private inproc address; every sender
 * shares the actor's one push0 socket dialled to it (nng sockets are
 * thread-safe).  A sender sends the message, then counts it in the actor's
 * `committed` counter, and writes the actor's eventfd only when the actor
 * announced it may sleep: that eventfd is the actor's only file descriptor
 * and its only wake-up.  The actor receives exactly the committed count (a
 * message can still be inside nng when it is counted, so the actor waits
 * briefly for one in transit), so a burst costs senders no syscall beyond
 * nng's own and the actor one wake-up.
 *
 * DESIGN
 *   threads   one per actor; callers of kn_ask/kn_tell are any thread.
 *             The calls documented "Actor thread only" or "Handler
 *             only" assert that they run on the actor's own thread.
 *   ordering  messages from one sender thread to one actor arrive in the
 *             order sent (one push socket, one pipe, FIFO queues).
 *   loop      wait (poll(2), or the actor's own wait such as
 *             curl_multi_poll) on the eventfd, the actor's watched fds and
 *             its next timer; then drain the inbox in a batch, fire due
 *             timers, dispatch fd events.
 *   asks      every ask has a deadline.  A blocking ask waits on a slot
 *             (mutex + condvar) that the replier completes directly: one
 *             nng hop per round trip.  An actor's async ask is answered by
 *             a MSG_REPLY in its own inbox, or by its own deadline timer;
 *             whichever comes second is dropped and counted as late.
 *   stop      closing is set (new sends are refused), then the actor's
 *             stop flag, and the actor is woken: a flag, not a message,
 *             so a full inbox cannot hold a stop up.  The loop handles
 *             every message committed before it saw the flag, ends its
 *             turn, waits for senders still inside kn_tell, answers what
 *             they committed and every ask with MK_ECLOSED, calls its
 *             async-ask callbacks with MK_ECLOSED, runs fini and exits;
 *             stop joins the thread.  A long handler (one that starts
 *             thousands of actors) asks kn_stopping between its steps
 *             and gives up the rest.
 *   lifetime  actors are reference counted (owner, registry, lookups,
 *             in-flight asks); the kernel is reference counted by its
 *             actors, so no pointer outlives what it points to.
 *   types     the kernel's message types lie below KN_MSG_BASE
 *             (codec/msg.h): MSG_TERM, reserved and never sent,
 *             MSG_REPLY, which only the kernel sends and which never
 *             reaches a handler, and MSG_PING
 *             and MSG_USER, which any actor may answer.  The kernel
 *             carries every other type unread; an application numbers
 *             its own from KN_MSG_BASE.
 *   payloads  the kernel carries bytes; the typed forms (kn_tell_msg,
 *             kn_ask_msg, kn_reply_msg, ...) pack a message struct of
 *             codec/msgdef.h, and an error reply is a kn_error_msg.
 */
#ifndef KN_KERNEL_H
#define KN_KERNEL_H

#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/envelope.h"
#include "codec/msg.h"
#include "codec/msgdef.h"
#include "mcpkeep.h"

#define KN_MSG_BASE      MSG_BASE /* the first type not the kernel's */
#define KN_NAME_MAX      CODEC_SENDER_MAX
#define KN_ALIAS_MAX     80 /* bytes in an alias (kn_alias) */
#define KN_STACK_DEFAULT (256u * 1024u)
#define KN_STACK_MIN     (64u * 1024u)

typedef struct kn_kernel kn_kernel;
typedef struct kn_actor  kn_actor;

/* A message as a handler sees it.  Valid only during the handler call. */
typedef struct kn_msg {
	codec_env env;   /* the decoded envelope; pointers into the message */
	unsigned  flags; /* kernel bookkeeping (replied, deferred) */
} kn_msg;

/*
 * The messages an actor takes, from its list (codec/msgdef.h): defs[i]
 * is handled by fns[i], the types dense from defs[0].type.  The kernel
 * refuses any other type not of its own (MK_EPROTO, a log line), unpacks
 * the payload once into the struct of defs[i].req - refusing one that is
 * not a map MK_EPROTO, with a log line - and hands it to the handler, req
 * NULL for a message without fields; it clears the struct when the
 * handler returns, so a handler keeps a string by taking it (setting the
 * member NULL).  KN_ROUTES writes the table from the list.
 */
typedef int (*kn_route_fn)(kn_actor *self, void *state, kn_msg *msg,
                           void *req);
typedef struct kn_routes {
	const codec_msgdef *defs;
	const kn_route_fn  *fns;
	size_t              n;
} kn_routes;

/* KN_ROUTES(NAME, DEFS, LIST) defines NAME, the routes of the list LIST
 * whose table is DEFS: a handler h of a row with payload S is called as
 * h(self, state, msg, (S *)req), so its type is checked. */
#define KN_ROUTE_THUNK_(T, k, req, rep, fail, h, doc)                         \
	static int T##_route(kn_actor *self, void *state, kn_msg *msg,        \
	                     void *m)                                         \
	{                                                                     \
		return (h(self, state, msg, (req *)m));                       \
	}
#define KN_ROUTE_FN_(T, k, req, rep, fail, h, doc) T##_route,
#define KN_ROUTES(NAME, DEFS, LIST)                                           \
	LIST(KN_ROUTE_THUNK_)                                                 \
	static const kn_route_fn NAME##_fns[] = {LIST(KN_ROUTE_FN_)};         \
	static const kn_routes   NAME         = {                             \
	                  DEFS, NAME##_fns, sizeof(NAME##_fns) / sizeof(NAME##_fns[0])}

/*
 * The behaviour of an actor.  Every callback runs on the actor's own
 * thread and may touch its state without locks.
 */
typedef struct kn_actor_ops {
	/* routes: the messages it takes (above), or NULL: handle has all */
	const kn_routes *routes;
	/* check: optional; asserts what holds of state between two handlers
	 * (SQLite's assert_pager_state is the model), called before each
	 * one unless NDEBUG */
	void (*check)(const void *state);
	/* init: before READY; sets *statep.  Non-zero fails the spawn. */
	int (*init)(kn_actor *self, void *arg, void **statep);
	/* handle: one message not routed (the kernel's: MSG_PING, MSG_USER),
	 * or NULL to refuse those.  Non-zero, here or from a route, is a
	 * handler error: logged, counted, and, for an ask not yet answered,
	 * replied as the ask's status. */
	int (*handle)(kn_actor *self, void *state, kn_msg *msg);
	/* fini: after the loop, before the thread exits.  Frees state and
	 * whatever the actor's timers and watches held. */
	void (*fini)(kn_actor *self, void *state);
	/* wait: optional replacement for poll(2) with the same contract,
	 * e.g. a wrapper of curl_multi_poll(); it sets revents. */
	int (*wait)(kn_actor *self, void *state, struct pollfd *fds,
	            unsigned nfds, int timeout_ms);
	/* wake: optional, with wait; how a sender wakes the actor out of
	 * its own wait (e.g. curl_multi_wakeup), instead of an eventfd -
	 * one file descriptor less per actor.  Any thread; its argument is
	 * set by kn_set_wake_arg (before that, senders need not wake: the
	 * loop looks at the inbox before it first waits). */
	void (*wake)(void *wake_arg);
} kn_actor_ops;

/* kn_msg_name: the name of type as self knows it (its routes' names, the
 * kernel's own), or "?". */
const char *kn_msg_name(const kn_actor *self, unsigned type);

/* The answer to a blocking ask: data is malloc'd, the caller frees it. */
typedef struct kn_answer {
	int    status; /* the replier's status (mk_err) */
	void  *data;   /* reply payload or NULL */
	size_t len;    /* bytes in data */
} kn_answer;

/* Async ask completion: runs once on the asking actor's thread. */
typedef void (*kn_reply_fn)(kn_actor *self, void *arg, int status,
                            const void *data, size_t len);
/* Timer callback: runs on the actor's thread. */
typedef void (*kn_tick_fn)(struct kn_actor *self, void *arg);
/* Watched-fd callback: runs on the actor's thread with poll's revents. */
typedef void (*kn_fd_fn)(kn_actor *self, void *arg, short revents);

/*
 * kn_kernel_open creates a kernel.  stack_size 0 means KN_STACK_DEFAULT.
 * Returns 0, MK_EINVAL (stack below KN_STACK_MIN) or MK_ENOMEM.
 */
int kn_kernel_open(kn_kernel **kp, size_t stack_size);

/*
 * kn_kernel_close stops every actor still running (newest first), answers
 * every ask still pending with MK_ECLOSED, drops the caller's reference
 * and nulls *kp.  Blocks until the actors have exited.  Not from an actor.
 */
void kn_kernel_close(kn_kernel **kp);

/*
 * kn_kernel_log gives the log settings every actor thread of k is bound
 * to (log.h); unset, they follow the default.  Configure them with
 * kn_logger_init before the first kn_spawn.
 */
struct kn_logger;
struct kn_logger *kn_kernel_log(kn_kernel *k);

/* kn_kernel_stats fills the kernel's counters.  Never blocks. */
void kn_kernel_stats(kn_kernel *k, mk_stats *out);

/*
 * kn_spawn starts an actor named name (unique in the kernel).  Blocks until
 * its init ran and it signalled READY.  On success *ap holds the owner's
 * reference (release with kn_actor_destroy).  Returns 0, MK_EINVAL (bad
 * name), MK_EEXIST, MK_ECLOSED (kernel closing), MK_ENOMEM, MK_ESYS, or
 * init's own failure.
 */
int kn_spawn(kn_kernel *k, const char *name, const kn_actor_ops *ops,
             void *arg, kn_actor **ap);

/*
 * kn_stop stops the actor (see DESIGN) and joins its thread.  Blocks
 * until the actor finished the handler it is in (a long one asks
 * kn_stopping) and its fini; never on a full inbox.  Idempotent; any
 * thread but the actor's own.  Returns 0 or MK_EINVAL when called from
 * the actor itself.
 */
int kn_stop(kn_actor *a);

/*
 * kn_stop_begin asks the actor to stop (see DESIGN) and returns at once:
 * new sends are refused from now on; kn_stop or kn_actor_destroy joins
 * it later.  Stopping many actors, begin them all, then join each: their
 * shutdowns overlap.  Never blocks; any thread, the actor's own too;
 * idempotent.
 */
void kn_stop_begin(kn_actor *a);

/*
 * kn_stopping tells whether the actor was asked to stop: a handler that
 * runs long checks it between steps and returns early (its loop then
 * ends).  Never blocks; any thread (a handler passes self).
 */
bool kn_stopping(const kn_actor *self);

/* kn_actor_destroy stops the actor if needed, drops the reference and
 * nulls *ap.  Safe with NULL. */
void kn_actor_destroy(kn_actor **ap);

/* kn_lookup finds a running actor by name or alias and takes a reference
 * for the caller (release with kn_actor_release).  Returns 0 or
 * MK_ENOENT. */
int kn_lookup(kn_kernel *k, const char *name, kn_actor **ap);

/* kn_alias gives a running actor a second registry name (one at most,
 * up to KN_ALIAS_MAX bytes), unique among names and aliases; it goes when
 * the actor leaves the registry.  Any thread.  Returns 0, MK_EINVAL
 * (empty or too long),
 * MK_EEXIST (taken, or the actor has one), MK_ECLOSED (not running) or
 * MK_ENOMEM. */
int kn_alias(kn_actor *a, const char *alias);

/* kn_actor_hold takes another reference; kn_actor_release drops one and
 * nulls *ap. */
kn_actor *kn_actor_hold(kn_actor *a);
void      kn_actor_release(kn_actor **ap);

/* Accessors; any thread. */
const char *kn_actor_name(const kn_actor *a);
kn_kernel  *kn_actor_kernel(const kn_actor *a);
/* Handler errors this actor reported so far. */
uint64_t kn_actor_errors(const kn_actor *a);

/*
 * kn_tell queues a one-way message.  from is the sending actor or NULL.
 * Blocks only while the inbox is full, at most a few seconds.  payload is
 * copied.  Returns 0, MK_ECLOSED (the actor is stopping), MK_ETIMEDOUT
 * (inbox full too long), MK_ETOOBIG or MK_ENOMEM.
 */
int kn_tell(kn_actor *to, kn_actor *from, uint32_t type, const void *payload,
            size_t len);

/*
 * kn_ask sends a request and waits for its reply, at most timeout_ms.  Any
 * thread that is not an actor (an actor uses kn_ask_async).  When a reply
 * came, *out holds it (out->data is the caller's, even on an error status)
 * and the reply's status is returned; an actor that is stopping answers
 * MK_ECLOSED.  Otherwise returns MK_ETIMEDOUT, MK_ECLOSED, MK_EINVAL
 * (timeout <= 0), MK_ETOOBIG or MK_ENOMEM with *out empty.
 */
int kn_ask(kn_actor *to, uint32_t type, const void *payload, size_t len,
           int timeout_ms, kn_answer *out);

/*
 * kn_ask_async sends a request from actor self.  Never blocks on the
 * reply: fn runs exactly once on self's thread - with the reply, with
 * MK_ETIMEDOUT at the deadline, or with MK_ECLOSED when self stops.  Actor
 * thread only.  Returns 0, or an error as kn_tell (then fn never runs).
 */
int kn_ask_async(kn_actor *self, kn_actor *to, uint32_t type,
                 const void *payload, size_t len, int timeout_ms,
                 kn_reply_fn fn, void *arg);

/* A callback ask's completion: runs once, on the replying actor's thread
 * (or the closing thread), so it must be short and thread-safe. */
typedef void (*kn_answer_fn)(void *arg, int status, const void *data,
                             size_t len);

/*
 * kn_ask_cb sends a request from any thread and returns at once; fn runs
 * exactly once with the reply, or with MK_ECLOSED when the kernel closes.
 * The target answers within the deadline it was given (timeout_ms rides
 * in the envelope; expired asks are answered MK_ETIMEDOUT).  Returns 0, or
 * an error as kn_tell (then fn never runs).
 */
int kn_ask_cb(kn_actor *to, uint32_t type, const void *payload, size_t len,
              int timeout_ms, kn_answer_fn fn, void *arg);

/*
 * kn_reply answers the ask msg (once).  Handler only.  data is copied.
 * Returns 0, or MK_EINVAL (not an ask, or already answered).
 */
int kn_reply(kn_actor *self, kn_msg *msg, int status, const void *data,
             size_t len);

/*
 * kn_defer keeps the ask msg open after the handler returns and gives its
 * correlation id, to answer later with kn_reply_corr.  Handler only.
 */
uint64_t kn_defer(kn_msg *msg);

/*
 * kn_reply_corr answers a deferred ask.  Any thread.  A reply whose asker
 * gave up (deadline passed, or closed) is dropped and counted as late.
 * Returns 0, or MK_ENOENT when it was late.
 */
int kn_reply_corr(kn_kernel *k, uint64_t corr, int status, const void *data,
                  size_t len);

/*
 * kn_reply_error answers a deferred ask with status and the payload
 * {"error": text} (msgpack), text printf-formatted and cut at 1 KiB.
 * Any thread.  Returns as kn_reply_corr.
 */
int kn_reply_error(kn_kernel *k, uint64_t corr, int status, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
int kn_reply_verror(kn_kernel *k, uint64_t corr, int status, const char *fmt,
                    va_list ap);

/* kn_reply_why is kn_reply_error for the actor self's deferred ask.
 * Actor thread (or any: self only names the kernel).  Returns as
 * kn_reply_corr. */
int kn_reply_why(kn_actor *self, uint64_t corr, int status, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

/* kn_reply_msg answers a deferred ask with the message m, a struct of
 * the fields f (codec/msgdef.h); its bytes are wiped after when it has
 * a secret.  Any thread.  Returns as kn_reply_corr. */
int kn_reply_msg(kn_kernel *k, uint64_t corr, int status,
                 const codec_fields *f, const void *m);

/*
 * The typed forms of kn_tell, kn_ask, kn_ask_async and kn_ask_cb: the
 * payload is the message m, a struct of the fields f, packed here (and
 * wiped after when it has a secret).  Pass f and m as CODEC_OF(S, &m),
 * which checks that m is an S.  Same threads, blocking and returns as
 * the untyped calls.
 */
int kn_tell_msg(kn_actor *to, kn_actor *from, uint32_t type,
                const codec_fields *f, const void *m);
int kn_ask_msg(kn_actor *to, uint32_t type, const codec_fields *f,
               const void *m, int timeout_ms, kn_answer *out);
int kn_ask_async_msg(kn_actor *self, kn_actor *to, uint32_t type,
                     const codec_fields *f, const void *m, int timeout_ms,
                     kn_reply_fn fn, void *arg);
int kn_ask_cb_msg(kn_actor *to, uint32_t type, const codec_fields *f,
                  const void *m, int timeout_ms, kn_answer_fn fn, void *arg);

/* The payload of an error reply: {"error": text}. */
#define KN_ERROR_FIELDS(F, S) F(S, STR, error, "what failed")
CODEC_MSG_STRUCT(kn_error_msg, KN_ERROR_FIELDS)

/* kn_error_text returns the text of an error reply's payload (malloc'd),
 * or NULL when it has none.  Any thread. */
char *kn_error_text(const void *data, size_t len);

/* kn_timer_add arms a one-shot timer on self, delay_ms from now.  Actor
 * thread only.  Returns its id, or 0 when out of memory.  Timers still
 * armed at stop are discarded without firing. */
uint64_t kn_timer_add(kn_actor *self, int64_t delay_ms, kn_tick_fn fn,
                      void *arg);

/* kn_timer_cancel disarms a timer; 0, or MK_ENOENT if it already fired. */
int kn_timer_cancel(kn_actor *self, uint64_t id);

/* kn_set_wake_arg gives ops->wake its argument.  Actor thread (init). */
void kn_set_wake_arg(kn_actor *self, void *arg);

/* kn_watch_fd adds fd to the actor's wait (at most one watch per fd).
 * Actor thread only.  Returns 0, MK_EEXIST or MK_ENOMEM. */
int kn_watch_fd(kn_actor *self, int fd, short events, kn_fd_fn fn, void *arg);

/* kn_unwatch_fd removes the watch on fd; 0 or MK_ENOENT. */
int kn_unwatch_fd(kn_actor *self, int fd);

#endif /* KN_KERNEL_H */
