/*
 * serve.c - `mcpkeep serve`: the daemon.  It embeds the runtime through
 * include/mcpkeep.h only, and serves an admin HTTP API with nng's HTTP
 * server (paths as in ../shared/reference: "Recovery endpoints by
 * combination", and SPEC.md).
 *
 * DESIGN: nng runs the HTTP handlers on its own threads, which must not
 * block; a request whose API call blocks (adding a client connects first)
 * is queued to a few worker threads, and a tool call is made with the
 * asynchronous API and answered from its callback.  Every body is capped
 * (BODY_MAX); every answer is JSON ({"error": "..."} with a status that
 * fits), never a secret.  /api/ needs "Authorization: Bearer <admin
 * token>" when a token is configured (config server.admin_token, else
 * MCPKEEP_ADMIN_TOKEN); without one the daemon binds loopback only.
 * SIGINT/SIGTERM: stop accepting, let calls in flight end (bounded),
 * close the runtime (the store is flushed).
 *
 * Boot: the config's clients are handed to the runtime
 * (mk_runtime_load_async) before the server listens, and their first
 * connects (30 s each at most) go on while it serves: /healthz, the page
 * and the API answer at once, /readyz is 503 until the boot thread saw
 * the load end and logged how each client came out.  A SIGHUP meanwhile
 * waits for that end; a SIGTERM ends the boot (the runtime's close stops
 * the connects).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "mcpkeep.h"

#define BODY_MAX       (1024 * 1024)   /* bytes of a request body */
#define BODY_READ_MAX  (16 * BODY_MAX) /* what nng reads (larger: 400) */
#define WORKERS        4               /* threads per lane (below) */
#define DRAIN_MS       10000 /* calls in flight at shutdown, at most */
#define REQUESTS_MAX   4096  /* default --max-requests */
#define LISTEN_DEFAULT "127.0.0.1:8080"

extern const char   status_html[]; /* cli/status.html, embedded */
extern const size_t status_html_len;

static const char serve_usage[] =
        "usage: mcpkeep serve -c FILE [options]\n"
        "\n"
        "Runs the runtime as a daemon with the admin HTTP API.\n"
        "\n"
        "  -c FILE         config.json (clients, store, server settings)\n"
        "  --listen ADDR   host:port (default: the config's server.listen,\n"
        "                  else " LISTEN_DEFAULT ")\n"
        "  --store FILE    the SQLite store (default: the config's "
        "store.path)\n"
        "  --log LEVEL     debug | info | warn | error (default info)\n"
        "  --json          log as JSON lines\n"
        "  --max-requests N\n"
        "                  requests in the works at once (default 4096);\n"
        "                  more are answered 503 with Retry-After: 1\n"
        "                  (never /healthz, /readyz, /metrics)\n"
        "\n"
        "The admin token is the config's server.admin_token, else\n"
        "MCPKEEP_ADMIN_TOKEN; without one only loopback addresses are\n"
        "served.  SIGHUP reads the config again and applies its global\n"
        "settings, its clients as a diff and its admin token (an invalid\n"
        "file changes nothing; listen, stream and store are read only at\n"
        "start); SIGINT/SIGTERM stop.  It serves at once: the clients\n"
        "connect meanwhile, /readyz is 503 until their first connects\n"
        "ended, and a SIGHUP meanwhile is applied after that.  Exit\n"
        "codes: 0 stopped by a signal, 1 cannot start, 2 usage.\n";

/* Work waits in lanes, each with its own workers, so that none starves
 * another: the admin API (a reconnect can block for a whole connect,
 * 30 s), tool calls (which block only while a client's inbox is full),
 * and the operator's probes (/metrics, /readyz: an operator needs them
 * most when the rest is stuck). */
enum { LANE_ADMIN, LANE_TOOL, LANE_PROBE, LANES };

/* A request in the works. */
typedef struct req {
	nng_aio    *aio;    /* nng's, finished with the answer */
	char       *method; /* GET, POST, ... */
	char       *path;   /* without the query */
	char       *query;  /* after '?', or "" */
	char       *body;   /* NUL-terminated, or NULL */
	char       *id_user, *id_vk, *id_session, *bearer; /* headers */
	int64_t     t0;     /* arrival, monotonic ns (the access log) */
	bool        capped; /* counts against --max-requests */
	bool        busy;   /* refused for it: says Retry-After */
	bool        boot;   /* /readyz while booting: Retry-After too */
	struct req *next;   /* worker queue */
} req;

typedef struct lane {
	struct req    *head, *tail; /* the queue (D.mtx) */
	pthread_cond_t cv;          /* work queued, or stopping */
} lane;

typedef struct daemon {
	mk_runtime      *rt;      /* the runtime */
	nng_http_server *http;    /* the server */
	char            *token;   /* the admin token, or NULL (secret;
	                           * mtx: a reload replaces it) */
	bool            loopback; /* serving a loopback address only */
	pthread_mutex_t mtx;      /* guards the lanes and the counts */
	pthread_cond_t  cv;       /* a request answered (the drain) */
	lane            lanes[LANES];
	bool            stopping; /* workers finish */
	int             inflight; /* requests not yet answered */
	int             capped;   /* of them, those --max-requests counts */
	int             max;      /* --max-requests */
	uint64_t        busy;     /* requests refused for max */
	pthread_t       workers[LANES][WORKERS];
	uint64_t        requests;   /* answered */
	uint64_t        reloads[2]; /* SIGHUPs applied, refused */
	/* the boot (mtx) */
	pthread_cond_t boot_cv;   /* the load ended, or stopping */
	pthread_t      boot;      /* the boot thread */
	bool           boot_th;   /* ... was started */
	bool           booting;   /* until it logged the outcome */
	bool           loaded;    /* the load's callback ran */
	int            load_rc;   /* with this */
	char          *load_err;  /* and this reason (malloc'd), or NULL */
	int64_t        boot_t0;   /* the load began, monotonic ns */
	int64_t        boot_t1;   /* it ended */
	bool           hup;       /* a SIGHUP waits for the boot's end */
	bool           boot_fail; /* the load failed: exit 1 */
} daemon_t;

static daemon_t D;

/* The seven states (SPEC section 2). */
static const char *const states[] = {
        "healthy",  "unstable", "needs_reauth", "pending_verification",
        "disabled", "error",    "degraded",     NULL};
#define NSTATES 7

/* ---- answers --------------------------------------------------------------
 */

