/*
 * envelope.c - msgpack encoding of inbox envelopes (see envelope.h).
 */
#include "codec/envelope.h"

#include <msgpack.h>
#include <string.h>

#include "codec/mpcheck.h"
#include "codec/msg.h"
#include "mcpkeep.h"

/* clang-format off */
static const char *msg_names[MSG_COUNT] = {
	[MSG_NONE]         = "none",
	[MSG_TERM]         = "term",
	[MSG_REPLY]        = "reply",
	[MSG_PING]         = "ping",
	[MSG_STATS]        = "stats",
	[MSG_USER]         = "user",
	[MSG_SV_ADD]       = "sv_add",
	[MSG_SV_REMOVE]    = "sv_remove",
	[MSG_SV_DISABLE]   = "sv_disable",
	[MSG_SV_ENABLE]    = "sv_enable",
	[MSG_SV_RECONNECT] = "sv_reconnect",
	[MSG_SV_LIST]      = "sv_list",
	[MSG_SV_VIEW]      = "sv_view",
	[MSG_SV_LOAD]      = "sv_load",
	[MSG_CL_CONNECT]   = "cl_connect",
	[MSG_CL_CHECK]     = "cl_check",
	[MSG_CL_CALL]      = "cl_call",
	[MSG_CL_RECONNECT] = "cl_reconnect",
	[MSG_CL_DISABLE]   = "cl_disable",
	[MSG_CL_ENABLE]    = "cl_enable",
	[MSG_SV_UPDATE]    = "sv_update",
	[MSG_CL_UPDATE]    = "cl_update",
	[MSG_PS_CLIENT_PUT] = "ps_client_put",
	[MSG_PS_CLIENT_DEL] = "ps_client_del",
	[MSG_PS_TOOLS_PUT] = "ps_tools_put",
	[MSG_PS_LOAD]      = "ps_load",
	[MSG_PS_STATS]     = "ps_stats",
	[MSG_PS_ROW_PUT]   = "ps_row_put",
	[MSG_PS_ROW_DEL]   = "ps_row_del",
	[MSG_PS_ROWS]      = "ps_rows",
	[MSG_PS_SYNC]      = "ps_sync",
	[MSG_CR_REGISTER]  = "cr_register",
	[MSG_CR_FORGET]    = "cr_forget",
	[MSG_CR_GET]       = "cr_get",
	[MSG_CR_INITIATE]  = "cr_initiate",
	[MSG_CR_COMPLETE]  = "cr_complete",
	[MSG_CR_STATS]     = "cr_stats",
	[MSG_CL_CRED]      = "cl_cred",
	[MSG_CR_VERIFY_HEADERS] = "cr_verify_headers",
	[MSG_CR_SUBMIT_HEADERS] = "cr_submit_headers",
		[MSG_CR_VERIFY_EXCHANGE] = "cr_verify_exchange",
	[MSG_PS_ROW_GET] = "ps_row_get",
		[MSG_CR_EVICT] = "cr_evict",
	[MSG_SV_REFRESH] = "sv_refresh",
	[MSG_CL_METRICS] = "cl_metrics",
	[MSG_SV_SETTINGS] = "sv_settings",
	[MSG_SV_RELOAD] = "sv_reload",
	[MSG_SV_SYNC] = "sv_sync",
	[MSG_CS_STATE] = "cs_state",
	[MSG_SV_PEERS] = "sv_peers",
	[MSG_PS_LEASE] = "ps_lease",
	[MSG_CR_ROW_CHANGED] = "cr_row_changed",
	[MSG_CR_RESYNC] = "cr_resync",
	[MSG_CL_SETTINGS] = "cl_settings",
	[MSG_SV_METRICS]  = "sv_metrics",
	[MSG_CL_INPUT]    = "cl_input",
	[MSG_CL_INPUTS]   = "cl_inputs",
	[MSG_CL_CANCEL]   = "cl_cancel",
	[MSG_SV_SNAPSHOT] = "sv_snapshot",
	[MSG_CL_SNAPSHOT] = "cl_snapshot",
	[MSG_CL_HISTORY]  = "cl_history",
	[MSG_CL_VERSIONS] = "cl_versions",
	[MSG_PS_VERSIONS] = "ps_versions",
	[MSG_SV_UNKNOWN]  = "sv_unknown",
	[MSG_SV_UNKNOWNS] = "sv_unknowns",
	[MSG_CL_DECIDE]   = "cl_decide",
	[MSG_CL_APPROVALS] = "cl_approvals",
};
/* clang-format on */

