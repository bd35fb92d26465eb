/*
 * codec_test.c - envelope round trips and hostile input.
 */
#include <msgpack.h>
#include <stdint.h>

#include "codec/envelope.h"
#include "codec/mpcheck.h"
#include "codec/msg.h"
#include "codec/msgdef.h"
#include "mcpkeep.h"
#include "testutil.h"

typedef struct buf {
	char  *p;
	size_t len;
	size_t cap;
} buf;

static int
buf_write(void *sink, const char *data, size_t len)
{
	buf *b = sink;

	if (len == 0) {
		return (0);
	}
	if (b->len + len > b->cap) {
		size_t ncap = (b->len + len) * 2;
		char  *np   = realloc(b->p, ncap);
		if (np == NULL) {
			return (-1);
		}
		b->p   = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return (0);
}

static void
round_trip_every_type(void)
{
	static const uint8_t payload[] = {0x93, 1, 2, 3, 0, 0xff};

	for (uint32_t t = MSG_NONE + 1; t < MSG_LIMIT; t++) {
		if (t == MSG_KERNEL_END) {
			t = MSG_BASE; /* the numbers between name no type */
		}
		codec_env in = {
		        .type        = t,
		        .corr        = UINT64_MAX - t,
		        .sender      = "supervisor",
		        .sender_len  = 10,
		        .deadline    = INT64_MAX - t,
		        .status      = -(int32_t)t,
		        .payload     = payload,
		        .payload_len = sizeof(payload),
		};
		codec_env out;
		buf       b = {0};

		/* the kernel's types have names here; the rest, their actors'
		 */
		CHECK((strcmp(codec_msg_name(t), "?") != 0) == (t < MSG_BASE));
		CHECK_EQ(codec_env_encode(&in, buf_write, &b), 0);
		CHECK_EQ(codec_env_decode(&out, b.p, b.len), 0);
		CHECK_EQ(out.type, t);
		CHECK(out.corr == in.corr);
		CHECK_EQ(out.sender_len, 10);
		CHECK(memcmp(out.sender, "supervisor", 10) == 0);
		CHECK_EQ(out.deadline, in.deadline);
		CHECK_EQ(out.status, in.status);
		CHECK_EQ(out.payload_len, sizeof(payload));
		CHECK(memcmp(out.payload, payload, sizeof(payload)) == 0);
		free(b.p);
	}
}

static void
empty_fields(void)
{
	codec_env in = {.type = MSG_TERM, .sender = ""};
	codec_env out;
	buf       b = {0};

	CHECK_EQ(codec_env_encode(&in, buf_write, &b), 0);
	CHECK_EQ(codec_env_decode(&out, b.p, b.len), 0);
	CHECK_EQ(out.type, MSG_TERM);
	CHECK_EQ(out.corr, 0);
	CHECK_EQ(out.sender_len, 0);
	CHECK(out.sender != NULL);
	CHECK(out.payload == NULL);
	CHECK_EQ(out.payload_len, 0);
	free(b.p);
}

static void
truncated_everywhere(void)
{
	uint8_t   payload[300];
	codec_env in = {
	        .type        = MSG_PING,
	        .corr        = 77,
	        .sender      = "a",
	        .sender_len  = 1,
	        .deadline    = 123456789,
	        .payload     = payload,
	        .payload_len = sizeof(payload),
	};
	codec_env out;
	buf       b = {0};

	memset(payload, 0xab, sizeof(payload));
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), 0);
	for (size_t n = 0; n < b.len; n++) {
		/* a heap copy of exactly n bytes lets ASan catch overreads */
		char *cut = malloc(n ? n : 1);
		memcpy(cut, b.p, n);
		CHECK_EQ(codec_env_decode(&out, cut, n), MK_EPROTO);
		CHECK(out.type == 0 && out.payload == NULL);
		free(cut);
	}
	/* trailing garbage */
	buf_write(&b, "\x01", 1);
	CHECK_EQ(codec_env_decode(&out, b.p, b.len), MK_EPROTO);
	free(b.p);
}

