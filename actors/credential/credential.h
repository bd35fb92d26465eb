/*
 * credential.h - the credential actor: one per runtime.  It owns every
 * OAuth token, OAuth flow and per-client OAuth endpoint set (configured,
 * or discovered and registered), refreshes tokens single-flight, and
 * answers client actors' asks for the headers a connection needs.  Client
 * actors are told when their credential changes.
 *
 * Token states (per token: client, identity mode, identity):
 *
 *   (none) --flow completed--> active --refresh ok--> active
 *                                 |  \--expired: refresh single-flight
 *                                 |     (N asks -> 1 token request)
 *                                 +--refresh rejected (401, invalid_grant,
 *                                    unauthorized_client)--> needs_reauth
 *   needs_reauth --reauthorize + flow completed--> active
 *
 * A needs_reauth token answers every ask at once (no network): the
 * server-level client is `needs_reauth`, stage `credential`.
 *
 * When a token is refreshed (L: the lifetime it was issued with,
 * expires_in):
 *   ask      a token within min(CR_SKEW_S, L/5) of its expiry is refreshed
 *            before use (CR_SKEW_S when L is unknown: a stored token
 *            without last_refreshed);
 *   ahead    shared and admin tokens at 80% of L (+-10%, at most 5 min
 *            early), never later than an ask would;
 *   gap      a token's refresh request starts CR_GAP_MS or more after
 *            the previous one ended, whatever the AS answered (expires_in
 *            1 included): meanwhile a due token still unexpired is used
 *            as it is; for an expired one, or a forced refresh, the asks
 *            wait (joined) for the refresh sent when the gap ends.
 *   Exchange-cache entries (a caller's token_exchange) are exchanged
 *   anew, not refreshed: their TTL is expires_in - CR_SKEW_S, no gap.
 *
 * Messages: credential_msg.h.
 */
#ifndef ACTORS_CREDENTIAL_H
#define ACTORS_CREDENTIAL_H

#include "actors/credential/credential_msg.h"
#include "actors/kernel/kernel.h"
#include "telemetry/trace.h"

#define CR_FLOW_TTL_S (15 * 60) /* an OAuth flow's life */
/* Callers' pending flows (user, vk, session) per client, OAuth flows and
 * header flows each: past it a new one is refused (MK_EBUSY) until one is
 * used or expires.  The admin's bootstrap flows do not count. */
#define CR_USER_FLOWS_MAX 1000
/* and per requester (a virtual key whose trusted headers name callers) */
#define CR_BY_FLOWS_MAX  100
#define CR_SKEW_S        30    /* refreshed before use at most this early */
#define CR_GAP_MS        1000  /* one token's refreshes at least this apart */
#define CR_HTTP_MS       10000 /* one exchange with an AS */
#define CR_RETRIES       3     /* a failed refresh tried again ... */
#define CR_RETRY_BASE_MS 1000  /* ... after 1 s, 2 s, 4 s */
#define CR_LEASE_MS      15000 /* a refresh lease's life (lease.c) */
/* the longest a refresh with its retries runs */
#define CR_REFRESH_MAX_MS                                                     \
	((CR_RETRIES + 1) * CR_HTTP_MS +                                      \
	 CR_RETRY_BASE_MS * ((1 << CR_RETRIES) - 1))
#define CR_LEASE_POLL_MS    250  /* another node's lease looked at again */
#define CR_UNSURE_POLL_MS   1000 /* an unsure token's row looked at again */
#define CR_REDIRECT_DEFAULT "http://127.0.0.1:8080/api/oauth/callback"

/* kn_spawn's arg; read at init. */
typedef struct cr_args {
	kn_actor   *persister;    /* the store (held), or NULL */
	const char *redirect_uri; /* the OAuth callback; NULL: default */
	const char *client_metadata_url; /* the host's client ID metadata
	                                  * document, or NULL */
	const char *tokens; /* stored rows (json arrays), or NULL */
	const char *flows;
	const char *configs;
	const char *hcreds;    /* header_credentials rows */
	const char *hflows;    /* header_flows rows */
	unsigned    cache_max; /* exchange cache entries; 0: default */
	bool        cluster;   /* a shared store: refreshes leased */
	tr_tracer  *tracer;    /* spans' exporter, or NULL */
} cr_args;

#define CR_CACHE_DEFAULT 4096

extern const kn_actor_ops credential_ops;

#endif /* ACTORS_CREDENTIAL_H */
