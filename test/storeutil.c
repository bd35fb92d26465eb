/*
 * storeutil.c - the store's contract checks both backends' tests run
 * (see storeutil.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storeutil.h"
#include "testutil.h"

/* The digests of id's stored versions, comma-separated, into out. */
static void
digests(store *s, const char *id, char *out, size_t len)
{
	char   *text = NULL;
	json_t *all, *v;
	size_t  i, at = 0;

	CHECK_EQ(store_tool_versions(s, id, &text), 0);
	CHECK((all = json_loads(text, 0, NULL)) != NULL && json_is_array(all));
	out[0] = '\0';
	json_array_foreach(all, i, v)
	{
		at += (size_t)snprintf(
		        out + at, len - at, "%s%s", i ? "," : "",
		        json_string_value(json_object_get(v, "digest")));
		CHECK(at < len);
	}
	json_decref(all);
	free(text);
}

void
storeutil_versions(store *s, const char *id)
{
	char got[1024], hash[16], one[64];
	bool w;

	CHECK_EQ(store_tools_put(s, id, "v-1", "[]",
	                         "[{\"digest\": \"v-1\", \"count\": 0}]", &w),
	         0);
	CHECK(w);
	digests(s, id, got, sizeof(got));
	CHECK(strcmp(got, "v-1") == 0);
	/* the same list again: not written, no version */
	CHECK_EQ(store_tools_put(s, id, "v-1", "[]", "[{\"digest\": \"x\"}]",
	                         &w),
	         0);
	CHECK(!w);
	/* two folded into one write: both, in order */
	CHECK_EQ(store_tools_put(
	                 s, id, "v-3", "[]",
	                 "[{\"digest\": \"v-2\"}, {\"digest\": \"v-3\"}]", &w),
	         0);
	digests(s, id, got, sizeof(got));
	CHECK(strcmp(got, "v-1,v-2,v-3") == 0);
	/* bounded: the last 20 */
	for (int i = 4; i <= 30; i++) {
		snprintf(hash, sizeof(hash), "v-%d", i);
		snprintf(one, sizeof(one), "[{\"digest\": \"%s\"}]", hash);
		CHECK_EQ(store_tools_put(s, id, hash, "[]", one, &w), 0);
		CHECK(w);
	}
	digests(s, id, got, sizeof(got));
	CHECK(strncmp(got, "v-11,v-12,", 10) == 0);
	CHECK(strlen(got) > 5 && strcmp(got + strlen(got) - 5, ",v-30") == 0);
	CHECK(strcmp(got,
	             "v-11,v-12,v-13,v-14,v-15,v-16,v-17,v-18,v-19,v-20,"
	             "v-21,v-22,v-23,v-24,v-25,v-26,v-27,v-28,v-29,v-30") ==
	      0);
	/* a client without a stored list has none */
	digests(s, "nobody", got, sizeof(got));
	CHECK(strcmp(got, "") == 0);
}

void
storeutil_approvals(store *s, const char *id)
{
	json_t *key = json_pack("{s:s}", "client_id", id), *row, *got = NULL;

	CHECK_EQ(store_row_get(s, STORE_TOOL_APPROVALS, key, &got), 0);
	CHECK(got == NULL);
	row = json_pack("{s:s, s:s, s:s}", "client_id", id, "digest", "d-1",
	                "tools", "[{\"name\": \"echo\"}]");
	CHECK_EQ(store_row_put(s, STORE_TOOL_APPROVALS, row), 0);
	CHECK_EQ(store_row_get(s, STORE_TOOL_APPROVALS, key, &got), 0);
	CHECK(got != NULL &&
	      json_equal(json_object_get(got, "tools"),
	                 json_object_get(row, "tools")));
	CHECK(json_is_null(json_object_get(got, "rejected")));
	json_decref(got);
	/* a rejection is the whole row again */
	json_object_set_new(row, "rejected", json_string("d-2"));
	CHECK_EQ(store_row_put(s, STORE_TOOL_APPROVALS, row), 0);
	CHECK_EQ(store_row_get(s, STORE_TOOL_APPROVALS, key, &got), 0);
	CHECK(got != NULL &&
	      strcmp(json_string_value(json_object_get(got, "rejected")),
	             "d-2") == 0 &&
	      strcmp(json_string_value(json_object_get(got, "digest")),
	             "d-1") == 0);
	json_decref(got);
	CHECK_EQ(store_client_del(s, id), 0);
	CHECK_EQ(store_row_get(s, STORE_TOOL_APPROVALS, key, &got), 0);
	CHECK(got == NULL);
	json_decref(row);
	json_decref(key);
}
