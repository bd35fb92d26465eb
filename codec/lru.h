/*
 * lru.h - an intrusive least-recently-used list: the owner embeds an
 * lru_link in each entry; touching an entry moves it to the front, the
 * back is the oldest.  The list holds no memory of its own and never
 * frees an entry: the owner evicts (lru_oldest, lru_older) and removes.
 * Not thread-safe: one list belongs to one thread.
 */
#ifndef CODEC_LRU_H
#define CODEC_LRU_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lru_link {
	struct lru_link *prev; /* newer; NULL when not in a list */
	struct lru_link *next; /* older */
} lru_link;

typedef struct lru {
	lru_link ring; /* sentinel: ring.next newest, ring.prev oldest */
	size_t   n;    /* entries in the list */
	size_t   max;  /* the owner's bound (the list does not enforce it) */
} lru;

/* lru_init makes l empty, with the bound max. */
void lru_init(lru *l, size_t max);

/* lru_touch puts e at the front (adding it if it is not in l). */
void lru_touch(lru *l, lru_link *e);

/* lru_remove takes e out (a no-op when it is not in a list). */
void lru_remove(lru *l, lru_link *e);

/* lru_in tells whether e is in a list. */
bool lru_in(const lru_link *e);

/* lru_oldest gives the back, or NULL; lru_newer gives the entry after e
 * towards the front, or NULL (so a walk from the oldest may remove the
 * entry it is on after taking the next one). */
lru_link *lru_oldest(lru *l);
lru_link *lru_newer(lru *l, lru_link *e);

#endif /* CODEC_LRU_H */
