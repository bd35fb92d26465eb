/*
 * serve.c - `mcpkeep serve`: the daemon's options, boot, reload, signals
 * and drain.  Its HTTP server is http.c (libmicrohttpd), its endpoints
 * routes.c (the handlers in their own files), and who may call what
 * auth.c; see daemon.h for the parts.
 *
 * Boot: the config's clients are handed to the runtime
 * (mk_runtime_load_async) before the server listens, and their first
 * connects (30 s each at most) go on while it serves: /healthz, the page
 * and the API answer at once, /readyz is 503 until the boot thread saw
 * the load end and logged how each client came out.  A SIGHUP meanwhile
 * waits for that end; a SIGTERM ends the boot (the runtime's close stops
 * the connects).  SIGINT/SIGTERM: stop accepting, let calls in flight
 * end (bounded), end the event streams, close the runtime (the store is
 * flushed).
 */
#include <arpa/inet.h>
#include <jansson.h>
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
#include "cli/daemon.h"
#include "cli/gateway/gateway.h"
#include "mcpkeep.h"

#define DRAIN_MS       10000 /* calls in flight at shutdown, at most */
#define REQUESTS_MAX   4096  /* default --max-requests (the data plane) */
#define ADMIN_MAX      256   /* admin requests in the works */
#define PROBES_MAX     64    /* probes in the works */
#define CALLBACKS_MAX  64    /* OAuth callbacks in the works */
#define CONNS_MAX      2048  /* default --max-connections */
#define CONNS_IP_MAX   256   /* default --max-connections-per-ip */
#define IDLE_S         30    /* default --idle-timeout */
#define HEADER_S       10    /* default --header-timeout */
#define BODY_S         30    /* default --body-timeout */
#define LISTEN_DEFAULT "127.0.0.1:8080"

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
        "                  tool calls in the works at once (default 4096);\n"
        "                  more are answered 503 with Retry-After: 1 (the\n"
        "                  admin API, the probes and the OAuth callback\n"
        "                  have budgets of their own)\n"
        "  --max-connections N         connections at once (default 2048)\n"
        "  --max-connections-per-ip N  ... from one address (default 256);\n"
        "                  past either, a few spare ones serve the admin\n"
        "                  token and loopback probes only\n"
        "  --idle-timeout S  an idle connection is closed after S seconds\n"
        "                  (default 30)\n"
        "  --header-timeout S  a request's headers must be in within S\n"
        "                  seconds of the connection's start (default 10)\n"
        "  --body-timeout S    its body within S seconds of its headers\n"
        "                  (default 30)\n"
        "\n"
        "The admin token is the config's server.admin_token, else\n"
        "MCPKEEP_ADMIN_TOKEN; without one only loopback addresses are\n"
        "served, and the API cannot make or change stdio clients.  Tool\n"
        "calls need a virtual key (server.virtual_keys) or the admin token\n"
        "whenever keys are configured or the address is not loopback.\n"
        "SIGHUP reads the config again and applies its global settings,\n"
        "its clients as a diff, its tokens and keys (an invalid file\n"
        "changes nothing; listen, stream, allowed_origins and store are\n"
        "read only at start); SIGINT/SIGTERM stop.  It serves at once: the\n"
        "clients connect meanwhile, /readyz is 503 until their first\n"
        "connects ended, and a SIGHUP meanwhile is applied after that.\n"
        "Exit codes: 0 stopped by a signal, 1 cannot start, 2 usage.\n";

daemon_t D;

/* The boot (D.mtx). */
static struct {
	pthread_cond_t boot_cv;   /* the load ended, or stopping */
	pthread_t      boot;      /* the boot thread */
	bool           boot_th;   /* ... was started */
	bool           stopping;  /* the daemon stops */
	bool           loaded;    /* the load's callback ran */
	int            load_rc;   /* with this */
	char          *load_err;  /* and this reason (malloc'd), or NULL */
	int64_t        boot_t0;   /* the load began, monotonic ns */
	int64_t        boot_t1;   /* it ended */
	bool           hup;       /* a SIGHUP waits for the boot's end */
	bool           boot_fail; /* the load failed: exit 1 */
} B;

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

