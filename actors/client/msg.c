/*
 * msg.c - the client actor's messages: their field tables and the table
 * client.h renders (see codec/msgdef.h).
 */
#include "codec/msg.h"
#include "actors/client/client.h"

CODEC_MSG_FIELDS(cl_connect_msg, CL_CONNECT_FIELDS);
CODEC_MSG_FIELDS(cl_state_msg, CL_STATE_FIELDS);
CODEC_MSG_FIELDS(cl_call_msg, CL_CALL_FIELDS);
CODEC_MSG_FIELDS(cl_result_msg, CL_RESULT_FIELDS);
CODEC_MSG_FIELDS(cl_failed_msg, CL_FAILED_FIELDS);
CODEC_MSG_FIELDS(cl_update_msg, CL_UPDATE_FIELDS);
CODEC_MSG_FIELDS(cl_ticket_msg, CL_TICKET_FIELDS);
CODEC_MSG_FIELDS(cl_metrics_msg, CL_METRICS_FIELDS);
CODEC_MSG_FIELDS(cl_history_msg, CL_HISTORY_FIELDS);
CODEC_MSG_FIELDS(cl_versions_msg, CL_VERSIONS_FIELDS);
CODEC_MSG_FIELDS(cl_decide_msg, CL_DECIDE_FIELDS);
CODEC_MSG_FIELDS(cl_settings_msg, CL_SETTINGS_FIELDS);
CODEC_MSG_FIELDS(cl_cred_msg, CL_CRED_FIELDS);
CODEC_MSG_FIELDS(cl_input_msg, CL_INPUT_FIELDS);
CODEC_MSG_FIELDS(cl_inputs_msg, CL_INPUTS_FIELDS);
CODEC_MSG_FIELDS(cl_input_event, CL_INPUT_EVENT_FIELDS);
CODEC_MSG_FIELDS(cl_cancel_msg, CL_CANCEL_FIELDS);
CODEC_MSG_FIELDS(cl_pin_event, CL_PIN_EVENT_FIELDS);

#define NONE (&codec_no_fields)

const codec_msgdef cl_msgs[] = {
        {CODEC_MSG(MSG_CL_CONNECT), "ask", &cl_connect_msg_fields, NONE, NULL,
         "first connect or discovery"},
        {CODEC_MSG(MSG_CL_CHECK), "ask", NONE, &cl_state_msg_fields, NULL,
         "run one health check"},
        {CODEC_MSG(MSG_CL_CALL), "ask", &cl_call_msg_fields,
         &cl_result_msg_fields, &cl_failed_msg_fields, "call a tool"},
        {CODEC_MSG(MSG_CL_RECONNECT), "ask", NONE, NONE, NULL,
         "make-before-break reconnect (joins one in progress)"},
        {CODEC_MSG(MSG_CL_DISABLE), "ask", &cl_ticket_msg_fields, NONE, NULL,
         "close everything, state disabled"},
        {CODEC_MSG(MSG_CL_ENABLE), "ask", &cl_ticket_msg_fields, NONE, NULL,
         "leave disabled and connect (the reply is the connect's)"},
        {CODEC_MSG(MSG_CL_UPDATE), "ask", &cl_update_msg_fields, NONE, NULL,
         "apply a config patch (below)"},
        {CODEC_MSG(MSG_CL_METRICS), "ask", NONE, &cl_metrics_msg_fields, NULL,
         "the client's counters"},
        {CODEC_MSG(MSG_CL_SETTINGS), "tell", &cl_settings_msg_fields, NULL,
         NULL,
         "from the supervisor: the global settings, used where the client's config has none (a new sync_ms reaches the supervisor in the view)"},
        {CODEC_MSG(MSG_CL_CRED), "tell", &cl_cred_msg_fields, NULL, NULL,
         "from the credential actor: the client's credential changed"},
        {CODEC_MSG(MSG_CL_INPUT), "ask", &cl_input_msg_fields, NONE, NULL,
         "the host's answer to a server's request (input.c)"},
        {CODEC_MSG(MSG_CL_INPUTS), "ask", NONE, &cl_inputs_msg_fields, NULL,
         "the server requests waiting for the host"},
        {CODEC_MSG(MSG_CL_CANCEL), "tell", &cl_cancel_msg_fields, NULL, NULL,
         "give up on a call: the server is told (notifications/cancelled), the caller answered \"cancelled\""},
        {CODEC_MSG(MSG_CL_HISTORY), "ask", NONE, &cl_history_msg_fields, NULL,
         "the client's last transitions (CL_HISTORY_MAX)"},
        {CODEC_MSG(MSG_CL_VERSIONS), "ask", NONE, &cl_versions_msg_fields,
         NULL,
         "the client's tool-list versions: the store's, else those of this "
         "run"},
        {CODEC_MSG(MSG_CL_DECIDE), "ask", &cl_decide_msg_fields, NONE, NULL,
         "tool_changes hold: approve (take every tool) or reject the list "
         "now, named by its digest"},
        {CODEC_MSG(MSG_CL_APPROVALS), "tell", NONE, NULL, NULL,
         "from the cluster actor: another node approved or rejected the "
         "client's tool list: read the approval again"},
        {CODEC_MSG(MSG_CL_SNAPSHOT), "tell", NONE, NULL, NULL,
         "publish the client's state on the stream now (a snapshot: see "
         "mk_stream_snapshot)"},
};
const size_t cl_msgs_n = sizeof(cl_msgs) / sizeof(cl_msgs[0]);
