/*
 * limits.c - the data plane's per-key limits and accounting: each virtual
 * key's calls per second and calls in flight, and every key's calls by
 * client and tool (outcome, latency) for /metrics.
 *
 * DESIGN: one tenant must not starve the others, nor flood an upstream.
 * A key's rate is a token bucket (burst tokens, refilled at
 * calls_per_second); its calls in flight a count.  Both are kept by the
 * key's name, so that a reload that edits a key keeps what its calls
 * hold.  The accounting is a table of (key, client, tool) series,
 * bounded: past USAGE_SERIES_MAX, new ones count as tool "(other)" of
 * their key.  One mutex guards it all; each call takes it twice, for a
 * lookup in a hash (a jansson object) and a few additions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

#define KEYS_MAX         4096  /* keys kept (names ever configured) */
#define USAGE_SERIES_MAX 10000 /* (key, client, tool) series */
#define USAGE_BUCKETS    13    /* <= 5 ... 30000 ms, then longer */

static const int bounds_ms[USAGE_BUCKETS - 1] = {
        5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};

typedef struct kstate {
	char    *name;
	double   tokens;   /* in the bucket */
	int64_t  at;       /* its last refill, monotonic ns */
	int      inflight; /* admitted, not yet done */
	uint64_t refused[3];
} kstate;

typedef struct series {
	char    *key, *client, *tool;
	uint64_t outcome[USAGE_OUTCOMES];
	uint64_t bucket[USAGE_BUCKETS];
	double   sum_ms;
} series;

static struct {
	pthread_mutex_t mtx;
	json_t         *kidx; /* name -> index in ks */
	kstate          ks[KEYS_MAX];
	int             nks;
	json_t         *sidx; /* "key\x1f client\x1f tool" -> index in ss */
	series         *ss;
	int             nss;
} L = {.mtx = PTHREAD_MUTEX_INITIALIZER};

static const char *const outcome_names[USAGE_OUTCOMES] = {
        "ok",      "tool_error", "upstream_error", "auth_required",
        "refused", "cancelled"};

/* The state of key name, made on first use; NULL past KEYS_MAX (then
 * unlimited: the bound is the config's).  L.mtx. */
static kstate *
kstate_of(const char *name)
{
	json_t *i;

	if (L.kidx == NULL && (L.kidx = json_object()) == NULL) {
		return (NULL);
	}
	if ((i = json_object_get(L.kidx, name)) != NULL) {
		return (&L.ks[json_integer_value(i)]);
	}
	if (L.nks == KEYS_MAX || (L.ks[L.nks].name = strdup(name)) == NULL) {
		return (NULL);
	}
	L.ks[L.nks].tokens = -1; /* (full at its first call) */
	json_object_set_new(L.kidx, name, json_integer(L.nks));
	return (&L.ks[L.nks++]);
}

int
limits_take(const vkey *k, int64_t *retry_ms)
{
	int64_t now = answer_mono_ns();
	int     rv  = LIMIT_OK;
	kstate *s;

	*retry_ms = 0;
	if (k == NULL || (k->rate <= 0 && k->inflight <= 0)) {
		return (LIMIT_OK);
	}
	pthread_mutex_lock(&L.mtx);
	if ((s = kstate_of(k->name)) == NULL) {
		pthread_mutex_unlock(&L.mtx);
		return (LIMIT_OK);
	}
	if (k->rate > 0) {
		double t  = s->tokens + (double)(now - s->at) / 1e9 * k->rate;
		s->tokens = s->tokens < 0 || t > k->burst ? k->burst : t;
		s->at     = now;
	}
	if (k->inflight > 0 && s->inflight >= k->inflight) {
		rv = LIMIT_INFLIGHT;
	} else if (k->rate > 0 && s->tokens < 1) {
		rv        = LIMIT_RATE;
		*retry_ms = (int64_t)((1 - s->tokens) / k->rate * 1000) + 1;
	} else {
		s->tokens -= k->rate > 0 ? 1 : 0;
		s->inflight++;
	}
	s->refused[rv]++;
	pthread_mutex_unlock(&L.mtx);
	return (rv);
}

void
limits_done(const char *name)
{
	json_t *i;

	if (name == NULL) {
		return;
	}
	pthread_mutex_lock(&L.mtx);
	/* (only a limited key has a state: one made by limits_take) */
	if ((i = json_object_get(L.kidx, name)) != NULL &&
	    L.ks[json_integer_value(i)].inflight > 0) {
		L.ks[json_integer_value(i)].inflight--;
	}
	pthread_mutex_unlock(&L.mtx);
}

const char *
limits_why(const vkey *k, int limit, int64_t retry_ms, char *buf, size_t len)
{
	if (limit == LIMIT_RATE) {
		snprintf(
		        buf, len,
		        "virtual key \"%s\" is over its limit of %g calls per second (calls_per_second); retry in %lld ms",
		        k->name, k->rate, (long long)retry_ms);
	} else {
		snprintf(
		        buf, len,
		        "virtual key \"%s\" has %d calls in flight, its max_calls_in_flight; retry when one ends",
		        k->name, k->inflight);
	}
	return (buf);
}

/* ---- accounting ----------------------------------------------------------
 */

/* name as a label value: what is not [A-Za-z0-9_.-] becomes '_' (a
 * tool's name comes from the caller), at most 64 characters. */
static void
label(char *out, size_t len, const char *name)
{
	size_t n = 0;

	for (; name[n] != '\0' && n + 1 < len && n < 64; n++) {
		char c = name[n];
		out[n] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		                (c >= '0' && c <= '9') || c == '_' ||
		                c == '.' || c == '-'
		        ? c
		        : '_';
	}
	out[n] = '\0';
}

