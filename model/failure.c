/*
 * failure.c - a client's last_failure: its fields, and its JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "model/failure.h"

CODEC_MSG_FIELDS(model_failure, MODEL_FAILURE_FIELDS);

#define TEXT(s) ((s) != NULL ? (s) : "")

json_t *
model_failure_json(const model_failure *f)
{
	if (f == NULL) {
		return (json_null());
	}
	return (json_pack("{s:s, s:s, s:s, s:s}", "stage", TEXT(f->stage),
	                  "message", TEXT(f->message), "at", TEXT(f->at),
	                  "since", TEXT(f->since)));
}

model_failure *
model_failure_dup(const model_failure *f)
{
	model_failure *d;

	if (f == NULL || (d = calloc(1, sizeof(*d))) == NULL) {
		return (NULL);
	}
	d->stage   = strdup(TEXT(f->stage));
	d->message = strdup(TEXT(f->message));
	d->at      = strdup(TEXT(f->at));
	d->since   = strdup(TEXT(f->since));
	if (d->stage == NULL || d->message == NULL || d->at == NULL ||
	    d->since == NULL) {
		model_failure_free(d);
		return (NULL);
	}
	return (d);
}

model_failure *
model_failure_from_json(const json_t *o)
{
	model_failure f = {
	        .stage =
	                (char *)json_string_value(json_object_get(o, "stage")),
	        .message = (char *)json_string_value(
	                json_object_get(o, "message")),
	        .at = (char *)json_string_value(json_object_get(o, "at")),
	        .since =
	                (char *)json_string_value(json_object_get(o, "since")),
	};

	return (json_is_object(o) ? model_failure_dup(&f) : NULL);
}

void
model_failure_free(model_failure *f)
{
	if (f != NULL) {
		model_failure_clear(f);
		free(f);
	}
}
