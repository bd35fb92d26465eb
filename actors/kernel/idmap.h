/*
 * idmap.h - a hash map from non-zero 64-bit ids to pointers.
 *
 * Open addressing with linear probing and backward-shift deletion; grows
 * at 50% load and never shrinks below its initial size.  Not thread-safe:
 * each map belongs to one thread or is guarded by its owner's lock.
 */
#ifndef KN_IDMAP_H
#define KN_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_idmap_ent {
	uint64_t id;  /* 0 = empty slot */
	void    *val; /* the mapped pointer */
} kn_idmap_ent;

typedef struct kn_idmap {
	kn_idmap_ent *ents;  /* cap slots */
	size_t        cap;   /* power of two, or 0 before the first put */
	size_t        count; /* occupied slots */
} kn_idmap;

/* kn_idmap_fini frees the table (not the values) and zeroes the map. */
void kn_idmap_fini(kn_idmap *m);

/* kn_idmap_put maps id (non-zero, not present) to val.  Returns 0 or
 * MK_ENOMEM. */
int kn_idmap_put(kn_idmap *m, uint64_t id, void *val);

/* kn_idmap_get returns the value mapped to id, or NULL. */
void *kn_idmap_get(const kn_idmap *m, uint64_t id);

/* kn_idmap_del removes id and returns its value, or NULL if absent. */
void *kn_idmap_del(kn_idmap *m, uint64_t id);

/* kn_idmap_pop removes any one entry and returns its value, or NULL when
 * the map is empty; for draining. */
void *kn_idmap_pop(kn_idmap *m, uint64_t *idp);

#endif /* KN_IDMAP_H */
