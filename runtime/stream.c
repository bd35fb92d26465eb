/*
 * stream.c - the state stream of the public API (mcpkeep.h): its address
 * and its messages decoded for the embedder - each topic's
 * fields read with its publisher's definition, the strings kept whole.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/persister_msg.h"
#include "mcpkeep.h"
#include "runtime/runtime_impl.h"

const char *
mk_stream_url(const mk_runtime *rt)
{
	return (rt_valid(rt) ? rt->stream_url : "");
}

const char *
mk_node_id(const mk_runtime *rt)
{
	return (rt_valid(rt) ? rt->node_id : "");
}

/* ---- its messages decoded -------------------------------------------- */

/* An event as the library holds it: what the caller is given first, then
 * the message unpacked by its topic's fields, which own the strings the
 * caller's point to. */
typedef struct held {
	mk_stream_event     ev;
	char                topic[32];
	const codec_fields *f; /* the topic's fields, NULL: unknown */
	union {
		max_align_t   align;
		unsigned char b[CODEC_MSG_MAX];
	} m;
} held;

static const mk_stream_event none = {
        .topic            = "",
        .client_id        = "",
        .name             = "",
        .state            = "",
        .old_state        = "",
        .stage            = "",
        .message          = "",
        .at               = "",
        .since            = "",
        .time             = "",
        .node_id          = "",
        .hash             = "",
        .request_id       = "",
        .method           = "",
        .protocol_version = "",
        .diff             = "",
};

/* s, or "" when NULL */
#define TEXT(s) ((s) != NULL ? (s) : "")

static void
from_state(mk_stream_event *ev, const void *m)
{
	const cl_state_event *e  = m;
	const model_failure  *lf = e->last_failure;

	ev->client_id = TEXT(e->client_id);
	ev->name      = TEXT(e->name);
	ev->state     = TEXT(e->state);
	ev->old_state = TEXT(e->old_state);
	if (lf != NULL) {
		ev->stage   = TEXT(lf->stage);
		ev->message = TEXT(lf->message);
		ev->at      = TEXT(lf->at);
		ev->since   = TEXT(lf->since);
	}
	ev->generation       = e->generation;
	ev->tools_count      = e->tools_count;
	ev->time             = TEXT(e->time);
	ev->node_id          = TEXT(e->node_id);
	ev->protocol_version = TEXT(e->protocol_version);
	ev->snapshot         = e->snapshot;
}

static void
from_list(mk_stream_event *ev, const void *m)
{
	const cl_list_event *e = m;

	ev->client_id = TEXT(e->client_id);
	ev->name      = TEXT(e->name);
	ev->hash      = TEXT(e->hash);
	ev->count     = e->count;
	ev->diff      = TEXT(e->diff);
}

static void
from_pin(mk_stream_event *ev, const void *m)
{
	const cl_pin_event *e = m;

	ev->client_id = TEXT(e->client_id);
	ev->name      = TEXT(e->name);
	ev->state     = TEXT(e->state);
	ev->hash      = TEXT(e->hash);
	ev->count     = e->count;
	ev->message   = TEXT(e->message);
	ev->time      = TEXT(e->time);
	ev->node_id   = TEXT(e->node_id);
}

static void
from_input(mk_stream_event *ev, const void *m)
{
	const cl_input_event *e = m;

	ev->client_id  = TEXT(e->client_id);
	ev->name       = TEXT(e->name);
	ev->request_id = TEXT(e->request_id);
	ev->method     = TEXT(e->method);
	ev->state      = TEXT(e->state);
	ev->message    = TEXT(e->message);
	ev->time       = TEXT(e->time);
	ev->node_id    = TEXT(e->node_id);
}

static void
from_store(mk_stream_event *ev, const void *m)
{
	const ps_store_event *e = m;

	ev->healthy = e->healthy;
	ev->message = TEXT(e->error);
}

/* The state stream's events: each topic's fields (the publishers'
 * definitions) and what of them an event holds. */
