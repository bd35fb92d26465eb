/*
 * runtime.c - the public API (mcpkeep.h): boot, shutdown, calls turned
 * into asks to the actors.
 *
 * DESIGN: the runtime struct is written only by open and close; API calls
 * from any thread read it and talk to actors by ask.  Boot is the steps
 * table top to bottom; shutdown stops their actors bottom to top, then
 * the kernel answers whatever asks are left with MK_ECLOSED.  Logging: open
 * and close run bound to the runtime's log settings, its actor threads
 * to its kernel's copy of them, and from open to close they are the
 * default of threads bound to none (log.h).
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "actors/client/client.h"
#include "actors/cluster.h"
#include "actors/credential/credential.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "actors/persister.h"
#include "actors/supervisor/supervisor.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "mcpkeep.h"
#include "model/config.h"
#include "persist/store.h"
#include "runtime/runtime_impl.h"

#define RT_POISON 0xdeadd00du /* after close */

const char *
mk_strerror(int rc)
{
	return (codec_strerror(rc));
}

void
mk_free(void *p)
{
	free(p);
}

void
mk_free_secret(char *s)
{
	text_secret_free(s);
}

/* The defaults, the whole struct. */
static void
rt_defaults(mk_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->size              = sizeof(*opts);
	opts->log_level         = MK_LOG_INFO;
	opts->log_json          = 0;
	opts->log_fd            = 2;
	opts->stack_size        = KN_STACK_DEFAULT;
	opts->ask_timeout_ms    = 5000;
	opts->stream_url        = "inproc://mcpkeep/state";
	opts->node_id           = "local";
	opts->unstable_check_ms = 10000;
}

int
mk_options_init(mk_options *opts, size_t size)
{
	mk_options d;

	if (opts == NULL || !rt_size_ok(size, sizeof(d))) {
		return (MK_EINVAL);
	}
	rt_defaults(&d);
	d.size = size;
	memcpy(opts, &d, size);
	return (MK_OK);
}

/* The soft RLIMIT_NOFILE up to the hard one: a client connected over
 * HTTP holds 3 file descriptors, a stdio one 6. */
static void
raise_fd_limit(void)
{
	struct rlimit lim;
	rlim_t        was;

	if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
		KN_WARN("runtime", "file descriptors: getrlimit: %s",
		        strerror(errno));
		return;
	}
	was = lim.rlim_cur;
	if (was < lim.rlim_max) {
		lim.rlim_cur = lim.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
			KN_WARN("runtime",
			        "file descriptors: cannot raise the limit from %llu to %llu: %s",
			        (unsigned long long)was,
			        (unsigned long long)lim.rlim_max,
			        strerror(errno));
			return;
		}
	}
	KN_INFO("runtime",
	        "file descriptors: limit %llu (soft, was %llu), hard %llu",
	        (unsigned long long)lim.rlim_cur, (unsigned long long)was,
	        (unsigned long long)lim.rlim_max);
}

int
rt_valid(const mk_runtime *rt)
{
	return (rt != NULL && rt->magic == RT_MAGIC);
}

static void rt_stop_actors(mk_runtime *rt);

static void
rt_shutdown(mk_runtime *rt)
{
	rt_stop_actors(rt);
	kn_kernel_close(&rt->kernel);
	tr_close(&rt->tracer); /* every span has ended: its actors are gone */
	kn_stream_close(&rt->stream);
	rt_host_fini(rt);
}

/* Brings back the clients the store holds (boot semantics); *listp:
 * what was read, JSON text (malloc'd), or NULL. */
static int
rt_restore(mk_runtime *rt, char **listp)
{
	kn_answer      a, b;
	ps_clients_msg stored;
	char          *list = NULL;
	int            rv;

	*listp = NULL;
	if ((rv = kn_ask(rt->persister, MSG_PS_LOAD, CODEC_EMPTY,
	                 CODEC_EMPTY_LEN, 60000, &a)) != 0) {
		free(a.data);
		return (rv);
	}
	(void)ps_clients_msg_unpack(a.data, a.len, &stored);
	free(a.data);
	if ((list = stored.clients) == NULL || strcmp(list, "[]") == 0) {
		free(list);
		return (0);
	}
	sv_load_msg m = {.restore = list};
	rv = kn_ask_msg(rt->supervisor, MSG_SV_LOAD, CODEC_OF(sv_load_msg, &m),
	                sv_restore_ms(list), &b);
	free(b.data);
	*listp = list;
	return (rv);
}

