/*
 * jsonrpc.c - JSON-RPC 2.0 framing (see jsonrpc.h).
 */
#include "codec/jsonrpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen != 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return (MK_EPROTO);
}

/* Reads an integer id; JSON-RPC allows strings too, but we only ever send
 * integers, so anything else cannot be an answer of ours. */
static int
get_id(json_t *id, int64_t *out)
{
	if (!json_is_integer(id)) {
		return (-1);
	}
	*out = json_integer_value(id);
	return (0);
}

int
codec_jr_classify(json_t *root, codec_jr_msg *msg, char *err, size_t errlen)
{
	json_t *ver, *id, *method, *result, *error;

	memset(msg, 0, sizeof(*msg));
	msg->raw = root;
	if (json_is_array(root)) {
		return (fail(err, errlen,
		             "JSON-RPC batches are not supported"));
	}
	if (!json_is_object(root)) {
		return (fail(err, errlen,
		             "JSON-RPC message is not an object"));
	}
	ver = json_object_get(root, "jsonrpc");
	if (!json_is_string(ver) ||
	    strcmp(json_string_value(ver), "2.0") != 0) {
		return (fail(err, errlen,
		             "JSON-RPC message without \"jsonrpc\": \"2.0\""));
	}
	id     = json_object_get(root, "id");
	method = json_object_get(root, "method");
	result = json_object_get(root, "result");
	error  = json_object_get(root, "error");
	if (method != NULL) {
		if (!json_is_string(method)) {
			return (fail(err, errlen,
			             "JSON-RPC \"method\" is not a string"));
		}
		msg->method = json_string_value(method);
		msg->params = json_object_get(root, "params");
		if (msg->params != NULL && !json_is_object(msg->params) &&
		    !json_is_array(msg->params)) {
			return (fail(
			        err, errlen,
			        "JSON-RPC \"params\" of %s is not an object",
			        msg->method));
		}
		if (id == NULL) {
			msg->kind = JR_NOTIFICATION;
			return (0);
		}
		msg->kind = JR_REQUEST;
		if (get_id(id, &msg->id) != 0) {
			msg->id = -1; /* still a request: answer it with an
			                 error */
		}
		return (0);
	}
	if (id == NULL || get_id(id, &msg->id) != 0) {
		return (fail(
		        err, errlen,
		        "JSON-RPC response with a missing or non-integer id"));
	}
	if ((result != NULL) == (error != NULL)) {
		return (fail(
		        err, errlen,
		        "JSON-RPC response %lld needs exactly one of \"result\" and \"error\"",
		        (long long)msg->id));
	}
	if (result != NULL) {
		msg->kind   = JR_RESULT;
		msg->result = result;
		return (0);
	}
	json_t *code = json_object_get(error, "code");
	json_t *text = json_object_get(error, "message");
	if (!json_is_object(error) || !json_is_integer(code) ||
	    !json_is_string(text)) {
		return (fail(
		        err, errlen,
		        "JSON-RPC error response %lld without an integer code and a message",
		        (long long)msg->id));
	}
	msg->kind        = JR_ERROR;
	msg->err_code    = json_integer_value(code);
	msg->err_message = json_string_value(text);
	return (0);
}

int
codec_jr_parse(const char *buf, size_t len, size_t max, json_t **root,
               codec_jr_msg *msg, char *err, size_t errlen)
{
	json_error_t je;
	int          rv;

	*root = NULL;
	memset(msg, 0, sizeof(*msg));
	if (max == 0) {
		max = CODEC_JR_MAX_DEFAULT;
	}
	if (len > max) {
		fail(err, errlen,
		     "JSON-RPC message of %zu bytes exceeds the %zu-byte limit",
		     len, max);
		return (MK_ETOOBIG);
	}
	*root = json_loadb(buf, len, 0, &je);
	if (*root == NULL) {
		return (fail(err, errlen,
		             "invalid JSON at line %d column %d: %s", je.line,
		             je.column, je.text));
	}
	if ((rv = codec_jr_classify(*root, msg, err, errlen)) != 0) {
		json_decref(*root);
		*root = NULL;
	}
	return (rv);
}

char *
codec_jr_request(int64_t id, const char *method, json_t *params)
{
	char  *body = NULL, *out;
	size_t need;

	/* The envelope around the dumped params: one jansson pass, not
	 * two (this is on every tool call's path). */
	if (params != NULL &&
	    (body = json_dumps(params, JSON_COMPACT)) == NULL) {
		return (NULL);
	}
	need = strlen(method) + (body ? strlen(body) : 0) + 80;
	if ((out = malloc(need)) != NULL) {
		snprintf(
		        out, need,
		        "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"%s\"%s%s}",
		        (long long)id, method, body ? ",\"params\":" : "",
		        body ? body : "");
	}
	free(body);
	return (out);
}

char *
codec_jr_notification(const char *method, json_t *params)
{
	json_t *o = json_pack("{s:s, s:s, s:O*}", "jsonrpc", "2.0", "method",
	                      method, "params", params);
	char   *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return (s);
}
