/*
 * actor.c - actor threads, inboxes, the actor-thread calls (timers,
 * async asks, replies, fd watches) and the poll loop; send.c sends.
 *
 * See kernel.h for the DESIGN.  Everything below "actor thread" touches
 * the actor's private fields and runs only on that thread.
 */
#include <assert.h>
#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "actors/kernel/clock.h"
#include "actors/kernel/kernel_impl.h"
#include "actors/kernel/log.h"
#include "codec/errors.h"

#define KN_INBOX_DEPTH  256  /* messages queued per side of an inbox */
#define KN_TRANSIT_MS   2000 /* wait for a committed message in nng */
#define KN_MSG_REPLIED  1u
#define KN_MSG_DEFERRED 2u

/* An actor's own async ask, keyed by corr in its asks map. */
typedef struct kn_async {
	uint64_t    corr;  /* correlation id */
	uint64_t    timer; /* deadline timer */
	kn_reply_fn fn;    /* completion */
	void       *arg;   /* completion argument */
} kn_async;

/* ---- lifetime (any thread) ------------------------------------------- */

kn_actor *
kn_actor_hold(kn_actor *a)
{
	atomic_fetch_add(&a->refs, 1);
	return (a);
}

void
kn_actor_release(kn_actor **ap)
{
	kn_actor *a = *ap;

	*ap = NULL;
	if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1) {
		return;
	}
	if (!a->joined) { /* no thread ran to close them */
		nng_close(a->push);
		nng_close(a->pull);
	}
	if (a->wake_fd >= 0) {
		close(a->wake_fd);
	}
	pthread_cond_destroy(&a->ready_cv);
	pthread_mutex_destroy(&a->stop_mtx);
	kn_kernel_release(a->k);
	free(a);
}

const char *
kn_actor_name(const kn_actor *a)
{
	return (a->name);
}

kn_kernel *
kn_actor_kernel(const kn_actor *a)
{
	return (a->k);
}

uint64_t
kn_actor_errors(const kn_actor *a)
{
	return (atomic_load(&a->n_errors));
}

/* ---- actor thread ---------------------------------------------------- */

static void
async_timeout(kn_actor *self, void *arg)
{
	kn_async   *as = arg;
	kn_pending *p;

	idmap_del(&self->asks, as->corr);
	if ((p = kn_pending_take(self->k, as->corr)) != NULL) {
		kn_actor_release(&p->asker);
		free(p);
	}
	as->fn(self, as->arg, MK_ETIMEDOUT, NULL, 0);
	free(as);
}

uint64_t
kn_timer_add(kn_actor *self, int64_t delay_ms, kn_tick_fn fn, void *arg)
{
	KN_ON_THREAD(self);
	int64_t when =
	        kn_now_ns() + (delay_ms > 0 ? delay_ms : 0) * KN_NS_PER_MS;

	return (kn_timers_add(&self->timers, when, fn, arg));
}

int
kn_timer_cancel(kn_actor *self, uint64_t id)
{
	KN_ON_THREAD(self);
	return (kn_timers_cancel(&self->timers, id));
}