/* Wipes and frees a secret string; safe with NULL. */
static void
free_secret(char *s)
{
	if (s != NULL) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

static void
req_free(req *r)
{
	free_secret(r->body);
	free_secret(r->bearer);
	free(r->method);
	free(r->path);
	free(r->query);
	free(r->id_user);
	free(r->id_vk);
	free(r->id_session);
	free(r);
}

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

/* Answers r with status and body (a JSON or HTML text), and frees it. */
static void
answer(req *r, uint16_t status, const char *ctype, const char *body)
{
	nng_http_res *res;

	/* (counted out before nng has it: a caller that sends its next
	 * request the moment this one is answered finds the room free) */
	pthread_mutex_lock(&D.mtx);
	D.inflight--;
	D.capped -= r->capped;
	D.requests++;
	pthread_cond_broadcast(&D.cv);
	pthread_mutex_unlock(&D.mtx);
	/* The access log: the path only (a query can carry an OAuth code).
	 * The daemon's own failures (500; 503 but for busy, which /metrics
	 * counts and which comes in floods, and /readyz while booting) at
	 * warn, the rest at debug. */
	bool own = status == 500 || (status == 503 && !r->busy && !r->boot);
	mk_log(own ? MK_LOG_WARN : MK_LOG_DEBUG, "http", "%s %s %u %.1f ms",
	       r->method != NULL ? r->method : "-",
	       r->path != NULL ? r->path : "-", status,
	       (double)(mono_ns() - r->t0) / 1e6);
	if (nng_http_res_alloc(&res) == 0) {
		nng_http_res_set_status(res, status);
		nng_http_res_set_header(res, "Content-Type", ctype);
		nng_http_res_set_header(res, "Cache-Control", "no-store");
		if (r->busy || r->boot) {
			nng_http_res_set_header(res, "Retry-After", "1");
		}
		nng_http_res_copy_data(res, body, strlen(body));
		nng_aio_set_output(r->aio, 0, res);
		nng_aio_finish(r->aio, 0);
	} else {
		nng_aio_finish(r->aio, NNG_ENOMEM);
	}
	req_free(r);
}

static void
answer_json(req *r, uint16_t status, json_t *j)
{
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	answer(r, text != NULL ? status : 500, "application/json",
	       text != NULL ? text : "{\"error\":\"out of memory\"}");
	free(text);
	json_decref(j);
}

static void
answer_error(req *r, uint16_t status, const char *msg)
{
	answer_json(r, status, json_pack("{s:s}", "error", msg));
}

/* The HTTP status of an API failure. */
static uint16_t
status_of(int rc)
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
		return (502);
	case MK_ETIMEDOUT:
		return (504);
	case MK_ECLOSED:
		return (503);
	default:
		return (500);
	}
}

/* Answers an API call's outcome: ok (with j, or {}) or its error. */
static void
answer_api(req *r, int rc, char *err, uint16_t ok, json_t *j)
{
	if (rc == 0) {
		answer_json(r, ok, j != NULL ? j : json_object());
	} else {
		json_decref(j);
		answer_error(r, status_of(rc),
		             err != NULL ? err : mk_strerror(rc));
	}
	mk_free(err);
}

/* ---- the query ---------------------------------------------------------- */

/* The decoded value of query parameter name (malloc'd), or NULL.  A
 * query with %00 never gets here (on_http refuses it). */
static char *
query_get(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p != NULL && *p != '\0';) {
		const char *amp = strchr(p, '&');
		size_t      len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
			/* form encoding: '+' is a space (a '+' is %2B) */
			char *raw = strndup(p + n + 1, len - n - 1), *v;
			for (char *c = raw; c != NULL && *c != '\0'; c++) {
				*c = *c == '+' ? ' ' : *c;
			}
			v = raw != NULL
			        ? curl_easy_unescape(NULL, raw, 0, NULL)
			        : NULL;
			free(raw);
			if (v == NULL) {
				return (NULL);
			}
			/* (curl's memory goes back to curl) */
			raw = strdup(v);
			curl_free(v);
			return (raw);
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return (NULL);
}

/* ---- the routes --------------------------------------------------------- */

static void
clients_list(req *r)
{
	static const char *const keys[] = {"state", "connection_type",
	                                   "auth_type", "search"};
	json_t                  *f      = json_object();
	char                    *v, *out = NULL, *err = NULL;
	int                      rc;

	for (size_t i = 0; i < 4; i++) {
		if ((v = query_get(r->query, keys[i])) != NULL) {
			json_object_set_new(f, keys[i], json_string(v));
			free(v);
		}
	}
	const char *nums[] = {"limit", "offset"};
	for (size_t i = 0; i < 2; i++) {
		if ((v = query_get(r->query, nums[i])) != NULL) {
			char *end;
			long  n = strtol(v, &end, 10);
			if (*v == '\0' || *end != '\0' || n < 0 ||
			    (i == 0 && (n < 1 || n > 100))) {
				char msg[96];
				snprintf(msg, sizeof(msg), "%s must be %s",
				         nums[i],
				         i == 0 ? "1 to 100" : "0 or more");
				free(v);
				json_decref(f);
				answer_error(r, 400, msg);
				return;
			}
			json_object_set_new(f, nums[i], json_integer(n));
			free(v);
		}
	}
	char *ftext = json_dumps(f, JSON_COMPACT);
	json_decref(f);
	rc = mk_clients_json(D.rt, ftext, &out);
	free(ftext);
	if (rc != 0) {
		answer_api(r, rc, err, 200, NULL);
		return;
	}
	answer(r, 200, "application/json", out);
	mk_free(out);
}

static void
oauth_callback(req *r)
{
	char *state = query_get(r->query, "state");
	char *code  = query_get(r->query, "code");
	char *err   = NULL, page[1024];
	int   rc    = state != NULL && code != NULL
	             ? mk_oauth_complete(D.rt, state, code, NULL, &err)
	             : MK_EINVAL;

	snprintf(page, sizeof(page),
	         "<!doctype html><html><head><meta charset=\"utf-8\">"
	         "<title>mcpkeep</title></head><body><h1>%s</h1><p>%s</p>"
	         "</body></html>",
	         rc == 0 ? "Authorized" : "Not authorized",
	         rc == 0 ? "The MCP client is authorized: you may close this "
	                   "window."
	                 : "The authorization could not be completed: start "
	                   "it again.");
	free(state);
	if (code != NULL) {
		OPENSSL_cleanse(code, strlen(code));
	}
	free(code);
	mk_free(err);
	answer(r, rc == 0 ? 200 : 400, "text/html; charset=utf-8", page);
}

