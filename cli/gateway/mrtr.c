/*
 * mrtr.c - an upstream's requests caused by a 2026-07-28 caller's call,
 * as that revision's multi round-trip requests: the call is answered
 * {"resultType": "input_required", "inputRequests": {<key>: {method,
 * params}}, "requestState"}, and the caller retries the same request
 * with params.inputResponses {<key>: <result>} and the requestState; the
 * answers go to the upstream (mk_input_answer), and the retry waits for
 * what comes next: the call's answer, or more requests.
 *
 * DESIGN: the call goes on in the runtime between the rounds (the
 * upstream waits for its answers, within the call's deadline), so the
 * gateway parks it: a park holds the call's requests not yet answered,
 * the request waiting for it (the first, or the latest retry), and, once
 * the call ended with nobody waiting, its answer, kept GW_PARK_TTL_S for
 * the retry that fetches it.  The requestState is the park's id: 128
 * random bits, good only for the caller that made the call and for the
 * same method and name (anything else is -32602, as an unknown state
 * is).  A key is the runtime's request id; a request that arrives while
 * nobody waits is asked on the next retry, and a retry that leaves one
 * unanswered is asked again (mrtr "Error Handling").  A second retry
 * while one waits takes its place; the first is told "still waiting" (an
 * input_required with the requestState alone).
 */
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gateway/gateway.h"

#define PARKS_MAX     1024 /* calls parked at once */
#define GW_PARK_TTL_S 60   /* an ended call's answer waits this long */
#define NOT_ITS_STATE                                                         \
	"Invalid params: requestState is not one of this request's "          \
	"(unknown, ended or expired)"

/* Who waits for a park: a request, or a streamed answer. */
typedef struct waiter {
	req    *r;
	char    stream[GW_SID_LEN + 1];
	json_t *id;
} waiter;

typedef struct park {
	struct park *next;
	const void  *owner;                 /* the call; NULL once it ended */
	char         state[GW_SID_LEN + 1]; /* the requestState */
	char         caller[GW_OWNER_LEN];  /* gw_owner */
	char         client[65];            /* the upstream client */
	char         name[640];             /* "<kind>:<name>" */
	waiter       w;                     /* w.id NULL: nobody waits */
	json_t      *asks;                  /* {key: {method, params}} */
	json_t      *held;    /* the call's answer, nobody waiting */
	int64_t      expires; /* held: dropped after (monotonic ns) */
} park;

static struct {
	pthread_mutex_t mtx;
	park           *head;
	int             n;
} P = {.mtx = PTHREAD_MUTEX_INITIALIZER};

static void
park_free(park *k)
{
	json_decref(k->w.id);
	json_decref(k->asks);
	json_decref(k->held);
	free(k);
}

static void
unlink_park(park *k)
{
	for (park **pp = &P.head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == k) {
			*pp = k->next;
			P.n--;
			return;
		}
	}
}

/* Drops the answers nobody fetched in time; P.mtx held. */
static void
sweep(int64_t now)
{
	park **pp = &P.head;

	while (*pp != NULL) {
		park *k = *pp;
		if (k->held != NULL && now > k->expires) {
			*pp = k->next;
			P.n--;
			park_free(k);
		} else {
			pp = &k->next;
		}
	}
}

static park *
find_owner(const void *owner)
{
	for (park *k = P.head; k != NULL; k = k->next) {
		if (k->owner == owner) {
			return (k);
		}
	}
	return (NULL);
}

static park *
find_state(const char *state)
{
	if (strlen(state) != GW_SID_LEN) {
		return (NULL);
	}
	for (park *k = P.head; k != NULL; k = k->next) {
		if (CRYPTO_memcmp(k->state, state, GW_SID_LEN) == 0) {
			return (k);
		}
	}
	return (NULL);
}

/* Takes k's waiter out (w->id NULL: none). */
static void
take_waiter(park *k, waiter *w)
{
	*w   = k->w;
	k->w = (waiter) {0};
}

/* An input_required result for k (asks: its requests, or NULL: the
 * state alone - "still waiting"), as the message answering id. */
static json_t *
input_required(const park *k, json_t *id, bool asks)
{
	json_t *res = json_pack("{s:s, s:s}", "resultType", "input_required",
	                        "requestState", k->state);

	if (asks && res != NULL) {
		json_object_set_new(res, "inputRequests",
		                    json_deep_copy(k->asks));
	}
	return (gw_result_msg(true, id, res));
}

