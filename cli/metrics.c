/*
 * metrics.c - GET /metrics: Prometheus text of the clients' states and
 * counters, the runtime's and the daemon's own.  Client names are
 * [A-Za-z0-9_]: no label needs escaping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"
#include "cli/gateway/gateway.h"

static json_int_t
num(const json_t *o, const char *path)
{
	char        key[64];
	const char *dot;

	while ((dot = strchr(path, '.')) != NULL) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		o    = json_object_get(o, key);
		path = dot + 1;
	}
	return (json_integer_value(json_object_get(o, path)));
}

/* One counter family, a sample per client and label value. */
static void
family(FILE *f, json_t *all, const char *name, const char *help,
       const char *label, const char *const *values, const char *prefix)
{
	size_t  i;
	json_t *c;

	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	json_array_foreach(all, i, c)
	{
		const char *cn = clients_name(c);
		char        path[96];

		for (int k = 0; values[k] != NULL; k++) {
			snprintf(path, sizeof(path), "metrics.%s%s", prefix,
			         values[k]);
			if (label == NULL) {
				fprintf(f, "%s{client=\"%s\"} %lld\n", name,
				        cn, (long long)num(c, path));
			} else {
				fprintf(f,
				        "%s{client=\"%s\",%s=\"%s\"} %lld\n",
				        name, cn, label, values[k],
				        (long long)num(c, path));
			}
		}
	}
}

/* The call latency histogram, per client. */
static void
histogram(FILE *f, json_t *all)
{
	size_t  i;
	json_t *c;

	fprintf(f,
	        "# HELP mcpkeep_tool_call_duration_seconds tool call latency\n"
	        "# TYPE mcpkeep_tool_call_duration_seconds histogram\n");
	json_array_foreach(all, i, c)
	{
		const char *cn = clients_name(c);
		json_t     *m  = json_object_get(c, "metrics");
		json_t     *b  = json_object_get(m, "latency_buckets");
		long long   n  = 0;

		for (unsigned k = 0;; k++) {
			int64_t ms = mk_latency_bound_ms(k); /* -1: +Inf */
			char    le[32];
			snprintf(le, sizeof(le), ms < 0 ? "+Inf" : "%g",
			         (double)ms / 1000);
			n += json_integer_value(json_array_get(b, k));
			fprintf(f,
			        "mcpkeep_tool_call_duration_seconds_bucket{client=\"%s\",le=\"%s\"} %lld\n",
			        cn, le, n);
			if (ms < 0) {
				break;
			}
		}
		fprintf(f,
		        "mcpkeep_tool_call_duration_seconds_sum{client=\"%s\"} %.6f\n"
		        "mcpkeep_tool_call_duration_seconds_count{client=\"%s\"} %lld\n",
		        cn, (double)num(m, "latency_sum_us") / 1e6, cn, n);
	}
}

