/*
 * credential_msg.h - the credential actor's messages: its name, what its peers
 * send it and what it answers (credential.h says what it does with them).
 *
 * Messages: the definitions below, rendered by the msgdoc test (it fails
 * when this table differs; `msgdoc_test --write` rewrites it).  An error
 * reply has a non-zero status and {"error": text}; MSG_CR_GET's is a
 * cr_refused (below).
 *
 * <msgdoc>
 *   MSG_CR_REGISTER tell: from a client actor: who it is, its OAuth config
 *                         (below)
 *     id       str    the client's id
 *     name     str    its name
 *     auth     str    its auth_type
 *     sticky   bool   its connection mode
 *     url      str    the MCP server's URL
 *     oauth    secret oauth_config, resolved, JSON text
 *     exchange secret token_exchange, resolved, JSON text
 *     keys     str    per_user_header_keys, JSON text
 *
 *   MSG_CR_FORGET tell: the client is gone
 *     id str    the client's id
 *
 *   MSG_CR_GET ask: the header lines a connection needs (below)
 *     id       str    the client's id
 *     mode     str    the identity's mode
 *     identity str    the identity ("" for the client's own)
 *     force    bool   refresh even when not due
 *     peek     bool   the token as it is, expired or not: no refresh
 *     subject  secret a caller's token to exchange, or absent
 *     scope    str    step-up: the scopes a 403 insufficient_scope asked for,
 *                     or absent
 *     by       str    who answers for a flow it starts (a requester), or
 *                     absent
 *     ok:     headers secret header lines, "\n" between them
 *             use_ms  int    how long they may be used before asking again
 *                            (-1: no limit; 0: ask each time)
 *     failed: error         str    what failed
 *             why           str    "none" or "needs_reauth" (MK_ESTATE)
 *             auth_required str    JSON text: how the caller authorizes
 *
 *   MSG_CR_INITIATE ask: start an OAuth flow (below)
 *     client   str    a client's id or name
 *     mode     str    the identity's mode (absent: the admin's)
 *     identity str    the identity, or absent
 *     again    bool   a reauthorization: discovered endpoints are discovered
 *                     again
 *     by       str    a caller's flow: who answers for it, or absent
 *     ok:     authorize_url str    where the user authorizes
 *             state         str    the flow's state
 *
 *   MSG_CR_COMPLETE ask: complete one (below)
 *     state  str    the flow's state
 *     code   secret the authorization code
 *     client str    the flow's client (id or name), or absent
 *     iss    str    the callback's iss (RFC 9207), or absent
 *     ok:     client_id str    the flow's client
 *
 *   MSG_CR_VERIFY_HEADERS ask: per_user_headers: the admin's sample, retained
 *                              for discovery
 *     client  str    a client's id or name
 *     headers secret the admin's sample, a JSON object's text
 *     ok:     {}
 *
 *   MSG_CR_SUBMIT_HEADERS ask: a caller's own header values for the session it
 *                              was given
 *     session_id str    the header session auth_required named
 *     headers    secret the caller's values, a JSON object's text
 *     client     str    the caller's client (id or name)
 *     mode       str    the caller's identity's mode
 *     identity   str    the caller's identity
 *     ok:     {}
 *
 *   MSG_CR_VERIFY_EXCHANGE ask: token_exchange: the admin's subject, exchanged
 *                               now and retained for discovery
 *     client  str    a client's id or name
 *     subject secret the admin's subject token
 *     ok:     headers secret the exchanged token's header lines
 *
 *   MSG_CR_EVICT ask: drop cached callers' credentials (below)
 *     client   str    a client's id or name
 *     mode     str    an identity's mode
 *     identity str    an identity
 *     subject  secret a caller's subject token
 *     ok:     evicted int    entries dropped
 *
 *   MSG_CR_STATS ask: refresh, flow and cache counters
 *     {}
 *     ok:     refreshes      int    token refreshes started
 *             refresh_joins  int    asks that joined one in flight
 *             token_requests int    requests to token endpoints
 *             tokens         int    tokens held
 *             flows          int    OAuth flows pending
 *             header_flows   int    header flows pending
 *             swept          int    expired flows dropped
 *             exchanges      int    token exchanges done
 *             fills          int    cache fills from the store
 *             evicted        int    cache entries evicted
 *             cached_tokens  int    callers' tokens cached
 *             cached_headers int    callers' header sets cached
 *
 *   MSG_CR_ROW_CHANGED tell: from the cluster actor: another node wrote a
 *                            token (lease.c)
 *     key str    JSON text: {table (a token's, an OAuth config's), key}
 *
 *   MSG_CR_RESYNC tell: from the cluster actor: the store was not listened to
 *                       for a while (boot, a lost connection): every OAuth
 *                       config and shared or admin token is read again
 *                       (lease.c)
 *     {}
 * </msgdoc>
 *
 * MSG_CR_REGISTER comes from a client actor at its start and after an
 * update; a changed OAuth config drops the client's tokens (rotation).
 *
 * MSG_CR_GET: MK_ESTATE (why "none" or "needs_reauth") when there is no
 * usable token, MK_EUPSTREAM for a refresh that failed but may pass (the
 * token kept, asked again later).  For a per-user client the mode is
 * the caller's (user, vk, session; "admin" for discovery) and subject the
 * caller's token (token_exchange); a caller without a credential is
 * answered MK_EAUTH with auth_required, the mcp_auth_required payload.
 *
 * MSG_CR_INITIATE runs discovery and registration first, as needed; the
 * flow is stored before the reply.  MSG_CR_COMPLETE: a flow that is not
 * the given client's is MK_EINVAL and stays; MK_EINVAL also for an
 * unknown, used or expired state or a refused code, MK_ENOENT for no such
 * client.
 *
 * MSG_CR_EVICT drops cached callers' credentials (read from the store
 * again when next needed); a fill racing it is discarded.  Its fields
 * are each optional (absent: any).
 *
 * Tells to client actors: MSG_CL_CRED (actors/client/client.h).
 */