int
kn_ask_async(kn_actor *self, kn_actor *to, uint32_t type, const void *payload,
             size_t len, int timeout_ms, kn_reply_fn fn, void *arg)
{
	kn_kernel  *k = self->k;
	kn_async   *as;
	kn_pending *p;
	codec_env   env;
	int64_t     deadline;
	int         rv;

	KN_ON_THREAD(self);
	if (timeout_ms <= 0 || type == MSG_TERM || type == MSG_REPLY) {
		return (MK_EINVAL);
	}
	as = calloc(1, sizeof(*as));
	p  = calloc(1, sizeof(*p));
	if (as == NULL || p == NULL) {
		rv = MK_ENOMEM;
		goto fail;
	}
	deadline = kn_deadline_ns(timeout_ms);
	as->corr = p->corr = atomic_fetch_add(&k->next_corr, 1) + 1;
	as->fn             = fn;
	as->arg            = arg;
	p->kind            = KN_PENDING_ACTOR;
	p->asker           = kn_actor_hold(self);
	as->timer = kn_timers_add(&self->timers, deadline, async_timeout, as);
	if (as->timer == 0) {
		rv = MK_ENOMEM;
		goto fail;
	}
	if ((rv = idmap_put(&self->asks, as->corr, as)) != 0) {
		goto fail;
	}
	if ((rv = kn_pending_add(k, p)) != 0) {
		idmap_del(&self->asks, as->corr);
		goto fail;
	}
	atomic_fetch_add(&k->n_asks, 1);
	env = (codec_env) {
	        .type        = type,
	        .corr        = as->corr,
	        .sender      = self->name,
	        .sender_len  = strlen(self->name),
	        .deadline    = deadline,
	        .payload     = payload,
	        .payload_len = len,
	};
	if ((rv = kn_send_env(to, &env)) != 0) {
		if (kn_pending_take(k, as->corr) == NULL) {
			p = NULL; /* closing took it and replied */
		}
		idmap_del(&self->asks, as->corr);
		goto fail;
	}
	return (0);
fail:
	if (as != NULL && as->timer != 0) {
		kn_timers_cancel(&self->timers, as->timer);
	}
	if (p != NULL && p->asker != NULL) {
		kn_actor_release(&p->asker);
	}
	free(p);
	free(as);
	return (rv);
}

int
kn_reply(kn_actor *self, kn_msg *msg, int status, const void *data, size_t len)
{
	KN_ON_THREAD(self);
	if (msg->env.corr == 0 ||
	    (msg->flags & (KN_MSG_REPLIED | KN_MSG_DEFERRED)) != 0) {
		return (MK_EINVAL);
	}
	msg->flags |= KN_MSG_REPLIED;
	(void)kn_reply_corr(self->k, msg->env.corr, status, data, len);
	return (0);
}

uint64_t
kn_defer(kn_msg *msg)
{
	assert(msg->env.corr != 0 && (msg->flags & KN_MSG_REPLIED) == 0);
	msg->flags |= KN_MSG_DEFERRED;
	return (msg->env.corr);
}

void
kn_set_wake_arg(kn_actor *self, void *arg)
{
	atomic_store(&self->wake_arg, arg);
}

int
kn_watch_fd(kn_actor *self, int fd, short events, kn_fd_fn fn, void *arg)
{
	KN_ON_THREAD(self);
	for (unsigned i = 0; i < self->nwatches; i++) {
		if (self->watches[i].fd == fd) {
			return (MK_EEXIST);
		}
	}
	if (self->nwatches == self->capwatches) {
		unsigned  ncap = self->capwatches ? self->capwatches * 2 : 4;
		kn_watch *nw   = realloc(self->watches, ncap * sizeof(*nw));
		if (nw == NULL) {
			return (MK_ENOMEM);
		}
		self->watches    = nw;
		self->capwatches = ncap;
	}
	self->watches[self->nwatches++] = (kn_watch) {fd, events, fn, arg};
	return (0);
}

int
kn_unwatch_fd(kn_actor *self, int fd)
{
	KN_ON_THREAD(self);
	for (unsigned i = 0; i < self->nwatches; i++) {
		if (self->watches[i].fd == fd) {
			self->watches[i] = self->watches[--self->nwatches];
			return (0);
		}
	}
	return (MK_ENOENT);
}

static void
on_reply(kn_actor *self, kn_msg *msg)
{
	kn_async *as = idmap_del(&self->asks, msg->env.corr);

	if (as == NULL) {
		atomic_fetch_add(&self->k->n_late, 1); /* its deadline won */
		return;
	}
	kn_timers_cancel(&self->timers, as->timer);
	as->fn(self, as->arg, msg->env.status, msg->env.payload,
	       msg->env.payload_len);
	free(as);
}

const codec_msgdef *
kn_route_of(const kn_actor *self, unsigned type, size_t *i)
{
	const kn_routes *r = self->ops->routes;

	if (r == NULL || type < r->defs[0].type ||
	    (*i = type - r->defs[0].type) >= r->n) {
		return (NULL);
	}
	return (&r->defs[*i]);
}

