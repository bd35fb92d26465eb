/*
 * oauth.c - OAuth exchanges and helpers (see oauth.h).
 */
#include "transport/oauth.h"

#include <ctype.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "mcpkeep.h"
#include "transport/xfer.h"

struct oa_req {
	tp_http  h;       /* the exchange */
	tp_loop *l;       /* its loop */
	oa_fn    fn;      /* completion */
	void    *arg;     /* its argument */
	oa_req **rp;      /* the caller's handle, nulled at the end */
	oa_rules guard;   /* the classes it may connect to (guarded) */
	bool     guarded; /* the address connected to is checked */
	oa_net   refused; /* the class refused; OA_NET_PUBLIC: none */
};

static void
req_free(oa_req *r)
{
	if (r->rp != NULL) {
		*r->rp = NULL;
	}
	tp_http_fini(&r->h);
	free(r);
}

static void
on_done(tp_xfer *x, CURLcode rc)
{
	oa_req   *r = (oa_req *)((char *)x - offsetof(oa_req, h.x));
	mcp_error e;
	oa_reply  rep;

	char *ip = NULL;

	curl_easy_getinfo(r->h.x.easy, CURLINFO_PRIMARY_IP, &ip);
	rep.status   = tp_http_status(&r->h);
	rep.body     = r->h.body != NULL ? r->h.body : "";
	rep.len      = r->h.body != NULL ? r->h.body_len : 0;
	rep.www_auth = r->h.www_auth;
	rep.ip       = ip != NULL ? ip : "";
	rep.err      = tp_http_error(&r->h, rc, false, &e) ? &e : NULL;
	if (r->refused != OA_NET_PUBLIC) {
		mcp_error_set(&e, MCP_E_CONNECT,
		              "refused to connect: the host's address is %s",
		              oa_net_name(r->refused));
		rep.err = &e;
	} else if (rep.err != NULL &&
	           (e.kind == MCP_E_HTTP || e.kind == MCP_E_GONE)) {
		/* the body may echo what was sent (a code, a secret) or
		 * carry anything at all: the status says enough */
		mcp_error_set(&e, MCP_E_HTTP, "HTTP %ld", rep.status);
	}
	if (r->rp != NULL) {
		/* before fn: it may free the holder, or start another */
		*r->rp = NULL;
		r->rp  = NULL;
	}
	r->fn(r->arg, &rep);
	req_free(r);
}

/* Base64 (url-safe and unpadded when url) of n bytes into out. */
static void
b64(const uint8_t *in, size_t n, char *out, bool url)
{
	int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);

	if (url) {
		for (int i = 0; i < len; i++) {
			out[i] = out[i] == '+'  ? '-'
			        : out[i] == '/' ? '_'
			                        : out[i];
		}
		while (len > 0 && out[len - 1] == '=') {
			out[--len] = '\0';
		}
	}
}

/* Before a request goes out on a connection (new or reused): its
 * address must be of a class the guard allows. */
static int
on_prereq(void *arg, char *ip, char *local_ip, int port, int local_port)
{
	oa_req *r = arg;
	oa_net  n = oa_net_of(ip);

	(void)local_ip;
	(void)port;
	(void)local_port;
	if (n != OA_NET_PUBLIC && (r->guard.nets & OA_NET_BIT(n)) == 0) {
		r->refused = n;
		return (CURL_PREREQFUNC_ABORT);
	}
	return (CURL_PREREQFUNC_OK);
}

