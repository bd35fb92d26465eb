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
CODEC_MSG_FIELDS(sv_peer, SV_PEER_FIELDS);
CODEC_MSG_FIELDS(sv_peers_msg, SV_PEERS_FIELDS);

CODEC_MSG_DEFS(supervisor_msgs, SV_MESSAGES);