/* The series of (key, client, tool), made on first use.  L.mtx. */
static series *
series_of(const char *key, const char *client, const char *tool)
{
	char    id[400];
	json_t *i;

	snprintf(id, sizeof(id), "%s\x1f%s\x1f%s", key, client, tool);
	if (L.sidx == NULL && (L.sidx = json_object()) == NULL) {
		return (NULL);
	}
	if ((i = json_object_get(L.sidx, id)) != NULL) {
		return (&L.ss[json_integer_value(i)]);
	}
	if (L.nss == USAGE_SERIES_MAX) {
		return (strcmp(tool, "(other)") != 0
		                ? series_of(key, "(other)", "(other)")
		                : NULL);
	}
	if (L.ss == NULL &&
	    (L.ss = calloc(USAGE_SERIES_MAX + 1, sizeof(*L.ss))) == NULL) {
		return (NULL);
	}
	series *s = &L.ss[L.nss];
	if ((s->key = strdup(key)) == NULL ||
	    (s->client = strdup(client)) == NULL ||
	    (s->tool = strdup(tool)) == NULL) {
		free(s->key);
		free(s->client);
		*s = (series) {0};
		return (NULL);
	}
	json_object_set_new(L.sidx, id, json_integer(L.nss));
	return (&L.ss[L.nss++]);
}

void
limits_usage_record(const char *key, const char *client, const char *tool,
                    int outcome, double ms)
{
	char    cl[72], tl[72];
	series *s;
	int     b = 0;

	label(cl, sizeof(cl), client);
	label(tl, sizeof(tl), tool);
	client = cl;
	tool   = tl;
	while (b < USAGE_BUCKETS - 1 && ms > bounds_ms[b]) {
		b++;
	}
	pthread_mutex_lock(&L.mtx);
	if ((s = series_of(key, client, tool)) != NULL) {
		s->outcome[outcome]++;
		s->bucket[b]++;
		s->sum_ms += ms;
	}
	pthread_mutex_unlock(&L.mtx);
}

const char *
limits_outcome_name(int outcome)
{
	return (outcome_names[outcome]);
}

void
limits_metrics(FILE *f)
{
	pthread_mutex_lock(&L.mtx);
	fputs("# HELP mcpkeep_key_calls_refused_total data-plane calls a "
	      "virtual key's limit refused\n"
	      "# TYPE mcpkeep_key_calls_refused_total counter\n",
	      f);
	for (int i = 0; i < L.nks; i++) {
		fprintf(f,
		        "mcpkeep_key_calls_refused_total{key=\"%s\",limit=\"calls_per_second\"} %llu\n"
		        "mcpkeep_key_calls_refused_total{key=\"%s\",limit=\"max_calls_in_flight\"} %llu\n",
		        L.ks[i].name,
		        (unsigned long long)L.ks[i].refused[LIMIT_RATE],
		        L.ks[i].name,
		        (unsigned long long)L.ks[i].refused[LIMIT_INFLIGHT]);
	}
	fputs("# HELP mcpkeep_key_calls_in_flight data-plane calls of a "
	      "limited virtual key in flight\n"
	      "# TYPE mcpkeep_key_calls_in_flight gauge\n",
	      f);
	for (int i = 0; i < L.nks; i++) {
		fprintf(f, "mcpkeep_key_calls_in_flight{key=\"%s\"} %d\n",
		        L.ks[i].name, L.ks[i].inflight);
	}
	fputs("# HELP mcpkeep_key_calls_total data-plane calls by caller "
	      "(a virtual key's name), client, tool and outcome\n"
	      "# TYPE mcpkeep_key_calls_total counter\n",
	      f);
	for (int i = 0; i < L.nss; i++) {
		series *s = &L.ss[i];
		for (int o = 0; o < USAGE_OUTCOMES; o++) {
			fprintf(f,
			        "mcpkeep_key_calls_total{key=\"%s\",client=\"%s\",tool=\"%s\",outcome=\"%s\"} %llu\n",
			        s->key, s->client, s->tool, outcome_names[o],
			        (unsigned long long)s->outcome[o]);
		}
	}
	fputs("# HELP mcpkeep_key_call_duration_ms data-plane call latency "
	      "by caller, client and tool\n"
	      "# TYPE mcpkeep_key_call_duration_ms histogram\n",
	      f);
	for (int i = 0; i < L.nss; i++) {
		series  *s   = &L.ss[i];
		uint64_t cum = 0, n = 0;
		for (int b = 0; b < USAGE_BUCKETS; b++) {
			n += s->bucket[b];
		}
		for (int b = 0; b < USAGE_BUCKETS - 1; b++) {
			cum += s->bucket[b];
			fprintf(f,
			        "mcpkeep_key_call_duration_ms_bucket{key=\"%s\",client=\"%s\",tool=\"%s\",le=\"%d\"} %llu\n",
			        s->key, s->client, s->tool, bounds_ms[b],
			        (unsigned long long)cum);
		}
		fprintf(f,
		        "mcpkeep_key_call_duration_ms_bucket{key=\"%s\",client=\"%s\",tool=\"%s\",le=\"+Inf\"} %llu\n"
		        "mcpkeep_key_call_duration_ms_sum{key=\"%s\",client=\"%s\",tool=\"%s\"} %.3f\n"
		        "mcpkeep_key_call_duration_ms_count{key=\"%s\",client=\"%s\",tool=\"%s\"} %llu\n",
		        s->key, s->client, s->tool, (unsigned long long)n,
		        s->key, s->client, s->tool, s->sum_ms, s->key,
		        s->client, s->tool, (unsigned long long)n);
	}
	pthread_mutex_unlock(&L.mtx);
}
