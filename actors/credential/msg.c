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

#define NONE (&codec_no_fields)

const codec_msgdef credential_msgs[] = {
        {CODEC_MSG(MSG_CR_REGISTER), "tell", &cr_register_msg_fields, NULL,
         NULL, "from a client actor: who it is, its OAuth config (below)"},
        {CODEC_MSG(MSG_CR_FORGET), "tell", &cr_id_msg_fields, NULL, NULL,
         "the client is gone"},
        {CODEC_MSG(MSG_CR_GET), "ask", &cr_get_msg_fields,
         &cr_headers_msg_fields, &cr_refused_msg_fields,
         "the header lines a connection needs (below)"},
        {CODEC_MSG(MSG_CR_INITIATE), "ask", &cr_initiate_msg_fields,
         &cr_flow_msg_fields, NULL, "start an OAuth flow (below)"},
        {CODEC_MSG(MSG_CR_COMPLETE), "ask", &cr_complete_msg_fields,
         &cr_client_id_msg_fields, NULL, "complete one (below)"},
        {CODEC_MSG(MSG_CR_VERIFY_HEADERS), "ask",
         &cr_verify_headers_msg_fields, NONE, NULL,
         "per_user_headers: the admin's sample, retained for discovery"},
        {CODEC_MSG(MSG_CR_SUBMIT_HEADERS), "ask",
         &cr_submit_headers_msg_fields, NONE, NULL,
         "a caller's own header values for the session it was given"},
        {CODEC_MSG(MSG_CR_VERIFY_EXCHANGE), "ask",
         &cr_verify_exchange_msg_fields, &cr_exchanged_msg_fields, NULL,
         "token_exchange: the admin's subject, exchanged now and retained for discovery"},
        {CODEC_MSG(MSG_CR_EVICT), "ask", &cr_evict_msg_fields,
         &cr_evicted_msg_fields, NULL,
         "drop cached callers' credentials (below)"},
        {CODEC_MSG(MSG_CR_STATS), "ask", NONE, &cr_stats_msg_fields, NULL,
         "refresh, flow and cache counters"},
        {CODEC_MSG(MSG_CR_ROW_CHANGED), "tell", &cr_row_changed_msg_fields,
         NULL, NULL,
         "from the cluster actor: another node wrote a token (lease.c)"},
        {CODEC_MSG(MSG_CR_RESYNC), "tell", NONE, NULL, NULL,
         "from the cluster actor: the store was not listened to for a while (boot, a lost connection): every OAuth config and shared or admin token is read again (lease.c)"},
};
const size_t credential_msgs_n =
        sizeof(credential_msgs) / sizeof(credential_msgs[0]);
