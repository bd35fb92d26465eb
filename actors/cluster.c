/*
 * cluster.c - the cluster actor (see cluster.h).
 */
#include "actors/cluster.h"
#include "actors/client/client_msg.h"

#include <assert.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/credential_msg.h"
#include "actors/kernel/log.h"
#include "actors/supervisor/supervisor_msg.h"
#include "codec/text.h"
#include "persist/store.h"

#define RETRY_MS 1000 /* a lost store tried again */

typedef struct cs_self {
	kn_actor *self;
	kn_actor *sv;
	char     *url;    /* may hold a password: never logged */
	char     *secret; /* the encryption key, or NULL */
	char     *node;
	char      name[256]; /* the store as shown */
	store    *st;        /* NULL until opened */
	int       fd;        /* the socket watched, -1 none */
	uint64_t  timer;     /* a retry, 0 none */
	json_t   *seen;      /* id -> true: the stored clients, as last read */
	json_t   *todo;      /* [id, deleted] told, not yet handed over */
	bool      failing;   /* logged as lost */
	bool      told_states; /* another node's states changed */
	int       hb_ms;       /* the heartbeat interval */
	uint64_t  hb_timer;    /* the next heartbeat */
	json_t   *mine;        /* id -> [state, failure|null]: this node's */
	json_t   *dirty;       /* id -> true: not written since it changed */
	msgpack_sbuffer peers; /* the other nodes' states as last handed
	                        * over (packed), .data NULL none */
} cs_self;

static void drain(cs_self *cs);
static void lost(cs_self *cs, const char *why);

static void
on_retry(kn_actor *self, void *arg)
{
	cs_self *cs = arg;

	cs->timer = 0;
	drain(cs);
}

static void
on_readable(kn_actor *self, void *arg, short revents)
{
	drain(arg);
}

/* Watches fd (the connection's socket now) instead of the one before;
 * none: tried again later. */
static void
watch(cs_self *cs, int fd)
{
	if (fd != cs->fd) {
		if (cs->fd >= 0) {
			kn_unwatch_fd(cs->self, cs->fd);
		}
		cs->fd = -1;
		if (fd >= 0 &&
		    kn_watch_fd(cs->self, fd, POLLIN, on_readable, cs) == 0) {
			cs->fd = fd;
		}
	}
	if (cs->fd < 0 && cs->timer == 0) {
		cs->timer = kn_timer_add(cs->self, RETRY_MS, on_retry, cs);
	}
}

/* Hands one client to the supervisor (config NULL: deleted). */
static void
hand_over(cs_self *cs, const char *id, const char *config, const char *tools)
{
	sv_sync_msg m = {.id     = (char *)id,
	                 .config = (char *)config,
	                 .tools  = (char *)tools};

	if (kn_tell_msg(cs->sv, cs->self, MSG_SV_SYNC,
	                CODEC_OF(sv_sync_msg, &m)) != 0) {
		KN_ERROR("cluster", "client %s: the change was not applied",
		         id);
	}
}

static int
on_client(void *arg, const char *id, const char *name, const char *config,
          const char *tools, const char *hash)
{
	cs_self *cs = arg;

	json_object_set_new(cs->seen, id, json_true());
	hand_over(cs, id, config, tools);
	return (0);
}

/* Tells the credential actor type (a row changed, key: its JSON text;
 * or a resync, key NULL). */
static void
tell_credential(cs_self *cs, unsigned type, const char *key)
{
	cr_row_changed_msg m = {.key = (char *)key};
	kn_actor          *cr;

	if (kn_lookup(kn_actor_kernel(cs->self), CREDENTIAL_NAME, &cr) == 0) {
		(void)kn_tell_msg(cr, cs->self, type,
		                  key != NULL ? &cr_row_changed_msg_fields
		                              : &codec_no_fields,
		                  key != NULL ? &m : NULL);
		kn_actor_release(&cr);
	}
}

/* Tells client id's actor to read its tool approval again (another node
 * wrote it). */
static void
tell_approvals(cs_self *cs, const char *id)
{
	char      name[256];
	kn_actor *cl;

	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", id);
	if (kn_lookup(kn_actor_kernel(cs->self), name, &cl) == 0) {
		(void)kn_tell(cl, cs->self, MSG_CL_APPROVALS, CODEC_EMPTY,
		              CODEC_EMPTY_LEN);
		kn_actor_release(&cl);
	}
}

/* A row another node wrote: an approval goes to its client, the rest to
 * the credential actor. */
