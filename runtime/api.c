/*
 * api.c - the clients and tool calls of the public API (mcpkeep.h):
 * lifecycle asks go to the supervisor; a tool call goes straight to the
 * client's actor (one mailbox hop) and is answered in the caller's
 * waiting slot.  What the API asks of the credential actor is cred.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "actors/supervisor/supervisor.h"
#include "codec/mp.h"
#include "mcpkeep.h"
#include "model/config.h"
#include "model/names.h"
#include "runtime/runtime_impl.h"

#define ADD_MS                                                                \
	(CLIENT_CONNECT_MS + 10000) /* a first connect, and then some         \
	                             */
#define RELOAD_MS      10000        /* a reload's updates: over a boot's */
#define CALL_MARGIN_MS 2000 /* the client answers by its own deadline */

/* Copies the reply's "error" into *err (when err is not NULL). */
void
rt_take_error(const kn_answer *a, int rv, char **err)
{
	if (err == NULL) {
		return;
	}
	*err = kn_error_text(a->data, a->len);
	if (*err == NULL) {
		*err = strdup(mk_strerror(rv));
	}
}

int
rt_ask(mk_runtime *rt, rt_target to, uint32_t type, bool given,
       const codec_fields *f, const void *m, int timeout_ms, kn_answer *a,
       char **err)
{
	int rv;

	if (err != NULL) {
		*err = NULL;
	}
	memset(a, 0, sizeof(*a));
	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	if (!given) {
		return (MK_EINVAL);
	}
	rv = kn_ask_msg(to == RT_TO_SUPERVISOR ? rt->supervisor
	                                       : rt->credential,
	                type, f, m, timeout_ms, a);
	if (rv != 0) {
		rt_take_error(a, rv, err);
		free(a->data);
		a->data = NULL;
	}
	return (rv);
}

/* rt_ask of the supervisor, given the caller's string given. */
#define sv_ask(rt, type, given, ...)                                          \
	rt_ask((rt), RT_TO_SUPERVISOR, (type), (given) != NULL, __VA_ARGS__)

/* The start of a call given a whole config.json: validates it (*f its
 * parse, the caller's), or says why not (*err as mk_runtime_load's). */
static int
file_of(mk_runtime *rt, const char *config_json, cfg_file **f, char **err)
{
	char e[CFG_ERR_MAX];
	int  rv;

	if (err != NULL) {
		*err = NULL;
	}
	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	if (config_json == NULL) {
		return (MK_EINVAL);
	}
	rv = cfg_file_parse(config_json, strlen(config_json), f, e, sizeof(e));
	if (rv != 0 && err != NULL) {
		*err = strdup(e);
	}
	return (rv);
}

/* Validates config_json and says how long its load may take, *ms: its
 * clients' first connects, so many at once (sv_boot_ms); or says why
 * not (*err as mk_runtime_load's). */
static int
load_ms(mk_runtime *rt, const char *config_json, int *ms, char **err)
{
	cfg_file *f;
	int       rv;

	if ((rv = file_of(rt, config_json, &f, err)) != 0) {
		return (rv);
	}
	*ms = sv_boot_ms(f);
	cfg_file_free(&f);
	return (0);
}

int
mk_runtime_load(mk_runtime *rt, const char *config_json, char **err)
{
	sv_load_msg m = {.file = (char *)config_json};
	kn_answer   a = {0};
	int         ms, rv;

	if ((rv = load_ms(rt, config_json, &ms, err)) == 0) {
		rv = sv_ask(rt, MSG_SV_LOAD, config_json,
		            CODEC_OF(sv_load_msg, &m), ms, &a, err);
	}
	free(a.data);
	return (rv);
}

typedef struct async_load {
	mk_load_fn fn;  /* the caller's callback */
	void      *arg; /* its argument */
} async_load;

static void
on_loaded(void *arg, int status, const void *data, size_t len)
{
	async_load *al  = arg;
	char       *err = NULL;

	if (status != 0) {
		kn_answer a = {.data = (void *)data, .len = len};
		rt_take_error(&a, status, &err);
	}
	al->fn(al->arg, status, err);
	free(err);
	free(al);
}

