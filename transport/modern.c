/*
 * modern.c - what a request of the 2026-07-28 revision carries besides
 * its params: the per-request _meta (protocol version, client
 * capabilities and info, a trace context) and, over HTTP, the standard
 * headers (Mcp-Method, Mcp-Name) and those a tool's parameters mirror
 * (x-mcp-header: Mcp-Param-{Name}), encoded as the transport text says
 * ("Value Encoding": =?base64?...?= for what is not plain ASCII); and
 * which tool definitions are invalid for it (an x-mcp-header that breaks
 * the constraints of "Schema Extension").  Pure: no I/O.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/text.h"
#include "transport/mcp.h"
#include "transport/session_impl.h"

#define HEADER_VALUE_MAX 4096 /* bytes of one mirrored value */
#define HEADERS_MAX      32   /* x-mcp-header annotations in one tool */

json_t *
modern_params(const mcp_session *s, json_t *params, const char *traceparent,
              const char *tracestate)
{
	json_t *p    = params != NULL ? json_copy(params) : json_object();
	json_t *meta = json_object_get(p, "_meta");

	meta = json_is_object(meta) ? json_copy(meta) : json_object();
	if (p == NULL || meta == NULL) {
		json_decref(p);
		json_decref(meta);
		return (NULL);
	}
	json_object_set_new(meta, "io.modelcontextprotocol/protocolVersion",
	                    json_string(MCP_PROTOCOL_MODERN));
	json_object_set(meta, "io.modelcontextprotocol/clientCapabilities",
	                s->caps);
	json_object_set_new(meta, "io.modelcontextprotocol/clientInfo",
	                    json_pack("{s:s, s:s}", "name", s->client_name,
	                              "version", s->client_version));
	if (traceparent != NULL) {
		json_object_set_new(meta, "traceparent",
		                    json_string(traceparent));
	}
	if (tracestate != NULL) {
		json_object_set_new(meta, "tracestate",
		                    json_string(tracestate));
	}
	json_object_set_new(p, "_meta", meta);
	return (p);
}

/* A value that may go into a header as it is: visible ASCII, spaces and
 * tabs inside, not the sentinel's shape. */
static bool
plain(const char *v, size_t n)
{
	if (n > 0 &&
	    (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' ||
	     v[n - 1] == '\t')) {
		return (false);
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if ((c < 0x20 && c != '\t') || c > 0x7e) {
			return (false);
		}
	}
	return (!(n >= 11 && strncmp(v, "=?base64?", 9) == 0 &&
	          strcmp(v + n - 2, "?=") == 0));
}

/* "Name: value" with value encoded as needed; malloc'd, or NULL. */
static char *
header_line(const char *name, const char *v, size_t n)
{
	char *line, *b64;
	int   len;

	if (n > HEADER_VALUE_MAX) {
		return (NULL);
	}
	if (plain(v, n)) {
		return (asprintf(&line, "%s: %.*s", name, (int)n, v) < 0
		                ? NULL
		                : line);
	}
	if ((b64 = malloc(4 * ((n + 2) / 3) + 1)) == NULL) {
		return (NULL);
	}
	len = EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)v,
	                      (int)n);
	if (asprintf(&line, "%s: =?base64?%.*s?=", name, len, b64) < 0) {
		line = NULL;
	}
	free(b64);
	return (line);
}

/* Appends line (taken) to the NULL-terminated *v of *n; false when out
 * of memory. */
static bool
push(char ***v, size_t *n, char *line)
{
	char **nv;

	if (line == NULL ||
	    (nv = realloc(*v, (*n + 2) * sizeof(*nv))) == NULL) {
		free(line);
		return (false);
	}
	nv[(*n)++] = line;
	nv[*n]     = NULL;
	*v         = nv;
	return (true);
}

/* An RFC 9110 token (1*tchar). */
static bool
token(const char *s)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";

	if (s == NULL || *s == '\0') {
		return (false);
	}
	for (; *s != '\0'; s++) {
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr(extra, *s) != NULL)) {
			return (false);
		}
	}
	return (true);
}

