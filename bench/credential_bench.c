/*
 * credential_bench.c - the credential actor, measured (never a timed
 * test), against the real token endpoint of test/peers/oauth.mjs:
 *
 *   fan-in        1,000 concurrent asks for one caller's token that must
 *                 be fetched (a token exchange): requests at the
 *                 authorization server per 1,000 callers (without the
 *                 single flight it would be 1,000)
 *   lookup        a cached caller's credential, asked of the actor:
 *                 p50/p99 beside the actor's cheapest ask (its stats)
 *   LRU           lookup + touch at 4,096 entries, operations/s beside
 *                 the lookup alone
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/peer.h"
#include "actors/credential/credential_msg.h"
#include "actors/kernel/kernel.h"
#include "calls.h"
#include "codec/lru.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "codec/strmap.h"
#include "mcpkeep.h"
#include "runtime/runtime_impl.h"
#include "transport/loop.h"

#define FAN     1000
#define LOOKUPS 20000
#define ENTRIES 4096
#define LRU_OPS 4000000

typedef struct wait {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done, ok;
} wait;

static void
on_answer(void *arg, int status, const void *data, size_t len)
{
	wait *w = arg;

	pthread_mutex_lock(&w->mtx);
	w->ok += status == 0;
	w->done++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mtx);
}

static void
get_msg(mp_w *w, const char *id, const char *subject)
{
	mp_w_init(w);
	mp_map(w, 4);
	mp_kv_str(w, "id", id);
	mp_kv_str(w, "mode", "user");
	mp_kv_str(w, "identity", "bench");
	mp_kv_str(w, "subject", subject);
}

static long
exchanges(int port)
{
	CURL  *e = curl_easy_init();
	char   url[128], *buf = NULL;
	size_t len = 0;
	FILE  *mem = open_memstream(&buf, &len);
	long   n   = -1;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/admin/counters", port);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	if (curl_easy_perform(e) == CURLE_OK) {
		fclose(mem);
		mem       = NULL;
		json_t *j = json_loads(buf, 0, NULL);
		n         = (long)json_integer_value(json_object_get(
		                json_object_get(j, "by_grant"),
		                "urn:ietf:params:oauth:grant-type:token-exchange"));
		json_decref(j);
	}
	if (mem != NULL) {
		fclose(mem);
	}
	free(buf);
	curl_easy_cleanup(e);
	return (n);
}

static int
cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x < y ? -1 : x > y);
}

/* p50 and p99 (microseconds) of n asks of type with payload. */
static void
latency(kn_actor *cr, uint32_t type, mp_w *w, double *p50, double *p99)
{
	int64_t *lat = calloc(LOOKUPS, sizeof(*lat));

	for (int i = 0; i < LOOKUPS; i++) {
		kn_answer a;
		int64_t   t0 = tp_now_ns();
		if (kn_ask(cr, type, w->sb.data, w->sb.size, 10000, &a) != 0) {
			die("an ask failed");
		}
		lat[i] = tp_now_ns() - t0;
		free(a.data);
	}
	qsort(lat, LOOKUPS, sizeof(*lat), cmp64);
	*p50 = lat[LOOKUPS / 2] / 1e3;
	*p99 = lat[LOOKUPS * 99 / 100] / 1e3;
	free(lat);
}

typedef struct entry {
	strmap_ent ent;
	lru_link   lru;
	char       key[32];
} entry;