/* The stored rows of a credential table as JSON text (malloc'd), or
 * NULL without a store. */
static char *
stored_rows(mk_runtime *rt, const char *table)
{
	ps_table_msg m = {.table = (char *)table};
	ps_rows_msg  r = {0};
	kn_answer    a;

	if (rt->persister == NULL) {
		return (NULL);
	}
	if (kn_ask_msg(rt->persister, MSG_PS_ROWS, CODEC_OF(ps_table_msg, &m),
	               60000, &a) == 0) {
		(void)ps_rows_msg_unpack(a.data, a.len, &r);
	}
	if (a.data != NULL) {
		OPENSSL_cleanse(a.data, a.len); /* rows hold credentials */
	}
	free(a.data);
	return (r.rows);
}

/* ---- boot ----------------------------------------------------------------
 *
 * One step after another, each starting one system actor (or, for the
 * stored clients, asking one); a step the options do not ask for starts
 * nothing.  The first that fails says why, and what started is stopped
 * again in reverse: one failure path, as for a close. */

/* What boot carries from one step to the next. */
typedef struct boot {
	mk_runtime *rt;
	char       *restored; /* the stored clients (JSON text), for the
	                       * cluster, or NULL */
	char why[300];        /* what failed, when a step says more than
	                       * its name */
} boot;

/* The key of the store's sealed columns: the options', else the
 * environment's, else NULL. */
static const char *
rt_secret(const mk_runtime *rt)
{
	return (rt->opts.encryption_key != NULL
	                ? rt->opts.encryption_key
	                : getenv("MCPKEEP_ENCRYPTION_KEY"));
}

static int
start_persister(boot *b, kn_actor **ap)
{
	mk_runtime *rt       = b->rt;
	const char *location = rt->opts.store_url != NULL
	        ? rt->opts.store_url
	        : rt->opts.store_path;
	char        shown[256];
	ps_args     pa = {.path    = location,
	                  .secret  = rt_secret(rt),
	                  .stream  = rt->stream,
	                  .node_id = rt->node_id};

	if (location == NULL) {
		return (0); /* no store */
	}
	store_display(location, shown, sizeof(shown));
	snprintf(b->why, sizeof(b->why), "open the store %s", shown);
	return (kn_spawn(rt->kernel, PERSISTER_NAME, &persister_ops, &pa, ap));
}

/* The credential actor, with what the store holds. */
static int
start_credential(boot *b, kn_actor **ap)
{
	mk_runtime *rt = b->rt;
	cr_args     a  = {
	             .cluster             = rt->opts.store_url != NULL,
	             .persister           = rt->persister,
	             .redirect_uri        = rt->opts.oauth_redirect_uri,
	             .client_metadata_url = rt->opts.oauth_client_metadata_url,
	             .tokens              = stored_rows(rt, "oauth_tokens"),
	             .flows               = stored_rows(rt, "oauth_flows"),
	             .configs             = stored_rows(rt, "oauth_configs"),
	             .hcreds    = stored_rows(rt, "header_credentials"),
	             .hflows    = stored_rows(rt, "header_flows"),
	             .cache_max = rt->opts.credential_cache_max,
	             .tracer    = rt->tracer,
        };
	int rv =
	        kn_spawn(rt->kernel, CREDENTIAL_NAME, &credential_ops, &a, ap);

	/* they held secrets */
	for (char **p = (char **)&a.tokens; p <= (char **)&a.hflows; p++) {
		if (*p != NULL) {
			OPENSSL_cleanse(*p, strlen(*p));
			free(*p);
		}
	}
	return (rv);
}

static int
start_supervisor(boot *b, kn_actor **ap)
{
	mk_runtime *rt = b->rt;

	rt->sv = (sv_args) {
	        .stream      = rt->stream,
	        .node_id     = rt->node_id,
	        .sync_ms     = CFG_SYNC_DEFAULT_MS,
	        .exec_ms     = CFG_EXEC_DEFAULT_MS,
	        .unstable_ms = rt->opts.unstable_check_ms,
	        .persister   = rt->persister,
	        .credential  = rt->credential,
	        .host        = &rt->host,
	        .cluster     = rt->opts.store_url != NULL,
	        .tracer      = rt->tracer,
	};
	return (kn_spawn(rt->kernel, SUPERVISOR_NAME, &supervisor_ops, &rt->sv,
	                 ap));
}