/* The annotated property of one x-mcp-header: a path of properties
 * keys from the schema root. */
typedef struct annot {
	const char *name;    /* the header's {Name} */
	const char *path[8]; /* the properties keys */
	int         depth;   /* how many */
} annot;

typedef struct walk {
	annot       a[HEADERS_MAX]; /* found so far */
	int         n;              /* how many */
	const char *why;            /* the first violation, or NULL */
	char        buf[160];       /* its text */
} walk;

static void
bad(walk *w, const char *fmt, const char *arg)
{
	if (w->why == NULL) {
		snprintf(w->buf, sizeof(w->buf), fmt, arg);
		w->why = w->buf;
	}
}

/* Is there an x-mcp-header anywhere under s? (where none may be) */
static bool
any_annotation(json_t *s)
{
	const char *k;
	json_t     *v;
	size_t      i;

	if (json_is_array(s)) {
		json_array_foreach(s, i, v)
		{
			if (any_annotation(v)) {
				return (true);
			}
		}
		return (false);
	}
	json_object_foreach(s, k, v)
	{
		if (strcmp(k, "x-mcp-header") == 0 || any_annotation(v)) {
			return (true);
		}
	}
	return (false);
}

/* Walks schema s at path (depth keys): annotations are allowed only on
 * primitive properties reached through properties keys alone. */
static void
walk_schema(walk *w, json_t *s, const char **path, int depth)
{
	json_t     *h    = json_object_get(s, "x-mcp-header"), *props, *v;
	const char *type = json_string_value(json_object_get(s, "type"));
	const char *k;

	if (h != NULL) {
		if (!json_is_string(h) || !token(json_string_value(h))) {
			bad(w, "x-mcp-header %s is not an HTTP token",
			    json_is_string(h) ? json_string_value(h)
			                      : "(not a string)");
			return;
		}
		if (depth == 0 || type == NULL ||
		    (strcmp(type, "string") != 0 &&
		     strcmp(type, "integer") != 0 &&
		     strcmp(type, "boolean") != 0)) {
			bad(w,
			    "x-mcp-header %s is not on a string, integer or boolean parameter",
			    json_string_value(h));
			return;
		}
		for (int i = 0; i < w->n; i++) {
			if (strcasecmp(w->a[i].name, json_string_value(h)) ==
			    0) {
				bad(w, "x-mcp-header %s is used twice",
				    json_string_value(h));
				return;
			}
		}
		if (w->n == HEADERS_MAX || depth > 8) {
			bad(w, "x-mcp-header %s: too many, or too deep",
			    json_string_value(h));
			return;
		}
		w->a[w->n].name  = json_string_value(h);
		w->a[w->n].depth = depth;
		memcpy(w->a[w->n].path, path, (size_t)depth * sizeof(*path));
		w->n++; /* (depth > 0 here: path is not NULL) */
	}
	json_object_foreach(s, k, v)
	{
		if (strcmp(k, "properties") == 0 ||
		    strcmp(k, "x-mcp-header") == 0) {
			continue;
		}
		if (any_annotation(v)) {
			bad(w,
			    "an x-mcp-header sits under \"%s\", not only under properties",
			    k);
			return;
		}
	}
	props = json_object_get(s, "properties");
	json_object_foreach(props, k, v)
	{
		const char *p[9];
		if (depth >= 8) {
			if (any_annotation(v)) {
				bad(w, "x-mcp-header nested deeper than %s",
				    "8");
			}
			continue;
		}
		if (depth > 0) {
			memcpy(p, path, (size_t)depth * sizeof(*path));
		}
		p[depth] = k;
		walk_schema(w, v, p, depth + 1);
		if (w->why != NULL) {
			return;
		}
	}
}

