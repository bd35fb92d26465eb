/*
 * envelope.c - msgpack encoding of inbox envelopes (see envelope.h).
 */
#include "codec/envelope.h"

#include <msgpack.h>
#include <string.h>

#include "codec/mpcheck.h"
#include "codec/msg.h"
#include "mcpkeep.h"

static const char *msg_names[MSG_KERNEL_END] = {
        [MSG_NONE] = "none", [MSG_TERM] = "term", [MSG_REPLY] = "reply",
        [MSG_PING] = "ping", [MSG_USER] = "user",
};

int
codec_msg_valid(unsigned type)
{
	return ((type != MSG_NONE && type < MSG_KERNEL_END) ||
	        (type >= MSG_BASE && type < MSG_LIMIT));
}

const char *
codec_msg_name(unsigned type)
{
	return (type < MSG_KERNEL_END ? msg_names[type] : "?");
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
	if (get_uint(&f[0], MSG_LIMIT - 1, &u) != 0 || !codec_msg_valid(u)) {
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
