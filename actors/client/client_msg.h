/*
 * client_msg.h - the client actor's messages: its name, what its peers send it
 * and what it answers (client.h says what it does with them).
 *
 * Messages: the definitions below, rendered by the msgdoc test (it fails
 * when this table differs; `msgdoc_test --write` rewrites it).  An error
 * reply has a non-zero status and {"error": text} (a call's: cl_failed).
 *
 * <msgdoc>
 *   MSG_CL_CONNECT ask: first connect or discovery
 *     boot     bool   at the runtime's boot
 *     restored bool   from the store: nothing to save
 *     tools    str    known tools, JSON text: seed the hash; a per-call client
 *                     then skips its synchronous discovery
 *     ticket   int    an API change's ticket, carried by the config it stores
 *                     (persister.h), 0: none
 *     ok:     {}
 *
 *   MSG_CL_CHECK ask: run one health check
 *     {}
 *     ok:     state   int    the cl_state after the check
 *             metrics str    its counters, JSON text, as MSG_SV_METRICS
 *
 *   MSG_CL_CALL ask: call a tool
 *     tool          str    the tool's name
 *     arguments     str    a JSON object's text ({} when absent)
 *     timeout_ms    int    0: the client's
 *     mode          str    a per-user caller's mode, or absent
 *     identity      str    the caller's identity, or absent
 *     subject       secret the caller's token to exchange, or absent
 *     requester     str    who answers for its sign-ins, or absent
 *     progress      int    the caller's progress function (in-process), 0:
 *                          none
 *     progress_arg  int    and its argument
 *     traceparent   str    the caller's W3C trace context, or absent
 *     tracestate    str    and its vendor part, or absent
 *     ticket        int    the caller's name for it (MSG_CL_CANCEL), 0: none
 *     kind          int    what it asks: 0 tools/call, 1 prompts/get (tool:
 *                          the prompt), 2 resources/read (tool: the URI)
 *     input         int    the caller's function for the server's requests it
 *                          causes (mk_relay_fn, in-process), 0: the host's
 *     input_arg     int    and its argument
 *     param_headers str    JSON text {Name: value}: the Mcp-Param-{Name}
 *                          headers its caller sent, checked against the tool's
 *                          x-mcp-header parameters; absent: not checked
 *     ok:     result   str    the tool's result, JSON text
 *             recovery str    after an auth recovery, JSON text {ran, path,
 *                             retry_skipped}
 *     failed: error         str    what failed
 *             kind          str    mcp_errkind_name, "auth" for a caller
 *                                  without a credential
 *             http_status   int    the upstream's, 0 when none
 *             recovery      str    as in the result
 *             auth_required str    JSON text: how the caller authorizes
 *
 *   MSG_CL_RECONNECT ask: make-before-break reconnect (joins one in progress)
 *     {}
 *     ok:     {}
 *
 *   MSG_CL_DISABLE ask: close everything, state disabled
 *     ticket int    an API change's ticket, carried by the config it stores
 *                   (persister.h), 0: none
 *     ok:     {}
 *
 *   MSG_CL_ENABLE ask: leave disabled and connect (the reply is the connect's)
 *     ticket int    an API change's ticket, carried by the config it stores
 *                   (persister.h), 0: none
 *     ok:     {}
 *
 *   MSG_CL_UPDATE ask: apply a config patch (below)
 *     patch  str    a JSON object's text
 *     file   bool   from a config file (a reload), not the API
 *     stored bool   the whole stored config (another node's write)
 *     ticket int    an API change's ticket, carried by the config it stores
 *                   (persister.h), 0: none
 *     undo   bool   back to the config the last API change replaced (the store
 *                   refused it): not stored again
 *     ok:     {}
 *
 *   MSG_CL_METRICS ask: the client's counters
 *     {}
 *     ok:     json str    its counters: see mk_client_metrics_json
 *
 *   MSG_CL_SETTINGS tell: from the supervisor: the global settings, used where
 *                         the client's config has none (a new sync_ms reaches
 *                         the supervisor in the view)
 *     sync_ms int    the global tool_sync_interval
 *     exec_ms int    the global tool_execution_timeout
 *     changes int    the global tool_changes (a cfg_changes)
 *
 *   MSG_CL_CRED tell: from the credential actor: the client's credential
 *                     changed
 *     status  str    "active", "refreshed", "needs_reauth" or "rotated"
 *     message str    why, for needs_reauth and rotated
 *
 *   MSG_CL_INPUT ask: the host's answer to a server's request (input.c)
 *     request_id str    the waiting request's id (MSG_CL_INPUTS)
 *     result     str    its result, JSON text; absent: declined (an
 *                       elicitation's {"action": "decline"}, else an error)
 *     ok:     {}
 *
 *   MSG_CL_INPUTS ask: the server requests waiting for the host
 *     {}
 *     ok:     json str    JSON array text: {request_id, method, params,
 *                         expires_in_ms} each
 *
 *   MSG_CL_CANCEL tell: give up on a call: the server is told
 *                       (notifications/cancelled), the caller answered
 *                       "cancelled"
 *     ticket int    the call's ticket
 *     reason str    why, for the server's notifications/cancelled
 *
 *   MSG_CL_HISTORY ask: the client's last transitions (CL_HISTORY_MAX)
 *     {}
 *     ok:     json str    its last transitions, JSON array text, oldest first:
 *                         see mk_client_history_json
 *
 *   MSG_CL_VERSIONS ask: the client's tool-list versions: the store's, else
 *                        those of this run
 *     {}
 *     ok:     json str    its tool-list versions, JSON array text, oldest
 *                         first: see mk_client_tool_versions_json
 *
 *   MSG_CL_DECIDE ask: tool_changes hold: approve (take every tool) or reject
 *                      the list now, named by its digest
 *     digest  str    the list's digest, as the view shows it
 *     approve bool   approve it (else reject it)
 *     ok:     {}
 *
 *   MSG_CL_APPROVALS tell: from the cluster actor: another node approved or
 *                          rejected the client's tool list: read the approval
 *                          again
 *     {}
 *
 *   MSG_CL_SNAPSHOT tell: publish the client's state on the stream now (a
 *                         snapshot: see mk_stream_snapshot)
 *     {}
 * </msgdoc>
 *
 * MSG_CL_UPDATE: an API patch (file false) has its top-level fields
 * merged into the config, a view's "<redacted>" put back and the env.
 * strings it brings made literal (cfg_literal_patched); a file's (a
 * reload) is the whole new config, resolved as a file's.  See
 * mk_client_update.
 */
