/*
 * inputs.c - the MCP servers' requests waiting for a person (the
 * daemon's server.inputs): GET /api/mcp/client/{id}/elicitations lists
 * them, POST /api/mcp/client/{id}/elicitation/{request_id} answers one.
 * The event stream says when one waits (event "input", state
 * "pending") and what became of it.  Admin token only: an elicitation
 * may carry what one caller's tool call asked of its user.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

void
route_inputs_list(req *r, const char *id, json_t *body)
{
	char   *text = NULL;
	json_t *j;
	int     rc = mk_inputs_json(D.rt, id, &text);

	if (rc != 0) {
		answer_api(r, rc, NULL, 200, NULL);
		return;
	}
	j = json_loads(text, 0, NULL);
	mk_free(text);
	answer_json(
	        r, 200,
	        json_pack("{s:o}", "inputs", j != NULL ? j : json_array()));
}

/* The body is the request's result ({"action", "content"} for an
 * elicitation, a CreateMessageResult for a sampling, {"roots"}); {}
 * declines it. */
void
route_input_answer(req *r, const char *id, json_t *body)
{
	const char *request_id = strrchr(r->path, '/') + 1;
	char       *result, *err = NULL;
	int         rc;

	if (!json_is_object(body)) {
		answer_error(
		        r, 400,
		        "the body is the request's result: a JSON object ({} declines it)");
		return;
	}
	result = json_object_size(body) > 0 ? json_dumps(body, JSON_COMPACT)
	                                    : NULL;
	rc     = mk_input_answer(D.rt, id, request_id, result, &err);
	free(result);
	answer_api(r, rc, err, 200, NULL);
}