static void
lru_bench(double *both, double *lookup)
{
	entry   *e = calloc(ENTRIES, sizeof(*e));
	strmap   m = {0};
	lru      l;
	uint32_t x = 12345;
	int64_t  t0;
	size_t   hits = 0;

	lru_init(&l, ENTRIES);
	for (int i = 0; i < ENTRIES; i++) {
		snprintf(e[i].key, sizeof(e[i].key), "c\x1fuser\x1fu%d", i);
		e[i].ent.key = e[i].key;
		strmap_put(&m, &e[i].ent);
		lru_touch(&l, &e[i].lru);
	}
	char keys[256][32];
	for (int i = 0; i < 256; i++) {
		x = x * 1103515245u + 12345u;
		snprintf(keys[i], sizeof(keys[i]), "c\x1fuser\x1fu%u",
		         (x >> 8) % ENTRIES);
	}
	t0 = tp_now_ns();
	for (int i = 0; i < LRU_OPS; i++) {
		hits += strmap_get(&m, keys[i & 255]) != NULL;
	}
	*lookup = LRU_OPS / ((tp_now_ns() - t0) / 1e9);
	t0      = tp_now_ns();
	for (int i = 0; i < LRU_OPS; i++) {
		entry *v = (entry *)strmap_get(&m, keys[i & 255]);
		lru_touch(&l, &v->lru);
	}
	*both = LRU_OPS / ((tp_now_ns() - t0) / 1e9);
	if (hits != LRU_OPS) {
		die("lookups missed");
	}
	strmap_fini(&m);
	free(e);
}

int
main(void)
{
	peer        p = {0};
	char        js[512], cfg[1024], *err = NULL, *id = NULL;
	const char *argv[] = {"node", js, "--port", "0", NULL};
	mk_runtime *rt;
	mk_options  o;
	mp_w        w;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (peer_dir() == NULL) {
		die("MK_PEERS_DIR is not set");
	}
	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	if (peer_start(&p, argv, NULL, "listening on port ([0-9]+)", 30000) !=
	    0) {
		die("oauth.mjs did not start");
	}
	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_ERROR;
	o.stream_url = "inproc://credential-bench";
	if (mk_runtime_open(&rt, &o) != 0) {
		die("runtime");
	}
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"bx\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"token_exchange\", \"token_exchange\": {\"token_url\": \"http://127.0.0.1:%d/token\", \"audience\": \"a\", \"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}}",
	        p.port, p.port);
	if (mk_client_add(rt, cfg, &id, &err) != 0) {
		die(err != NULL ? err : "add");
	}

	printf("\n| credential actor (oauth.mjs token endpoint) | result | baseline | ratio |\n|---|---|---|---|\n");
	for (int round = 0; round < 3; round++) {
		char subject[32];
		wait f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
		          0, 0};
		long before = exchanges(p.port);
		snprintf(subject, sizeof(subject), "user-fan%d", round);
		get_msg(&w, id, subject);
		int64_t t0 = tp_now_ns();
		for (int i = 0; i < FAN; i++) {
			if (kn_ask_cb(rt->credential, MSG_CR_GET, w.sb.data,
			              w.sb.size, 30000, on_answer, &f) != 0) {
				die("ask");
			}
		}
		mp_w_fini(&w);
		pthread_mutex_lock(&f.mtx);
		while (f.done < FAN) {
			pthread_cond_wait(&f.cv, &f.mtx);
		}
		pthread_mutex_unlock(&f.mtx);
		double ms = (tp_now_ns() - t0) / 1e6;
		long   n  = exchanges(p.port) - before;
		if (f.ok != FAN) {
			die("some callers failed");
		}
		printf("| fan-in, %d callers, one token: AS requests | %ld (%.1f ms for all) | %d (one each) | %.3f |\n",
		       FAN, n, ms, FAN, (double)n / FAN);
	}

	double hp50, hp99, bp50, bp99;
	get_msg(&w, id, "user-fan0"); /* cached since the first round */
	latency(rt->credential, MSG_CR_GET, &w, &hp50, &hp99);
	mp_w_fini(&w);
	mp_w_init(&w);
	mp_map(&w, 0);
	latency(rt->credential, MSG_CR_STATS, &w, &bp50, &bp99);
	mp_w_fini(&w);
	printf("| cached caller credential, ask p50 / p99 | %.1f / %.1f us | stats ask %.1f / %.1f us | %.2f |\n",
	       hp50, hp99, bp50, bp99, hp50 / bp50);

	double both, lookup;
	lru_bench(&both, &lookup);
	printf("| LRU lookup + touch, %d entries | %.1f M ops/s | lookup alone %.1f M ops/s | %.2f |\n",
	       ENTRIES, both / 1e6, lookup / 1e6, both / lookup);

	mk_free(id);
	mk_runtime_close(&rt);
	peer_stop(&p);
	curl_global_cleanup();
	return (0);
}
