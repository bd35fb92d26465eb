/*
 * state.c - the client actor's state machine (cl_state_enter and its
 * table), last_failure, the state stream, the view the supervisor lists
 * and the client's counters (see client.h).
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "actors/supervisor/supervisor_msg.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "model/names.h"

/* ---- the stream and the view ---------------------------------------------
 */

/* The state shown: per-user clients project a dead admin (discovery)
 * credential as needs_reauth over healthy and unstable - shown on the
 * list and the stream, never the runtime's own state (calls go on). */
cl_state
cl_shown_state(const client *cl)
{
	return (cl->admin_dead &&
	                        (cl->state == CS_HEALTHY ||
	                         cl->state == CS_UNSTABLE)
	                ? CS_REAUTH
	                : cl->state);
}

/* cl's last_failure as messages carry it (borrowed strings, in *lf), or
 * NULL when it has none. */
static model_failure *
failure_of(const client *cl, model_failure *lf)
{
	*lf = (model_failure) {.stage   = (char *)cl->lf_stage,
	                       .message = (char *)cl->lf_message,
	                       .at      = (char *)cl->lf_at,
	                       .since   = (char *)cl->lf_since};
	return (cl->lf_set ? lf : NULL);
}

static void
publish_state(client *cl, cl_state old, bool snapshot)
{
	char           ts[32];
	model_failure  lf;
	cl_state_event ev = {
	        .client_id = cl->cfg->id,
	        .name      = cl->cfg->name,
	        .state     = (char *)cl_state_name(cl_shown_state(cl)),
	        /* nil: a new client's first state */
	        .old_state        = cl->announced || snapshot
	                       ? (char *)cl_state_name(old)
	                       : NULL,
	        .last_failure     = failure_of(cl, &lf),
	        .generation       = (int64_t)cl->gen,
	        .tools_count      = (int64_t)json_array_size(cl->tools),
	        .time             = kn_rfc3339(ts, sizeof(ts)),
	        .node_id          = (char *)cl->node_id,
	        .protocol_version = cl->version, /* "" unknown */
	        .snapshot         = snapshot,
	};

	kn_stream_publish_msg(cl->stream, "state",
	                      CODEC_OF(cl_state_event, &ev));
}

/* Keeps a transition in the history (its failure when it has one). */
static void
remember(client *cl, const char *from, cl_state now)
{
	char    ts[32];
	json_t *t = json_pack("{s:s, s:s, s:s}", "time",
	                      kn_rfc3339(ts, sizeof(ts)), "old_state", from,
	                      "state", cl_state_name(now));

	if (t == NULL ||
	    (cl->history == NULL && (cl->history = json_array()) == NULL)) {
		json_decref(t);
		return; /* (out of memory: the history is a view, not state) */
	}
	if (cl->lf_set) {
		json_object_set_new(t, "stage", json_string(cl->lf_stage));
		json_object_set_new(t, "message", json_string(cl->lf_message));
	}
	if (json_array_size(cl->history) == CL_HISTORY_MAX) {
		json_array_remove(cl->history, 0);
	}
	json_array_append_new(cl->history, t);
}

int
cl_on_history(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	cl_history_msg out = {.json = cl->history != NULL
	                              ? json_dumps(cl->history, JSON_COMPACT)
	                              : strdup("[]")};

	if (out.json == NULL) {
		kn_reply_error(kn_actor_kernel(cl->self), kn_defer(msg),
		               MK_ENOMEM, "out of memory");
		return (0);
	}
	kn_reply_msg(kn_actor_kernel(cl->self), kn_defer(msg), 0,
	             &cl_history_msg_fields, &out);
	free(out.json);
	return (0);
}

void
cl_snapshot(client *cl)
{
	publish_state(cl, cl_shown_state(cl), true);
}

void
cl_cm_failure(client *cl, const char *stage)
{
	for (int i = 0; i < CM_STAGES; i++) {
		if (strcmp(stage, model_stage_name((unsigned)i)) == 0) {
			cl->m.failures[i]++;
		}
	}
	cl_counted(cl);
}