static void
encode_limits(void)
{
	char      sender[CODEC_SENDER_MAX + 2];
	codec_env in = {.type = MSG_PING, .sender = sender};
	buf       b  = {0};

	memset(sender, 'x', sizeof(sender));
	in.sender_len = CODEC_SENDER_MAX + 1;
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_EINVAL);
	in.sender_len  = 1;
	in.payload     = (const uint8_t *)sender; /* never read */
	in.payload_len = CODEC_PAYLOAD_MAX + 1;
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_ETOOBIG);
	in.payload_len = 0;
	in.type        = MSG_NONE;
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_EINVAL);
	in.type = MSG_LIMIT;
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_EINVAL);
	in.type = MSG_KERNEL_END; /* between the kernel's and the rest */
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_EINVAL);
	in.type = MSG_BASE - 1;
	CHECK_EQ(codec_env_encode(&in, buf_write, &b), MK_EINVAL);
	CHECK_EQ(b.len, 0);
	free(b.p);
}

/* Packs an array with the given items to test field validation. */
static int
decode_packed(void (*fill)(msgpack_packer *))
{
	msgpack_sbuffer sb;
	msgpack_packer  pk;
	codec_env       out;
	int             rv;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	fill(&pk);
	rv = codec_env_decode(&out, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return (rv);
}

static void
good6(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int32(pk, 0);
	msgpack_pack_bin_with_body(pk, "x", 1);
}
static void
five_items(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 5);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int32(pk, 0);
}
static uint32_t bad_type; /* what bad_type_six packs as the type */
static void
bad_type_six(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, bad_type);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int32(pk, 0);
	msgpack_pack_bin_with_body(pk, "x", 1);
}
static void
sender_not_str(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_bin_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int32(pk, 0);
	msgpack_pack_bin_with_body(pk, "x", 1);
}
static void
negative_deadline(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, -5);
	msgpack_pack_int32(pk, 0);
	msgpack_pack_bin_with_body(pk, "x", 1);
}
static void
status_too_big(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int64(pk, (int64_t)INT32_MAX + 1);
	msgpack_pack_bin_with_body(pk, "x", 1);
}
static void
payload_is_str(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 6);
	msgpack_pack_uint32(pk, MSG_PING);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str_with_body(pk, "s", 1);
	msgpack_pack_int64(pk, 0);
	msgpack_pack_int32(pk, 0);
	msgpack_pack_str_with_body(pk, "x", 1);
}
static void
not_an_array(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 0);
}

static void
wrong_fields(void)
{
	CHECK_EQ(decode_packed(good6), 0);
	CHECK_EQ(decode_packed(five_items), MK_EPROTO);
	bad_type = MSG_LIMIT; /* too big */
	CHECK_EQ(decode_packed(bad_type_six), MK_EPROTO);
	bad_type = MSG_KERNEL_END; /* between the kernel's and the rest */
	CHECK_EQ(decode_packed(bad_type_six), MK_EPROTO);
	CHECK_EQ(decode_packed(sender_not_str), MK_EPROTO);
	CHECK_EQ(decode_packed(negative_deadline), MK_EPROTO);
	CHECK_EQ(decode_packed(status_too_big), MK_EPROTO);
	CHECK_EQ(decode_packed(payload_is_str), MK_EPROTO);
	CHECK_EQ(decode_packed(not_an_array), MK_EPROTO);
}

static void
oversized_and_garbage(void)
{
	codec_env out;
	uint32_t  seed = 12345;
	char      junk[512];
	int       accepted = 0;

	CHECK_EQ(codec_env_decode(&out, "", CODEC_ENV_MAX + 1), MK_ETOOBIG);
	CHECK_EQ(codec_env_decode(&out, NULL, 0), MK_EPROTO);
	/* a bin header that claims 4 GiB behind 1 real byte */
	CHECK_EQ(codec_env_decode(&out,
	                          "\x96\x03\x01\xa0\x00\x00\xc6\xff"
	                          "\xff\xff\xff\x00",
	                          12),
	         MK_EPROTO);
	for (int i = 0; i < 20000; i++) {
		size_t n = 1 + (seed % sizeof(junk));
		for (size_t j = 0; j < n; j++) {
			seed    = seed * 1103515245u + 12345u;
			junk[j] = (char)(seed >> 16);
		}
		junk[0] = (char)0x96; /* mostly arrays of six */
		if (codec_env_decode(&out, junk, n) == 0) {
			accepted++;
			CHECK(codec_msg_valid(out.type));
			CHECK(out.sender_len <= CODEC_SENDER_MAX);
		}
	}
	fprintf(stderr, "   garbage accepted as valid: %d of 20000\n",
	        accepted);
}

