/*
 * strmap.h - a hash map from strings to intrusive entries, on idmap: the
 * key's 64-bit hash finds a chain of entries with that hash.  The caller
 * embeds a strmap_ent (first or anywhere) in each value and owns both the
 * value and its key.  Not thread-safe: one map belongs to one thread.
 */
#ifndef CODEC_STRMAP_H
#define CODEC_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "codec/idmap.h"

typedef struct strmap_ent {
	const char        *key;  /* set by the caller before strmap_put */
	struct strmap_ent *next; /* same-hash chain */
} strmap_ent;

typedef struct strmap {
	idmap m; /* hash -> first entry of its chain */
} strmap;

/* STRMAP_OF is the value of type that embeds the entry e (not NULL) as
 * its member. */
#define STRMAP_OF(e, type, member)                                            \
	((type *)((char *)(e)-offsetof(type, member)))

/* strmap_hash is key's FNV-1a hash, never 0 (an idmap id): the one string
 * hash of the tree, for a map that keys an idmap by strings itself. */
uint64_t strmap_hash(const char *key);

/* strmap_get finds the entry of key, or NULL. */
strmap_ent *strmap_get(const strmap *sm, const char *key);

/* strmap_put adds e (e->key must not be present).  0 or MK_ENOMEM. */
int strmap_put(strmap *sm, strmap_ent *e);

/* strmap_del removes e (present). */
void strmap_del(strmap *sm, strmap_ent *e);

/* strmap_each calls fn on every entry, in no order; fn must not add or
 * remove entries. */
void strmap_each(const strmap *sm, void (*fn)(strmap_ent *e, void *arg),
                 void         *arg);

/* strmap_fini frees the table, not the entries. */
void strmap_fini(strmap *sm);

#endif /* CODEC_STRMAP_H */