/* The string field key of the body object, or NULL. */
static const char *
field(json_t *body, const char *key)
{
	return (json_string_value(json_object_get(body, key)));
}

/* POST /api/mcp/client/{id}/{action} and PUT/DELETE /api/mcp/client/{id}. */
static void
client_route(req *r, const char *id, const char *action, json_t *body)
{
	char *err = NULL, *url = NULL, *state = NULL, *text;
	int   rc;

	if (action == NULL && strcmp(r->method, "PUT") == 0) {
		text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
		rc   = text != NULL ? mk_client_update(D.rt, id, text, &err)
		                    : MK_EINVAL;
		free(text);
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("the body must be a JSON object")
		                   : err,
		           200, NULL);
	} else if (action == NULL && strcmp(r->method, "DELETE") == 0) {
		rc = mk_client_remove(D.rt, id, &err);
		answer_api(r, rc, err, 200, NULL);
	} else if (action == NULL || strcmp(r->method, "POST") != 0) {
		answer_error(r, 405, "method not allowed");
	} else if (strcmp(action, "reconnect") == 0) {
		rc = mk_client_reconnect(D.rt, id, &err);
		answer_api(r, rc, err, 200, NULL);
	} else if (strcmp(action, "reauthorize") == 0 ||
	           strcmp(action, "initiate-verification") == 0) {
		rc = action[0] == 'r'
		        ? mk_client_reauthorize(D.rt, id, &url, &state, &err)
		        : mk_client_initiate_verification(D.rt, id, &url,
		                                          &state, &err);
		answer_api(r, rc, err, 200,
		           rc == 0 ? json_pack("{s:s, s:s}", "authorize_url",
		                               url, "session_id", state)
		                   : NULL);
		mk_free(url);
		mk_free(state);
	} else if (strcmp(action, "complete-oauth") == 0) {
		rc = field(body, "state") != NULL &&
		                field(body, "code") != NULL
		        ? mk_client_complete_oauth(D.rt, id,
		                                   field(body, "state"),
		                                   field(body, "code"), &err)
		        : MK_EINVAL;
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("the body needs state and code")
		                   : err,
		           200, NULL);
	} else if (strcmp(action, "verify-headers") == 0) {
		json_t *h = json_object_get(body, "headers");
		text      = h != NULL ? json_dumps(h, JSON_COMPACT) : NULL;
		rc        = text != NULL
		               ? mk_client_verify_headers(D.rt, id, text, &err)
		               : MK_EINVAL;
		if (text != NULL) {
			OPENSSL_cleanse(text, strlen(text));
		}
		free(text);
		answer_api(
		        r, rc,
		        rc == MK_EINVAL && err == NULL
		                ? strdup("the body needs headers: an object")
		                : err,
		        200, NULL);
	} else if (strcmp(action, "verify-exchange") == 0) {
		rc = field(body, "subject_token") != NULL
		        ? mk_client_verify_exchange(
		                  D.rt, id, field(body, "subject_token"), &err)
		        : MK_EINVAL;
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("the body needs subject_token")
		                   : err,
		           200, NULL);
	} else if (strcmp(action, "submit-headers") == 0) {
		char   *sid = query_get(r->query, "session_id");
		json_t *h   = json_object_get(body, "headers");
		text        = h != NULL ? json_dumps(h, JSON_COMPACT) : NULL;
		rc          = sid != NULL && text != NULL
		                 ? mk_user_headers_submit(D.rt, sid, text, &err)
		                 : MK_EINVAL;
		if (text != NULL) {
			OPENSSL_cleanse(text, strlen(text));
		}
		free(text);
		free(sid);
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("submit-headers needs "
		                            "?session_id= and "
		                            "a headers object")
		                   : err,
		           200, NULL);
	} else if (strcmp(action, "refresh-tools") == 0) {
		rc = mk_client_refresh_tools(D.rt, id, &err);
		answer_api(r, rc, err, 200, NULL);
	} else if (strcmp(action, "user-oauth") == 0) {
		/* a caller's own flow: the identity from the usual headers */
		const char *mode = r->id_user != NULL ? "user"
		        : r->id_vk != NULL            ? "vk"
		        : r->id_session != NULL       ? "session"
		                                      : NULL;
		const char *who  = r->id_user != NULL ? r->id_user
		         : r->id_vk != NULL           ? r->id_vk
		                                      : r->id_session;
		rc = mode != NULL ? mk_user_oauth_start(D.rt, id, mode, who,
		                                        &url, &state, &err)
		                  : MK_EINVAL;
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("user-oauth needs the caller's "
		                            "identity "
		                            "(X-MCP-User-Id, "
		                            "X-MCP-Virtual-Key or "
		                            "X-MCP-Session-Id)")
		                   : err,
		           200,
		           rc == 0 ? json_pack("{s:s, s:s}", "authorize_url",
		                               url, "session_id", state)
		                   : NULL);
		mk_free(url);
		mk_free(state);
	} else if (strcmp(action, "disable") == 0 ||
	           strcmp(action, "enable") == 0) {
		rc = action[0] == 'd' ? mk_client_disable(D.rt, id, &err)
		                      : mk_client_enable(D.rt, id, &err);
		answer_api(r, rc, err, 200, NULL);
	} else {
		answer_error(r, 404, "no such endpoint");
	}
}

/* A tool call, answered from its callback. */
static void
on_tool(void *arg, int rc, mk_result *res)
{
	req *r = arg;

	if (rc == 0 && res != NULL && res->result != NULL) {
		json_t *j = json_loads(res->result, 0, NULL);
		json_t *o =
		        json_pack("{s:o}", "result",
		                  j != NULL ? j : json_string(res->result));
		if (res->recovery != NULL) {
			json_object_set_new(
			        o, "recovery",
			        json_loads(res->recovery, 0, NULL));
		}
		answer_json(r, 200, o);
	} else if (rc == MK_EAUTH && res != NULL &&
	           res->auth_required != NULL) {
		json_t *p = json_loads(res->auth_required, 0, NULL);
		answer_json(r, 401,
		            json_pack("{s:s, s:o}", "error",
		                      res->error != NULL ? res->error
		                                         : "authorize first",
		                      "mcp_auth_required",
		                      p != NULL ? p : json_null()));
	} else {
		answer_error(r, status_of(rc),
		             res != NULL && res->error != NULL
		                     ? res->error
		                     : mk_strerror(rc));
	}
	mk_result_free(&res);
}

