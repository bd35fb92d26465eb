/*
 * supervisor_msg.h - the supervisor's messages: its name, what its peers send
 * it and what it answers (supervisor.h says what it does with them).
 *
 * Messages: the definitions below, rendered by the msgdoc test (it fails
 * when this table differs; `msgdoc_test --write` rewrites it).  An error
 * reply has a non-zero status and {"error": text}.  MSG_PING (the
 * kernel's) is answered with its own payload.
 *
 * <msgdoc>
 *   MSG_STATS ask: the runtime's counters
 *     {}
 *     ok:     actors           int    actors running
 *             messages         int    messages delivered
 *             asks             int    asks sent
 *             late_replies     int    replies after their ask gave up
 *             expired          int    asks answered MK_ETIMEDOUT unhandled
 *             handler_errors   int    handlers that returned an error
 *             ticks            int    health ticks run
 *             tick_late_p50_us int    a tick's lateness, median
 *             tick_late_p99_us int    and 99th percentile
 *
 *   MSG_SV_ADD ask: add a client from its config (below)
 *     config str    the client's config, JSON text
 *     tools  str    known tools, JSON text, or absent
 *     ok:     id str    the new client's id
 *
 *   MSG_SV_LOAD ask: boot every client of a config file or of the store
 *                    (below)
 *     file    str    config.json's text, or absent
 *     restore str    the persister's client list, or absent
 *     ok:     count int    clients started
 *
 *   MSG_SV_RELOAD ask: a config file again, as a diff (below)
 *     file str    config.json's text
 *     ok:     added   int    clients added
 *             updated int    clients updated in place
 *             removed int    clients removed
 *             failed  int    changes that failed
 *
 *   MSG_SV_REMOVE ask: stop and forget a client
 *     client str    a client's id or name
 *     ok:     {}
 *
 *   MSG_SV_DISABLE ask: disable a client
 *     client str    a client's id or name
 *     ok:     {}
 *
 *   MSG_SV_ENABLE ask: enable a client
 *     client str    a client's id or name
 *     ok:     {}
 *
 *   MSG_SV_RECONNECT ask: reconnect a sticky client (an error: the client's)
 *     client str    a client's id or name
 *     ok:     {}
 *
 *   MSG_SV_UPDATE ask: change a client's config
 *     client str    a client's id or name
 *     patch  str    a JSON object's text (see MSG_CL_UPDATE)
 *     ok:     {}
 *
 *   MSG_SV_REFRESH ask: a client's check now: the tool list read again
 *     client str    a client's id or name
 *     ok:     state   int    the cl_state after the check
 *             metrics str    its counters, JSON text, as MSG_SV_METRICS
 *
 *   MSG_SV_LIST ask: the client list view
 *     filter str    JSON text: filter, sort and page, or absent
 *     ok:     json str    the page, JSON text
 *
 *   MSG_SV_VIEW tell: from a client actor: its view changed
 *     id      str    the client's id
 *     name    str    its name
 *     state   int    its cl_state
 *     shown   int    the cl_state its view shows
 *     view    str    its list entry, JSON text
 *     failure map    nil, or the last_failure its view shows
 *     sync_ms int    its tool_sync_interval
 *
 *   MSG_SV_METRICS tell: from a client actor: its counters changed (below)
 *     id   str    the client's id
 *     json str    its counters, JSON text (mk_client_metrics_json)
 *
 *   MSG_SV_SETTINGS ask: the global settings of config.json (below)
 *     sync_ms int    the global tool_sync_interval
 *     exec_ms int    the global tool_execution_timeout
 *     changes int    the global tool_changes (a cfg_changes)
 *     ok:     {}
 *
 *   MSG_SV_SYNC tell: from the cluster actor: a client another node changed
 *                     (below)
 *     id     str    the client's id
 *     config str    its stored config, JSON text; absent: deleted
 *     tools  str    its stored tools, JSON text, or absent
 *
 *   MSG_SV_PEERS tell: from the cluster actor: the other nodes' states (below)
 *     states list   every client's state on each other live node: {client_id,
 *                   node_id, state, failure} each
 *
 *   MSG_SV_UNKNOWN tell: from a client actor: a call whose outcome is unknown,
 *                        for the ledger (the last SV_UNKNOWN_MAX)
 *     client     str    the client's name
 *     tool       str    the tool
 *     caller     str    the caller's identity, "" the shared one
 *     time       str    when it ended, RFC 3339
 *     request_id str    the JSON-RPC id it went out with
 *     error      str    how the connection failed
 *
 *   MSG_SV_UNKNOWNS ask: the ledger: [{client, tool, caller, time, request_id,
 *                        error}], oldest first
 *     {}
 *     ok:     json str    the page, JSON text
 *
 *   MSG_SV_SNAPSHOT ask: every client publishes its state on the stream (its
 *                        answer: the asks are sent)
 *     {}
 *     ok:     {}
 * </msgdoc>
 *
 * MSG_SV_ADD is the API's: the config is literal (no env. looked up); a
 * sticky client that cannot connect is not kept, a per-call one is kept
 * unstable.
 *
 * MSG_SV_LOAD validates every client first, then boots them: failures are
 * kept as unstable; a file's client whose name was restored replaces it,
 * keeping its id and known tools; the file's global settings apply first,
 * as MSG_SV_SETTINGS; the file's clients become the base of a reload.  A
 * restored client is as stored: literal when it was.
 *
 * MSG_SV_RELOAD applies the settings, then the clients as a diff against
 * the base: vanished ones removed, changed ones updated (MSG_CL_UPDATE
 * with file) or, when name, client_id, connection_type, connection_string
 * or auth_type changed, replaced; new ones added as a load adds them (kept
 * unstable when they cannot connect; a restored one of the name
 * replaced); a client of the name that is not the file's is left alone
 * and counts as failed.  The base becomes the file, less what failed.  It
 * replies once every connect and update answered and logs "reloaded: ..."
 * and each failure.  An invalid file changes nothing.
 *
 * MSG_SV_METRICS keeps a client's counters for the list (a filter's
 * "metrics": true shows them), so that a scrape of every client's counters
 * is one list, not one ask per client.  A client sends them at most once
 * every CL_METRICS_PUSH_MS, when they changed.
 *
 * MSG_SV_SYNC applies a client as another node stored it (the cluster
 * actor's): deleted, it is stopped and forgotten; unknown here, it is
 * started as a restored one (one of its name but another id gives way:
 * the store's wins); known, its client actor takes the stored config as
 * an update (MSG_CL_UPDATE "stored"), which changes nothing when it is
 * this node's already.  Nothing is written back.
 *
 * MSG_SV_PEERS replaces what the other live nodes hold of each client
 * (the cluster actor's, after each read); the list view folds them in
 * (SPEC: Cluster): live nodes that disagree among healthy, unstable and
 * pending_verification show "degraded" with "node_states" (every such
 * node's {state, last_failure}, this one's too), all unstable stays
 * "unstable" with them; needs_reauth and disabled are this node's alone.
 * In cluster mode the supervisor tells the cluster actor each client's
 * state here when it changes (MSG_CS_STATE), and when it goes.
 *
 * MSG_SV_SETTINGS sets the global tool_sync_interval and
 * tool_execution_timeout: for clients added from then on, and told to
 * every running one as MSG_CL_SETTINGS.
 * Anything else is a bug and asserts.
 */