static const struct {
	const char         *topic;
	const codec_fields *f;
	void (*fill)(mk_stream_event *ev, const void *m);
} events[] = {
        {"state", &cl_state_event_fields, from_state},
        {"tools", &cl_list_event_fields, from_list},
        {"lists", &cl_list_event_fields, from_list},
        {"pin", &cl_pin_event_fields, from_pin},
        {"input", &cl_input_event_fields, from_input},
        {"store", &ps_store_event_fields, from_store},
};

int
mk_stream_event_parse(const void *msg, size_t len, mk_stream_event **ev)
{
	const char *body = msg;
	held       *h;
	size_t      tl, i;

	if (ev == NULL) {
		return (MK_EINVAL);
	}
	*ev = NULL;
	if (msg == NULL || (tl = strnlen(body, len)) == len) {
		return (MK_EPROTO);
	}
	if (tl >= sizeof(h->topic)) {
		return (MK_EPROTO);
	}
	if ((h = calloc(1, sizeof(*h))) == NULL) {
		return (MK_ENOMEM);
	}
	h->ev = none;
	memcpy(h->topic, body, tl);
	h->ev.topic = h->topic;
	for (i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		if (strcmp(h->topic, events[i].topic) == 0) {
			break;
		}
	}
	/* a topic of a later version: the topic alone */
	h->f = i < sizeof(events) / sizeof(events[0]) ? events[i].f
	                                              : &codec_no_fields;
	if (codec_msg_unpack(h->f, body + tl + 1, len - tl - 1, &h->m) != 0) {
		free(h);
		return (MK_EPROTO);
	}
	if (h->f != &codec_no_fields) {
		events[i].fill(&h->ev, &h->m);
	}
	*ev = &h->ev;
	return (MK_OK);
}

void
mk_stream_event_free(mk_stream_event *ev)
{
	held *h = (held *)ev; /* (ev is its first member) */

	if (h != NULL) {
		codec_msg_clear(h->f, &h->m);
		free(h);
	}
}

/* ---- deprecated (mcpkeep.h) */

/* copy_text: src cut to fit */
static void
copy_text(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* s in the fixed arrays of e, cut. */
static void
cut(mk_event *e, const mk_stream_event *s)
{
	copy_text(e->topic, sizeof(e->topic), s->topic);
	copy_text(e->client_id, sizeof(e->client_id), s->client_id);
	copy_text(e->name, sizeof(e->name), s->name);
	copy_text(e->state, sizeof(e->state), s->state);
	copy_text(e->old_state, sizeof(e->old_state), s->old_state);
	copy_text(e->stage, sizeof(e->stage), s->stage);
	copy_text(e->message, sizeof(e->message), s->message);
	copy_text(e->at, sizeof(e->at), s->at);
	copy_text(e->since, sizeof(e->since), s->since);
	e->generation  = s->generation;
	e->tools_count = s->tools_count;
	copy_text(e->time, sizeof(e->time), s->time);
	copy_text(e->node_id, sizeof(e->node_id), s->node_id);
	copy_text(e->hash, sizeof(e->hash), s->hash);
	e->count   = s->count;
	e->healthy = s->healthy;
	copy_text(e->request_id, sizeof(e->request_id), s->request_id);
	copy_text(e->method, sizeof(e->method), s->method);
	copy_text(e->protocol_version, sizeof(e->protocol_version),
	          s->protocol_version);
	e->snapshot = s->snapshot;
	copy_text(e->diff, sizeof(e->diff),
	          strlen(s->diff) >= sizeof(e->diff) ? "{\"truncated\": true}"
	                                             : s->diff);
}

int
mk_event_parse(const void *msg, size_t len, mk_event *ev)
{
	mk_stream_event *s;
	mk_event         e = {0};
	size_t           n;
	int              rv;

	if (ev == NULL || !rt_size_ok(ev->size, sizeof(e))) {
		return (MK_EINVAL);
	}
	n = ev->size;
	if ((rv = mk_stream_event_parse(msg, len, &s)) == MK_OK) {
		cut(&e, s);
		mk_stream_event_free(s);
	}
	memcpy(ev, &e, n);
	ev->size = n;
	return (rv);
}
