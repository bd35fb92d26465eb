/*
 * watch.c - the live view: a state stream's transitions printed as they
 * happen, for `mcpkeep run` (the runtime's own inproc stream) and
 * `mcpkeep watch` (a daemon: its /api/events over HTTP, or its
 * server.stream over nng).
 *
 * DESIGN: one thread follows the stream and prints; the caller's thread
 * waits for a signal and stops it.  Over HTTP the thread reads the
 * Server-Sent Events with libcurl (each event's data is one JSON object)
 * and dials again after a failure, 1 s then doubling to 10 s; a stop
 * wakes that wait and aborts a transfer within a second (curl's
 * progress callback).  Over nng the socket redials by itself.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define EVENT_MAX (64 * 1024) /* bytes of one event */

struct cli_watch {
	pthread_t       thr;    /* prints what arrives */
	bool            http;   /* /api/events, else nng */
	nng_socket      sub;    /* nng: subscribed to the stream */
	char           *url;    /* http: the events URL */
	char           *auth;   /* http: the credential's header line */
	atomic_bool     failed; /* http: refused: the command fails */
	int             left;   /* events until it ends (--count), or 0 */
	atomic_bool     stop;   /* http: the thread ends */
	pthread_mutex_t mtx;    /* http: the redial wait */
	pthread_cond_t  cv;
	char           *buf; /* http: an event being read */
	size_t          len;
};

/* A server's text, made safe for a terminal: no control character (an
 * escape sequence could rewrite the screen). */
