/*
 * text.h - small text utilities with exact contracts.
 */
#ifndef CODEC_TEXT_H
#define CODEC_TEXT_H

#include <stddef.h>

#define TEXT_FAILURE_MAX 512 /* code points in a last_failure message */

/*
 * text_failure_message normalises an error for last_failure:
 * every run of whitespace becomes one space, the ends are trimmed,
 * bytes that are not UTF-8 become '?', and a text longer than 512 code
 * points becomes its first 511 followed by "…" - never cut inside a UTF-8
 * sequence.  Returns a malloc'd string, or NULL when out of memory.
 */
char *text_failure_message(const char *in);

/* text_strv_dup copies a NULL-terminated string vector (NULL gives an
 * empty one); NULL when out of memory.  text_strv_free frees one (NULL is
 * fine). */
char **text_strv_dup(const char *const *v);
void   text_strv_free(char **v);

/* text_secret_free overwrites a secret string (OPENSSL_cleanse) and frees
 * it.  NULL is fine. */
void text_secret_free(char *s);

#endif /* CODEC_TEXT_H */
