/*
 * registry.c - the supervisor's client table: the entries by id and by
 * name, adding and dropping them, the store forgetting one, and the views
 * clients push (see sv_impl.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/cluster_msg.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "actors/supervisor/sv_impl.h"
#include "codec/mp.h"

entry *
sv_lookup(sv_self *sv, int w, const char *s)
{
	strmap_ent *se = strmap_get(&sv->idx[w], s);

	/* se is the entry's ent[w] */
	return (se != NULL ? STRMAP_OF(se - w, entry, ent) : NULL);
}

entry *
sv_find(sv_self *sv, const char *id_or_name)
{
	entry *e = sv_lookup(sv, BY_ID, id_or_name);

	return (e != NULL ? e : sv_lookup(sv, BY_NAME, id_or_name));
}

/* Adds e to index w, keyed by its id or name. */
static int
index_add(sv_self *sv, int w, entry *e)
{
	e->ent[w].key = w == BY_ID ? e->id : e->name;
	return (strmap_put(&sv->idx[w], &e->ent[w]));
}

static void
index_del(sv_self *sv, int w, entry *e)
{
	strmap_del(&sv->idx[w], &e->ent[w]);
}

int
sv_insert(sv_self *sv, entry *e)
{
	if (sv->n == sv->cap) {
		size_t  ncap = sv->cap ? 2 * sv->cap : 64;
		entry **na   = realloc(sv->all, ncap * sizeof(*na));
		if (na == NULL) {
			return (MK_ENOMEM);
		}
		sv->all = na;
		sv->cap = ncap;
	}
	if (index_add(sv, BY_ID, e) != 0) {
		return (MK_ENOMEM);
	}
	if (index_add(sv, BY_NAME, e) != 0) {
		index_del(sv, BY_ID, e);
		return (MK_ENOMEM);
	}
	e->pos           = sv->n;
	sv->all[sv->n++] = e;
	sv_peers_find(sv, e);
	return (0);
}

void
sv_entry_free(entry *e)
{
	free(e->id);
	free(e->name);
	free(e->view);
	model_failure_free(e->lf);
	free(e->metrics);
	free(e->pub);
	free(e);
}

/* Stops the client and forgets it. */
void
sv_drop(kn_actor *self, sv_self *sv, entry *e)
{
	if (e->tick != 0) {
		kn_timer_cancel(self, e->tick);
	}
	sv_publish(self, sv, e, true);
	index_del(sv, BY_ID, e);
	index_del(sv, BY_NAME, e);
	sv->all[e->pos]      = sv->all[--sv->n];
	sv->all[e->pos]->pos = e->pos;
	kn_actor_destroy(&e->actor); /* joins its thread */
	sv_entry_free(e);
}

/* The store forgets a client removed by an operator. */
void
sv_persist_del(kn_actor *self, sv_self *sv, const char *id, uint64_t ticket)
{
	ps_id_msg m = {.id = (char *)id, .ticket = (int64_t)ticket};

	if (sv->a.persister == NULL) {
		return;
	}
	if (kn_tell_msg(sv->a.persister, self, MSG_PS_CLIENT_DEL,
	                CODEC_OF(ps_id_msg, &m)) != 0) {
		KN_ERROR("supervisor",
		         "MCP client %s was not removed from the store", id);
	}
}

int
sv_on_metrics(kn_actor *self, sv_self *sv, kn_msg *msg, sv_metrics_msg *m)
{
	entry *e;

	if (m->id != NULL && m->json != NULL &&
	    (e = sv_find(sv, m->id)) != NULL) {
		free(e->metrics);
		e->metrics = m->json;
		m->json    = NULL;
	}
	return (0);
}