static const char *
printable(const char *s, char *out, size_t n)
{
	size_t i = 0;

	for (; s[i] != '\0' && i + 1 < n; i++) {
		unsigned char c = (unsigned char)s[i];
		out[i]          = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	out[i] = '\0';
	return (out);
}

static void
print_event(const mk_stream_event *e)
{
	char      ts[16], msg[2048];
	time_t    now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	(void)printable(e->message, msg, sizeof(msg));
	if (strcmp(e->topic, "input") == 0) {
		printf("%s  %-20s %s %s: %s%s%s  id %s\n", ts, e->name,
		       e->method, e->request_id, e->state, msg[0] ? "  " : "",
		       msg, e->client_id);
	} else if (strcmp(e->topic, "tools") == 0) {
		printf("%s  %-20s tools: %lld (hash %.12s)  id %s\n", ts,
		       e->name, (long long)e->count, e->hash, e->client_id);
	} else if (strcmp(e->topic, "pin") == 0) {
		printf("%s  %-20s tool list %.12s %s%s%s  id %s\n", ts,
		       e->name, e->hash, e->state, msg[0] ? ": " : "", msg,
		       e->client_id);
	} else if (strcmp(e->topic, "lists") == 0) {
		printf("%s  %-20s prompts and resources: %lld (hash %.12s)  id %s\n",
		       ts, e->name, (long long)e->count, e->hash,
		       e->client_id);
	} else if (strcmp(e->topic, "store") == 0) {
		printf("%s  store: %s%s%s\n", ts,
		       e->healthy ? "written again" : "failing",
		       msg[0] ? ": " : "", msg);
	} else {
		printf("%s  %-20s %s -> %s%s%s%s%s  id %s\n", ts, e->name,
		       e->old_state[0] ? e->old_state : "(new)", e->state,
		       e->stage[0] ? "  [" : "", e->stage,
		       e->stage[0] ? "] " : "", msg, e->client_id);
	}
	fflush(stdout);
}

/* ---- nng ---------------------------------------------------------------- */

static void *
nng_main(void *arg)
{
	cli_watch *w = arg;
	nng_msg   *msg;

	while (nng_recvmsg(w->sub, &msg, 0) == 0) {
		mk_stream_event *e;

		if (mk_stream_event_parse(nng_msg_body(msg), nng_msg_len(msg),
		                          &e) == 0) {
			print_event(e);
			mk_stream_event_free(e);
		}
		nng_msg_free(msg);
	}
	return (NULL);
}

/* ---- Server-Sent Events ------------------------------------------------- */

/* o's string member key, or "" */
static const char *
text(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return (s != NULL ? s : "");
}

/* The states as they are now, printed when the stream connected: the
 * events that follow are changes to them.  A key sees its clients. */
static void
snapshot(cli_watch *w)
{
	const char *lines[] = {w->auth, NULL};
	char        url[600], ts[16], msg[300];
	size_t      base = strlen(w->url) - strlen("/api/events"), i;
	time_t      now  = time(NULL);
	struct tm   tm;
	long        st;
	json_t     *c;

	localtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	for (long off = 0;;) {
		snprintf(url, sizeof(url),
		         "%.*s/api/mcp/clients?limit=100&offset=%ld",
		         (int)base, w->url, off);
		json_t *j  = cli_request(url, NULL, lines, &st);
		json_t *cs = json_object_get(j, "clients");
		json_array_foreach(cs, i, c)
		{
			json_t     *lf = json_object_get(c, "last_failure");
			const char *m  = json_string_value(
			         json_object_get(lf, "message"));
			const char *stage = json_string_value(
			        json_object_get(lf, "stage"));
			printf("%s  %-20s now %s%s%s%s%s  id %s\n", ts,
			       json_string_value(json_object_get(
			               json_object_get(c, "config"), "name")),
			       json_string_value(json_object_get(c, "state")),
			       stage != NULL ? "  [" : "",
			       stage != NULL ? stage : "",
			       stage != NULL ? "] " : "",
			       m != NULL ? printable(m, msg, sizeof(msg)) : "",
			       json_string_value(json_object_get(
			               json_object_get(c, "config"),
			               "client_id")));
		}
		off += (long)json_array_size(cs);
		bool more = st == 200 && json_array_size(cs) > 0 &&
		        off < json_integer_value(
		                      json_object_get(j, "total_count"));
		json_decref(j);
		if (!more) {
			break;
		}
	}
	fflush(stdout);
}

/* One event block ("event: ...\ndata: {...}"), printed. */
static void
sse_event(cli_watch *w, const char *block)
{
	const char *ev = strstr(block, "event: ");
	const char *da = strstr(block, "data: ");
	char        topic[32];
	json_t     *j, *lf;

	if (ev == NULL || da == NULL) {
		return; /* (a comment: the keep-alive) */
	}
	snprintf(topic, sizeof(topic), "%.*s", (int)strcspn(ev + 7, "\n"),
	         ev + 7);
	if (strcmp(topic, "hello") == 0) {
		printf("connected to %s\n", w->url);
		snapshot(w);
		return;
	}
	if ((j = json_loadb(da + 6, strcspn(da + 6, "\n"), 0, NULL)) == NULL) {
		return;
	}
	lf = json_object_get(j, "last_failure");
	print_event(&(mk_stream_event) {
	        .topic      = topic,
	        .client_id  = text(j, "client_id"),
	        .name       = text(j, "name"),
	        .state      = text(j, "state"),
	        .old_state  = text(j, "old_state"),
	        .stage      = text(lf, "stage"),
	        .message    = json_is_object(lf) ? text(lf, "message")
	                   : json_object_get(j, "message") != NULL
	                   ? text(j, "message")
	                   : text(j, "error"),
	        .hash       = text(j, "hash"),
	        .count      = json_integer_value(json_object_get(j, "count")),
	        .healthy    = json_is_true(json_object_get(j, "healthy")),
	        .request_id = text(j, "request_id"),
	        .method     = text(j, "method")});
	json_decref(j);
	if (w->left > 0 && --w->left == 0) {
		kill(getpid(), SIGTERM); /* (--count: done) */
	}
}

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	cli_watch *w   = arg;
	size_t     add = size * n;
	char      *end, *nb;

	if (w->len + add > EVENT_MAX ||
	    (nb = realloc(w->buf, w->len + add + 1)) == NULL) {
		return (0); /* an event without end: dial again */
	}
	w->buf = nb;
	memcpy(w->buf + w->len, p, add);
	w->len += add;
	w->buf[w->len] = '\0';
	while ((end = strstr(w->buf, "\n\n")) != NULL) {
		*end = '\0';
		sse_event(w, w->buf);
		w->len -= (size_t)(end + 2 - w->buf);
		memmove(w->buf, end + 2, w->len + 1);
	}
	return (add);
}

static int
on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	cli_watch *w = arg;

	return (atomic_load(&w->stop) ? 1 : 0);
}

static void *
sse_main(void *arg)
{
	cli_watch *w     = arg;
	int        delay = 1000;
	bool       said  = false;

	while (!atomic_load(&w->stop)) {
		CURL              *e  = curl_easy_init();
		struct curl_slist *h  = NULL;
		long               st = 0;

		if (w->auth != NULL) {
			h = curl_slist_append(h, w->auth);
		}
		w->len = 0;
		curl_easy_setopt(e, CURLOPT_URL, w->url);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
		curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(e, CURLOPT_XFERINFODATA, w);
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		CURLcode rc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
		curl_slist_free_all(h);
		curl_easy_cleanup(e);
		if (atomic_load(&w->stop)) {
			break;
		}
		if (st == 401 || st == 403) {
			fprintf(stderr,
			        "mcpkeep watch: %s: HTTP %ld (give --token or --key, or set MCPKEEP_ADMIN_TOKEN)\n",
			        w->url, st);
			atomic_store(&w->failed, true);
			kill(getpid(), SIGTERM); /* (wakes the sigwait) */
			break;
		}
		if (!said || st != 0) {
			fprintf(stderr,
			        "mcpkeep watch: %s: %s; dialling again\n",
			        w->url,
			        st != 0 && st != 200 ? "refused"
			                : rc != CURLE_OK
			                ? curl_easy_strerror(rc)
			                : "the stream ended");
			said = true;
		}
		/* the wait a stop cuts short */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += delay / 1000;
		pthread_mutex_lock(&w->mtx);
		while (!atomic_load(&w->stop) &&
		       pthread_cond_timedwait(&w->cv, &w->mtx, &ts) == 0) {
		}
		pthread_mutex_unlock(&w->mtx);
		delay = delay * 2 > 10000 ? 10000 : delay * 2;
	}
	return (NULL);
}