int
codec_msg_valid(unsigned type)
{
	return (type != MSG_NONE && type < MSG_COUNT &&
	        msg_names[type] != NULL);
}

const char *
codec_msg_name(unsigned type)
{
	if (type >= MSG_COUNT || msg_names[type] == NULL) {
		return ("?");
	}
	return (msg_names[type]);
}

int
codec_env_encode(const codec_env *env, codec_write_fn write, void *sink)
{
	msgpack_packer pk;

	if (!codec_msg_valid(env->type) ||
	    env->sender_len > CODEC_SENDER_MAX) {
		return (MK_EINVAL);
	}
	if (env->payload_len > CODEC_PAYLOAD_MAX) {
		return (MK_ETOOBIG);
	}
	msgpack_packer_init(&pk, sink, (msgpack_packer_write)write);
	if (msgpack_pack_array(&pk, 6) != 0 ||
	    msgpack_pack_uint32(&pk, env->type) != 0 ||
	    msgpack_pack_uint64(&pk, env->corr) != 0 ||
	    msgpack_pack_str_with_body(&pk, env->sender, env->sender_len) !=
	            0 ||
	    msgpack_pack_int64(&pk, env->deadline) != 0 ||
	    msgpack_pack_int32(&pk, env->status) != 0 ||
	    msgpack_pack_bin_with_body(&pk, env->payload, env->payload_len) !=
	            0) {
		return (MK_ENOMEM);
	}
	return (0);
}

/* Reads a non-negative integer no larger than max. */
static int
get_uint(const msgpack_object *o, uint64_t max, uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max) {
		return (MK_EPROTO);
	}
	*out = o->via.u64;
	return (0);
}

/* Reads any integer within [min, max]. */
static int
get_int(const msgpack_object *o, int64_t min, int64_t max, int64_t *out)
{
	int64_t v;

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > (uint64_t)max) {
			return (MK_EPROTO);
		}
		v = (int64_t)o->via.u64;
	} else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		v = o->via.i64;
	} else {
		return (MK_EPROTO);
	}
	if (v < min || v > max) {
		return (MK_EPROTO);
	}
	*out = v;
	return (0);
}

static int
decode_fields(codec_env *env, const msgpack_object *root)
{
	const msgpack_object *f;
	uint64_t              u;
	int64_t               i;

	if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != 6) {
		return (MK_EPROTO);
	}
	f = root->via.array.ptr;
	if (get_uint(&f[0], MSG_COUNT - 1, &u) != 0 || !codec_msg_valid(u)) {
		return (MK_EPROTO);
	}
	env->type = (uint32_t)u;
	if (get_uint(&f[1], UINT64_MAX, &env->corr) != 0) {
		return (MK_EPROTO);
	}
	if (f[2].type != MSGPACK_OBJECT_STR ||
	    f[2].via.str.size > CODEC_SENDER_MAX) {
		return (MK_EPROTO);
	}
	/* never NULL, even when empty */
	env->sender     = f[2].via.str.size != 0 ? f[2].via.str.ptr : "";
	env->sender_len = f[2].via.str.size;
	if (get_int(&f[3], 0, INT64_MAX, &env->deadline) != 0) {
		return (MK_EPROTO);
	}
	if (get_int(&f[4], INT32_MIN, INT32_MAX, &i) != 0) {
		return (MK_EPROTO);
	}
	env->status = (int32_t)i;
	if (f[5].type != MSGPACK_OBJECT_BIN ||
	    f[5].via.bin.size > CODEC_PAYLOAD_MAX) {
		return (MK_EPROTO);
	}
	env->payload_len = f[5].via.bin.size;
	env->payload     = env->payload_len != 0
	            ? (const uint8_t *)f[5].via.bin.ptr
	            : NULL;
	return (0);
}

int
codec_env_decode(codec_env *env, const void *buf, size_t len)
{
	msgpack_unpacked      up;
	msgpack_unpack_return ur;
	size_t                off = 0;
	int                   rv;

	memset(env, 0, sizeof(*env));
	if (len > CODEC_ENV_MAX) {
		return (MK_ETOOBIG);
	}
	/* Envelopes are flat: an array of scalars, depth 1. */
	if (buf == NULL || codec_mp_check(buf, len, 1) != 0) {
		return (MK_EPROTO);
	}
	msgpack_unpacked_init(&up);
	ur = msgpack_unpack_next(&up, buf, len, &off);
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len) {
		rv = MK_EPROTO;
	} else {
		rv = decode_fields(env, &up.data);
	}
	msgpack_unpacked_destroy(&up);
	if (rv != 0) {
		memset(env, 0, sizeof(*env));
	}
	return (rv);
}