#ifndef ACTORS_CLIENT_MSG_H
#define ACTORS_CLIENT_MSG_H

#include "actors/msgbase.h"
#include "codec/mp.h"
#include "codec/msgdef.h"
#include "model/failure.h"

#define CLIENT_PREFIX "mcp:" /* registry name: "mcp:" + client name */

/* ---- messages (their fields; the table above is rendered from these) */

#define CL_CONNECT_FIELDS(F, S)                                               \
	F(S, BOOL, boot, "at the runtime's boot")                             \
	F(S, BOOL, restored, "from the store: nothing to save")               \
	F(S, STR, tools,                                                      \
	  "known tools, JSON text: seed the hash; a per-call client then "    \
	  "skips its synchronous discovery")                                  \
	F(S, INT, ticket,                                                     \
	  "an API change's ticket, carried by the config it stores "          \
	  "(persister.h), 0: none")
CODEC_MSG_STRUCT(cl_connect_msg, CL_CONNECT_FIELDS)

#define CL_TICKET_FIELDS(F, S)                                                \
	F(S, INT, ticket,                                                     \
	  "an API change's ticket, carried by the config it stores "          \
	  "(persister.h), 0: none")
CODEC_MSG_STRUCT(cl_ticket_msg, CL_TICKET_FIELDS)

#define CL_STATE_FIELDS(F, S)                                                 \
	F(S, INT, state, "the cl_state after the check")                      \
	F(S, STR, metrics, "its counters, JSON text, as MSG_SV_METRICS")
CODEC_MSG_STRUCT(cl_state_msg, CL_STATE_FIELDS)