int
oa_fetch(tp_loop *l, const oa_send *s, oa_fn fn, void *arg, oa_req **rp)
{
	struct curl_slist *hdrs = NULL;
	oa_req            *r;
	char               line[4096];

	if (rp != NULL) {
		*rp = NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		return (MK_ENOMEM);
	}
	snprintf(line, sizeof(line), "Accept: %.4000s",
	         s->accept != NULL ? s->accept : "application/json");
	hdrs = tp_slist_add(hdrs, line);
	if (s->form != NULL) {
		hdrs = tp_slist_add(
		        hdrs,
		        "Content-Type: application/x-www-form-urlencoded");
	} else if (s->json != NULL) {
		hdrs = tp_slist_add(hdrs, "Content-Type: application/json");
	}
	if (s->basic_id != NULL) {
		/* RFC 6749 2.3.1: both parts form-encoded before base64 */
		char *id   = curl_easy_escape(NULL, s->basic_id, 0);
		char *pass = curl_easy_escape(
		        NULL, s->basic_pass != NULL ? s->basic_pass : "", 0);
		char pair[1024], enc[1400];
		snprintf(pair, sizeof(pair), "%s:%s", id ? id : "",
		         pass ? pass : "");
		curl_free(id);
		curl_free(pass);
		b64((const uint8_t *)pair, strlen(pair), enc, false);
		snprintf(line, sizeof(line), "Authorization: Basic %s", enc);
		hdrs = tp_slist_add(hdrs, line);
		OPENSSL_cleanse(pair, sizeof(pair));
		OPENSSL_cleanse(line, sizeof(line));
	} else if (s->bearer != NULL) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s",
		         s->bearer);
		hdrs = tp_slist_add(hdrs, line);
		OPENSSL_cleanse(line, sizeof(line));
	}
	if (hdrs == NULL ||
	    tp_http_init(&r->h, s->url, hdrs, true, s->timeout_ms, NULL,
	                 OA_BODY_MAX, on_done) != 0) {
		if (hdrs != NULL && r->h.x.easy == NULL) {
			curl_slist_free_all(hdrs);
		}
		tp_http_fini(&r->h);
		free(r);
		return (MK_ENOMEM);
	}
	r->l   = l;
	r->fn  = fn;
	r->arg = arg;
	r->rp  = rp;
	if (s->guard != NULL) {
		r->guard   = *s->guard;
		r->guarded = true;
		curl_easy_setopt(r->h.x.easy, CURLOPT_PREREQFUNCTION,
		                 on_prereq);
		curl_easy_setopt(r->h.x.easy, CURLOPT_PREREQDATA, r);
	}
	if (rp != NULL) {
		*rp = r;
	}
	const char *body = s->form != NULL ? s->form : s->json;
	if ((body != NULL ? tp_http_post(&r->h, l, body, strlen(body))
	                  : tp_loop_add(l, &r->h.x)) != 0) {
		req_free(r);
		return (MK_ENOMEM);
	}
	return (0);
}

void
oa_cancel(oa_req **rp)
{
	oa_req *r;

	if (rp == NULL || (r = *rp) == NULL) {
		return;
	}
	tp_loop_remove(r->l, &r->h.x);
	req_free(r);
}

int
oa_random_state(char out[OA_STATE_LEN + 1])
{
	uint8_t raw[24];
	char    enc[40];

	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		return (MK_ESYS);
	}
	b64(raw, sizeof(raw), enc, true); /* 24 bytes: 32 characters */
	memcpy(out, enc, OA_STATE_LEN);
	out[OA_STATE_LEN] = '\0';
	return (0);
}

void
oa_challenge(const char *verifier, char challenge[OA_CHALLENGE_LEN + 1])
{
	uint8_t      md[32];
	unsigned int n;
	char         enc[48];

	EVP_Digest(verifier, strlen(verifier), md, &n, EVP_sha256(), NULL);
	b64(md, sizeof(md), enc, true);
	memcpy(challenge, enc, OA_CHALLENGE_LEN);
	challenge[OA_CHALLENGE_LEN] = '\0';
}

int
oa_pkce(char verifier[OA_VERIFIER_LEN + 1],
        char challenge[OA_CHALLENGE_LEN + 1])
{
	uint8_t raw[32];
	char    enc[48];

	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		return (MK_ESYS);
	}
	b64(raw, sizeof(raw), enc, true); /* 32 bytes: 43 characters */
	memcpy(verifier, enc, OA_VERIFIER_LEN);
	verifier[OA_VERIFIER_LEN] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	oa_challenge(verifier, challenge);
	return (0);
}

bool
oa_www_param(const char *h, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = h; p != NULL && *p != '\0'; p++) {
		if ((p == h || p[-1] == ' ' || p[-1] == ',' ||
		     p[-1] == '\t') &&
		    strncasecmp(p, name, nl) == 0 && p[nl] == '=') {
			const char *v = p + nl + 1;
			size_t      n = 0;
			if (*v == '"') {
				v++;
				while (v[n] != '\0' && v[n] != '"') {
					n++;
				}
			} else {
				while (v[n] != '\0' && v[n] != ',' &&
				       v[n] != ' ') {
					n++;
				}
			}
			if (n >= len) {
				return (false);
			}
			memcpy(out, v, n);
			out[n] = '\0';
			return (true);
		}
	}
	return (false);
}