const char *
kn_msg_name(const kn_actor *self, unsigned type)
{
	size_t              i;
	const codec_msgdef *def = kn_route_of(self, type, &i);

	return (def != NULL ? def->name : codec_msg_name(type));
}

/* Hands msg to its route, its payload unpacked once (kn_routes), or to
 * handle. */
static int
route(kn_actor *self, kn_msg *msg)
{
	size_t              i;
	const codec_msgdef *def = kn_route_of(self, msg->env.type, &i);
	const void         *p   = msg->env.payload;
	size_t              n   = msg->env.payload_len;
	union {
		max_align_t   align;
		unsigned char b[CODEC_MSG_MAX];
	} req;
	int rv;

#ifndef NDEBUG
	if (self->ops->check != NULL) {
		self->ops->check(self->state);
	}
#endif
	if (def == NULL) {
		if (self->ops->handle != NULL) {
			return (self->ops->handle(self, self->state, msg));
		}
		KN_WARN("kernel", "actor %s takes no message of type %u",
		        self->name, msg->env.type);
		return (MK_EPROTO);
	}
	if (def->req->n == 0) {
		return (self->ops->routes->fns[i](self, self->state, msg,
		                                  NULL));
	}
	if (n == 0) { /* no payload at all: every field absent */
		p = CODEC_EMPTY;
		n = CODEC_EMPTY_LEN;
	}
	if (codec_msg_unpack(def->req, p, n, &req) != 0) {
		KN_WARN("kernel", "actor %s: a %s whose payload is not a map",
		        self->name, def->name);
		return (MK_EPROTO);
	}
	rv = self->ops->routes->fns[i](self, self->state, msg, &req);
	codec_msg_clear(def->req, &req);
	return (rv);
}

/* Handles one message; while closing, asks get MK_ECLOSED instead. */
static void
dispatch(kn_actor *self, kn_msg *msg, bool closing)
{
	kn_kernel *k = self->k;
	int        rv;

	switch (msg->env.type) {
	case MSG_REPLY:
		on_reply(self, msg);
		return;
	default:
		break;
	}
	if (closing) {
		if (msg->env.corr != 0) {
			kn_reply(self, msg, MK_ECLOSED, NULL, 0);
		}
		return;
	}
	if (msg->env.corr != 0 && msg->env.deadline != 0 &&
	    kn_now_ns() > msg->env.deadline) {
		atomic_fetch_add(&k->n_expired, 1);
		kn_reply(self, msg, MK_ETIMEDOUT, NULL, 0);
		return;
	}
	atomic_fetch_add_explicit(&k->n_messages, 1, memory_order_relaxed);
	rv = route(self, msg);
	if (rv != 0) {
		atomic_fetch_add(&k->n_errors, 1);
		atomic_fetch_add(&self->n_errors, 1);
		KN_ERROR("kernel",
		         "actor %s: handler for message %s failed: %s",
		         self->name, kn_msg_name(self, msg->env.type),
		         codec_strerror(rv));
	}
	if (msg->env.corr != 0 &&
	    (msg->flags & (KN_MSG_REPLIED | KN_MSG_DEFERRED)) == 0) {
		if (rv == 0) {
			KN_ERROR("kernel",
			         "actor %s: ask %s returned without a reply",
			         self->name, kn_msg_name(self, msg->env.type));
			rv = MK_EINTERNAL;
		}
		kn_reply(self, msg, rv, NULL, 0);
	}
}

/*
 * Receives one committed message; wait_ms bounds the wait for one still
 * inside nng.  Returns 0 with *mp set, or an nng-mapped error.
 */
static int
recv_one(kn_actor *self, nng_msg **mp, int wait_ms)
{
	int rv;

	nng_aio_set_timeout(self->rx_aio, wait_ms);
	nng_recv_aio(self->pull, self->rx_aio);
	nng_aio_wait(self->rx_aio);
	if ((rv = nng_aio_result(self->rx_aio)) != 0) {
		return (kn_map_nng(rv));
	}
	*mp = nng_aio_get_msg(self->rx_aio);
	nng_aio_set_msg(self->rx_aio, NULL);
	return (0);
}

