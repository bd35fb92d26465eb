/*
 * text.c - see text.h.
 */
#include "codec/text.h"

#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if invalid. */
static size_t
utf8_len(const unsigned char *p)
{
	size_t n;

	if (p[0] < 0x80) {
		return (1);
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
	} else {
		return (0);
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			return (0);
		}
	}
	/* overlongs and surrogates */
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f)) {
		return (0);
	}
	return (n);
}

static bool
is_space(unsigned char c)
{
	return (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	        c == '\f');
}

char *
text_failure_message(const char *in)
{
	const unsigned char *p = (const unsigned char *)(in ? in : "");
	/* worst case: every byte kept, plus the ellipsis */
	size_t cap = strlen((const char *)p) + 4, len = 0, cps = 0;
	size_t cut           = 0; /* byte length after 511 code points */
	char  *out           = malloc(cap);
	bool   pending_space = false;

	if (out == NULL) {
		return (NULL);
	}
	while (*p != '\0') {
		size_t n;

		if (is_space(*p)) {
			pending_space = len > 0;
			p++;
			continue;
		}
		if (pending_space) {
			if (cps == TEXT_FAILURE_MAX - 1) {
				cut = len;
			}
			out[len++] = ' ';
			cps++;
			pending_space = false;
		}
		if (cps == TEXT_FAILURE_MAX - 1) {
			cut = len;
		}
		if ((n = utf8_len(p)) == 0) {
			out[len++] = '?';
			p++;
		} else {
			memcpy(out + len, p, n);
			len += n;
			p += n;
		}
		cps++;
	}
	if (cps > TEXT_FAILURE_MAX) {
		len = cut;
		/* a space at the cut would be trimmed anyway */
		memcpy(out + len, "\xe2\x80\xa6", 3);
		len += 3;
	}
	out[len] = '\0';
	return (out);
}

void
text_strv_free(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		free(v[i]);
	}
	free(v);
}

char **
text_strv_dup(const char *const *v)
{
	size_t n = 0;
	char **out;

	while (v != NULL && v[n] != NULL) {
		n++;
	}
	if ((out = calloc(n + 1, sizeof(*out))) == NULL) {
		return (NULL);
	}
	for (size_t i = 0; i < n; i++) {
		if ((out[i] = strdup(v[i])) == NULL) {
			text_strv_free(out);
			return (NULL);
		}
	}
	return (out);
}

void
text_secret_free(char *s)
{
	if (s != NULL) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}
