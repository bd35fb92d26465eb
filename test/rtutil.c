/*
 * rtutil.c - shared helpers of the runtime tests (see rtutil.h).
 */
#include "rtutil.h"

#include <curl/curl.h>
#include <nng/protocol/pubsub0/sub.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/kernel/kernel.h"
#include "actors/persister_msg.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "runtime/runtime_impl.h"
#include "testutil.h"

/* ---- the state stream, collected -----------------------------------------
 */

static void *
sub_main(void *arg)
{
	sub     *sb = arg;
	nng_msg *m;

	while (nng_recvmsg(sb->s, &m, 0) == 0) {
		event *e;

		if (mk_stream_event_parse(nng_msg_body(m), nng_msg_len(m),
		                          &e) == 0) {
			pthread_mutex_lock(&sb->mtx);
			if (sb->n < MAXEV) {
				sb->own[sb->n]  = e;
				sb->ev[sb->n++] = *e;
			} else {
				mk_stream_event_free(e);
			}
			pthread_cond_broadcast(&sb->cv);
			pthread_mutex_unlock(&sb->mtx);
		}
		nng_msg_free(m);
	}
	return (NULL);
}

void
sub_open(sub *sb, const char *url)
{
	memset(sb, 0, sizeof(*sb));
	CHECK((sb->ev = calloc(MAXEV, sizeof(*sb->ev))) != NULL);
	CHECK((sb->own = calloc(MAXEV, sizeof(*sb->own))) != NULL);
	pthread_mutex_init(&sb->mtx, NULL);
	pthread_cond_init(&sb->cv, NULL);
	CHECK_EQ(nng_sub0_open(&sb->s), 0);
	CHECK_EQ(nng_socket_set(sb->s, NNG_OPT_SUB_SUBSCRIBE, "", 0), 0);
	CHECK_EQ(nng_dial(sb->s, url, NULL, 0), 0);
	CHECK_EQ(pthread_create(&sb->thr, NULL, sub_main, sb), 0);
}

void
sub_close(sub *sb)
{
	nng_close(sb->s);
	pthread_join(sb->thr, NULL);
	for (int i = 0; i < sb->n; i++) {
		mk_stream_event_free(sb->own[i]);
	}
	free(sb->own);
	free(sb->ev);
}

int
sub_at(sub *sb)
{
	int n;

	pthread_mutex_lock(&sb->mtx);
	n = sb->n;
	pthread_mutex_unlock(&sb->mtx);
	return (n);
}

event
wait_event(sub *sb, int *from, event_match match, const void *arg,
           const char *what)
{
	struct timespec ts;
	event           found;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&sb->mtx);
	for (;;) {
		for (; *from < sb->n; (*from)++) {
			if (match(&sb->ev[*from], arg)) {
				found = sb->ev[(*from)++];
				pthread_mutex_unlock(&sb->mtx);
				return (found);
			}
		}
		if (pthread_cond_timedwait(&sb->cv, &sb->mtx, &ts) != 0) {
			fprintf(stderr, "timed out waiting for %s\n", what);
			for (int i = 0; i < sb->n; i++) {
				fprintf(stderr,
				        "  seen: %s %s %s -> %s [%s] %s\n",
				        sb->ev[i].topic, sb->ev[i].name,
				        sb->ev[i].old_state, sb->ev[i].state,
				        sb->ev[i].stage, sb->ev[i].message);
			}
			exit(1);
		}
	}
}

typedef struct state_want {
	const char *name, *state, *stage;
} state_want;

static int
is_state(const event *e, const void *arg)
{
	const state_want *w = arg;

	return (strcmp(e->topic, "state") == 0 &&
	        strcmp(e->name, w->name) == 0 &&
	        (w->state == NULL || strcmp(e->state, w->state) == 0) &&
	        (w->stage == NULL || strcmp(e->stage, w->stage) == 0));
}

