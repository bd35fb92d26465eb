/*
 * envelope.h - the msgpack envelope every inbox message travels in.
 *
 * Wire form: a msgpack array of six items
 *     [type: uint, corr: uint, sender: str, deadline: int,
 *      status: int, payload: bin]
 * type      a codec_msg_type
 * corr      correlation id of an ask and of its reply; 0 for a tell
 * sender    registry name of the sending actor, "" for a non-actor caller
 * deadline  CLOCK_MONOTONIC nanoseconds after which nobody waits for the
 *           answer; 0 = none
 * status    result code (mk_err) of a reply; 0 in requests
 * payload   opaque bytes, usually a msgpack object of the type's fields
 *
 * The codec is pure: no threads, no logging, no globals.  Decoding checks
 * every bound and never reads outside the input.
 */
#ifndef CODEC_ENVELOPE_H
#define CODEC_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#define CODEC_SENDER_MAX  64u                        /* bytes in a sender */
#define CODEC_PAYLOAD_MAX (16u * 1024u * 1024u)      /* bytes in a payload */
#define CODEC_ENV_MAX     (CODEC_PAYLOAD_MAX + 256u) /* bytes in an envelope */

typedef struct codec_env {
	uint32_t       type;        /* codec_msg_type */
	uint64_t       corr;        /* correlation id; 0 for a tell */
	const char    *sender;      /* not NUL-terminated; see sender_len */
	size_t         sender_len;  /* bytes in sender */
	int64_t        deadline;    /* monotonic ns; 0 = none */
	int32_t        status;      /* mk_err of a reply */
	const uint8_t *payload;     /* payload bytes, or NULL when empty */
	size_t         payload_len; /* bytes in payload */
} codec_env;

/*
 * codec_env_write is where codec_env_encode sends its bytes: it appends len
 * bytes to the sink and returns 0, or non-zero when it cannot.
 */
typedef int (*codec_write_fn)(void *sink, const char *buf, size_t len);

/*
 * codec_env_encode writes env to the sink.  Never blocks beyond the sink.
 * Returns 0, MK_EINVAL (type names none, sender too long), MK_ETOOBIG
 * (payload over CODEC_PAYLOAD_MAX) or MK_ENOMEM (the sink refused).
 */
int codec_env_encode(const codec_env *env, codec_write_fn write, void *sink);

/*
 * codec_env_decode parses exactly len bytes into env.  On success the
 * pointers in env point into buf, which must outlive env.
 * Returns 0, MK_ETOOBIG (len over CODEC_ENV_MAX) or MK_EPROTO (truncated,
 * malformed, trailing bytes, a field of the wrong type or out of range, a
 * type number that names none).
 */
int codec_env_decode(codec_env *env, const void *buf, size_t len);

#endif /* CODEC_ENVELOPE_H */