bool
mcp_tool_headers_ok(json_t *tool, char *why, size_t len)
{
	walk w = {.n = 0};

	walk_schema(&w, json_object_get(tool, "inputSchema"), NULL, 0);
	if (w.why != NULL) {
		snprintf(why, len, "%s", w.why);
		return (false);
	}
	return (true);
}

/* The value one annotation mirrors from the call's arguments (*n its
 * length; num: room for an integer's digits), or NULL when the value is
 * absent (or of another type). */
static const char *
param_value(const annot *a, json_t *args, char num[32], size_t *n)
{
	json_t *v = args;

	for (int i = 0; i < a->depth && v != NULL; i++) {
		v = json_object_get(v, a->path[i]);
	}
	if (json_is_string(v)) {
		*n = json_string_length(v);
		return (json_string_value(v));
	}
	if (json_is_boolean(v)) {
		*n = json_is_true(v) ? 4 : 5;
		return (json_is_true(v) ? "true" : "false");
	}
	if (json_is_integer(v)) {
		snprintf(num, 32, "%lld", (long long)json_integer_value(v));
		*n = strlen(num);
		return (num);
	}
	return (NULL);
}

/* The header line of one annotation for the call's arguments, or NULL
 * when the value is absent (or of another type). */
static char *
param_line(const annot *a, json_t *args)
{
	char        name[96], num[32];
	size_t      n;
	const char *v = param_value(a, args, num, &n);

	snprintf(name, sizeof(name), "Mcp-Param-%s", a->name);
	return (v != NULL ? header_line(name, v, n) : NULL);
}

/* A header value as sent, decoded ("=?base64?...?=") into out (max
 * bytes); its length, or -1 when it does not decode. */
static int
header_value(const char *h, char *out, int max)
{
	size_t n = strlen(h);
	int    len;

	if (!(n >= 11 && strncmp(h, "=?base64?", 9) == 0 &&
	      strcmp(h + n - 2, "?=") == 0)) {
		if (n > (size_t)max) {
			return (-1);
		}
		memcpy(out, h, n);
		return ((int)n);
	}
	n -= 11; /* the base64 between */
	if (n % 4 != 0 || 3 * (n / 4) > (size_t)max) {
		return (-1);
	}
	len = EVP_DecodeBlock((unsigned char *)out,
	                      (const unsigned char *)h + 9, (int)n);
	for (size_t i = n; len > 0 && i > 0 && h[9 + i - 1] == '='; i--) {
		len--; /* (it counts the padding as bytes) */
	}
	return (len);
}

bool
mcp_param_headers_match(json_t *tool, json_t *args, json_t *got, char *why,
                        size_t len)
{
	walk w = {.n = 0};

	walk_schema(&w, json_object_get(tool, "inputSchema"), NULL, 0);
	for (int i = 0; w.why == NULL && i < w.n; i++) {
		const char *sent = NULL, *k, *want;
		char        num[32], *dec = NULL;
		size_t      n = 0;
		json_t     *v;
		int         dn = 0;

		json_object_foreach(got, k, v)
		{
			if (strcasecmp(k, w.a[i].name) == 0) {
				sent = json_string_value(v);
			}
		}
		want = param_value(&w.a[i], args, num, &n);
		if (sent != NULL && n <= HEADER_VALUE_MAX &&
		    (dec = malloc(strlen(sent) + 1)) != NULL) {
			dn = header_value(sent, dec, (int)strlen(sent));
		}
		bool same = sent == NULL ? want == NULL
		                         : want != NULL && dn >= 0 &&
		                (size_t)dn == n && memcmp(dec, want, n) == 0;
		free(dec);
		if (!same) {
			snprintf(why, len,
			         "Header mismatch: Mcp-Param-%s %s the body's "
			         "arguments%s",
			         w.a[i].name,
			         sent == NULL ? "is absent from"
			                      : "does not match",
			         want == NULL && sent != NULL
			                 ? " (they do not have it)"
			                 : "");
			return (false);
		}
	}
	return (true);
}

