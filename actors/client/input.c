/*
 * input.c - the server's requests to its client (elicitation/create,
 * sampling/createMessage, roots/list), handed to the host.
 *
 * A session declares the capabilities the host offers (cl_host) and
 * passes each such request here.  What the host does not take is
 * refused at once (-32601), so nothing waits on a handler that is not
 * there.  A request the host takes waits in the client's list: it is
 * published on the state stream (topic "input", state "pending"), the
 * host's on_input hears of it, and MSG_CL_INPUTS lists it; MSG_CL_INPUT
 * answers it.  It waits at most the client's tool_execution_timeout:
 * then an elicitation is answered "cancel" and the rest with an error
 * (state "expired"); the call that caused it keeps its own deadline
 * either way.  A session that closes first takes its requests with it
 * ("gone").  A form elicitation's answer gets the schema's default for
 * each field it leaves out (SEP-1034); a URL elicitation whose URL may
 * not be shown (oa_url_check) is declined before the host sees it.
 * Static roots (cl_host.roots) are answered here.  A request caused by
 * a call whose caller takes them (cl_call.input: the gateway's session
 * that sent the call) is that caller's: handed to it instead of the
 * host, kept off the stream and the host's list, answered the same way
 * (MSG_CL_INPUT), or declined at once when the caller does not take it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "codec/mp.h"
#include "transport/oauth.h"

static const struct {
	const char *method;
	unsigned    kind;
} kinds[] = {
        {"elicitation/create", CL_IN_ELICITATION},
        {"sampling/createMessage", CL_IN_SAMPLING},
        {"roots/list", CL_IN_ROOTS},
};

static unsigned
kind_of(const char *method)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(method, kinds[i].method) == 0) {
			return (kinds[i].kind);
		}
	}
	return (0);
}

static const char *
method_of(unsigned kind)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (kinds[i].kind == kind) {
			return (kinds[i].method);
		}
	}
	return ("?");
}

const char *
cl_input_caps(const client *cl)
{
	return (cl->host != NULL ? cl->host->caps : NULL);
}

static void
publish(client *cl, const cl_input *in, const char *state)
{
	if (in->relayed) {
		return; /* its caller's: not the admin's to see */
	}
	json_t        *msg = json_object_get(in->params, "message");
	char           ts[40];
	cl_input_event ev = {
	        .client_id  = cl->cfg->id,
	        .name       = cl->cfg->name,
	        .request_id = (char *)in->id,
	        .method     = (char *)method_of(in->kind),
	        .state      = (char *)state,
	        .message    = in->kind == CL_IN_ELICITATION
	                   ? (char *)json_string_value(msg)
	                   : NULL,
	        .time       = kn_rfc3339(ts, sizeof(ts)),
	        .node_id    = (char *)cl->node_id,
	};

	kn_stream_publish_msg(cl->stream, "input",
	                      CODEC_OF(cl_input_event, &ev));
}

/* Takes in out of the list and frees it, saying why on the stream. */
static void
input_end(client *cl, cl_input *in, const char *state)
{
	for (cl_input **pp = &cl->inputs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == in) {
			*pp = in->next;
			cl->ninputs--;
			break;
		}
	}
	if (in->timer != 0) {
		(void)kn_timer_cancel(cl->self, in->timer);
	}
	publish(cl, in, state);
	json_decref(in->params);
	free(in);
	cl_push_view(cl); /* the list shows what still waits */
}

/* Answers in on its session with the refusal of its kind. */
static void
refuse(cl_input *in, const char *why)
{
	json_t *r;

	if (in->kind == CL_IN_ELICITATION) {
		r = json_pack("{s:s}", "action", "cancel");
		(void)mcp_respond(in->s, in->token, r, 0, NULL);
		json_decref(r);
		return;
	}
	(void)mcp_respond(in->s, in->token, NULL, -32603, why);
}

static void
expire(kn_actor *self, void *arg)
{
	cl_input *in = arg;
	client   *cl = in->cl;
	char      why[96];

	in->timer = 0;
	snprintf(why, sizeof(why),
	         "the host did not answer within %" PRId64 " ms", cl->exec_ms);
	KN_INFO("client", "%s: %s %s: %s", cl->cfg->name, method_of(in->kind),
	        in->id, why);
	refuse(in, why);
	input_end(cl, in, "expired");
}

/* A URL elicitation's URL, to be shown to a person: http(s), no user
 * name or password in it, http only to loopback unless the MCP server
 * is http itself. */