int
mk_runtime_load_async(mk_runtime *rt, const char *config_json, mk_load_fn fn,
                      void *arg, char **err)
{
	async_load *al;
	kn_answer   a;
	sv_load_msg m = {.file = (char *)config_json};
	int         ms, rv;

	/* invalid: refused here, before anything changes */
	if ((rv = load_ms(rt, fn != NULL ? config_json : NULL, &ms, err)) !=
	    0) {
		return (rv);
	}
	if ((al = malloc(sizeof(*al))) == NULL) {
		return (MK_ENOMEM);
	}
	al->fn  = fn;
	al->arg = arg;
	rv      = kn_ask_cb_msg(rt->supervisor, MSG_SV_LOAD,
	                        CODEC_OF(sv_load_msg, &m), ms, on_loaded, al);
	if (rv != 0) {
		free(al);
		return (rv);
	}
	/* The supervisor takes its inbox in order: once it answered this
	 * ping, it ran the load's handler, so every client of the file
	 * exists (their connects go on). */
	(void)kn_ask(rt->supervisor, MSG_PING, CODEC_EMPTY, CODEC_EMPTY_LEN,
	             rt->opts.ask_timeout_ms, &a);
	free(a.data);
	return (0);
}

int
mk_runtime_configure(mk_runtime *rt, const char *config_json, char **err)
{
	cfg_file       *f;
	kn_answer       a;
	sv_settings_msg m;
	int             rv;

	if ((rv = file_of(rt, config_json, &f, err)) != 0) {
		return (rv);
	}
	m = (sv_settings_msg) {.sync_ms = f->sync_ms,
	                       .exec_ms = f->exec_ms,
	                       .changes = f->changes};
	cfg_file_free(&f);
	rv = kn_ask_msg(rt->supervisor, MSG_SV_SETTINGS,
	                CODEC_OF(sv_settings_msg, &m), rt->opts.ask_timeout_ms,
	                &a);
	if (rv != 0) {
		rt_take_error(&a, rv, err);
	}
	free(a.data);
	return (rv);
}

int
mk_runtime_reload(mk_runtime *rt, const char *config_json, char **err)
{
	sv_file_msg m = {.file = (char *)config_json};
	kn_answer   a;
	int         ms, rv;

	/* invalid: refused here, before anything changes */
	if ((rv = load_ms(rt, config_json, &ms, err)) != 0) {
		return (rv);
	}
	rv = sv_ask(rt, MSG_SV_RELOAD, config_json, CODEC_OF(sv_file_msg, &m),
	            ms + RELOAD_MS, &a, err);
	free(a.data);
	return (rv);
}

int
mk_client_add(mk_runtime *rt, const char *config_json, char **id, char **err)
{
	sv_add_msg m = {.config = (char *)config_json};
	sv_id_msg  out;
	kn_answer  a;
	int        rv;

	if (id != NULL) {
		*id = NULL;
	}
	if ((rv = sv_ask(rt, MSG_SV_ADD, config_json, CODEC_OF(sv_add_msg, &m),
	                 ADD_MS, &a, err)) != 0) {
		return (rv);
	}
	if (sv_id_msg_unpack(a.data, a.len, &out) == 0 && id != NULL) {
		*id    = out.id;
		out.id = NULL;
	}
	sv_id_msg_clear(&out);
	free(a.data);
	return (0);
}

static int
lifecycle(mk_runtime *rt, uint32_t type, const char *client, char **err)
{
	sv_client_msg m = {.client = (char *)client};
	kn_answer     a;
	int rv = sv_ask(rt, type, client, CODEC_OF(sv_client_msg, &m), ADD_MS,
	                &a, err);

	free(a.data);
	return (rv);
}

int
mk_client_update(mk_runtime *rt, const char *client, const char *patch_json,
                 char **err)
{
	sv_update_msg m = {.client = (char *)client,
	                   .patch  = (char *)patch_json};
	kn_answer     a;
	int           rv;

	rv = sv_ask(rt, MSG_SV_UPDATE, patch_json != NULL ? client : NULL,
	            CODEC_OF(sv_update_msg, &m), ADD_MS, &a, err);
	free(a.data);
	return (rv);
}

int
mk_client_remove(mk_runtime *rt, const char *client, char **err)
{
	return (lifecycle(rt, MSG_SV_REMOVE, client, err));
}

