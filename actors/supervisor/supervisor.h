/*
 * supervisor.h - the supervisor actor: owns the client actors' lifetimes
 * (add, remove, disable, enable, reconnect), their health-tick schedule
 * with jitter (SPEC section 4), and the client list view.
 *
 * Schedule: healthy -> tool_sync_interval (per client, else global);
 * unstable -> every unstable_ms (10 s); needs_reauth, disabled,
 * pending_verification -> none.  Each interval is spread +-10% so many
 * clients never tick together.  One check per client at a time.
 *
 * Messages (payloads are msgpack maps; errors: non-zero status and
 * {"error": text}):
 *   MSG_PING         ask  any bytes              -> the same bytes
 *   MSG_STATS        ask  {}                     -> {"actors", "messages",
 *                         "asks", "late_replies", "expired",
 *                         "handler_errors"} -> uint
 *   MSG_SV_ADD       ask  {"config": json text, "tools": json text
 *                         (optional: known tools, e.g. restored)}
 *                         -> {"id": str}
 *                         (the API's: literal, no env. looked up; a
 *                         sticky client that cannot connect is not
 *                         kept; a per-call one is kept unstable)
 *   MSG_SV_LOAD      ask  {"file": config.json text} or {"restore":
 *                         the persister's client list} -> {"count": int}
 *                         (all clients validated first, then booted:
 *                         failures kept as unstable; a file's client whose
 *                         name was restored replaces it, keeping its id
 *                         and known tools; the file's global settings
 *                         apply first, as MSG_SV_SETTINGS; the file's
 *                         clients become the base of a reload.  A
 *                         restored client is as stored: literal when
 *                         it was)
 *   MSG_SV_RELOAD    ask  {"file": config.json text} -> {"added",
 *                         "updated", "removed", "failed": int} (the
 *                         settings applied, then the clients as a diff
 *                         against the base: vanished ones removed,
 *                         changed ones updated - MSG_CL_UPDATE "file" -
 *                         or, when name, client_id, connection_type,
 *                         connection_string or auth_type changed,
 *                         replaced; new ones added as a load adds them
 *                         (kept unstable when they cannot connect; a
 *                         restored one of the name replaced); a client
 *                         of the name that is not the file's is left
 *                         alone and counts as failed.  The base becomes
 *                         the file, less what failed.  Replies once
 *                         every connect and update answered; logs
 *                         "reloaded: ..." and each failure.  Invalid:
 *                         nothing changes)
 *   MSG_SV_REMOVE    ask  {"client": id or name} -> {}
 *   MSG_SV_DISABLE   ask  {"client": ...}        -> {}
 *   MSG_SV_ENABLE    ask  {"client": ...}        -> {}
 *   MSG_SV_RECONNECT ask  {"client": ...}        -> {} | the client's error
 *   MSG_SV_UPDATE    ask  {"client": ..., "patch": json text} -> {} | error
 *   MSG_SV_REFRESH   ask  {"client": ...}        -> {"state"} (a check now:
 *                         the tool list read again)
 *   MSG_SV_LIST      ask  {"filter": json text}  -> {"json": text}
 *   MSG_SV_VIEW      tell {"id", "name", "state", "view": json text,
 *                          "sync_ms": int}
 *   MSG_SV_SETTINGS  ask  {"sync_ms", "exec_ms"} -> {} (the global
 *                         tool_sync_interval and tool_execution_timeout:
 *                         for clients added from then on, and told to
 *                         every running one as MSG_CL_SETTINGS)
 * Anything else is a bug and asserts.
 */
#ifndef ACTORS_SUPERVISOR_H
#define ACTORS_SUPERVISOR_H

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"

#define SUPERVISOR_NAME "supervisor"

/* kn_spawn's arg; copied at init. */
typedef struct sv_args {
	kn_stream  *stream;      /* the state stream */
	const char *node_id;     /* this instance (outlives the supervisor) */
	int64_t     sync_ms;     /* global tool_sync_interval, at first */
	int64_t     exec_ms;     /* global tool_execution_timeout, at first */
	int64_t     unstable_ms; /* check interval while unstable */
	kn_actor   *persister;   /* the store, or NULL (memory only) */
	kn_actor   *credential;  /* the credential actor, or NULL */
} sv_args;

extern const kn_actor_ops supervisor_ops;

/* supervisor_stats_decode parses a MSG_STATS reply.  Unknown keys are
 * ignored.  Returns 0 or MK_EPROTO. */
int supervisor_stats_decode(const void *buf, size_t len, mk_stats *out);

#endif /* ACTORS_SUPERVISOR_H */
