/*
 * persister.h - the persistence actor: the only SQLite write connection.
 *
 * Writes arrive as tells and are applied in batches: the first write
 * after a quiet period arms a short flush timer (PS_FLUSH_MS); a batch of
 * PS_BATCH_MAX writes flushes at once; one transaction per flush.  A
 * failed flush (disk full, read-only file, locked, corrupt) is rolled back
 * and retried with backoff; the runtime keeps serving from memory, the
 * failure is logged once per failure run and published on the state
 * stream as a "store" message ({"healthy": false, "error": text}), and
 * recovery as {"healthy": true}.  Tool lists arrive only when their hash
 * changed in the client actor, and the store checks the hash once more.
 *
 * Messages (msgpack maps):
 *   MSG_PS_CLIENT_PUT tell {"id", "name", "config": json text}
 *   MSG_PS_CLIENT_DEL tell {"id"}
 *   MSG_PS_TOOLS_PUT  tell {"id", "hash", "tools": json text}
 *   MSG_PS_LOAD       ask  {} -> {"clients": json text: [{"id", "name",
 *                          "config": object, "tools": array|null,
 *                          "hash"}]} (pending writes flushed first)
 *   MSG_PS_STATS      ask  {} -> {"tool_writes", "flushes", "failures"}
 */
#ifndef ACTORS_PERSISTER_H
#define ACTORS_PERSISTER_H

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"

#define PERSISTER_NAME "persister"
#define PS_FLUSH_MS    20
#define PS_BATCH_MAX   64

typedef struct ps_args {
	const char *path;   /* the database file */
	kn_stream  *stream; /* for "store" messages */
} ps_args;

extern const kn_actor_ops persister_ops;

#endif /* ACTORS_PERSISTER_H */