char **
modern_headers(const char *method, json_t *params, json_t *tool,
               const char *const *extra)
{
	char      **v = NULL;
	size_t      n = 0;
	const char *name =
	        json_string_value(json_object_get(params, "name")) != NULL
	        ? json_string_value(json_object_get(params, "name"))
	        : json_string_value(json_object_get(params, "uri"));
	walk  w = {.n = 0};
	char *line;

	if (!push(&v, &n, header_line("Mcp-Method", method, strlen(method)))) {
		return (NULL);
	}
	if ((strcmp(method, "tools/call") == 0 ||
	     strcmp(method, "prompts/get") == 0 ||
	     strcmp(method, "resources/read") == 0) &&
	    name != NULL &&
	    !push(&v, &n, header_line("Mcp-Name", name, strlen(name)))) {
		text_strv_free(v);
		return (NULL);
	}
	if (tool != NULL && strcmp(method, "tools/call") == 0) {
		walk_schema(&w, json_object_get(tool, "inputSchema"), NULL, 0);
		for (int i = 0; w.why == NULL && i < w.n; i++) {
			if ((line = param_line(
			             &w.a[i],
			             json_object_get(params, "arguments"))) !=
			            NULL &&
			    !push(&v, &n, line)) {
				text_strv_free(v);
				return (NULL);
			}
		}
	}
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
		if (!push(&v, &n, strdup(extra[i]))) {
			text_strv_free(v);
			return (NULL);
		}
	}
	return (v);
}

bool
modern_error(int64_t code)
{
	return (code == MCP_E_HEADER_MISMATCH ||
	        code == MCP_E_MISSING_CAPABILITY ||
	        code == MCP_E_UNSUPPORTED_VERSION);
}

/* ---- the era: server/discover's answer ------------------------------- */

/* A version of the legacy era this client speaks, in supported (an
 * array), or NULL. */
static const char *
legacy_in(json_t *supported)
{
	size_t  i;
	json_t *v;

	json_array_foreach(supported, i, v)
	{
		if (json_is_string(v) &&
		    mcp_version_supported(json_string_value(v))) {
			return (json_string_value(v));
		}
	}
	return (NULL);
}

static bool
has_version(json_t *supported, const char *want)
{
	size_t  i;
	json_t *v;

	json_array_foreach(supported, i, v)
	{
		if (json_is_string(v) &&
		    strcmp(json_string_value(v), want) == 0) {
			return (true);
		}
	}
	return (false);
}

void
modern_probe_result(mcp_session *s, json_t *result)
{
	json_t   *sv   = json_object_get(result, "supportedVersions");
	json_t   *info = json_object_get(json_object_get(result, "_meta"),
	                                 "io.modelcontextprotocol/serverInfo");
	mcp_error e;

	if (has_version(sv, MCP_PROTOCOL_MODERN)) {
		s->modern = true;
		snprintf(s->version, sizeof(s->version), "%s",
		         MCP_PROTOCOL_MODERN);
		json_decref(s->server_info);
		s->server_info =
		        json_is_object(info) ? json_incref(info) : NULL;
		json_decref(s->server_caps);
		s->server_caps =
		        json_incref(json_object_get(result, "capabilities"));
		session_ready(s);
	} else if (legacy_in(sv) != NULL || !json_is_array(sv)) {
		session_initialize(s); /* it speaks an older era */
	} else {
		session_fail(
		        s,
		        mcp_error_set(
		                &e, MCP_E_PROTOCOL,
		                "server/discover lists no protocol version this client speaks (it speaks 2026-07-28 and 2025-11-25 to 2024-11-05)"));
	}
}

