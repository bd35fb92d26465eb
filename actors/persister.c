/*
 * persister.c - the persistence actor (see persister.h).
 *
 * DESIGN: one thread owns the store handles.  Writes queue in memory in
 * arrival order (per-sender order is the kernel's) and are applied in one
 * transaction per flush; a failed flush keeps the queue and retries.  A
 * map from each queued row's key to its op lets a newer write to the same
 * row replace the older one in place.  A client's delete reaches into
 * other rows (its tools and credentials), so it ends coalescing: writes
 * after it queue behind it.  Durable asks wait in a list until the flush
 * that carries their write commits or fails.  An acknowledged change's
 * writes carry its ticket and never coalesce: when the flush that should
 * make them durable fails they leave the queue (answered MK_ESTORE), so
 * nothing the caller was told is refused lands later; the rest of the
 * queue is kept and retried.
 */
#include "actors/persister.h"

#include <assert.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "codec/idmap.h"
#include "codec/mp.h"
#include "codec/strmap.h"
#include "codec/text.h"
#include "persist/store.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000

typedef struct op {
	uint32_t type;      /* MSG_PS_CLIENT_PUT, _DEL, _TOOLS_PUT, _ROW_* */
	char    *key;       /* the row it writes, for coalescing, or NULL */
	uint64_t hkey;      /* strmap_hash of key (idmap id) */
	char    *id;        /* client id */
	char    *a;         /* name, or hash */
	char    *b;         /* config, or tools */
	char    *c;         /* tools: the versions to append, JSON array
	                     * text (those of the writes folded in), or NULL */
	int        table;   /* row ops: the store_table */
	json_t    *row;     /* row ops: the row, or the key to delete */
	uint64_t   ticket;  /* the acknowledged change it is part of, 0 */
	bool       refused; /* the schema refused it: dropped */
	struct op *next;    /* queue */
} op;

typedef struct waiter {
	uint64_t corr;         /* the deferred ask */
	op      *o;            /* its write (valid until the flush ends), or
	                        * NULL for a sync */
	uint64_t       ticket; /* a sync's: the change it waits for, 0 */
	struct waiter *next;   /* list */
} waiter;

typedef struct ps_self {
	kn_actor *self;        /* this actor */
	store    *st;          /* the write handle, NULL while unavailable */
	store    *ro;          /* a read handle while st is NULL, or NULL */
	char     *path;        /* the database file or URL (may hold a
	                        * password: never logged) */
	char        name[256]; /* the store as shown: store_display */
	const char *node;      /* this node (ps_args), or NULL */
	char       *secret;    /* the encryption key text, or NULL */
	kn_stream  *stream;    /* "store" messages */
	op         *head;      /* queued writes, oldest first */
	op         *tail;      /* newest */
	unsigned    queued;    /* ops in the queue */
	idmap       rows;      /* hkey -> queued op, for coalescing */
	waiter     *waiters;   /* durable asks for the next flush */
	uint64_t    timer;     /* flush timer, 0 none */
	int64_t     timer_at;  /* when it fires, monotonic ms */
	int64_t     retry_ms;  /* backoff while failing, 0 when healthy */
	uint64_t    flushes;   /* transactions committed */
	uint64_t    failures;  /* flushes that failed */
	uint64_t    dropped;   /* writes the schema refused */
	char        error[STORE_ERR_MAX]; /* the failure, "" when healthy */
} ps_self;

static void
op_clear(op *o)
{
	free(o->key);
	free(o->id);
	free(o->a);
	free(o->b);
	free(o->c);
	json_decref(o->row);
}

static void
op_free(op *o)
{
	op_clear(o);
	free(o);
}

static void
publish_health(ps_self *ps)
{
	ps_store_event ev = {.healthy = ps->error[0] == '\0',
	                     .error   = ps->error};

	kn_stream_publish_msg(ps->stream, "store",
	                      CODEC_OF(ps_store_event, &ev));
}