/* Receives and dispatches every committed message (a batch per wake-up). */
static void
drain(kn_actor *self, bool closing)
{
	uint64_t committed = atomic_load(&self->committed);

	while (self->received != committed) {
		nng_msg *m = NULL;
		kn_msg   msg;
		int      rv;

		if (recv_one(self, &m, NNG_DURATION_ZERO) != 0 &&
		    (rv = recv_one(self, &m, KN_TRANSIT_MS)) != 0) {
			KN_ERROR(
			        "kernel",
			        "actor %s: %llu committed messages not received: %s",
			        self->name,
			        (unsigned long long)(committed -
			                             self->received),
			        codec_strerror(rv));
			return; /* retried on the next turn of the loop */
		}
		self->received++;
		memset(&msg, 0, sizeof(msg));
		if (codec_env_decode(&msg.env, nng_msg_body(m),
		                     nng_msg_len(m)) != 0) {
			/* Only the kernel encodes these: a bug. */
			assert(!"malformed internal envelope");
			nng_msg_free(m);
			continue;
		}
		dispatch(self, &msg, closing);
		nng_msg_free(m);
		if (self->received == committed) {
			committed = atomic_load(&self->committed);
		}
	}
}

static bool
backlogged(kn_actor *self)
{
	return (atomic_load(&self->committed) != self->received);
}

static int
loop_wait(kn_actor *self, struct pollfd *fds, unsigned nfds, int timeout)
{
	if (self->ops->wait != NULL) {
		return (self->ops->wait(self, self->state, fds, nfds,
		                        timeout));
	}
	return (poll(fds, nfds, timeout));
}

static void
run_loop(kn_actor *self)
{
	struct pollfd *fds  = NULL;
	unsigned       cap  = 0;
	unsigned       base = self->wake_fd >= 0 ? 1 : 0; /* fds[0]: wake */

	while (!self->terminated) {
		unsigned nfds    = base + self->nwatches;
		int64_t  next    = kn_timers_next(&self->timers);
		int      timeout = -1;
		int      n;

		if (nfds > cap) {
			struct pollfd *nf = realloc(fds, nfds * sizeof(*nf));
			if (nf == NULL) {
				KN_ERROR("kernel", "actor %s: out of memory",
				         self->name);
				nfds = base; /* keep serving the inbox */
			} else {
				fds = nf;
				cap = nfds;
			}
		}
		if (base != 0) {
			fds[0] = (struct pollfd) {self->wake_fd, POLLIN, 0};
		}
		for (unsigned i = base; i < nfds; i++) {
			fds[i] = (struct pollfd) {
			        self->watches[i - base].fd,
			        self->watches[i - base].events, 0};
		}
		if (next >= 0) {
			int64_t left = next - kn_now_ns();
			timeout      = left <= 0 ? 0
			                         : (int)((left + KN_NS_PER_MS - 1) /
                                                    KN_NS_PER_MS);
		}
		/* Announce the sleep, then look once more: a sender that
		 * committed, or a stop asked, before seeing asleep is caught
		 * here. */
		atomic_store(&self->asleep, true);
		if (backlogged(self) || atomic_load(&self->stop)) {
			timeout = 0;
		}
		n = loop_wait(self, fds, nfds, timeout);
		atomic_store(&self->asleep, false);
		if (n < 0 && errno != EINTR) {
			KN_ERROR("kernel", "actor %s: wait failed: %s",
			         self->name, strerror(errno));
			break;
		}
		if (base != 0 && n > 0 && (fds[0].revents & POLLIN) != 0) {
			eventfd_t junk;
			(void)eventfd_read(self->wake_fd, &junk);
		}
		/* Read before the drain, so that the drain takes every
		 * message committed before the stop was asked. */
		self->terminated = atomic_load(&self->stop);
		drain(self, false);
		kn_timers_run(&self->timers, kn_now_ns(), self);
		/* Watches may change in callbacks: match by fd. */
		for (unsigned i = base; n > 0 && i < nfds; i++) {
			if (fds[i].revents == 0) {
				continue;
			}
			for (unsigned j = 0; j < self->nwatches; j++) {
				if (self->watches[j].fd == fds[i].fd) {
					kn_watch w = self->watches[j];
					w.fn(self, w.arg, fds[i].revents);
					break;
				}
			}
		}
	}
	free(fds);
}