#ifndef ACTORS_CREDENTIAL_MSG_H
#define ACTORS_CREDENTIAL_MSG_H

#include "actors/msgbase.h"
#include "codec/mp.h"
#include "codec/msgdef.h"

#define CREDENTIAL_NAME "credential"

/* ---- messages (their fields; the table above is rendered from these) */

#define CR_REGISTER_FIELDS(F, S)                                              \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, name, "its name")                                           \
	F(S, STR, auth, "its auth_type")                                      \
	F(S, BOOL, sticky, "its connection mode")                             \
	F(S, STR, url, "the MCP server's URL")                                \
	F(S, SECRET, oauth, "oauth_config, resolved, JSON text")              \
	F(S, SECRET, exchange, "token_exchange, resolved, JSON text")         \
	F(S, STR, keys, "per_user_header_keys, JSON text")
CODEC_MSG_STRUCT(cr_register_msg, CR_REGISTER_FIELDS)

#define CR_ID_FIELDS(F, S) F(S, STR, id, "the client's id")

#define CR_ROW_CHANGED_FIELDS(F, S)                                           \
	F(S, STR, key,                                                        \
	  "JSON text: {table (a token's, an OAuth config's), key}")
CODEC_MSG_STRUCT(cr_row_changed_msg, CR_ROW_CHANGED_FIELDS)
CODEC_MSG_STRUCT(cr_id_msg, CR_ID_FIELDS)

#define CR_GET_FIELDS(F, S)                                                    \
	F(S, STR, id, "the client's id")                                       \
	F(S, STR, mode, "the identity's mode")                                 \
	F(S, STR, identity, "the identity (\"\" for the client's own)")        \
	F(S, BOOL, force, "refresh even when not due")                         \
	F(S, BOOL, peek, "the token as it is, expired or not: no refresh")     \
	F(S, SECRET, subject, "a caller's token to exchange, or absent")       \
	F(S, STR, scope,                                                       \
	  "step-up: the scopes a 403 insufficient_scope asked for, or absent") \
	F(S, STR, by,                                                          \
	  "who answers for a flow it starts (a requester), or absent")
CODEC_MSG_STRUCT(cr_get_msg, CR_GET_FIELDS)

