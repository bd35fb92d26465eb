/*
 * cred_impl.h - the credential actor's private state, shared by its
 * files: actor.c (dispatch, clients, tokens, the store, notifications),
 * discovery.c (OAuth endpoints: configured, discovered, registered),
 * flow.c (authorization-code flows), pending.c (the bound on callers'
 * pending flows, their sweep at expiry), refresh.c (when a token is due,
 * single-flight refresh, refresh ahead of expiry; its states are
 * tokstate.h's), lease.c (a refresh's lease in a cluster), user.c (a
 * caller's ask by auth type, the caches of callers' credentials and their
 * fills),
 * headers.c (per-user header credentials and flows), exchange.c (token
 * exchange), stepup.c (scope step-up).  Touched only by the actor's thread:
 * every function here runs on it, and none blocks (the store and the
 * authorization servers are asked asynchronously).
 */
#ifndef ACTORS_CRED_IMPL_H
#define ACTORS_CRED_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/credential/credential.h"
#include "actors/credential/tokstate.h"
#include "codec/lru.h"
#include "codec/strmap.h"
#include "model/config.h"
#include "transport/oauth.h"

typedef struct cr_self cr_self;

/* The string member key of a JSON object (a row, a reply), or NULL when
 * it is missing or not a string. */
static inline const char *
cr_str(const json_t *o, const char *key)
{
	return (json_string_value(json_object_get(o, key)));
}

/* The endpoint (or setting) key of a client's meta, or NULL when it is
 * missing, empty or not a string. */
static inline const char *
cr_meta_str(const json_t *m, const char *key)
{
	const char *s = cr_str(m, key);

	return (s != NULL && *s != '\0' ? s : NULL);
}

/* Whether c's oauth_config asks for the client_credentials grant (the
 * client acts on its own behalf: no browser, no flow). */
#define cr_client_credentials(c) cfg_oauth_alone((c)->auth, (c)->oauth)

#define CR_TYPE_ID_JAG "urn:ietf:params:oauth:token-type:id-jag"

/* Whether c is a token_exchange client of enterprise-managed
 * authorization: its exchange asks the enterprise IdP for an ID-JAG,
 * which the MCP server's authorization server (oauth_config: configured
 * or discovered) redeems for the access token. */
#define cr_id_jag(c)                                                          \
	((c)->auth == CFG_AUTH_TOKEN_EXCHANGE &&                              \
	 cr_str((c)->exchange, "requested_token_type") != NULL &&             \
	 strcmp(cr_str((c)->exchange, "requested_token_type"),                \
	        CR_TYPE_ID_JAG) == 0)

/* An ask waiting for a token (a refresh, or a discovery). */
typedef struct tokw {
	uint64_t     corr; /* the deferred ask */
	struct tokw *next;
} tokw;

/* A token of one client, identity mode and identity. */
typedef struct token {
	strmap_ent ent;        /* key: "client\x1fmode\x1fidentity" */
	char      *key;        /* owns ent.key */
	char      *client_id;  /* its client */
	char      *mode;       /* shared, admin, user, vk, session */
	char      *identity;   /* "" for shared and admin */
	char      *access;     /* access token (secret) */
	char      *refresh;    /* refresh token (secret), or NULL */
	char      *scopes;     /* granted scopes, or NULL */
	int64_t    expires_ms; /* unix ms; 0: no expiry given */
	int64_t    life_ms;    /* its lifetime when issued; 0: unknown */
	int64_t    refreshed;  /* unix seconds of the last refresh */
	int64_t    done_ns;    /* its last token request ended (mono), 0 */
	bool       active;     /* false: needs_reauth */
	bool       cache;      /* a caller's: in cr->tlru, filled on demand */
	bool       ephemeral;  /* an exchange result: memory only */
	char       err[64];    /* a caller's: the rejection's error code */
	lru_link   lru;        /* cache: its place in cr->tlru */
	tokw      *waiters;    /* asks waiting for the refresh */
	int        stepups;    /* step-ups in a row for scopes it holds */
	uint64_t   ahead;      /* refresh-ahead timer, 0 none */
	/* its refresh (tokstate.h), changed by cr_tok_enter alone */
	tok_state    state;
	uint64_t     timer; /* WAITING, PEER, UNSURE: its timer, 0 none */
	struct lctx *take;  /* LEASING, UNSURE: the take asked, or NULL */
	oa_req      *req;   /* REFRESHING: the request in flight */
	tr_span     *span;  /* and its span, or NULL */
	char        *jag;   /* REFRESHING: an ID-JAG redeemed (secret) */
	/* what this refresh has done so far (IDLE: nothing) */
	char    *prior;       /* the refresh token it spends (CAS) */
	int      attempt;     /* its transient failures */
	bool     rereg;       /* it registered its client again (once) */
	int64_t  lease_gen;   /* the refresh lease held (lease.c), 0 none */
	int      lease_polls; /* looks at the row so far */
	cr_self *cr;          /* owner */
} token;

