/*
 * send.c - sending to an actor's inbox, from any thread: tell, the
 * blocking ask and the callback ask (kernel.h has the DESIGN).
 */
#include <errno.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "actors/kernel/clock.h"
#include "actors/kernel/kernel_impl.h"
#include "actors/kernel/log.h"
#include "codec/errors.h"

#define KN_SEND_TIMEOUT_MS 5000 /* a full inbox blocks a sender this long */

/* ---- sending (any thread) -------------------------------------------- */

static pthread_key_t  send_aio_key;
static pthread_once_t send_aio_once = PTHREAD_ONCE_INIT;

static void
send_aio_free(void *aio)
{
	nng_aio_free(aio);
}

static void
send_aio_key_init(void)
{
	(void)pthread_key_create(&send_aio_key, send_aio_free);
}

/* One send aio per thread, reused: nng_aio_alloc is not free. */
static nng_aio *
send_aio(void)
{
	nng_aio *aio;

	pthread_once(&send_aio_once, send_aio_key_init);
	if ((aio = pthread_getspecific(send_aio_key)) == NULL) {
		if (nng_aio_alloc(&aio, NULL, NULL) != 0) {
			return (NULL);
		}
		pthread_setspecific(send_aio_key, aio);
	}
	return (aio);
}

static int
msg_write(void *sink, const char *buf, size_t len)
{
	if (len == 0) {
		return (0); /* msgpack hands NULL with empty bodies */
	}
	return (nng_msg_append(sink, buf, len) != 0 ? -1 : 0);
}

void
kn_wake(kn_actor *to)
{
	/* not asleep: it looks at its inbox and stop flag before waiting */
	if (!atomic_load(&to->asleep)) {
		return;
	}
	if (to->ops->wake != NULL) {
		void *wa = atomic_load(&to->wake_arg);
		if (wa != NULL) {
			to->ops->wake(wa);
		}
	} else {
		(void)eventfd_write(to->wake_fd, 1);
	}
}

int
kn_send_env(kn_actor *to, const codec_env *env)
{
	nng_msg *m;
	nng_aio *aio;
	int      rv;

	atomic_fetch_add(&to->senders, 1);
	if (atomic_load(&to->closing)) {
		rv = MK_ECLOSED;
		goto out;
	}
	if ((aio = send_aio()) == NULL) {
		rv = MK_ENOMEM;
		goto out;
	}
	if (nng_msg_alloc(&m, 32 + env->sender_len + env->payload_len) != 0) {
		rv = MK_ENOMEM;
		goto out;
	}
	nng_msg_clear(m); /* keep the capacity, start empty */
	if ((rv = codec_env_encode(env, msg_write, m)) != 0) {
		nng_msg_free(m);
		goto out;
	}
	nng_aio_set_msg(aio, m);
	nng_aio_set_timeout(aio, KN_SEND_TIMEOUT_MS);
	nng_send_aio(to->push, aio);
	nng_aio_wait(aio);
	if ((rv = kn_map_nng(nng_aio_result(aio))) != 0) {
		nng_msg_free(nng_aio_get_msg(aio));
		nng_aio_set_msg(aio, NULL);
		goto out;
	}
	/* Committed: count it, and wake the actor only if it may be
	 * blocked (pairs with the store/load in run_loop). */
	atomic_fetch_add(&to->committed, 1);
	kn_wake(to);
out:
	atomic_fetch_sub(&to->senders, 1);
	return (rv);
}

int
kn_tell(kn_actor *to, kn_actor *from, uint32_t type, const void *payload,
        size_t len)
{
	codec_env env = {
	        .type        = type,
	        .sender      = from != NULL ? from->name : "",
	        .sender_len  = from != NULL ? strlen(from->name) : 0,
	        .payload     = payload,
	        .payload_len = len,
	};

	if (type == MSG_TERM || type == MSG_REPLY) {
		return (MK_EINVAL); /* the kernel's own */
	}
	return (kn_send_env(to, &env));
}

int
kn_ask(kn_actor *to, uint32_t type, const void *payload, size_t len,
       int timeout_ms, kn_answer *out)
{
	kn_kernel         *k = to->k;
	kn_pending         p = {.kind = KN_PENDING_SLOT};
	pthread_condattr_t ca;
	struct timespec    ts;
	codec_env          env;
	int64_t            deadline;
	int                rv;

	memset(out, 0, sizeof(*out));
	if (timeout_ms <= 0 || type == MSG_TERM || type == MSG_REPLY) {
		return (MK_EINVAL);
	}
	deadline = kn_deadline_ns(timeout_ms);
	p.corr   = atomic_fetch_add(&k->next_corr, 1) + 1;
	pthread_mutex_init(&p.mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p.cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rv = kn_pending_add(k, &p)) != 0) {
		goto done;
	}
	atomic_fetch_add(&k->n_asks, 1);
	env = (codec_env) {
	        .type        = type,
	        .corr        = p.corr,
	        .sender      = "",
	        .deadline    = deadline,
	        .payload     = payload,
	        .payload_len = len,
	};
	if ((rv = kn_send_env(to, &env)) != 0 &&
	    kn_pending_take(k, p.corr) != NULL) {
		goto done; /* never sent, nobody else has it */
	}
	ts.tv_sec  = deadline / KN_NS_PER_S;
	ts.tv_nsec = deadline % KN_NS_PER_S;
	pthread_mutex_lock(&p.mtx);
	while (!p.done) {
		if (pthread_cond_timedwait(&p.cv, &p.mtx, &ts) == ETIMEDOUT) {
			break;
		}
	}
	pthread_mutex_unlock(&p.mtx);
	if (!p.done && kn_pending_take(k, p.corr) != NULL) {
		rv = MK_ETIMEDOUT; /* we took it back: a reply is late */
		goto done;
	}
	/* Someone took it and is completing it right now. */
	pthread_mutex_lock(&p.mtx);
	while (!p.done) {
		pthread_cond_wait(&p.cv, &p.mtx);
	}
	pthread_mutex_unlock(&p.mtx);
	rv          = p.status;
	out->status = p.status;
	out->data   = p.data;
	out->len    = p.len;
done:
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mtx);
	return (rv);
}

int
kn_ask_cb(kn_actor *to, uint32_t type, const void *payload, size_t len,
          int timeout_ms, kn_answer_fn fn, void *arg)
{
	kn_kernel  *k = to->k;
	kn_pending *p;
	codec_env   env;
	int         rv;

	if (timeout_ms <= 0 || fn == NULL || type == MSG_TERM ||
	    type == MSG_REPLY) {
		return (MK_EINVAL);
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		return (MK_ENOMEM);
	}
	p->kind   = KN_PENDING_FN;
	p->corr   = atomic_fetch_add(&k->next_corr, 1) + 1;
	p->fn     = fn;
	p->fn_arg = arg;
	if ((rv = kn_pending_add(k, p)) != 0) {
		free(p);
		return (rv);
	}
	atomic_fetch_add(&k->n_asks, 1);
	env = (codec_env) {
	        .type        = type,
	        .corr        = p->corr,
	        .sender      = "",
	        .deadline    = kn_deadline_ns(timeout_ms),
	        .payload     = payload,
	        .payload_len = len,
	};
	if ((rv = kn_send_env(to, &env)) != 0) {
		if (kn_pending_take(k, p->corr) == NULL) {
			return (0); /* closing took it: fn ran (MK_ECLOSED) */
		}
		free(p);
		return (rv);
	}
	return (0);
}
