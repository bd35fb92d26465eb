/*
 * mp.h - small helpers to write and read the msgpack maps carried in
 * inbox payloads and on the state stream.  Reading checks bounds first
 * (codec_mp_check) and never trusts a type.
 */
#ifndef CODEC_MP_H
#define CODEC_MP_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

/* A growing buffer with a packer writing into it. */
typedef struct mp_w {
	msgpack_sbuffer sb; /* the bytes */
	msgpack_packer  pk; /* writes into sb */
} mp_w;

void mp_w_init(mp_w *w);
void mp_w_fini(mp_w *w);
void mp_map(mp_w *w, uint32_t n);
void mp_key(mp_w *w, const char *key);
void mp_str(mp_w *w, const char *s); /* NULL packs nil */
void mp_kv_str(mp_w *w, const char *key, const char *s);
void mp_kv_int(mp_w *w, const char *key, int64_t v);
void mp_kv_bool(mp_w *w, const char *key, bool v);

/* A decoded map. */
typedef struct mp_r {
	msgpack_unpacked up; /* owns the objects */
	bool             ok; /* a map was decoded */
} mp_r;

/* mp_r_open decodes buf (may be NULL) as one map (after codec_mp_check,
 * depth 8).  Returns 0 or MK_EPROTO; call mp_r_close after it in both
 * cases, and never without it. */
int  mp_r_open(mp_r *r, const void *buf, size_t len);
void mp_r_close(mp_r *r);

/* The value under key in the top map (or in the map obj), or NULL. */
const msgpack_object *mp_get(const mp_r *r, const char *key);
const msgpack_object *mp_obj_get(const msgpack_object *map, const char *key);

/* Typed getters: copy a string into a malloc'd NUL-terminated one (NULL
 * if absent or not a string); an integer (dflt if absent/other). */
char   *mp_dup_str(const msgpack_object *o);
int64_t mp_int(const msgpack_object *o, int64_t dflt);
bool    mp_bool(const msgpack_object *o, bool dflt);

#endif /* CODEC_MP_H */
