/*
 * kernel.c - the kernel object: registry, pending asks, counters.
 *
 * DESIGN: reg_mtx guards the name registry and the list of running actors;
 * each of KN_SHARDS mutexes guards its slice of the pending-ask table.  No
 * lock is held while calling out (sends, callbacks), and no two of these
 * locks are ever held together.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/kernel/kernel_impl.h"
#include "actors/kernel/log.h"
#include "codec/mp.h"

static atomic_uint kernel_ids;

int
kn_map_nng(int rv)
{
	switch (rv) {
	case 0:
		return (0);
	case NNG_ENOMEM:
		return (MK_ENOMEM);
	case NNG_ETIMEDOUT:
	case NNG_EAGAIN:
		return (MK_ETIMEDOUT);
	case NNG_ECLOSED:
	case NNG_ECANCELED:
		return (MK_ECLOSED);
	case NNG_EINVAL:
		return (MK_EINVAL);
	case NNG_EMSGSIZE:
		return (MK_ETOOBIG);
	default:
		return (MK_ESYS);
	}
}

int
kn_kernel_open(kn_kernel **kp, size_t stack_size)
{
	kn_kernel *k;

	if (stack_size == 0) {
		stack_size = KN_STACK_DEFAULT;
	}
	if (stack_size < KN_STACK_MIN) {
		return (MK_EINVAL);
	}
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		return (MK_ENOMEM);
	}
	atomic_init(&k->refs, 1);
	k->id         = atomic_fetch_add(&kernel_ids, 1) + 1;
	k->stack_size = stack_size;
	pthread_mutex_init(&k->reg_mtx, NULL);
	for (int i = 0; i < KN_SHARDS; i++) {
		pthread_mutex_init(&k->shards[i].mtx, NULL);
	}
	*kp = k;
	return (0);
}

void
kn_kernel_hold(kn_kernel *k)
{
	atomic_fetch_add(&k->refs, 1);
}

void
kn_kernel_release(kn_kernel *k)
{
	if (atomic_fetch_sub(&k->refs, 1) != 1) {
		return;
	}
	for (int i = 0; i < KN_SHARDS; i++) {
		assert(k->shards[i].map.count == 0);
		idmap_fini(&k->shards[i].map);
		pthread_mutex_destroy(&k->shards[i].mtx);
	}
	strmap_fini(&k->reg);
	strmap_fini(&k->aliases);
	pthread_mutex_destroy(&k->reg_mtx);
	free(k);
}

void
kn_kernel_close(kn_kernel **kp)
{
	kn_kernel *k;

	if (kp == NULL || (k = *kp) == NULL) {
		return;
	}
	*kp = NULL;
	atomic_store(&k->closing, true);
	for (;;) {
		kn_actor *a;

		pthread_mutex_lock(&k->reg_mtx);
		if ((a = k->newest) != NULL) {
			kn_actor_hold(a);
		}
		pthread_mutex_unlock(&k->reg_mtx);
		if (a == NULL) {
			break;
		}
		kn_stop(a);
		kn_actor_release(&a);
	}
	/* Whatever is still pending can no longer be answered. */
	for (int i = 0; i < KN_SHARDS; i++) {
		for (;;) {
			kn_pending *p;

			pthread_mutex_lock(&k->shards[i].mtx);
			p = idmap_pop(&k->shards[i].map, NULL);
			pthread_mutex_unlock(&k->shards[i].mtx);
			if (p == NULL) {
				break;
			}
			kn_pending_complete(k, p, MK_ECLOSED, NULL, 0);
		}
	}
	kn_kernel_release(k);
}

kn_logger *
kn_kernel_log(kn_kernel *k)
{
	return (&k->log);
}

void
kn_kernel_stats(kn_kernel *k, mk_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->actors         = atomic_load(&k->n_actors);
	out->messages       = atomic_load(&k->n_messages);
	out->asks           = atomic_load(&k->n_asks);
	out->late_replies   = atomic_load(&k->n_late);
	out->expired        = atomic_load(&k->n_expired);
	out->handler_errors = atomic_load(&k->n_errors);
}

/* The actor with that name or alias, or NULL. */
static kn_actor *
find_locked(kn_kernel *k, const char *name)
{
	strmap_ent *e;

	if ((e = strmap_get(&k->reg, name)) != NULL) {
		return (STRMAP_OF(e, kn_actor, reg_ent));
	}
	if ((e = strmap_get(&k->aliases, name)) != NULL) {
		return (STRMAP_OF(e, kn_actor, alias_ent));
	}
	return (NULL);
}