/* After the stop: wait out senders still inside a send, answer what they
 * committed, and end every async ask of our own. */
static void
shut_down(kn_actor *self)
{
	kn_async *as;

	for (;;) {
		bool quiet = atomic_load(&self->senders) == 0;

		drain(self, true);
		if (quiet && !backlogged(self)) {
			break;
		}
		if (!quiet) {
			struct pollfd pfd = {self->wake_fd, POLLIN, 0};
			atomic_store(&self->asleep, true);
			/* a sender is mid-send: give it a millisecond */
			(void)poll(&pfd, self->wake_fd >= 0 ? 1 : 0, 1);
			atomic_store(&self->asleep, false);
		}
	}
	while ((as = idmap_pop(&self->asks, NULL)) != NULL) {
		kn_pending *p = kn_pending_take(self->k, as->corr);
		if (p != NULL) {
			kn_actor_release(&p->asker);
			free(p);
		}
		kn_timers_cancel(&self->timers, as->timer);
		as->fn(self, as->arg, MK_ECLOSED, NULL, 0);
		free(as);
	}
}

/* Names the calling thread after its actor (top -H, perf, gdb show it),
 * cut to the 15 bytes a thread name holds. */
static void
thread_name(const char *name)
{
	char cut[16];

	snprintf(cut, sizeof(cut), "%.15s", name);
	(void)pthread_setname_np(pthread_self(), cut);
}

static void *
actor_main(void *arg)
{
	kn_actor *self = arg;
	int       rv;

	self->tid = pthread_self();
	thread_name(self->name);
	(void)kn_log_bind(&self->k->log);
	rv = nng_aio_alloc(&self->rx_aio, NULL, NULL) != 0 ? MK_ENOMEM
	        : self->ops->init != NULL
	        ? self->ops->init(self, self->arg, &self->state)
	        : 0;
	pthread_mutex_lock(&self->stop_mtx);
	self->start_rc = rv;
	self->ready    = true;
	pthread_cond_signal(&self->ready_cv);
	pthread_mutex_unlock(&self->stop_mtx);
	if (rv == 0) {
		KN_DEBUG("kernel", "actor %s ready", self->name);
		run_loop(self);
		shut_down(self);
		if (self->ops->fini != NULL) {
			self->ops->fini(self, self->state);
		}
		KN_DEBUG("kernel", "actor %s stopped", self->name);
	}
	/* Armed timers are discarded without firing (see kernel.h). */
	kn_timers_fini(&self->timers);
	idmap_fini(&self->asks);
	free(self->watches);
	/* The inbox's both ends: no sender gets in once closing is set
	 * (shut_down waited for those already in).  The push end first:
	 * left open past its listener, its dialer would try the inproc
	 * address again every 100 ms, each try a scan of every listener in
	 * the process (an eighth of a loaded 3,000-client close). */
	nng_close(self->push);
	nng_close(self->pull);
	if (self->rx_aio != NULL) {
		nng_aio_free(self->rx_aio);
	}
	(void)kn_log_bind(NULL);
	return (NULL);
}