static void
tool_execute(req *r, json_t *body)
{
	const char *client = field(body, "client");
	const char *tool   = field(body, "tool");
	json_t     *args   = json_object_get(body, "arguments");
	json_t     *to     = json_object_get(body, "timeout");
	char       *atext;
	int         rc;

	if (client == NULL || tool == NULL ||
	    (args != NULL && !json_is_object(args)) ||
	    (to != NULL && !json_is_integer(to))) {
		answer_error(
		        r, 400,
		        "the body needs client and tool (strings), arguments "
		        "(an object) and optionally timeout (milliseconds)");
		return;
	}
	if (to != NULL &&
	    (json_integer_value(to) < 0 ||
	     json_integer_value(to) > INT32_MAX)) {
		/* never cut to an int: 4294967297 is not 1 ms */
		answer_error(r, 400,
		             "timeout must be from 0 to 2147483647 "
		             "milliseconds");
		return;
	}
	atext     = args != NULL ? json_dumps(args, JSON_COMPACT) : NULL;
	mk_call c = {.client    = client,
	             .tool      = tool,
	             .arguments = atext,
	             .timeout_ms =
	                     to != NULL ? (int)json_integer_value(to) : 0,
	             .user_id       = r->id_user,
	             .virtual_key   = r->id_vk,
	             .session_id    = r->id_session,
	             .subject_token = r->bearer};
	rc        = mk_tool_call_async(D.rt, &c, on_tool, r);
	free(atext);
	if (rc != 0) {
		answer_error(r, status_of(rc),
		             rc == MK_ENOENT ? "no such MCP client"
		                             : mk_strerror(rc));
	}
}

static const char *
client_name(const json_t *c)
{
	const char *n = json_string_value(
	        json_object_get(json_object_get(c, "config"), "name"));

	return (n != NULL ? n : "?");
}

/* Every client's view, paged through the list (100 at a time), each
 * with its counters when metrics is true. */
static json_t *
all_clients(bool metrics)
{
	json_t *all = json_array(), *c;
	size_t  i;

	for (size_t off = 0; all != NULL;) {
		char    filter[64], *text = NULL;
		json_t *page, *cs;

		snprintf(filter, sizeof(filter),
		         "{\"limit\": 100, \"offset\": %zu}", off);
		if (mk_clients_json(D.rt, filter, &text) != 0) {
			json_decref(all);
			return (NULL);
		}
		page = json_loads(text, 0, NULL);
		mk_free(text);
		cs = json_object_get(page, "clients");
		if (json_array_size(cs) == 0) {
			json_decref(page);
			break;
		}
		json_array_extend(all, cs);
		off += json_array_size(cs);
		json_decref(page);
	}
	json_array_foreach(metrics ? all : NULL, i, c)
	{
		char *m = NULL;
		/* (a client removed meanwhile has none: it shows zeros) */
		if (mk_client_metrics_json(D.rt, client_name(c), &m) == 0) {
			json_object_set_new(c, "metrics",
			                    json_loads(m, 0, NULL));
		}
		mk_free(m);
	}
	return (all);
}

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
		const char *cn = client_name(c);
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
	static const char *const le[] = {
	        "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
	        "1",     "2.5",  "5",     "10",   "30",  "+Inf"};
	size_t  i;
	json_t *c;

	fprintf(f,
	        "# HELP mcpkeep_tool_call_duration_seconds tool call "
	        "latency\n"
	        "# TYPE mcpkeep_tool_call_duration_seconds histogram\n");
	json_array_foreach(all, i, c)
	{
		const char *cn = client_name(c);
		json_t     *m  = json_object_get(c, "metrics");
		json_t     *b  = json_object_get(m, "latency_buckets");
		long long   n  = 0;

		for (size_t k = 0; k < sizeof(le) / sizeof(le[0]); k++) {
			n += json_integer_value(json_array_get(b, k));
			fprintf(f,
			        "mcpkeep_tool_call_duration_seconds_bucket{"
			        "client=\"%s\",le=\"%s\"} %lld\n",
			        cn, le[k], n);
		}
		fprintf(f,
		        "mcpkeep_tool_call_duration_seconds_sum{client=\"%s\"}"
		        " "
		        "%.6f\n"
		        "mcpkeep_tool_call_duration_seconds_count{client=\"%"
		        "s\"}"
		        " %lld\n",
		        cn, (double)num(m, "latency_sum_us") / 1e6, cn, n);
	}
}

/* GET /metrics: Prometheus text (client names are [A-Za-z0-9_]). */
static void
metrics(req *r)
{
	static const char *const stages[] = {
	        "connect",        "ping",       "list_tools", "tool_discovery",
	        "transport_lost", "credential", NULL};
	static const char *const outcomes[] = {"ok", "error", "auth_required",
	                                       "refused", NULL};
	static const char *const paths[]    = {"per_call", "shared", "session",
	                                       NULL};
	static const char *const one[]      = {"", NULL};
	mk_stats                 st;
	char                    *out = NULL;
	size_t                   len = 0, i;
	FILE                    *f;
	json_t                  *all, *c;
	int                      count[NSTATES] = {0};
	uint64_t                 requests, busy, reloads[2];
	int                      inflight;

	pthread_mutex_lock(&D.mtx); /* (another worker may be answering) */
	requests   = D.requests;
	inflight   = D.capped;
	busy       = D.busy;
	reloads[0] = D.reloads[0];
	reloads[1] = D.reloads[1];
	pthread_mutex_unlock(&D.mtx);
	if (mk_runtime_stats(D.rt, &st, 0) != 0 ||
	    (all = all_clients(true)) == NULL) {
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
			count[k] += strcmp(s, states[k]) == 0;
		}
	}
	fprintf(f,
	        "# HELP mcpkeep_clients MCP clients by state\n"
	        "# TYPE mcpkeep_clients gauge\n");
	for (int k = 0; k < NSTATES; k++) {
		fprintf(f, "mcpkeep_clients{state=\"%s\"} %d\n", states[k],
		        count[k]);
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
	        "# HELP mcpkeep_http_requests_in_flight requests in the works "
	        "(not the probes), as --max-requests counts them\n"
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
	fclose(f);
	answer(r, 200, "text/plain; version=0.0.4", out);
	free(out);
}