static void
mp_check_bounds(void)
{
	/* an array claiming 2^32-1 elements in five bytes */
	CHECK_EQ(codec_mp_check("\xdd\xff\xff\xff\xff", 5, 8), MK_EPROTO);
	/* a map claiming 65535 pairs */
	CHECK_EQ(codec_mp_check("\xde\xff\xff\x01\x02", 5, 8), MK_EPROTO);
	/* str/bin/ext bodies longer than the input */
	CHECK_EQ(codec_mp_check("\xdb\x00\x00\x01\x00"
	                        "ab",
	                        7, 8),
	         MK_EPROTO);
	CHECK_EQ(codec_mp_check("\xc7\x05\x01"
	                        "ab",
	                        5, 8),
	         MK_EPROTO);
	/* never-used byte, empty input, two objects */
	CHECK_EQ(codec_mp_check("\xc1", 1, 8), MK_EPROTO);
	CHECK_EQ(codec_mp_check("", 0, 8), MK_EPROTO);
	CHECK_EQ(codec_mp_check("\x01\x02", 2, 8), MK_EPROTO);
	/* good: {"a": [1, 2.5, nil, "xy", bin"z"]} */
	CHECK_EQ(codec_mp_check("\x81\xa1\x61\x95\x01\xcb\x40\x04\x00\x00"
	                        "\x00\x00\x00\x00\xc0\xa2xy\xc4\x01z",
	                        21, 8),
	         0);
	/* depth: [[[1]]] is depth 3 */
	CHECK_EQ(codec_mp_check("\x91\x91\x91\x01", 4, 3), 0);
	CHECK_EQ(codec_mp_check("\x91\x91\x91\x01", 4, 2), MK_EPROTO);
	CHECK_EQ(codec_mp_check("\x91\x91\x91\x01", 4, 64), MK_EPROTO);
}

/* A message with a nil-when-absent string and a nested map. */
#define T_INNER_FIELDS(F, S)                                                  \
	F(S, STR, stage, "a string")                                          \
	F(S, SECRET, key, "a secret")
CODEC_MSG_STRUCT(t_inner, T_INNER_FIELDS)
CODEC_MSG_FIELDS(t_inner, T_INNER_FIELDS);
#define T_OUTER_FIELDS(F, S)                                                  \
	F(S, STR, name, "left out when NULL")                                 \
	F(S, NSTR, old, "nil when NULL")                                      \
	F(S, SUB(t_inner), inner, "nil when NULL")                            \
	F(S, INT, n, "an int")
CODEC_MSG_STRUCT(t_outer, T_OUTER_FIELDS)
CODEC_MSG_FIELDS(t_outer, T_OUTER_FIELDS);

static void
nested_fields(void)
{
	t_inner         in  = {.stage = "connect", .key = "s3cret"};
	t_outer         out = {.old = "healthy", .inner = &in, .n = 7}, back;
	msgpack_sbuffer b   = codec_msg_packed(&t_outer_fields, &out);
	mp_r            r;

	/* name left out; old, inner and n there */
	CHECK_EQ(mp_r_open(&r, b.data, b.size), 0);
	CHECK(mp_get(&r, "name") == NULL);
	CHECK(mp_get(&r, "inner")->type == MSGPACK_OBJECT_MAP);
	mp_r_close(&r);
	CHECK_EQ(t_outer_unpack(b.data, b.size, &back), 0);
	codec_msg_wipe(&t_outer_fields, &b);
	CHECK(back.name == NULL && strcmp(back.old, "healthy") == 0);
	CHECK(back.inner != NULL &&
	      strcmp(back.inner->stage, "connect") == 0 &&
	      strcmp(back.inner->key, "s3cret") == 0 && back.n == 7);
	t_outer_clear(&back);
	CHECK(back.inner == NULL && back.old == NULL);
	t_outer_clear(&back); /* twice is safe */

	/* NULL: both nil, both there; a nil (or a string) where a map
	 * belongs unpacks as NULL */
	out = (t_outer) {0};
	b   = codec_msg_packed(&t_outer_fields, &out);
	CHECK_EQ(mp_r_open(&r, b.data, b.size), 0);
	CHECK(mp_get(&r, "old")->type == MSGPACK_OBJECT_NIL);
	CHECK(mp_get(&r, "inner")->type == MSGPACK_OBJECT_NIL);
	mp_r_close(&r);
	CHECK_EQ(t_outer_unpack(b.data, b.size, &back), 0);
	CHECK(back.old == NULL && back.inner == NULL);
	t_outer_clear(&back);
	codec_msg_wipe(&t_outer_fields, &b);
	CHECK_EQ(t_outer_unpack("\x81\xa5inner\xa1x", 9, &back), 0);
	CHECK(back.inner == NULL);
	t_outer_clear(&back);
}

