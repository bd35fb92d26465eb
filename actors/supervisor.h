/*
 * supervisor.h - the supervisor actor.
 *
 * Owns the lifetimes of the client actors and the health-tick schedule
 * (from issue 4 on).  Today it answers the runtime's own asks.
 *
 * Messages
 *   MSG_PING   ask   payload: any bytes      reply: the same bytes
 *   MSG_STATS  ask   payload: none           reply: msgpack map
 *              {"actors", "messages", "asks", "late_replies", "expired",
 *               "handler_errors"} -> uint
 * Anything else is a bug and asserts.
 */
#ifndef ACTORS_SUPERVISOR_H
#define ACTORS_SUPERVISOR_H

#include "actors/kernel/kernel.h"

#define SUPERVISOR_NAME "supervisor"

/* The supervisor's behaviour, for kn_spawn (arg: unused). */
extern const kn_actor_ops supervisor_ops;

/* supervisor_stats_decode parses a MSG_STATS reply.  Unknown keys are
 * ignored.  Returns 0 or MK_EPROTO. */
int supervisor_stats_decode(const void *buf, size_t len, mk_stats *out);

#endif /* ACTORS_SUPERVISOR_H */