/* A setting of the config (NULL when absent). */
static char *
setting(const mk_settings *set, const char *path)
{
	char *v = NULL;

	(void)mk_settings_get(set, path, &v);
	return (v);
}

/* The admin token of a config: its server.admin_token, else
 * MCPKEEP_ADMIN_TOKEN, else NULL.  malloc'd; a secret (secret_free). */
static char *
admin_token_of(const mk_settings *set)
{
	char       *c   = setting(set, "server.admin_token");
	const char *env = getenv("MCPKEEP_ADMIN_TOKEN");
	char       *t   = c != NULL                   ? strdup(c)
	                : env != NULL && *env != '\0' ? strdup(env)
	                                              : NULL;

	mk_free_secret(c);
	return (t);
}

/* Puts the virtual keys of a config in force from the next request (at
 * start and on a reload); 0, or -1 with err. */
static int
keys_from(const mk_settings *set, char *err, size_t errlen)
{
	char *keys = setting(set, "server.virtual_keys");
	int   rv   = auth_keys_set(keys, err, errlen);

	mk_free_secret(keys); /* (the values are secrets) */
	return (rv);
}

/* Puts the tool groups of a config in force (at start and on a
 * reload). */
static void
groups_from(const mk_settings *set)
{
	char *groups = setting(set, "server.tool_groups");

	gw_groups_set(groups);
	mk_free(groups);
}

/* Says which settings a reload changed that only a restart applies. */
static void
restart_only(const mk_settings *was, const mk_settings *now)
{
	const char *name;

	for (unsigned i = 0; (name = mk_setting_name(i)) != NULL; i++) {
		if ((mk_setting_flags(i) & MK_SETTING_AT_START) == 0) {
			continue;
		}
		char *a = setting(was, name), *b = setting(now, name);
		if ((a == NULL) != (b == NULL) ||
		    (a != NULL && strcmp(a, b) != 0)) {
			mk_log(MK_LOG_WARN, "serve",
			       "reload: %s changed; it is read only at start (restart to apply it)",
			       name);
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
reload(const char *path, char **text, mk_settings **set)
{
	char         ferr[256], *ntext, *err = NULL;
	int          rc;
	char        *token;
	mk_settings *nset = NULL;

	if ((ntext = cli_read_file(path, ferr, sizeof(ferr))) == NULL) {
		mk_log(MK_LOG_ERROR, "serve", "reload refused: %s", ferr);
		goto refused;
	}
	if ((rc = mk_settings_parse(ntext, &nset, &err)) != 0) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: %s",
		       err != NULL ? err : mk_strerror(rc));
		goto refused;
	}
	if ((token = admin_token_of(nset)) == NULL && !D.loopback) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: the daemon serves a non-loopback address and the file names no admin token (server.admin_token or MCPKEEP_ADMIN_TOKEN)");
		goto refused;
	}
	restart_only(*set, nset);
	if ((rc = mk_runtime_reload(D.rt, ntext, &err)) == MK_EINVAL) {
		mk_log(MK_LOG_ERROR, "serve",
		       "reload refused, nothing changed: %s",
		       err != NULL ? err : mk_strerror(rc));
		mk_free_secret(token);
		goto refused;
	}
	if (rc != 0) {
		mk_log(MK_LOG_ERROR, "serve", "reload: %s",
		       err != NULL ? err : mk_strerror(rc));
	}
	mk_free(err);
	err = NULL;
	/* a rotated token holds from the next request on */
	char *metrics = setting(nset, "server.metrics_token");
	pthread_mutex_lock(&D.mtx);
	bool rotated = (token == NULL) != (D.token == NULL) ||
	        (token != NULL && strcmp(token, D.token) != 0);
	char *gone      = D.token;
	char *mgone     = D.metrics_token;
	D.token         = token;
	D.metrics_token = metrics;
	pthread_mutex_unlock(&D.mtx);
	mk_free_secret(gone);
	mk_free_secret(mgone);
	if (rotated) {
		mk_log(MK_LOG_INFO, "serve",
		       "reload: the admin token changed");
	}
	if (keys_from(nset, ferr, sizeof(ferr)) != 0) {
		mk_log(MK_LOG_ERROR, "serve", "reload: virtual keys: %s",
		       ferr);
	}
	/* a stream lasts no longer than its credential; a key's new
	 * grants may change what a gateway session sees */
	int ended = events_revoke(rotated);
	groups_from(nset);
	gw_changed();
	if (ended > 0) {
		mk_log(MK_LOG_INFO, "serve",
		       "reload: %d event streams ended: their admin token or virtual key was rotated or changed",
		       ended);
	}
	free(*text);
	*text = ntext;
	mk_settings_free(set);
	*set = nset;
	pthread_mutex_lock(&D.mtx);
	D.reloads[0]++;
	pthread_mutex_unlock(&D.mtx);
	return;
refused:
	mk_free(err);
	mk_settings_free(&nset);
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
	B.loaded   = true;
	B.load_rc  = rc;
	B.load_err = err != NULL ? strdup(err) : NULL;
	B.boot_t1  = answer_mono_ns();
	pthread_cond_broadcast(&B.boot_cv);
	pthread_mutex_unlock(&D.mtx);
}

