/*
 * registry.c - the supervisor's client table: the entries by id and by
 * name, adding and dropping them, the store forgetting one, and the views
 * clients push (see sv_impl.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/kernel/log.h"
#include "actors/persister.h"
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
	return (0);
}

void
sv_entry_free(entry *e)
{
	free(e->id);
	free(e->name);
	free(e->view);
	free(e);
}

/* Stops the client and forgets it. */
void
sv_drop(kn_actor *self, sv_self *sv, entry *e)
{
	if (e->tick != 0) {
		kn_timer_cancel(self, e->tick);
	}
	index_del(sv, BY_ID, e);
	index_del(sv, BY_NAME, e);
	sv->all[e->pos]      = sv->all[--sv->n];
	sv->all[e->pos]->pos = e->pos;
	kn_actor_destroy(&e->actor); /* joins its thread */
	sv_entry_free(e);
}

/* The store forgets a client removed by an operator. */
void
sv_persist_del(kn_actor *self, sv_self *sv, const char *id)
{
	mp_w w;

	if (sv->a.persister == NULL) {
		return;
	}
	mp_w_init(&w);
	mp_map(&w, 1);
	mp_kv_str(&w, "id", id);
	if (kn_tell(sv->a.persister, self, MSG_PS_CLIENT_DEL, w.sb.data,
	            w.sb.size) != 0) {
		KN_ERROR("supervisor",
		         "MCP client %s was not removed from the "
		         "store",
		         id);
	}
	mp_w_fini(&w);
}

void
sv_on_view(sv_self *sv, kn_actor *self, kn_msg *msg)
{
	mp_r    r;
	char   *id, *state, *shown, *view;
	int64_t sync_ms;
	entry  *e;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	id      = mp_dup_str(mp_get(&r, "id"));
	state   = mp_dup_str(mp_get(&r, "state"));
	shown   = mp_dup_str(mp_get(&r, "shown"));
	view    = mp_dup_str(mp_get(&r, "view"));
	sync_ms = mp_int(mp_get(&r, "sync_ms"), 0);
	mp_r_close(&r);
	if (id != NULL && state != NULL && view != NULL &&
	    (e = sv_find(sv, id)) != NULL) {
		bool changed = strcmp(e->state, state) != 0 ||
		        (sync_ms > 0 && sync_ms != e->sync_ms);
		if (sync_ms > 0) {
			e->sync_ms = sync_ms;
		}
		free(e->view);
		e->view = view;
		view    = NULL;
		snprintf(e->state, sizeof(e->state), "%s", state);
		snprintf(e->shown, sizeof(e->shown), "%s",
		         shown != NULL ? shown : state);
		if (changed && e->connected && !e->checking) {
			sv_schedule(self, sv, e);
		}
	}
	free(id);
	free(state);
	free(shown);
	free(view);
}