/* Runs r (on a worker, or an nng thread for what never blocks). */
static void
route(req *r)
{
	json_t      *body = NULL;
	json_error_t je;

	if (r->body != NULL && *r->body != '\0' &&
	    (body = json_loads(r->body, 0, &je)) == NULL) {
		/* (where, not jansson's text: it quotes the body) */
		char msg[96];
		snprintf(msg, sizeof(msg),
		         "the body is not valid JSON (line %d, column %d)",
		         je.line, je.column);
		answer_error(r, 400, msg);
		return;
	}
	if (body != NULL && !json_is_object(body)) {
		json_decref(body);
		answer_error(r, 400, "the body must be a JSON object");
		return;
	}
	const char *p = r->path;
	if (strcmp(p, "/") == 0 && strcmp(r->method, "GET") == 0) {
		answer(r, 200, "text/html; charset=utf-8", status_html);
	} else if (strcmp(p, "/healthz") == 0) {
		answer_json(r, 200, json_pack("{s:s}", "status", "ok"));
	} else if (strcmp(p, "/readyz") == 0) {
		mk_stats st;
		pthread_mutex_lock(&D.mtx);
		bool booting = D.booting;
		pthread_mutex_unlock(&D.mtx);
		r->boot = booting; /* (expected: no warning) */
		int ok  = !booting && mk_runtime_stats(D.rt, &st, 2000) == 0 &&
		        st.store_state != MK_STORE_FAILING;
		answer_json(r, ok ? 200 : 503,
		            json_pack("{s:s}", "status",
		                      ok                ? "ready"
		                              : booting ? "booting"
		                                        : "not ready"));
	} else if (strcmp(p, "/metrics") == 0) {
		metrics(r);
	} else if (strcmp(p, "/api/oauth/callback") == 0 &&
	           strcmp(r->method, "GET") == 0) {
		oauth_callback(r);
	} else if (strcmp(p, "/api/mcp/clients") == 0 &&
	           strcmp(r->method, "GET") == 0) {
		clients_list(r);
	} else if (strcmp(p, "/api/mcp/client") == 0 &&
	           strcmp(r->method, "POST") == 0) {
		char *id = NULL, *err = NULL, *text;
		text   = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
		int rc = text != NULL ? mk_client_add(D.rt, text, &id, &err)
		                      : MK_EINVAL;
		free(text);
		answer_api(r, rc,
		           rc == MK_EINVAL && err == NULL
		                   ? strdup("the body must be a client config")
		                   : err,
		           201, rc == 0 ? json_pack("{s:s}", "id", id) : NULL);
		mk_free(id);
	} else if (strncmp(p, "/api/mcp/client/", 16) == 0) {
		char *id = strdup(p + 16), *action = strchr(id, '/');
		if (action != NULL) {
			*action++ = '\0';
		}
		if (*id == '\0' || (action != NULL && strchr(action, '/'))) {
			answer_error(r, 404, "no such endpoint");
		} else {
			client_route(r, id, action, body);
		}
		free(id);
	} else if (strcmp(p, "/api/mcp/tool/execute") == 0 &&
	           strcmp(r->method, "POST") == 0) {
		tool_execute(r, body);
	} else {
		answer_error(r, 404, "no such endpoint");
	}
	json_decref(body);
}

static void *
worker(void *arg)
{
	lane *l = arg;
	req  *r;

	for (;;) {
		pthread_mutex_lock(&D.mtx);
		while (l->head == NULL && !D.stopping) {
			pthread_cond_wait(&l->cv, &D.mtx);
		}
		if ((r = l->head) == NULL) {
			pthread_mutex_unlock(&D.mtx);
			return (NULL);
		}
		if ((l->head = r->next) == NULL) {
			l->tail = NULL;
		}
		pthread_mutex_unlock(&D.mtx);
		route(r);
	}
}

static char *
header_dup(nng_http_req *h, const char *name)
{
	const char *v = nng_http_req_get_header(h, name);

	return (v != NULL && *v != '\0' ? strdup(v) : NULL);
}

/* Constant-time comparison of the presented bearer and the token. */
static bool
admin_ok(const char *authz)
{
	bool ok;

	pthread_mutex_lock(&D.mtx);
	if (D.token == NULL) {
		ok = true;
	} else if (authz == NULL || strncasecmp(authz, "Bearer ", 7) != 0) {
		ok = false;
	} else {
		size_t n = strlen(authz + 7), m = strlen(D.token);
		ok = n == m && CRYPTO_memcmp(authz + 7, D.token, m) == 0;
	}
	pthread_mutex_unlock(&D.mtx);
	return (ok);
}

/* nng's handler: takes the request apart and queues it. */
static void
on_http(nng_aio *aio)
{
	nng_http_req *h   = nng_aio_get_input(aio, 0);
	req          *r   = calloc(1, sizeof(*r));
	const char   *uri = nng_http_req_get_uri(h), *q;
	void         *data;
	size_t        len;

	if (r == NULL) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	r->aio    = aio;
	r->t0     = mono_ns();
	r->method = strdup(nng_http_req_get_method(h));
	q         = strchr(uri, '?');
	r->path   = q != NULL ? strndup(uri, (size_t)(q - uri)) : strdup(uri);
	r->query  = strdup(q != NULL ? q + 1 : "");
	nng_http_req_get_data(h, &data, &len);
	r->body       = len > 0 && len <= BODY_MAX ? strndup(data, len) : NULL;
	r->id_user    = header_dup(h, "X-MCP-User-Id");
	r->id_vk      = header_dup(h, "X-MCP-Virtual-Key");
	r->id_session = header_dup(h, "X-MCP-Session-Id");
	/* Every request holds memory (its body: up to 1 MiB) until it is
	 * answered: past the bound, refuse rather than queue without end.
	 * The probes stay answered: an operator needs them most then, and
	 * they carry no body. */
	bool exempt = r->path != NULL &&
	        (strcmp(r->path, "/healthz") == 0 ||
	         strcmp(r->path, "/readyz") == 0 ||
	         strcmp(r->path, "/metrics") == 0);
	pthread_mutex_lock(&D.mtx);
	r->busy   = !exempt && D.capped >= D.max;
	r->capped = !exempt && !r->busy;
	D.busy += r->busy;
	D.capped += r->capped;
	D.inflight++;
	pthread_mutex_unlock(&D.mtx);
	if (r->busy) {
		char msg[96];
		snprintf(msg, sizeof(msg),
		         "the daemon is busy: %d requests in the works; retry "
		         "later",
		         D.max);
		answer_error(r, 503, msg);
		return;
	}
	if (r->method == NULL || r->path == NULL || r->query == NULL) {
		answer_error(r, 500, "out of memory");
		return;
	}
	if (strstr(r->query, "%00") != NULL) {
		answer_error(r, 400, "the query has a NUL byte (%00)");
		return;
	}
	if (len > BODY_MAX) {
		char msg[64];
		snprintf(msg, sizeof(msg), "the request body is over %d bytes",
		         BODY_MAX);
		answer_error(r, 413, msg);
		return;
	}
	const char *authz = nng_http_req_get_header(h, "Authorization");
	bool        api   = strncmp(r->path, "/api/", 5) == 0 &&
	        strcmp(r->path, "/api/oauth/callback") != 0 &&
	        strcmp(r->path, "/api/mcp/tool/execute") != 0;
	if (strcmp(r->path, "/api/mcp/tool/execute") == 0) {
		/* the caller's own token rides as the subject (exchange); the
		 * admin's is not needed for calling tools as oneself */
		if (authz != NULL && strncasecmp(authz, "Bearer ", 7) == 0) {
			r->bearer = strdup(authz + 7);
		}
	} else if (api && !admin_ok(authz)) {
		answer_error(r, 401,
		             "this endpoint needs the admin token "
		             "(Authorization: Bearer ...)");
		return;
	}
	if (strcmp(r->path, "/healthz") == 0) {
		route(r); /* never blocks */
		return;
	}
	/* (a tool call too goes to a worker: it is async, but its send
	 * blocks while the client's inbox is full, and nng's own threads,
	 * which move the inbox's messages, must never wait on that) */
	int   k = strcmp(r->path, "/api/mcp/tool/execute") == 0 ? LANE_TOOL
	          : exempt                                      ? LANE_PROBE
	                                                        : LANE_ADMIN;
	lane *l = &D.lanes[k];
	pthread_mutex_lock(&D.mtx);
	if (l->tail != NULL) {
		l->tail->next = r;
	} else {
		l->head = r;
	}
	l->tail = r;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&D.mtx);
}

