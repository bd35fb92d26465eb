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
 * Messages (msgpack maps; errors: non-zero status and {"error": text}):
 *   MSG_CR_REGISTER tell {"id", "name", "auth", "sticky": bool, "url",
 *                        "oauth": json text (oauth_config, resolved)}
 *                        from a client actor at start and after an
 *                        update; a changed OAuth config drops the
 *                        client's tokens (rotation)
 *   MSG_CR_FORGET   tell {"id"}: the client is gone
 *   MSG_CR_GET      ask  {"id", "mode", "identity", "force": bool,
 *                        "peek": bool (the token as it is, expired or
 *                        not: no refresh)}
 *                        -> {"headers": "Authorization: Bearer ...",
 *                        "use_ms": how long it may be used as it is
 *                        before asking again (-1: no limit; 0: ask each
 *                        time)} |
 *                        MK_ESTATE {"error", "why": "none"|"needs_reauth"}
 *                        | MK_EUPSTREAM (a refresh that failed for now)
 *   MSG_CR_INITIATE ask  {"client": id or name, "mode", "identity",
 *                        "redirect_uri"} -> {"authorize_url", "state"}
 *                        (discovery and registration first, as needed;
 *                        the flow is stored before the reply)
 *   MSG_CR_COMPLETE ask  {"state", "code", "client" (optional: id or
 *                        name; the flow must be that client's, else
 *                        MK_EINVAL and the flow stays)} -> {"client_id"}
 *                        | MK_EINVAL (unknown, used or expired state; a
 *                        refused code) | MK_ENOENT (no such client)
 *   MSG_CR_VERIFY_HEADERS  ask {"client", "headers": json object text}
 *                        per_user_headers: the admin's sample, retained
 *                        for discovery -> {}
 *   MSG_CR_SUBMIT_HEADERS  ask {"session_id", "headers"}: a caller's own
 *                        values for the header session its
 *                        mcp_auth_required named -> {}
 *   MSG_CR_VERIFY_EXCHANGE ask {"client", "subject"}: token_exchange: the
 *                        admin's subject token, exchanged now and
 *                        retained for discovery -> {"headers"}
 *   For per-user clients MSG_CR_GET's mode is the caller's (user, vk,
 *   session; "admin" for discovery) and "subject" the caller's token
 *   (token_exchange); a caller without a credential is answered MK_EAUTH
 *   {"error", "auth_required": the mcp_auth_required payload}.
 *   MSG_CR_EVICT    ask  {"client", "mode", "identity", "subject" (each
 *                        optional: any)} -> {"evicted": n}: drops cached
 *                        callers' credentials (they are read from the
 *                        store again when next needed); a fill racing it
 *                        is discarded
 *   MSG_CR_STATS    ask  {} -> {"refreshes", "refresh_joins",
 *                        "token_requests", "tokens", "flows",
 *                        "exchanges", "fills", "evicted",
 *                        "cached_tokens", "cached_headers"}
 * Tells to client actors: MSG_CL_CRED {"status": "active" | "refreshed" |
 * "needs_reauth", "message"}.
 */
#ifndef ACTORS_CREDENTIAL_H
#define ACTORS_CREDENTIAL_H

#include "actors/kernel/kernel.h"

#define CREDENTIAL_NAME "credential"
#define CR_FLOW_TTL_S   (15 * 60) /* an OAuth flow's life */
/* Callers' pending flows (user, vk, session) per client, OAuth flows and
 * header flows each: past it a new one is refused (MK_EBUSY) until one is
 * used or expires.  The admin's bootstrap flows do not count. */
#define CR_USER_FLOWS_MAX   1000
#define CR_SKEW_S           30   /* refreshed before use at most this early */
#define CR_GAP_MS           1000 /* one token's refreshes at least this apart */
#define CR_HTTP_MS          10000 /* one exchange with an AS */
#define CR_REDIRECT_DEFAULT "http://127.0.0.1:8080/api/oauth/callback"

/* kn_spawn's arg; read at init. */
typedef struct cr_args {
	kn_actor   *persister;    /* the store (held), or NULL */
	const char *redirect_uri; /* the OAuth callback; NULL: default */
	const char *tokens;       /* stored rows (json arrays), or NULL */
	const char *flows;
	const char *configs;
	const char *hcreds;    /* header_credentials rows */
	const char *hflows;    /* header_flows rows */
	unsigned    cache_max; /* exchange cache entries; 0: default */
} cr_args;

#define CR_CACHE_DEFAULT 4096

extern const kn_actor_ops credential_ops;

#endif /* ACTORS_CREDENTIAL_H */