int
kn_alias(kn_actor *a, const char *alias)
{
	kn_kernel *k  = a->k;
	int        rv = 0;

	if (alias == NULL || *alias == '\0' || strlen(alias) > KN_ALIAS_MAX) {
		return (MK_EINVAL);
	}
	pthread_mutex_lock(&k->reg_mtx);
	if (!a->listed) {
		rv = MK_ECLOSED;
	} else if (a->alias[0] != '\0' || find_locked(k, alias) != NULL) {
		rv = MK_EEXIST;
	} else {
		snprintf(a->alias, sizeof(a->alias), "%s", alias);
		a->alias_ent.key = a->alias;
		if ((rv = strmap_put(&k->aliases, &a->alias_ent)) != 0) {
			a->alias[0] = '\0';
		}
	}
	pthread_mutex_unlock(&k->reg_mtx);
	return (rv);
}

/* Unlinks the actor's alias, if it has one. */
static void
alias_remove_locked(kn_kernel *k, kn_actor *a)
{
	if (a->alias[0] == '\0') {
		return;
	}
	strmap_del(&k->aliases, &a->alias_ent);
	a->alias[0] = '\0';
}

int
kn_registry_add(kn_kernel *k, kn_actor *a)
{
	int rv = 0;

	a->reg_ent.key = a->name;
	pthread_mutex_lock(&k->reg_mtx);
	if (atomic_load(&k->closing)) {
		rv = MK_ECLOSED;
		goto out;
	}
	if (find_locked(k, a->name) != NULL) {
		rv = MK_EEXIST;
		goto out;
	}
	if ((rv = strmap_put(&k->reg, &a->reg_ent)) != 0) {
		goto out;
	}
	a->older = k->newest;
	a->newer = NULL;
	if (k->newest != NULL) {
		k->newest->newer = a;
	}
	k->newest = a;
	a->listed = true;
	kn_actor_hold(a);
	atomic_fetch_add(&k->n_actors, 1);
out:
	pthread_mutex_unlock(&k->reg_mtx);
	return (rv);
}

void
kn_registry_remove(kn_kernel *k, kn_actor *a)
{
	bool was;

	pthread_mutex_lock(&k->reg_mtx);
	if ((was = a->listed)) {
		strmap_del(&k->reg, &a->reg_ent);
		alias_remove_locked(k, a);
		if (a->newer != NULL) {
			a->newer->older = a->older;
		} else {
			k->newest = a->older;
		}
		if (a->older != NULL) {
			a->older->newer = a->newer;
		}
		a->listed = false;
		atomic_fetch_sub(&k->n_actors, 1);
	}
	pthread_mutex_unlock(&k->reg_mtx);
	if (was) {
		kn_actor_release(&a);
	}
}

int
kn_lookup(kn_kernel *k, const char *name, kn_actor **ap)
{
	kn_actor *a;

	pthread_mutex_lock(&k->reg_mtx);
	if ((a = find_locked(k, name)) != NULL) {
		kn_actor_hold(a);
	}
	pthread_mutex_unlock(&k->reg_mtx);
	*ap = a;
	return (a != NULL ? 0 : MK_ENOENT);
}

static kn_shard *
shard_of(kn_kernel *k, uint64_t corr)
{
	return (&k->shards[corr % KN_SHARDS]);
}

int
kn_pending_add(kn_kernel *k, kn_pending *p)
{
	kn_shard *s = shard_of(k, p->corr);
	int       rv;

	pthread_mutex_lock(&s->mtx);
	/* checked under the shard lock: close drains after setting it */
	rv = atomic_load(&k->closing) ? MK_ECLOSED
	                              : idmap_put(&s->map, p->corr, p);
	pthread_mutex_unlock(&s->mtx);
	return (rv);
}

kn_pending *
kn_pending_take(kn_kernel *k, uint64_t corr)
{
	kn_shard   *s = shard_of(k, corr);
	kn_pending *p;

	pthread_mutex_lock(&s->mtx);
	p = idmap_del(&s->map, corr);
	pthread_mutex_unlock(&s->mtx);
	return (p);
}

/* Completes p, which the caller has taken out of its shard. */
void
kn_pending_complete(kn_kernel *k, kn_pending *p, int status, const void *data,
                    size_t len)
{
	if (p->kind == KN_PENDING_ACTOR) {
		codec_env env = {
		        .type        = MSG_REPLY,
		        .corr        = p->corr,
		        .sender      = "",
		        .status      = status,
		        .payload     = data,
		        .payload_len = len,
		};
		kn_actor *asker = p->asker;

		/* A stopping asker refuses it: its callback already got
		 * (or is about to get) MK_ECLOSED. */
		if (kn_send_env(asker, &env) != 0) {
			atomic_fetch_add(&k->n_late, 1);
		}
		kn_actor_release(&asker);
		free(p);
		return;
	}
	if (p->kind == KN_PENDING_FN) {
		p->fn(p->fn_arg, status, data, len);
		free(p);
		return;
	}
	void *copy = NULL;
	if (len != 0) {
		if ((copy = malloc(len)) == NULL) {
			status = MK_ENOMEM;
			len    = 0;
		} else {
			memcpy(copy, data, len);
		}
	}
	pthread_mutex_lock(&p->mtx);
	p->status = status;
	p->data   = copy;
	p->len    = len;
	p->done   = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mtx);
	/* p may be gone now: the waiter owns it */
}

