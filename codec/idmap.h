/*
 * idmap.h - a hash map from non-zero 64-bit ids to pointers.
 *
 * Open addressing with linear probing and backward-shift deletion; grows
 * at 50% load and never shrinks below its initial size.  Not thread-safe:
 * each map belongs to one thread or is guarded by its owner's lock.
 */
#ifndef CODEC_IDMAP_H
#define CODEC_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct idmap_ent {
	uint64_t id;  /* 0 = empty slot */
	void    *val; /* the mapped pointer */
} idmap_ent;

typedef struct idmap {
	idmap_ent *ents;  /* cap slots */
	size_t     cap;   /* power of two, or 0 before the first put */
	size_t     count; /* occupied slots */
} idmap;

/* idmap_fini frees the table (not the values) and zeroes the map. */
void idmap_fini(idmap *m);

/* idmap_put maps id (non-zero, not present) to val.  Returns 0 or
 * MK_ENOMEM. */
int idmap_put(idmap *m, uint64_t id, void *val);

/* idmap_get returns the value mapped to id, or NULL. */
void *idmap_get(const idmap *m, uint64_t id);

/* idmap_del removes id and returns its value, or NULL if absent. */
void *idmap_del(idmap *m, uint64_t id);

/* idmap_pop removes any one entry and returns its value, or NULL when
 * the map is empty; for draining. */
void *idmap_pop(idmap *m, uint64_t *idp);

#endif /* CODEC_IDMAP_H */
