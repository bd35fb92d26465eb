/*
 * cluster.c - the cluster actor (see cluster.h).
 */
#include "actors/cluster.h"

#include <assert.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/kernel/log.h"
#include "actors/supervisor/supervisor.h"
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
} cs_self;

static void drain(cs_self *cs);

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
	KN_INFO("cluster", "resynced with %s: %zu clients", cs->name,
	        json_object_size(cs->seen));
}

static int
on_change(void *arg, const char *id, bool deleted)
{
	cs_self *cs = arg;

	return (json_array_append_new(cs->todo,
	                              json_pack("[s, b]", id, deleted)));
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

/* Opens the store when it is not, then reads what was told. */
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
			if (!cs->failing) {
				KN_WARN("cluster", "%s; trying again",
				        cs->st != NULL ? store_error(cs->st)
				                       : err);
				cs->failing = true;
			}
			store_close(&cs->st);
			watch(cs, -1);
			return;
		}
		again = true; /* the boot read it: what changed since */
	} else if ((rv = store_changes(cs->st, on_change, cs, &again, &fd)) !=
	           0) {
		if (!cs->failing) {
			KN_WARN("cluster", "%s; trying again",
			        store_error(cs->st));
			cs->failing = true;
		}
		json_array_clear(cs->todo);
		watch(cs, fd);
		return;
	}
	if (cs->failing) {
		KN_INFO("cluster", "store %s is back", cs->name);
		cs->failing = false;
	}
	if (again) {
		json_array_clear(cs->todo); /* a resync reads them all */
		resync(cs);
	}
	apply_told(cs);
	watch(cs, fd);
}

static void
cs_free(cs_self *cs)
{
	store_close(&cs->st);
	json_decref(cs->seen);
	json_decref(cs->todo);
	text_secret_free(cs->url);
	text_secret_free(cs->secret);
	free(cs->node);
	free(cs);
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
	    (cs->todo = json_array()) == NULL) {
		if (cs != NULL) {
			cs_free(cs);
		}
		return (MK_ENOMEM);
	}
	cs->self = self;
	cs->sv   = a->supervisor;
	cs->fd   = -1;
	store_display(a->url, cs->name, sizeof(cs->name));
	/* connected from the loop, so the boot does not wait on it */
	if ((cs->timer = kn_timer_add(self, 0, on_retry, cs)) == 0) {
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
	cs_free(cs);
}

static int
cs_handle(kn_actor *self, void *state, kn_msg *msg)
{
	assert(!"cluster: unexpected message");
	return (MK_EINTERNAL);
}

const kn_actor_ops cluster_ops = {
        .init   = cs_init,
        .handle = cs_handle,
        .fini   = cs_fini,
};