static void
row_changed(cs_self *cs, const char *what)
{
	json_t     *o  = json_loads(what, 0, NULL);
	const char *t  = json_string_value(json_object_get(o, "table"));
	const char *id = json_string_value(
	        json_object_get(json_object_get(o, "key"), "client_id"));

	if (t != NULL && strcmp(t, "tool_approvals") == 0) {
		if (id != NULL) {
			tell_approvals(cs, id);
		}
	} else {
		tell_credential(cs, MSG_CR_ROW_CHANGED, what);
	}
	json_decref(o);
}

/* A resync: every stored client handed over, and the ones gone since the
 * last read deleted. */
static void
resync(cs_self *cs)
{
	json_t     *was = cs->seen, *v;
	const char *id;
	unsigned    skipped;

	if ((cs->seen = json_object()) == NULL) {
		cs->seen = was;
		return;
	}
	if (store_clients_each(cs->st, on_client, cs, &skipped) != 0) {
		KN_WARN("cluster", "resync: %s", store_error(cs->st));
		json_decref(cs->seen);
		cs->seen = was; /* the next reconnect tries again */
		return;
	}
	json_object_foreach(was, id, v)
	{
		if (json_object_get(cs->seen, id) == NULL) {
			hand_over(cs, id, NULL, NULL);
		}
	}
	json_decref(was);
	if (skipped > 0) {
		KN_WARN("cluster", "resync: %u clients unreadable: %s",
		        skipped, store_error(cs->st));
	}
	/* OAuth configs, tokens and tool approvals written meanwhile were
	 * told to nobody here: each reads its own again */
	tell_credential(cs, MSG_CR_RESYNC, NULL);
	json_object_foreach(cs->seen, id, v)
	{
		tell_approvals(cs, id);
	}
	KN_INFO("cluster", "resynced with %s: %zu clients", cs->name,
	        json_object_size(cs->seen));
}

static int
on_change(void *arg, store_change what, const char *id)
{
	cs_self *cs = arg;

	if (what == STORE_NODE_STATES) {
		cs->told_states = true;
		return (0);
	}
	if (what == STORE_ROW_CHANGED) {
		row_changed(cs, id);
		return (0);
	}
	return (json_array_append_new(
	        cs->todo, json_pack("[s, b]", id, what == STORE_CLIENT_DEL)));
}

/* ---- heartbeats and states ---------------------------------------------- */

/* Logs a lost store once per outage. */
static void
lost(cs_self *cs, const char *why)
{
	if (!cs->failing) {
		KN_WARN("cluster", "%s; trying again", why);
		cs->failing = true;
	}
}

/* Writes this node's changed states, in one transaction (the others
 * told once). */
static int
write_states(cs_self *cs)
{
	const char *id;
	json_t     *v;
	int         rv;

	if (json_object_size(cs->dirty) == 0) {
		return (0);
	}
	if ((rv = store_begin(cs->st, false)) != 0) {
		return (rv);
	}
	json_object_foreach(cs->dirty, id, v)
	{
		json_t *m = json_object_get(cs->mine, id);
		if ((rv = store_node_state(
		             cs->st, id,
		             json_string_value(json_array_get(m, 0)),
		             json_string_value(json_array_get(m, 1)))) != 0) {
			store_rollback(cs->st);
			return (rv);
		}
	}
	if ((rv = store_commit(cs->st)) == 0) {
		json_object_clear(cs->dirty);
	}
	return (rv);
}

/* The other nodes' states as they are read (store_node_states). */
typedef struct peers {
	sv_peer *items;
	size_t   n, cap;
} peers;

static int
on_peer_state(void *arg, const char *node, const char *client,
              const char *state, const char *failure)
{
	peers   *ps = arg;
	sv_peer *p;
	json_t  *f;

	if (ps->n == ps->cap) {
		size_t   cap = ps->cap != 0 ? ps->cap * 2 : 64;
		sv_peer *ni  = realloc(ps->items, cap * sizeof(*ni));
		if (ni == NULL) {
			return (MK_ENOMEM);
		}
		ps->items = ni;
		ps->cap   = cap;
	}
	/* the store keeps the failure as JSON text */
	f  = failure != NULL ? json_loads(failure, 0, NULL) : NULL;
	p  = &ps->items[ps->n++];
	*p = (sv_peer) {.client_id = strdup(client),
	                .node_id   = strdup(node),
	                .state     = strdup(state),
	                .failure   = model_failure_from_json(f)};
	json_decref(f);
	return (p->client_id == NULL || p->node_id == NULL || p->state == NULL
	                ? MK_ENOMEM
	                : 0);
}

