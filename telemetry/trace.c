/*
 * trace.c - spans and their OTLP/HTTP exporter (see trace.h).
 */
#include "telemetry/trace.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcpkeep.h"

#define CLOSE_POST_MS 1000 /* tr_close's one try */

struct tr_tracer {
	char            *url;             /* <endpoint>/v1/traces */
	char            *node_id;         /* service.instance.id */
	const kn_logger *lg;              /* the exporter thread's */
	pthread_t        thread;          /* the exporter */
	pthread_mutex_t  mtx;             /* guards the rest */
	pthread_cond_t   cv;              /* a full batch, or stopping */
	json_t          *q[TR_QUEUE_MAX]; /* ended spans, a ring */
	size_t           head, n;
	bool             stopping;
	tr_stats         st;
	_Atomic int64_t  give_up; /* tr_close began: a post in flight gives
	                           * up at this time (monotonic ns), 0 none */
};

struct tr_span {
	tr_tracer *t;
	json_t    *o;         /* the OTLP span being filled */
	char       trace[33]; /* its trace id, hex */
	char       id[17];    /* its own, hex */
	bool       sampled;   /* exported when it ends */
};

static int64_t
unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

/* A random id of n bytes as hex (never all zeros, which W3C forbids). */
static void
random_hex(char *out, size_t n)
{
	unsigned char b[16] = {0};
	unsigned      any   = 0;

	if (RAND_bytes(b, (int)n) != 1) {
		for (size_t i = 0; i < n; i++) { /* (never seen: no entropy) */
			b[i] = (unsigned char)rand();
		}
	}
	for (size_t i = 0; i < n; i++) {
		any |= b[i];
	}
	if (any == 0) {
		b[n - 1] = 1;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	}
}

static bool
lower_hex(const char *s, size_t n)
{
	bool nonzero = false;

	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f'))) {
			return (false);
		}
		nonzero |= s[i] != '0';
	}
	return (nonzero);
}

/* A version 00 traceparent: its trace id, parent id and sampled flag. */
static bool
parse_parent(const char *tp, char trace[33], char parent[17], bool *sampled)
{
	if (tp == NULL || strlen(tp) != TR_PARENT_LEN - 1 ||
	    strncmp(tp, "00-", 3) != 0 || tp[35] != '-' || tp[52] != '-' ||
	    !lower_hex(tp + 3, 32) || !lower_hex(tp + 36, 16) ||
	    !(lower_hex(tp + 53, 2) || strncmp(tp + 53, "00", 2) == 0)) {
		return (false);
	}
	memcpy(trace, tp + 3, 32);
	trace[32] = '\0';
	memcpy(parent, tp + 36, 16);
	parent[16] = '\0';
	*sampled   = (strtol(tp + 53, NULL, 16) & 1) != 0;
	return (true);
}

tr_span *
tr_start(tr_tracer *t, const char *name, int kind, const char *traceparent,
         const tr_span *parent)
{
	char     start[24], pid[17] = "";
	tr_span *s;

	if (t == NULL || (s = calloc(1, sizeof(*s))) == NULL) {
		return (NULL);
	}
	s->t       = t;
	s->sampled = true;
	if (parent != NULL) {
		memcpy(s->trace, parent->trace, sizeof(s->trace));
		memcpy(pid, parent->id, sizeof(pid));
		s->sampled = parent->sampled;
	} else if (!parse_parent(traceparent, s->trace, pid, &s->sampled)) {
		random_hex(s->trace, 16);
	}
	random_hex(s->id, 8);
	snprintf(start, sizeof(start), "%lld", (long long)unix_ns());
	s->o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:[]}", "traceId",
	                 s->trace, "spanId", s->id, "name", name, "kind", kind,
	                 "startTimeUnixNano", start, "attributes");
	if (s->o == NULL) {
		free(s);
		return (NULL);
	}
	if (pid[0] != '\0') {
		(void)json_object_set_new(s->o, "parentSpanId",
		                          json_string(pid));
	}
	return (s);
}

static void
attr_set(tr_span *s, const char *key, json_t *value)
{
	json_t *a = json_pack("{s:s, s:o}", "key", key, "value", value);

	if (a != NULL) {
		(void)json_array_append_new(
		        json_object_get(s->o, "attributes"), a);
	}
}

void
tr_attr(tr_span *s, const char *key, const char *value)
{
	json_t *v;

	if (s != NULL && value != NULL &&
	    (v = json_pack("{s:s}", "stringValue", value)) != NULL) {
		attr_set(s, key, v);
	}
}

