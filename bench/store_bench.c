/*
 * store_bench.c - the store, measured (never a timed test): ratios in one
 * run on a real SQLite file in /tmp.
 *
 *   tool-list writes/s   changed 8 KiB lists straight on the store, 64
 *                        per transaction against one per transaction; and
 *                        told to the persister (batched: one transaction
 *                        per flush) against the store's own 64 per
 *                        transaction (the price of the actor hop)
 *   durable writes/s     credential rows acknowledged as synced: one
 *                        asker at a time, and 16 askers sharing flushes
 *   hash                 tools_hash (canonical JSON + SHA-256) per list
 *                        against json_dumps of the same list
 *   unchanged checks     10,000 sticky checks (ping + tools/list) against
 *                        fastmcp: tool-list writes and persister flushes
 *                        they cause (must be 0)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "actors/persister.h"
#include "calls.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "fastmcp.h"
#include "mcpkeep.h"
#include "persist/hash.h"
#include "persist/store.h"
#include "runtime/runtime_impl.h"
#include "transport/loop.h"

#define LISTS   4000
#define DURABLE 2000
#define HASHES  2000
#define CHECKS  10000

static char dir[] = "/tmp/mk-store-bench-XXXXXX";

static double
secs_since(int64_t t0)
{
	return ((tp_now_ns() - t0) / 1e9);
}

/* An 8 KiB tool list whose description carries i. */
static char *
tool_list(long i)
{
	char  *t = malloc(9000);
	size_t n = (size_t)snprintf(
	        t, 9000,
	        "[{\"name\":\"t\",\"inputSchema\":{},\"description\":\"%ld ",
	        i);

	memset(t + n, 'x', 8192);
	snprintf(t + n + 8192, 9000 - n - 8192, "\"}]");
	return (t);
}

static void
hash_of(long i, char *hash, size_t len)
{
	snprintf(hash, len, "h%ld", i);
}

/* Straight on the store, per transactions of per_tx writes. */
static double
direct(const char *path, int per_tx)
{
	store  *s;
	char    err[STORE_ERR_MAX], hash[32];
	bool    w;
	int64_t t0;

	if (store_open(&s, path, STORE_RW, NULL, err, sizeof(err)) != 0) {
		die(err);
	}
	for (int c = 0; c < 64; c++) {
		char id[16];
		snprintf(id, sizeof(id), "c%d", c);
		if (store_client_put(s, id, id, "{}") != 0) {
			die(store_error(s));
		}
	}
	t0 = tp_now_ns();
	for (long i = 0; i < LISTS; i++) {
		char *t = tool_list(i), id[16];
		snprintf(id, sizeof(id), "c%ld", i % 64);
		hash_of(i, hash, sizeof(hash));
		if ((i % per_tx == 0 && store_begin(s, false) != 0) ||
		    store_tools_put(s, id, hash, t, NULL, &w) != 0 ||
		    ((i + 1) % per_tx == 0 && store_commit(s) != 0)) {
			die(store_error(s));
		}
		free(t);
	}
	double r = LISTS / secs_since(t0);
	store_close(&s);
	return (r);
}

typedef struct ps_bench {
	kn_kernel *k;
	kn_stream *stream;
	kn_actor  *ps;
} ps_bench;

static void
ps_open(ps_bench *b, const char *path)
{
	char    err[256];
	ps_args pa;

	if (kn_stream_open(&b->stream, "inproc://store-bench", NULL, err,
	                   sizeof(err)) != 0 ||
	    kn_kernel_open(&b->k, 0) != 0) {
		die("kernel");
	}
	pa = (ps_args) {.path = path, .stream = b->stream};
	if (kn_spawn(b->k, PERSISTER_NAME, &persister_ops, &pa, &b->ps) != 0) {
		die("persister");
	}
}

static void
ps_close(ps_bench *b)
{
	kn_actor_destroy(&b->ps);
	kn_kernel_close(&b->k);
	kn_stream_close(&b->stream);
}

static int64_t
ps_stat(ps_bench *b, const char *key)
{
	kn_answer a;
	mp_r      r;
	int64_t   v;

	if (kn_ask(b->ps, MSG_PS_STATS, CODEC_EMPTY, CODEC_EMPTY_LEN, 60000,
	           &a) != 0) {
		die("stats");
	}
	mp_r_open(&r, a.data, a.len);
	v = mp_int(mp_get(&r, key), -1);
	mp_r_close(&r);
	free(a.data);
	return (v);
}

