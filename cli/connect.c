/*
 * connect.c - `mcpkeep connect URL`: a stdio MCP server that relays to a
 * daemon's /mcp, so that a desktop client's config names the mcpkeep
 * program and nothing else.
 *
 * DESIGN: stdin carries one JSON-RPC message per line (MCP's stdio
 * transport); each is POSTed to URL with the session's headers, and what
 * comes back - one JSON body, or the events of an SSE stream - is
 * written to stdout, one message per line.  An initialize runs alone (its
 * answer names the session every later request carries); other requests
 * run side by side, each on a thread of its own (at most CONNECT_INFLIGHT:
 * past that the reader waits), so that a long tool call never holds up a
 * ping or a cancellation.  A request the daemon could not answer with
 * JSON-RPC gets a JSON-RPC error naming why, so the client never waits
 * for nothing.  At stdin's end the calls in flight are given
 * CONNECT_DRAIN_MS, then the session is ended (DELETE) and the program
 * exits 0.  Every read has a bound (a message, an answer: 16 MiB), every
 * request a deadline; the key never appears in an error or on stderr.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"

#define CONNECT_MAX      (16 * 1024 * 1024) /* bytes of a message */
#define CONNECT_INFLIGHT 64                 /* requests at once */
#define CONNECT_CALL_MS  (15 * 60 * 1000)   /* one request's deadline */
#define CONNECT_DRAIN_MS 10000 /* calls in flight at stdin's end */

static const char connect_usage[] =
        "usage: mcpkeep connect URL [--key KEY | --token TOKEN]\n"
        "  a stdio MCP server relaying to a daemon's /mcp at URL (e.g.\n"
        "  http://127.0.0.1:8080/mcp), for a desktop client's config:\n"
        "  {\"command\": \"mcpkeep\", \"args\": [\"connect\", URL]}\n"
        "  KEY: a virtual key (default MCPKEEP_KEY); TOKEN: the admin\n"
        "  token (default MCPKEEP_ADMIN_TOKEN); neither: none\n"
        "exit codes: 0 stdin ended, 1 a failure, 2 usage\n";