static void flush_tick(kn_actor *self, void *arg);

/* Arms the flush timer to fire within ms (an earlier one is kept). */
static void
arm(ps_self *ps, int64_t ms)
{
	int64_t at = kn_now_ns() / KN_NS_PER_MS + ms;

	if (ps->timer != 0) {
		if (ps->timer_at <= at) {
			return;
		}
		kn_timer_cancel(ps->self, ps->timer);
	}
	ps->timer    = kn_timer_add(ps->self, ms, flush_tick, ps);
	ps->timer_at = at;
}

/* Enters (or stays in) a failure run: logged and published once. */
static void
failing(ps_self *ps, const char *why)
{
	ps->failures++;
	snprintf(ps->error, sizeof(ps->error), "%s", why);
	if (ps->retry_ms == 0) {
		KN_WARN("persister", "%s; serving from memory, retrying", why);
		publish_health(ps);
		ps->retry_ms = RETRY_MIN_MS;
	} else if ((ps->retry_ms *= 2) > RETRY_MAX_MS) {
		ps->retry_ms = RETRY_MAX_MS;
	}
	if (ps->head != NULL || ps->st == NULL) {
		arm(ps, ps->retry_ms); /* (nothing to retry: the next write) */
	}
}

static void
recovered(ps_self *ps)
{
	if (ps->retry_ms != 0) {
		ps->retry_ms = 0;
		ps->error[0] = '\0';
		KN_INFO("persister", "store %s is writable again", ps->name);
		publish_health(ps);
	}
}

/* Opens the write handle.  Returns 0 or the failure, text in err. */
static int
open_rw(ps_self *ps, char *err, size_t errlen)
{
	int rv = store_open(&ps->st, ps->path, STORE_RW, ps->secret, err,
	                    errlen);

	if (rv == 0 && ps->node != NULL &&
	    (rv = store_set_node(ps->st, ps->node)) != 0) {
		snprintf(err, errlen, "out of memory");
		store_close(&ps->st);
	}
	if (rv == 0) {
		store_close(&ps->ro);
		if (!store_sealed(ps->st)) {
			KN_WARN("persister",
			        "store %s: no encryption key set (MCPKEEP_ENCRYPTION_KEY): secrets are stored unencrypted",
			        ps->name);
		}
	}
	return (rv);
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
	case MSG_PS_TOOLS_PUT:
		return (store_tools_put(ps->st, o->id, o->a, o->b, o->c,
		                        &written));
	case MSG_PS_ROW_PUT:
		return (store_row_put(ps->st, (store_table)o->table, o->row));
	default:
		return (store_row_del(ps->st, (store_table)o->table, o->row));
	}
}

/* Takes o out of the queue and frees it (a ticketed op: not in rows). */
static void
unqueue(ps_self *ps, op *o)
{
	op **pp = &ps->head, *prev = NULL;

	while (*pp != o) {
		prev = *pp;
		pp   = &(*pp)->next;
	}
	*pp = o->next;
	if (ps->tail == o) {
		ps->tail = prev;
	}
	ps->queued--;
	op_free(o);
}

/* Takes the tool lists queued for client id out of the queue (but
 * keep): its refused config's, which must not land either. */
static void
drop_tools(ps_self *ps, const char *id, const op *keep)
{
	op *next;

	for (op *p = ps->head; p != NULL; p = next) {
		next = p->next;
		if (p != keep && p->type == MSG_PS_TOOLS_PUT &&
		    strcmp(p->id, id) == 0) {
			unqueue(ps, p);
		}
	}
}

/* Takes o (an ask's write), else the client writes of ticket (a sync's:
 * the supervisor's tickets), out of the queue: their change was refused.
 * Returns how many. */
