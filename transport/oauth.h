/*
 * oauth.h - the HTTP side of OAuth 2.1 for the credential actor: one
 * exchange with an authorization server or a protected resource (GET of
 * metadata, POST of a form or of JSON) on a tp_loop, and the pure pieces
 * around it: PKCE S256, random state, WWW-Authenticate parameters, the
 * discovery URLs of RFC 9728 and RFC 8414 / OpenID, form encoding, token
 * responses.  A leaf: no logging; every body is capped (OA_BODY_MAX); no
 * redirect is followed; nothing here ever puts a secret into an error.
 */
#ifndef TP_OAUTH_H
#define TP_OAUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/error.h"
#include "transport/loop.h"

#define OA_BODY_MAX      (512 * 1024) /* bytes of any answer kept */
#define OA_STATE_LEN     32           /* characters of a flow's state */
#define OA_VERIFIER_LEN  43           /* characters of a PKCE verifier */
#define OA_CHALLENGE_LEN 43           /* base64url of a SHA-256 */
#define OA_URL_MAX       2048         /* a discovery URL */

/*
 * Address classes, for the rules on where URLs taken from OAuth metadata
 * may point (SSRF): anything but OA_NET_PUBLIC is an address of this
 * host or of a network the runtime may sit in, and is allowed only when
 * the MCP server is in that class too (oa_rules).
 */
typedef enum oa_net {
	OA_NET_PUBLIC   = 0,  /* any other address, and a host name */
	OA_NET_LOOPBACK = 1,  /* 127.0.0.0/8, 0.0.0.0/8, ::1, ::, and the
	                       * names localhost and *.localhost */
	OA_NET_PRIVATE = 2,   /* 10/8, 172.16/12, 192.168/16, 100.64/10
	                       * (CGNAT), fc00::/7 */
	OA_NET_LINKLOCAL = 3, /* 169.254/16 (cloud metadata), fe80::/10 */
} oa_net;

#define OA_NET_BIT(n) (1u << (unsigned)(n))

/* What a URL taken from metadata may be (see oa_url_check). */
typedef struct oa_rules {
	bool     http; /* plain http to any host: the MCP server is http */
	unsigned nets; /* OA_NET_BIT of each non-public class allowed */
} oa_rules;

/* oa_url_check's verdicts. */
typedef enum oa_verdict {
	OA_URL_OK     = 0,   /* allowed */
	OA_URL_SCHEME = 1,   /* unparsable, or not http(s) */
	OA_URL_HTTP   = 2,   /* http to a host that is not loopback, while
	                      * the MCP server is https */
	OA_URL_USERINFO = 3, /* a user name or password in it */
	OA_URL_ADDRESS  = 4, /* its host is a literal address (or localhost)
	                      * of a class the rules do not allow */
} oa_verdict;

/* An exchange's outcome, valid during the callback only. */
typedef struct oa_reply {
	long             status;   /* HTTP status; 0 when none came */
	const char      *body;     /* NUL-terminated; "" when none */
	size_t           len;      /* bytes in body */
	const char      *www_auth; /* WWW-Authenticate; "" when none */
	const char      *ip;       /* the address connected to; "" none */
	const mcp_error *err;      /* NULL for a 2xx answer; else why not
	                            * (timeout, connect, http, auth, or the
	                            * guard refused the address); its
	                            * message never carries the body */
} oa_reply;

typedef void (*oa_fn)(void *arg, const oa_reply *r);

typedef struct oa_req oa_req;

/* A request to send. */
typedef struct oa_send {
	const char *url;    /* where */
	const char *form;   /* POST application/x-www-form-urlencoded */
	const char *json;   /* or POST application/json; both NULL: GET */
	const char *accept; /* the Accept header's value; NULL:
	                     * application/json */
	const char     *basic_id; /* client_secret_basic: client id, or NULL */
	const char     *basic_pass; /* and secret */
	const char     *bearer;     /* an access token to present, or NULL */
	int             timeout_ms; /* the whole exchange */
	const oa_rules *guard;      /* non-NULL: the address curl connects to
	                             * (after DNS; a reused connection's too)
	                             * must be public or of a class guard->nets
	                             * allows, else nothing is sent.  Behind a
	                             * proxy that is the proxy's address. */
} oa_send;

/*
 * oa_fetch starts the request in l.  fn runs exactly once, later, from
 * inside tp_loop_wait - unless oa_cancel comes first.  *rp (may be NULL)
 * gets a handle for oa_cancel, valid until fn runs.  Loop thread only.
 * Returns 0, or MK_ENOMEM (fn never runs).
 */
int oa_fetch(tp_loop *l, const oa_send *s, oa_fn fn, void *arg, oa_req **rp);

/* oa_cancel stops a request without calling its fn, and nulls *rp. */
void oa_cancel(oa_req **rp);

/* oa_random_state writes OA_STATE_LEN random URL-safe characters and a
 * NUL.  Returns 0 or MK_ESYS. */
int oa_random_state(char out[OA_STATE_LEN + 1]);

/* oa_pkce makes a verifier and its S256 challenge (NUL-terminated).
 * Returns 0 or MK_ESYS. */
int oa_pkce(char verifier[OA_VERIFIER_LEN + 1],
            char challenge[OA_CHALLENGE_LEN + 1]);