/* An identity's (or the admin's) header credential. */
typedef struct hcred {
	strmap_ent ent;       /* key: "client\x1fmode\x1fidentity" */
	char      *key;       /* owns ent.key */
	char      *client_id; /* its client */
	char      *mode;      /* admin, user, vk, session */
	char      *identity;  /* "" for admin */
	char      *headers;   /* "Name: value" lines, '\n' between (secret) */
	lru_link   lru;       /* a caller's: its place in cr->hlru */
} hcred;
#define HCRED_OF(l) ((hcred *)((char *)(l)-offsetof(hcred, lru)))

/* A caller's pending header submission. */
typedef struct hflow {
	strmap_ent ent;                  /* key: id */
	char       id[OA_STATE_LEN + 1]; /* random */
	char      *client_id;            /* whose */
	char      *mode;                 /* for which identity */
	char      *identity;
	int64_t    expires_at; /* unix seconds */
	lru_link   q;          /* in cr->hflowq, soonest expiry oldest */
	char      *by;         /* its requester's, or NULL */
	bool       counted;    /* in its client's CR_USER_FLOWS_MAX */
	bool       storing;    /* its submitted credential is being written */
} hflow;

/* A discovery (and registration) of a client's endpoints in progress. */
typedef struct disc disc;

/* A registered MCP client (what the credential actor knows of it). */
typedef struct cclient {
	strmap_ent ent;      /* key: id */
	strmap_ent nent;     /* key: name */
	char      *id;       /* client id */
	char      *name;     /* client name */
	cfg_auth   auth;     /* auth type */
	bool       sticky;   /* connection mode */
	char      *url;      /* the MCP server: the protected resource */
	json_t    *oauth;    /* oauth_config as configured, or NULL */
	json_t    *exchange; /* token_exchange as configured, or NULL */
	json_t    *keys;     /* per_user_header_keys, or NULL */
	json_t    *meta;     /* resolved: authorize_url, token_url,
	                      * registration_url, client_id, client_secret,
	                      * auth_method, scope, resource; NULL until known */
	disc    *disc;       /* discovery in progress, or NULL */
	cr_self *cr;         /* owner */
} cclient;

/* An authorization-code flow waiting for its callback. */
typedef struct flow {
	strmap_ent ent;                     /* key: state */
	char       state[OA_STATE_LEN + 1]; /* the random state */
	char      *client_id;               /* whose */
	char      *mode;                    /* for which token */
	char      *identity;
	char      *verifier;   /* PKCE verifier (secret) */
	char      *redirect;   /* redirect_uri sent */
	char      *by;         /* its requester's, or NULL */
	int64_t    expires_at; /* unix seconds */
	bool       claiming;   /* the code is being exchanged */
	lru_link   q;          /* in cr->flowq while pending (not claimed),
	                        * soonest expiry oldest */
	bool counted;          /* a caller's: in its client's
	                        * CR_USER_FLOWS_MAX */
	oa_req  *req;          /* that exchange */
	uint64_t corr;         /* the complete ask */
	cr_self *cr;           /* owner */
} flow;