static unsigned
drop_ticket(ps_self *ps, uint64_t ticket, op *o)
{
	unsigned n = 0;
	op      *next;

	if (o != NULL) {
		unqueue(ps, o);
		return (1);
	}
	for (op *p = ps->head; p != NULL; p = next) {
		next = p->next;
		if (p->ticket == ticket &&
		    (p->type == MSG_PS_CLIENT_PUT ||
		     p->type == MSG_PS_CLIENT_DEL)) {
			if (p->type == MSG_PS_CLIENT_PUT) {
				drop_tools(ps, p->id, p);
				next = p->next;
			}
			unqueue(ps, p);
			n++;
		}
	}
	return (n);
}

/* Answers every durable ask: rv 0 stored (or refused), else why not.
 * Failed, an acknowledged change's writes leave the queue (refused); a
 * sync whose change has no write left waiting landed before. */
static void
answer_waiters(ps_self *ps, int rv, const char *why)
{
	kn_kernel *k = kn_actor_kernel(ps->self);

	while (ps->waiters != NULL) {
		waiter  *w   = ps->waiters;
		op      *o   = w->o != NULL && w->o->ticket != 0 ? w->o : NULL;
		uint64_t tkt = o != NULL ? o->ticket : w->ticket;
		ps->waiters  = w->next;
		if (rv != 0 && tkt != 0 && drop_ticket(ps, tkt, o) == 0) {
			/* its writes landed in an earlier flush */
			kn_reply_corr(k, w->corr, 0, CODEC_EMPTY,
			              CODEC_EMPTY_LEN);
		} else if (rv != 0 && tkt != 0) {
			kn_reply_error(
			        k, w->corr, MK_ESTORE,
			        "the store cannot write: %s; free space on the store's file system or make it writable, then try again",
			        why);
		} else if (rv != 0) {
			kn_reply_error(
			        k, w->corr, MK_ESYS,
			        "not stored yet (%s): kept in memory and retried",
			        why);
		} else if (w->o != NULL && w->o->refused) {
			kn_reply_error(k, w->corr, MK_EINVAL,
			               "write refused by the store");
		} else {
			kn_reply_corr(k, w->corr, 0, CODEC_EMPTY,
			              CODEC_EMPTY_LEN);
		}
		free(w);
	}
}

/* Applies the whole queue in one transaction (durable when an ask waits
 * for it).  Returns 0 or an error (the queue is kept for a retry). */
static int
flush(ps_self *ps)
{
	char     err[STORE_ERR_MAX];
	int      rv     = 0;
	bool     opened = false;
	unsigned wrote  = 0;

	if (ps->timer != 0) {
		kn_timer_cancel(ps->self, ps->timer);
		ps->timer = 0;
	}
	if (ps->st == NULL) {
		if ((rv = open_rw(ps, err, sizeof(err))) != 0) {
			goto failed;
		}
		opened = true;
	}
	if (ps->head == NULL) {
		/* nothing written: writable again only if it opened now (a
		 * failing store with nothing queued says so at its next
		 * write) */
		if (opened) {
			recovered(ps);
		}
		answer_waiters(ps, 0, NULL);
		return (0);
	}
	/* a write the schema refuses is reported and dropped, not retried;
	 * the transaction starts again without it (on PostgreSQL a failed
	 * statement aborts the rest of its transaction) */
	while ((rv = store_begin(ps->st, ps->waiters != NULL)) == 0) {
		op *bad = NULL;
		wrote   = 0;
		for (op *o = ps->head; o != NULL && rv == 0; o = o->next) {
			if (!o->refused && (rv = apply(ps, o)) == MK_EINVAL) {
				bad = o;
			}
			wrote += !o->refused && rv == 0;
		}
		if (bad != NULL) {
			KN_ERROR("persister", "write dropped: %s",
			         store_error(ps->st));
			store_rollback(ps->st);
			bad->refused = true;
			ps->dropped++;
			continue;
		}
		if (rv == 0) {
			rv = store_commit(ps->st);
		}
		if (rv != 0) {
			store_rollback(ps->st);
		}
		break;
	}
	if (rv != 0) {
		snprintf(err, sizeof(err), "%s", store_error(ps->st));
		for (op *o = ps->head; o != NULL; o = o->next) {
			o->refused = false; /* rolled back: tried again */
		}
		goto failed;
	}
	answer_waiters(ps, 0, NULL);
	while (ps->head != NULL) {
		op *o    = ps->head;
		ps->head = o->next;
		op_free(o);
	}
	ps->tail   = NULL;
	ps->queued = 0;
	idmap_fini(&ps->rows);
	ps->flushes++;
	if (wrote > 0 || opened) {
		recovered(ps); /* (only refused writes: nothing proved) */
	}
	return (0);
failed:
	answer_waiters(ps, rv, err);
	failing(ps, err);
	return (rv);
}