/* Logs how each of the file's clients (names) came out of its first
 * connect, then the summary. */
static void
boot_report(json_t *names, int64_t ns)
{
	json_t     *all                = clients_all(false), *c;
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
		const char *name = clients_name(c);
		const char *st =
		        json_string_value(json_object_get(c, "state"));
		json_t *lf = json_object_get(c, "last_failure");
		int     k  = 0;

		if (json_object_get(names, name) == NULL) {
			continue; /* restored from the store, or made since */
		}
		found++;
		st = st != NULL ? st : "?";
		while (k < NSTATES && strcmp(st, mk_state_name(k)) != 0) {
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
	/* (what each reached follows: not "connected") */
	snprintf(sum, sizeof(sum), "boot: %zu clients in %lld ms", total,
	         (long long)(ns / 1000000));
	for (int k = 0; k <= NSTATES; k++) {
		if (count[k] != 0 && (n = strlen(sum)) < sizeof(sum)) {
			snprintf(sum + n, sizeof(sum) - n, "%s%d %s", sep,
			         count[k],
			         k < NSTATES ? mk_state_name(k) : "other");
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
	while (!B.loaded && !B.stopping) {
		pthread_cond_wait(&B.boot_cv, &D.mtx);
	}
	loaded     = B.loaded;
	rc         = B.load_rc;
	err        = B.load_err;
	B.load_err = NULL;
	ns         = B.boot_t1 - B.boot_t0;
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
	B.boot_fail = loaded && rc != 0 && rc != MK_ECLOSED;
	D.booting   = B.boot_fail; /* (failed: never ready; it stops) */
	hup         = B.hup && loaded && rc == 0;
	bool fail   = B.boot_fail && !B.stopping;
	pthread_mutex_unlock(&D.mtx);
	if (fail) {
		kill(getpid(), SIGTERM); /* as before: cannot start */
	} else if (hup) {
		mk_log(MK_LOG_INFO, "serve",
		       "reload: the boot ended: applying the SIGHUP that came during it");
		kill(getpid(), SIGHUP);
	}
	return (NULL);
}

/* host of a host:port names the loopback interface: 127.0.0.0/8, ::1
 * or localhost, and nothing that merely starts like one. */
static bool
loopback(const char *listen)
{
	const char   *colon = strrchr(listen, ':');
	char          host[64];
	unsigned char a[16];

	if (colon == NULL || (size_t)(colon - listen) >= sizeof(host)) {
		return (false);
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
	if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0) {
		return (true);
	}
	return (inet_pton(AF_INET, host, a) == 1 && a[0] == 127);
}

/* url is http:// to a loopback host (port or not). */
static bool
loopback_http(const char *url)
{
	char   hp[300];
	size_t n;

	if (strncmp(url, "http://", 7) != 0) {
		return (false);
	}
	n = strcspn(url + 7, "/?#");
	snprintf(hp, sizeof(hp), "%.*s%s", (int)(n < 200 ? n : 200), url + 7,
	         memchr(url + 7, ':', n) != NULL ? "" : ":80");
	return (loopback(hp));
}

/* The document of GET /oauth/client-metadata.json, when the config text
 * names its public URL (server.client_metadata_url: it must end in that
 * path, since an authorization server requires the document's client_id
 * to be the URL it fetched); 0, or -1 with err. */
static int
client_metadata_from(const mk_settings *set, const char *redirect, char *err,
                     size_t len)
{
	static const char path[] = "/oauth/client-metadata.json";
	char             *url    = setting(set, "server.client_metadata_url");
	size_t            n      = url != NULL ? strlen(url) : 0;

	if (url == NULL) {
		return (0);
	}
	if (n < sizeof(path) ||
	    strcmp(url + n - (sizeof(path) - 1), path) != 0 ||
	    (strncmp(url, "https://", 8) != 0 && !loopback_http(url))) {
		snprintf(
		        err, len,
		        "server.client_metadata_url must be this daemon's public https URL ending in %s (http only to a loopback host)",
		        path);
		mk_free(url);
		return (-1);
	}
	D.client_metadata = json_pack(
	        "{s:s, s:s, s:[s], s:[s,s], s:[s], s:s}", "client_id", url,
	        "client_name", "mcpkeep", "redirect_uris", redirect,
	        "grant_types", "authorization_code", "refresh_token",
	        "response_types", "code", "token_endpoint_auth_method",
	        "none");
	mk_free(url);
	return (D.client_metadata != NULL ? 0 : -1);
}

/* The servers' requests the daemon takes (server.inputs) as mk_options'
 * bits: each is published on the event stream and waits for a person's
 * answer through the API. */
static unsigned
inputs_from(const mk_settings *set)
{
	static const struct {
		const char *name;
		unsigned    bit;
	} kinds[]     = {{"elicitation", MK_INPUT_ELICITATION},
	                 {"sampling", MK_INPUT_SAMPLING},
	                 {"roots", MK_INPUT_ROOTS}};
	char    *v    = setting(set, "server.inputs");
	json_t  *a    = v != NULL ? json_loads(v, 0, NULL) : NULL;
	unsigned bits = 0;
	size_t   i;
	json_t  *e;

	json_array_foreach(a, i, e)
	{
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			if (strcmp(json_string_value(e), kinds[k].name) == 0) {
				bits |= kinds[k].bit;
			}
		}
	}
	json_decref(a);
	mk_free(v);
	return (bits);
}

/* A state-stream address beyond loopback (tcp:// to another host)
 * needs server.stream_public; ipc:// and inproc:// are local. */
static bool
stream_local(const char *url)
{
	const char *p = strstr(url, "://");
	char        hp[300];

	if (p == NULL || strncmp(url, "tcp", 3) != 0) {
		return (true);
	}
	snprintf(hp, sizeof(hp), "%s", p + 3);
	return (loopback(hp));
}

/* What one `mcpkeep serve` holds from its start to its end. */
typedef struct serving {
	const char  *config;   /* -c FILE */
	const char  *listen;   /* --listen, server.listen, or the default */
	const char  *store;    /* --store */
	char        *text;     /* the config file's text */
	mk_settings *cfg;      /* its settings */
	mk_options   opts;     /* the runtime's */
	mk_log_level level;    /* --log */
	bool         json_log; /* --json */
	http_opts    ho;       /* the server's */
	char        *c_listen, *c_store, *origins, *node_id; /* (owned) */
	json_t      *sa, *oa;       /* stream addresses, origins: kept */
	const char  *listen_on[17]; /* server.stream, NULL-ended */
	const char  *allowed[33];   /* server.allowed_origins, NULL-ended */
	char         redir[300];    /* the OAuth callback */
	char        *err;           /* the runtime's last error text */
	sigset_t     set;           /* the signals waited for */
	bool         http_up;       /* the server answers */
} serving;

/* The config file read and its settings parsed; 0, or 1 (said). */
static int
serve_read(serving *sv)
{
	char ferr[256];
	int  rv;

	if ((sv->text = cli_read_file(sv->config, ferr, sizeof(ferr))) ==
	    NULL) {
		fprintf(stderr, "mcpkeep: %s\n", ferr);
		return (1);
	}
	if ((rv = mk_settings_parse(sv->text, &sv->cfg, &sv->err)) != 0 ||
	    (rv = cli_store(&sv->opts, sv->store, sv->text, &sv->c_store,
	                    &sv->err)) != 0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", sv->config,
		        sv->err ? sv->err : mk_strerror(rv));
		return (1);
	}
	return (0);
}

/* The daemon's own settings: where it listens, who may call it, its
 * page; 0, or 1 (said). */
static int
serve_daemon(serving *sv)
{
	char ferr[256];

	pthread_mutex_init(&D.mtx, NULL);
	pthread_cond_init(&D.cv, NULL);
	pthread_cond_init(&B.boot_cv, NULL);
	sv->c_listen    = setting(sv->cfg, "server.listen");
	sv->listen      = sv->listen != NULL ? sv->listen
	             : sv->c_listen != NULL  ? sv->c_listen
	                                     : LISTEN_DEFAULT;
	D.loopback      = loopback(sv->listen);
	D.token         = admin_token_of(sv->cfg);
	D.metrics_token = setting(sv->cfg, "server.metrics_token");
	if (keys_from(sv->cfg, ferr, sizeof(ferr)) != 0) {
		fprintf(stderr, "mcpkeep serve: %s\n", ferr);
		return (1);
	}
	groups_from(sv->cfg);
	if (D.token == NULL && !D.loopback) {
		fprintf(stderr,
		        "mcpkeep serve: refusing to serve %s without an admin token (server.admin_token or MCPKEEP_ADMIN_TOKEN)\n",
		        sv->listen);
		return (1);
	}
	if (page_init() != 0) {
		fprintf(stderr, "mcpkeep serve: the status page is broken\n");
		return (1);
	}
	return (0);
}

/* The state stream's outward addresses (server.stream: tcp://, ipc://)
 * and the origins the server allows; 0, or 1 (said). */
static int
serve_addresses(serving *sv)
{
	char *streams = setting(sv->cfg, "server.stream");
	char *public  = setting(sv->cfg, "server.stream_public");

	sv->sa = streams != NULL ? json_loads(streams, 0, NULL) : NULL;
	mk_free(streams);
	for (size_t i = 0; i < json_array_size(sv->sa) && i < 16; i++) {
		sv->listen_on[i] =
		        json_string_value(json_array_get(sv->sa, i));
		if (public == NULL && !stream_local(sv->listen_on[i])) {
			fprintf(stderr,
			        "mcpkeep serve: the state stream address %s is not loopback: set server.stream_public to true to serve it there\n",
			        sv->listen_on[i]);
			mk_free(public);
			return (1);
		}
	}
	mk_free(public);
	sv->origins = setting(sv->cfg, "server.allowed_origins");
	sv->oa = sv->origins != NULL ? json_loads(sv->origins, 0, NULL) : NULL;
	for (size_t i = 0; i < json_array_size(sv->oa) && i < 32; i++) {
		sv->allowed[i] = json_string_value(json_array_get(sv->oa, i));
	}
	sv->ho.listen  = sv->listen;
	sv->ho.origins = sv->allowed;
	return (0);
}

/* The runtime started with the settings, and what follows its stream;
 * 0, or 1 (said). */
static int
serve_runtime(serving *sv)
{
	mk_options *o = &sv->opts;
	char        ferr[256], *roots, *otlp, *hb;
	int         rv;

	/* blocked before the runtime's threads start: they inherit it */
	pthread_sigmask(SIG_BLOCK, &sv->set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sv->node_id = setting(sv->cfg, "cluster.node_id");
	hb          = setting(sv->cfg, "cluster.heartbeat_interval");
	o->cluster_heartbeat_ms = hb != NULL ? atoi(hb) : 0;
	mk_free(hb);
	o->log_level      = sv->level;
	o->log_json       = sv->json_log;
	o->raise_fd_limit = 1; /* every connected client holds fds */
	o->node_id        = sv->node_id;
	snprintf(sv->redir, sizeof(sv->redir), "http://%s/api/oauth/callback",
	         sv->listen);
	o->oauth_redirect_uri = sv->redir;
	if (client_metadata_from(sv->cfg, sv->redir, ferr, sizeof(ferr)) !=
	    0) {
		fprintf(stderr, "mcpkeep serve: %s\n", ferr);
		return (1);
	}
	/* every OAuth client without a client_id may use it */
	o->oauth_client_metadata_url = json_string_value(
	        json_object_get(D.client_metadata, "client_id"));
	o->stream_listen = sv->listen_on;
	o->inputs        = inputs_from(sv->cfg);
	roots            = setting(sv->cfg, "server.roots");
	o->roots         = roots;
	otlp             = setting(sv->cfg, "telemetry.otlp_endpoint");
	o->otlp_endpoint = otlp;
	rv               = mk_runtime_open(&D.rt, o);
	mk_free(roots);
	mk_free(otlp);
	if (rv != 0) {
		fprintf(stderr, "mcpkeep: cannot start the runtime: %s\n",
		        mk_strerror(rv));
		return (1);
	}
	if (events_start(mk_stream_url(D.rt)) != 0 || gw_start() != 0) {
		fprintf(stderr,
		        "mcpkeep serve: cannot follow the state stream\n");
		return (1);
	}
	return (0);
}

/* The clients first (each exists once this returns: the API sees them
 * all), their connects while the server answers; 0, or 1 (said). */
static int
serve_boot(serving *sv)
{
	char    ferr[256];
	json_t *names;
	int     rv;

	cli_config_warnings(sv->text); /* (what `mcpkeep check` warns of) */
	names = clients_by_name(sv->text);
	mk_log(MK_LOG_INFO, "serve", "boot: connecting %zu clients",
	       json_object_size(names));
	pthread_mutex_lock(&D.mtx);
	D.booting = true;
	B.boot_t0 = answer_mono_ns();
	pthread_mutex_unlock(&D.mtx);
	if ((rv = mk_runtime_load_async(D.rt, sv->text, on_loaded, NULL,
	                                &sv->err)) != 0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", sv->config,
		        sv->err ? sv->err : mk_strerror(rv));
		json_decref(names);
		return (1);
	}
	if ((rv = pthread_create(&B.boot, NULL, boot_main, names)) != 0) {
		fprintf(stderr, "mcpkeep serve: cannot start the boot: %s\n",
		        strerror(rv));
		json_decref(names);
		return (1);
	}
	B.boot_th = true;
	if (http_start(&sv->ho, ferr, sizeof(ferr)) != 0) {
		fprintf(stderr, "mcpkeep serve: %s\n", ferr);
		return (1);
	}
	sv->http_up = true;
	return (0);
}

/* Serves until SIGINT or SIGTERM, reloading on SIGHUP; the exit code. */
static int
serve_until_stopped(serving *sv)
{
	int  sig, code;
	char url[300];

	snprintf(url, sizeof(url), "http://%s", sv->listen);
	printf("mcpkeep %s: serving %s (status page: %s/)\n", MCPKEEP_VERSION,
	       url, url);
	fflush(stdout);
	while (sigwait(&sv->set, &sig) == 0 && sig == SIGHUP) {
		/* the boot's clients are the diff's base: a reload waits
		 * for their connects to end (boot_main raises it again) */
		pthread_mutex_lock(&D.mtx);
		bool later = D.booting;
		B.hup      = B.hup || later;
		pthread_mutex_unlock(&D.mtx);
		if (later) {
			mk_log(MK_LOG_INFO, "serve",
			       "reload deferred: the boot is still connecting clients; the SIGHUP applies when it ends");
			continue;
		}
		reload(sv->config, &sv->text, &sv->cfg);
	}
	printf("mcpkeep: %s: stopping\n",
	       sig == SIGINT ? "SIGINT" : "SIGTERM");
	fflush(stdout);
	pthread_mutex_lock(&D.mtx);
	code = B.boot_fail ? 1 : 0;
	pthread_mutex_unlock(&D.mtx);
	return (code);
}

/* No new connections; the event streams end; calls in flight end
 * (bounded), then the workers, the boot, the runtime (which answers what
 * is still waiting), the server; then what it held is freed. */
static void
serve_stop(serving *sv)
{
	if (D.rt != NULL) { /* (what follows it started with it) */
		if (sv->http_up) {
			http_quiesce();
		}
		events_stop();
		gw_stop(); /* (before the runtime: it reads the views) */
		pthread_mutex_lock(&D.mtx);
		B.stopping = true;
		pthread_cond_broadcast(&B.boot_cv);
		pthread_mutex_unlock(&D.mtx);
		(void)http_drain(sv->http_up ? DRAIN_MS : 0);
		if (B.boot_th) { /* before the close: it calls the runtime */
			pthread_join(B.boot, NULL);
		}
	}
	mk_runtime_close(&D.rt); /* (a boot still going: its connects end) */
	http_stop();
	gw_park_stop();   /* (every call ended) */
	free(B.load_err); /* (the close may have answered the load) */
	json_decref(sv->sa);
	json_decref(sv->oa);
	mk_free(sv->origins);
	mk_free(sv->err);
	mk_free(sv->c_listen);
	mk_free(sv->c_store);
	mk_free(sv->node_id);
	mk_free_secret(D.token);
	mk_free_secret(D.metrics_token);
	json_decref(D.client_metadata);
	mk_settings_free(&sv->cfg);
	free(sv->text);
}

int
cmd_serve(int argc, char **argv)
{
	serving sv = {
	        .level = MK_LOG_INFO,
	        .ho    = {.max      = {ADMIN_MAX, REQUESTS_MAX, PROBES_MAX,
	                               CALLBACKS_MAX},
	                  .conns    = CONNS_MAX,
	                  .conns_ip = CONNS_IP_MAX,
	                  .idle_s   = IDLE_S,
	                  .header_s = HEADER_S,
	                  .body_s   = BODY_S},
	};
	int     rv, code = 1;
	cli_opt opt[] = {
	        {CLI_TEXT, "-c", &sv.config},
	        {CLI_TEXT, "--listen", &sv.listen},
	        {CLI_TEXT, "--store", &sv.store},
	        {CLI_LEVEL, "--log", &sv.level},
	        {CLI_NUM, "--max-requests", &sv.ho.max[LANE_DATA]},
	        {CLI_NUM, "--max-connections", &sv.ho.conns},
	        {CLI_NUM, "--max-connections-per-ip", &sv.ho.conns_ip},
	        {CLI_NUM, "--idle-timeout", &sv.ho.idle_s},
	        {CLI_NUM, "--header-timeout", &sv.ho.header_s},
	        {CLI_NUM, "--body-timeout", &sv.ho.body_s},
	        {CLI_FLAG, "--json", &sv.json_log},
	        CLI_OPTS_END,
	};

	if ((rv = cli_args("serve", argc, argv, opt, serve_usage)) != 0) {
		return (rv == 1 ? 0 : rv);
	}
	if (sv.config == NULL) {
		fprintf(stderr, "mcpkeep serve: -c FILE is required\n%s",
		        serve_usage);
		return (2);
	}
	mk_options_init(&sv.opts, sizeof(sv.opts));
	sigemptyset(&sv.set);
	sigaddset(&sv.set, SIGINT);
	sigaddset(&sv.set, SIGTERM);
	sigaddset(&sv.set, SIGHUP);
	if (serve_read(&sv) == 0 && serve_daemon(&sv) == 0 &&
	    serve_addresses(&sv) == 0 && serve_runtime(&sv) == 0 &&
	    serve_boot(&sv) == 0) {
		code = serve_until_stopped(&sv);
	}
	serve_stop(&sv);
	return (code);
}
