/*
 * config_read.c - the value readers every part of config.json shares:
 * strings and string arrays resolved through "env.", the literal mask
 * looked up, one-line errors naming the client and the field, known
 * keys, durations (see config_impl.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/text.h"
#include "mcpkeep.h"
#include "model/config.h"
#include "model/config_impl.h"

/* The literal mask under key k (of an object) or index i (of an array)
 * of mask m: everything under a true is literal. */
json_t *
cfg_lit_key(json_t *m, const char *k)
{
	return (json_is_true(m) ? m : json_object_get(m, k));
}

json_t *
cfg_lit_idx(json_t *m, size_t i)
{
	return (json_is_true(m) ? m : json_array_get(m, i));
}

/* Whether v, at mask m, is an env. reference (not a literal value). */
bool
cfg_is_ref(json_t *v, json_t *m)
{
	return (json_is_string(v) && !json_is_true(m) &&
	        strncmp(json_string_value(v), "env.", 4) == 0);
}

/* An error is one line of text: a key or name it quotes from the input
 * may hold control characters, which become '?' (no log line can be
 * split or forged through it). */
void
cfg_one_line(char *s)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f) {
			*s = '?';
		}
	}
}

int
cfg_bad(cfg_pctx *x, const char *field, const char *fmt, ...)
{
	char    what[CFG_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (field != NULL) {
		snprintf(x->err, x->errlen, "client \"%s\": field \"%s\": %s",
		         x->client, field, what);
	} else {
		snprintf(x->err, x->errlen, "client \"%s\": %s", x->client,
		         what);
	}
	cfg_one_line(x->err);
	return (MK_EINVAL);
}

/* Resolves a string value, following "env.NAME" unless the mask lit
 * makes it literal. */
int
cfg_str_of(cfg_pctx *x, const char *field, json_t *v, json_t *lit, char **out)
{
	const char *s;

	if (!json_is_string(v)) {
		return (cfg_bad(x, field, "must be a string"));
	}
	s = json_string_value(v);
	if (cfg_is_ref(v, lit)) {
		const char *e = getenv(s + 4);
		if (s[4] == '\0') {
			return (cfg_bad(x, field,
			                "\"env.\" needs a variable name"));
		}
		if (e == NULL) {
			return (cfg_bad(
			        x, field,
			        "environment variable %.100s is not set",
			        s + 4));
		}
		s = e;
	}
	if ((*out = strdup(s)) == NULL) {
		return (MK_ENOMEM);
	}
	return (0);
}

/* An array of strings (each resolved) into a NULL-terminated vector. */
int
cfg_strv_of(cfg_pctx *x, const char *field, json_t *v, json_t *lit,
            char ***out)
{
	size_t  i;
	json_t *e;
	char    f[96];
	int     rv;

	if (!json_is_array(v)) {
		return (cfg_bad(x, field, "must be an array of strings"));
	}
	if ((*out = calloc(json_array_size(v) + 1, sizeof(char *))) == NULL) {
		return (MK_ENOMEM);
	}
	json_array_foreach(v, i, e)
	{
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if ((rv = cfg_str_of(x, f, e, cfg_lit_idx(lit, i),
		                     &(*out)[i])) != 0) {
			text_strv_free(*out);
			*out = NULL;
			return (rv);
		}
	}
	return (0);
}

int
cfg_duration(json_t *v, int64_t *ms)
{
	const char *s;
	char       *end;
	double      n;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 ||
		    json_integer_value(v) > INT64_MAX / 1000) {
			return (-1);
		}
		*ms = json_integer_value(v) * 1000;
		return (0);
	}
	if (!json_is_string(v) ||
	    !isdigit((unsigned char)*json_string_value(v))) {
		return (-1);
	}
	s = json_string_value(v);
	n = strtod(s, &end);
	if (strcmp(end, "ms") == 0) {
		*ms = (int64_t)n;
	} else if (strcmp(end, "s") == 0 || *end == '\0') {
		*ms = (int64_t)(n * 1000);
	} else if (strcmp(end, "m") == 0) {
		*ms = (int64_t)(n * 60 * 1000);
	} else if (strcmp(end, "h") == 0) {
		*ms = (int64_t)(n * 3600 * 1000);
	} else {
		return (-1);
	}
	return (n < 0 || n > 1e9 ? -1 : 0);
}

bool
cfg_known(const char *key, const char **keys)
{
	for (int i = 0; keys[i] != NULL; i++) {
		if (strcmp(key, keys[i]) == 0) {
			return (true);
		}
	}
	return (false);
}
