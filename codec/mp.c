/*
 * mp.c - msgpack map helpers (see mp.h).
 */
#include "codec/mp.h"

#include <stdlib.h>
#include <string.h>

#include "codec/mpcheck.h"
#include "mcpkeep.h"

void
mp_w_init(mp_w *w)
{
	msgpack_sbuffer_init(&w->sb);
	msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
}

void
mp_w_fini(mp_w *w)
{
	msgpack_sbuffer_destroy(&w->sb);
}

void
mp_map(mp_w *w, uint32_t n)
{
	msgpack_pack_map(&w->pk, n);
}

void
mp_str(mp_w *w, const char *s)
{
	if (s == NULL) {
		msgpack_pack_nil(&w->pk);
		return;
	}
	msgpack_pack_str_with_body(&w->pk, s, strlen(s));
}

void
mp_key(mp_w *w, const char *key)
{
	mp_str(w, key);
}

void
mp_kv_str(mp_w *w, const char *key, const char *s)
{
	mp_key(w, key);
	mp_str(w, s);
}

void
mp_kv_int(mp_w *w, const char *key, int64_t v)
{
	mp_key(w, key);
	msgpack_pack_int64(&w->pk, v);
}

void
mp_kv_bool(mp_w *w, const char *key, bool v)
{
	mp_key(w, key);
	if (v) {
		msgpack_pack_true(&w->pk);
	} else {
		msgpack_pack_false(&w->pk);
	}
}

int
mp_r_open(mp_r *r, const void *buf, size_t len)
{
	size_t off = 0;

	msgpack_unpacked_init(&r->up);
	r->ok = buf != NULL && codec_mp_check(buf, len, 8) == 0 &&
	        msgpack_unpack_next(&r->up, buf, len, &off) ==
	                MSGPACK_UNPACK_SUCCESS &&
	        r->up.data.type == MSGPACK_OBJECT_MAP;
	return (r->ok ? 0 : MK_EPROTO);
}

void
mp_r_close(mp_r *r)
{
	msgpack_unpacked_destroy(&r->up);
}

const msgpack_object *
mp_obj_get(const msgpack_object *map, const char *key)
{
	size_t n = strlen(key);

	if (map == NULL || map->type != MSGPACK_OBJECT_MAP) {
		return (NULL);
	}
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
		    memcmp(k->via.str.ptr, key, n) == 0) {
			return (&map->via.map.ptr[i].val);
		}
	}
	return (NULL);
}

const msgpack_object *
mp_get(const mp_r *r, const char *key)
{
	return (r->ok ? mp_obj_get(&r->up.data, key) : NULL);
}

char *
mp_dup_str(const msgpack_object *o)
{
	if (o == NULL || o->type != MSGPACK_OBJECT_STR) {
		return (NULL);
	}
	return (strndup(o->via.str.ptr, o->via.str.size));
}

int64_t
mp_int(const msgpack_object *o, int64_t dflt)
{
	if (o == NULL) {
		return (dflt);
	}
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		return (o->via.u64 > INT64_MAX ? dflt : (int64_t)o->via.u64);
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		return (o->via.i64);
	}
	return (dflt);
}

bool
mp_bool(const msgpack_object *o, bool dflt)
{
	return (o != NULL && o->type == MSGPACK_OBJECT_BOOLEAN ? o->via.boolean
	                                                       : dflt);
}
