/*
 * client.h - the client actor: one per MCP client (one upstream server as
 * configured).  It owns the client's config, connection mode, state,
 * last_failure, connection generation, tool list and its hash, the sticky
 * connection(s), in-flight calls and the dedup of lifecycle operations.
 *
 * States, and what may move them (client_state_enter's table in
 * actor.c is this diagram; `error` and `degraded` are not the actor's:
 * the list computes them):
 *
 *   result:      healthy <-> unstable      (a check, dial or call; never
 *                                           out of the three below)
 *   admin:       any -> disabled;  disabled -> unstable (the connect
 *                decides) | pending_verification (a credential first)
 *   credential:  healthy | unstable | pending_verification ->
 *                needs_reauth;  needs_reauth | pending_verification ->
 *                unstable (authorized: the connect decides)
 *
 * A client starts disabled (configured so), pending_verification (a
 * credential type with none yet) or unstable until its first connect.
 * A result captured under an older generation (a disable, a newer
 * connection) is dropped before it gets here.
 *
 * Messages (payloads are msgpack maps; errors: a non-zero status and
 * {"error": text}):
 *   MSG_CL_CONNECT   ask  {"boot": bool, "tools": json text (known
 *                          tools: seed the hash; a per-call client then
 *                          skips its synchronous discovery)}
 *                                                  -> {} | error
 *   MSG_CL_CHECK     ask  {}                        -> {"state": str}
 *   MSG_CL_CALL      ask  {"tool": str, "arguments": json text,
 *                          "timeout_ms": int (0: the client's)}
 *                         -> {"result": json text} | error with
 *                            {"error", "kind", "http_status"}
 *   MSG_CL_RECONNECT ask  {}  -> {} | error (joins one in progress)
 *   MSG_CL_DISABLE   ask  {}  -> {}
 *   MSG_CL_ENABLE    ask  {}  -> {} | error (the connect's)
 *   MSG_CL_UPDATE    ask  {"patch": json text, "file": bool} -> {} |
 *                          error.  An API patch (file false): top-level
 *                          fields merged into the config, a view's
 *                          "<redacted>" put back, env. strings it brings
 *                          literal (cfg_literal_patched).  A file's
 *                          (a reload): the whole new config, resolved
 *                          as a file's.  See mk_client_update.
 *   MSG_CL_METRICS   ask  {}  -> {"json": text} (its counters: see
 *                          mk_client_metrics_json)
 *   MSG_CL_SETTINGS  tell {"sync_ms", "exec_ms"} from the supervisor:
 *                          the global tool_sync_interval and
 *                          tool_execution_timeout, used where the
 *                          client's config has none (a new sync_ms
 *                          reaches the supervisor in the view)
 *   MSG_CL_CRED      tell {"status": "active" | "refreshed" |
 *                          "needs_reauth" | "rotated", "message"} from
 *                          the credential actor (see cred.c)
 * Anything else is a bug and asserts.
 */
#ifndef ACTORS_CLIENT_H
#define ACTORS_CLIENT_H

#include <stdint.h>

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "codec/config.h"

#define CLIENT_PREFIX     "mcp:" /* registry name: "mcp:" + client name */
#define CLIENT_CONNECT_MS 30000  /* a whole connect or discovery */

/* What a client actor starts with (kn_spawn's arg).  init takes cfg. */
typedef struct client_args {
	cfg_client *cfg;        /* owned by the actor from init on */
	kn_actor   *supervisor; /* receives MSG_SV_VIEW; held by the actor */
	kn_stream  *stream;     /* the state stream (outlives the actor) */
	const char *node_id;    /* this instance's id (outlives the actor) */
	int64_t     sync_ms;    /* global tool_sync_interval */
	int64_t     exec_ms;    /* global tool_execution_timeout */
	kn_actor   *persister;  /* the store (held by the actor), or NULL */
	kn_actor   *credential; /* the credential actor (held), or NULL */
	/* out, set by init (so the list shows the client from its start
	 * without a message to the supervisor while it spawns many): */
	char *view;     /* its first view, JSON text (malloc'd: the
	                 * spawner's), or NULL */
	char state[24]; /* and the state in it */
} client_args;

extern const kn_actor_ops client_ops;

#endif /* ACTORS_CLIENT_H */