static void
flush_tick(kn_actor *self, void *arg)
{
	ps_self *ps = arg;

	ps->timer = 0;
	(void)flush(ps);
}

/* Queues o, or folds it into a queued write of the same row; returns the
 * op that now carries the write. */
static op *
queue(ps_self *ps, op *o)
{
	op *old = o->key != NULL ? idmap_get(&ps->rows, o->hkey) : NULL;

	if (o->ticket != 0) {
		/* its own: later writes of the row queue behind it */
		if (old != NULL) {
			(void)idmap_del(&ps->rows, o->hkey);
		}
		old = NULL;
	} else if (old != NULL && strcmp(old->key, o->key) == 0) {
		op *next = old->next;
		if (o->type == MSG_PS_TOOLS_PUT && old->c != NULL) {
			/* the versions of both: none is lost */
			char *both =
			        store_versions_add(old->c, o->c, SIZE_MAX);
			if (both != NULL) {
				free(o->c);
				o->c = both;
			}
		}
		op_clear(old);
		*old      = *o;
		old->next = next;
		free(o);
		return (old);
	}
	if (o->type == MSG_PS_CLIENT_DEL) {
		idmap_fini(&ps->rows); /* later writes queue behind it */
	} else if (o->key != NULL && old == NULL && o->ticket == 0 &&
	           idmap_put(&ps->rows, o->hkey, o) != 0) {
		/* out of memory: queued without coalescing */
	}
	if (ps->tail != NULL) {
		ps->tail->next = o;
	} else {
		ps->head = o;
	}
	ps->tail = o;
	ps->queued++;
	return (o);
}

/* Holds the ask msg until the next flush, armed to come at once. */
static int
wait_flush(ps_self *ps, kn_msg *msg, op *o, int64_t ticket)
{
	waiter *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		return (MK_ENOMEM);
	}
	w->corr     = kn_defer(msg);
	w->o        = o;
	w->ticket   = (uint64_t)ticket;
	w->next     = ps->waiters;
	ps->waiters = w;
	arm(ps, 0); /* after the batch of messages being received */
	return (0);
}

/* A new write of msg's type (its fields the caller's to fill), or NULL:
 * out of memory, logged. */
static op *
op_new(const kn_msg *msg)
{
	op *o = calloc(1, sizeof(*o));

	if (o == NULL) {
		KN_ERROR("persister", "out of memory: a write was lost");
		return (NULL);
	}
	o->type = msg->env.type;
	return (o);
}

/* Queues the write o (internal messages are always complete: their
 * handlers assert it); an ask waits for it to be durable. */
static int
enqueue(ps_self *ps, kn_msg *msg, op *o)
{
	if (o->key != NULL) {
		o->hkey = strmap_hash(o->key);
	}
	o = queue(ps, o);
	if (msg->env.corr != 0) {
		return (wait_flush(ps, msg, o, 0)); /* durable */
	}
	if (ps->retry_ms != 0) {
		/* failing: the retry timer is armed */
	} else if (ps->queued >= PS_BATCH_MAX) {
		(void)flush(ps);
	} else {
		arm(ps, PS_FLUSH_MS);
	}
	return (0);
}

