/*
 * era.c - what a client keeps of the protocol era its server speaks
 * (transport/mcp.h: mcp_era): the era its last session found, tried
 * first by the next one (no probe on every per-call connection) and
 * forgotten when a connect fails (the server may have changed); the
 * version the list view and the stream show; and, for 2026-07-28, a
 * tool list's ttlMs (a shorter one than tool_sync_interval wins, never
 * under 1 s) and the tools whose x-mcp-header annotations are invalid,
 * dropped with a logged reason (streamable-http "Schema Extension").
 */
#include <stdio.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/log.h"

#define TTL_MIN_MS 1000 /* a tool list is not listed more often */

void
cl_era_learn(client *cl, mcp_session *s)
{
	cl->era = mcp_session_modern(s) ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	snprintf(cl->version, sizeof(cl->version), "%s",
	         mcp_session_version(s));
}

void
cl_era_forget(client *cl)
{
	cl->era = MCP_ERA_AUTO;
}

mcp_era
cl_era(const client *cl)
{
	return (cl->era);
}

void
cl_era_intervals(client *cl)
{
	int64_t sync = cl->cfg->sync_ms ? cl->cfg->sync_ms : cl->def_sync_ms;

	if (cl->ttl_ms > 0 && cl->ttl_ms < sync) {
		sync = cl->ttl_ms < TTL_MIN_MS ? TTL_MIN_MS : cl->ttl_ms;
	}
	cl->sync_ms = sync;
}

json_t *
cl_era_tools(client *cl, json_t *result)
{
	json_t *tools = json_object_get(result, "tools"), *keep, *t;
	json_t *ttl   = json_object_get(result, "ttlMs");
	int64_t was   = cl->sync_ms;
	char    why[200], hash[TOOLS_HASH_HEX];
	size_t  i;

	cl->ttl_ms = json_is_integer(ttl) ? json_integer_value(ttl) : 0;
	cl_era_intervals(cl);
	if (cl->sync_ms != was) {
		cl_push_view(cl); /* the supervisor schedules by it */
	}
	if (cl->era != MCP_ERA_MODERN || cl->cfg->conn != CFG_HTTP ||
	    (keep = json_array()) == NULL) {
		return (json_incref(tools));
	}
	/* said once per list the server sends, not at every refresh */
	bool news = tools_hash(tools, hash) != 0 ||
	        strcmp(hash, cl->listed_hash) != 0;
	memcpy(cl->listed_hash, hash, sizeof(hash));
	json_array_foreach(tools, i, t)
	{
		if (mcp_tool_headers_ok(t, why, sizeof(why))) {
			json_array_append(keep, t);
			continue;
		}
		kn_log(news ? MK_LOG_WARN : MK_LOG_DEBUG, "client",
		       "%s: tool %.80s dropped: %s", cl->cfg->name,
		       json_string_value(json_object_get(t, "name")), why);
	}
	return (keep);
}