/* Reads the other live nodes' states; hands them over when changed. */
static int
read_peers(cs_self *cs)
{
	peers           ps = {0};
	int             rv = store_node_states(cs->st, on_peer_state, &ps);
	sv_peers_msg    m  = {.states = {ps.items, ps.n}};
	msgpack_sbuffer b;

	cs->told_states = false;
	if (rv == 0) {
		b = codec_msg_packed(&sv_peers_msg_fields, &m);
		if ((cs->peers.data == NULL || b.size != cs->peers.size ||
		     memcmp(b.data, cs->peers.data, b.size) != 0) &&
		    kn_tell_msg(cs->sv, cs->self, MSG_SV_PEERS,
		                CODEC_OF(sv_peers_msg, &m)) == 0) {
			msgpack_sbuffer_destroy(&cs->peers);
			cs->peers = b; /* told */
		} else {
			msgpack_sbuffer_destroy(&b);
		}
	}
	sv_peers_msg_clear(&m);
	return (rv);
}

static void
on_heartbeat(kn_actor *self, void *arg)
{
	cs_self *cs = arg;
	int      rv;

	cs->hb_timer = kn_timer_add(self, cs->hb_ms, on_heartbeat, cs);
	if (cs->st == NULL) {
		return; /* the retry timer opens it */
	}
	if ((rv = store_heartbeat(cs->st, cs->hb_ms)) != 0 ||
	    (rv = write_states(cs)) != 0 || (rv = read_peers(cs)) != 0) {
		lost(cs, store_error(cs->st));
	}
	drain(cs); /* what those queries read off the socket */
}

/* MSG_CS_STATE: this node's state of a client changed (or it went). */
static int
cs_on_state(kn_actor *self, cs_self *cs, kn_msg *msg, cs_state_msg *m)
{
	if (m->id == NULL) {
		return (MK_EINVAL);
	}
	if (m->state != NULL) {
		/* the store keeps the failure as JSON text */
		json_t *f = m->failure != NULL ? model_failure_json(m->failure)
		                               : NULL;
		char   *text = f != NULL ? json_dumps(f, JSON_COMPACT) : NULL;
		json_object_set_new(cs->mine, m->id,
		                    json_pack("[s, s?]", m->state, text));
		json_decref(f);
		free(text);
	} else {
		json_object_del(cs->mine, m->id);
	}
	json_object_set_new(cs->dirty, m->id, json_true());
	if (cs->st != NULL) {
		if (write_states(cs) != 0) {
			lost(cs, store_error(cs->st)); /* at the next beat */
		}
		drain(cs);
	}
	return (0);
}

/* Hands over what was told: each changed row read again (the newest
 * wins: a row told twice is read twice, the same). */
static void
apply_told(cs_self *cs)
{
	size_t  i;
	json_t *t;

	json_array_foreach(cs->todo, i, t)
	{
		const char *id = json_string_value(json_array_get(t, 0));
		if (id == NULL) {
			continue;
		}
		if (json_is_true(json_array_get(t, 1))) {
			json_object_del(cs->seen, id);
			hand_over(cs, id, NULL, NULL);
		} else if (store_client_get(cs->st, id, on_client, cs) != 0) {
			KN_WARN("cluster", "client %s: %s", id,
			        store_error(cs->st));
		}
	}
	json_array_clear(cs->todo);
}

/* A resync, and this node (re)joined: it beats, its states written
 * again, the others' read. */
static void
rejoin(cs_self *cs)
{
	const char *id;
	json_t     *v;

	json_array_clear(cs->todo); /* a resync reads them all */
	resync(cs);
	json_object_foreach(cs->mine, id, v)
	{
		json_object_set_new(cs->dirty, id, json_true());
	}
	if (store_heartbeat(cs->st, cs->hb_ms) != 0 || write_states(cs) != 0) {
		lost(cs, store_error(cs->st));
	}
	cs->told_states = true;
}

/* Opens the store when it is not, then reads what was told - again after
 * its own queries, which may have read notifications off the socket
 * (libpq queues them: the socket would not wake this actor for them). */
