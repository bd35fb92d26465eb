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
CODEC_MSG_FIELDS(cl_state_event, CL_STATE_EVENT_FIELDS);
CODEC_MSG_FIELDS(cl_list_event, CL_LIST_EVENT_FIELDS);

CODEC_MSG_DEFS(cl_msgs, CL_MESSAGES);