static struct {
	const char     *url;
	char           *auth;         /* "Authorization: Bearer ..." or NULL */
	pthread_mutex_t mtx;          /* guards what follows, and stdout */
	pthread_cond_t  cv;           /* a request ended */
	char            session[256]; /* Mcp-Session-Id, or "" */
	char            version[32];  /* MCP-Protocol-Version, or "" */
	int             inflight;
} C = {.mtx = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* One request and what came back. */
typedef struct relay {
	char   *body; /* the message (one line) */
	json_t *id;   /* a request's id, or NULL: a notification */
	bool    init; /* an initialize: its session is kept */
	char   *in;   /* what came (a JSON body, or the SSE left over) */
	size_t  len;
	bool    sse;  /* the answer is an event stream */
	bool    said; /* a message of it reached stdout */
	char    session[256];
} relay;

/* Writes one message to stdout as a line (compact: no newline inside). */
static void
emit(json_t *msg)
{
	char *line = json_dumps(msg, JSON_COMPACT);

	if (line == NULL) {
		return;
	}
	pthread_mutex_lock(&C.mtx);
	fputs(line, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	pthread_mutex_unlock(&C.mtx);
	free(line);
}

/* A JSON-RPC error to request id: the relay failed it. */
static void
emit_error(json_t *id, const char *fmt, ...)
{
	char    msg[512];
	va_list ap;

	if (id == NULL) {
		return; /* a notification: nobody waits */
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *e =
	        json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	                  id, "error", "code", -32000, "message", msg);
	emit(e);
	json_decref(e);
}

/* One JSON message of the answer (a body, or an event's data). */
static void
take(relay *rl, const char *text, size_t len)
{
	json_t *m = json_loadb(text, len, 0, NULL);

	if (m == NULL) {
		return; /* (an SSE comment or keep-alive: nothing) */
	}
	if (json_is_null(json_object_get(m, "id")) &&
	    json_object_get(m, "error") != NULL && rl->id != NULL) {
		/* (a refusal before the request was read, e.g. 401: it
		 * answers this request) */
		json_object_set(m, "id", rl->id);
	}
	if (rl->init && json_is_object(json_object_get(m, "result"))) {
		const char *v = json_string_value(json_object_get(
		        json_object_get(m, "result"), "protocolVersion"));
		pthread_mutex_lock(&C.mtx);
		snprintf(C.version, sizeof(C.version), "%s", v ? v : "");
		snprintf(C.session, sizeof(C.session), "%s", rl->session);
		pthread_mutex_unlock(&C.mtx);
	}
	rl->said = true;
	emit(m);
	json_decref(m);
}

/* The events complete in rl->in (each ends with a blank line): their
 * data lines joined, one message each; the rest is kept. */
static void
events(relay *rl)
{
	char *at = rl->in, *end;

	while ((end = strstr(at, "\n\n")) != NULL) {
		char  *data = NULL;
		size_t dl   = 0;
		*end        = '\0';
		for (char *l = at, *nl; l != NULL && *l != '\0'; l = nl) {
			nl = strchr(l, '\n');
			if (nl != NULL) {
				*nl++ = '\0';
			}
			l[strcspn(l, "\r")] = '\0';
			if (strncmp(l, "data:", 5) != 0) {
				continue;
			}
			const char *d = l[5] == ' ' ? l + 6 : l + 5;
			size_t      n = strlen(d);
			char       *g = realloc(data, dl + n + 2);
			if (g == NULL) {
				break;
			}
			data = g;
			memcpy(data + dl, d, n);
			dl += n;
			data[dl++] = '\n';
			data[dl]   = '\0';
		}
		if (data != NULL) {
			take(rl, data, dl);
			free(data);
		}
		at = end + 2;
	}
	rl->len -= (size_t)(at - rl->in);
	memmove(rl->in, at, rl->len + 1);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	relay *rl  = arg;
	size_t add = size * n;
	char  *g;

	if (rl->len + add > CONNECT_MAX ||
	    (g = realloc(rl->in, rl->len + add + 1)) == NULL) {
		return (0); /* too big: the transfer fails */
	}
	rl->in = g;
	for (size_t i = 0; i < add; i++) { /* (CRLF as LF: the events) */
		if (!(rl->sse && p[i] == '\r')) {
			rl->in[rl->len++] = p[i];
		}
	}
	rl->in[rl->len] = '\0';
	if (rl->sse) {
		events(rl);
	}
	return (add);
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	relay *rl  = arg;
	size_t len = size * n;

	if (len > 15 && strncasecmp(p, "Mcp-Session-Id:", 15) == 0) {
		snprintf(rl->session, sizeof(rl->session), "%.*s",
		         (int)strcspn(p + 15, "\r\n"), p + 15);
		memmove(rl->session, rl->session + strspn(rl->session, " \t"),
		        strlen(rl->session) + 1);
	} else if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
		rl->sse = strstr(p, "text/event-stream") != NULL;
	}
	return (len);
}

/* The session's headers, for a request (method: its HTTP method). */
static struct curl_slist *
headers(void)
{
	struct curl_slist *h = NULL;
	char               line[300];

	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h,
	                      "Accept: application/json, text/event-stream");
	if (C.auth != NULL) {
		h = curl_slist_append(h, C.auth);
	}
	pthread_mutex_lock(&C.mtx);
	if (C.session[0] != '\0') {
		snprintf(line, sizeof(line), "Mcp-Session-Id: %s", C.session);
		h = curl_slist_append(h, line);
	}
	if (C.version[0] != '\0') {
		snprintf(line, sizeof(line), "MCP-Protocol-Version: %s",
		         C.version);
		h = curl_slist_append(h, line);
	}
	pthread_mutex_unlock(&C.mtx);
	return (h);
}

/* POSTs rl's message and relays the answer. */
static void
relay_run(relay *rl)
{
	CURL              *e  = curl_easy_init();
	struct curl_slist *h  = headers();
	long               st = 0;
	CURLcode           rc;

	if (e == NULL) {
		emit_error(rl->id, "mcpkeep connect: out of memory");
		curl_slist_free_all(h);
		return;
	}
	curl_easy_setopt(e, CURLOPT_URL, C.url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, rl->body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, rl);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, rl);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)CONNECT_CALL_MS);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	if (rc == CURLE_OK && !rl->sse && rl->len > 0) {
		take(rl, rl->in, rl->len);
	}
	if (rl->said || (rc == CURLE_OK && st == 202)) {
		/* answered */
	} else if (rc != CURLE_OK) {
		emit_error(rl->id, "mcpkeep connect: %s: %s", C.url,
		           curl_easy_strerror(rc));
	} else {
		emit_error(rl->id, "mcpkeep connect: %s answered HTTP %ld",
		           C.url, st);
	}
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
}

static void
relay_free(relay *rl)
{
	free(rl->body);
	free(rl->in);
	json_decref(rl->id);
	free(rl);
}

static void *
relay_main(void *arg)
{
	relay *rl = arg;

	relay_run(rl);
	relay_free(rl);
	pthread_mutex_lock(&C.mtx);
	C.inflight--;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mtx);
	return (NULL);
}

/* Waits until fewer than max requests are in flight (or ms passed). */
static void
wait_below(int max, int ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&C.mtx);
	while (C.inflight >= max &&
	       pthread_cond_timedwait(&C.cv, &C.mtx, &until) != ETIMEDOUT) {
	}
	pthread_mutex_unlock(&C.mtx);
}