/* Counts a call in the bucket of now, the older buckets shifted out:
 * recent_calls[CM_RECENT - 1] is always the bucket recent_end. */
static void
recent_count(cl_cmetrics *m, bool failed)
{
	int64_t now   = (int64_t)time(NULL) / CM_RECENT_S;
	int64_t shift = now - m->recent_end;

	if (shift >= CM_RECENT) {
		memset(m->recent_calls, 0, sizeof(m->recent_calls));
		memset(m->recent_errors, 0, sizeof(m->recent_errors));
	} else if (shift > 0) {
		size_t keep = (size_t)(CM_RECENT - shift);
		memmove(m->recent_calls, m->recent_calls + shift,
		        keep * sizeof(m->recent_calls[0]));
		memmove(m->recent_errors, m->recent_errors + shift,
		        keep * sizeof(m->recent_errors[0]));
		memset(m->recent_calls + keep, 0,
		       (size_t)shift * sizeof(m->recent_calls[0]));
		memset(m->recent_errors + keep, 0,
		       (size_t)shift * sizeof(m->recent_errors[0]));
	}
	if (shift > 0) { /* (a clock set back counts in the last one) */
		m->recent_end = now;
	}
	m->recent_calls[CM_RECENT - 1]++;
	m->recent_errors[CM_RECENT - 1] += failed;
}

void
cl_cm_call(client *cl, const cl_call *c, int outcome)
{
	int64_t us = (kn_now_ns() - c->t0) / 1000;
	int     b  = 0;

	while (b < CM_BUCKETS &&
	       us > model_latency_bound_ms((unsigned)b) * 1000) {
		b++;
	}
	cl->m.buckets[b]++;
	cl->m.sum_us += (uint64_t)(us > 0 ? us : 0);
	cl_cm_outcome(cl, outcome);
}

void
cl_cm_outcome(client *cl, int outcome)
{
	cl->m.calls[outcome]++;
	recent_count(&cl->m, outcome != CM_OK);
	cl_counted(cl);
}

/* The counters as mk_client_metrics_json gives them: JSON text
 * (malloc'd), or NULL out of memory.  Written with stdio, not jansson:
 * every check's reply carries it. */
static char *
metrics_text(const client *cl)
{
	const cl_cmetrics *m   = &cl->m;
	char              *out = NULL;
	size_t             len = 0;
	FILE              *f   = open_memstream(&out, &len);

	if (f == NULL) {
		return (NULL);
	}
	fprintf(f,
	        "{\"transitions\":%" PRIu64 ",\"checks\":%" PRIu64
	        ",\"failures\":{",
	        m->transitions, m->checks);
	for (unsigned i = 0; i < CM_STAGES; i++) {
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "",
		        model_stage_name(i), m->failures[i]);
	}
	fprintf(f,
	        "},\"calls\":{\"ok\":%" PRIu64 ",\"error\":%" PRIu64
	        ",\"auth_required\":%" PRIu64 ",\"refused\":%" PRIu64
	        "},\"latency_buckets\":[",
	        m->calls[CM_OK], m->calls[CM_ERROR], m->calls[CM_AUTH],
	        m->calls[CM_REFUSED]);
	for (unsigned i = 0; i <= CM_BUCKETS; i++) {
		fprintf(f, "%s%" PRIu64, i ? "," : "", m->buckets[i]);
	}
	fprintf(f,
	        "],\"latency_sum_us\":%" PRIu64
	        ",\"recoveries\":{\"per_call\":%" PRIu64 ",\"shared\":%" PRIu64
	        ",\"session\":%" PRIu64 "},\"retries_skipped\":%" PRIu64
	        ",\"relists\":%" PRIu64 ",\"connect_failures_in_row\":%u"
	        ",\"cache\":{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 "}"
	        ",\"tool_changes\":{\"held\":%" PRIu64 ",\"approved\":%" PRIu64
	        ",\"rejected\":%" PRIu64 "}",
	        m->sum_us, m->recoveries[0], m->recoveries[1],
	        m->recoveries[2], m->skipped, m->relists, cl->fails,
	        m->cache[0], m->cache[1], m->pin[0], m->pin[1], m->pin[2]);
	/* the last calls per CM_RECENT_S, the newest ending at "end" */
	fprintf(f,
	        ",\"recent\":{\"bucket_s\":%d,\"end\":%" PRId64 ",\"calls\":[",
	        CM_RECENT_S, (m->recent_end + 1) * CM_RECENT_S);
	for (unsigned i = 0; i < CM_RECENT; i++) {
		fprintf(f, "%s%" PRIu32, i ? "," : "", m->recent_calls[i]);
	}
	fprintf(f, "],\"errors\":[");
	for (unsigned i = 0; i < CM_RECENT; i++) {
		fprintf(f, "%s%" PRIu32, i ? "," : "", m->recent_errors[i]);
	}
	fprintf(f, "]}}");
	if (fclose(f) != 0) {
		free(out);
		return (NULL);
	}
	return (out);
}

