/*
 * strmap.c - string-keyed intrusive map (see strmap.h).
 */
#include "codec/strmap.h"

#include <stdint.h>
#include <string.h>

#include "mcpkeep.h"

uint64_t
strmap_hash(const char *k)
{
	uint64_t h = 1469598103934665603ull;

	for (; *k != '\0'; k++) {
		h = (h ^ (uint8_t)*k) * 1099511628211ull;
	}
	return (h != 0 ? h : 1);
}

strmap_ent *
strmap_get(const strmap *sm, const char *key)
{
	strmap_ent *e = idmap_get(&sm->m, strmap_hash(key));

	while (e != NULL && strcmp(e->key, key) != 0) {
		e = e->next;
	}
	return (e);
}

int
strmap_put(strmap *sm, strmap_ent *e)
{
	uint64_t    h     = strmap_hash(e->key);
	strmap_ent *first = idmap_get(&sm->m, h);

	if (first != NULL) {
		e->next     = first->next; /* the chain's head stays put */
		first->next = e;
		return (0);
	}
	e->next = NULL;
	return (idmap_put(&sm->m, h, e) != 0 ? MK_ENOMEM : 0);
}

void
strmap_del(strmap *sm, strmap_ent *e)
{
	uint64_t    h     = strmap_hash(e->key);
	strmap_ent *first = idmap_get(&sm->m, h);

	if (first == e) {
		idmap_del(&sm->m, h);
		if (e->next != NULL) {
			(void)idmap_put(&sm->m, h,
			                e->next); /* a slot just freed */
		}
		return;
	}
	for (strmap_ent *p = first; p != NULL; p = p->next) {
		if (p->next == e) {
			p->next = e->next;
			return;
		}
	}
}

void
strmap_each(const strmap *sm, void (*fn)(strmap_ent *e, void *arg), void *arg)
{
	for (size_t i = 0; i < sm->m.cap; i++) {
		for (strmap_ent *e = sm->m.ents[i].id != 0 ? sm->m.ents[i].val
		                                           : NULL;
		     e != NULL; e  = e->next) {
			fn(e, arg);
		}
	}
}

void
strmap_fini(strmap *sm)
{
	idmap_fini(&sm->m);
}