static void
client_put(ps_bench *b, const char *id)
{
	kn_answer a;
	mp_w      w;

	mp_w_init(&w);
	mp_map(&w, 3);
	mp_kv_str(&w, "id", id);
	mp_kv_str(&w, "name", id);
	mp_kv_str(&w, "config", "{}");
	if (kn_ask(b->ps, MSG_PS_CLIENT_PUT, w.sb.data, w.sb.size, 60000,
	           &a) != 0) {
		die("client put");
	}
	free(a.data);
	mp_w_fini(&w);
}

/* Changed lists told to the persister for 64 clients in turn (a real
 * runtime's pattern: many clients, each list different); the time runs
 * until every one is committed. */
static double
batched(const char *path, int64_t *flushes)
{
	ps_bench b;
	char     id[16], hash[32];
	int64_t  t0;

	ps_open(&b, path);
	for (int c = 0; c < 64; c++) {
		snprintf(id, sizeof(id), "c%d", c);
		client_put(&b, id);
	}
	int64_t f0 = ps_stat(&b, "flushes");
	t0         = tp_now_ns();
	for (long i = 0; i < LISTS; i++) {
		char *t = tool_list(i);
		mp_w  w;
		snprintf(id, sizeof(id), "c%ld", i % 64);
		hash_of(i, hash, sizeof(hash));
		mp_w_init(&w);
		mp_map(&w, 3);
		mp_kv_str(&w, "id", id);
		mp_kv_str(&w, "hash", hash);
		mp_kv_str(&w, "tools", t);
		if (kn_tell(b.ps, NULL, MSG_PS_TOOLS_PUT, w.sb.data,
		            w.sb.size) != 0) {
			die("tell");
		}
		mp_w_fini(&w);
		free(t);
	}
	if (ps_stat(&b, "tool_writes") < 1) { /* flushes what is queued */
		die("no writes");
	}
	double r = LISTS / secs_since(t0);
	*flushes = ps_stat(&b, "flushes") - f0;
	ps_close(&b);
	return (r);
}

typedef struct durable_arg {
	ps_bench *b;
	int       from, n;
} durable_arg;

static void *
durable_main(void *arg)
{
	durable_arg *d = arg;
	char         row[256];

	for (int i = d->from; i < d->from + d->n; i++) {
		kn_answer a;
		snprintf(
		        row, sizeof(row),
		        "{\"client_id\":\"c\",\"mode\":\"user\",\"identity\":\"u%d\",\"access_token\":\"t%d\",\"status\":\"active\"}",
		        i, i);
		ps_row_msg put = {.table = "oauth_tokens", .row = row};
		if (kn_ask_msg(d->b->ps, MSG_PS_ROW_PUT,
		               CODEC_OF(ps_row_msg, &put), 60000, &a) != 0) {
			die("durable write");
		}
		free(a.data);
	}
	return (NULL);
}

/* Durable rows, acknowledged after sync: nthreads askers. */
static double
durable(const char *path, int nthreads, int64_t *flushes)
{
	ps_bench    b;
	pthread_t   t[CONC];
	durable_arg a[CONC];
	int64_t     t0, f0;

	ps_open(&b, path);
	client_put(&b, "c");
	f0 = ps_stat(&b, "flushes");
	t0 = tp_now_ns();
	for (int i = 0; i < nthreads; i++) {
		a[i] = (durable_arg) {&b, i * (DURABLE / nthreads),
		                      DURABLE / nthreads};
		pthread_create(&t[i], NULL, durable_main, &a[i]);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
	}
	double r = DURABLE / secs_since(t0);
	*flushes = ps_stat(&b, "flushes") - f0;
	ps_close(&b);
	return (r);
}

static void
hashes(double *hash_us, double *dump_us, const char *label, json_t *list)
{
	char    hex[TOOLS_HASH_HEX];
	int64_t t0 = tp_now_ns();

	for (int i = 0; i < HASHES; i++) {
		if (tools_hash(list, hex) != 0) {
			die("hash");
		}
	}
	*hash_us = secs_since(t0) * 1e6 / HASHES;
	t0       = tp_now_ns();
	for (int i = 0; i < HASHES; i++) {
		free(json_dumps(list, JSON_COMPACT));
	}
	*dump_us = secs_since(t0) * 1e6 / HASHES;
	printf("| hash, %-26s | %8.1f us | json_dumps %6.1f us | %5.2f |\n",
	       label, *hash_us, *dump_us, *hash_us / *dump_us);
}

