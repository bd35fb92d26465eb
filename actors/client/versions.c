/*
 * versions.c - a client's tool-list versions: each change of the list a
 * digest, a time, a count and what changed (persist/hash.h: tools_diff),
 * told on the stream and in the view by state.c, stored beside the list
 * (the last STORE_TOOL_VERSIONS) and read back for MSG_CL_VERSIONS.
 */
#include <stdint.h>
#include <stdlib.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/persister_msg.h"
#include "persist/store.h"

#define VERSIONS_ASK_MS 10000 /* the persister reading them */

json_t *
cl_version_new(client *cl, json_t *tools, const char *hash)
{
	char    at[40];
	json_t *diff = tools_diff(cl->tools, tools), *v;

	if (diff == NULL ||
	    (cl->versions == NULL && (cl->versions = json_array()) == NULL)) {
		json_decref(diff);
		return (NULL);
	}
	v = json_pack("{s:s, s:s, s:I, s:o, s:b}", "digest", hash, "at",
	              kn_rfc3339(at, sizeof(at)), "count",
	              (json_int_t)json_array_size(tools), "diff", diff,
	              "first", cl->hash[0] == '\0');
	if (v == NULL || json_array_append_new(cl->versions, v) != 0) {
		return (NULL);
	}
	while (json_array_size(cl->versions) > STORE_TOOL_VERSIONS) {
		json_array_remove(cl->versions, 0);
	}
	return (v);
}

static void
reply(client *cl, uint64_t corr, const char *json)
{
	cl_versions_msg out = {.json = (char *)json};

	kn_reply_msg(kn_actor_kernel(cl->self), corr, 0,
	             &cl_versions_msg_fields, &out);
}

/* This run's versions, when the store has none to give. */
static void
reply_own(client *cl, uint64_t corr)
{
	char *text = cl->versions != NULL
	        ? json_dumps(cl->versions, JSON_COMPACT)
	        : strdup("[]");

	if (text == NULL) {
		kn_reply_error(kn_actor_kernel(cl->self), corr, MK_ENOMEM,
		               "out of memory");
		return;
	}
	reply(cl, corr, text);
	free(text);
}

/* An ask for the versions, while the persister reads them. */
typedef struct vask {
	client  *cl;
	uint64_t corr;
} vask;

static void
on_stored(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	vask           *a = arg;
	ps_versions_msg m;

	if (status == 0 && ps_versions_msg_unpack(data, len, &m) == 0 &&
	    m.json != NULL) {
		reply(a->cl, a->corr, m.json);
		ps_versions_msg_clear(&m);
	} else {
		reply_own(a->cl, a->corr); /* (the store cannot be read) */
	}
	free(a);
}

int
cl_on_versions(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	vask            *a = malloc(sizeof(*a));
	ps_client_id_msg q = {.id = cl->cfg->id};

	if (a == NULL) {
		kn_reply_error(kn_actor_kernel(cl->self), kn_defer(msg),
		               MK_ENOMEM, "out of memory");
		return (0);
	}
	a->cl   = cl;
	a->corr = kn_defer(msg);
	if (cl->ps == NULL ||
	    kn_ask_async_msg(cl->self, cl->ps, MSG_PS_VERSIONS,
	                     CODEC_OF(ps_client_id_msg, &q), VERSIONS_ASK_MS,
	                     on_stored, a) != 0) {
		reply_own(cl, a->corr);
		free(a);
	}
	return (0);
}