/* Relays one line of stdin. */
static void
line_in(char *line)
{
	json_t     *m = json_loads(line, 0, NULL);
	relay      *rl;
	pthread_t   th;
	const char *method = json_string_value(json_object_get(m, "method"));

	if (m == NULL) {
		fprintf(stderr,
		        "mcpkeep connect: a line of stdin is not JSON: "
		        "skipped\n");
		return;
	}
	if ((rl = calloc(1, sizeof(*rl))) == NULL ||
	    (rl->body = strdup(line)) == NULL) {
		emit_error(json_object_get(m, "id"),
		           "mcpkeep connect: out of memory");
		free(rl);
		json_decref(m);
		return;
	}
	rl->id = method != NULL ? json_incref(json_object_get(m, "id")) : NULL;
	rl->init = method != NULL && strcmp(method, "initialize") == 0;
	json_decref(m);
	if (rl->init) {
		/* alone: the requests after it carry its session */
		wait_below(1, CONNECT_CALL_MS);
		relay_run(rl);
		relay_free(rl);
		return;
	}
	wait_below(CONNECT_INFLIGHT, CONNECT_CALL_MS);
	pthread_mutex_lock(&C.mtx);
	C.inflight++;
	pthread_mutex_unlock(&C.mtx);
	if (pthread_create(&th, NULL, relay_main, rl) != 0) {
		relay_main(rl); /* (here, then) */
		return;
	}
	pthread_detach(th);
}

/* Ends the session (DELETE), at most 5 s. */
static void
end_session(void)
{
	CURL              *e;
	struct curl_slist *h;

	if (C.session[0] == '\0' || (e = curl_easy_init()) == NULL) {
		return;
	}
	h = headers();
	curl_easy_setopt(e, CURLOPT_URL, C.url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_perform(e);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
}

/* Reads one line of f into *buf (at most CONNECT_MAX bytes kept; *over
 * tells that more were dropped).  Returns false at the end of f. */
static bool
read_line(FILE *f, char **buf, size_t *len, bool *over)
{
	int c;

	*len  = 0;
	*over = false;
	while ((c = getc(f)) != EOF && c != '\n') {
		if (*len == CONNECT_MAX) {
			*over = true;
			continue;
		}
		if ((*len & 4095) == 0) {
			char *g = realloc(*buf, *len + 4096 + 1);
			if (g == NULL) {
				*over = true;
				continue;
			}
			*buf = g;
		}
		(*buf)[(*len)++] = (char)c;
	}
	if (*buf != NULL) {
		(*buf)[*len] = '\0';
	}
	return (c != EOF || *len > 0);
}

int
cmd_connect(int argc, char **argv)
{
	const char *key   = getenv("MCPKEEP_KEY");
	const char *token = getenv("MCPKEEP_ADMIN_TOKEN");
	char       *line  = NULL;
	size_t      n;
	bool        over;
	int         rc;
	cli_opt     opt[] = {
	            {CLI_TEXT, "--key", &key},
	            {CLI_TEXT, "--token", &token},
	            {CLI_ARG, "URL", &C.url},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("connect", argc, argv, opt, connect_usage)) != 0) {
		return (rc == 1 ? 0 : rc);
	}
	if (C.url == NULL ||
	    (strncmp(C.url, "http://", 7) != 0 &&
	     strncmp(C.url, "https://", 8) != 0)) {
		fprintf(stderr,
		        "mcpkeep connect: URL (http:// or https://) is "
		        "required\n%s",
		        connect_usage);
		return (2);
	}
	const char *bearer = key != NULL && *key != '\0' ? key : token;
	if (bearer != NULL && *bearer != '\0' &&
	    asprintf(&C.auth, "Authorization: Bearer %s", bearer) < 0) {
		return (1);
	}
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	while (read_line(stdin, &line, &n, &over)) {
		if (over) {
			fprintf(stderr,
			        "mcpkeep connect: a message over %d "
			        "bytes: skipped\n",
			        CONNECT_MAX);
			continue;
		}
		line[strcspn(line, "\r")] = '\0';
		if (line[0] != '\0') {
			line_in(line);
		}
	}
	free(line);
	wait_below(1, CONNECT_DRAIN_MS);
	end_session();
	pthread_mutex_lock(&C.mtx);
	bool idle = C.inflight == 0;
	pthread_mutex_unlock(&C.mtx);
	if (idle) { /* (else calls still run: the process ends them) */
		if (C.auth != NULL) {
			explicit_bzero(C.auth, strlen(C.auth));
			free(C.auth);
		}
		curl_global_cleanup();
	}
	return (0);
}