#define CL_CALL_FIELDS(F, S)                                                   \
	F(S, STR, tool, "the tool's name")                                     \
	F(S, STR, arguments, "a JSON object's text ({} when absent)")          \
	F(S, INT, timeout_ms, "0: the client's")                               \
	F(S, STR, mode, "a per-user caller's mode, or absent")                 \
	F(S, STR, identity, "the caller's identity, or absent")                \
	F(S, SECRET, subject, "the caller's token to exchange, or absent")     \
	F(S, STR, requester, "who answers for its sign-ins, or absent")        \
	F(S, INT, progress,                                                    \
	  "the caller's progress function (in-process), 0: none")              \
	F(S, INT, progress_arg, "and its argument")                            \
	F(S, STR, traceparent, "the caller's W3C trace context, or absent")    \
	F(S, STR, tracestate, "and its vendor part, or absent")                \
	F(S, INT, ticket,                                                      \
	  "the caller's name for it (MSG_CL_CANCEL), 0: none")                 \
	F(S, INT, kind,                                                        \
	  "what it asks: 0 tools/call, 1 prompts/get (tool: the prompt), "     \
	  "2 resources/read (tool: the URI)")                                  \
	F(S, INT, input,                                                       \
	  "the caller's function for the server's requests it causes "         \
	  "(mk_relay_fn, in-process), 0: the host's")                          \
	F(S, INT, input_arg, "and its argument")                               \
	F(S, STR, param_headers,                                               \
	  "JSON text {Name: value}: the Mcp-Param-{Name} headers its caller "  \
	  "sent, checked against the tool's x-mcp-header parameters; absent: " \
	  "not checked")
CODEC_MSG_STRUCT(cl_call_msg, CL_CALL_FIELDS)

/* cl_call_msg.kind (mk_call_kind's values) */
enum { CL_CALL_TOOL, CL_CALL_PROMPT, CL_CALL_RESOURCE };

#define CL_CANCEL_FIELDS(F, S)                                                \
	F(S, INT, ticket, "the call's ticket")                                \
	F(S, STR, reason, "why, for the server's notifications/cancelled")
CODEC_MSG_STRUCT(cl_cancel_msg, CL_CANCEL_FIELDS)

#define CL_RESULT_FIELDS(F, S)                                                \
	F(S, STR, result, "the tool's result, JSON text")                     \
	F(S, STR, recovery,                                                   \
	  "after an auth recovery, JSON text {ran, path, retry_skipped}")
CODEC_MSG_STRUCT(cl_result_msg, CL_RESULT_FIELDS)

#define CL_FAILED_FIELDS(F, S)                                                \
	F(S, STR, error, "what failed")                                       \
	F(S, STR, kind,                                                       \
	  "mcp_errkind_name, \"auth\" for a caller without "                  \
	  "a credential")                                                     \
	F(S, INT, http_status, "the upstream's, 0 when none")                 \
	F(S, STR, recovery, "as in the result")                               \
	F(S, STR, auth_required, "JSON text: how the caller authorizes")
CODEC_MSG_STRUCT(cl_failed_msg, CL_FAILED_FIELDS)

#define CL_UPDATE_FIELDS(F, S)                                                \
	F(S, STR, patch, "a JSON object's text")                              \
	F(S, BOOL, file, "from a config file (a reload), not the API")        \
	F(S, BOOL, stored, "the whole stored config (another node's write)")  \
	F(S, INT, ticket,                                                     \
	  "an API change's ticket, carried by the config it stores "          \
	  "(persister.h), 0: none")                                           \
	F(S, BOOL, undo,                                                      \
	  "back to the config the last API change replaced (the store "       \
	  "refused it): not stored again")
CODEC_MSG_STRUCT(cl_update_msg, CL_UPDATE_FIELDS)

#define CL_METRICS_FIELDS(F, S)                                               \
	F(S, STR, json, "its counters: see mk_client_metrics_json")
CODEC_MSG_STRUCT(cl_metrics_msg, CL_METRICS_FIELDS)

#define CL_HISTORY_FIELDS(F, S)                                               \
	F(S, STR, json,                                                       \
	  "its last transitions, JSON array text, oldest first: see "         \
	  "mk_client_history_json")
CODEC_MSG_STRUCT(cl_history_msg, CL_HISTORY_FIELDS)

#define CL_VERSIONS_FIELDS(F, S)                                              \
	F(S, STR, json,                                                       \
	  "its tool-list versions, JSON array text, oldest first: see "       \
	  "mk_client_tool_versions_json")
CODEC_MSG_STRUCT(cl_versions_msg, CL_VERSIONS_FIELDS)

#define CL_DECIDE_FIELDS(F, S)                                                \
	F(S, STR, digest, "the list's digest, as the view shows it")          \
	F(S, BOOL, approve, "approve it (else reject it)")
CODEC_MSG_STRUCT(cl_decide_msg, CL_DECIDE_FIELDS)

