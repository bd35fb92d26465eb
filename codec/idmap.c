/*
 * idmap.c - id -> pointer hash map (see idmap.h).
 */
#include "codec/idmap.h"

#include <stdlib.h>

#include "mcpkeep.h"

#define IDMAP_MIN 16

static size_t
slot_of(uint64_t id, size_t cap)
{
	/* Fibonacci hashing spreads sequential ids. */
	return ((size_t)((id * 0x9e3779b97f4a7c15ULL) >> 17) & (cap - 1));
}

void
idmap_fini(idmap *m)
{
	free(m->ents);
	m->ents  = NULL;
	m->cap   = 0;
	m->count = 0;
}

static int
grow(idmap *m)
{
	size_t     ncap = m->cap ? m->cap * 2 : IDMAP_MIN;
	idmap_ent *ents = calloc(ncap, sizeof(*ents));

	if (ents == NULL) {
		return (MK_ENOMEM);
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->ents[i].id != 0) {
			size_t j = slot_of(m->ents[i].id, ncap);
			while (ents[j].id != 0) {
				j = (j + 1) & (ncap - 1);
			}
			ents[j] = m->ents[i];
		}
	}
	free(m->ents);
	m->ents = ents;
	m->cap  = ncap;
	return (0);
}

int
idmap_put(idmap *m, uint64_t id, void *val)
{
	size_t i;
	int    rv;

	if ((m->count + 1) * 2 > m->cap && (rv = grow(m)) != 0) {
		return (rv);
	}
	i = slot_of(id, m->cap);
	while (m->ents[i].id != 0) {
		i = (i + 1) & (m->cap - 1);
	}
	m->ents[i].id  = id;
	m->ents[i].val = val;
	m->count++;
	return (0);
}

static size_t
find(const idmap *m, uint64_t id)
{
	size_t i;

	if (m->cap == 0 || id == 0) {
		return (SIZE_MAX);
	}
	i = slot_of(id, m->cap);
	while (m->ents[i].id != 0) {
		if (m->ents[i].id == id) {
			return (i);
		}
		i = (i + 1) & (m->cap - 1);
	}
	return (SIZE_MAX);
}

void *
idmap_get(const idmap *m, uint64_t id)
{
	size_t i = find(m, id);

	return (i == SIZE_MAX ? NULL : m->ents[i].val);
}

/* Removes slot i and shifts back the probe chain behind it. */
static void
remove_at(idmap *m, size_t i)
{
	size_t mask = m->cap - 1;
	size_t j    = i;

	m->ents[i].id = 0;
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (m->ents[j].id == 0) {
			break;
		}
		home = slot_of(m->ents[j].id, m->cap);
		/* Move j back to i unless its home lies cyclically in (i, j].
		 */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->ents[i]    = m->ents[j];
			m->ents[j].id = 0;
			i             = j;
		}
	}
	m->count--;
}

void *
idmap_del(idmap *m, uint64_t id)
{
	size_t i = find(m, id);
	void  *val;

	if (i == SIZE_MAX) {
		return (NULL);
	}
	val = m->ents[i].val;
	remove_at(m, i);
	return (val);
}

void *
idmap_pop(idmap *m, uint64_t *idp)
{
	for (size_t i = 0; m->count != 0 && i < m->cap; i++) {
		if (m->ents[i].id != 0) {
			void *val = m->ents[i].val;
			if (idp != NULL) {
				*idp = m->ents[i].id;
			}
			remove_at(m, i);
			return (val);
		}
	}
	return (NULL);
}