char *
cl_metrics_text(client *cl)
{
	char *text = metrics_text(cl);

	if (text != NULL) {
		cl->msent       = cl->m; /* what the supervisor will hold */
		cl->msent_fails = cl->fails;
	}
	return (text);
}

/* The counters go to the supervisor (what /metrics lists), unless a
 * check's reply took them there since they last changed. */
static void
metrics_tick(kn_actor *self, void *arg)
{
	client        *cl   = arg;
	sv_metrics_msg push = {.id = cl->cfg->id};

	cl->mtimer = 0;
	if (memcmp(&cl->m, &cl->msent, sizeof(cl->m)) == 0 &&
	    cl->fails == cl->msent_fails) {
		return;
	}
	if ((push.json = cl_metrics_text(cl)) != NULL) {
		(void)kn_tell_msg(cl->sv, self, MSG_SV_METRICS,
		                  CODEC_OF(sv_metrics_msg, &push));
	}
	free(push.json);
}

void
cl_counted(client *cl)
{
	if (cl->mtimer == 0) {
		cl->mtimer = kn_timer_add(cl->self, CL_METRICS_PUSH_MS,
		                          metrics_tick, cl);
	}
}

int
cl_on_metrics(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	cl_metrics_msg out = {.json = metrics_text(cl)};

	if (out.json == NULL) {
		kn_reply_error(kn_actor_kernel(cl->self), kn_defer(msg),
		               MK_ENOMEM, "out of memory");
		return (0);
	}
	kn_reply_msg(kn_actor_kernel(cl->self), kn_defer(msg), 0,
	             &cl_metrics_msg_fields, &out);
	free(out.json);
	return (0);
}

/* The config as given, with its client_id (generated ones too). */
static json_t *
view_config(const client *cl)
{
	json_t *c = cfg_client_redacted(cl->cfg);

	if (c != NULL) {
		json_object_set_new(c, "client_id", json_string(cl->cfg->id));
	}
	return (c);
}

