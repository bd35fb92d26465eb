/*
 * page.c - what anyone may GET: the status page (cli/status.html,
 * embedded) with its Content-Security-Policy, and the probes /healthz
 * and /readyz.
 */
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "cli/daemon.h"

extern const char   status_html[]; /* cli/status.html, embedded */
extern const size_t status_html_len;

/* ---- the status page ---------------------------------------------------- */

static char csp[512];

/* The hash of the text between open and close in the page, as CSP's
 * 'sha256-...'. */
static int
inline_hash(const char *open, const char *close, char *out, size_t len)
{
	const char   *a = strstr(status_html, open), *b;
	unsigned char h[32];
	unsigned int  n = 32;
	unsigned char b64[48];

	if (a == NULL || (b = strstr(a += strlen(open), close)) == NULL) {
		return (-1);
	}
	EVP_Digest(a, (size_t)(b - a), h, &n, EVP_sha256(), NULL);
	EVP_EncodeBlock(b64, h, 32);
	snprintf(out, len, "'sha256-%s'", b64);
	return (0);
}

/* The page's Content-Security-Policy: its one script and one style, by
 * hash; nothing else runs, loads, frames it or is posted from it. */
int
page_init(void)
{
	char script[64], style[64];

	if (inline_hash("<script>", "</script>", script, sizeof(script)) !=
	            0 ||
	    inline_hash("<style>", "</style>", style, sizeof(style)) != 0) {
		return (-1);
	}
	snprintf(
	        csp, sizeof(csp),
	        "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	        script, style);
	return (0);
}

const char *
page_csp(void)
{
	return (csp);
}

void
route_page(req *r, const char *id, json_t *body)
{
	answer(r, 200, "text/html; charset=utf-8", status_html);
}

/* ---- probes ------------------------------------------------------------- */

void
route_healthz(req *r, const char *id, json_t *body)
{
	answer_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* The client ID metadata document (draft-ietf-oauth-client-id-metadata-
 * document) of a daemon with a public URL: authorization servers fetch
 * it to learn who client_id (its own URL) is.  Public, and nothing in it
 * is a secret. */
void
route_client_metadata(req *r, const char *id, json_t *body)
{
	if (D.client_metadata == NULL) {
		answer_error(
		        r, 404,
		        "no client ID metadata document is served: set server.client_metadata_url");
		return;
	}
	answer_json(r, 200, json_incref(D.client_metadata));
}

/* What the page's header shows: the version, this node, its readiness and
 * its store's health. */
void
route_status(req *r, const char *id, json_t *body)
{
	mk_stats st = MK_STATS_INIT;

	(void)id, (void)body;
	pthread_mutex_lock(&D.mtx);
	bool booting = D.booting;
	pthread_mutex_unlock(&D.mtx);
	r->boot        = booting;
	int  stats     = mk_runtime_stats(D.rt, &st, 2000);
	bool store_bad = stats != 0 || st.store_state == MK_STORE_FAILING;
	answer_json(r, 200,
	            json_pack("{s:s, s:s, s:b, s:b, s:s}", "version",
	                      MCPKEEP_VERSION, "node_id", mk_node_id(D.rt),
	                      "ready", !booting && !store_bad, "booting",
	                      booting, "store",
	                      stats != 0 ? "unknown"
	                              : st.store_state == MK_STORE_NONE
	                              ? "memory"
	                              : store_bad ? "failing"
	                                          : "healthy"));
}

void
route_readyz(req *r, const char *id, json_t *body)
{
	mk_stats st = MK_STATS_INIT;

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
}
