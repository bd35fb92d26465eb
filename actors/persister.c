/*
 * persister.c - the persistence actor (see persister.h).
 *
 * DESIGN: one thread owns the store handle.  Writes queue in memory in
 * arrival order (per-sender order is the kernel's) and are applied in one
 * transaction per flush; a failed flush keeps the queue and retries.
 */
#include "actors/persister.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/kernel/log.h"
#include "codec/mp.h"
#include "persist/store.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000

typedef struct op {
	uint32_t   type; /* MSG_PS_CLIENT_PUT, _DEL or _TOOLS_PUT */
	char      *id;   /* client id */
	char      *a;    /* name, or hash */
	char      *b;    /* config, or tools */
	struct op *next; /* queue */
} op;

typedef struct ps_self {
	kn_actor  *self;     /* this actor */
	store     *st;       /* the write handle */
	kn_stream *stream;   /* "store" messages */
	op        *head;     /* queued writes, oldest first */
	op        *tail;     /* newest */
	unsigned   queued;   /* ops in the queue */
	uint64_t   timer;    /* flush timer, 0 none */
	int64_t    retry_ms; /* backoff while failing, 0 when healthy */
	uint64_t   flushes;  /* transactions committed */
	uint64_t   failures; /* flushes that failed */
} ps_self;

static void
op_free(op *o)
{
	free(o->id);
	free(o->a);
	free(o->b);
	free(o);
}

static void
publish_health(ps_self *ps, const char *error)
{
	mp_w w;

	mp_w_init(&w);
	mp_map(&w, 2);
	mp_kv_bool(&w, "healthy", error == NULL);
	mp_kv_str(&w, "error", error != NULL ? error : "");
	kn_stream_publish(ps->stream, "store", w.sb.data, w.sb.size);
	mp_w_fini(&w);
}

static int
apply(ps_self *ps, op *o)
{
	bool written;

	switch (o->type) {
	case MSG_PS_CLIENT_PUT:
		return (store_client_put(ps->st, o->id, o->a, o->b));
	case MSG_PS_CLIENT_DEL:
		return (store_client_del(ps->st, o->id));
	default:
		return (store_tools_put(ps->st, o->id, o->a, o->b, &written));
	}
}

static void flush_tick(kn_actor *self, void *arg);

/* Applies the whole queue in one transaction.  Returns 0 or an error
 * (the queue is kept for a retry). */
static int
flush(ps_self *ps)
{
	int rv;

	if (ps->timer != 0) {
		kn_timer_cancel(ps->self, ps->timer);
		ps->timer = 0;
	}
	if (ps->head == NULL) {
		return (0);
	}
	if ((rv = store_begin(ps->st)) == 0) {
		for (op *o = ps->head; o != NULL && rv == 0; o = o->next) {
			if ((rv = apply(ps, o)) == MK_EINVAL) {
				/* refused by the schema: reported, not retried
				 */
				KN_ERROR("persister", "write dropped: %s",
				         store_error(ps->st));
				ps->failures++;
				rv = 0;
			}
		}
		if (rv == 0) {
			rv = store_commit(ps->st);
		}
		if (rv != 0) {
			store_rollback(ps->st);
		}
	}
	if (rv != 0) {
		ps->failures++;
		if (ps->retry_ms == 0) {
			/* once per failure run */
			KN_WARN("persister",
			        "%s; serving from memory, retrying",
			        store_error(ps->st));
			publish_health(ps, store_error(ps->st));
			ps->retry_ms = RETRY_MIN_MS;
		} else if ((ps->retry_ms *= 2) > RETRY_MAX_MS) {
			ps->retry_ms = RETRY_MAX_MS;
		}
		ps->timer =
		        kn_timer_add(ps->self, ps->retry_ms, flush_tick, ps);
		return (rv);
	}
	while (ps->head != NULL) {
		op *o    = ps->head;
		ps->head = o->next;
		op_free(o);
	}
	ps->tail   = NULL;
	ps->queued = 0;
	ps->flushes++;
	if (ps->retry_ms != 0) {
		ps->retry_ms = 0;
		KN_INFO("persister", "store is writable again");
		publish_health(ps, NULL);
	}
	return (0);
}

static void
flush_tick(kn_actor *self, void *arg)
{
	ps_self *ps = arg;

	ps->timer = 0;
	(void)flush(ps);
}

