/*
 * hash.h - the content hash of a tool list: SHA-256 over
 * the canonical JSON - tools sorted by name, object keys sorted, no
 * whitespace - so neither the server's tool order nor its key order
 * changes it.
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

#endif /* PERSIST_HASH_H */