static int
open_inbox(kn_actor *a)
{
	char url[96];
	int  rv;

	snprintf(url, sizeof(url), "inproc://mcpkeep-%u/%llu", a->k->id,
	         (unsigned long long)a->id);
	if ((rv = nng_pull0_open(&a->pull)) != 0 ||
	    (rv = nng_push0_open(&a->push)) != 0 ||
	    (rv = nng_socket_set_int(a->pull, NNG_OPT_RECVBUF,
	                             KN_INBOX_DEPTH)) != 0 ||
	    (rv = nng_socket_set_int(a->push, NNG_OPT_SENDBUF,
	                             KN_INBOX_DEPTH)) != 0 ||
	    (rv = nng_listen(a->pull, url, NULL, 0)) != 0 ||
	    (rv = nng_dial(a->push, url, NULL, 0)) != 0) {
		return (kn_map_nng(rv));
	}
	if (a->ops->wake == NULL &&
	    (a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		return (MK_ESYS);
	}
	return (0);
}

static int
valid_name(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n > KN_NAME_MAX) {
		return (0);
	}
	for (const char *p = name; *p != '\0'; p++) {
		if (*p <= ' ' || *p == 0x7f) {
			return (0);
		}
	}
	return (1);
}

int
kn_spawn(kn_kernel *k, const char *name, const kn_actor_ops *ops, void *arg,
         kn_actor **ap)
{
	kn_actor      *a;
	pthread_attr_t attr;
	int            rv;

	*ap = NULL;
	if (!valid_name(name) || ops == NULL ||
	    (ops->handle == NULL && ops->routes == NULL)) {
		return (MK_EINVAL);
	}
	for (size_t i = 0; ops->routes != NULL && i < ops->routes->n; i++) {
		assert(ops->routes->defs[i].type ==
		       ops->routes->defs[0].type + i);
		assert(ops->routes->defs[i].req->size <= CODEC_MSG_MAX);
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		return (MK_ENOMEM);
	}
	kn_kernel_hold(k);
	a->k  = k;
	a->id = atomic_fetch_add(&k->next_actor, 1) + 1;
	snprintf(a->name, sizeof(a->name), "%s", name);
	atomic_init(&a->refs, 1);
	a->ops     = ops;
	a->arg     = arg;
	a->wake_fd = -1;
	pthread_mutex_init(&a->stop_mtx, NULL);
	pthread_cond_init(&a->ready_cv, NULL);
	if ((rv = open_inbox(a)) != 0) {
		goto fail;
	}
	if ((rv = kn_registry_add(k, a)) != 0) {
		goto fail;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, k->stack_size);
	rv = pthread_create(&a->thread, &attr, actor_main, a);
	pthread_attr_destroy(&attr);
	if (rv != 0) {
		kn_registry_remove(k, a);
		rv = MK_ESYS;
		goto fail;
	}
	pthread_mutex_lock(&a->stop_mtx);
	while (!a->ready) {
		pthread_cond_wait(&a->ready_cv, &a->stop_mtx);
	}
	rv = a->start_rc;
	pthread_mutex_unlock(&a->stop_mtx);
	if (rv != 0) {
		pthread_join(a->thread, NULL);
		a->joined = true;
		kn_registry_remove(k, a);
		goto fail;
	}
	*ap = a;
	return (0);
fail:
	kn_actor_release(&a);
	return (rv);
}

void
kn_stop_begin(kn_actor *a)
{
	/* counted as a sender, so that the actor's fini (which frees what
	 * ops->wake touches) waits for the wake; closing first: once the
	 * actor sees stop, no new sender gets in, so what it still has to
	 * take is bounded */
	atomic_fetch_add(&a->senders, 1);
	atomic_store(&a->closing, true);
	atomic_store(&a->stop, true);
	kn_wake(a);
	atomic_fetch_sub(&a->senders, 1);
}

bool
kn_stopping(const kn_actor *self)
{
	return (atomic_load(&self->stop));
}

int
kn_stop(kn_actor *a)
{
	if (pthread_equal(pthread_self(), a->thread)) {
		return (MK_EINVAL);
	}
	kn_stop_begin(a);
	pthread_mutex_lock(&a->stop_mtx);
	if (!a->joined) {
		pthread_join(a->thread, NULL);
		a->joined = true;
	}
	pthread_mutex_unlock(&a->stop_mtx);
	kn_registry_remove(a->k, a);
	return (0);
}

void
kn_actor_destroy(kn_actor **ap)
{
	if (ap == NULL || *ap == NULL) {
		return;
	}
	kn_stop(*ap);
	kn_actor_release(ap);
}
