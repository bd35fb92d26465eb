/*
 * cluster.h - the cluster actor: what makes this node one of many
 * sharing a PostgreSQL store (spawned only with mk_options.store_url).
 *
 * Shared configuration.  It holds a connection of its own, LISTENing for
 * the clients other nodes write or delete (the store tells of them at
 * commit; see persist/store.h: The cluster), reads each changed row and
 * hands it to the supervisor (MSG_SV_SYNC), so a client created, updated,
 * disabled, enabled or deleted on any node is so on every node.  It
 * waits on the connection's socket, so a change arrives as soon as it is
 * told.  When the connection is lost it is made again (once a second):
 * what was told meanwhile is lost, so every stored client is handed over
 * again and the ones gone since the last read are deleted here too (a
 * resync).  Right after the first connect it resyncs too: the boot read
 * the store through the persister (cluster_args.restored), and a change
 * in between, a delete too, is not lost.
 *
 * Heartbeats and states.  Every heartbeat interval (default 5 s) it
 * says this node is alive, and writes this node's state of each client
 * when it changed (MSG_CS_STATE, from the supervisor: at once, and again
 * after a lost connection); the others are told, and read the live
 * nodes' states again, as this node does when told of theirs and at each
 * heartbeat (a node unseen for 3 intervals drops out).  What it reads
 * goes to the supervisor (MSG_SV_PEERS) when it changed.  At a clean stop
 * it leaves: its rows go, and the others are told.
 *
 * Messages: cluster_msg.h.
 */
#ifndef ACTORS_CLUSTER_H
#define ACTORS_CLUSTER_H

#include "actors/cluster_msg.h"
#include "actors/kernel/kernel.h"
#include "codec/msgdef.h"

#define CLUSTER_HEARTBEAT_MS 5000 /* the default interval */

/* kn_spawn's arg; copied at init. */
typedef struct cluster_args {
	const char *url;          /* the store (a postgresql:// URL) */
	const char *secret;       /* its encryption key, or NULL */
	const char *node_id;      /* this node */
	int         heartbeat_ms; /* 0: CLUSTER_HEARTBEAT_MS */
	kn_actor   *supervisor;   /* where changes go (outlives this actor) */
	const char *restored;     /* the boot's read of the store, JSON text
	                           * [{id, ...}], or NULL: the first resync
	                           * deletes those gone since */
} cluster_args;

extern const kn_actor_ops cluster_ops;

#endif /* ACTORS_CLUSTER_H */