int
mk_client_disable(mk_runtime *rt, const char *client, char **err)
{
	return (lifecycle(rt, MSG_SV_DISABLE, client, err));
}

int
mk_client_enable(mk_runtime *rt, const char *client, char **err)
{
	return (lifecycle(rt, MSG_SV_ENABLE, client, err));
}

int
mk_client_reconnect(mk_runtime *rt, const char *client, char **err)
{
	return (lifecycle(rt, MSG_SV_RECONNECT, client, err));
}

int
mk_client_refresh_tools(mk_runtime *rt, const char *client, char **err)
{
	return (lifecycle(rt, MSG_SV_REFRESH, client, err));
}

const char *
mk_state_name(unsigned i)
{
	return (model_state_name(i));
}

const char *
mk_stage_name(unsigned i)
{
	return (model_stage_name(i));
}

int64_t
mk_latency_bound_ms(unsigned i)
{
	return (model_latency_bound_ms(i));
}

int
mk_clients_json(mk_runtime *rt, const char *filter_json, char **out)
{
	sv_list_msg m = {
	        .filter = (char *)(filter_json != NULL ? filter_json : "")};
	sv_json_msg page;
	kn_answer   a;
	int         rv;

	if (out == NULL) {
		return (MK_EINVAL);
	}
	*out = NULL;
	if ((rv = sv_ask(rt, MSG_SV_LIST, m.filter, CODEC_OF(sv_list_msg, &m),
	                 rt_valid(rt) ? rt->opts.ask_timeout_ms : 1, &a,
	                 NULL)) != 0) {
		return (rv);
	}
	if (sv_json_msg_unpack(a.data, a.len, &page) == 0) {
		*out = page.json;
	}
	free(a.data);
	return (*out != NULL ? 0 : MK_EPROTO);
}

int
rt_client_ask(mk_runtime *rt, const char *client, uint32_t type,
              const codec_fields *f, const void *m, kn_answer *ans)
{
	char      who[160];
	kn_actor *a;
	int       rv;

	memset(ans, 0, sizeof(*ans));
	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	if (client == NULL) {
		return (MK_EINVAL);
	}
	snprintf(who, sizeof(who), CLIENT_PREFIX "%s", client);
	if (kn_lookup(rt->kernel, who, &a) != 0) {
		return (MK_ENOENT);
	}
	rv = kn_ask_msg(a, type, f, m, rt->opts.ask_timeout_ms, ans);
	kn_actor_release(&a);
	return (rv);
}

/* One client's JSON text answering type - its counters, transitions or
 * tool-list versions: each answer is one string, json (fields f). */
static int
client_json(mk_runtime *rt, const char *name, uint32_t type,
            const codec_fields *f, char **out)
{
	kn_answer      ans;
	cl_metrics_msg m; /* (the shape of each of them: {json}) */
	int            rv;

	if (out == NULL) {
		return (MK_EINVAL);
	}
	*out = NULL;
	rv   = rt_client_ask(rt, name, type, &codec_no_fields, NULL, &ans);
	if (rv == 0 && codec_msg_unpack(f, ans.data, ans.len, &m) == 0) {
		*out = m.json;
		rv   = *out != NULL ? 0 : MK_EPROTO;
	}
	free(ans.data);
	return (rv);
}

int
mk_client_metrics_json(mk_runtime *rt, const char *name, char **out)
{
	return (client_json(rt, name, MSG_CL_METRICS, &cl_metrics_msg_fields,
	                    out));
}

int
mk_client_history_json(mk_runtime *rt, const char *name, char **out)
{
	return (client_json(rt, name, MSG_CL_HISTORY, &cl_history_msg_fields,
	                    out));
}

/* A held tool list approved or rejected (MSG_CL_DECIDE). */
static int
tools_decide(mk_runtime *rt, const char *name, const char *digest,
             bool approve, char **err)
{
	cl_decide_msg m = {.digest = (char *)digest, .approve = approve};
	kn_answer     ans;
	int           rv;

	if (err != NULL) {
		*err = NULL;
	}
	if (digest == NULL) {
		return (MK_EINVAL);
	}
	rv = rt_client_ask(rt, name, MSG_CL_DECIDE,
	                   CODEC_OF(cl_decide_msg, &m), &ans);
	if (rv != 0 && rv != MK_EHANDLE && rv != MK_ENOENT) {
		rt_take_error(&ans, rv, err);
	}
	free(ans.data);
	return (rv);
}