/* Sends msg (taken) to w, its id put in.  A park's ids and messages are
 * its own (deep copies): they pass between threads under P.mtx only,
 * never shared with the request or the call they came from. */
static void
send_to(waiter *w, json_t *msg)
{
	if (msg != NULL) {
		json_object_set(msg, "id", w->id);
	}
	if (w->r != NULL) {
		answer_json(w->r, 200, msg);
	} else {
		char *text =
		        msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
		if (text != NULL) {
			(void)events_notify(w->stream, text);
		}
		events_end_mcp(w->stream);
		free(text);
		json_decref(msg);
	}
	json_decref(w->id);
}

int
gw_park_ask(const gw_park_to *to, const char *request_id, const char *method,
            const char *params)
{
	json_t  *p    = json_loads(params, 0, NULL);
	unsigned need = json_is_object(p) ? gw_needs(method, p) : ~0u;
	waiter   w    = {0};
	json_t  *msg  = NULL;
	park    *k;

	if (need == ~0u || (to->takes & need) == 0) {
		json_decref(p);
		return (-1); /* it does not take it: declined */
	}
	pthread_mutex_lock(&P.mtx);
	if ((k = find_owner(to->owner)) == NULL) {
		sweep(answer_mono_ns());
		if (P.n >= PARKS_MAX || (k = calloc(1, sizeof(*k))) == NULL ||
		    gw_stream_id(k->state) != 0 ||
		    (k->asks = json_object()) == NULL) {
			pthread_mutex_unlock(&P.mtx);
			if (k != NULL) {
				park_free(k);
			}
			json_decref(p);
			return (-1);
		}
		k->owner = to->owner;
		snprintf(k->caller, sizeof(k->caller), "%s", to->caller);
		snprintf(k->client, sizeof(k->client), "%s", to->client);
		snprintf(k->name, sizeof(k->name), "%s", to->name);
		k->w.r = to->r;
		snprintf(k->w.stream, sizeof(k->w.stream), "%s", to->stream);
		k->w.id = json_deep_copy(to->id); /* (its own: see send_to) */
		k->next = P.head;
		P.head  = k;
		P.n++;
	}
	json_object_set_new(
	        k->asks, request_id,
	        json_pack("{s:s, s:o}", "method", method, "params", p));
	if (k->w.id != NULL) {
		take_waiter(k, &w);
		msg = input_required(k, w.id, true);
	}
	pthread_mutex_unlock(&P.mtx);
	if (w.id != NULL) {
		send_to(&w, msg);
	}
	return (0);
}

bool
gw_park_done(const void *owner, json_t *msg)
{
	waiter w = {0};
	park  *k;

	pthread_mutex_lock(&P.mtx);
	if ((k = find_owner(owner)) == NULL) {
		pthread_mutex_unlock(&P.mtx);
		return (false);
	}
	k->owner = NULL;
	json_object_clear(k->asks); /* (nobody answers them now) */
	if (k->w.id != NULL) {
		take_waiter(k, &w);
		unlink_park(k);
	} else {
		/* (the call's id stays with the call's thread: send_to puts
		 * the retry's in) */
		json_object_set_new(msg, "id", json_null());
		k->held = msg;
		k->expires =
		        answer_mono_ns() + (int64_t)GW_PARK_TTL_S * 1000000000;
		msg = NULL;
	}
	pthread_mutex_unlock(&P.mtx);
	if (w.id != NULL) {
		send_to(&w, msg);
		park_free(k);
	}
	return (true);
}

bool
gw_park_retry_of(const json_t *params)
{
	return (json_object_get(params, "requestState") != NULL ||
	        json_object_get(params, "inputResponses") != NULL);
}

/* The answers of a retry, as taken from its park. */
typedef struct given {
	const char *key;
	json_t     *ask;    /* its request (for asking again) */
	char       *result; /* JSON text */
} given;

/* Hands the answers to the upstream: the key of the first it refused
 * (k's asks get it back) with why, or NULL. */
static const char *
hand_over(const char *client, given *g, size_t n, char **why)
{
	const char *bad = NULL;

	for (size_t i = 0; i < n; i++) {
		char *err = NULL;
		int   rc = mk_input_answer(D.rt, client, g[i].key, g[i].result,
		                           &err);
		if (rc == MK_EINVAL && bad == NULL) {
			bad  = g[i].key;
			*why = err;
		} else {
			mk_free(err); /* (MK_ENOENT: its time ran out) */
		}
	}
	return (bad);
}