/* GET /metrics: Prometheus text (client names are [A-Za-z0-9_]). */
void
route_metrics(req *r, const char *id, json_t *body)
{
	const char              *stages[16] = {NULL};
	static const char *const outcomes[] = {"ok", "error", "auth_required",
	                                       "refused", NULL};
	static const char *const paths[]    = {"per_call", "shared", "session",
	                                       NULL};
	static const char *const one[]      = {"", NULL};
	static const char *const cached[]   = {"hits", "misses", NULL};
	static const char *const decided[]  = {"held", "approved", "rejected",
	                                       NULL};
	mk_stats                 st         = MK_STATS_INIT;
	char                    *out        = NULL;
	size_t                   len        = 0, i;
	FILE                    *f;
	json_t                  *all, *c;
	int                      count[NSTATES] = {0};

	for (unsigned k = 0; k + 1 < 16 && mk_stage_name(k) != NULL; k++) {
		stages[k] = mk_stage_name(k);
	}
	uint64_t requests, busy, reloads[2];
	int      inflight;

	http_stats(&requests, &inflight, &busy);
	pthread_mutex_lock(&D.mtx);
	reloads[0] = D.reloads[0];
	reloads[1] = D.reloads[1];
	pthread_mutex_unlock(&D.mtx);
	if (mk_runtime_stats(D.rt, &st, 0) != 0 ||
	    (all = clients_all(true)) == NULL) {
		answer_error(r, 503, "the runtime did not answer");
		return;
	}
	if ((f = open_memstream(&out, &len)) == NULL) {
		json_decref(all);
		answer_error(r, 500, "out of memory");
		return;
	}
	json_array_foreach(all, i, c)
	{
		const char *s = json_string_value(json_object_get(c, "state"));
		for (int k = 0; s != NULL && k < NSTATES; k++) {
			count[k] += strcmp(s, mk_state_name(k)) == 0;
		}
	}
	fprintf(f,
	        "# HELP mcpkeep_clients MCP clients by state\n"
	        "# TYPE mcpkeep_clients gauge\n");
	for (int k = 0; k < NSTATES; k++) {
		fprintf(f, "mcpkeep_clients{state=\"%s\"} %d\n",
		        mk_state_name(k), count[k]);
	}
	fprintf(f,
	        "# HELP mcpkeep_tools_held tools held for approval "
	        "(tool_changes)\n# TYPE mcpkeep_tools_held gauge\n");
	json_array_foreach(all, i, c)
	{
		fprintf(f, "mcpkeep_tools_held{client=\"%s\"} %zu\n",
		        clients_name(c),
		        json_object_size(json_object_get(c, "tools_held")));
	}
	family(f, all, "mcpkeep_state_transitions_total",
	       "state transitions published", NULL, one, "transitions");
	family(f, all, "mcpkeep_health_checks_total", "health checks run",
	       NULL, one, "checks");
	family(f, all, "mcpkeep_failures_total", "failed attempts by stage",
	       "stage", stages, "failures.");
	family(f, all, "mcpkeep_tool_calls_total", "tool calls by outcome",
	       "outcome", outcomes, "calls.");
	histogram(f, all);
	family(f, all, "mcpkeep_recoveries_total",
	       "tool calls recovered after an auth or session failure", "path",
	       paths, "recoveries.");
	family(f, all, "mcpkeep_retries_skipped_total",
	       "recoveries whose retry was skipped (not safe to repeat)", NULL,
	       one, "retries_skipped");
	family(f, all, "mcpkeep_tool_cache_total",
	       "calls of cache_results tools answered from the cache (hits) "
	       "or not (misses)",
	       "result", cached, "cache.");
	family(f, all, "mcpkeep_tool_changes_total",
	       "tool_changes: new lists that held tools back, lists approved "
	       "and rejected",
	       "decision", decided, "tool_changes.");
	json_decref(all);
	fprintf(f,
	        "# TYPE mcpkeep_token_refreshes_total counter\n"
	        "mcpkeep_token_refreshes_total %llu\n"
	        "# TYPE mcpkeep_token_exchanges_total counter\n"
	        "mcpkeep_token_exchanges_total %llu\n"
	        "# TYPE mcpkeep_token_requests_total counter\n"
	        "mcpkeep_token_requests_total %llu\n"
	        "# TYPE mcpkeep_stream_subscribers gauge\n"
	        "mcpkeep_stream_subscribers %llu\n"
	        "# TYPE mcpkeep_health_ticks_total counter\n"
	        "mcpkeep_health_ticks_total %llu\n"
	        "# TYPE mcpkeep_messages_total counter\n"
	        "mcpkeep_messages_total %llu\n"
	        "# TYPE mcpkeep_store_healthy gauge\n"
	        "mcpkeep_store_healthy %d\n"
	        "# TYPE mcpkeep_store_failures_total counter\n"
	        "mcpkeep_store_failures_total %llu\n"
	        "# TYPE mcpkeep_store_tool_writes_total counter\n"
	        "mcpkeep_store_tool_writes_total %llu\n"
	        "# TYPE mcpkeep_http_requests_total counter\n"
	        "mcpkeep_http_requests_total %llu\n"
	        "# HELP mcpkeep_http_requests_in_flight admin, data-plane and OAuth callback requests in the works (not the probes)\n"
	        "# TYPE mcpkeep_http_requests_in_flight gauge\n"
	        "mcpkeep_http_requests_in_flight %d\n"
	        "# TYPE mcpkeep_http_requests_busy_total counter\n"
	        "mcpkeep_http_requests_busy_total %llu\n"
	        "# TYPE mcpkeep_reloads_total counter\n"
	        "mcpkeep_reloads_total{result=\"applied\"} %llu\n"
	        "mcpkeep_reloads_total{result=\"refused\"} %llu\n",
	        (unsigned long long)st.token_refreshes,
	        (unsigned long long)st.token_exchanges,
	        (unsigned long long)st.token_requests,
	        (unsigned long long)st.stream_subscribers,
	        (unsigned long long)st.ticks, (unsigned long long)st.messages,
	        st.store_state != MK_STORE_FAILING,
	        (unsigned long long)st.store_failures,
	        (unsigned long long)st.store_tool_writes,
	        (unsigned long long)requests, inflight,
	        (unsigned long long)busy, (unsigned long long)reloads[0],
	        (unsigned long long)reloads[1]);
	fprintf(f,
	        "# HELP mcpkeep_gateway_sessions /mcp sessions open\n"
	        "# TYPE mcpkeep_gateway_sessions gauge\n"
	        "mcpkeep_gateway_sessions %d\n"
	        "# HELP mcpkeep_trace_spans_total spans by what became of "
	        "them (telemetry.otlp_endpoint)\n"
	        "# TYPE mcpkeep_trace_spans_total counter\n"
	        "mcpkeep_trace_spans_total{result=\"exported\"} %llu\n"
	        "mcpkeep_trace_spans_total{result=\"dropped\"} %llu\n",
	        gw_sessions_open(), (unsigned long long)st.spans_exported,
	        (unsigned long long)st.spans_dropped);
	limits_metrics(f);
	fclose(f);
	answer(r, 200, "text/plain; version=0.0.4", out);
	free(out);
}