int
mk_client_tools_approve(mk_runtime *rt, const char *name, const char *digest,
                        char **err)
{
	return (tools_decide(rt, name, digest, true, err));
}

int
mk_client_tools_reject(mk_runtime *rt, const char *name, const char *digest,
                       char **err)
{
	return (tools_decide(rt, name, digest, false, err));
}

int
mk_calls_unknown_json(mk_runtime *rt, char **out)
{
	kn_answer   a;
	sv_json_msg m;
	int         rv;

	if (out == NULL) {
		return (MK_EINVAL);
	}
	*out = NULL;
	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	rv = sv_ask(rt, MSG_SV_UNKNOWNS, "", &codec_no_fields, NULL,
	            rt->opts.ask_timeout_ms, &a, NULL);
	if (rv == 0 && sv_json_msg_unpack(a.data, a.len, &m) == 0) {
		*out = m.json;
		rv   = *out != NULL ? 0 : MK_EPROTO;
	}
	free(a.data);
	return (rv);
}

int
mk_client_tool_versions_json(mk_runtime *rt, const char *name, char **out)
{
	return (client_json(rt, name, MSG_CL_VERSIONS, &cl_versions_msg_fields,
	                    out));
}

/* ---- tool calls ------------------------------------------------------- */

void
mk_result_free(mk_result **res)
{
	mk_result *r;

	if (res == NULL || (r = *res) == NULL) {
		return;
	}
	*res = NULL;
	free(r->result);
	free(r->error);
	free(r->error_kind);
	free(r->auth_required);
	free(r->recovery);
	free(r);
}

/* Builds a result from a client's reply. */
static mk_result *
result_of(int status, const void *data, size_t len)
{
	mk_result    *res = calloc(1, sizeof(*res));
	cl_result_msg ok;
	cl_failed_msg f;

	if (res == NULL) {
		return (NULL);
	}
	if (status == 0 && cl_result_msg_unpack(data, len, &ok) == 0) {
		res->result   = ok.result; /* the result owns them now */
		res->recovery = ok.recovery;
	} else if (status != 0 && cl_failed_msg_unpack(data, len, &f) == 0) {
		res->error         = f.error;
		res->error_kind    = f.kind;
		res->http_status   = (int)f.http_status;
		res->auth_required = f.auth_required;
		res->recovery      = f.recovery;
	}
	if (status != 0 && res->error == NULL) {
		res->error = strdup(mk_strerror(status));
	}
	return (res);
}

/* W3C Trace Context: a traceparent of version 00 whose ids are not all
 * zero. */
static bool
traceparent_ok(const char *t)
{
	static const int parts[] = {2, 32, 16, 2};
	const char      *p       = t;

	for (int i = 0; i < 4; i++) {
		bool nonzero = false;
		for (int k = 0; k < parts[i]; k++, p++) {
			if (!((*p >= '0' && *p <= '9') ||
			      (*p >= 'a' && *p <= 'f'))) {
				return (false);
			}
			nonzero |= *p != '0';
		}
		if ((i == 1 || i == 2) && !nonzero) {
			return (false);
		}
		if (*p != (i < 3 ? '-' : '\0')) {
			return (false);
		}
		p += i < 3;
	}
	return (strncmp(t, "00-", 3) == 0);
}

static bool
tracestate_ok(const char *t)
{
	size_t n = strlen(t);

	for (size_t i = 0; i < n; i++) {
		if (t[i] < 0x20 || t[i] > 0x7e) {
			return (false);
		}
	}
	return (n <= 512);
}

/* Finds the client's actor and fills the call's message m (borrowing
 * call's strings and trace's valid ones). */
_Static_assert((int)MK_CALL_TOOL == CL_CALL_TOOL &&
                       (int)MK_CALL_PROMPT == CL_CALL_PROMPT &&
                       (int)MK_CALL_RESOURCE == CL_CALL_RESOURCE,
               "a call's kind travels as it is");