static void
enqueue(ps_self *ps, kn_msg *msg)
{
	op  *o = calloc(1, sizeof(*o));
	mp_r r;

	if (o == NULL) {
		KN_ERROR("persister", "out of memory: a write was lost");
		return;
	}
	o->type = msg->env.type;
	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	o->id = mp_dup_str(mp_get(&r, "id"));
	if (o->type == MSG_PS_CLIENT_PUT) {
		o->a = mp_dup_str(mp_get(&r, "name"));
		o->b = mp_dup_str(mp_get(&r, "config"));
	} else if (o->type == MSG_PS_TOOLS_PUT) {
		o->a = mp_dup_str(mp_get(&r, "hash"));
		o->b = mp_dup_str(mp_get(&r, "tools"));
	}
	mp_r_close(&r);
	assert(o->id != NULL); /* internal messages: always complete */
	if (ps->tail != NULL) {
		ps->tail->next = o;
	} else {
		ps->head = o;
	}
	ps->tail = o;
	if (++ps->queued >= PS_BATCH_MAX && ps->retry_ms == 0) {
		(void)flush(ps);
	} else if (ps->timer == 0) {
		ps->timer =
		        kn_timer_add(ps->self, PS_FLUSH_MS, flush_tick, ps);
	}
}

static int
add_client(void *arg, const char *id, const char *name, const char *config,
           const char *tools, const char *hash)
{
	json_t *list = arg;
	json_t *cfg  = json_loads(config, 0, NULL);
	json_t *t    = tools != NULL ? json_loads(tools, 0, NULL) : NULL;

	if (cfg == NULL) {
		KN_WARN("persister",
		        "stored client %s has an unreadable "
		        "config: skipped",
		        name);
		json_decref(t);
		return (0);
	}
	json_array_append_new(list,
	                      json_pack("{s:s, s:s, s:o, s:o, s:s?}", "id", id,
	                                "name", name, "config", cfg, "tools",
	                                t != NULL ? t : json_null(), "hash",
	                                hash));
	return (0);
}

static int
on_load(ps_self *ps, kn_msg *msg)
{
	json_t *list = json_array();
	char   *text;
	mp_w    w;
	int     rv;

	(void)flush(ps);
	if ((rv = store_clients_each(ps->st, add_client, list)) != 0) {
		json_decref(list);
		return (kn_reply_error(kn_actor_kernel(ps->self),
		                       kn_defer(msg), rv, "%s",
		                       store_error(ps->st)));
	}
	text = json_dumps(list, JSON_COMPACT);
	json_decref(list);
	mp_w_init(&w);
	mp_map(&w, 1);
	mp_kv_str(&w, "clients", text != NULL ? text : "[]");
	rv = kn_reply(ps->self, msg, 0, w.sb.data, w.sb.size);
	mp_w_fini(&w);
	free(text);
	return (rv);
}

static int
on_stats(ps_self *ps, kn_msg *msg)
{
	mp_w w;
	int  rv;

	(void)flush(ps); /* count what was asked for, not what waits */
	mp_w_init(&w);
	mp_map(&w, 3);
	mp_kv_int(&w, "tool_writes", (int64_t)store_tool_writes(ps->st));
	mp_kv_int(&w, "flushes", (int64_t)ps->flushes);
	mp_kv_int(&w, "failures", (int64_t)ps->failures);
	rv = kn_reply(ps->self, msg, 0, w.sb.data, w.sb.size);
	mp_w_fini(&w);
	return (rv);
}

static int
ps_init(kn_actor *self, void *arg, void **statep)
{
	const ps_args *a = arg;
	ps_self       *ps;
	char           err[STORE_ERR_MAX];
	int            rv;

	if ((ps = calloc(1, sizeof(*ps))) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = store_open(&ps->st, a->path, false, err, sizeof(err))) !=
	    0) {
		KN_ERROR("persister", "%s", err);
		free(ps);
		return (rv);
	}
	ps->self   = self;
	ps->stream = a->stream;
	*statep    = ps;
	return (0);
}

static void
ps_fini(kn_actor *self, void *state)
{
	ps_self *ps = state;

	if (flush(ps) != 0) {
		KN_ERROR("persister",
		         "%u writes could not be stored at "
		         "shutdown: %s",
		         ps->queued, store_error(ps->st));
	}
	while (ps->head != NULL) {
		op *o    = ps->head;
		ps->head = o->next;
		op_free(o);
	}
	store_close(&ps->st);
	free(ps);
}

static int
ps_handle(kn_actor *self, void *state, kn_msg *msg)
{
	ps_self *ps = state;

	switch (msg->env.type) {
	case MSG_PS_CLIENT_PUT:
	case MSG_PS_CLIENT_DEL:
	case MSG_PS_TOOLS_PUT:
		enqueue(ps, msg);
		return (0);
	case MSG_PS_LOAD:
		return (on_load(ps, msg));
	case MSG_PS_STATS:
		return (on_stats(ps, msg));
	default:
		assert(!"persister: unexpected message");
		return (MK_EINTERNAL);
	}
}

const kn_actor_ops persister_ops = {
        .init   = ps_init,
        .handle = ps_handle,
        .fini   = ps_fini,
};