/* oa_challenge computes the S256 challenge of a verifier. */
void oa_challenge(const char *verifier, char challenge[OA_CHALLENGE_LEN + 1]);

/* oa_www_param copies parameter name (case-insensitive, quoted or a
 * token) of a WWW-Authenticate value into out.  Returns true if found. */
bool oa_www_param(const char *header, const char *name, char *out, size_t len);

/*
 * Discovery URLs, in the order to try them; each fills urls[] (n slots
 * of OA_URL_MAX) and returns how many, or 0 for a URL that is not http(s).
 *   oa_prm_urls       RFC 9728 protected-resource metadata of a resource:
 *                     path-based, then the root
 *   oa_as_meta_urls   RFC 8414 and OpenID configuration of an issuer,
 *                     with the issuer-path variants
 */
int oa_prm_urls(const char *resource, char urls[][OA_URL_MAX], int n);
int oa_as_meta_urls(const char *issuer, char urls[][OA_URL_MAX], int n);

/* oa_origin writes scheme://host[:port] of url.  Returns 0 or MK_EINVAL. */
int oa_origin(const char *url, char *out, size_t len);

/* oa_same_origin tells whether a and b are http(s) URLs with the same
 * scheme, host (case-insensitive) and port (the default one filled in). */
bool oa_same_origin(const char *a, const char *b);

/* oa_names_origin tells whether url is the origin origin itself, as
 * RFC 3986 section 6.2.3 compares http(s) URLs: the same scheme, host
 * (case-insensitive) and port (the default one filled in), an empty path
 * or "/", and no query, fragment or user name. */
bool oa_names_origin(const char *url, const char *origin);

/* oa_resource_covers tells whether resource, the protected-resource
 * metadata's identifier (RFC 9728), names the MCP server at url: the same
 * origin (scheme and host case-insensitive, default ports filled in), no
 * fragment, and a path that is url's or a parent of it on a '/' (the
 * root document's resource is the origin); trailing '/' ignored. */
bool oa_resource_covers(const char *resource, const char *url);
/* oa_net_of classifies a host as curl's URL API gives it: a literal IPv4
 * or IPv6 address (brackets allowed; IPv4-mapped IPv6 as its IPv4), or
 * a name (OA_NET_PUBLIC unless it is localhost or under .localhost). */
oa_net oa_net_of(const char *host);

/* oa_url_net is the class of url's host (OA_NET_PUBLIC when it does not
 * parse). */
oa_net oa_url_net(const char *url);

/*
 * oa_url_check says whether url, taken from OAuth metadata or a
 * WWW-Authenticate challenge, may be fetched, stored or shown: parsed by
 * curl's URL API, it must be https, or http to a loopback host, or http
 * when r->http; carry no user name or password; and its host, when a
 * literal address (or localhost), be public or of a class in r->nets.
 * A host name's addresses are checked when connecting (oa_send.guard).
 * scheme (slen bytes, may be NULL) gets the URL's scheme when it parsed
 * ("" when not): curl allows only letters, digits, '+', '-' and '.' in it.
 */
oa_verdict oa_url_check(const char *url, const oa_rules *r, char *scheme,
                        size_t slen);

/* oa_net_name: "public", "loopback", "private", "link-local". */
const char *oa_net_name(oa_net n);

/* oa_query_param is the value of parameter name of a query string
 * ("a=1&b=2", form-decoded: '+' is a space), malloc'd, or NULL when it
 * is absent (or out of memory).  The first one wins. */
char *oa_query_param(const char *query, const char *name);
/* oa_form_add appends "&key=value" (URL-encoded; no '&' first) to the
 * malloc'd form *f (NULL to start).  Returns 0 or MK_ENOMEM (*f freed
 * and NULL). */
int oa_form_add(char **f, const char *key, const char *value);

/*
 * oa_client_assertion signs a private_key_jwt client assertion (RFC 7523
 * section 2.2; OpenID Connect Core section 9): iss and sub client_id, aud
 * (the authorization server's issuer, or the token endpoint), a random
 * jti, 60 s of life; RS256 for an RSA key, ES256 for an EC P-256 one
 * (pem: the private key, PEM; kid, or NULL).
 * *out gets the JWT (malloc'd; a secret while it lives).  Returns 0, or
 * MK_EINVAL / MK_ENOMEM / MK_ESYS with why (never the key).
 */
int oa_client_assertion(const char *pem, const char *kid,
                        const char *client_id, const char *aud, char **out,
                        char *why, size_t wlen);

/* A token endpoint's answer. */
typedef struct oa_token {
	char   *access;     /* access_token */
	char   *refresh;    /* refresh_token, or NULL */
	char   *scope;      /* scope, or NULL */
	int64_t expires_in; /* seconds; 0 when not given */
} oa_token;

/*
 * oa_token_parse reads a 2xx token response.  Returns 0 with t filled
 * (oa_token_fini), or MK_EPROTO with why (one line, no secrets): not
 * JSON, no access_token, a token_type that is not Bearer.
 */
int  oa_token_parse(const char *body, size_t len, oa_token *t, char *why,
                    size_t whylen);
void oa_token_fini(oa_token *t);

/* oa_error_code copies the "error" of an OAuth error body ("" when none,
 * cut to len); never the description (it may echo input). */
void oa_error_code(const char *body, size_t len, char *out, size_t outlen);

#endif /* TP_OAUTH_H */
