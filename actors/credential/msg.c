/*
 * msg.c - the credential actor's messages: their field tables and the
 * table credential.h renders (see codec/msgdef.h).
 */
#include "actors/credential/credential.h"

CODEC_MSG_FIELDS(cr_register_msg, CR_REGISTER_FIELDS);
CODEC_MSG_FIELDS(cr_id_msg, CR_ID_FIELDS);
CODEC_MSG_FIELDS(cr_get_msg, CR_GET_FIELDS);
CODEC_MSG_FIELDS(cr_headers_msg, CR_HEADERS_FIELDS);
CODEC_MSG_FIELDS(cr_refused_msg, CR_REFUSED_FIELDS);
CODEC_MSG_FIELDS(cr_initiate_msg, CR_INITIATE_FIELDS);
CODEC_MSG_FIELDS(cr_flow_msg, CR_FLOW_FIELDS);
CODEC_MSG_FIELDS(cr_complete_msg, CR_COMPLETE_FIELDS);
CODEC_MSG_FIELDS(cr_client_id_msg, CR_CLIENT_ID_FIELDS);
CODEC_MSG_FIELDS(cr_verify_headers_msg, CR_VERIFY_HEADERS_FIELDS);
CODEC_MSG_FIELDS(cr_submit_headers_msg, CR_SUBMIT_HEADERS_FIELDS);
CODEC_MSG_FIELDS(cr_verify_exchange_msg, CR_VERIFY_EXCHANGE_FIELDS);
CODEC_MSG_FIELDS(cr_exchanged_msg, CR_EXCHANGED_FIELDS);
CODEC_MSG_FIELDS(cr_evict_msg, CR_EVICT_FIELDS);
CODEC_MSG_FIELDS(cr_evicted_msg, CR_EVICTED_FIELDS);
CODEC_MSG_FIELDS(cr_stats_msg, CR_STATS_FIELDS);
CODEC_MSG_FIELDS(cr_row_changed_msg, CR_ROW_CHANGED_FIELDS);

CODEC_MSG_DEFS(credential_msgs, CR_MESSAGES);