event
wait_state(sub *sb, int *from, const char *name, const char *state,
           const char *stage)
{
	state_want w = {name, state, stage};
	char       what[256];

	snprintf(what, sizeof(what), "%s -> %s%s%s", name,
	         state != NULL ? state : "any state", stage ? " stage " : "",
	         stage ? stage : "");
	return (wait_event(sb, from, is_state, &w, what));
}

static int
is_store(const event *e, const void *arg)
{
	return (strcmp(e->topic, "store") == 0 &&
	        e->healthy == *(const int *)arg);
}

event
wait_store(sub *sb, int *from, int healthy)
{
	return (wait_event(sb, from, is_store, &healthy,
	                   healthy ? "store healthy" : "store failing"));
}

int
count_topic(sub *sb, const char *topic)
{
	int n = 0;

	pthread_mutex_lock(&sb->mtx);
	for (int i = 0; i < sb->n; i++) {
		n += strcmp(sb->ev[i].topic, topic) == 0;
	}
	pthread_mutex_unlock(&sb->mtx);
	return (n);
}

int
count_states(sub *sb, const char *name, const char *state)
{
	int n = 0;

	pthread_mutex_lock(&sb->mtx);
	for (int i = 0; i < sb->n; i++) {
		n += strcmp(sb->ev[i].topic, "state") == 0 &&
		        strcmp(sb->ev[i].name, name) == 0 &&
		        strcmp(sb->ev[i].state, state) == 0;
	}
	pthread_mutex_unlock(&sb->mtx);
	return (n);
}

/* ---- helpers ------------------------------------------------------------ */

static int stream_seq;

void
rt_options(mk_options *o, const char *path)
{
	static char url[64];

	snprintf(url, sizeof(url), "inproc://rt-test-%d", ++stream_seq);
	mk_options_init(o, sizeof(*o));
	o->log_level         = MK_LOG_WARN;
	o->stream_url        = url;
	o->unstable_check_ms = 1000;
	o->store_path        = path;
}

mk_runtime *
rt_open_options(sub *sb, const mk_options *o)
{
	mk_runtime *rt;

	CHECK_EQ(mk_runtime_open(&rt, o), 0);
	sub_open(sb, mk_stream_url(rt));
	return (rt);
}

mk_runtime *
rt_open_store(sub *sb, const char *path)
{
	mk_options o;

	rt_options(&o, path);
	return (rt_open_options(sb, &o));
}

mk_runtime *
rt_open(sub *sb)
{
	return (rt_open_store(sb, NULL));
}

void
rt_close(mk_runtime **rt, sub *sb)
{
	mk_runtime_close(rt);
	sub_close(sb);
}

json_t *
view_find(mk_runtime *rt, const char *name)
{
	char   *out = NULL;
	char    filter[128];
	json_t *all, *one;

	snprintf(filter, sizeof(filter),
	         "{\"search\": \"%s\", \"limit\": 100}", name);
	CHECK_EQ(mk_clients_json(rt, filter, &out), 0);
	all = json_loads(out, 0, NULL);
	mk_free(out);
	CHECK(all != NULL);
	one = NULL;
	size_t  i;
	json_t *c;
	json_array_foreach(json_object_get(all, "clients"), i, c)
	{
		const char *n = json_string_value(
		        json_object_get(json_object_get(c, "config"), "name"));
		if (n != NULL && strcmp(n, name) == 0) {
			one = json_incref(c);
		}
	}
	json_decref(all);
	return (one);
}

json_t *
view_of(mk_runtime *rt, const char *name)
{
	json_t *one = view_find(rt, name);

	CHECK(one != NULL);
	return (one);
}

const char *
vstr(json_t *v, const char *key)
{
	const char *s = json_string_value(json_object_get(v, key));
	return (s != NULL ? s : "");
}

int
add(mk_runtime *rt, char **err, const char *fmt, ...)
{
	char    cfg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cfg, sizeof(cfg), fmt, ap);
	va_end(ap);
	return (mk_client_add(rt, cfg, NULL, err));
}