void
tr_attr_num(tr_span *s, const char *key, long long value)
{
	char    buf[24];
	json_t *v;

	snprintf(buf, sizeof(buf), "%lld", value);
	if (s != NULL && (v = json_pack("{s:s}", "intValue", buf)) != NULL) {
		attr_set(s, key, v);
	}
}

const char *
tr_traceparent(const tr_span *s, char *buf)
{
	if (s == NULL) {
		return (NULL);
	}
	snprintf(buf, TR_PARENT_LEN, "00-%s-%s-%s", s->trace, s->id,
	         s->sampled ? "01" : "00");
	return (buf);
}

const char *
tr_trace_id(const tr_span *s)
{
	return (s != NULL ? s->trace : "");
}

void
tr_end(tr_span **sp, const char *error)
{
	tr_span   *s = *sp;
	tr_tracer *t;
	char       end[24];

	if (s == NULL) {
		return;
	}
	*sp = NULL;
	t   = s->t;
	snprintf(end, sizeof(end), "%lld", (long long)unix_ns());
	(void)json_object_set_new(s->o, "endTimeUnixNano", json_string(end));
	(void)json_object_set_new(
	        s->o, "status",
	        error != NULL
	                ? json_pack("{s:i, s:s}", "code", 2, "message", error)
	                : json_pack("{s:i}", "code", 1));
	if (!s->sampled) {
		json_decref(s->o);
		free(s);
		return;
	}
	pthread_mutex_lock(&t->mtx);
	if (t->n == TR_QUEUE_MAX || t->stopping) {
		t->st.dropped++;
		json_decref(s->o);
	} else {
		t->q[(t->head + t->n++) % TR_QUEUE_MAX] = s->o;
		if (t->n == TR_BATCH_MAX) {
			pthread_cond_signal(&t->cv);
		}
	}
	pthread_mutex_unlock(&t->mtx);
	free(s);
}

/* ---- the exporter */

/* The collector's answer is read and forgotten (at most 64 KiB). */
static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	size_t *seen = arg;

	(void)p;
	*seen += size * n;
	return (*seen <= 65536 ? size * n : 0);
}

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

/* A post in flight when the tracer closes has CLOSE_POST_MS more (the
 * last post has its own). */
static int
on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
            curl_off_t un)
{
	tr_tracer *t  = arg;
	int64_t    at = atomic_load(&t->give_up);

	(void)dt, (void)dn, (void)ut, (void)un;
	return (at != 0 && mono_ns() >= at ? 1 : 0);
}

/* An ExportTraceServiceRequest of the spans (stolen). */
static char *
request_of(tr_tracer *t, json_t **spans, size_t n)
{
	json_t *list = json_array();
	json_t *req;
	char   *body;

	for (size_t i = 0; i < n; i++) {
		(void)json_array_append_new(list, spans[i]);
	}
	req = json_pack(
	        "{s:[{s:{s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}, {s:s, s:{s:s}}]}, "
	        "s:[{s:{s:s, s:s}, s:o}]}]}",
	        "resourceSpans", "resource", "attributes", "key",
	        "service.name", "value", "stringValue", "mcpkeep", "key",
	        "service.instance.id", "value", "stringValue", t->node_id,
	        "key", "service.version", "value", "stringValue",
	        MCPKEEP_VERSION, "scopeSpans", "scope", "name", "mcpkeep",
	        "version", MCPKEEP_VERSION, "spans", list);
	body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	return (body);
}

/* Posts n spans (taken); false when the collector did not take them. */
static bool
post(tr_tracer *t, CURL *h, json_t **spans, size_t n, bool last, char *why,
     size_t whylen)
{
	struct curl_slist *hdrs =
	        curl_slist_append(NULL, "Content-Type: application/json");
	char    *body = request_of(t, spans, n);
	size_t   seen = 0;
	long     code = 0;
	CURLcode rc;

	if (body == NULL || hdrs == NULL) {
		snprintf(why, whylen, "out of memory");
		free(body);
		curl_slist_free_all(hdrs);
		return (false);
	}
	curl_easy_setopt(h, CURLOPT_URL, t->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	long timeout_ms = last ? CLOSE_POST_MS : TR_POST_TIMEOUT_MS;
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &seen);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, last ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, t);
	rc = curl_easy_perform(h);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	}
	curl_slist_free_all(hdrs);
	free(body);
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s", curl_easy_strerror(rc));
	} else if (code < 200 || code > 299) {
		snprintf(why, whylen, "it answered HTTP %ld", code);
	}
	return (rc == CURLE_OK && code >= 200 && code <= 299);
}

