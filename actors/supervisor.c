/*
 * supervisor.c - the supervisor actor (see supervisor.h).
 *
 * DESIGN: one thread; state touched only there.  Asks arrive from API
 * threads; replies complete the caller's slot directly.
 */
#include "actors/supervisor.h"

#include <assert.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "actors/kernel/log.h"

typedef struct sv_self {
	uint64_t pings; /* pings answered, for the log at stop */
} sv_self;

static int
sv_init(kn_actor *self, void *arg, void **statep)
{
	sv_self *sv = calloc(1, sizeof(*sv));

	if (sv == NULL) {
		return (MK_ENOMEM);
	}
	*statep = sv;
	return (0);
}

static void
sv_fini(kn_actor *self, void *state)
{
	sv_self *sv = state;

	KN_DEBUG("supervisor", "stopping after %llu pings",
	         (unsigned long long)sv->pings);
	free(sv);
}

static const struct {
	const char *name;
	size_t      off;
} stat_fields[] = {
        {"actors", offsetof(mk_stats, actors)},
        {"messages", offsetof(mk_stats, messages)},
        {"asks", offsetof(mk_stats, asks)},
        {"late_replies", offsetof(mk_stats, late_replies)},
        {"expired", offsetof(mk_stats, expired)},
        {"handler_errors", offsetof(mk_stats, handler_errors)},
};
#define NSTATS (sizeof(stat_fields) / sizeof(stat_fields[0]))

static int
on_stats(kn_actor *self, kn_msg *msg)
{
	msgpack_sbuffer sb;
	msgpack_packer  pk;
	mk_stats        st;
	int             rv;

	kn_kernel_stats(kn_actor_kernel(self), &st);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, NSTATS);
	for (size_t i = 0; i < NSTATS; i++) {
		const char *n = stat_fields[i].name;
		msgpack_pack_str_with_body(&pk, n, strlen(n));
		msgpack_pack_uint64(
		        &pk, *(uint64_t *)((char *)&st + stat_fields[i].off));
	}
	rv = kn_reply(self, msg, 0, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return (rv);
}

static int
sv_handle(kn_actor *self, void *state, kn_msg *msg)
{
	sv_self *sv = state;

	switch (msg->env.type) {
	case MSG_PING:
		sv->pings++;
		return (kn_reply(self, msg, 0, msg->env.payload,
		                 msg->env.payload_len));
	case MSG_STATS:
		return (on_stats(self, msg));
	default:
		assert(!"supervisor: unexpected message");
		return (MK_EINTERNAL);
	}
}

const kn_actor_ops supervisor_ops = {
        .init   = sv_init,
        .handle = sv_handle,
        .fini   = sv_fini,
};

int
supervisor_stats_decode(const void *buf, size_t len, mk_stats *out)
{
	msgpack_unpacked up;
	size_t           off = 0;
	int              rv  = MK_EPROTO;

	memset(out, 0, sizeof(*out));
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, buf, len, &off) ==
	            MSGPACK_UNPACK_SUCCESS &&
	    up.data.type == MSGPACK_OBJECT_MAP) {
		const msgpack_object_map *m = &up.data.via.map;
		rv                          = 0;
		for (uint32_t i = 0; i < m->size; i++) {
			const msgpack_object *k = &m->ptr[i].key;
			const msgpack_object *v = &m->ptr[i].val;
			if (k->type != MSGPACK_OBJECT_STR ||
			    v->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
				rv = MK_EPROTO;
				break;
			}
			for (size_t j = 0; j < NSTATS; j++) {
				const char *n = stat_fields[j].name;
				if (k->via.str.size == strlen(n) &&
				    memcmp(k->via.str.ptr, n, strlen(n)) ==
				            0) {
					*(uint64_t *)((char *)out +
					              stat_fields[j].off) =
					        v->via.u64;
				}
			}
		}
	}
	msgpack_unpacked_destroy(&up);
	return (rv);
}