/* The client objects of a config text, by name (new reference). */
static json_t *
clients_by_name(const char *text)
{
	json_t *root = json_loads(text, 0, NULL), *by = json_object();
	size_t  i;
	json_t *c;

	json_array_foreach(json_object_get(json_object_get(root, "mcp"),
	                                   "client_configs"),
	                   i, c)
	{
		const char *n = json_string_value(json_object_get(c, "name"));
		if (n != NULL) {
			json_object_set(by, n, c);
		}
	}
	json_decref(root);
	return (by);
}

/* Reads a setting of the config text (NULL when absent). */
static char *
setting(const char *text, const char *path)
{
	char *v = NULL, *err = NULL;

	if (text != NULL && mk_config_get(text, path, &v, &err) != 0) {
		mk_free(err);
		return (NULL);
	}
	return (v);
}

/* The admin token of a config text: its server.admin_token, else
 * MCPKEEP_ADMIN_TOKEN, else NULL.  malloc'd; a secret (free_secret). */
static char *
admin_token_of(const char *text)
{
	char       *c   = setting(text, "server.admin_token");
	const char *env = getenv("MCPKEEP_ADMIN_TOKEN");
	char       *t   = c != NULL                   ? strdup(c)
	                : env != NULL && *env != '\0' ? strdup(env)
	                                              : NULL;

	if (c != NULL) {
		OPENSSL_cleanse(c, strlen(c));
		mk_free(c);
	}
	return (t);
}

/* Says which settings a reload changed that only a restart applies. */
static void
restart_only(const char *was, const char *now)
{
	static const char *const keys[] = {"server.listen", "server.stream",
	                                   "store.path", NULL};

	for (int i = 0; keys[i] != NULL; i++) {
		char *a = setting(was, keys[i]), *b = setting(now, keys[i]);
		if ((a == NULL) != (b == NULL) ||
		    (a != NULL && strcmp(a, b) != 0)) {
			mk_log(MK_LOG_WARN, "serve",
			       "reload: %s changed; it is read only at start "
			       "(restart to apply it)",
			       keys[i]);
		}
		mk_free(a);
		mk_free(b);
	}
}

/*
 * SIGHUP: config.json again, applied by mk_runtime_reload (its settings,
 * then its clients as a diff against the file loaded before; clients
 * created through the API stay).  The admin token is the file's from
 * then on.  An invalid file changes nothing, nor does one that drops the
 * token of a daemon on a non-loopback address.
 */
static void
reload(const char *path, char **text)
{
	char  ferr[256], *ntext, *err = NULL;
	int   rc;
	char *probe = NULL, *token;

	if ((ntext = cli_read_file(path, ferr, sizeof(ferr))) == NULL) {
		mk_log(MK_LOG_ERROR, "serve", "reload refused: %s", ferr);
		goto refused;
	}
	if ((rc = mk_config_get(ntext, "store.path", &probe, &err)) != 0) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: %s",
		       err != NULL ? err : mk_strerror(rc));
		goto refused;
	}
	if ((token = admin_token_of(ntext)) == NULL && !D.loopback) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: the daemon serves a "
		       "non-loopback address and the file names no admin "
		       "token (server.admin_token or MCPKEEP_ADMIN_TOKEN)");
		goto refused;
	}
	mk_free(probe);
	probe = NULL;
	restart_only(*text, ntext);
	if ((rc = mk_runtime_reload(D.rt, ntext, &err)) == MK_EINVAL) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: %s",
		       err != NULL ? err : mk_strerror(rc));
		free_secret(token);
		goto refused;
	}
	if (rc != 0) {
		mk_log(MK_LOG_ERROR, "serve", "reload: %s",
		       err != NULL ? err : mk_strerror(rc));
	}
	mk_free(err);
	err = NULL;
	/* a rotated token holds from the next request on */
	pthread_mutex_lock(&D.mtx);
	bool rotated = (token == NULL) != (D.token == NULL) ||
	        (token != NULL && strcmp(token, D.token) != 0);
	char *gone = D.token;
	D.token    = token;
	pthread_mutex_unlock(&D.mtx);
	free_secret(gone);
	if (rotated) {
		mk_log(MK_LOG_INFO, "serve",
		       "reload: the admin token changed");
	}
	free(*text);
	*text = ntext;
	pthread_mutex_lock(&D.mtx);
	D.reloads[0]++;
	pthread_mutex_unlock(&D.mtx);
	return;
refused:
	mk_free(err);
	mk_free(probe);
	free(ntext);
	pthread_mutex_lock(&D.mtx);
	D.reloads[1]++;
	pthread_mutex_unlock(&D.mtx);
}

/* ---- the boot ------------------------------------------------------------
 */

/* The load's end (mk_load_fn): on a runtime thread, so it only wakes the
 * boot thread. */