/* The clients the store holds, to the supervisor (no actor of its own). */
static int
restore(boot *b, kn_actor **ap)
{
	(void)ap;
	if (b->rt->persister == NULL) {
		return (0);
	}
	snprintf(b->why, sizeof(b->why), "restore clients from the store");
	return (rt_restore(b->rt, &b->restored));
}

static int
start_cluster(boot *b, kn_actor **ap)
{
	mk_runtime  *rt = b->rt;
	cluster_args ca = {.url          = rt->opts.store_url,
	                   .secret       = rt_secret(rt),
	                   .node_id      = rt->node_id,
	                   .heartbeat_ms = rt->opts.cluster_heartbeat_ms,
	                   .supervisor   = rt->supervisor,
	                   .restored     = b->restored};

	if (rt->opts.store_url == NULL) {
		return (0); /* one node alone */
	}
	return (kn_spawn(rt->kernel, CLUSTER_NAME, &cluster_ops, &ca, ap));
}

#define NO_ACTOR SIZE_MAX

/* The boot, in order; shutdown stops the actors in reverse. */
static const struct {
	const char *name;                     /* for the log */
	int (*start)(boot *b, kn_actor **ap); /* 0: started, or not asked */
	size_t actor; /* offsetof the runtime's reference, or NO_ACTOR */
} steps[] = {
        /* the store first, so that the others read it; stopped last,
         * it flushes what they told it */
        {PERSISTER_NAME, start_persister, offsetof(mk_runtime, persister)},
        {CREDENTIAL_NAME, start_credential, offsetof(mk_runtime, credential)},
        {SUPERVISOR_NAME, start_supervisor, offsetof(mk_runtime, supervisor)},
        {"restore", restore, NO_ACTOR},
        /* last: it tells the supervisor of other nodes' changes, and is
         * stopped first */
        {CLUSTER_NAME, start_cluster, offsetof(mk_runtime, cluster)},
};
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

static kn_actor **
step_actor(mk_runtime *rt, size_t i)
{
	return (steps[i].actor == NO_ACTOR
	                ? NULL
	                : (kn_actor **)(void *)((char *)rt + steps[i].actor));
}

/* Runs the steps; the first that fails is logged and returned (the
 * caller stops what started). */
static int
rt_start_actors(mk_runtime *rt)
{
	boot      b = {.rt = rt};
	kn_actor *none;
	int       rv = 0;

	for (size_t i = 0; i < NSTEPS && rv == 0; i++) {
		kn_actor **ap = step_actor(rt, i);

		b.why[0] = '\0';
		none     = NULL;
		if ((rv = steps[i].start(&b, ap != NULL ? ap : &none)) != 0) {
			char doing[320];
			snprintf(doing, sizeof(doing), "start actor %s",
			         steps[i].name);
			KN_ERROR("runtime", "cannot %s: %s",
			         b.why[0] != '\0' ? b.why : doing,
			         mk_strerror(rv));
		} else if (ap != NULL && *ap != NULL) {
			KN_INFO("runtime", "started actor %s", steps[i].name);
		}
	}
	free(b.restored);
	return (rv);
}

/* Stops the actors that started, last first (idempotent). */
static void
rt_stop_actors(mk_runtime *rt)
{
	for (size_t i = NSTEPS; i-- > 0;) {
		kn_actor **ap = step_actor(rt, i);

		if (ap != NULL && *ap != NULL) {
			KN_INFO("runtime", "stopping actor %s", steps[i].name);
			kn_actor_destroy(ap);
		}
	}
}

/* libcurl's global state, one reference per runtime, taken before the
 * runtime starts a thread (see mcpkeep.h: libcurl).  Thread-safe where
 * libcurl says CURL_VERSION_THREADSAFE; without it, the embedder's own
 * curl_global_init before its threads is what makes this safe. */
