/*
 * list.c - the list view (MSG_SV_LIST): the filter read, the entries
 * matched, sorted by name and paged.  Pure: no actor, no kernel; its
 * unit test is test/sv_list_test.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/supervisor/sv_impl.h"

#define LIST_DEFAULT 25
#define LIST_MAX     100

static int
by_name(const void *a, const void *b)
{
	return (strcmp((*(entry *const *)a)->name,
	               (*(entry *const *)b)->name));
}

/* The states the cluster folds across nodes (needs_reauth, disabled and
 * error are each node's own). */
static bool
folded(const char *state)
{
	return (state != NULL &&
	        (strcmp(state, "healthy") == 0 ||
	         strcmp(state, "unstable") == 0 ||
	         strcmp(state, "pending_verification") == 0));
}

/* A node's entry of node_states: {state, last_failure}. */
static json_t *
node_json(const char *state, const model_failure *lf)
{
	return (json_pack("{s:s, s:o*}", "state", state, "last_failure",
	                  model_failure_json(lf)));
}

/* e's state as the cluster shows it: "degraded" when the live nodes
 * disagree.  With ns: *ns the node_states to show, or NULL when all are
 * healthy or no other node holds it. */
static const char *
cluster_state(const entry *e, const char *node, json_t **ns)
{
	const char    *mine = cl_state_name(e->shown);
	const sv_peer *p;
	bool           same = true, other = false;

	if (ns != NULL) {
		*ns = NULL;
	}
	if (!folded(mine)) {
		return (mine);
	}
	for (size_t i = 0; i < e->npeers; i++) {
		p = &e->peers[i];
		if (folded(p->state)) {
			other = true;
			same &= strcmp(p->state, mine) == 0;
		}
	}
	if (!other || (same && strcmp(mine, "healthy") == 0)) {
		return (mine);
	}
	if (ns != NULL && (*ns = json_object()) != NULL) {
		json_object_set_new(*ns, node != NULL ? node : "local",
		                    node_json(mine, e->lf));
		for (size_t i = 0; i < e->npeers; i++) {
			p = &e->peers[i];
			if (folded(p->state)) {
				json_object_set_new(
				        *ns, p->node_id,
				        node_json(p->state, p->failure));
			}
		}
	}
	return (same ? mine : "degraded");
}

static bool
matches(const entry *e, const sv_list_spec *spec)
{
	json_t     *f  = spec->filter;
	const char *st = json_string_value(json_object_get(f, "state"));
	const char *ct =
	        json_string_value(json_object_get(f, "connection_type"));
	const char *at = json_string_value(json_object_get(f, "auth_type"));
	const char *q  = json_string_value(json_object_get(f, "search"));

	/* (what the list shows: per-user needs_reauth is a projection) */
	return ((st == NULL ||
	         strcmp(st, cluster_state(e, spec->node, NULL)) == 0) &&
	        (ct == NULL || strcmp(ct, e->conn) == 0) &&
	        (at == NULL || strcmp(at, e->auth) == 0) &&
	        (q == NULL || strcasestr(e->name, q) != NULL ||
	         strcasestr(e->id, q) != NULL));
}

int
sv_list_spec_parse(const char *text, sv_list_spec *spec, char *err,
                   size_t errlen)
{
	json_t    *f;
	json_int_t limit, offset;

	f = text != NULL && *text ? json_loads(text, 0, NULL) : json_object();
	if (!json_is_object(f)) {
		json_decref(f);
		snprintf(err, errlen, "the filter must be a JSON object");
		return (MK_EINVAL);
	}
	limit  = json_is_integer(json_object_get(f, "limit"))
	         ? json_integer_value(json_object_get(f, "limit"))
	         : LIST_DEFAULT;
	offset = json_is_integer(json_object_get(f, "offset"))
	        ? json_integer_value(json_object_get(f, "offset"))
	        : 0;
	if (limit < 1 || limit > LIST_MAX || offset < 0) {
		json_decref(f);
		snprintf(err, errlen, "limit must be 1..%d and offset >= 0",
		         LIST_MAX);
		return (MK_EINVAL);
	}
	spec->filter  = f;
	spec->limit   = limit;
	spec->offset  = offset;
	spec->metrics = json_is_true(json_object_get(f, "metrics"));
	return (0);
}

json_t *
sv_list_page(entry *const *all, size_t n, const sv_list_spec *spec)
{
	json_t    *list;
	entry    **sorted;
	json_int_t total = 0;
	json_t    *res;

	sorted = malloc((n ? n : 1) * sizeof(*sorted));
	list   = json_array();
	if (sorted == NULL || list == NULL) {
		free(sorted);
		json_decref(list);
		return (NULL);
	}
	if (n != 0) {
		memcpy(sorted, all, n * sizeof(*sorted));
	}
	qsort(sorted, n, sizeof(*sorted), by_name);
	for (size_t i = 0; i < n; i++) {
		if (!matches(sorted[i], spec)) {
			continue;
		}
		if (total >= spec->offset &&
		    total < spec->offset + spec->limit &&
		    sorted[i]->view != NULL) {
			json_t *v = json_loads(sorted[i]->view, 0, NULL), *ns;
			const char *st =
			        cluster_state(sorted[i], spec->node, &ns);
			if (ns != NULL && json_is_object(v)) {
				json_object_set_new(v, "state",
				                    json_string(st));
				json_object_set_new(v, "node_states", ns);
			} else {
				json_decref(ns);
			}
			/* (a check running is one that was due) */
			if ((sorted[i]->tick != 0 || sorted[i]->checking) &&
			    json_is_object(v)) {
				json_object_set_new(
				        v, "next_check_at",
				        json_string(sorted[i]->due));
			}
			if (spec->metrics && json_is_object(v)) {
				const char *m = sorted[i]->metrics;
				json_object_set_new(
				        v, "metrics",
				        m != NULL ? json_loads(m, 0, NULL)
				                  : json_object());
			}
			json_array_append_new(list, v);
		}
		total++;
	}
	res = json_pack("{s:o, s:I, s:I}", "clients", list, "count",
	                (json_int_t)json_array_size(list), "total_count",
	                total);
	free(sorted);
	return (res);
}
