/*
 * hash.c - canonical tool-list hash and diff (see hash.h).
 */
#include "persist/hash.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

static const char *
name_of(json_t *t)
{
	const char *n = json_string_value(json_object_get(t, "name"));

	return (n != NULL ? n : "");
}

static int
by_name(const void *a, const void *b)
{
	return (strcmp(name_of(*(json_t *const *)a),
	               name_of(*(json_t *const *)b)));
}

json_t *
tools_sorted(json_t *tools)
{
	size_t   n = json_array_size(tools);
	json_t **v, *out;

	if (!json_is_array(tools) || (out = json_array()) == NULL) {
		return (NULL);
	}
	if ((v = malloc((n ? n : 1) * sizeof(*v))) == NULL) {
		json_decref(out);
		return (NULL);
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = json_array_get(tools, i);
	}
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 0; i < n; i++) {
		json_array_append(out, v[i]);
	}
	free(v);
	return (out);
}

int
tools_hash(json_t *tools, char hex[TOOLS_HASH_HEX])
{
	json_t       *sorted;
	char         *canon;
	unsigned char md[32];
	unsigned int  mdlen = 0;
	int           ok;

	if (!json_is_array(tools)) {
		return (MK_EINVAL);
	}
	if ((sorted = tools_sorted(tools)) == NULL) {
		return (MK_ENOMEM);
	}
	canon = json_dumps(sorted, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(sorted);
	if (canon == NULL) {
		return (MK_ENOMEM);
	}
	ok = EVP_Digest(canon, strlen(canon), md, &mdlen, EVP_sha256(), NULL);
	free(canon);
	if (!ok || mdlen != sizeof(md)) {
		return (MK_ENOMEM);
	}
	for (int i = 0; i < 32; i++) {
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	}
	return (0);
}

static int
by_str(const void *a, const void *b)
{
	return (strcmp(*(const char *const *)a, *(const char *const *)b));
}

/* Appends to fields each key of a or b (objects) whose value differs, as
 * prefix + key, in key order; at the top level, "annotations" and
 * "_meta" one level deeper. */
static int
differing(json_t *a, json_t *b, const char *prefix, json_t *fields)
{
	size_t       n = json_object_size(a) + json_object_size(b), k = 0;
	const char **keys = malloc((n ? n : 1) * sizeof(*keys)), *key;
	json_t      *v;
	char         name[256];

	if (keys == NULL) {
		return (MK_ENOMEM);
	}
	json_object_foreach(a, key, v)
	{
		keys[k++] = key;
	}
	json_object_foreach(b, key, v)
	{
		if (json_object_get(a, key) == NULL) {
			keys[k++] = key;
		}
	}
	qsort(keys, k, sizeof(*keys), by_str);
	for (size_t i = 0; i < k; i++) {
		json_t *x = json_object_get(a, keys[i]);
		json_t *y = json_object_get(b, keys[i]);

		if (x != NULL && y != NULL && json_equal(x, y)) {
			continue;
		}
		if (*prefix == '\0' && json_is_object(x) &&
		    json_is_object(y) &&
		    (strcmp(keys[i], "annotations") == 0 ||
		     strcmp(keys[i], "_meta") == 0)) {
			snprintf(name, sizeof(name), "%s.", keys[i]);
			differing(x, y, name, fields);
		} else {
			snprintf(name, sizeof(name), "%s%s", prefix, keys[i]);
			json_array_append_new(fields, json_string(name));
		}
	}
	free(keys);
	return (0);
}

/* Appends item (stolen) to diff's list key, or counts it in "more" once
 * the list holds TOOLS_DIFF_NAMES. */
static void
listed(json_t *diff, const char *key, json_t *item)
{
	json_t *list = json_object_get(diff, key), *more;

	if (list == NULL) {
		json_object_set_new(diff, key, list = json_array());
	}
	if (json_array_size(list) < TOOLS_DIFF_NAMES) {
		json_array_append_new(list, item);
		return;
	}
	json_decref(item);
	if ((more = json_object_get(diff, "more")) == NULL) {
		json_object_set_new(diff, "more", more = json_object());
	}
	json_object_set_new(
	        more, key,
	        json_integer(json_integer_value(json_object_get(more, key)) +
	                     1));
}

json_t *
tools_diff(json_t *old, json_t *new)
{
	json_t *a    = old != NULL ? tools_sorted(old) : json_array();
	json_t *b    = tools_sorted(new);
	json_t *diff = json_object();
	size_t  i = 0, j = 0, na = json_array_size(a), nb = json_array_size(b);

	if (a == NULL || b == NULL || diff == NULL) {
		json_decref(a);
		json_decref(b);
		json_decref(diff);
		return (NULL);
	}
	while (i < na || j < nb) { /* both sorted by name: one walk */
		json_t *x = json_array_get(a, i), *y = json_array_get(b, j);
		int     c;

		if (x != NULL && !json_is_string(json_object_get(x, "name"))) {
			i++;
			continue;
		}
		if (y != NULL && !json_is_string(json_object_get(y, "name"))) {
			j++;
			continue;
		}
		c = x == NULL       ? 1
		        : y == NULL ? -1
		                    : strcmp(name_of(x), name_of(y));
		if (c < 0) {
			listed(diff, "removed", json_string(name_of(x)));
			i++;
		} else if (c > 0) {
			listed(diff, "added", json_string(name_of(y)));
			j++;
		} else {
			json_t *fields = json_array();
			if (fields != NULL && !json_equal(x, y) &&
			    differing(x, y, "", fields) == 0) {
				listed(diff, "changed",
				       json_pack("{s:s, s:O}", "name",
				                 name_of(x), "fields",
				                 fields));
			}
			json_decref(fields);
			i++;
			j++;
		}
	}
	json_decref(a);
	json_decref(b);
	return (diff);
}
