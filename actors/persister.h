/*
 * persister.h - the persistence actor: the only SQLite write connection.
 *
 * Writes arrive as tells (batched) or asks (durable).  The first tell
 * after a quiet period arms a short flush timer (PS_FLUSH_MS); a batch of
 * PS_BATCH_MAX writes flushes at once; one transaction per flush.  An ask
 * is durable: its write is flushed at once (with every write queued
 * before it, asks that arrived together sharing one transaction) and
 * synced to disk before the reply says it is stored.  Queued writes to
 * the same row coalesce (the newest wins, in the place of the first), so
 * a long outage holds one write per row, not one per change.
 *
 * Failure: a store that cannot be opened for writing at boot (read-only,
 * locked, missing folder, damaged) or a flush that fails (disk full,
 * read-only, locked, corrupt) leaves the runtime serving from memory: the
 * failure is logged once per failure run, published on the state stream
 * as a "store" message ({"healthy": false, "error": text}), and retried
 * with backoff (100 ms doubling to 5 s) - reopening the file when it was
 * never open - until it works ({"healthy": true}).  A durable ask whose
 * flush failed is answered MK_ESYS at once (its write stays queued); a
 * row the schema refuses is dropped, logged and answered MK_EINVAL.  At
 * boot a store that cannot be written is still read, when it can be, so
 * stored clients come back.  A store refused outright (a newer schema, a
 * sealed store without its key or with another key) fails the boot.
 *
 * Messages (msgpack maps; errors: non-zero status and {"error": text}):
 *   MSG_PS_CLIENT_PUT tell|ask {"id", "name", "config": json text} -> {}
 *   MSG_PS_CLIENT_DEL tell|ask {"id"} -> {}  (its tools and credential
 *                          rows go with it)
 *   MSG_PS_TOOLS_PUT  tell {"id", "hash", "tools": json text}
 *   MSG_PS_ROW_PUT    tell|ask {"table": name, "row": json object text}
 *                          -> {}   (store_row_put)
 *   MSG_PS_ROW_DEL    tell|ask {"table", "key": json object text} -> {}
 *   MSG_PS_LOAD       ask  {} -> {"clients": json text: [{"id", "name",
 *                          "config": object, "tools": array|null,
 *                          "hash"}]} (pending writes flushed first)
 *   MSG_PS_ROWS       ask  {"table"} -> {"rows": json text: [objects]}
 *   MSG_PS_ROW_GET    ask  {"table", "key": json text} -> {"row": json
 *                          text} or {} when there is none (read as the
 *                          store holds it: queued writes flushed first)
 *   MSG_PS_SYNC       ask  {} -> {} once every write queued before it is
 *                          durable (MK_ESYS: not yet, kept and retried)
 *   MSG_PS_STATS      ask  {} -> {"tool_writes", "flushes", "failures",
 *                          "dropped", "queued": int, "healthy": bool,
 *                          "sealed": bool, "error": text ("" when
 *                          healthy)}
 */
#ifndef ACTORS_PERSISTER_H
#define ACTORS_PERSISTER_H

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "codec/mp.h"

#define PERSISTER_NAME "persister"
#define PS_FLUSH_MS    20
#define PS_BATCH_MAX   64

typedef struct ps_args {
	const char *path;   /* the database file */
	const char *secret; /* encryption key, or NULL (copied at init) */
	kn_stream  *stream; /* for "store" messages */
} ps_args;

extern const kn_actor_ops persister_ops;

/* ps_row_msg writes (mp_w_init) the payload of MSG_PS_ROW_PUT (key
 * "row") or MSG_PS_ROW_DEL ("key"): the table's name and the row's JSON
 * text.  The caller sends it and calls mp_w_fini. */
void ps_row_msg(mp_w *w, const char *table, const char *key, const char *json);

#endif /* ACTORS_PERSISTER_H */