void
modern_probe_error(mcp_session *s, const mcp_error *err)
{
	mcp_error e;

	switch (err->kind) {
	case MCP_E_SERVER:
		if (err->rpc_code == MCP_E_UNSUPPORTED_VERSION ||
		    !modern_error(err->rpc_code)) {
			/* the older era (any error but a modern one), or a
			 * modern server without our version: initialize says
			 * which (versioning.mdx "Backward Compatibility") */
			session_initialize(s);
			return;
		}
		session_fail(s,
		             mcp_error_set(&e, MCP_E_SERVER,
		                           "server/discover refused: %s",
		                           err->message));
		return;
	case MCP_E_HTTP:     /* 400, 404, 405 without a modern error */
	case MCP_E_GONE:     /* "Server not initialized", "no session" */
	case MCP_E_PROTOCOL: /* an answer without a result */
		session_initialize(s);
		return;
	default: /* unreachable, refused, timed out, unauthorized */
		session_fail(s, err);
		return;
	}
}

/* ---- multi round-trip requests ---------------------------------------- */

void
modern_drop_inputs(mcp_session *s, pend *p)
{
	for (size_t i = 0; i < s->inbound.cap && p->inputs > 0; i++) {
		inbound *ib  = s->inbound.ents[i].val;
		uint64_t tok = s->inbound.ents[i].id;
		if (tok == 0 || ib->p != p) {
			continue;
		}
		idmap_del(&s->inbound, tok);
		p->inputs--;
		free(ib->key);
		free(ib);
		if (s->h.gone != NULL) {
			s->h.gone(s->h.arg, s, tok);
		}
		i = (size_t)-1; /* the table moved: look again */
	}
}

/* Every input answered: the retry, under a new id and the old deadline,
 * with the answers and the untouched requestState. */
static void
retry(mcp_session *s, pend *p)
{
	json_t   *params   = json_copy(p->params);
	int64_t   deadline = p->deadline;
	mcp_error e;
	int       rv;

	idmap_del(&s->pending, (uint64_t)p->id);
	if (params == NULL) {
		session_complete(
		        s, p, mcp_error_set(&e, MCP_E_LOCAL, "out of memory"),
		        NULL);
		return;
	}
	json_object_set(params, "inputResponses", p->responses);
	if (p->state != NULL) {
		json_object_set(params, "requestState", p->state);
	} else {
		json_object_del(params, "requestState");
	}
	json_decref(p->responses);
	json_decref(p->state);
	p->responses = p->state = NULL;
	rv                      = session_send_request(s, p, params, NULL);
	json_decref(params);
	if (rv != 0) {
		session_complete(
		        s, p,
		        mcp_error_set(&e, MCP_E_LOCAL,
		                      "cannot send the retry (code %d)", rv),
		        NULL);
		return;
	}
	p->deadline = deadline;
}