void
gw_park_retry(req *r, json_t *id, const char *name, json_t *params)
{
	const char *state =
	        json_string_value(json_object_get(params, "requestState"));
	json_t     *resp = json_object_get(params, "inputResponses"), *v;
	char        caller[GW_OWNER_LEN], client[65], msg[400];
	const char *key, *bad;
	char       *why = NULL;
	given      *g   = NULL;
	size_t      n = 0, max = json_object_size(resp);
	waiter      w = {0}, old = {0};
	json_t     *out = NULL, *still = NULL;
	park       *k, *done           = NULL;

	if ((resp != NULL && !json_is_object(resp)) || state == NULL) {
		answer_rpc_error(
		        r, 200, id, -32602,
		        state == NULL
		                ? "Invalid params: inputResponses without the requestState (a string) they answer"
		                : "Invalid params: inputResponses must be an object");
		return;
	}
	json_object_foreach(resp, key, v)
	{
		if (!json_is_object(v)) {
			snprintf(
			        msg, sizeof(msg),
			        "Invalid params: inputResponses.%.100s is not a result (an object)",
			        key);
			answer_rpc_error(r, 200, id, -32602, msg);
			return;
		}
	}
	gw_owner(r, caller, sizeof(caller));
	if (max > 0 && (g = calloc(max, sizeof(*g))) == NULL) {
		answer_rpc_error(r, 500, id, -32603, "out of memory");
		return;
	}
	pthread_mutex_lock(&P.mtx);
	if ((k = find_state(state)) == NULL ||
	    strcmp(k->caller, caller) != 0 || strcmp(k->name, name) != 0) {
		pthread_mutex_unlock(&P.mtx);
		free(g);
		answer_rpc_error(r, 200, id, -32602, NOT_ITS_STATE);
		return;
	}
	json_object_foreach(resp, key, v)
	{
		json_t *ask = json_object_get(k->asks, key);
		if (ask != NULL &&
		    (g[n].result = json_dumps(v, JSON_COMPACT)) != NULL) {
			g[n].key = key;
			g[n].ask = json_incref(ask);
			json_object_del(k->asks, key);
			n++;
		}
	}
	memcpy(client, k->client, sizeof(client));
	pthread_mutex_unlock(&P.mtx);

	bad = hand_over(client, g, n, &why);

	pthread_mutex_lock(&P.mtx);
	k = find_state(state); /* (its call may have ended meanwhile) */
	for (size_t i = 0; k != NULL && bad != NULL && i < n; i++) {
		if (k->owner != NULL && g[i].key == bad) {
			json_object_set(k->asks, bad, g[i].ask); /* again */
		}
	}
	if (k == NULL || bad != NULL) {
		/* (k gone: another retry fetched its answer) */
	} else if (k->held != NULL) {
		out     = k->held;
		k->held = NULL;
		unlink_park(k);
		done = k;
	} else if (json_object_size(k->asks) > 0) {
		out = input_required(k, id, true);
	} else {
		take_waiter(k, &old); /* (a retry before: still waiting) */
		if (old.id != NULL) {
			still = input_required(k, old.id, false);
		}
		k->w = (waiter) {.r = r, .id = json_deep_copy(id)};
	}
	pthread_mutex_unlock(&P.mtx);
	if (bad != NULL) {
		snprintf(msg, sizeof(msg),
		         "Invalid params: inputResponses.%.100s: %.200s", bad,
		         why != NULL ? why : "not such a result");
		answer_rpc_error(r, 200, id, -32602, msg);
	} else if (k == NULL) {
		answer_rpc_error(r, 200, id, -32602, NOT_ITS_STATE);
	} else if (out != NULL) {
		w = (waiter) {.r = r, .id = json_incref(id)};
		send_to(&w, out);
	}
	if (old.id != NULL) {
		send_to(&old, still);
	}
	if (done != NULL) {
		park_free(done);
	}
	for (size_t i = 0; i < n; i++) {
		json_decref(g[i].ask);
		free(g[i].result);
	}
	free(g);
	mk_free(why);
}

void
gw_park_stop(void)
{
	pthread_mutex_lock(&P.mtx);
	while (P.head != NULL) {
		park *k = P.head;
		P.head  = k->next;
		park_free(k);
	}
	P.n = 0;
	pthread_mutex_unlock(&P.mtx);
}
