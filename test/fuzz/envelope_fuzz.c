/*
 * envelope_fuzz.c - libFuzzer target for the inbox envelope decoder.  A
 * decoded envelope must satisfy the decoder's own limits, and re-encoding
 * it must decode to the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/msg.h"

typedef struct buf {
	uint8_t *p;
	size_t   len;
} buf;

static int
buf_write(void *sink, const char *data, size_t len)
{
	buf     *b = sink;
	uint8_t *np;

	if (len == 0) {
		return (0);
	}
	if ((np = realloc(b->p, b->len + len)) == NULL) {
		return (-1);
	}
	memcpy(np + b->len, data, len);
	b->p = np;
	b->len += len;
	return (0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	codec_env env, again;
	buf       b = {0};

	if (codec_env_decode(&env, data, size) != 0) {
		return (0);
	}
	if (!codec_msg_valid(env.type) || env.sender_len > CODEC_SENDER_MAX ||
	    env.payload_len > CODEC_PAYLOAD_MAX || env.deadline < 0) {
		abort();
	}
	if (codec_env_encode(&env, buf_write, &b) != 0 ||
	    codec_env_decode(&again, b.p, b.len) != 0 ||
	    again.type != env.type || again.corr != env.corr ||
	    again.deadline != env.deadline || again.status != env.status ||
	    again.payload_len != env.payload_len ||
	    again.sender_len != env.sender_len ||
	    memcmp(again.sender, env.sender, env.sender_len) != 0 ||
	    (env.payload_len &&
	     memcmp(again.payload, env.payload, env.payload_len) != 0)) {
		abort();
	}
	free(b.p);
	return (0);
}
