/*
 * hash.h - the content hash of a tool list and what changed between two:
 * SHA-256 over the canonical JSON - tools sorted by name, object keys
 * sorted, no whitespace - so neither the server's tool order nor its key
 * order changes it; every field of a tool counts, not only those a person
 * reads.
 */
#ifndef PERSIST_HASH_H
#define PERSIST_HASH_H

#include <jansson.h>

#define TOOLS_HASH_HEX 65 /* 64 hex digits + NUL */

/* tools_hash writes the hex hash of tools (an array) into hex.  Returns 0
 * or MK_ENOMEM / MK_EINVAL (not an array). */
int tools_hash(json_t *tools, char hex[TOOLS_HASH_HEX]);

/* tools_sorted returns a new array of the same tools sorted by name (the
 * order the client list shows), or NULL. */
json_t *tools_sorted(json_t *tools);

/* At most this many names in each of a diff's lists (then "more"). */
#define TOOLS_DIFF_NAMES 100

/*
 * tools_diff says what changed from the list old (an array, or NULL: none
 * before) to new: a new object {"added": [names], "removed": [names],
 * "changed": [{"name", "fields": [...]}]}, each sorted by name, an empty
 * list left out; a changed tool's fields are its top-level keys whose
 * value differs ("description", "inputSchema", ...), one level deeper in
 * "annotations" and "_meta" ("annotations.destructiveHint").  A list
 * longer than TOOLS_DIFF_NAMES keeps its first ones and says how many
 * more in "more": {"added": n, ...}.  A tool without a string name is
 * left out.  NULL out of memory.
 */
json_t *tools_diff(json_t *old, json_t *new);

#endif /* PERSIST_HASH_H */
