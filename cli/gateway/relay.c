/*
 * relay.c - an upstream's requests (elicitation/create,
 * sampling/createMessage, roots/list) caused by a downstream's call go
 * to that downstream: a JSON-RPC request on the call's SSE answer, whose
 * response the session POSTs back and the runtime passes on
 * (mk_input_answer).
 *
 * DESIGN: each request relayed is noted (its session, the id it was sent
 * under, its client and the runtime's request id) until the session
 * answers it or its call ends; only the session it was sent to can
 * answer it.  A session that did not declare the capability (a form or a
 * URL elicitation, sampling, roots) is not asked: the request is
 * declined at once, as MCP asks of a client without it.  The id sent is
 * "mcpkeep-<client>-<request id>": unique while the request waits.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gateway/gateway.h"

#define RELAYS_MAX 4096 /* requests waiting for their sessions at once */

typedef struct relay {
	struct relay *next;
	const void   *owner;               /* the call */
	char          sid[GW_SID_LEN + 1]; /* the session asked */
	char          client[65];
	char          request_id[40];
	char          id[128]; /* sent as */
} relay;

static struct {
	pthread_mutex_t mtx;
	relay          *head;
	int             n;
} R = {.mtx = PTHREAD_MUTEX_INITIALIZER};

unsigned
gw_takes(const json_t *caps)
{
	json_t  *el = json_object_get(caps, "elicitation");
	unsigned t  = 0;

	if (json_is_object(el)) {
		bool form = json_object_get(el, "form") != NULL;
		bool url  = json_object_get(el, "url") != NULL;
		/* (2025-06-18's "elicitation": {} is a form's) */
		t |= (form || !url ? GW_TAKES_FORM : 0) |
		        (url ? GW_TAKES_URL : 0);
	}
	if (json_is_object(json_object_get(caps, "sampling"))) {
		t |= GW_TAKES_SAMPLING;
	}
	if (json_is_object(json_object_get(caps, "roots"))) {
		t |= GW_TAKES_ROOTS;
	}
	return (t);
}

unsigned
gw_needs(const char *method, const json_t *params)
{
	const char *mode = json_string_value(json_object_get(params, "mode"));

	if (strcmp(method, "elicitation/create") == 0) {
		return (mode != NULL && strcmp(mode, "url") == 0
		                ? GW_TAKES_URL
		                : GW_TAKES_FORM);
	}
	return (strcmp(method, "sampling/createMessage") == 0
	                ? GW_TAKES_SAMPLING
	                : strcmp(method, "roots/list") == 0 ? GW_TAKES_ROOTS
	                                                    : ~0u);
}

static relay *
unlink_where(const char *sid, const char *id, const void *owner)
{
	for (relay **pp = &R.head; *pp != NULL; pp = &(*pp)->next) {
		relay *x = *pp;
		if ((owner != NULL && x->owner == owner) ||
		    (owner == NULL && strcmp(x->sid, sid) == 0 &&
		     strcmp(x->id, id) == 0)) {
			*pp = x->next;
			R.n--;
			return (x);
		}
	}
	return (NULL);
}

int
gw_relay_send(const gw_relay_to *to, const char *request_id,
              const char *method, const char *params)
{
	json_t *p = json_loads(params, 0, NULL), *msg;
	relay  *x;
	char   *text;

	if (!json_is_object(p) || (to->takes & gw_needs(method, p)) == 0 ||
	    gw_needs(method, p) == ~0u ||
	    (x = calloc(1, sizeof(*x))) == NULL) {
		json_decref(p);
		return (-1); /* it does not take it: declined */
	}
	x->owner = to->owner;
	snprintf(x->sid, sizeof(x->sid), "%s", to->sid);
	snprintf(x->client, sizeof(x->client), "%s", to->client);
	snprintf(x->request_id, sizeof(x->request_id), "%s", request_id);
	snprintf(x->id, sizeof(x->id), "mcpkeep-%s-%s", to->client,
	         request_id);
	msg  = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", x->id,
	                 "method", method, "params", p);
	text = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	pthread_mutex_lock(&R.mtx);
	bool room = R.n < RELAYS_MAX;
	if (room) { /* (noted before it is sent: the answer may be quick) */
		x->next = R.head;
		R.head  = x;
		R.n++;
	}
	pthread_mutex_unlock(&R.mtx);
	if (!room || text == NULL || events_notify(to->stream, text) < 1) {
		if (room) {
			pthread_mutex_lock(&R.mtx);
			(void)unlink_where(x->sid, x->id, NULL);
			pthread_mutex_unlock(&R.mtx);
		}
		free(x);
		free(text);
		return (-1);
	}
	free(text);
	return (0);
}

bool
gw_relay_answer(req *r, const char *sid, json_t *body)
{
	const char *id  = json_string_value(json_object_get(body, "id"));
	json_t     *res = json_object_get(body, "result");
	relay      *x;
	char       *text = NULL, *err = NULL;
	int         rc;

	if (id == NULL) {
		return (false);
	}
	pthread_mutex_lock(&R.mtx);
	x = unlink_where(sid, id, NULL);
	pthread_mutex_unlock(&R.mtx);
	if (x == NULL) {
		return (false); /* not one of this session's */
	}
	/* an error: declined (an elicitation "decline", the rest an error) */
	if (json_is_object(res)) {
		text = json_dumps(res, JSON_COMPACT);
	}
	rc = mk_input_answer(D.rt, x->client, x->request_id, text, &err);
	if (rc == MK_EINVAL) {
		char msg[300];
		snprintf(msg, sizeof(msg), "Invalid params: %s",
		         err != NULL ? err : "not such a result");
		answer_rpc_error(r, 400, json_object_get(body, "id"), -32602,
		                 msg);
	} else {
		/* (MK_ENOENT: its time ran out, or its call ended) */
		answer(r, 202, "application/json", "");
	}
	mk_free(err);
	free(text);
	free(x);
	return (true);
}

void
gw_relay_drop(const void *owner)
{
	relay *x;

	pthread_mutex_lock(&R.mtx);
	while ((x = unlink_where(NULL, NULL, owner)) != NULL) {
		free(x);
	}
	pthread_mutex_unlock(&R.mtx);
}