/* Takes up to TR_BATCH_MAX spans off the queue; mtx held. */
static size_t
take(tr_tracer *t, json_t **batch)
{
	size_t n = t->n < TR_BATCH_MAX ? t->n : TR_BATCH_MAX;

	for (size_t i = 0; i < n; i++) {
		batch[i] = t->q[(t->head + i) % TR_QUEUE_MAX];
	}
	t->head = (t->head + n) % TR_QUEUE_MAX;
	t->n -= n;
	return (n);
}

static void *
exporter(void *arg)
{
	tr_tracer *t = arg;
	json_t    *batch[TR_BATCH_MAX];
	CURL      *h    = curl_easy_init();
	bool       down = false; /* the last post failed (logged once) */

	(void)kn_log_bind(t->lg);
	pthread_mutex_lock(&t->mtx);
	for (;;) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += TR_FLUSH_MS / 1000;
		while (!t->stopping && t->n < TR_BATCH_MAX &&
		       pthread_cond_timedwait(&t->cv, &t->mtx, &until) !=
		               ETIMEDOUT) {
		}
		bool   last = t->stopping;
		size_t n    = take(t, batch);
		if (last) { /* one try; the rest is dropped */
			t->st.dropped += t->n;
			while (t->n > 0) {
				json_decref(t->q[t->head]);
				t->head = (t->head + 1) % TR_QUEUE_MAX;
				t->n--;
			}
		}
		pthread_mutex_unlock(&t->mtx);
		char why[CURL_ERROR_SIZE + 32] = "";
		bool ok                        = n == 0 ||
		        (h != NULL &&
		         post(t, h, batch, n, last, why, sizeof(why)));
		if (h == NULL) {
			snprintf(why, sizeof(why), "out of memory");
			for (size_t i = 0; i < n; i++) {
				json_decref(batch[i]);
			}
		}
		if (!ok && !down) {
			KN_WARN("trace",
			        "the collector did not take %zu spans (%s): "
			        "spans are dropped until it does",
			        n, why);
		} else if (ok && n > 0 && down) {
			KN_INFO("trace", "the collector takes spans again");
		}
		down = n > 0 ? !ok : down;
		pthread_mutex_lock(&t->mtx);
		if (ok) {
			t->st.exported += n;
		} else {
			t->st.dropped += n;
			t->st.failures++;
		}
		if (last) {
			break;
		}
	}
	pthread_mutex_unlock(&t->mtx);
	curl_easy_cleanup(h);
	(void)kn_log_bind(NULL);
	return (NULL);
}

int
tr_open(tr_tracer **tp, const char *endpoint, const char *node_id,
        const kn_logger *lg, char *err, size_t errlen)
{
	tr_tracer *t;
	size_t     len = endpoint != NULL ? strlen(endpoint) : 0;

	*tp = NULL;
	if (len == 0 || len > 2048 ||
	    (strncmp(endpoint, "http://", 7) != 0 &&
	     strncmp(endpoint, "https://", 8) != 0) ||
	    strpbrk(endpoint, " \t\r\n?#") != NULL) {
		snprintf(
		        err, errlen,
		        "telemetry.otlp_endpoint must be an http:// or https:// "
		        "URL without a query (the collector's base URL)");
		return (MK_EINVAL);
	}
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		return (MK_ENOMEM);
	}
	while (len > 0 && endpoint[len - 1] == '/') {
		len--;
	}
	if ((t->url = malloc(len + sizeof("/v1/traces"))) == NULL ||
	    (t->node_id = strdup(node_id != NULL ? node_id : "local")) ==
	            NULL) {
		free(t->url);
		free(t);
		return (MK_ENOMEM);
	}
	memcpy(t->url, endpoint, len);
	memcpy(t->url + len, "/v1/traces", sizeof("/v1/traces"));
	t->lg = lg;
	pthread_mutex_init(&t->mtx, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (pthread_create(&t->thread, NULL, exporter, t) != 0) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mtx);
		free(t->node_id);
		free(t->url);
		free(t);
		snprintf(err, errlen,
		         "cannot start the trace exporter thread");
		return (MK_ENOMEM);
	}
	*tp = t;
	return (MK_OK);
}

void
tr_close(tr_tracer **tp)
{
	tr_tracer *t = *tp;

	if (t == NULL) {
		return;
	}
	*tp = NULL;
	atomic_store(&t->give_up,
	             mono_ns() + (int64_t)CLOSE_POST_MS * 1000000);
	pthread_mutex_lock(&t->mtx);
	t->stopping = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mtx);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mtx);
	free(t->node_id);
	free(t->url);
	free(t);
}

void
tr_stats_get(tr_tracer *t, tr_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (t != NULL) {
		pthread_mutex_lock(&t->mtx);
		*out = t->st;
		pthread_mutex_unlock(&t->mtx);
	}
}
