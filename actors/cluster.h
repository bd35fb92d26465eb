/*
 * cluster.h - the cluster actor: what makes this node one of many
 * sharing a PostgreSQL store (spawned only with mk_options.store_url).
 *
 * It holds a connection of its own, LISTENing for the clients other
 * nodes write or delete (the store tells of them at commit; see
 * persist/store.h: The cluster), reads each changed row and hands it to
 * the supervisor (MSG_SV_SYNC), so a client created, updated, disabled,
 * enabled or deleted on any node is so on every node.  It waits on the
 * connection's socket, so a change arrives as soon as it is told.  When
 * the connection is lost it is made again (once a second): what was told
 * meanwhile is lost, so every stored client is handed over again and the
 * ones gone since the last read are deleted here too (a resync).  Right
 * after the first connect it resyncs too: the boot read the store
 * through the persister, and a change in between is not lost.
 *
 * It takes no messages.  Its store handle is its own, on its own thread.
 */
#ifndef ACTORS_CLUSTER_H
#define ACTORS_CLUSTER_H

#include "actors/kernel/kernel.h"

#define CLUSTER_NAME "cluster"

/* kn_spawn's arg; copied at init. */
typedef struct cluster_args {
	const char *url;        /* the store (a postgresql:// URL) */
	const char *secret;     /* its encryption key, or NULL */
	const char *node_id;    /* this node */
	kn_actor   *supervisor; /* where changes go (outlives this actor) */
} cluster_args;

extern const kn_actor_ops cluster_ops;

#endif /* ACTORS_CLUSTER_H */