char *
oa_query_param(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p != NULL && *p != '\0';) {
		const char *amp = strchr(p, '&');
		size_t      len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
			/* form encoding: '+' is a space (a '+' is %2B) */
			char *raw = strndup(p + n + 1, len - n - 1), *v;
			for (char *c = raw; c != NULL && *c != '\0'; c++) {
				*c = *c == '+' ? ' ' : *c;
			}
			v = raw != NULL
			        ? curl_easy_unescape(NULL, raw, 0, NULL)
			        : NULL;
			free(raw);
			if (v == NULL) {
				return (NULL);
			}
			/* (curl's memory goes back to curl) */
			raw = strdup(v);
			curl_free(v);
			return (raw);
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return (NULL);
}

/* base64url of the JSON text of o into out (len bytes); 0 or -1. */
static int
b64_json(json_t *o, char *out, size_t len)
{
	char  *t  = json_dumps(o, JSON_COMPACT);
	size_t n  = t != NULL ? strlen(t) : 0;
	int    rv = -1;

	if (t != NULL && (n + 2) / 3 * 4 + 1 <= len) {
		b64((const uint8_t *)t, n, out, true);
		rv = 0;
	}
	free(t);
	return (rv);
}

/* An ECDSA signature (DER) as JOSE wants it: r || s, each n bytes. */
static int
ecdsa_raw(const uint8_t *der, size_t dlen, uint8_t *out, int n)
{
	ECDSA_SIG    *sig = d2i_ECDSA_SIG(NULL, &der, (long)dlen);
	const BIGNUM *r, *s;
	int           rv = -1;

	if (sig != NULL) {
		ECDSA_SIG_get0(sig, &r, &s);
		if (BN_bn2binpad(r, out, n) == n &&
		    BN_bn2binpad(s, out + n, n) == n) {
			rv = 0;
		}
		ECDSA_SIG_free(sig);
	}
	return (rv);
}

int
oa_client_assertion(const char *pem, const char *kid, const char *client_id,
                    const char *aud, char **out, char *why, size_t wlen)
{
	BIO        *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY   *key = bio != NULL
	          ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)
	          : NULL;
	EVP_MD_CTX *md  = EVP_MD_CTX_new();
	bool        ec  = key != NULL && EVP_PKEY_base_id(key) == EVP_PKEY_EC;
	char        head[512], body[2048], jti[OA_STATE_LEN + 1], *jwt = NULL;
	uint8_t     sig[1024], raw[132];
	size_t      slen = sizeof(sig);
	int64_t     now  = (int64_t)time(NULL);
	json_t     *h, *c;
	int         rv = MK_EINVAL;

	*out = NULL;
	BIO_free(bio);
	if (key == NULL || (!ec && EVP_PKEY_base_id(key) != EVP_PKEY_RSA) ||
	    (ec && EVP_PKEY_bits(key) != 256)) {
		snprintf(
		        why, wlen,
		        "oauth_config.private_key is not a PEM RSA or EC P-256 private key");
		goto out;
	}
	h = json_pack("{s:s, s:s}", "alg", ec ? "ES256" : "RS256", "typ",
	              "JWT");
	if (kid != NULL) {
		json_object_set_new(h, "kid", json_string(kid));
	}
	/* RFC 7523 section 3: iss and sub the client, aud the token
	 * endpoint, a one-use jti, a short life */
	c  = oa_random_state(jti) == 0
	         ? json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "iss", client_id,
	                     "sub", client_id, "aud", aud, "jti", jti, "iat",
	                     (json_int_t)now, "exp", (json_int_t)(now + 60))
	         : NULL;
	rv = h != NULL && c != NULL && b64_json(h, head, sizeof(head)) == 0 &&
	                b64_json(c, body, sizeof(body)) == 0
	        ? 0
	        : MK_ENOMEM;
	json_decref(h);
	json_decref(c);
	if (rv != 0) {
		snprintf(why, wlen, "out of memory");
		goto out;
	}
	/* the signing input, then '.' and the signature, in one buffer */
	size_t n = strlen(head) + 1 + strlen(body);
	if (md == NULL ||
	    (jwt = malloc(n + 2 + sizeof(sig) * 4 / 3 + 4)) == NULL) {
		snprintf(why, wlen, "out of memory");
		rv = MK_ENOMEM;
		goto out;
	}
	snprintf(jwt, n + 1, "%s.%s", head, body);
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, sig, &slen, (const uint8_t *)jwt, n) != 1 ||
	    (ec && ecdsa_raw(sig, slen, raw, 32) != 0)) {
		free(jwt);
		snprintf(why, wlen,
		         "the client assertion could not be signed");
		rv = MK_ESYS;
		goto out;
	}
	jwt[n] = '.';
	b64(ec ? raw : sig, ec ? 64 : slen, jwt + n + 1, true);
	*out = jwt;
out:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	return (rv);
}

int
oa_form_add(char **f, const char *key, const char *value)
{
	char  *v   = curl_easy_escape(NULL, value, 0);
	size_t old = *f != NULL ? strlen(*f) : 0;
	size_t add = strlen(key) + (v != NULL ? strlen(v) : 0) + 3;
	char  *nf  = v != NULL ? realloc(*f, old + add) : NULL;

	if (nf == NULL) {
		if (*f != NULL) {
			OPENSSL_cleanse(*f, old);
		}
		free(*f);
		*f = NULL;
		curl_free(v);
		return (MK_ENOMEM);
	}
	snprintf(nf + old, add, "%s%s=%s", old ? "&" : "", key, v);
	OPENSSL_cleanse(v, strlen(v));
	curl_free(v);
	*f = nf;
	return (0);
}

static char *
dup_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return (s != NULL && *s != '\0' ? strdup(s) : NULL);
}

int
oa_token_parse(const char *body, size_t len, oa_token *t, char *why,
               size_t whylen)
{
	json_t     *o = json_loadb(body, len, 0, NULL);
	const char *type;
	json_t     *exp;

	memset(t, 0, sizeof(*t));
	if (!json_is_object(o)) {
		snprintf(why, whylen,
		         "the token endpoint's answer is not a JSON object");
		json_decref(o);
		return (MK_EPROTO);
	}
	type = json_string_value(json_object_get(o, "token_type"));
	if (type != NULL && strcasecmp(type, "bearer") != 0) {
		snprintf(why, whylen, "unsupported token_type %.40s", type);
		json_decref(o);
		return (MK_EPROTO);
	}
	if ((t->access = dup_str(o, "access_token")) == NULL) {
		snprintf(why, whylen,
		         "the token endpoint's answer has no access_token");
		json_decref(o);
		return (MK_EPROTO);
	}
	t->refresh    = dup_str(o, "refresh_token");
	t->scope      = dup_str(o, "scope");
	exp           = json_object_get(o, "expires_in");
	t->expires_in = json_is_integer(exp) ? json_integer_value(exp)
	        : json_is_real(exp)          ? (int64_t)json_real_value(exp)
	        : json_is_string(exp)
	        ? strtoll(json_string_value(exp), NULL, 10)
	        : 0;
	if (t->expires_in < 0) {
		t->expires_in = 0;
	}
	json_decref(o);
	return (0);
}

void
oa_token_fini(oa_token *t)
{
	if (t->access != NULL) {
		OPENSSL_cleanse(t->access, strlen(t->access));
	}
	if (t->refresh != NULL) {
		OPENSSL_cleanse(t->refresh, strlen(t->refresh));
	}
	free(t->access);
	free(t->refresh);
	free(t->scope);
	memset(t, 0, sizeof(*t));
}

void
oa_error_code(const char *body, size_t len, char *out, size_t outlen)
{
	json_t     *o = json_loadb(body, len, 0, NULL);
	const char *e = json_string_value(json_object_get(o, "error"));
	size_t      n = 0;

	/* a code is a token: keep only its characters */
	if (e != NULL) {
		for (; e[n] != '\0' && n + 1 < outlen &&
		     (isalnum((unsigned char)e[n]) || e[n] == '_' ||
		      e[n] == '-' || e[n] == '.');
		     n++) {
			out[n] = e[n];
		}
	}
	out[n] = '\0';
	json_decref(o);
}