json_t *
cl_view_json(client *cl)
{
	const char *state = cl_state_name(cl_shown_state(cl));
	json_t     *v     = json_pack(
	                "{s:o*, s:o*, s:s, s:s, s:I}", "config", view_config(cl),
	                "tools", cl->tools ? tools_sorted(cl->tools) : json_array(),
	                "state", state, "connection_mode",
                cl->cfg->sticky ? "sticky" : "per_call", "generation",
	                (json_int_t)cl->gen);

	if (v != NULL) {
		cl_lists_view(cl, v);
	}
	if (v != NULL && cl->lf_set) {
		model_failure lf;
		json_object_set_new(v, "last_failure",
		                    model_failure_json(failure_of(cl, &lf)));
	}
	if (v != NULL && cl->state == CS_UNSTABLE && cl->lf_set &&
	    json_array_size(cl->tools) > 0) {
		/* the last good list, still listed and called: since when
		 * and why it may be out of date */
		json_object_set_new(v, "tools_stale_since",
		                    json_string(cl->lf_since));
		json_object_set_new(v, "tools_stale_reason",
		                    json_string(cl->lf_message));
	}
	if (v != NULL) {
		cl_pin_view(cl, v);
	}
	if (v != NULL && json_array_size(cl->versions) > 0) {
		/* the last change of the list, with what changed */
		json_object_set(
		        v, "tools_version",
		        json_array_get(cl->versions,
		                       json_array_size(cl->versions) - 1));
	}
	if (v != NULL && cl->checked_at[0] != '\0') {
		json_object_set_new(v, "checked_at",
		                    json_string(cl->checked_at));
	}
	if (v != NULL && cl->version[0] != '\0') {
		json_object_set_new(v, "protocol_version",
		                    json_string(cl->version));
	}
	if (v != NULL && cl->retry_timer != 0) { /* a reconnect is due */
		int64_t left = (cl->retry_ns - kn_now_ns()) / KN_NS_PER_MS;
		char    at[40];
		json_object_set_new(
		        v, "next_retry_at",
		        json_string(kn_rfc3339_in(at, sizeof(at),
		                                  left > 0 ? left : 0)));
	}
	if (v != NULL && cl->ninputs > 0) { /* servers' requests waiting */
		json_object_set_new(v, "inputs_waiting",
		                    json_integer(cl->ninputs));
	}
	return (v);
}

void
cl_push_view(client *cl)
{
	json_t *v    = cl_view_json(cl);
	char   *text = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;

	json_decref(v);
	if (text == NULL) {
		KN_ERROR("client", "%s: cannot build the client view",
		         cl->cfg->name);
		return;
	}
	model_failure lf;
	sv_view_msg   m = {.id      = cl->cfg->id,
	                   .name    = cl->cfg->name,
	                   .state   = cl->state,
	                   .shown   = cl_shown_state(cl),
	                   .view    = text,
	                   .failure = failure_of(cl, &lf),
	                   .sync_ms = cl->sync_ms};
	if (kn_tell_msg(cl->sv, cl->self, MSG_SV_VIEW,
	                CODEC_OF(sv_view_msg, &m)) != 0) {
		KN_DEBUG("client", "%s: supervisor did not take the view",
		         cl->cfg->name);
	}
	free(text);
}

/* ---- state and last_failure ------------------------------------------------
 */

/* Publishes the state if it differs from the one last published (or
 * was never published), else just refreshes the view. */
void
cl_transition(client *cl)
{
	cl_state old = cl->shown, now = cl_shown_state(cl);

	if (now == old && cl->announced) {
		cl_push_view(cl);
		return;
	}
	/* (a new client's first state: "(new) -> ...", never "x -> x") */
	const char *from = cl->announced ? cl_state_name(old) : "(new)";
	kn_field    f[]  = {KN_STR("old_state", from),
	                    KN_STR("state", cl_state_name(now)),
	                    KN_STR("stage", cl->lf_stage),
	                    KN_STR("message", cl->lf_message)};
	if (cl->lf_set) {
		/* a failure at WARN when it starts (its retries are DEBUG,
		 * a state that stays is not logged again) */
		KN_LOGF(now == CS_UNSTABLE ? MK_LOG_WARN : MK_LOG_INFO,
		        "client", f, "%s: %s -> %s (stage %s: %s)",
		        cl->cfg->name, from, cl_state_name(now), cl->lf_stage,
		        cl->lf_message);
	} else {
		kn_logf(MK_LOG_INFO, "client", f, 2, "%s: %s -> %s",
		        cl->cfg->name, from, cl_state_name(now));
	}
	remember(cl, from, now);
	/* the supervisor has the view before anyone hears of the change */
	cl_push_view(cl);
	publish_state(cl, old, false);
	cl->m.transitions++;
	cl_counted(cl);
	cl->shown     = now;
	cl->announced = true;
}