static void
on_loaded(void *arg, int rc, const char *err)
{
	(void)arg;
	pthread_mutex_lock(&D.mtx);
	D.loaded   = true;
	D.load_rc  = rc;
	D.load_err = err != NULL ? strdup(err) : NULL;
	D.boot_t1  = mono_ns();
	pthread_cond_broadcast(&D.boot_cv);
	pthread_mutex_unlock(&D.mtx);
}

/* Logs how each of the file's clients (names) came out of its first
 * connect, then the summary. */
static void
boot_report(json_t *names, int64_t ns)
{
	json_t     *all                = all_clients(false), *c;
	int         count[NSTATES + 1] = {0}; /* the last: a state not known */
	size_t      i, found = 0, total = json_object_size(names);
	const char *sep = ": ";
	char        sum[512];
	size_t      n;

	if (all == NULL) {
		mk_log(MK_LOG_WARN, "serve",
		       "boot: the client list did not answer");
	}
	json_array_foreach(all, i, c)
	{
		const char *name = client_name(c);
		const char *st =
		        json_string_value(json_object_get(c, "state"));
		json_t *lf = json_object_get(c, "last_failure");
		int     k  = 0;

		if (json_object_get(names, name) == NULL) {
			continue; /* restored from the store, or made since */
		}
		found++;
		st = st != NULL ? st : "?";
		while (k < NSTATES && strcmp(st, states[k]) != 0) {
			k++;
		}
		count[k]++;
		if (lf != NULL && strcmp(st, "healthy") != 0) {
			/* (the message is the one the client's transition
			 * logged: never a secret) */
			mk_log(MK_LOG_INFO, "serve",
			       "boot: %s: %s (stage %s: %s)", name, st,
			       json_string_value(json_object_get(lf, "stage")),
			       json_string_value(
			               json_object_get(lf, "message")));
		} else {
			mk_log(MK_LOG_INFO, "serve", "boot: %s: %s", name, st);
		}
	}
	snprintf(sum, sizeof(sum), "boot: %zu clients connected in %lld ms",
	         total, (long long)(ns / 1000000));
	for (int k = 0; k <= NSTATES; k++) {
		if (count[k] != 0 && (n = strlen(sum)) < sizeof(sum)) {
			snprintf(sum + n, sizeof(sum) - n, "%s%d %s", sep,
			         count[k], k < NSTATES ? states[k] : "other");
			sep = ", ";
		}
	}
	if (all != NULL && found < total && (n = strlen(sum)) < sizeof(sum)) {
		snprintf(sum + n, sizeof(sum) - n, "%s%zu removed", sep,
		         total - found);
	}
	json_decref(all);
	mk_log(MK_LOG_INFO, "serve", "%s", sum);
}

/* The boot thread: waits for the load's end (or the daemon stopping),
 * logs the outcome, then the daemon is ready; a SIGHUP that came
 * meanwhile is raised again for the main thread to apply. */
static void *
boot_main(void *arg)
{
	json_t *names = arg; /* the file's clients, by name */
	bool    loaded, hup;
	int     rc;
	char   *err;
	int64_t ns;

	pthread_mutex_lock(&D.mtx);
	while (!D.loaded && !D.stopping) {
		pthread_cond_wait(&D.boot_cv, &D.mtx);
	}
	loaded     = D.loaded;
	rc         = D.load_rc;
	err        = D.load_err;
	D.load_err = NULL;
	ns         = D.boot_t1 - D.boot_t0;
	pthread_mutex_unlock(&D.mtx);
	if (!loaded) {
		mk_log(MK_LOG_INFO, "serve",
		       "boot: stopping before the first connects ended");
	} else if (rc != 0) {
		mk_log(MK_LOG_ERROR, "serve",
		       "boot: the config's clients were not loaded: %s",
		       err != NULL ? err : mk_strerror(rc));
	} else {
		boot_report(names, ns);
	}
	free(err);
	json_decref(names);
	pthread_mutex_lock(&D.mtx);
	D.boot_fail = loaded && rc != 0 && rc != MK_ECLOSED;
	D.booting   = D.boot_fail; /* (failed: never ready; it stops) */
	hup         = D.hup && loaded && rc == 0;
	bool fail   = D.boot_fail && !D.stopping;
	pthread_mutex_unlock(&D.mtx);
	if (fail) {
		kill(getpid(), SIGTERM); /* as before: cannot start */
	} else if (hup) {
		mk_log(MK_LOG_INFO, "serve",
		       "reload: the boot ended: applying the SIGHUP that came "
		       "during it");
		kill(getpid(), SIGHUP);
	}
	return (NULL);
}

static bool
loopback(const char *listen)
{
	return (strncmp(listen, "127.", 4) == 0 ||
	        strncmp(listen, "localhost:", 10) == 0 ||
	        strncmp(listen, "[::1]:", 6) == 0);
}

