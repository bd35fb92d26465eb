/*
 * disc_impl.h - a discovery in progress, shared by discovery.c (its
 * steps), metadata.c (what the metadata it fetches may say) and
 * register.c (the client: configured, a metadata document, registered;
 * its token-endpoint authentication).  The credential actor's thread
 * only.
 */
#ifndef ACTORS_DISC_IMPL_H
#define ACTORS_DISC_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "actors/credential/cred_impl.h"

/* An initiate ask waiting for endpoints. */
typedef struct pend {
	uint64_t     corr;
	char        *mode;
	char        *identity;
	char        *by;    /* its requester, or NULL */
	bool         auth;  /* answer mcp_auth_required (a caller's flow) */
	bool         token; /* a client_credentials token, not a flow */
	bool         force; /* and fetched again even if not due */
	struct pend *next;
} pend;

/* A token whose refresh waits for a registration made again. */
typedef struct rewait {
	char          *key; /* the token's (looked up again at the end) */
	struct rewait *next;
} rewait;

struct disc {
	cclient *c;                   /* whose */
	int      step;                /* 0 probe, 1 prm, 2 as, 3 register */
	char     urls[4][OA_URL_MAX]; /* candidates of this step */
	int      nurls;               /* how many */
	int      at;                  /* the one being tried */
	char     scope[512];          /* from WWW-Authenticate */
	char     rm[OA_URL_MAX];      /* resource_metadata */
	oa_rules rules;               /* where discovered URLs may point */
	oa_net   net;                 /* the MCP server's address class */
	char     why[200];            /* why the first candidate failed */
	bool     hard;    /* a candidate of this step failed but for a 4xx */
	bool     legacy;  /* no protected-resource metadata (2025-03-26) */
	json_t  *meta;    /* being built */
	oa_req  *req;     /* in flight */
	pend    *waiting; /* asks for a flow */
	rewait  *tokens;  /* refreshes to resume */
	json_t  *prior;   /* a rediscovery: the meta it may keep */
};

/* discovery.c */
void  cr_disc_step(disc *d);                 /* runs the next step */
void  cr_disc_end(disc *d, const char *err); /* done (err NULL) or not */
disc *cr_disc_start_held(cclient *c);        /* set up, not yet stepped */
disc *cr_disc_start(cclient *c);             /* set up and stepped */
void  cr_pend_free(pend *p);                 /* NULL: nothing */

/* metadata.c */
/* cr_configured: oauth_config names url as key (trusted as configured) */
bool cr_configured(const cclient *c, const char *key, const char *url);
/* cr_rules_of: where URLs discovered for c may point, c's server in net */
void cr_rules_of(const cclient *c, oa_net net, oa_rules *r);
/* cr_url_ok: url, field of source, may be used; else why (never the URL) */
bool cr_url_ok(const disc *d, const char *url, const char *field,
               const char *source, char *why, size_t len);
bool cr_listed(const json_t *a, const char *s); /* a JSON array has s */
/* cr_as_meta_ok: AS metadata o may be used (its URLs, issuer, S256) */
bool cr_as_meta_ok(const disc *d, json_t *o, char *why, size_t len);
void cr_as_meta_keep(disc *d, json_t *o); /* what the flows need of o */
/* cr_resource_ok: the PRM's resource names this MCP server */
bool cr_resource_ok(const disc *d, const char *res, char *why, size_t len);
/* cr_legacy_next: every candidate of a step answered 4xx: the 2025-03-26
 * fallback, when there is one; whether discovery goes on */
bool cr_legacy_next(disc *d);

/* register.c */
const char *cr_register_method(const disc *d);   /* to register with */
const char *cr_configured_method(const disc *d); /* a configured client's */
const char *cr_granted_method(const disc *d, json_t *o); /* registration's */
/* cr_cimd_client: a client ID metadata document is the client_id: 1;
 * not used: 0; a bad URL: -1 (d ended) */
int  cr_cimd_client(disc *d);
void cr_issuer_kept(disc *d); /* a rediscovery found its issuer */
int  cr_rewait_add(disc *d, const token *t); /* t's refresh waits for d */

#endif /* ACTORS_DISC_IMPL_H */