int
kn_reply_corr(kn_kernel *k, uint64_t corr, int status, const void *data,
              size_t len)
{
	kn_pending *p = kn_pending_take(k, corr);

	if (p == NULL) {
		atomic_fetch_add(&k->n_late, 1);
		return (MK_ENOENT);
	}
	kn_pending_complete(k, p, status, data, len);
	return (0);
}

CODEC_MSG_FIELDS(kn_error_msg, KN_ERROR_FIELDS);

/* sent frees b, the packed message of the fields f, and returns rv. */
static int
sent(const codec_fields *f, msgpack_sbuffer *b, int rv)
{
	codec_msg_wipe(f, b);
	return (rv);
}

int
kn_reply_msg(kn_kernel *k, uint64_t corr, int status, const codec_fields *f,
             const void *m)
{
	msgpack_sbuffer b = codec_msg_packed(f, m);

	return (sent(f, &b, kn_reply_corr(k, corr, status, b.data, b.size)));
}

#ifndef NDEBUG
/* Whether f are the fields to's list gives type (any, for an actor
 * without routes or a type not routed: the kernel's own). */
static bool
typed(const kn_actor *to, uint32_t type, const codec_fields *f)
{
	size_t              i;
	const codec_msgdef *def = kn_route_of(to, type, &i);

	return (def == NULL || def->req == f);
}
#endif

int
kn_tell_msg(kn_actor *to, kn_actor *from, uint32_t type, const codec_fields *f,
            const void *m)
{
	msgpack_sbuffer b;

	assert(typed(to, type, f));
	b = codec_msg_packed(f, m);

	return (sent(f, &b, kn_tell(to, from, type, b.data, b.size)));
}

int
kn_ask_msg(kn_actor *to, uint32_t type, const codec_fields *f, const void *m,
           int timeout_ms, kn_answer *out)
{
	msgpack_sbuffer b;

	assert(typed(to, type, f));
	b = codec_msg_packed(f, m);

	return (sent(f, &b,
	             kn_ask(to, type, b.data, b.size, timeout_ms, out)));
}

int
kn_ask_async_msg(kn_actor *self, kn_actor *to, uint32_t type,
                 const codec_fields *f, const void *m, int timeout_ms,
                 kn_reply_fn fn, void *arg)
{
	msgpack_sbuffer b;

	assert(typed(to, type, f));
	b = codec_msg_packed(f, m);

	return (sent(f, &b,
	             kn_ask_async(self, to, type, b.data, b.size, timeout_ms,
	                          fn, arg)));
}

int
kn_ask_cb_msg(kn_actor *to, uint32_t type, const codec_fields *f,
              const void *m, int timeout_ms, kn_answer_fn fn, void *arg)
{
	msgpack_sbuffer b;

	assert(typed(to, type, f));
	b = codec_msg_packed(f, m);

	return (sent(
	        f, &b,
	        kn_ask_cb(to, type, b.data, b.size, timeout_ms, fn, arg)));
}

int
kn_reply_verror(kn_kernel *k, uint64_t corr, int status, const char *fmt,
                va_list ap)
{
	char         msg[1024];
	kn_error_msg m = {.error = msg};

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return (kn_reply_msg(k, corr, status, &kn_error_msg_fields, &m));
}

char *
kn_error_text(const void *data, size_t len)
{
	kn_error_msg m;

	return (kn_error_msg_unpack(data, len, &m) == 0 ? m.error : NULL);
}

int
kn_reply_why(kn_actor *self, uint64_t corr, int status, const char *fmt, ...)
{
	va_list ap;
	int     rv;

	va_start(ap, fmt);
	rv = kn_reply_verror(kn_actor_kernel(self), corr, status, fmt, ap);
	va_end(ap);
	return (rv);
}

int
kn_reply_error(kn_kernel *k, uint64_t corr, int status, const char *fmt, ...)
{
	va_list ap;
	int     rv;

	va_start(ap, fmt);
	rv = kn_reply_verror(k, corr, status, fmt, ap);
	va_end(ap);
	return (rv);
}