#define CL_SETTINGS_FIELDS(F, S)                                              \
	F(S, INT, sync_ms, "the global tool_sync_interval")                   \
	F(S, INT, exec_ms, "the global tool_execution_timeout")               \
	F(S, INT, changes, "the global tool_changes (a cfg_changes)")
CODEC_MSG_STRUCT(cl_settings_msg, CL_SETTINGS_FIELDS)

#define CL_CRED_FIELDS(F, S)                                                  \
	F(S, STR, status,                                                     \
	  "\"active\", \"refreshed\", \"needs_reauth\" or \"rotated\"")       \
	F(S, STR, message, "why, for needs_reauth and rotated")
CODEC_MSG_STRUCT(cl_cred_msg, CL_CRED_FIELDS)

#define CL_INPUT_FIELDS(F, S)                                                 \
	F(S, STR, request_id, "the waiting request's id (MSG_CL_INPUTS)")     \
	F(S, STR, result,                                                     \
	  "its result, JSON text; absent: declined (an elicitation's "        \
	  "{\"action\": \"decline\"}, else an error)")
CODEC_MSG_STRUCT(cl_input_msg, CL_INPUT_FIELDS)

#define CL_INPUTS_FIELDS(F, S)                                                \
	F(S, STR, json,                                                       \
	  "JSON array text: {request_id, method, params, expires_in_ms} "     \
	  "each")
CODEC_MSG_STRUCT(cl_inputs_msg, CL_INPUTS_FIELDS)

/* The "input" event of the state stream: a server's request waiting for
 * the host, and what became of it. */
#define CL_INPUT_EVENT_FIELDS(F, S)                                           \
	F(S, STR, client_id, "the client it came on")                         \
	F(S, STR, name, "and its name")                                       \
	F(S, STR, request_id, "the runtime's id for it")                      \
	F(S, STR, method, "elicitation/create, sampling/createMessage, ...")  \
	F(S, STR, state, "pending, answered, expired or gone")                \
	F(S, STR, message, "an elicitation's message, else absent")           \
	F(S, STR, time, "RFC 3339 UTC")                                       \
	F(S, STR, node_id, "the instance")
CODEC_MSG_STRUCT(cl_input_event, CL_INPUT_EVENT_FIELDS)

/* The "state" event of the state stream: a transition (or a snapshot). */
#define CL_STATE_EVENT_FIELDS(F, S)                                           \
	F(S, STR, client_id, "the client")                                    \
	F(S, STR, name, "and its name")                                       \
	F(S, STR, state, "the state it shows now")                            \
	F(S, NSTR, old_state, "the one before; nil: a new client's first")    \
	F(S, SUB(model_failure), last_failure, "nil, or the last failure")    \
	F(S, INT, generation, "the connection's generation")                  \
	F(S, INT, tools_count, "tools known")                                 \
	F(S, STR, time, "RFC 3339 UTC")                                       \
	F(S, STR, node_id, "the instance")                                    \
	F(S, STR, protocol_version,                                           \
	  "the server's MCP revision; \"\" unknown")                          \
	F(S, BOOL, snapshot, "mk_stream_snapshot asked for it")
CODEC_MSG_STRUCT(cl_state_event, CL_STATE_EVENT_FIELDS)

/* The "tools" event (a tool list's real change) and the "lists" event
 * (prompts, resources and templates: one hash of the three). */
#define CL_LIST_EVENT_FIELDS(F, S)                                            \
	F(S, STR, client_id, "the client")                                    \
	F(S, STR, name, "and its name")                                       \
	F(S, STR, hash, "SHA-256 hex of the canonical list")                  \
	F(S, INT, count, "how many")                                          \
	F(S, STR, diff, "tools: what changed (a version's diff), JSON text")
CODEC_MSG_STRUCT(cl_list_event, CL_LIST_EVENT_FIELDS)

/* The "pin" event of the state stream: tool_changes hold/block held
 * tools of a new list back, or the list was approved or rejected. */
#define CL_PIN_EVENT_FIELDS(F, S)                                             \
	F(S, STR, client_id, "the client")                                    \
	F(S, STR, name, "and its name")                                       \
	F(S, STR, state, "held, approved or rejected")                        \
	F(S, STR, hash, "the digest of the list it is about")                 \
	F(S, INT, count, "how many tools are held now")                       \
	F(S, STR, message, "the tools held and what changed, one line")       \
	F(S, STR, time, "RFC 3339 UTC")                                       \
	F(S, STR, node_id, "the instance")