struct cr_self {
	kn_actor *self;       /* this actor */
	kn_actor *ps;         /* persister (held), or NULL */
	int64_t   ticket;     /* non-zero: the next write is acknowledged */
	tp_loop  *loop;       /* curl multi for AS exchanges */
	char     *redirect;   /* the OAuth callback URL */
	char     *cimd_url;   /* the host's client ID metadata document, or
	                       * NULL */
	strmap   clients;     /* id -> cclient */
	strmap   names;       /* name -> cclient (nent) */
	strmap   tokens;      /* key -> token */
	strmap   flows;       /* state -> flow */
	strmap   hcreds;      /* key -> hcred */
	strmap   hflows;      /* id -> hflow */
	lru      tlru;        /* callers' tokens (and exchange results) */
	lru      hlru;        /* callers' header credentials */
	strmap   fills;       /* key -> a fill from the store in flight */
	uint64_t gen;         /* bumped by every explicit eviction: a fill
	                       * that raced one is discarded */
	uint64_t nfills;      /* fills asked of the store */
	uint64_t evicted;     /* entries explicitly evicted */
	uint64_t exchanges;   /* token-exchange requests sent */
	json_t  *saved;       /* stored endpoint sets: client id -> meta, until
	                       * the client registers */
	uint64_t   refreshes; /* refresh requests sent */
	uint64_t   joins;     /* asks that joined one in flight */
	uint64_t   token_requests; /* every token-endpoint request */
	uint64_t   ntokens;        /* tokens held */
	uint64_t   nflows;         /* flows pending */
	uint64_t   nhflows;        /* header flows pending */
	lru        flowq;          /* pending OAuth flows by expiry */
	lru        hflowq;         /* pending header flows by expiry */
	strmap     pending;        /* client id -> its callers' flows */
	strmap     pending_by;     /* requester -> the flows it started */
	uint64_t   sweep;          /* the sweep timer, 0 none */
	int64_t    sweep_at;       /* when it fires (unix ms) */
	uint64_t   swept;          /* flows dropped at expiry */
	bool       cluster;        /* a shared store: refreshes leased */
	tr_tracer *tracer;         /* spans' exporter, or NULL */
};

/* lease.c: one refresh per token across a cluster */
void cr_lease_take(cr_self *cr, token *t);
void cr_lease_put(cr_self *cr, token *t);
/* cr_lease_release releases the lease t holds (when it holds one). */
void cr_lease_release(token *t);
/* cr_lease_unsure: t's refresh, sent without a lease (the store away),
 * was refused as spent; another node may have spent it first.  Nothing
 * is stored: its row is looked at once the store is back (lease.c). */
void cr_lease_unsure(cr_self *cr, token *t);
int  cr_on_row_changed(kn_actor *self, cr_self *cr, kn_msg *msg,
                       cr_row_changed_msg *m);
/* cr_resync reads every OAuth client's config row and its shared (or
 * admin) token row again, as if each was told changed: what another
 * node wrote while this one did not listen is taken (lease.c). */
void cr_resync(cr_self *cr);
/* cr_meta_take takes an oauth_configs row (a ps_found_msg's payload)
 * another node wrote as its client's endpoints, when it is for the
 * client's configured part. */
void cr_meta_take(cr_self *cr, const void *data, size_t len);

/* actor.c */
/* cr_unpersist deletes a row of table by key without a wait: an expired
 * flow's (a row a crash leaves behind is swept again after the
 * restart), so a sweep of thousands is one batched write, not thousands
 * of durable ones */
void     cr_unpersist(cr_self *cr, const char *table, json_t *key);
int64_t  cr_now(void);    /* unix seconds */
int64_t  cr_now_ms(void); /* unix ms */
cclient *cr_client(cr_self *cr, const char *id_or_name);
token   *cr_token(cr_self *cr, const char *client, const char *mode,
                  const char *identity, bool create);
/* cr_token_key writes a token's cr->tokens key into buf (len at least
 * CR_TOKEN_KEY_MAX; longer names are cut, as cr_token cuts them). */
#define CR_TOKEN_KEY_MAX 512
void cr_token_key(char *buf, size_t len, const char *client, const char *mode,
                  const char *identity);
void cr_token_store(cr_self *cr, token *t);
void cr_token_free(cr_self *cr, token *t);
/* cr_notify tells a client actor its credential changed.  Told before the
 * answer to the request that changed it goes out: every sender shares the
 * client's one inbox queue, so what the caller sends once answered (a
 * tool call right after verify-headers) finds the client told. */
