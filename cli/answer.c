/*
 * answer.c - what the daemon reads of a request and how it answers: its
 * headers, query parameters and body fields, and the answers (JSON, HTML or
 * text, with the headers every answer carries; an API call's outcome as its
 * HTTP status).  A small helper every part uses: answer_mono_ns.
 */
#include <curl/curl.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/daemon.h"

/* ---- small things --------------------------------------------------------
 */

/* The daemon's own clock: it uses the public API only (mcpkeep.h), so
 * not the library's. */
int64_t
answer_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

const char *
http_header(const req *r, const char *name)
{
	const char *v =
	        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

char *
http_header_dup(const req *r, const char *name)
{
	const char *v = http_header(r, name);

	return (v != NULL ? strdup(v) : NULL);
}

/* http_headers_with's iterator: one header into a->out when its name
 * starts with a->prefix. */
typedef struct with_prefix {
	const char *prefix;
	size_t      len;
	json_t     *out;
} with_prefix;

static enum MHD_Result
header_with(void *arg, enum MHD_ValueKind kind, const char *key,
            const char *value)
{
	with_prefix *a = arg;

	(void)kind;
	if (strncasecmp(key, a->prefix, a->len) == 0 && value != NULL) {
		json_object_set_new(a->out, key + a->len, json_string(value));
	}
	/* (bounded: libmicrohttpd's memory pool bounds the headers) */
	return (MHD_YES);
}

json_t *
http_headers_with(const req *r, const char *prefix)
{
	with_prefix a = {prefix, strlen(prefix), json_object()};

	if (a.out != NULL) {
		(void)MHD_get_connection_values(r->conn, MHD_HEADER_KIND,
		                                header_with, &a);
	}
	return (a.out);
}

/* The string field key of the body object, or NULL. */
const char *
http_field(json_t *body, const char *key)
{
	return (json_string_value(json_object_get(body, key)));
}

/* ---- answers ------------------------------------------------------------ */

static void
add_headers(struct MHD_Response *res, const req *r, const char *ctype)
{
	MHD_add_response_header(res, "Content-Type", ctype);
	MHD_add_response_header(res, "Cache-Control", "no-store");
	MHD_add_response_header(res, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(res, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(res, "X-Frame-Options", "DENY");
	MHD_add_response_header(
	        res, "Content-Security-Policy",
	        strncmp(ctype, "text/html", 9) == 0
	                ? page_csp()
	                : "default-src 'none'; frame-ancestors 'none'");
	if (r->busy || r->boot) {
		MHD_add_response_header(res, "Retry-After", "1");
	}
	if (r->close) {
		MHD_add_response_header(res, "Connection", "close");
	}
	if (r->session_out != NULL) {
		MHD_add_response_header(res, "Mcp-Session-Id", r->session_out);
	}
}

/* Answers r with status and body (a JSON, HTML or text), from any
 * thread; r is not touched after (it may be freed at once). */
void
answer(req *r, unsigned status, const char *ctype, const char *body)
{
	struct MHD_Response *res;
	bool                 suspended = r->suspended;

	/* The access log: the path only.  The daemon's own failures (500;
	 * 503 but for busy and booting, which come in floods or are
	 * expected) at warn, the rest at debug. */
	bool own = status == 500 || (status == 503 && !r->busy && !r->boot);
	mk_log(own ? MK_LOG_WARN : MK_LOG_DEBUG, "http", "%s %s %u %.1f ms",
	       r->method != NULL ? r->method : "-",
	       r->path != NULL ? r->path : "-", status,
	       (double)(answer_mono_ns() - r->t0) / 1e6);
	http_answered(r);
	res = MHD_create_response_from_buffer(strlen(body), (void *)body,
	                                      MHD_RESPMEM_MUST_COPY);
	if (res != NULL) {
		add_headers(res, r, ctype);
		(void)MHD_queue_response(r->conn, status, res);
		MHD_destroy_response(res);
	}
	if (suspended) {
		MHD_resume_connection(r->conn); /* (r may be gone after) */
	}
}

void
answer_json(req *r, unsigned status, json_t *j)
{
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	answer(r, text != NULL ? status : 500, "application/json",
	       text != NULL ? text : "{\"error\":\"out of memory\"}");
	free(text);
	json_decref(j);
}

void
answer_error(req *r, unsigned status, const char *msg)
{
	answer_json(r, status, json_pack("{s:s}", "error", msg));
}

void
answer_rpc_error(req *r, unsigned status, json_t *id, int code,
                 const char *msg)
{
	answer_json(r, status,
	            json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
	                      "id", id != NULL ? id : json_null(), "error",
	                      "code", code, "message", msg));
}

/* The HTTP status of an API failure. */
unsigned
answer_status_of(int rc)
{
	switch (rc) {
	case MK_EINVAL:
	case MK_ESTATE:
	case MK_ETOOBIG:
		return (400);
	case MK_EAUTH:
		return (401);
	case MK_ENOENT:
		return (404);
	case MK_EEXIST:
	case MK_EBUSY:
		return (409);
	case MK_EUPSTREAM:
	case MK_EUNKNOWN:
		return (502);
	case MK_ETIMEDOUT:
		return (504);
	case MK_ECLOSED:
	case MK_ESTORE:
		return (503);
	default:
		return (500);
	}
}

/* Answers an API call's outcome: ok (with j, or {}) or its error. */
void
answer_api(req *r, int rc, char *err, unsigned ok, json_t *j)
{
	if (rc == 0) {
		answer_json(r, ok, j != NULL ? j : json_object());
	} else {
		json_decref(j);
		answer_error(r, answer_status_of(rc),
		             err != NULL ? err : mk_strerror(rc));
	}
	mk_free(err);
}