static int
prepare(mk_runtime *rt, const mk_call *given_call, const mk_call_how *given,
        kn_actor **ap, cl_call_msg *m, int *timeout)
{
	mk_call_how  how = MK_CALL_HOW_INIT;
	mk_call      c = MK_CALL_INIT, *call = &c; /* (the caller's, whole) */
	mk_call_kind kind;
	const mk_trace *trace;
	char            name[160];

	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	/* (their first size bytes: the ABI rules) */
	if (given != NULL) {
		if (!rt_size_ok(given->size, sizeof(how))) {
			return (MK_EINVAL);
		}
		memcpy(&how, given, given->size);
	}
	if (given_call == NULL || !rt_size_ok(given_call->size, sizeof(c))) {
		return (MK_EINVAL);
	}
	memcpy(&c, given_call, given_call->size);
	kind  = how.kind;
	trace = call->trace;
	if (call->client == NULL || call->tool == NULL ||
	    call->timeout_ms < 0 || kind < MK_CALL_TOOL ||
	    kind > MK_CALL_RESOURCE) {
		return (MK_EINVAL);
	}
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", call->client);
	if (kn_lookup(rt->kernel, name, ap) != 0) {
		return (MK_ENOENT);
	}
	/* the identity, by precedence: user > vk > session */
	const char *mode = call->user_id != NULL ? "user"
	        : call->virtual_key != NULL      ? "vk"
	        : call->session_id != NULL       ? "session"
	                                         : NULL;
	const char *who  = call->user_id != NULL ? call->user_id
	         : call->virtual_key != NULL     ? call->virtual_key
	                                         : call->session_id;
	*m               = (cl_call_msg) {
	                      .tool      = (char *)call->tool,
	                      .arguments = (char *)(call->arguments != NULL ? call->arguments
	                                                                    : "{}"),
	                      .timeout_ms = call->timeout_ms,
	                      .mode       = (char *)mode,
	                      .identity   = (char *)(mode != NULL ? who : NULL),
	                      .subject    = (char *)call->subject_token,
	                      .requester  = (char *)call->requester,
	                      /* (the runtime's own process: a function and
	                       * its argument travel as numbers) */
	                      .progress      = (int64_t)(uintptr_t)call->progress,
	                      .progress_arg  = (int64_t)(uintptr_t)call->progress_arg,
	                      .kind          = kind,
	                      .input         = (int64_t)(uintptr_t)how.input,
	                      .input_arg     = (int64_t)(uintptr_t)how.input_arg,
	                      .param_headers = (char *)how.param_headers,
        };
	if (trace != NULL && trace->traceparent != NULL &&
	    traceparent_ok(trace->traceparent)) {
		m->traceparent = (char *)trace->traceparent;
		if (trace->tracestate != NULL &&
		    tracestate_ok(trace->tracestate)) {
			m->tracestate = (char *)trace->tracestate;
		}
	}
	/* the client bounds the call by its own timeout; this bounds the
	 * wait for its answer (never forever) */
	*timeout = (call->timeout_ms > 0 ? call->timeout_ms : 600000) +
	        CALL_MARGIN_MS;
	return (0);
}

int
mk_tool_call(mk_runtime *rt, const mk_call *call, mk_result **res)
{
	return (mk_call_run(rt, call, NULL, res));
}

int
mk_call_run(mk_runtime *rt, const mk_call *call, const mk_call_how *how,
            mk_result **res)
{
	kn_actor   *a;
	kn_answer   ans;
	cl_call_msg m;
	int         timeout, rv;

	if (res != NULL) {
		*res = NULL;
	}
	if ((rv = prepare(rt, call, how, &a, &m, &timeout)) != 0) {
		return (rv);
	}
	rv = kn_ask_msg(a, MSG_CL_CALL, CODEC_OF(cl_call_msg, &m), timeout,
	                &ans);
	kn_actor_release(&a);
	if (res != NULL && (ans.data != NULL || rv != 0)) {
		*res = result_of(rv, ans.data, ans.len);
	}
	free(ans.data);
	return (rv);
}

typedef struct async_call {
	mk_done_fn fn;  /* the caller's callback */
	void      *arg; /* its argument */
} async_call;

static void
on_answer(void *arg, int status, const void *data, size_t len)
{
	async_call *ac = arg;

	ac->fn(ac->arg, status, result_of(status, data, len));
	free(ac);
}

