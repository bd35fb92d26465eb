/*
 * cluster_msg.h - the cluster actor's messages: its name, what its peers send
 * it and what it answers (cluster.h says what it does with them).
 *
 * Messages: the definitions below, rendered by the msgdoc test (it fails
 * when this table differs; `msgdoc_test --write` rewrites it).
 *
 * <msgdoc>
 *   MSG_CS_STATE tell: from the supervisor: this node's state of a client
 *                      changed
 *     id      str    the client's id
 *     state   str    its state here; absent: the client is gone
 *     failure map    nil, or its last_failure
 * </msgdoc>
 *
 * Its store handle is its own, on its own thread.
 */
#ifndef ACTORS_CLUSTER_MSG_H
#define ACTORS_CLUSTER_MSG_H

#include "actors/msgbase.h"
#include "codec/mp.h"
#include "codec/msgdef.h"
#include "model/failure.h"

#define CLUSTER_NAME "cluster"

/* ---- messages (their fields; the table above is rendered from these) */

#define CS_STATE_FIELDS(F, S)                                                 \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, state, "its state here; absent: the client is gone")        \
	F(S, SUB(model_failure), failure, "nil, or its last_failure")
CODEC_MSG_STRUCT(cs_state_msg, CS_STATE_FIELDS)

/* ---- the list (codec/msgdef.h) */

#define CS_MESSAGES(M)                                                        \
	M(MSG_CS_STATE, tell, cs_state_msg, codec_nil, codec_nil,             \
	  cs_on_state,                                                        \
	  "from the supervisor: this node's state of a client changed")
CODEC_MSG_ENUM(CS_MSG, CS_MSG_BASE, CS_MESSAGES);
MSG_FITS(CS_MSG, CS_MSG_BASE);

extern const codec_msgdef cluster_msgs[];
extern const size_t       cluster_msgs_n;

#endif /* ACTORS_CLUSTER_MSG_H */