void cr_notify(cr_self *cr, const char *client_id, const char *status,
               const char *message);
void cr_answer_token(cr_self *cr, token *t, uint64_t corr);
void cr_reply_error(cr_self *cr, uint64_t corr, int status, const char *why,
                    const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
int cr_persist(cr_self *cr, const char *table, json_t *row, bool del,
               kn_reply_fn fn, void *arg);
/* cr_token_row is t as a row of oauth_tokens (new reference, or NULL) */
json_t *cr_token_row(const token *t);

/* pending.c: the callers' pending flows */
/* cr_flow_room sweeps expired flows, then tells whether client, and the
 * requester by (NULL: none), may have one more caller's flow of a kind
 * (header: a header flow, else an OAuth one): 0, or MK_EBUSY with an
 * error answered to corr */
int cr_flow_room(cr_self *cr, const cclient *c, const char *by, bool header,
                 uint64_t corr);
/* cr_flow_count adds delta to the callers' flows of a kind of client and
 * of the requester by (NULL: none) */
void cr_flow_count(cr_self *cr, const char *client, const char *by,
                   bool header, int delta);
/* cr_sweep_arm sweeps at most max expired flows now and makes sure the
 * sweep runs again when the soonest flow left expires (at once when
 * expired ones are left): a sweep of thousands never holds the actor */
#define CR_SWEEP_BATCH 64
void cr_sweep_arm(cr_self *cr, int max);
/* cr_rows_by_expiry sorts rows (a JSON array) by expires_at, soonest
 * first, so restored flows queue in order */
void cr_rows_by_expiry(json_t *rows);
/* cr_pending_fini frees the counts (the sweep timer is the actor's) */
void cr_pending_fini(cr_self *cr);

/* discovery.c: a client's OAuth endpoints */
void cr_meta_restore(cr_self *cr, json_t *rows);
void cr_disc_free(disc *d);
/* cr_flow_for answers corr with a new flow for (mode, identity), started
 * through the requester by (NULL: none): its authorize URL, or (auth) an
 * mcp_auth_required carrying it; endpoints are resolved first when
 * needed */
void cr_flow_for(cr_self *cr, cclient *c, const char *mode,
                 const char *identity, const char *by, uint64_t corr,
                 bool auth);
/* cr_guard gives the rules (in r) for fetching c's endpoint key of
 * c->meta when it was discovered, or NULL when oauth_config names it
 * (trusted as configured) */
const oa_rules *cr_guard(const cclient *c, const char *key, oa_rules *r);
/* cr_reregister: the authorization server answered invalid_client for
 * c's dynamic registration: it is made again, once (c->meta replaced and
 * stored when it is done); t, when not NULL, is a token whose refresh
 * then resumes (cr_refresh_resume).  MK_EINVAL: c's client is configured,
 * not registered; MK_ENOMEM. */
int cr_reregister(cclient *c, const token *t);
/* cr_registered: c's client was registered dynamically (not configured):
 * the authorization server may lose it (cr_reregister). */
bool cr_registered(const cclient *c);
/* cr_disc_token: t's token request needs c's endpoints: they are
 * resolved first (a discovery started or joined); when one is still
 * under way (c->disc), the request resumes after it (cr_refresh_resume).
 * 0 or MK_ENOMEM. */
int cr_disc_token(cclient *c, token *t);
/* cr_rediscover: c's discovered endpoints are discovered again (flows
 * asked meanwhile wait).  The registration is kept when the issuer is
 * the same; an authorization server that changed issuer voids it and
 * every token of c (needs_reauth: credentials are keyed by issuer).
 * Nothing to do for configured endpoints.  0 or MK_ENOMEM. */
int cr_rediscover(cclient *c);
/* cr_void_tokens: every token of c is needs_reauth (the shared and the
 * admin's stored so, callers' dropped from the caches), c told why */
void cr_void_tokens(cr_self *cr, cclient *c, const char *why);
/* cr_meta_store writes c->meta to the store (no wait) */
void cr_meta_store(cclient *c);
/* stepup.c: cr_step_up answers corr for a 403 insufficient_scope of
 * (c, mode, identity) needing the scopes need (space-separated) */
void cr_step_up(cr_self *cr, cclient *c, const char *mode,
                const char *identity, const char *need, uint64_t corr);
/* cr_same_issuer: two issuer identifiers are the same but for one
 * trailing '/' */
bool cr_same_issuer(const char *a, const char *b);
/* the client auth of a token request: fills basic id/secret or adds
 * client_id (and secret) to the form */
int cr_client_auth(const cclient *c, char **form, oa_send *s);

/* flow.c: authorization-code flows */
int  cr_on_initiate(kn_actor *self, cr_self *cr, kn_msg *msg,
                    cr_initiate_msg *m);
int  cr_on_complete(kn_actor *self, cr_self *cr, kn_msg *msg,
                    cr_complete_msg *m);
void cr_flow_free(flow *f);
void cr_flows_restore(cr_self *cr, json_t *rows);
/* cr_flows_sweep drops up to *max expired pending OAuth flows (and their
 * rows), less *max by those it dropped; gives the soonest expiry left
 * (unix seconds: past when it stopped at max), 0 none */
int64_t cr_flows_sweep(cr_self *cr, int *max);
/* cr_make_flow is cr_flow_for once c->meta is known: the flow stored,
 * then corr answered */
void cr_make_flow(cr_self *cr, cclient *c, const char *mode,
                  const char *identity, const char *by, uint64_t corr,
                  bool auth);

/* user.c: a caller's credential, the caches and their fills */
/* A caller's ask for its credential. */
typedef struct cr_ask {
	const char *mode;     /* the identity's mode */
	const char *identity; /* and the identity */
	const char *subject;  /* token_exchange: its token, or NULL */
	const char *by;       /* who answers for a flow it starts, or NULL */
	bool        force;    /* refreshed even when not due */
} cr_ask;
/* cr_user_get answers corr with the credential of the ask's identity
 * for c, by c's auth type (headers.c, exchange.c, per_user_oauth here):
 * from the cache, else (filled false) filled from the store and asked
 * again, else a flow or mcp_auth_required */
void cr_user_get(cr_self *cr, cclient *c, const cr_ask *a, uint64_t corr,
                 bool filled);
/* cr_fill_start reads the caller's row of table (STORE_OAUTH_TOKENS or
 * _HEADER_CREDENTIALS) into the cache, one read per key at a time, then
 * runs cr_user_get again with filled */
void cr_fill_start(cr_self *cr, cclient *c, int table, const cr_ask *a,
                   uint64_t corr);
/* cr_auth_reply answers MK_EAUTH with an mcp_auth_required payload of
 * kind, extra fields merged in */
void cr_auth_reply(cr_self *cr, uint64_t corr, const cclient *c,
                   const char *kind, json_t *extra, const char *message);
void cr_user_fini(cr_self *cr);
void cr_lru_touch(cr_self *cr, token *t);
void cr_lru_drop(cr_self *cr, token *t);
int  cr_on_evict(kn_actor *self, cr_self *cr, kn_msg *msg, cr_evict_msg *m);
/* cr_evict_client drops every cached credential of client (explicit:
 * the generation moves) */
void cr_evict_client(cr_self *cr, const char *client);
bool cr_callers_mode(const char *mode);

/* headers.c: per_user_headers */
/* cr_headers_get is cr_user_get for a per_user_headers client */
void cr_headers_get(cr_self *cr, cclient *c, const cr_ask *a, uint64_t corr,
                    bool filled);
int  cr_on_verify_headers(kn_actor *self, cr_self *cr, kn_msg *msg,
                          cr_verify_headers_msg *m);
int  cr_on_submit_headers(kn_actor *self, cr_self *cr, kn_msg *msg,
                          cr_submit_headers_msg *m);
void cr_hcreds_restore(cr_self *cr, json_t *rows);
void cr_hflows_restore(cr_self *cr, json_t *rows);
/* cr_hflows_sweep: cr_flows_sweep for header flows */
int64_t cr_hflows_sweep(cr_self *cr, int *max);
/* cr_hcred_set sets (creating) the header credential of (client, mode,
 * identity), taking headers (freed on failure); NULL out of memory */
hcred *cr_hcred_set(cr_self *cr, const char *client, const char *mode,
                    const char *identity, char *headers);
/* cr_hcred_drop forgets h (from the cache, not the store) */
void cr_hcred_drop(cr_self *cr, hcred *h);
/* cr_headers_fini frees every header credential and header flow */
void cr_headers_fini(cr_self *cr);

/* exchange.c: token_exchange */
/* cr_exchange_get is cr_user_get for a token_exchange client: the
 * admin's token, or the caller's exchanged from subject */
void cr_exchange_get(cr_self *cr, cclient *c, const char *mode,
                     const char *identity, const char *subject, bool force,
                     uint64_t corr);
int  cr_on_verify_exchange(kn_actor *self, cr_self *cr, kn_msg *msg,
                           cr_verify_exchange_msg *m);
/* cr_cache_identity is the cache identity of (identity, subject):
 * identity, '\x1f', then 16 hex of SHA-256 of the subject token */
void cr_cache_identity(const char *identity, const char *subject, char *out,
                       size_t len);

/* refresh.c */
/* cr_tok_enter moves t's refresh to state to (a transition of
 * tokstate.h's table: another is a bug, asserted), and does what entering
 * it does: its timer is cancelled, and armed again after ms (>= 0) for
 * WAITING, PEER and UNSURE; IDLE ends the refresh: its request cancelled,
 * its span ended (why), its lease released, what it spent forgotten.  why
 * says what moved it (logged at debug).  0, or MK_ENOMEM when the timer
 * could not be armed (t is then IDLE, its waiters still to answer). */
int cr_tok_enter(token *t, tok_state to, int64_t ms, const char *why);
/* cr_token_broken returns the invariant of its state t breaks, or NULL
 * (tok_broken of t's facts) */
const char *cr_token_broken(const token *t);
/* assert_token_state(t): t's invariants hold; at every entry of the
 * actor's code into a token's refresh (a message, a reply, a timer) */
#ifdef NDEBUG
#define assert_token_state(t) ((void)(t))
#else
#define assert_token_state(t) cr_token_assert((t), __func__)
#endif
void cr_token_assert(const token *t, const char *where);
void cr_refresh_join(cr_self *cr, token *t, uint64_t corr);
void cr_refresh_ahead(cr_self *cr, token *t);
void cr_refresh_stop(token *t);
/* cr_refresh_send sends t's token request (its refresh token spent:
 * t->prior) */
void cr_refresh_send(cr_self *cr, token *t);
/* cr_refresh_done answers t's waiters with another node's refresh
 * (adopted: its tokens are t's now), or with its failure to come */
void cr_refresh_done(cr_self *cr, token *t, bool adopted);
/* cr_cc_get answers corr with the token of c, a client_credentials
 * client (fetched, or fetched again when due or forced; discovered
 * first) */
void cr_cc_get(cr_self *cr, cclient *c, bool force, uint64_t corr);
/* cr_disc_wait: corr (an ask for c's client_credentials token) waits for
 * c's endpoints, then goes to cr_cc_get */
void cr_disc_wait(cr_self *cr, cclient *c, uint64_t corr, bool force);
/* cr_refresh_resume: the registration (or discovery) t's token request
 * waited for is made (err NULL: the request is sent, under it) or failed
 * (err says why: a lost registration makes t needs_reauth; a discovery
 * fails only the asks waiting) */
void cr_refresh_resume(cr_self *cr, token *t, const char *err);
/* cr_token_use answers corr with t when it is good to use, else after
 * one refresh single-flight; force: refreshed regardless of its expiry
 * (the gap of CR_GAP_MS still holds; see credential.h) */
void cr_token_use(cr_self *cr, token *t, bool force, uint64_t corr);
/* cr_token_expiry sets t's expiry and lifetime from an AS's expires_in
 * (seconds; <= 0: none given), issued now */
void cr_token_expiry(token *t, int64_t expires_in);
/* cr_token_restore sets them from a stored row's expires_at and
 * last_refreshed (unix seconds); the lifetime is their difference,
 * unknown when that is not positive */
void cr_token_restore(token *t, const json_t *row);
/* cr_token_use_ms is how long t may be used without asking again: -1 no
 * limit, 0 ask each time */
int64_t cr_token_use_ms(const token *t);

#endif /* ACTORS_CRED_IMPL_H */
