/*
 * lru.c - intrusive LRU list (see lru.h).
 */
#include "codec/lru.h"

void
lru_init(lru *l, size_t max)
{
	l->ring.prev = l->ring.next = &l->ring;
	l->n                        = 0;
	l->max                      = max;
}

bool
lru_in(const lru_link *e)
{
	return (e->prev != NULL);
}

void
lru_remove(lru *l, lru_link *e)
{
	if (e->prev == NULL) {
		return;
	}
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = NULL;
	l->n--;
}

void
lru_touch(lru *l, lru_link *e)
{
	if (l->ring.next == e) {
		return; /* already the newest */
	}
	lru_remove(l, e);
	e->prev            = &l->ring;
	e->next            = l->ring.next;
	l->ring.next->prev = e;
	l->ring.next       = e;
	l->n++;
}

lru_link *
lru_oldest(lru *l)
{
	return (l->ring.prev != &l->ring ? l->ring.prev : NULL);
}

lru_link *
lru_newer(lru *l, lru_link *e)
{
	return (e->prev != &l->ring ? e->prev : NULL);
}