int
sv_on_view(kn_actor *self, sv_self *sv, kn_msg *msg, sv_view_msg *m)
{
	entry *e;

	assert(m->state >= 0 && m->state < CS_COUNT && m->shown >= 0 &&
	       m->shown < CS_COUNT);
	if (m->id != NULL && m->view != NULL &&
	    (e = sv_find(sv, m->id)) != NULL) {
		bool changed = e->state != (cl_state)m->state ||
		        (m->sync_ms > 0 && m->sync_ms != e->sync_ms);
		if (m->sync_ms > 0) {
			e->sync_ms = m->sync_ms;
		}
		free(e->view);
		e->view = m->view;
		m->view = NULL;
		model_failure_free(e->lf);
		e->lf      = m->failure;
		m->failure = NULL;
		e->state   = (cl_state)m->state;
		e->shown   = (cl_state)m->shown;
		sv_publish(self, sv, e, false);
		if (changed && e->connected && !e->checking) {
			sv_schedule(self, sv, e);
		}
	}
	return (0);
}

void
sv_publish(kn_actor *self, sv_self *sv, entry *e, bool gone)
{
	cs_state_msg m = {.id = e->id};
	json_t      *f;
	kn_actor    *cs;
	char        *key, *told;

	if (!sv->a.cluster || (gone && e->pub == NULL)) {
		return;
	}
	if (!gone) {
		m.state   = (char *)cl_state_name(e->shown);
		m.failure = e->lf;
	}
	/* what is told: the state and the failure */
	f    = model_failure_json(m.failure);
	told = f != NULL ? json_dumps(f, JSON_COMPACT | JSON_ENCODE_ANY)
	                 : NULL;
	json_decref(f);
	if (told == NULL ||
	    asprintf(&key, "%s\x1f%s", m.state ? m.state : "", told) < 0) {
		key = NULL;
	}
	free(told);
	if (key != NULL && e->pub != NULL && strcmp(key, e->pub) == 0) {
		free(key); /* told already */
	} else if (kn_lookup(kn_actor_kernel(self), CLUSTER_NAME, &cs) == 0) {
		if (kn_tell_msg(cs, self, MSG_CS_STATE,
		                CODEC_OF(cs_state_msg, &m)) == 0) {
			free(e->pub);
			e->pub = key;
			key    = NULL;
		}
		kn_actor_release(&cs);
		free(key);
	} else {
		free(key); /* not started yet: told at the next change */
	}
}

static int
by_client(const void *a, const void *b)
{
	const sv_peer *x = a, *y = b;
	int            c = strcmp(x->client_id, y->client_id);

	return (c != 0 ? c : strcmp(x->node_id, y->node_id));
}

void
sv_peers_find(sv_self *sv, entry *e)
{
	const sv_peer *p  = sv->peers.states.items;
	size_t         lo = 0, hi = sv->peers.states.n, mid;

	while (lo < hi) { /* the first of e's, or where it would be */
		mid = lo + (hi - lo) / 2;
		if (strcmp(p[mid].client_id, e->id) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	e->peers  = p != NULL ? &p[lo] : NULL;
	e->npeers = 0;
	while (lo + e->npeers < sv->peers.states.n &&
	       strcmp(p[lo + e->npeers].client_id, e->id) == 0) {
		e->npeers++;
	}
}

int
sv_on_peers(kn_actor *self, sv_self *sv, kn_msg *msg, sv_peers_msg *m)
{
	sv_peer *p = m->states.items;
	size_t   n = 0;

	for (size_t i = 0; i < m->states.n; i++) { /* whole ones first */
		if (p[i].client_id != NULL && p[i].node_id != NULL &&
		    p[i].state != NULL) {
			sv_peer t = p[n];
			p[n++]    = p[i];
			p[i]      = t;
		}
	}
	if (n > 1) { /* (an empty list has no items to sort) */
		qsort(p, n, sizeof(*p), by_client);
	}
	/* kept (the message's, taken) for the clients started later: the
	 * cluster tells the states again only when they change */
	sv_peers_msg_clear(&sv->peers);
	sv->peers = *m;
	memset(m, 0, sizeof(*m));
	for (size_t i = n; i < sv->peers.states.n; i++) {
		sv_peer_clear(&p[i]); /* (freed with the rest) */
	}
	sv->peers.states.n = n;
	for (size_t i = 0; i < sv->n; i++) {
		sv_peers_find(sv, sv->all[i]);
	}
	return (0);
}