/*
 * The client's state machine: every change of cl->state goes through
 * cl_state_enter, which lets it through only when this table allows
 * from -> to for its cause.  A result (a check, a dial, a call's
 * transport) moves only between healthy and unstable: the authoritative
 * states (disabled, needs_reauth, pending_verification) are never
 * overwritten by one.  An admin's act disables from anywhere and
 * enables out of disabled; the credential's word makes needs_reauth
 * from a live or pending client and ends needs_reauth or pending
 * (unstable: the connect that follows decides).
 */
#define TO(s) (1u << (s))
static const unsigned allowed[CL_BY_COUNT][CS_COUNT] = {
        [CL_BY_RESULT] =
                {
                        [CS_HEALTHY]  = TO(CS_HEALTHY) | TO(CS_UNSTABLE),
                        [CS_UNSTABLE] = TO(CS_HEALTHY) | TO(CS_UNSTABLE),
                },
        [CL_BY_ADMIN] =
                {
                        [CS_HEALTHY]  = TO(CS_DISABLED),
                        [CS_UNSTABLE] = TO(CS_DISABLED),
                        [CS_REAUTH]   = TO(CS_DISABLED),
                        [CS_PENDING]  = TO(CS_DISABLED),
                        [CS_DISABLED] = TO(CS_UNSTABLE) | TO(CS_PENDING),
                },
        [CL_BY_CRED] =
                {
                        [CS_HEALTHY]  = TO(CS_REAUTH),
                        [CS_UNSTABLE] = TO(CS_REAUTH),
                        [CS_REAUTH]   = TO(CS_REAUTH) | TO(CS_UNSTABLE),
                        [CS_PENDING]  = TO(CS_REAUTH) | TO(CS_UNSTABLE),
                },
};
#undef TO

bool
cl_state_enter(client *cl, cl_state to, cl_cause by)
{
	static const char *const causes[] = {"a result", "an admin",
	                                     "the credential"};
	cl_state                 from     = cl->state;

	if ((allowed[by][from] & (1u << to)) == 0) {
		if (by != CL_BY_RESULT) {
			/* (a result meeting an authoritative state is the
			 * guard at work; anything else is a bug) */
			KN_ERROR(
			        "client",
			        "%s: %s -> %s by %s is not a transition of the state machine: refused",
			        cl->cfg->name, cl_state_name(from),
			        cl_state_name(to), causes[by]);
		}
		return (false);
	}
	cl->state = to;
	return (true);
}

void
cl_set_state(client *cl, cl_state s)
{
	if (!cl_state_enter(cl, s, CL_BY_ADMIN)) {
		return;
	}
	if (s == CS_DISABLED || s == CS_PENDING) {
		/* changed without a failed attempt: no reason to carry */
		cl->lf_set = false;
	}
	cl_transition(cl);
}

bool
cl_failure(client *cl, const char *stage, const char *message)
{
	char *norm = text_failure_message(message);

	if (norm == NULL) {
		return (false);
	}
	kn_rfc3339(cl->lf_at, sizeof(cl->lf_at));
	if (!cl->lf_set) {
		memcpy(cl->lf_since, cl->lf_at, sizeof(cl->lf_since));
	}
	free(cl->lf_message);
	cl->lf_message = norm;
	snprintf(cl->lf_stage, sizeof(cl->lf_stage), "%s", stage);
	cl->lf_set = true;
	cl_cm_failure(cl, stage);
	kn_field f[] = {KN_STR("stage", stage), KN_STR("message", norm)};
	KN_LOGF(MK_LOG_DEBUG, "client", f, "%s: %s failed: %s", cl->cfg->name,
	        stage, norm);
	return (true);
}