/* CHECKS sticky checks of an unchanged list through the runtime. */
static void
unchanged(const char *path, int64_t *writes, int64_t *flushes, double *cps)
{
	mk_runtime *rt;
	mk_options  o;
	kn_actor   *cl, *ps;
	char        cfg[256], *err = NULL;
	int         port = fastmcp_start();
	int64_t     t0;

	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_ERROR;
	o.store_path = path;
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"tick\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1h\"}",
	        port);
	if (port < 0 || mk_runtime_open(&rt, &o) != 0 ||
	    mk_client_add(rt, cfg, NULL, &err) != 0 ||
	    kn_lookup(rt->kernel, CLIENT_PREFIX "tick", &cl) != 0 ||
	    kn_lookup(rt->kernel, PERSISTER_NAME, &ps) != 0) {
		die(err != NULL ? err : "runtime");
	}
	ps_bench b  = {.ps = ps};
	int64_t  w0 = ps_stat(&b, "tool_writes");
	int64_t  f0 = ps_stat(&b, "flushes");
	t0          = tp_now_ns();
	for (int i = 0; i < CHECKS; i++) {
		kn_answer a;
		if (kn_ask(cl, MSG_CL_CHECK, CODEC_EMPTY, CODEC_EMPTY_LEN,
		           60000, &a) != 0) {
			die("check");
		}
		free(a.data);
	}
	*cps     = CHECKS / secs_since(t0);
	*writes  = ps_stat(&b, "tool_writes") - w0;
	*flushes = ps_stat(&b, "flushes") - f0;
	kn_actor_release(&cl);
	kn_actor_release(&ps);
	mk_runtime_close(&rt);
}

int
main(void)
{
	char    p[6][128];
	int64_t bf, df1, df16, w, f;
	double  cps, hu, du;

	if (mkdtemp(dir) == NULL) {
		die("mkdtemp");
	}
	for (int i = 0; i < 6; i++) {
		snprintf(p[i], sizeof(p[i]), "%s/s%d.db", dir, i);
	}
	double un  = direct(p[0], 1);
	double db  = direct(p[5], PS_BATCH_MAX);
	double ba  = batched(p[1], &bf);
	double d1  = durable(p[2], 1, &df1);
	double d16 = durable(p[3], CONC, &df16);

	printf("\n| store (SQLite WAL, /tmp)          | per second | baseline          | ratio |\n"
	       "|---|---|---|---|\n");
	printf("| 8 KiB tool lists, %d per tx (store) | %8.0f | 1 tx/write %6.0f | %5.2f |\n",
	       PS_BATCH_MAX, db, un, db / un);
	printf("| the same through the persister    | %8.0f   | store, %d/tx %6.0f | %5.2f |\n",
	       ba, PS_BATCH_MAX, db, ba / db);
	printf("|   (%d lists told: %lld flushes)   |            |                   |       |\n",
	       LISTS, (long long)bf);
	printf("| durable rows, 16 askers           | %8.0f   | 1 asker %9.0f | %5.2f |\n",
	       d16, d1, d16 / d1);
	printf("|   (flushes: %lld for 1 asker, %lld for 16) |  |  |  |\n",
	       (long long)df1, (long long)df16);

	printf("\n| hash                             | per list  | baseline           | ratio |\n|---|---|---|---|\n");
	char   *text = tool_list(1);
	json_t *one  = json_loads(text, 0, NULL);
	free(text);
	hashes(&hu, &du, "one 8 KiB tool", one);
	json_t *many = json_array();
	for (int i = 0; i < 40; i++) {
		char name[16];
		snprintf(name, sizeof(name), "tool_%02d", 39 - i);
		json_array_append_new(
		        many,
		        json_pack(
		                "{s:s, s:s, s:{s:s, s:{s:{s:s}}}}", "name",
		                name, "description",
		                "A tool of a typical server, with a sentence of description",
		                "inputSchema", "type", "object", "properties",
		                "x", "type", "string"));
	}
	hashes(&hu, &du, "40 typical tools", many);
	json_decref(one);
	json_decref(many);

	unchanged(p[4], &w, &f, &cps);
	printf("\n| %d unchanged sticky checks (fastmcp) | result |\n"
	       "|---|---|\n"
	       "| checks/s                             | %.0f |\n"
	       "| tool-list writes                     | %lld |\n"
	       "| persister flushes                    | %lld |\n",
	       CHECKS, cps, (long long)w, (long long)f);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0) {
		die("rm");
	}
	return (w == 0 && f == 0 ? 0 : 1);
}
