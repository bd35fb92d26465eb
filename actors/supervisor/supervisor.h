/*
 * supervisor.h - the supervisor actor: owns the client actors' lifetimes
 * (add, remove, disable, enable, reconnect), their health-tick schedule
 * with jitter (below), and the client list view.
 *
 * Schedule: healthy -> tool_sync_interval (per client, else global);
 * unstable -> every unstable_ms (10 s); needs_reauth, disabled,
 * pending_verification -> none.  Each interval is spread +-10% so many
 * clients never tick together.  One check per client at a time.
 *
 * Messages: supervisor_msg.h.
 */
#ifndef ACTORS_SUPERVISOR_H
#define ACTORS_SUPERVISOR_H

#include <limits.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "actors/supervisor/supervisor_msg.h"

/* kn_spawn's arg; copied at init. */
typedef struct sv_args {
	kn_stream     *stream;  /* the state stream */
	const char    *node_id; /* this instance (outlives the supervisor) */
	int64_t        sync_ms; /* global tool_sync_interval, at first */
	int64_t        exec_ms; /* global tool_execution_timeout, at first */
	int            changes; /* global tool_changes, at first */
	int64_t        unstable_ms; /* check interval while unstable */
	kn_actor      *persister;   /* the store, or NULL (memory only) */
	kn_actor      *credential;  /* the credential actor, or NULL */
	bool           cluster;     /* one node of many (a shared store) */
	const cl_host *host;        /* what the host offers MCP servers */
	tr_tracer     *tracer;      /* spans' exporter, or NULL */
} sv_args;

extern const kn_actor_ops supervisor_ops;

/* A first connect's ask: the client's own deadline, and then some. */
#define CONNECT_ASK_MS (CLIENT_CONNECT_MS + 5000)
/* A boot's time besides its connects' turns (spawning the actors). */
#define BOOT_SLACK_MS 30000
/* The most sv_boot_ms says (12 days: room for an asker's margin in an
 * int). */
#define BOOT_MAX_MS (INT_MAX / 2)

/*
 * How long a boot may take at most, so its asker's deadline: each first
 * connect is bounded (CONNECT_ASK_MS) and a boot starts so many at once
 * (a lane each for stdio starts and per-call discoveries, at most
 * mcp.stdio_start_concurrency at once, and for sticky network dials,
 * 256), so 10,000 clients may take many times one connect's 30 s.
 * sv_boot_ms is a config file's (MSG_SV_LOAD, MSG_SV_RELOAD's new
 * clients), sv_restore_ms the store's list (MSG_SV_LOAD's restore).
 */
int sv_boot_ms(const cfg_file *f);
int sv_restore_ms(const char *list);

/* supervisor_stats_decode parses a MSG_STATS reply.  Unknown keys are
 * ignored.  Returns 0 or MK_EPROTO. */
int supervisor_stats_decode(const void *buf, size_t len, mk_stats *out);

#endif /* ACTORS_SUPERVISOR_H */