int
mk_tool_call_async(mk_runtime *rt, const mk_call *call, mk_done_fn fn,
                   void *arg)
{
	return (mk_call_start(rt, call, NULL, fn, arg, NULL));
}

/* ---- deprecated (mcpkeep.h) */

/* call with trace (its size checked as mk_call_run would). */
static const mk_call *
traced(const mk_call *call, const mk_trace *trace, mk_call *c)
{
	if (call == NULL || !rt_size_ok(call->size, sizeof(*c))) {
		return (call); /* (refused where it is read) */
	}
	*c = (mk_call)MK_CALL_INIT;
	memcpy(c, call, call->size);
	c->size  = sizeof(*c);
	c->trace = trace;
	return (c);
}

int
mk_tool_call_traced(mk_runtime *rt, const mk_call *call, const mk_trace *trace,
                    mk_result **res)
{
	mk_call c;

	return (mk_call_run(rt, traced(call, trace, &c), NULL, res));
}

int
mk_tool_call_async_traced(mk_runtime *rt, const mk_call *call,
                          const mk_trace *trace, mk_done_fn fn, void *arg)
{
	mk_call c;

	return (mk_call_start(rt, traced(call, trace, &c), NULL, fn, arg,
	                      NULL));
}

int
mk_tool_call_start(mk_runtime *rt, const mk_call *call, const mk_trace *trace,
                   mk_done_fn fn, void *arg, uint64_t *ticket)
{
	mk_call c;

	return (mk_call_start(rt, traced(call, trace, &c), NULL, fn, arg,
	                      ticket));
}

int
mk_call_start(mk_runtime *rt, const mk_call *call, const mk_call_how *how,
              mk_done_fn fn, void *arg, uint64_t *ticket)
{
	static _Atomic uint64_t tickets;
	async_call             *ac;
	kn_actor               *a;
	cl_call_msg             m;
	int                     timeout, rv;

	if (fn == NULL) {
		return (MK_EINVAL);
	}
	if ((rv = prepare(rt, call, how, &a, &m, &timeout)) != 0) {
		return (rv);
	}
	m.ticket = (int64_t)++tickets; /* (never 0; its requests find it) */
	if (ticket != NULL) {
		*ticket = (uint64_t)m.ticket;
	}
	if ((ac = malloc(sizeof(*ac))) == NULL) {
		kn_actor_release(&a);
		return (MK_ENOMEM);
	}
	ac->fn  = fn;
	ac->arg = arg;
	rv = kn_ask_cb_msg(a, MSG_CL_CALL, CODEC_OF(cl_call_msg, &m), timeout,
	                   on_answer, ac);
	kn_actor_release(&a);
	if (rv != 0) {
		free(ac);
	}
	return (rv);
}

int
mk_tool_call_cancel(mk_runtime *rt, const char *client, uint64_t ticket,
                    const char *reason)
{
	char          name[160];
	kn_actor     *a;
	cl_cancel_msg m = {.ticket = (int64_t)ticket,
	                   .reason = (char *)reason};
	int           rv;

	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	if (client == NULL || ticket == 0) {
		return (MK_EINVAL);
	}
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", client);
	if (kn_lookup(rt->kernel, name, &a) != 0) {
		return (MK_ENOENT);
	}
	rv = kn_tell_msg(a, NULL, MSG_CL_CANCEL, CODEC_OF(cl_cancel_msg, &m));
	kn_actor_release(&a);
	return (rv);
}

void
mk_log(mk_log_level level, const char *component, const char *fmt, ...)
{
	va_list ap;

	if (fmt == NULL) {
		return;
	}
	va_start(ap, fmt);
	kn_logv(level, component != NULL ? component : "-", fmt, ap);
	va_end(ap);
}

int
mk_stream_snapshot(mk_runtime *rt, int timeout_ms)
{
	kn_answer a;
	int       rv;

	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	rv = sv_ask(rt, MSG_SV_SNAPSHOT, "", &codec_no_fields, NULL,
	            timeout_ms > 0 ? timeout_ms : rt->opts.ask_timeout_ms, &a,
	            NULL);
	free(a.data);
	return (rv);
}