#ifndef ACTORS_SUPERVISOR_MSG_H
#define ACTORS_SUPERVISOR_MSG_H

#include "actors/msgbase.h"
#include "codec/mp.h"
#include "codec/msgdef.h"
#include "model/failure.h"

#define SUPERVISOR_NAME "supervisor"

/* ---- messages (their fields; the table above is rendered from these) */

#define SV_STATS_FIELDS(F, S)                                                 \
	F(S, INT, actors, "actors running")                                   \
	F(S, INT, messages, "messages delivered")                             \
	F(S, INT, asks, "asks sent")                                          \
	F(S, INT, late_replies, "replies after their ask gave up")            \
	F(S, INT, expired, "asks answered MK_ETIMEDOUT unhandled")            \
	F(S, INT, handler_errors, "handlers that returned an error")          \
	F(S, INT, ticks, "health ticks run")                                  \
	F(S, INT, tick_late_p50_us, "a tick's lateness, median")              \
	F(S, INT, tick_late_p99_us, "and 99th percentile")
CODEC_MSG_STRUCT(sv_stats_msg, SV_STATS_FIELDS)

#define SV_ADD_FIELDS(F, S)                                                   \
	F(S, STR, config, "the client's config, JSON text")                   \
	F(S, STR, tools, "known tools, JSON text, or absent")
CODEC_MSG_STRUCT(sv_add_msg, SV_ADD_FIELDS)