CODEC_MSG_STRUCT(cl_pin_event, CL_PIN_EVENT_FIELDS)

/* ---- the list (codec/msgdef.h): the table above is rendered from it */

#define CL_MESSAGES(M)                                                        \
	M(MSG_CL_CONNECT, ask, cl_connect_msg, codec_no, codec_nil,           \
	  on_connect, "first connect or discovery")                           \
	M(MSG_CL_CHECK, ask, codec_no, cl_state_msg, codec_nil, on_check,     \
	  "run one health check")                                             \
	M(MSG_CL_CALL, ask, cl_call_msg, cl_result_msg, cl_failed_msg,        \
	  cl_on_call, "call a tool")                                          \
	M(MSG_CL_RECONNECT, ask, codec_no, codec_no, codec_nil, on_reconnect, \
	  "make-before-break reconnect (joins one in progress)")              \
	M(MSG_CL_DISABLE, ask, cl_ticket_msg, codec_no, codec_nil,            \
	  on_disable, "close everything, state disabled")                     \
	M(MSG_CL_ENABLE, ask, cl_ticket_msg, codec_no, codec_nil, on_enable,  \
	  "leave disabled and connect (the reply is the connect's)")          \
	M(MSG_CL_UPDATE, ask, cl_update_msg, codec_no, codec_nil, on_update,  \
	  "apply a config patch (below)")                                     \
	M(MSG_CL_METRICS, ask, codec_no, cl_metrics_msg, codec_nil,           \
	  cl_on_metrics, "the client's counters")                             \
	M(MSG_CL_SETTINGS, tell, cl_settings_msg, codec_nil, codec_nil,       \
	  on_settings,                                                        \
	  "from the supervisor: the global settings, used where the "         \
	  "client's config has none (a new sync_ms reaches the supervisor "   \
	  "in the view)")                                                     \
	M(MSG_CL_CRED, tell, cl_cred_msg, codec_nil, codec_nil, cl_on_cred,   \
	  "from the credential actor: the client's credential changed")       \
	M(MSG_CL_INPUT, ask, cl_input_msg, codec_no, codec_nil, cl_on_input,  \
	  "the host's answer to a server's request (input.c)")                \
	M(MSG_CL_INPUTS, ask, codec_no, cl_inputs_msg, codec_nil,             \
	  cl_on_inputs, "the server requests waiting for the host")           \
	M(MSG_CL_CANCEL, tell, cl_cancel_msg, codec_nil, codec_nil,           \
	  cl_on_cancel,                                                       \
	  "give up on a call: the server is told "                            \
	  "(notifications/cancelled), the caller answered \"cancelled\"")     \
	M(MSG_CL_HISTORY, ask, codec_no, cl_history_msg, codec_nil,           \
	  cl_on_history, "the client's last transitions (CL_HISTORY_MAX)")    \
	M(MSG_CL_VERSIONS, ask, codec_no, cl_versions_msg, codec_nil,         \
	  cl_on_versions,                                                     \
	  "the client's tool-list versions: the store's, else those of "      \
	  "this run")                                                         \
	M(MSG_CL_DECIDE, ask, cl_decide_msg, codec_no, codec_nil,             \
	  cl_on_decide,                                                       \
	  "tool_changes hold: approve (take every tool) or reject the list "  \
	  "now, named by its digest")                                         \
	M(MSG_CL_APPROVALS, tell, codec_no, codec_nil, codec_nil,             \
	  on_approvals,                                                       \
	  "from the cluster actor: another node approved or rejected the "    \
	  "client's tool list: read the approval again")                      \
	M(MSG_CL_SNAPSHOT, tell, codec_no, codec_nil, codec_nil, on_snapshot, \
	  "publish the client's state on the stream now (a snapshot: see "    \
	  "mk_stream_snapshot)")
CODEC_MSG_ENUM(CL_MSG, CL_MSG_BASE, CL_MESSAGES);
MSG_FITS(CL_MSG, CL_MSG_BASE);

/* The client actor's messages, as the table above shows them. */
extern const codec_msgdef cl_msgs[];
extern const size_t       cl_msgs_n;

#endif /* ACTORS_CLIENT_MSG_H */