void
cl_fail(client *cl, cl_state s, const char *stage, const char *message)
{
	/* authoritative states are never overwritten by a result */
	if ((allowed[CL_BY_RESULT][cl->state] & (1u << s)) == 0 ||
	    !cl_failure(cl, stage, message)) {
		return;
	}
	(void)cl_state_enter(cl, s, CL_BY_RESULT);
	cl_transition(cl); /* or, unchanged, a view with the new "at" */
}

void
cl_pass(client *cl)
{
	if ((cl->state == CS_HEALTHY && !cl->lf_set && cl->announced) ||
	    !cl_state_enter(cl, CS_HEALTHY, CL_BY_RESULT)) {
		return; /* nothing changed: no view to push */
	}
	cl->lf_set = false;
	cl_transition(cl);
}

void
cl_set_tools(client *cl, json_t *tools)
{
	char          hash[TOOLS_HASH_HEX], *diff;
	json_t       *version;
	cl_list_event ev;

	if (tools_hash(tools, hash) != 0 || strcmp(hash, cl->hash) == 0) {
		cl->empties = 0;
		return; /* unchanged: no event, no write */
	}
	if (json_array_size(tools) == 0 && json_array_size(cl->tools) > 0 &&
	    ++cl->empties < 2) {
		/* a server restarting may list nothing for a moment: the
		 * good list stays until it says so twice in a row */
		KN_WARN("client",
		        "%s: the server listed no tools (it had %zu): kept "
		        "until it lists none a second time in a row",
		        cl->cfg->name, json_array_size(cl->tools));
		return;
	}
	cl->empties = 0;
	version     = cl_version_new(cl, tools, hash); /* (against the last) */
	diff        = version != NULL
	               ? json_dumps(json_object_get(version, "diff"), JSON_COMPACT)
	               : NULL;
	json_decref(cl->tools);
	cl->tools = json_incref(tools);
	memcpy(cl->hash, hash, sizeof(hash));
	cl_cache_listed(cl);
	cl_pin_listed(cl);
	ev = (cl_list_event) {
	        .client_id = cl->cfg->id,
	        .name      = cl->cfg->name,
	        .hash      = cl->hash,
	        .count     = (int64_t)json_array_size(tools),
	        .diff      = diff,
	};
	cl_push_view(cl);
	kn_stream_publish_msg(cl->stream, "tools",
	                      CODEC_OF(cl_list_event, &ev));
	free(diff);
	if (cl->ps != NULL) {
		ps_tools_msg m = {.id      = cl->cfg->id,
		                  .hash    = cl->hash,
		                  .tools   = json_dumps(tools, JSON_COMPACT),
		                  .version = version != NULL
		                          ? json_dumps(version, JSON_COMPACT)
		                          : NULL};
		if (m.tools == NULL ||
		    kn_tell_msg(cl->ps, cl->self, MSG_PS_TOOLS_PUT,
		                CODEC_OF(ps_tools_msg, &m)) != 0) {
			KN_ERROR("client",
			         "%s: the changed tool list was not stored",
			         cl->cfg->name);
		}
		free(m.tools);
		free(m.version);
	}
}

void
cl_save_once(client *cl)
{
	if (cl->unsaved) {
		cl->unsaved = false;
		cl_persist_config(cl);
	}
}

void
cl_persist_config(client *cl)
{
	ps_client_msg m = {.id     = cl->cfg->id,
	                   .name   = cl->cfg->name,
	                   .ticket = (int64_t)cl->ticket};

	cl->ticket = 0; /* one write per change */
	if (cl->ps == NULL) {
		return;
	}
	json_t *stored = cfg_client_stored(cl->cfg); /* its literal mask too */
	m.config = stored != NULL ? json_dumps(stored, JSON_COMPACT) : NULL;
	json_decref(stored);
	if (m.config == NULL ||
	    kn_tell_msg(cl->ps, cl->self, MSG_PS_CLIENT_PUT,
	                CODEC_OF(ps_client_msg, &m)) != 0) {
		KN_ERROR("client", "%s: the config was not stored",
		         cl->cfg->name);
	}
	free(m.config);
}