#define CR_HEADERS_FIELDS(F, S)                                               \
	F(S, SECRET, headers, "header lines, \"\\n\" between them")           \
	F(S, INT, use_ms,                                                     \
	  "how long they may be used before asking again (-1: no limit; "     \
	  "0: ask each time)")
CODEC_MSG_STRUCT(cr_headers_msg, CR_HEADERS_FIELDS)

#define CR_REFUSED_FIELDS(F, S)                                               \
	F(S, STR, error, "what failed")                                       \
	F(S, STR, why, "\"none\" or \"needs_reauth\" (MK_ESTATE)")            \
	F(S, STR, auth_required, "JSON text: how the caller authorizes")
CODEC_MSG_STRUCT(cr_refused_msg, CR_REFUSED_FIELDS)

#define CR_INITIATE_FIELDS(F, S)                                              \
	F(S, STR, client, "a client's id or name")                            \
	F(S, STR, mode, "the identity's mode (absent: the admin's)")          \
	F(S, STR, identity, "the identity, or absent")                        \
	F(S, BOOL, again,                                                     \
	  "a reauthorization: discovered endpoints are discovered again")     \
	F(S, STR, by, "a caller's flow: who answers for it, or absent")
CODEC_MSG_STRUCT(cr_initiate_msg, CR_INITIATE_FIELDS)

#define CR_FLOW_FIELDS(F, S)                                                  \
	F(S, STR, authorize_url, "where the user authorizes")                 \
	F(S, STR, state, "the flow's state")
CODEC_MSG_STRUCT(cr_flow_msg, CR_FLOW_FIELDS)

#define CR_COMPLETE_FIELDS(F, S)                                              \
	F(S, STR, state, "the flow's state")                                  \
	F(S, SECRET, code, "the authorization code")                          \
	F(S, STR, client, "the flow's client (id or name), or absent")        \
	F(S, STR, iss, "the callback's iss (RFC 9207), or absent")
CODEC_MSG_STRUCT(cr_complete_msg, CR_COMPLETE_FIELDS)

#define CR_CLIENT_ID_FIELDS(F, S) F(S, STR, client_id, "the flow's client")
CODEC_MSG_STRUCT(cr_client_id_msg, CR_CLIENT_ID_FIELDS)

#define CR_VERIFY_HEADERS_FIELDS(F, S)                                        \
	F(S, STR, client, "a client's id or name")                            \
	F(S, SECRET, headers, "the admin's sample, a JSON object's text")
CODEC_MSG_STRUCT(cr_verify_headers_msg, CR_VERIFY_HEADERS_FIELDS)

#define CR_SUBMIT_HEADERS_FIELDS(F, S)                                        \
	F(S, STR, session_id, "the header session auth_required named")       \
	F(S, SECRET, headers, "the caller's values, a JSON object's text")    \
	F(S, STR, client, "the caller's client (id or name)")                 \
	F(S, STR, mode, "the caller's identity's mode")                       \
	F(S, STR, identity, "the caller's identity")
CODEC_MSG_STRUCT(cr_submit_headers_msg, CR_SUBMIT_HEADERS_FIELDS)

#define CR_VERIFY_EXCHANGE_FIELDS(F, S)                                       \
	F(S, STR, client, "a client's id or name")                            \
	F(S, SECRET, subject, "the admin's subject token")
CODEC_MSG_STRUCT(cr_verify_exchange_msg, CR_VERIFY_EXCHANGE_FIELDS)

#define CR_EXCHANGED_FIELDS(F, S)                                             \
	F(S, SECRET, headers, "the exchanged token's header lines")
CODEC_MSG_STRUCT(cr_exchanged_msg, CR_EXCHANGED_FIELDS)

#define CR_EVICT_FIELDS(F, S)                                                 \
	F(S, STR, client, "a client's id or name")                            \
	F(S, STR, mode, "an identity's mode")                                 \
	F(S, STR, identity, "an identity")                                    \
	F(S, SECRET, subject, "a caller's subject token")
CODEC_MSG_STRUCT(cr_evict_msg, CR_EVICT_FIELDS)