#define SV_ID_FIELDS(F, S) F(S, STR, id, "the new client's id")
CODEC_MSG_STRUCT(sv_id_msg, SV_ID_FIELDS)

#define SV_LOAD_FIELDS(F, S)                                                  \
	F(S, STR, file, "config.json's text, or absent")                      \
	F(S, STR, restore, "the persister's client list, or absent")
CODEC_MSG_STRUCT(sv_load_msg, SV_LOAD_FIELDS)

#define SV_COUNT_FIELDS(F, S) F(S, INT, count, "clients started")
CODEC_MSG_STRUCT(sv_count_msg, SV_COUNT_FIELDS)

#define SV_FILE_FIELDS(F, S) F(S, STR, file, "config.json's text")
CODEC_MSG_STRUCT(sv_file_msg, SV_FILE_FIELDS)

#define SV_DIFF_FIELDS(F, S)                                                  \
	F(S, INT, added, "clients added")                                     \
	F(S, INT, updated, "clients updated in place")                        \
	F(S, INT, removed, "clients removed")                                 \
	F(S, INT, failed, "changes that failed")
CODEC_MSG_STRUCT(sv_diff_msg, SV_DIFF_FIELDS)

#define SV_CLIENT_FIELDS(F, S) F(S, STR, client, "a client's id or name")
CODEC_MSG_STRUCT(sv_client_msg, SV_CLIENT_FIELDS)

#define SV_UPDATE_FIELDS(F, S)                                                \
	F(S, STR, client, "a client's id or name")                            \
	F(S, STR, patch, "a JSON object's text (see MSG_CL_UPDATE)")
CODEC_MSG_STRUCT(sv_update_msg, SV_UPDATE_FIELDS)

#define SV_SYNC_FIELDS(F, S)                                                  \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, config, "its stored config, JSON text; absent: deleted")    \
	F(S, STR, tools, "its stored tools, JSON text, or absent")
CODEC_MSG_STRUCT(sv_sync_msg, SV_SYNC_FIELDS)

#define SV_PEER_FIELDS(F, S)                                                  \
	F(S, STR, client_id, "the client")                                    \
	F(S, STR, node_id, "another live node")                               \
	F(S, STR, state, "the client's state there")                          \
	F(S, SUB(model_failure), failure, "nil, or its last_failure there")
CODEC_MSG_STRUCT(sv_peer, SV_PEER_FIELDS)

#define SV_PEERS_FIELDS(F, S)                                                 \
	F(S, LIST(sv_peer), states,                                           \
	  "every client's state on each other live node: {client_id, "        \
	  "node_id, state, failure} each")
CODEC_MSG_STRUCT(sv_peers_msg, SV_PEERS_FIELDS)

#define SV_LIST_FIELDS(F, S)                                                  \
	F(S, STR, filter, "JSON text: filter, sort and page, or absent")
CODEC_MSG_STRUCT(sv_list_msg, SV_LIST_FIELDS)

#define SV_JSON_FIELDS(F, S) F(S, STR, json, "the page, JSON text")
CODEC_MSG_STRUCT(sv_json_msg, SV_JSON_FIELDS)

#define SV_VIEW_FIELDS(F, S)                                                  \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, name, "its name")                                           \
	F(S, INT, state, "its cl_state")                                      \
	F(S, INT, shown, "the cl_state its view shows")                       \
	F(S, STR, view, "its list entry, JSON text")                          \
	F(S, SUB(model_failure), failure,                                     \
	  "nil, or the last_failure its view shows")                          \
	F(S, INT, sync_ms, "its tool_sync_interval")
CODEC_MSG_STRUCT(sv_view_msg, SV_VIEW_FIELDS)

#define SV_METRICS_FIELDS(F, S)                                               \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, json, "its counters, JSON text (mk_client_metrics_json)")
CODEC_MSG_STRUCT(sv_metrics_msg, SV_METRICS_FIELDS)

#define SV_UNKNOWN_FIELDS(F, S)                                               \
	F(S, STR, client, "the client's name")                                \
	F(S, STR, tool, "the tool")                                           \
	F(S, STR, caller, "the caller's identity, \"\" the shared one")       \
	F(S, STR, time, "when it ended, RFC 3339")                            \
	F(S, STR, request_id, "the JSON-RPC id it went out with")             \
	F(S, STR, error, "how the connection failed")
CODEC_MSG_STRUCT(sv_unknown_msg, SV_UNKNOWN_FIELDS)