static int
on_client_put(kn_actor *self, ps_self *ps, kn_msg *msg, ps_client_msg *m)
{
	op *o = op_new(msg);

	if (o == NULL) {
		return (MK_ENOMEM);
	}
	o->id     = m->id; /* the op owns them now */
	o->a      = m->name;
	o->b      = m->config;
	o->ticket = (uint64_t)m->ticket;
	m->id = m->name = m->config = NULL;
	assert(o->id != NULL && o->a != NULL && o->b != NULL);
	return (enqueue(ps, msg, o));
}

static int
on_client_del(kn_actor *self, ps_self *ps, kn_msg *msg, ps_id_msg *m)
{
	op *o = op_new(msg);

	if (o == NULL) {
		return (MK_ENOMEM);
	}
	o->id     = m->id;
	o->ticket = (uint64_t)m->ticket;
	m->id     = NULL;
	assert(o->id != NULL);
	return (enqueue(ps, msg, o));
}

static int
on_tools_put(kn_actor *self, ps_self *ps, kn_msg *msg, ps_tools_msg *m)
{
	op  *o = op_new(msg);
	char key[STORE_ERR_MAX];

	if (o == NULL) {
		return (MK_ENOMEM);
	}
	o->id = m->id;
	o->a  = m->hash;
	o->b  = m->tools;
	m->id = m->hash = m->tools = NULL;
	if (m->version != NULL && asprintf(&o->c, "[%s]", m->version) < 0) {
		o->c = NULL; /* (the list is stored without) */
	}
	assert(o->id != NULL && o->a != NULL && o->b != NULL);
	snprintf(key, sizeof(key), "mcp_tools\x1f%s", o->id);
	o->key = strdup(key);
	return (enqueue(ps, msg, o));
}

/* A row: {table, row} to put, {table, key} to delete. */
static int
row_op(ps_self *ps, kn_msg *msg, const char *table, const char *text,
       int64_t ticket)
{
	op  *o = op_new(msg);
	char key[STORE_ERR_MAX];

	if (o == NULL) {
		return (MK_ENOMEM);
	}
	o->ticket = (uint64_t)ticket;
	o->table  = table != NULL ? store_table_find(table) : -1;
	o->row    = text != NULL ? json_loads(text, 0, NULL) : NULL;
	assert(o->table >= 0 && json_is_object(o->row));
	if (store_row_key((store_table)o->table, o->row, key, sizeof(key)) ==
	    0) {
		o->key = strdup(key);
	}
	return (enqueue(ps, msg, o));
}

static int
on_row_put(kn_actor *self, ps_self *ps, kn_msg *msg, ps_row_msg *m)
{
	return (row_op(ps, msg, m->table, m->row, m->ticket));
}

static int
on_row_del(kn_actor *self, ps_self *ps, kn_msg *msg, ps_key_msg *m)
{
	return (row_op(ps, msg, m->table, m->key, m->ticket));
}