char *
call_text(mk_runtime *rt, const char *client, const char *tool,
          const char *args, int *rc)
{
	return (ask_text(rt, MK_CALL_TOOL, client, tool, args, rc));
}

char *
ask_text(mk_runtime *rt, mk_call_kind kind, const char *client,
         const char *what, const char *args, int *rc)
{
	mk_call     c   = {.size      = sizeof(mk_call),
	                   .client    = client,
	                   .tool      = what,
	                   .arguments = args};
	mk_call_how how = MK_CALL_HOW_INIT;
	mk_result  *res = NULL;
	char       *out;

	how.kind = kind;
	*rc      = mk_call_run(rt, &c, &how, &res);
	out      = strdup(res && res->result          ? res->result
	                          : res && res->error ? res->error
	                                              : "");
	mk_result_free(&res);
	return (out);
}

json_t *
admin_json(int port, const char *path, const char *body)
{
	CURL   *e = curl_easy_init();
	char    url[256], *buf = NULL;
	size_t  len = 0;
	FILE   *mem;
	json_t *j;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	CHECK((mem = open_memstream(&buf, &len)) != NULL);
	curl_easy_setopt(e, CURLOPT_URL, url);
	if (body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	fclose(mem);
	curl_easy_cleanup(e);
	j = json_loads(buf, 0, NULL);
	free(buf);
	return (j);
}

long
admin(int port, const char *path, const char *body, const char *field)
{
	json_t *j = admin_json(port, path, body), *o = j;
	long    v = -1;

	for (const char *f = field; f != NULL && o != NULL;) {
		const char *dot = strchr(f, '.');
		o = dot != NULL ? json_object_getn(o, f, (size_t)(dot - f))
		                : json_object_get(o, f);
		if (dot == NULL) {
			v = (long)json_integer_value(o);
		}
		f = dot != NULL ? dot + 1 : NULL;
	}
	json_decref(j);
	return (v);
}

/* Waits (10 s at most) until a counter of a test server (inject.mjs,
 * oauth.mjs; field as admin's) reaches min.
 * The server is another process with no event to wait on: its counter
 * is polled, with a deadline. */
void
wait_counter(int port, const char *field, long min)
{
	for (int i = 0; admin(port, "/admin/counters", NULL, field) < min;
	     i++) {
		CHECK(i < 200);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the server's counter */
	}
}

int64_t
ps_stat(mk_runtime *rt, const char *key)
{
	kn_actor *ps;
	kn_answer a;
	mp_r      r;
	int64_t   v;

	CHECK_EQ(kn_lookup(rt->kernel, "persister", &ps), 0);
	CHECK_EQ(kn_ask(ps, MSG_PS_STATS, CODEC_EMPTY, CODEC_EMPTY_LEN,
	                WAIT_MS, &a),
	         0);
	kn_actor_release(&ps);
	mp_r_open(&r, a.data, a.len);
	v = mp_int(mp_get(&r, key), -1);
	mp_r_close(&r);
	free(a.data);
	return (v);
}

long
client_metric(mk_runtime *rt, const char *client, const char *key)
{
	char   *m = NULL;
	json_t *j;
	long    v;

	CHECK_EQ(mk_client_metrics_json(rt, client, &m), 0);
	CHECK((j = json_loads(m, 0, NULL)) != NULL);
	v = (long)json_integer_value(json_object_get(j, key));
	json_decref(j);
	mk_free(m);
	return (v);
}

void
check_client(mk_runtime *rt, const char *name)
{
	char      actor[96];
	kn_actor *cl;
	kn_answer a;

	snprintf(actor, sizeof(actor), CLIENT_PREFIX "%s", name);
	CHECK_EQ(kn_lookup(rt->kernel, actor, &cl), 0);
	CHECK_EQ(kn_ask(cl, MSG_CL_CHECK, CODEC_EMPTY, CODEC_EMPTY_LEN,
	                WAIT_MS, &a),
	         0);
	free(a.data);
	kn_actor_release(&cl);
}
