/*
 * config_impl.h - what the files of config.json's validation share:
 * config.c (one client), config_file.c (the whole file and its server
 * section), config_view.c (the redacted view, updates' literal mask)
 * and config_read.c (the value readers below).  All of it is pure: no
 * I/O but getenv, nothing blocks, and it runs on whichever thread calls
 * the config.h function it serves.
 */
#ifndef MODEL_CONFIG_IMPL_H
#define MODEL_CONFIG_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Parse state for one client: its name (for messages), the error and
 * which of its strings are literal. */
typedef struct cfg_pctx {
	const char *client; /* name, or "?" before it is known */
	char       *err;    /* message buffer */
	size_t      errlen; /* its size */
	json_t     *lit;    /* the client's literal mask (config.h), or NULL */
} cfg_pctx;

/* cfg_lit_key / cfg_lit_idx: the literal mask under key k / index i of
 * mask m (borrowed; all of a true mask is literal).  Never blocks. */
json_t *cfg_lit_key(json_t *m, const char *k);
json_t *cfg_lit_idx(json_t *m, size_t i);

/* cfg_is_ref: v, at mask m, is an env. reference (not a literal value).
 * Never blocks. */
bool cfg_is_ref(json_t *v, json_t *m);

/* cfg_one_line turns the control characters of s into '?' (an error is
 * one line).  Never blocks. */
void cfg_one_line(char *s);

/* cfg_bad writes the error of x's client (and field, or NULL) into
 * x->err.  Never blocks.  Returns MK_EINVAL. */
int cfg_bad(cfg_pctx *x, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* cfg_str_of: the string v, "env.NAME" resolved unless mask lit makes it
 * literal, into *out (the caller's; free).  Reads the environment, never
 * blocks.  Returns 0, MK_EINVAL (cfg_bad) or MK_ENOMEM. */
int cfg_str_of(cfg_pctx *x, const char *field, json_t *v, json_t *lit,
               char **out);

/* cfg_strv_of: an array of strings, each as cfg_str_of, into a
 * NULL-terminated vector (the caller's; text_strv_free).  Returns as
 * cfg_str_of. */
int cfg_strv_of(cfg_pctx *x, const char *field, json_t *v, json_t *lit,
                char ***out);

/* cfg_known: key is one of the NULL-terminated keys.  Never blocks. */
bool cfg_known(const char *key, const char **keys);

#endif /* MODEL_CONFIG_IMPL_H */