static bool
url_showable(const client *cl, json_t *params)
{
	const char *url = json_string_value(json_object_get(params, "url"));
	oa_rules    r   = {
	             .http = cl->cfg->url != NULL &&
	                     strncmp(cl->cfg->url, "http://", 7) == 0,
	             .nets = OA_NET_BIT(OA_NET_LOOPBACK) |
	                     OA_NET_BIT(OA_NET_PRIVATE) |
	                     OA_NET_BIT(OA_NET_LINKLOCAL),
        };

	return (url != NULL && strlen(url) < OA_URL_MAX &&
	        oa_url_check(url, &r, NULL, 0) == OA_URL_OK);
}

/* Answers what the host offers but need not see: static roots, and a
 * URL it may not show.  True when answered. */
static bool
answer_here(client *cl, mcp_session *s, uint64_t token, unsigned kind,
            json_t *params)
{
	const char *mode = json_string_value(json_object_get(params, "mode"));
	json_t     *r;

	if (kind == CL_IN_ROOTS && cl->host->roots != NULL) {
		r = json_loads(cl->host->roots, 0, NULL);
		(void)mcp_respond(s, token, r, -32603, "no roots");
		json_decref(r);
		return (true);
	}
	if (kind == CL_IN_ELICITATION && mode != NULL &&
	    strcmp(mode, "url") == 0 && !url_showable(cl, params)) {
		KN_WARN("client",
		        "%s: declined a URL elicitation: its URL may not be shown (not http(s), credentials in it, or http from an https server)",
		        cl->cfg->name);
		r = json_pack("{s:s}", "action", "decline");
		(void)mcp_respond(s, token, r, 0, NULL);
		json_decref(r);
		return (true);
	}
	return (false);
}

/* Hands in to the caller of the call c that caused it; false when that
 * caller declined it (then answered here, and freed). */
static bool
relay(client *cl, cl_call *c, cl_input *in, const char *method)
{
	char *text = json_dumps(in->params, JSON_COMPACT);
	char  why[96];

	in->relayed = true;
	if (text != NULL && c->input(c->iarg, in->id, method, text) == 0) {
		free(text);
		return (true);
	}
	free(text);
	KN_DEBUG("client", "%s: %s %s: declined by the call's caller",
	         cl->cfg->name, method, in->id);
	snprintf(why, sizeof(why), "the caller does not take %s", method);
	if (in->kind == CL_IN_ELICITATION) {
		json_t *r = json_pack("{s:s}", "action", "decline");
		(void)mcp_respond(in->s, in->token, r, 0, NULL);
		json_decref(r);
	} else {
		(void)mcp_respond(in->s, in->token, NULL, -32603, why);
	}
	json_decref(in->params);
	free(in);
	return (false);
}

int
cl_input_request(client *cl, mcp_session *s, uint64_t token,
                 const char *method, json_t *params)
{
	unsigned  kind = kind_of(method);
	cl_input *in;
	cl_call  *c;
	char     *text;

	if (kind == 0 || cl->host == NULL || !(cl->host->inputs & kind)) {
		return (-1); /* not offered: the session refuses it */
	}
	if (answer_here(cl, s, token, kind, params)) {
		return (0);
	}
	if (cl->ninputs >= CL_INPUTS_MAX ||
	    (in = calloc(1, sizeof(*in))) == NULL) {
		(void)mcp_respond(s, token, NULL, -32603,
		                  "too many requests waiting for the host");
		return (0);
	}
	in->cl    = cl;
	in->s     = s;
	in->token = token;
	in->kind  = kind;
	in->params =
	        json_is_object(params) ? json_incref(params) : json_object();
	snprintf(in->id, sizeof(in->id), "in-%" PRIu64, ++cl->input_seq);
	if ((c = cl_call_of(cl, s, mcp_session_cause(s))) != NULL &&
	    c->input != NULL && !relay(cl, c, in, method)) {
		return (0); /* (declined: answered) */
	}
	in->expires = kn_now_ns() + cl->exec_ms * 1000000;
	in->timer   = kn_timer_add(cl->self, cl->exec_ms, expire, in);
	in->next    = cl->inputs;
	cl->inputs  = in;
	cl->ninputs++;
	if (!in->relayed && cl->host->on_input != NULL &&
	    (text = json_dumps(in->params, JSON_COMPACT)) != NULL) {
		cl->host->on_input(cl->host->arg, cl->cfg->id, cl->cfg->name,
		                   in->id, method, text);
		free(text);
	}
	publish(cl, in, "pending"); /* after the host heard of it */
	cl_push_view(cl);
	return (0);
}

void
cl_input_gone(client *cl, mcp_session *s, uint64_t token)
{
	for (cl_input *in = cl->inputs; in != NULL; in = in->next) {
		if (in->s == s && in->token == token) {
			input_end(cl, in, "gone");
			return;
		}
	}
}