/* A message with a list of nested maps. */
#define T_LIST_FIELDS(F, S)                                                   \
	F(S, LIST(t_inner), items, "maps")                                    \
	F(S, INT, n, "an int")
CODEC_MSG_STRUCT(t_list, T_LIST_FIELDS)
CODEC_MSG_FIELDS(t_list, T_LIST_FIELDS);

static void
list_fields(void)
{
	t_inner in[3] = {
	        {.stage = "a"}, {.stage = "b", .key = "k"}, {.key = "only"}};
	t_list          out = {.items = {in, 3}, .n = 9}, back;
	msgpack_sbuffer b   = codec_msg_packed(&t_list_fields, &out);
	mp_r            r;

	CHECK_EQ(mp_r_open(&r, b.data, b.size), 0);
	CHECK(mp_get(&r, "items")->type == MSGPACK_OBJECT_ARRAY &&
	      mp_get(&r, "items")->via.array.size == 3);
	mp_r_close(&r);
	CHECK_EQ(t_list_unpack(b.data, b.size, &back), 0);
	codec_msg_wipe(&t_list_fields, &b);
	CHECK(back.items.n == 3 && back.n == 9);
	CHECK(strcmp(back.items.items[0].stage, "a") == 0 &&
	      back.items.items[0].key == NULL);
	CHECK(strcmp(back.items.items[1].key, "k") == 0);
	CHECK(back.items.items[2].stage == NULL &&
	      strcmp(back.items.items[2].key, "only") == 0);
	t_list_clear(&back);
	CHECK(back.items.items == NULL && back.items.n == 0);
	t_list_clear(&back); /* twice is safe */

	/* empty: [] there; not an array: none; an element not a map: its
	 * struct zero */
	out = (t_list) {0};
	b   = codec_msg_packed(&t_list_fields, &out);
	CHECK_EQ(mp_r_open(&r, b.data, b.size), 0);
	CHECK(mp_get(&r, "items")->type == MSGPACK_OBJECT_ARRAY &&
	      mp_get(&r, "items")->via.array.size == 0);
	mp_r_close(&r);
	CHECK_EQ(t_list_unpack(b.data, b.size, &back), 0);
	CHECK(back.items.n == 0 && back.items.items == NULL);
	codec_msg_wipe(&t_list_fields, &b);
	CHECK_EQ(t_list_unpack("\x81\xa5items\xa1x", 9, &back), 0);
	CHECK(back.items.n == 0);
	CHECK_EQ(t_list_unpack("\x81\xa5items\x92\x01\x81\xa5stage\xa1z", 18,
	                       &back),
	         0);
	CHECK(back.items.n == 2 && back.items.items[0].stage == NULL &&
	      strcmp(back.items.items[1].stage, "z") == 0);
	t_list_clear(&back);
}

int
main(void)
{
	RUN(mp_check_bounds);
	RUN(round_trip_every_type);
	RUN(empty_fields);
	RUN(truncated_everywhere);
	RUN(encode_limits);
	RUN(wrong_fields);
	RUN(oversized_and_garbage);
	RUN(nested_fields);
	RUN(list_fields);
	return (0);
}