/* The handle to read from: the write one, or the boot-time read one. */
static store *
reader(ps_self *ps)
{
	if (ps->st != NULL && ps->retry_ms == 0) {
		(void)flush(ps); /* read what was asked to be written */
	}
	return (ps->st != NULL ? ps->st : ps->ro);
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
		        "stored client %s has an unreadable config: skipped",
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
add_row(void *arg, json_t *row)
{
	return (json_array_append(arg, row) == 0 ? 0 : MK_ENOMEM);
}

/* Replies the list as JSON text (ps_clients_msg or ps_rows_msg); an
 * unreadable store reads as empty (the failure is already reported). */
static int
reply_list(ps_self *ps, kn_msg *msg, bool clients, json_t *list)
{
	char          *text      = json_dumps(list, JSON_COMPACT);
	char          *list_text = text != NULL ? text : "[]";
	ps_clients_msg c         = {.clients = list_text};
	ps_rows_msg    r         = {.rows = list_text};
	int            rv;

	rv = kn_reply_msg(kn_actor_kernel(ps->self), kn_defer(msg), 0,
	                  clients ? &ps_clients_msg_fields
	                          : &ps_rows_msg_fields,
	                  clients ? (const void *)&c : (const void *)&r);
	text_secret_free(text); /* rows hold credentials */
	json_decref(list);
	return (rv);
}

/* MSG_PS_LOAD (the clients: table NULL) or MSG_PS_ROWS (a table's
 * rows). */
static int
read_all(ps_self *ps, kn_msg *msg, const char *table)
{
	bool     clients = table == NULL;
	json_t  *list    = json_array();
	store   *s       = reader(ps);
	unsigned skipped = 0;
	int      t = clients ? -1 : store_table_find(table), rv = 0;

	assert(clients || t >= 0);
	if (s != NULL) {
		rv = clients
		        ? store_clients_each(s, add_client, list, &skipped)
		        : store_rows_each(s, (store_table)t, add_row, list,
		                          &skipped);
	}
	if (rv != 0) {
		json_decref(list);
		return (kn_reply_error(kn_actor_kernel(ps->self),
		                       kn_defer(msg), rv, "%s",
		                       store_error(s)));
	}
	if (skipped > 0) {
		KN_WARN("persister", "%u stored %s skipped; the last: %s",
		        skipped, clients ? "clients" : "rows", store_error(s));
	}
	return (reply_list(ps, msg, clients, list));
}

static int
on_load(kn_actor *self, ps_self *ps, kn_msg *msg, codec_no *none)
{
	return (read_all(ps, msg, NULL));
}

static int
on_rows(kn_actor *self, ps_self *ps, kn_msg *msg, ps_table_msg *m)
{
	assert(m->table != NULL);
	return (read_all(ps, msg, m->table));
}

static int
on_sync(kn_actor *self, ps_self *ps, kn_msg *msg, ps_sync_msg *m)
{
	return (wait_flush(ps, msg, NULL, m->ticket));
}

static int
on_row_get(kn_actor *self, ps_self *ps, kn_msg *msg, ps_key_msg *m)
{
	store       *s = reader(ps);
	json_t      *key, *row = NULL;
	ps_found_msg found = {0};
	int          t, rv = 0;

	t   = m->table != NULL ? store_table_find(m->table) : -1;
	key = m->key != NULL ? json_loads(m->key, 0, NULL) : NULL;
	assert(t >= 0 && json_is_object(key));
	if (s != NULL &&
	    (rv = store_row_get(s, (store_table)t, key, &row)) != 0) {
		KN_WARN("persister", "%s", store_error(s));
	}
	json_decref(key);
	found.row        = row != NULL ? json_dumps(row, JSON_COMPACT) : NULL;
	found.unreadable = rv == MK_EPROTO;
	json_decref(row);
	rv = kn_reply_msg(kn_actor_kernel(ps->self), kn_defer(msg),
	                  rv == MK_ESYS ? MK_ESYS : 0, &ps_found_msg_fields,
	                  &found);
	ps_found_msg_clear(&found);
	return (rv);
}

static int
on_versions(kn_actor *self, ps_self *ps, kn_msg *msg, ps_client_id_msg *m)
{
	store          *s   = reader(ps);
	ps_versions_msg out = {0};
	int             rv  = MK_ESYS;

	assert(m->id != NULL);
	if (s != NULL &&
	    (rv = store_tool_versions(s, m->id, &out.json)) != 0) {
		KN_WARN("persister", "%s", store_error(s));
	}
	if (rv != 0) {
		return (kn_reply_error(kn_actor_kernel(ps->self),
		                       kn_defer(msg), rv,
		                       "the store cannot be read"));
	}
	rv = kn_reply_msg(kn_actor_kernel(ps->self), kn_defer(msg), 0,
	                  &ps_versions_msg_fields, &out);
	ps_versions_msg_clear(&out);
	return (rv);
}

/* A refresh lease (store.h: Refresh leases), in queue order. */
static int
on_lease(kn_actor *self, ps_self *ps, kn_msg *msg, ps_lease_msg *m)
{
	store        *s = reader(ps);
	json_t       *row, *now = NULL;
	ps_leased_msg out = {0};
	int           t, rv = MK_ESYS;

	t   = m->table != NULL ? store_table_find(m->table) : -1;
	row = m->row != NULL ? json_loads(m->row, 0, NULL) : NULL;
	if (t < 0 || !json_is_object(row) || m->op == NULL) {
		rv = MK_EINVAL;
	} else if (s == ps->st && s != NULL) {
		if (strcmp(m->op, "take") == 0) {
			rv = store_lease_take(s, (store_table)t, row,
			                      (int)m->ttl_ms, &out.gen, &now);
		} else if (strcmp(m->op, "claim") == 0) {
			rv = store_flow_claim(
			        s,
			        json_string_value(
			                json_object_get(row, "state")),
			        &now);
		} else if (strcmp(m->op, "put") == 0) {
			rv = store_lease_put(s, (store_table)t, row, m->gen,
			                     &out.written);
		} else {
			rv = store_lease_drop(s, (store_table)t, row, m->gen);
		}
		if (rv != 0) {
			KN_WARN("persister", "%s", store_error(s));
		}
	}
	json_decref(row);
	out.row = now != NULL ? json_dumps(now, JSON_COMPACT) : NULL;
	json_decref(now);
	if (rv != 0) {
		rv = kn_reply_why(
		        ps->self, kn_defer(msg), rv, "no refresh lease: %s",
		        s != NULL ? store_error(s) : "the store is not open");
	} else {
		rv = kn_reply_msg(kn_actor_kernel(ps->self), kn_defer(msg), 0,
		                  &ps_leased_msg_fields, &out);
	}
	ps_leased_msg_clear(&out);
	return (rv);
}

static int
on_stats(kn_actor *self, ps_self *ps, kn_msg *msg, codec_no *none)
{
	ps_stats_msg m;

	if (ps->retry_ms == 0 && ps->st != NULL) {
		(void)flush(ps); /* count what was asked for, not what waits */
	}
	m = (ps_stats_msg) {
	        .tool_writes = ps->st != NULL
	                ? (int64_t)store_tool_writes(ps->st)
	                : 0,
	        .flushes     = (int64_t)ps->flushes,
	        .failures    = (int64_t)ps->failures,
	        .dropped     = (int64_t)ps->dropped,
	        .queued      = (int64_t)ps->queued,
	        .healthy     = ps->error[0] == '\0',
	        .sealed      = ps->secret != NULL,
	        .error       = ps->error,
	};
	return (kn_reply_msg(kn_actor_kernel(ps->self), kn_defer(msg), 0,
	                     &ps_stats_msg_fields, &m));
}

static void
ps_free(ps_self *ps)
{
	text_secret_free(ps->secret);
	text_secret_free(ps->path); /* a URL's password */
	free(ps);
}

static int
ps_init(kn_actor *self, void *arg, void **statep)
{
	const ps_args *a = arg;
	ps_self       *ps;
	char           err[STORE_ERR_MAX], rerr[STORE_ERR_MAX];
	int            rv;

	if ((ps = calloc(1, sizeof(*ps))) == NULL ||
	    (ps->path = strdup(a->path)) == NULL ||
	    (a->secret != NULL && *a->secret != '\0' &&
	     (ps->secret = strdup(a->secret)) == NULL)) {
		if (ps != NULL) {
			ps_free(ps);
		}
		return (MK_ENOMEM);
	}
	ps->self   = self;
	ps->stream = a->stream;
	store_display(a->path, ps->name, sizeof(ps->name));
	ps->node = a->node_id;
	if ((rv = open_rw(ps, err, sizeof(err))) == MK_EINVAL ||
	    rv == MK_ENOMEM) {
		/* refused: the operator must act (schema, key) */
		KN_ERROR("persister", "%s", err);
		ps_free(ps);
		return (rv);
	}
	if (rv != 0) {
		/* serve from memory; read what can be read for the boot */
		if (store_open(&ps->ro, ps->path, STORE_RO, ps->secret, rerr,
		               sizeof(rerr)) != 0 &&
		    store_open(&ps->ro, ps->path, STORE_SNAPSHOT, ps->secret,
		               rerr, sizeof(rerr)) != 0) {
			ps->ro = NULL;
		}
		KN_ERROR("persister", "%s%s", err,
		         ps->ro != NULL ? " (restoring from it read-only)"
		                        : "");
		ps->retry_ms = RETRY_MIN_MS;
		ps->failures++;
		snprintf(ps->error, sizeof(ps->error), "%s", err);
		publish_health(ps);
		arm(ps, ps->retry_ms);
	}
	*statep = ps;
	return (0);
}

static void
ps_fini(kn_actor *self, void *state)
{
	ps_self *ps = state;

	if (ps->head != NULL && flush(ps) != 0) {
		KN_ERROR("persister",
		         "%u writes could not be stored at shutdown: %s",
		         ps->queued, ps->error);
	}
	answer_waiters(ps, MK_ECLOSED, "the runtime is closing");
	while (ps->head != NULL) {
		op *o    = ps->head;
		ps->head = o->next;
		op_free(o);
	}
	idmap_fini(&ps->rows);
	store_close(&ps->st);
	store_close(&ps->ro);
	ps_free(ps);
}

/* What holds between two handlers (O(1): on every message): the queue
 * whole and counted, its newest last; a store failing exactly while it
 * retries, and saying why; no write handle only while failing. */
static void
assert_persister_state(const void *state)
{
	const ps_self *ps = state;

	assert((ps->head == NULL) == (ps->tail == NULL) &&
	       (ps->head == NULL) == (ps->queued == 0) &&
	       (ps->tail == NULL || ps->tail->next == NULL));
	assert((ps->retry_ms != 0) == (ps->error[0] != '\0'));
	assert(ps->st != NULL || ps->retry_ms != 0); /* (reopened on it) */
	(void)ps;
}

KN_ROUTES(ps_routes, persister_msgs, PS_MESSAGES);

const kn_actor_ops persister_ops = {
        .routes = &ps_routes,
        .check  = assert_persister_state,
        .init   = ps_init,
        .fini   = ps_fini,
};

CODEC_MSG_FIELDS(ps_client_msg, PS_CLIENT_FIELDS);
CODEC_MSG_FIELDS(ps_id_msg, PS_ID_FIELDS);
CODEC_MSG_FIELDS(ps_tools_msg, PS_TOOLS_FIELDS);
CODEC_MSG_FIELDS(ps_client_id_msg, PS_CLIENT_ID_FIELDS);
CODEC_MSG_FIELDS(ps_versions_msg, PS_VERSIONS_FIELDS);
CODEC_MSG_FIELDS(ps_row_msg, PS_ROW_FIELDS);
CODEC_MSG_FIELDS(ps_key_msg, PS_KEY_FIELDS);
CODEC_MSG_FIELDS(ps_table_msg, PS_TABLE_FIELDS);
CODEC_MSG_FIELDS(ps_clients_msg, PS_CLIENTS_FIELDS);
CODEC_MSG_FIELDS(ps_rows_msg, PS_ROWS_FIELDS);
CODEC_MSG_FIELDS(ps_found_msg, PS_ROW_FOUND_FIELDS);
CODEC_MSG_FIELDS(ps_stats_msg, PS_STATS_FIELDS);
CODEC_MSG_FIELDS(ps_sync_msg, PS_SYNC_FIELDS);
CODEC_MSG_FIELDS(ps_lease_msg, PS_LEASE_FIELDS);
CODEC_MSG_FIELDS(ps_leased_msg, PS_LEASED_FIELDS);
CODEC_MSG_FIELDS(ps_store_event, PS_STORE_EVENT_FIELDS);

CODEC_MSG_DEFS(persister_msgs, PS_MESSAGES);