static int
rt_curl_init(void)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	CURLcode                      c;

	if ((v->features & CURL_VERSION_THREADSAFE) == 0) {
		KN_WARN("runtime",
		        "libcurl %s is not thread-safe to initialise: call curl_global_init before starting threads",
		        v->version);
	}
	if ((c = curl_global_init(CURL_GLOBAL_DEFAULT)) != CURLE_OK) {
		KN_ERROR("runtime", "curl_global_init: %s",
		         curl_easy_strerror(c));
		return (c == CURLE_OUT_OF_MEMORY ? MK_ENOMEM : MK_ESYS);
	}
	return (0);
}

/* Boots rt, whose options are checked, on a thread bound to its log: the
 * stream, the kernel, the actors, the stored clients.  On failure what
 * started is stopped again; the caller frees rt. */
static int
rt_boot(mk_runtime *rt)
{
	char err[256];
	int  rv;

	if (rt->opts.raise_fd_limit) {
		raise_fd_limit();
	}
	if ((rv = kn_stream_open(&rt->stream, rt->stream_url,
	                         rt->opts.stream_listen, err, sizeof(err))) !=
	    0) {
		KN_ERROR("runtime", "%s", err);
		return (rv);
	}
	if ((rv = kn_kernel_open(&rt->kernel, rt->opts.stack_size)) != 0) {
		kn_stream_close(&rt->stream);
		return (rv);
	}
	kn_logger_init(kn_kernel_log(rt->kernel), rt->opts.log_level,
	               rt->opts.log_json, rt->opts.log_fd);
	if (rt->opts.otlp_endpoint != NULL &&
	    (rv = tr_open(&rt->tracer, rt->opts.otlp_endpoint, rt->node_id,
	                  kn_kernel_log(rt->kernel), err, sizeof(err))) != 0) {
		KN_ERROR("runtime", "%s", err);
		rt_shutdown(rt);
		return (rv);
	}
	rt->opts.otlp_endpoint = NULL; /* (copied: the caller's may go) */
	if ((rv = rt_start_actors(rt)) != 0) {
		rt_shutdown(rt);
		return (rv);
	}
	rt->magic = RT_MAGIC;
	KN_INFO("runtime", "booted: %zu KiB stacks",
	        (rt->opts.stack_size ? rt->opts.stack_size
	                             : KN_STACK_DEFAULT) /
	                1024);
	return (0);
}

int
mk_runtime_open(mk_runtime **rtp, const mk_options *opts)
{
	mk_runtime      *rt;
	const kn_logger *prev;
	int              rv;

	if (rtp == NULL) {
		return (MK_EINVAL);
	}
	*rtp = NULL;
	if (opts != NULL && !rt_size_ok(opts->size, sizeof(*opts))) {
		return (MK_EINVAL);
	}
	if ((rt = calloc(1, sizeof(*rt))) == NULL) {
		return (MK_ENOMEM);
	}
	/* the caller's fields over the defaults: the ones past its size
	 * keep them */
	rt_defaults(&rt->opts);
	if (opts != NULL) {
		memcpy(&rt->opts, opts, opts->size);
		rt->opts.size = sizeof(rt->opts);
	}
	if (rt->opts.stream_url == NULL) {
		rt->opts.stream_url = "inproc://mcpkeep/state";
	}
	if (rt->opts.node_id == NULL && rt->opts.store_url == NULL) {
		rt->opts.node_id = "local";
	}
	if (rt->opts.unstable_check_ms <= 0) {
		rt->opts.unstable_check_ms = 10000;
	}
	snprintf(rt->stream_url, sizeof(rt->stream_url), "%s",
	         rt->opts.stream_url);
	if (rt->opts.node_id != NULL) {
		snprintf(rt->node_id, sizeof(rt->node_id), "%s",
		         rt->opts.node_id);
	} else {
		/* one of a cluster: the host's name and this process's */
		char host[48] = "node";
		gethostname(host, sizeof(host) - 1);
		snprintf(rt->node_id, sizeof(rt->node_id), "%s-%d", host,
		         (int)getpid());
	}
	if (rt->opts.log_level < MK_LOG_DEBUG ||
	    rt->opts.log_level > MK_LOG_ERROR ||
	    rt->opts.ask_timeout_ms <= 0 ||
	    (rt->opts.stack_size != 0 && rt->opts.stack_size < KN_STACK_MIN) ||
	    (rt->opts.store_url != NULL &&
	     (rt->opts.store_path != NULL ||
	      !store_is_url(rt->opts.store_url)))) {
		free(rt);
		return (MK_EINVAL);
	}
	if ((rv = rt_host_init(rt)) != 0) {
		rt_host_fini(rt);
		free(rt);
		return (rv);
	}
	kn_logger_init(&rt->log, rt->opts.log_level, rt->opts.log_json,
	               rt->opts.log_fd);
	prev = kn_log_bind(&rt->log);
	if ((rv = rt_curl_init()) != 0) {
		(void)kn_log_bind(prev);
		rt_host_fini(rt);
		free(rt);
		return (rv);
	}
	if ((rv = rt_boot(rt)) != 0) {
		curl_global_cleanup();
		(void)kn_log_bind(prev);
		rt_host_fini(rt); /* (safe twice: a failed boot's shutdown) */
		free(rt);
		return (rv);
	}
	kn_log_open(&rt->log);
	(void)kn_log_bind(prev);
	*rtp = rt;
	return (0);
}