/* ---- start and stop ----------------------------------------------------- */

int
cli_watch_start(cli_watch **wp, const char *url, const char *auth, int count)
{
	cli_watch *w = calloc(1, sizeof(*w));
	int        rv;

	if (w == NULL) {
		return (-1);
	}
	w->left = count;
	w->http = strncmp(url, "http://", 7) == 0 ||
	        strncmp(url, "https://", 8) == 0;
	if (w->http) {
		size_t n = strlen(url);
		if (asprintf(&w->url, "%.*s/api/events",
		             (int)(n > 0 && url[n - 1] == '/' ? n - 1 : n),
		             url) < 0 ||
		    (auth != NULL && (w->auth = strdup(auth)) == NULL)) {
			free(w);
			return (-1);
		}
		pthread_mutex_init(&w->mtx, NULL);
		pthread_cond_init(&w->cv, NULL);
		rv = pthread_create(&w->thr, NULL, sse_main, w);
	} else if ((rv = nng_sub0_open(&w->sub)) != 0 ||
	           (rv = nng_socket_set(w->sub, NNG_OPT_SUB_SUBSCRIBE, "",
	                                0)) != 0 ||
	           (rv = nng_dial(w->sub, url, NULL, NNG_FLAG_NONBLOCK)) !=
	                   0) {
		fprintf(stderr, "mcpkeep: cannot watch %s: %s\n", url,
		        nng_strerror(rv));
		free(w);
		return (-1);
	} else {
		rv = pthread_create(&w->thr, NULL, nng_main, w);
	}
	if (rv != 0) {
		free(w->url);
		free(w->auth);
		free(w);
		return (-1);
	}
	*wp = w;
	return (0);
}

void
cli_watch_stop(cli_watch **wp)
{
	cli_watch *w = *wp;

	if (w == NULL) {
		return;
	}
	*wp = NULL;
	if (w->http) {
		pthread_mutex_lock(&w->mtx);
		atomic_store(&w->stop, true);
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mtx);
	} else {
		nng_close(w->sub); /* the thread's recv fails: it returns */
	}
	pthread_join(w->thr, NULL);
	if (w->auth != NULL) {
		memset(w->auth, 0, strlen(w->auth));
	}
	free(w->auth);
	free(w->url);
	free(w->buf);
	free(w);
}

static const char watch_usage[] =
        "usage: mcpkeep watch [URL] [--token TOKEN | --key KEY] [--count N]\n"
        "  prints a daemon's state transitions as they happen.\n"
        "  URL http://HOST:PORT (default http://127.0.0.1:8080): its /api/events,\n"
        "  as the admin (TOKEN, default MCPKEEP_ADMIN_TOKEN) or a virtual key\n"
        "  (KEY, default MCPKEEP_KEY: its clients only); tcp://... or\n"
        "  ipc://...: its server.stream.\n"
        "  --count N: stop after N events (over HTTP)\n"
        "exit codes: 0 stopped by a signal, 1 refused, 2 usage\n";

/* mcpkeep watch [URL] [--token T | --key K] [--count N]: follows a daemon's
 * events until SIGINT/SIGTERM; 1 when the daemon refuses the credential. */
int
cmd_watch(int argc, char **argv)
{
	const char *url   = "http://127.0.0.1:8080";
	const char *token = NULL, *key = NULL;
	char        auth[600];
	sigset_t    set;
	cli_watch  *w = NULL;
	int         sig, code = 0, count = 0;
	cli_opt     opt[] = {
	            {CLI_TEXT, "--token", &token},
	            {CLI_TEXT, "--key", &key},
	            {CLI_NUM, "--count", &count},
	            {CLI_ARG, "URL", &url},
	            CLI_OPTS_END,
        };

	if ((code = cli_args("watch", argc, argv, opt, watch_usage)) != 0) {
		return (code == 1 ? 0 : code);
	}
	const char *line = cli_credential(token, key, auth, sizeof(auth));
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	code = cli_watch_start(&w, url, line, count) != 0 ? 1 : 0;
	OPENSSL_cleanse(auth, sizeof(auth));
	if (code == 0) {
		printf("watching %s; Ctrl-C to stop\n", url);
		fflush(stdout);
		sigwait(&set, &sig);
		code = atomic_load(&w->failed) ? 1 : 0;
		cli_watch_stop(&w);
	}
	curl_global_cleanup();
	return (code);
}
