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
 * flush failed is answered MK_ESYS at once (its write stays queued) -
 * but an acknowledged change's: a write or a sync with a ticket (an API
 * change) is answered MK_ESTORE, "the store cannot write: why; what to
 * do", and its writes leave the queue, never to land; a sync whose
 * ticket's writes all landed before is answered ok.  A
 * row the schema refuses is dropped, logged and answered MK_EINVAL.  At
 * boot a store that cannot be written is still read, when it can be, so
 * stored clients come back.  A store refused outright (a newer schema, a
 * sealed store without its key or with another key) fails the boot.
 *
 * Messages: persister_msg.h.
 */
#ifndef ACTORS_PERSISTER_H
#define ACTORS_PERSISTER_H

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "actors/persister_msg.h"

#define PERSISTER_NAME "persister"
#define PS_FLUSH_MS    20
#define PS_BATCH_MAX   64

typedef struct ps_args {
	const char *path;    /* the database file, or a PostgreSQL URL */
	const char *secret;  /* encryption key, or NULL (copied at init) */
	kn_stream  *stream;  /* for "store" messages */
	const char *node_id; /* this node, named to the others (a shared
	                      * store); outlives the persister */
} ps_args;

extern const kn_actor_ops persister_ops;

#endif /* ACTORS_PERSISTER_H */