#define CR_EVICTED_FIELDS(F, S) F(S, INT, evicted, "entries dropped")
CODEC_MSG_STRUCT(cr_evicted_msg, CR_EVICTED_FIELDS)

#define CR_STATS_FIELDS(F, S)                                                 \
	F(S, INT, refreshes, "token refreshes started")                       \
	F(S, INT, refresh_joins, "asks that joined one in flight")            \
	F(S, INT, token_requests, "requests to token endpoints")              \
	F(S, INT, tokens, "tokens held")                                      \
	F(S, INT, flows, "OAuth flows pending")                               \
	F(S, INT, header_flows, "header flows pending")                       \
	F(S, INT, swept, "expired flows dropped")                             \
	F(S, INT, exchanges, "token exchanges done")                          \
	F(S, INT, fills, "cache fills from the store")                        \
	F(S, INT, evicted, "cache entries evicted")                           \
	F(S, INT, cached_tokens, "callers' tokens cached")                    \
	F(S, INT, cached_headers, "callers' header sets cached")
CODEC_MSG_STRUCT(cr_stats_msg, CR_STATS_FIELDS)

/* The credential actor's messages, as the table above shows them. */
/* ---- the list (codec/msgdef.h): the table above is rendered from it */

#define CR_MESSAGES(M)                                                        \
	M(MSG_CR_REGISTER, tell, cr_register_msg, codec_nil, codec_nil,       \
	  on_register,                                                        \
	  "from a client actor: who it is, its OAuth config (below)")         \
	M(MSG_CR_FORGET, tell, cr_id_msg, codec_nil, codec_nil, on_forget,    \
	  "the client is gone")                                               \
	M(MSG_CR_GET, ask, cr_get_msg, cr_headers_msg, cr_refused_msg,        \
	  on_get, "the header lines a connection needs (below)")              \
	M(MSG_CR_INITIATE, ask, cr_initiate_msg, cr_flow_msg, codec_nil,      \
	  cr_on_initiate, "start an OAuth flow (below)")                      \
	M(MSG_CR_COMPLETE, ask, cr_complete_msg, cr_client_id_msg, codec_nil, \
	  cr_on_complete, "complete one (below)")                             \
	M(MSG_CR_VERIFY_HEADERS, ask, cr_verify_headers_msg, codec_no,        \
	  codec_nil, cr_on_verify_headers,                                    \
	  "per_user_headers: the admin's sample, retained for discovery")     \
	M(MSG_CR_SUBMIT_HEADERS, ask, cr_submit_headers_msg, codec_no,        \
	  codec_nil, cr_on_submit_headers,                                    \
	  "a caller's own header values for the session it was given")        \
	M(MSG_CR_VERIFY_EXCHANGE, ask, cr_verify_exchange_msg,                \
	  cr_exchanged_msg, codec_nil, cr_on_verify_exchange,                 \
	  "token_exchange: the admin's subject, exchanged now and retained "  \
	  "for discovery")                                                    \
	M(MSG_CR_EVICT, ask, cr_evict_msg, cr_evicted_msg, codec_nil,         \
	  cr_on_evict, "drop cached callers' credentials (below)")            \
	M(MSG_CR_STATS, ask, codec_no, cr_stats_msg, codec_nil, on_stats,     \
	  "refresh, flow and cache counters")                                 \
	M(MSG_CR_ROW_CHANGED, tell, cr_row_changed_msg, codec_nil, codec_nil, \
	  cr_on_row_changed,                                                  \
	  "from the cluster actor: another node wrote a token (lease.c)")     \
	M(MSG_CR_RESYNC, tell, codec_no, codec_nil, codec_nil, on_resync,     \
	  "from the cluster actor: the store was not listened to for a "      \
	  "while (boot, a lost connection): every OAuth config and shared "   \
	  "or admin token is read again (lease.c)")
CODEC_MSG_ENUM(CR_MSG, CR_MSG_BASE, CR_MESSAGES);
MSG_FITS(CR_MSG, CR_MSG_BASE);

extern const codec_msgdef credential_msgs[];
extern const size_t       credential_msgs_n;

#endif /* ACTORS_CREDENTIAL_MSG_H */