void
modern_input_required(mcp_session *s, pend *p, json_t *result)
{
	json_t     *reqs  = json_object_get(result, "inputRequests");
	json_t     *state = json_object_get(result, "requestState");
	const char *key;
	json_t     *req;
	mcp_error   e;

	if (++p->rounds > MCP_MRTR_ROUNDS ||
	    (reqs != NULL && !json_is_object(reqs)) ||
	    (state != NULL && !json_is_string(state)) ||
	    (json_object_size(reqs) == 0 && state == NULL)) {
		session_complete(
		        s, p,
		        p->rounds > MCP_MRTR_ROUNDS
		                ? mcp_error_set(
		                          &e, MCP_E_PROTOCOL,
		                          "the server asked for input more than %d times",
		                          MCP_MRTR_ROUNDS)
		                : mcp_error_set(
		                          &e, MCP_E_PROTOCOL,
		                          "an input_required result without inputRequests (an object) or requestState (a string)"),
		        NULL);
		return;
	}
	p->responses = json_object();
	p->state     = state != NULL ? json_incref(state) : NULL;
	/* back in the table while the owner answers: the deadline holds */
	if (p->responses == NULL ||
	    idmap_put(&s->pending, (uint64_t)p->id, p) != 0) {
		session_complete(
		        s, p, mcp_error_set(&e, MCP_E_LOCAL, "out of memory"),
		        NULL);
		return;
	}
	/* one hold while handing them out: an input answered at once (a
	 * static root, a refused URL) must not start the retry early */
	p->inputs++;
	p->handing = true;
	json_object_foreach(reqs, key, req)
	{
		const char *method =
		        json_string_value(json_object_get(req, "method"));
		uint64_t tok = ++s->next_token;
		inbound *ib  = calloc(1, sizeof(*ib));
		int      rv  = -1;

		if (ib != NULL && (ib->key = strdup(key)) != NULL &&
		    method != NULL && s->h.request != NULL &&
		    idmap_put(&s->inbound, tok, ib) == 0) {
			ib->p = p;
			p->inputs++;
			rv = s->h.request(s->h.arg, s, tok, method,
			                  json_object_get(req, "params"));
			if (rv != 0 && idmap_del(&s->inbound, tok) != NULL) {
				p->inputs--;
			} else if (rv == 0) {
				continue; /* the owner has it */
			}
		}
		if (ib != NULL) {
			free(ib->key);
			free(ib);
		}
		idmap_del(&s->pending, (uint64_t)p->id);
		session_complete(
		        s, p,
		        mcp_error_set(
		                &e, MCP_E_PROTOCOL,
		                "the server asked for %.60s, which this client does not offer",
		                method != NULL ? method : "(no method)"),
		        NULL);
		return;
	}
	p->handing = false;
	if (p->refused != NULL) { /* answered at once: without a result */
		idmap_del(&s->pending, (uint64_t)p->id);
		session_complete(
		        s, p,
		        mcp_error_set(&e, MCP_E_SERVER, "%s", p->refused),
		        NULL);
	} else if (--p->inputs == 0) {
		retry(s, p); /* all answered (or requestState alone) */
	}
}

void
modern_input_answered(mcp_session *s, inbound *ib, json_t *result,
                      const char *message)
{
	pend     *p = ib->p;
	mcp_error e;

	p->inputs--;
	if (result == NULL) {
		/* an input answers with a result only: without one the
		 * request cannot go on */
		mcp_error_set(&e, MCP_E_SERVER,
		              "input %.60s was not given: %.200s", ib->key,
		              message != NULL ? message : "refused");
		if (p->handing) { /* the hand-out ends it (p stays whole) */
			if (p->refused == NULL) {
				p->refused = strdup(e.message);
			}
		} else {
			idmap_del(&s->pending, (uint64_t)p->id);
			session_complete(s, p, &e, NULL);
		}
	} else {
		json_object_set(p->responses, ib->key, result);
		if (p->inputs == 0) {
			retry(s, p);
		}
	}
	free(ib->key);
	free(ib);
}

/* ---- subscriptions/listen --------------------------------------------- */

void
modern_listen(mcp_session *s)
{
	pend   *p      = calloc(1, sizeof(*p));
	json_t *params = json_pack("{s:{s:b, s:b, s:b}}", "notifications",
	                           "toolsListChanged", 1, "promptsListChanged",
	                           1, "resourcesListChanged", 1);

	if (p == NULL || params == NULL) {
		free(p);
		json_decref(params);
		modern_listen_ended(s);
		return;
	}
	p->kind       = P_LISTEN;
	p->timeout_ms = -1; /* it lasts */
	if (session_send_request(s, p, params, NULL) != 0) {
		session_pend_free(p);
		json_decref(params);
		modern_listen_ended(s);
		return;
	}
	s->listen_id = p->id;
	json_decref(params);
}

bool
modern_ours(const mcp_session *s, json_t *params)
{
	json_t *id = json_object_get(json_object_get(params, "_meta"),
	                             "io.modelcontextprotocol/subscriptionId");

	return (id == NULL ||
	        (json_is_integer(id) &&
	         json_integer_value(id) == s->listen_id));
}

void
modern_listen_ended(mcp_session *s)
{
	if (s->st == ST_FAILED || s->doomed) {
		return;
	}
	s->relisten_at = tp_now_ns() + (int64_t)s->listen_wait * 1000000;
	if ((s->listen_wait *= 2) > 60000) {
		s->listen_wait = 60000;
	}
}
