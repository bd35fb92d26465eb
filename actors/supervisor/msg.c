/*
 * msg.c - the supervisor's messages: their field tables and the table
 * supervisor.h renders (see codec/msgdef.h).
 */
#include "actors/client/client.h"
#include "actors/supervisor/supervisor.h"

CODEC_MSG_FIELDS(sv_stats_msg, SV_STATS_FIELDS);
CODEC_MSG_FIELDS(sv_add_msg, SV_ADD_FIELDS);
CODEC_MSG_FIELDS(sv_id_msg, SV_ID_FIELDS);
CODEC_MSG_FIELDS(sv_load_msg, SV_LOAD_FIELDS);
CODEC_MSG_FIELDS(sv_count_msg, SV_COUNT_FIELDS);
CODEC_MSG_FIELDS(sv_file_msg, SV_FILE_FIELDS);
CODEC_MSG_FIELDS(sv_diff_msg, SV_DIFF_FIELDS);
CODEC_MSG_FIELDS(sv_client_msg, SV_CLIENT_FIELDS);
CODEC_MSG_FIELDS(sv_update_msg, SV_UPDATE_FIELDS);
CODEC_MSG_FIELDS(sv_list_msg, SV_LIST_FIELDS);
CODEC_MSG_FIELDS(sv_json_msg, SV_JSON_FIELDS);
CODEC_MSG_FIELDS(sv_view_msg, SV_VIEW_FIELDS);
CODEC_MSG_FIELDS(sv_metrics_msg, SV_METRICS_FIELDS);
CODEC_MSG_FIELDS(sv_unknown_msg, SV_UNKNOWN_FIELDS);
CODEC_MSG_FIELDS(sv_settings_msg, SV_SETTINGS_FIELDS);
CODEC_MSG_FIELDS(sv_sync_msg, SV_SYNC_FIELDS);
CODEC_MSG_FIELDS(sv_peers_msg, SV_PEERS_FIELDS);

#define NONE   (&codec_no_fields)
#define CLIENT (&sv_client_msg_fields)

const codec_msgdef supervisor_msgs[] = {
        {CODEC_MSG(MSG_STATS), "ask", NONE, &sv_stats_msg_fields, NULL,
         "the runtime's counters"},
        {CODEC_MSG(MSG_SV_ADD), "ask", &sv_add_msg_fields, &sv_id_msg_fields,
         NULL, "add a client from its config (below)"},
        {CODEC_MSG(MSG_SV_LOAD), "ask", &sv_load_msg_fields,
         &sv_count_msg_fields, NULL,
         "boot every client of a config file or of the store (below)"},
        {CODEC_MSG(MSG_SV_RELOAD), "ask", &sv_file_msg_fields,
         &sv_diff_msg_fields, NULL, "a config file again, as a diff (below)"},
        {CODEC_MSG(MSG_SV_REMOVE), "ask", CLIENT, NONE, NULL,
         "stop and forget a client"},
        {CODEC_MSG(MSG_SV_DISABLE), "ask", CLIENT, NONE, NULL,
         "disable a client"},
        {CODEC_MSG(MSG_SV_ENABLE), "ask", CLIENT, NONE, NULL,
         "enable a client"},
        {CODEC_MSG(MSG_SV_RECONNECT), "ask", CLIENT, NONE, NULL,
         "reconnect a sticky client (an error: the client's)"},
        {CODEC_MSG(MSG_SV_UPDATE), "ask", &sv_update_msg_fields, NONE, NULL,
         "change a client's config"},
        {CODEC_MSG(MSG_SV_REFRESH), "ask", CLIENT, &cl_state_msg_fields, NULL,
         "a client's check now: the tool list read again"},
        {CODEC_MSG(MSG_SV_LIST), "ask", &sv_list_msg_fields,
         &sv_json_msg_fields, NULL, "the client list view"},
        {CODEC_MSG(MSG_SV_VIEW), "tell", &sv_view_msg_fields, NULL, NULL,
         "from a client actor: its view changed"},
        {CODEC_MSG(MSG_SV_METRICS), "tell", &sv_metrics_msg_fields, NULL, NULL,
         "from a client actor: its counters changed (below)"},
        {CODEC_MSG(MSG_SV_SETTINGS), "ask", &sv_settings_msg_fields, NONE,
         NULL, "the global settings of config.json (below)"},
        {CODEC_MSG(MSG_SV_SYNC), "tell", &sv_sync_msg_fields, NULL, NULL,
         "from the cluster actor: a client another node changed (below)"},
        {CODEC_MSG(MSG_SV_PEERS), "tell", &sv_peers_msg_fields, NULL, NULL,
         "from the cluster actor: the other nodes' states (below)"},
        {CODEC_MSG(MSG_SV_UNKNOWN), "tell", &sv_unknown_msg_fields, NULL, NULL,
         "from a client actor: a call whose outcome is unknown, for the "
         "ledger (the last SV_UNKNOWN_MAX)"},
        {CODEC_MSG(MSG_SV_UNKNOWNS), "ask", NONE, &sv_json_msg_fields, NULL,
         "the ledger: [{client, tool, caller, time, request_id, error}], "
         "oldest first"},
        {CODEC_MSG(MSG_SV_SNAPSHOT), "ask", NONE, NONE, NULL,
         "every client publishes its state on the stream (its answer: the "
         "asks are sent)"},
};
const size_t supervisor_msgs_n =
        sizeof(supervisor_msgs) / sizeof(supervisor_msgs[0]);