#define SV_SETTINGS_FIELDS(F, S)                                              \
	F(S, INT, sync_ms, "the global tool_sync_interval")                   \
	F(S, INT, exec_ms, "the global tool_execution_timeout")               \
	F(S, INT, changes, "the global tool_changes (a cfg_changes)")
CODEC_MSG_STRUCT(sv_settings_msg, SV_SETTINGS_FIELDS)

/* The supervisor's messages, as the table above shows them. */
/* ---- the list (codec/msgdef.h): the table above is rendered from it */

#define SV_MESSAGES(M)                                                        \
	M(MSG_STATS, ask, codec_no, sv_stats_msg, codec_nil, on_stats,        \
	  "the runtime's counters")                                           \
	M(MSG_SV_ADD, ask, sv_add_msg, sv_id_msg, codec_nil, sv_on_add,       \
	  "add a client from its config (below)")                             \
	M(MSG_SV_LOAD, ask, sv_load_msg, sv_count_msg, codec_nil, sv_on_load, \
	  "boot every client of a config file or of the store (below)")       \
	M(MSG_SV_RELOAD, ask, sv_file_msg, sv_diff_msg, codec_nil,            \
	  sv_on_reload, "a config file again, as a diff (below)")             \
	M(MSG_SV_REMOVE, ask, sv_client_msg, codec_no, codec_nil,             \
	  on_lifecycle, "stop and forget a client")                           \
	M(MSG_SV_DISABLE, ask, sv_client_msg, codec_no, codec_nil,            \
	  on_lifecycle, "disable a client")                                   \
	M(MSG_SV_ENABLE, ask, sv_client_msg, codec_no, codec_nil,             \
	  on_lifecycle, "enable a client")                                    \
	M(MSG_SV_RECONNECT, ask, sv_client_msg, codec_no, codec_nil,          \
	  on_lifecycle, "reconnect a sticky client (an error: the client's)") \
	M(MSG_SV_UPDATE, ask, sv_update_msg, codec_no, codec_nil, on_update,  \
	  "change a client's config")                                         \
	M(MSG_SV_REFRESH, ask, sv_client_msg, cl_state_msg, codec_nil,        \
	  on_lifecycle, "a client's check now: the tool list read again")     \
	M(MSG_SV_LIST, ask, sv_list_msg, sv_json_msg, codec_nil, on_list,     \
	  "the client list view")                                             \
	M(MSG_SV_VIEW, tell, sv_view_msg, codec_nil, codec_nil, sv_on_view,   \
	  "from a client actor: its view changed")                            \
	M(MSG_SV_METRICS, tell, sv_metrics_msg, codec_nil, codec_nil,         \
	  sv_on_metrics, "from a client actor: its counters changed (below)") \
	M(MSG_SV_SETTINGS, ask, sv_settings_msg, codec_no, codec_nil,         \
	  sv_on_settings, "the global settings of config.json (below)")       \
	M(MSG_SV_SYNC, tell, sv_sync_msg, codec_nil, codec_nil, sv_on_sync,   \
	  "from the cluster actor: a client another node changed (below)")    \
	M(MSG_SV_PEERS, tell, sv_peers_msg, codec_nil, codec_nil,             \
	  sv_on_peers,                                                        \
	  "from the cluster actor: the other nodes' states (below)")          \
	M(MSG_SV_UNKNOWN, tell, sv_unknown_msg, codec_nil, codec_nil,         \
	  on_unknown,                                                         \
	  "from a client actor: a call whose outcome is unknown, for the "    \
	  "ledger (the last SV_UNKNOWN_MAX)")                                 \
	M(MSG_SV_UNKNOWNS, ask, codec_no, sv_json_msg, codec_nil,             \
	  on_unknowns,                                                        \
	  "the ledger: [{client, tool, caller, time, request_id, error}], "   \
	  "oldest first")                                                     \
	M(MSG_SV_SNAPSHOT, ask, codec_no, codec_no, codec_nil, on_snapshot,   \
	  "every client publishes its state on the stream (its answer: the "  \
	  "asks are sent)")
CODEC_MSG_ENUM(SV_MSG, SV_MSG_BASE, SV_MESSAGES);
MSG_FITS(SV_MSG, SV_MSG_BASE);

extern const codec_msgdef supervisor_msgs[];
extern const size_t       supervisor_msgs_n;

#endif /* ACTORS_SUPERVISOR_MSG_H */
