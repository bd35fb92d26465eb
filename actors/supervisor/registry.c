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
	json_decref(e->peers);
	e->peers = json_incref(json_object_get(sv->peers, e->id));
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
	json_decref(e->peers);
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

int
sv_on_peers(kn_actor *self, sv_self *sv, kn_msg *msg, sv_peers_msg *m)
{
	json_t *all;

	all = m->json != NULL ? json_loads(m->json, 0, NULL) : NULL;
	if (!json_is_object(all)) {
		json_decref(all);
		return (0);
	}
	for (size_t i = 0; i < sv->n; i++) {
		entry *e = sv->all[i];
		json_decref(e->peers);
		e->peers = json_incref(json_object_get(all, e->id));
	}
	/* kept for the clients started later: the cluster tells the states
	 * again only when they change */
	json_decref(sv->peers);
	sv->peers = all;
	return (0);
}
