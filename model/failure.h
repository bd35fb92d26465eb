/*
 * failure.h - a client's last_failure (SPEC: stage, message, at, since)
 * as the messages and events carry it, and as JSON at the edges that
 * show or store it.
 */
#ifndef MODEL_FAILURE_H
#define MODEL_FAILURE_H

#include <jansson.h>

#include "codec/msgdef.h"

#define MODEL_FAILURE_FIELDS(F, S)                                            \
	F(S, STR, stage, "where it failed (model/names.h)")                   \
	F(S, STR, message, "why, one line")                                   \
	F(S, STR, at, "when it last failed, RFC 3339 UTC")                    \
	F(S, STR, since, "when the failures began")
CODEC_MSG_STRUCT(model_failure, MODEL_FAILURE_FIELDS)

/* model_failure_json is f as {stage, message, at, since} ("" for a field
 * it lacks), JSON null when f is NULL: a new reference, NULL out of
 * memory. */
json_t *model_failure_json(const model_failure *f);

/* model_failure_from_json reads {stage, message, at, since} (a stored
 * one): a new failure (model_failure_free), NULL when o is not an object
 * or out of memory. */
model_failure *model_failure_from_json(const json_t *o);

/* model_failure_dup copies f (free it with model_failure_free); NULL
 * when f is NULL or out of memory. */
model_failure *model_failure_dup(const model_failure *f);

/* model_failure_free frees f and its strings; NULL is a no-op. */
void model_failure_free(model_failure *f);

#endif /* MODEL_FAILURE_H */