static void
drain(cs_self *cs)
{
	char err[STORE_ERR_MAX];
	bool again = false;
	int  fd    = -1, rv;

	if (cs->st == NULL) {
		if ((rv = store_open(&cs->st, cs->url, STORE_RW, cs->secret,
		                     err, sizeof(err))) != 0 ||
		    (rv = store_set_node(cs->st, cs->node)) != 0 ||
		    (rv = store_listen(cs->st, &fd)) != 0) {
			lost(cs, cs->st != NULL ? store_error(cs->st) : err);
			store_close(&cs->st);
			watch(cs, -1);
			return;
		}
		rejoin(cs); /* the boot read it: what changed since */
	}
	for (int round = 0; round < 16; round++) {
		if ((rv = store_changes(cs->st, on_change, cs, &again, &fd)) !=
		    0) {
			lost(cs, store_error(cs->st));
			json_array_clear(cs->todo);
			watch(cs, fd);
			return;
		}
		if (cs->failing) {
			KN_INFO("cluster", "store %s is back", cs->name);
			cs->failing = false;
		}
		if (!again && json_array_size(cs->todo) == 0 &&
		    !cs->told_states) {
			break; /* nothing more has arrived */
		}
		if (again) {
			rejoin(cs);
		}
		apply_told(cs);
		if (cs->told_states && read_peers(cs) != 0) {
			lost(cs, store_error(cs->st));
		}
	}
	watch(cs, fd);
}

static void
cs_free(cs_self *cs)
{
	store_close(&cs->st);
	json_decref(cs->seen);
	json_decref(cs->todo);
	json_decref(cs->mine);
	json_decref(cs->dirty);
	msgpack_sbuffer_destroy(&cs->peers);
	text_secret_free(cs->url);
	text_secret_free(cs->secret);
	free(cs->node);
	free(cs);
}

/* The boot's read counts as the last: what it had and the first resync
 * does not is deleted. */
static int
seen_restored(cs_self *cs, const char *restored)
{
	json_t *list = restored != NULL ? json_loads(restored, 0, NULL) : NULL;
	json_t *c;
	size_t  i;
	int     rv = 0;

	json_array_foreach(list, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "id"));
		if (id != NULL &&
		    json_object_set_new(cs->seen, id, json_true()) != 0) {
			rv = MK_ENOMEM;
		}
	}
	json_decref(list);
	return (rv);
}

static int
cs_init(kn_actor *self, void *arg, void **statep)
{
	const cluster_args *a = arg;
	cs_self            *cs;

	if ((cs = calloc(1, sizeof(*cs))) == NULL ||
	    (cs->url = strdup(a->url)) == NULL ||
	    (cs->node = strdup(a->node_id)) == NULL ||
	    (a->secret != NULL && *a->secret != '\0' &&
	     (cs->secret = strdup(a->secret)) == NULL) ||
	    (cs->seen = json_object()) == NULL ||
	    (cs->todo = json_array()) == NULL ||
	    (cs->mine = json_object()) == NULL ||
	    (cs->dirty = json_object()) == NULL) {
		if (cs != NULL) {
			cs_free(cs);
		}
		return (MK_ENOMEM);
	}
	if (seen_restored(cs, a->restored) != 0) {
		cs_free(cs);
		return (MK_ENOMEM);
	}
	cs->self = self;
	cs->sv   = a->supervisor;
	cs->fd   = -1;
	cs->hb_ms =
	        a->heartbeat_ms > 0 ? a->heartbeat_ms : CLUSTER_HEARTBEAT_MS;
	store_display(a->url, cs->name, sizeof(cs->name));
	/* connected from the loop, so the boot does not wait on it */
	if ((cs->timer = kn_timer_add(self, 0, on_retry, cs)) == 0 ||
	    (cs->hb_timer = kn_timer_add(self, cs->hb_ms, on_heartbeat, cs)) ==
	            0) {
		cs_free(cs);
		return (MK_ENOMEM);
	}
	*statep = cs;
	return (0);
}

static void
cs_fini(kn_actor *self, void *state)
{
	cs_self *cs = state;

	if (cs->fd >= 0) {
		kn_unwatch_fd(self, cs->fd);
	}
	/* a clean stop: out of every view at once */
	if (cs->st != NULL && store_node_leave(cs->st) != 0) {
		KN_WARN("cluster", "%s", store_error(cs->st));
	}
	cs_free(cs);
}

KN_ROUTES(cs_routes, cluster_msgs, CS_MESSAGES);

const kn_actor_ops cluster_ops = {
        .routes = &cs_routes,
        .init   = cs_init,
        .fini   = cs_fini,
};

CODEC_MSG_FIELDS(cs_state_msg, CS_STATE_FIELDS);

CODEC_MSG_DEFS(cluster_msgs, CS_MESSAGES);
