/*
 * inbound.c - what the server sends the client unasked: its requests
 * (ping answered here; elicitation/create, sampling/createMessage,
 * roots/list and the rest to the owner, who answers with mcp_respond -
 * or, for an input of a 2026-07-28 input_required result, modern.c's
 * retry follows) and its log messages.  The loop's thread (mcp.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "transport/session_impl.h"

int
session_answer(mcp_session *s, json_t *id, json_t *result, int code,
               const char *message)
{
	json_t *resp;
	char   *json;
	int     rv;

	if (result != NULL) {
		resp = json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", id,
		                 "result", result);
	} else {
		resp = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
		                 "id", id, "error", "code", code, "message",
		                 message);
	}
	json = resp != NULL ? json_dumps(resp, JSON_COMPACT) : NULL;
	json_decref(resp);
	if (json == NULL) {
		return (MK_ENOMEM);
	}
	rv = s->conn->ops->send(s->conn, 0, json, strlen(json), s->timeout_ms,
	                        NULL);
	free(json);
	return (rv);
}

/* The server's log message, to the owner as text. */
void
session_on_log(mcp_session *s, json_t *params)
{
	const char *level =
	        json_string_value(json_object_get(params, "level"));
	const char *logger =
	        json_string_value(json_object_get(params, "logger"));
	json_t *data = json_object_get(params, "data");
	char    text[MCP_LOG_MAX];

	if (s->h.log == NULL || data == NULL) {
		return;
	}
	if (json_is_string(data)) {
		snprintf(text, sizeof(text), "%s", json_string_value(data));
	} else {
		size_t n =
		        json_dumpb(data, text, sizeof(text) - 1, JSON_COMPACT);
		if (n == 0 ||
		    n >= sizeof(text) - 1) { /* (jansson: unfinished) */
			snprintf(text, sizeof(text),
			         "(a JSON value of %zu bytes, not shown)", n);
		} else {
			text[n] = '\0';
		}
	}
	s->h.log(s->h.arg, s, level != NULL ? level : "info",
	         logger != NULL ? logger : "", text);
}

/* Server-to-client requests: ping is answered here, the rest go to the
 * owner, who takes them or not (mcp_handlers). */
void
session_on_request(mcp_session *s, codec_jr_msg *m)
{
	json_t  *id  = json_object_get(m->raw, "id");
	uint64_t tok = ++s->next_token;
	inbound *ib  = NULL;
	int      rv  = -1;

	if (strcmp(m->method, "ping") == 0) {
		json_t *empty = json_object();
		(void)session_answer(s, id, empty, 0, NULL);
		json_decref(empty);
		return;
	}
	if (s->h.request != NULL && s->inbound.count >= MCP_INBOUND_MAX) {
		(void)session_answer(
		        s, id, NULL, -32603,
		        "too many requests waiting in this client");
		return;
	}
	if (s->h.request != NULL && (ib = calloc(1, sizeof(*ib))) != NULL &&
	    idmap_put(&s->inbound, tok, ib) == 0) {
		ib->id = json_incref(id);
		rv     = s->h.request(s->h.arg, s, tok, m->method, m->params);
		if (rv != 0 && (ib = idmap_del(&s->inbound, tok)) != NULL) {
			json_decref(ib->id);
			free(ib);
		}
	} else {
		free(ib); /* no handler, or out of memory */
	}
	if (rv != 0 && !s->doomed) {
		(void)session_answer(s, id, NULL, -32601,
		                     "method not supported by this client");
	}
}

int
mcp_respond(mcp_session *s, uint64_t token, json_t *result, int code,
            const char *message)
{
	inbound *ib = idmap_del(&s->inbound, token);
	int      rv;

	if (ib == NULL) {
		return (MK_ENOENT);
	}
	if (ib->p != NULL) { /* an input of an input_required result */
		modern_input_answered(s, ib, result, message);
		return (0);
	}
	rv = s->st == ST_FAILED || s->doomed
	        ? MK_ECLOSED
	        : session_answer(s, ib->id, result, code, message);
	json_decref(ib->id);
	free(ib);
	return (rv);
}
