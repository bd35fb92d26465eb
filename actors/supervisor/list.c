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

static bool
matches(const entry *e, json_t *f)
{
	const char *st = json_string_value(json_object_get(f, "state"));
	const char *ct =
	        json_string_value(json_object_get(f, "connection_type"));
	const char *at = json_string_value(json_object_get(f, "auth_type"));
	const char *q  = json_string_value(json_object_get(f, "search"));

	/* (what the list shows: per-user needs_reauth is a projection) */
	return ((st == NULL || strcmp(st, cl_state_name(e->shown)) == 0) &&
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
		if (!matches(sorted[i], spec->filter)) {
			continue;
		}
		if (total >= spec->offset &&
		    total < spec->offset + spec->limit &&
		    sorted[i]->view != NULL) {
			json_t *v = json_loads(sorted[i]->view, 0, NULL);
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
