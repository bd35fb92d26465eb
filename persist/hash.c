/*
 * hash.c - canonical tool-list hash (see hash.h).
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
