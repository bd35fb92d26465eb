/*
 * client.h - the client actor: one per MCP client (one upstream server as
 * configured).  It owns the client's config, connection mode, state,
 * last_failure, connection generation, tool list and its hash, the sticky
 * connection(s), in-flight calls and the dedup of lifecycle operations.
 *
 * States, and what may move them (cl_state_enter's table in
 * state.c is this diagram; `error` and `degraded` are not the actor's:
 * the supervisor lists a stored client it could not start as `error`,
 * and `degraded` is a cluster's read of several nodes' states):
 *
 *   result:      healthy <-> unstable      (a check, dial or call; never
 *                                           out of the three below)
 *   admin:       any -> disabled;  disabled -> unstable (the connect
 *                decides) | pending_verification (a credential first)
 *   credential:  healthy | unstable | pending_verification ->
 *                needs_reauth;  needs_reauth | pending_verification ->
 *                unstable (authorized: the connect decides)
 *
 * A client starts disabled (configured so), pending_verification (a
 * credential type with none yet) or unstable until its first connect.
 * A result captured under an older generation (a disable, a newer
 * connection) is dropped before it gets here.
 *
 * Messages: client_msg.h.
 */
#ifndef ACTORS_CLIENT_H
#define ACTORS_CLIENT_H

#include "actors/client/client_msg.h"
#include <stdint.h>

#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "codec/msgdef.h"
#include "model/config.h"
#include "model/names.h"
#include "telemetry/trace.h"

#define CLIENT_CONNECT_MS 30000 /* a whole connect or discovery */

/* A client actor's state (the diagram above). */
typedef enum cl_state {
	CS_HEALTHY,  /* the last check passed */
	CS_UNSTABLE, /* the last check failed; calls still attempted */
	CS_REAUTH,   /* needs_reauth: calls refused, checks quiet */
	CS_PENDING,  /* pending_verification */
	CS_DISABLED, /* turned off by an admin */
	CS_ERROR,    /* the supervisor's, never an actor's: a stored client
	              * it could not start (no actor runs) */
	CS_COUNT     /* not a state */
} cl_state;
/* model/names.c names these in this order, then the cluster's own
 * "degraded" (actors/supervisor/list.c), its last */
_Static_assert(CS_COUNT + 1 == MODEL_STATES,
               "model/names.c: cl_state's names, then degraded");

/* cl_state_name is the state's name as the API shows it. */
static inline const char *
cl_state_name(cl_state s)
{
	return ((unsigned)s < CS_COUNT ? model_state_name((unsigned)s) : "?");
}

/* What the host offers MCP servers: the client capabilities every session
 * declares and who answers the servers' requests (elicitation/create,
 * sampling/createMessage, roots/list; input.c).  The runtime's; outlives
 * every client actor. */
enum { CL_IN_ELICITATION = 1, CL_IN_SAMPLING = 2, CL_IN_ROOTS = 4 };
typedef struct cl_host {
	unsigned    inputs; /* CL_IN_* the host takes (and declares) */
	const char *caps;   /* the capabilities, JSON object text */
	const char *roots;  /* roots/list's result, JSON text, or NULL: the
	                     * host is asked like for the others */
	/* told of each request waiting for it (the client actor's thread:
	 * must not block), or NULL: the stream and MSG_CL_INPUTS are the
	 * only way to learn of them */
	void (*on_input)(void *arg, const char *client_id, const char *name,
	                 const char *request_id, const char *method,
	                 const char *params);
	void *arg;
} cl_host;

/* What a client actor starts with (kn_spawn's arg).  init takes cfg. */
typedef struct client_args {
	cfg_client *cfg;        /* owned by the actor from init on */
	kn_actor   *supervisor; /* receives MSG_SV_VIEW; held by the actor */
	kn_stream  *stream;     /* the state stream (outlives the actor) */
	const char *node_id;    /* this instance's id (outlives the actor) */
	int64_t     sync_ms;    /* global tool_sync_interval */
	int64_t     exec_ms;    /* global tool_execution_timeout */
	int         changes;    /* global tool_changes */
	kn_actor   *persister;  /* the store (held by the actor), or NULL */
	kn_actor   *credential; /* the credential actor (held), or NULL */
	const cl_host *host;    /* what the host offers (outlives the actor) */
	tr_tracer     *tracer;  /* spans' exporter (outlives the actor), or
	                         * NULL */
	/* out, set by init (so the list shows the client from its start
	 * without a message to the supervisor while it spawns many): */
	char *view;     /* its first view, JSON text (malloc'd: the
	                 * spawner's), or NULL */
	cl_state state; /* and the state in it */
} client_args;

extern const kn_actor_ops client_ops;

#endif /* ACTORS_CLIENT_H */