void
mk_runtime_close(mk_runtime **rtp)
{
	mk_runtime      *rt;
	const kn_logger *prev;

	if (rtp == NULL || !rt_valid(rt = *rtp)) {
		return;
	}
	*rtp      = NULL;
	rt->magic = RT_POISON;
	prev      = kn_log_bind(&rt->log);
	rt_shutdown(rt);
	curl_global_cleanup(); /* its threads are joined */
	KN_INFO("runtime", "closed");
	kn_log_close(&rt->log);
	(void)kn_log_bind(prev);
	free(rt);
}

/* The counters of the supervisor, the store and the credential actor,
 * into the whole struct out. */
static int
rt_stats(mk_runtime *rt, mk_stats *out, int timeout_ms)
{
	kn_answer r;
	int       rv;

	rv = kn_ask(rt->supervisor, MSG_STATS, CODEC_EMPTY, CODEC_EMPTY_LEN,
	            timeout_ms, &r);
	if (rv == 0) {
		rv = supervisor_stats_decode(r.data, r.len, out);
	}
	free(r.data);
	if (rv == 0 && rt->persister != NULL) {
		rv = kn_ask(rt->persister, MSG_PS_STATS, CODEC_EMPTY,
		            CODEC_EMPTY_LEN, timeout_ms, &r);
		ps_stats_msg m;
		if (rv == 0 && ps_stats_msg_unpack(r.data, r.len, &m) == 0) {
			out->store_state       = m.healthy ? MK_STORE_HEALTHY
			                                   : MK_STORE_FAILING;
			out->store_queued      = (uint64_t)m.queued;
			out->store_failures    = (uint64_t)m.failures;
			out->store_dropped     = (uint64_t)m.dropped;
			out->store_tool_writes = (uint64_t)m.tool_writes;
			ps_stats_msg_clear(&m);
		}
		free(r.data);
	}
	if (rv == 0 && rt->credential != NULL &&
	    kn_ask(rt->credential, MSG_CR_STATS, CODEC_EMPTY, CODEC_EMPTY_LEN,
	           timeout_ms, &r) == 0) {
		cr_stats_msg m;
		if (cr_stats_msg_unpack(r.data, r.len, &m) == 0) {
			out->token_refreshes = (uint64_t)m.refreshes;
			out->token_exchanges = (uint64_t)m.exchanges;
			out->token_requests  = (uint64_t)m.token_requests;
		}
		free(r.data);
	}
	if (rv == 0) {
		tr_stats ts;
		tr_stats_get(rt->tracer, &ts);
		out->stream_subscribers = kn_stream_subscribers(rt->stream);
		out->spans_exported     = ts.exported;
		out->spans_dropped      = ts.dropped;
	}
	return (rv);
}

int
mk_runtime_stats(mk_runtime *rt, mk_stats *out, int timeout_ms)
{
	mk_stats st;
	int      rv;

	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	if (out == NULL || !rt_size_ok(out->size, sizeof(st))) {
		return (MK_EINVAL);
	}
	if (timeout_ms <= 0) {
		timeout_ms = rt->opts.ask_timeout_ms;
	}
	memset(&st, 0, sizeof(st));
	if ((rv = rt_stats(rt, &st, timeout_ms)) == 0) {
		size_t n = out->size;

		memcpy(out, &st, n);
		out->size = n;
	}
	return (rv);
}