int
cmd_serve(int argc, char **argv)
{
	const char  *config = NULL, *listen = NULL, *store = NULL;
	char        *text = NULL, *err = NULL, ferr[256], url[300], redir[300];
	char        *c_listen = NULL, *c_store = NULL;
	mk_options   opts;
	mk_log_level level    = MK_LOG_INFO;
	int          json_log = 0;
	json_t      *sa       = NULL; /* server.stream, kept while serving */
	nng_http_handler *hh  = NULL;
	nng_url          *u   = NULL;
	sigset_t          set;
	int               rv, sig, code = 1;

	D.max = REQUESTS_MAX;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
			config = argv[++i];
		} else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
			listen = argv[++i];
		} else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
			store = argv[++i];
		} else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc &&
		           cli_parse_level(argv[i + 1], &level) == 0) {
			i++;
		} else if (strcmp(argv[i], "--max-requests") == 0 &&
		           i + 1 < argc &&
		           (D.max = cli_positive(argv[i + 1])) > 0) {
			i++;
		} else if (strcmp(argv[i], "--json") == 0) {
			json_log = 1;
		} else if (strcmp(argv[i], "--help") == 0) {
			fputs(serve_usage, stdout);
			return (0);
		} else {
			fprintf(stderr, "mcpkeep serve: bad option '%s'\n%s",
			        argv[i], serve_usage);
			return (2);
		}
	}
	if (config == NULL) {
		fprintf(stderr, "mcpkeep serve: -c FILE is required\n%s",
		        serve_usage);
		return (2);
	}
	if ((text = cli_read_file(config, ferr, sizeof(ferr))) == NULL) {
		fprintf(stderr, "mcpkeep: %s\n", ferr);
		return (1);
	}
	if ((rv = mk_config_get(text, "store.path", &c_store, &err)) != 0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", config,
		        err ? err : mk_strerror(rv));
		goto out;
	}
	c_listen   = setting(text, "server.listen");
	listen     = listen != NULL    ? listen
	            : c_listen != NULL ? c_listen
	                               : LISTEN_DEFAULT;
	D.token    = admin_token_of(text);
	D.loopback = loopback(listen);
	if (D.token == NULL && !D.loopback) {
		fprintf(stderr,
		        "mcpkeep serve: refusing to serve %s without an admin "
		        "token (server.admin_token or MCPKEEP_ADMIN_TOKEN)\n",
		        listen);
		goto out;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	mk_options_init(&opts);
	opts.log_level      = level;
	opts.log_json       = json_log;
	opts.store_path     = store != NULL ? store : c_store;
	opts.raise_fd_limit = 1; /* every connected client holds fds */
	snprintf(redir, sizeof(redir), "http://%s/api/oauth/callback", listen);
	opts.oauth_redirect_uri = redir;
	/* the state stream outward too (server.stream: tcp://, ipc://) */
	char *streams = setting(text, "server.stream");
	sa            = streams != NULL ? json_loads(streams, 0, NULL) : NULL;
	mk_free(streams);
	const char *listen_on[18] = {NULL};
	size_t      nl            = 0;
	for (; nl < json_array_size(sa) && nl < 16; nl++) {
		listen_on[nl] = json_string_value(json_array_get(sa, nl));
	}
	/* and on nng's websocket transport, beside the API, for browsers */
	char ws[320];
	snprintf(ws, sizeof(ws), "ws://%s/stream", listen);
	listen_on[nl]      = ws;
	opts.stream_listen = listen_on;
	rv                 = mk_runtime_open(&D.rt, &opts);
	if (rv != 0) {
		fprintf(stderr, "mcpkeep: cannot start the runtime: %s\n",
		        mk_strerror(rv));
		goto out;
	}
	pthread_mutex_init(&D.mtx, NULL);
	pthread_cond_init(&D.cv, NULL);
	pthread_cond_init(&D.boot_cv, NULL);
	for (int k = 0; k < LANES; k++) {
		pthread_cond_init(&D.lanes[k].cv, NULL);
		for (int i = 0; i < WORKERS; i++) {
			pthread_create(&D.workers[k][i], NULL, worker,
			               &D.lanes[k]);
		}
	}
	/* the clients first (each exists once this returns: the API sees
	 * them all), their connects while the server answers */
	json_t *names = clients_by_name(text);
	mk_log(MK_LOG_INFO, "serve", "boot: connecting %zu clients",
	       json_object_size(names));
	pthread_mutex_lock(&D.mtx);
	D.booting = true;
	D.boot_t0 = mono_ns();
	pthread_mutex_unlock(&D.mtx);
	if ((rv = mk_runtime_load_async(D.rt, text, on_loaded, NULL, &err)) !=
	    0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", config,
		        err ? err : mk_strerror(rv));
		json_decref(names);
		goto stop;
	}
	if ((rv = pthread_create(&D.boot, NULL, boot_main, names)) != 0) {
		fprintf(stderr, "mcpkeep serve: cannot start the boot: %s\n",
		        strerror(rv));
		json_decref(names);
		goto stop;
	}
	D.boot_th = true;
	snprintf(url, sizeof(url), "http://%s", listen);
	if ((rv = nng_url_parse(&u, url)) != 0 ||
	    (rv = nng_http_server_hold(&D.http, u)) != 0 ||
	    (rv = nng_http_handler_alloc(&hh, "/", on_http)) != 0 ||
	    (rv = nng_http_handler_set_method(hh, NULL)) != 0 ||
	    (rv = nng_http_handler_set_tree(hh)) != 0 ||
	    (rv = nng_http_handler_collect_body(hh, true, BODY_READ_MAX)) !=
	            0 ||
	    (rv = nng_http_server_add_handler(D.http, hh)) != 0 ||
	    (hh = NULL, rv = nng_http_server_start(D.http)) != 0) {
		fprintf(stderr, "mcpkeep serve: cannot serve %s: %s\n", url,
		        nng_strerror(rv));
		if (hh != NULL) {
			nng_http_handler_free(hh);
		}
		goto stop;
	}
	printf("mcpkeep %s: serving %s (status page: %s/)\n", MCPKEEP_VERSION,
	       url, url);
	fflush(stdout);
	while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
		/* the boot's clients are the diff's base: a reload waits
		 * for their connects to end (boot_main raises it again) */
		pthread_mutex_lock(&D.mtx);
		bool later = D.booting;
		D.hup      = D.hup || later;
		pthread_mutex_unlock(&D.mtx);
		if (later) {
			mk_log(MK_LOG_INFO, "serve",
			       "reload deferred: the boot is still connecting "
			       "clients; the SIGHUP applies when it ends");
			continue;
		}
		reload(config, &text);
	}
	printf("mcpkeep: %s: stopping\n",
	       sig == SIGINT ? "SIGINT" : "SIGTERM");
	fflush(stdout);
	pthread_mutex_lock(&D.mtx);
	code = D.boot_fail ? 1 : 0;
	pthread_mutex_unlock(&D.mtx);
	nng_http_server_stop(D.http);
stop:
	/* calls in flight end (bounded), then the workers, then the runtime */
	pthread_mutex_lock(&D.mtx);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += DRAIN_MS / 1000;
	while (D.inflight > 0 &&
	       pthread_cond_timedwait(&D.cv, &D.mtx, &ts) == 0) {
	}
	D.stopping = true;
	for (int k = 0; k < LANES; k++) {
		pthread_cond_broadcast(&D.lanes[k].cv);
	}
	pthread_cond_broadcast(&D.boot_cv);
	pthread_mutex_unlock(&D.mtx);
	for (int k = 0; k < LANES; k++) {
		for (int i = 0; i < WORKERS; i++) {
			pthread_join(D.workers[k][i], NULL);
		}
	}
	if (D.boot_th) { /* before the close: it calls the runtime */
		pthread_join(D.boot, NULL);
	}
	if (D.http != NULL) {
		nng_http_server_release(D.http);
	}
out:
	nng_url_free(u);
	mk_runtime_close(&D.rt); /* (a boot still going: its connects end) */
	free(D.load_err);        /* (the close may have answered the load) */
	json_decref(sa);
	mk_free(err);
	mk_free(c_listen);
	mk_free(c_store);
	free_secret(D.token);
	free(text);
	return (code);
}