void
cl_input_end_all(client *cl)
{
	while (cl->inputs != NULL) {
		refuse(cl->inputs, "the client is closing");
		input_end(cl, cl->inputs, "gone");
	}
}

/* Fills the fields a form answer left out with the schema's defaults. */
static void
apply_defaults(json_t *content, json_t *params)
{
	json_t *props = json_object_get(
	        json_object_get(params, "requestedSchema"), "properties");
	const char *k;
	json_t     *p;

	json_object_foreach(props, k, p)
	{
		json_t *def = json_object_get(p, "default");
		if (def != NULL && json_object_get(content, k) == NULL) {
			json_object_set(content, k, def);
		}
	}
}

/* Checks the host's answer to in; NULL with why set when it will not
 * do. */
static const char *
check_answer(cl_input *in, json_t *r)
{
	const char *action = json_string_value(json_object_get(r, "action"));
	const char *mode =
	        json_string_value(json_object_get(in->params, "mode"));
	json_t *content = json_object_get(r, "content");

	if (!json_is_object(r)) {
		return ("the answer is not a JSON object");
	}
	switch (in->kind) {
	case CL_IN_ELICITATION:
		if (action == NULL ||
		    (strcmp(action, "accept") != 0 &&
		     strcmp(action, "decline") != 0 &&
		     strcmp(action, "cancel") != 0)) {
			return ("an elicitation's answer needs \"action\": accept, decline or cancel");
		}
		if (strcmp(action, "accept") == 0 &&
		    (mode == NULL || strcmp(mode, "form") == 0)) {
			if (content == NULL) {
				json_object_set_new(r, "content",
				                    json_object());
				content = json_object_get(r, "content");
			}
			if (!json_is_object(content)) {
				return ("an accepted form elicitation's \"content\" must be an object");
			}
			apply_defaults(content, in->params);
		}
		return (NULL);
	case CL_IN_SAMPLING:
		return (json_object_get(r, "content") == NULL ||
		                        !json_is_string(
		                                json_object_get(r, "model"))
		                ? "a sampling answer needs \"content\" and \"model\""
		                : NULL);
	default:
		return (!json_is_array(json_object_get(r, "roots"))
		                ? "a roots answer needs \"roots\": an array"
		                : NULL);
	}
}

int
cl_on_input(kn_actor *self, client *cl, kn_msg *msg, cl_input_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	cl_input   *in   = NULL;
	json_t     *r    = NULL;
	const char *why;

	if (m->request_id == NULL) {
		kn_reply_why(cl->self, corr, MK_EINVAL, "no request_id");
		goto out;
	}
	for (in = cl->inputs; in != NULL; in = in->next) {
		if (strcmp(in->id, m->request_id) == 0) {
			break;
		}
	}
	if (in == NULL) {
		kn_reply_why(cl->self, corr, MK_ENOENT,
		             "no request %.40s is waiting on client %s",
		             m->request_id, cl->cfg->name);
		goto out;
	}
	if (m->result == NULL) {
		r = in->kind == CL_IN_ELICITATION
		        ? json_pack("{s:s}", "action", "decline")
		        : NULL;
	} else if ((r = json_loads(m->result, 0, NULL)) == NULL ||
	           (why = check_answer(in, r)) != NULL) {
		kn_reply_why(cl->self, corr, MK_EINVAL, "%s",
		             r == NULL ? "the answer is not JSON" : why);
		goto out;
	}
	(void)mcp_respond(in->s, in->token, r, -1, "the host declined");
	input_end(cl, in, "answered");
	cl_reply_ok(cl, corr);
out:
	json_decref(r);
	return (0);
}

int
cl_on_inputs(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	json_t       *a   = json_array();
	int64_t       now = kn_now_ns();
	cl_inputs_msg m   = {0};

	for (cl_input *in = cl->inputs; in != NULL; in = in->next) {
		if (in->relayed) {
			continue; /* its call's caller answers it */
		}
		json_array_append_new(
		        a,
		        json_pack(
		                "{s:s, s:s, s:O, s:I}", "request_id", in->id,
		                "method", method_of(in->kind), "params",
		                in->params, "expires_in_ms",
		                (json_int_t)((in->expires - now) / 1000000)));
	}
	m.json = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (m.json == NULL) {
		kn_reply(cl->self, msg, MK_ENOMEM, NULL, 0);
		return (0);
	}
	kn_reply_msg(kn_actor_kernel(cl->self), kn_defer(msg), 0,
	             CODEC_OF(cl_inputs_msg, &m));
	free(m.json);
	return (0);
}
