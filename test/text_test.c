/*
 * text_test.c - last_failure message normalisation.
 */
#include "codec/text.h"
#include "testutil.h"

static size_t
code_points(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++) {
		n += ((unsigned char)*s & 0xc0) != 0x80;
	}
	return (n);
}

static void
whitespace(void)
{
	char *m =
	        text_failure_message("  context\tdeadline\n\n exceeded \r\n");

	CHECK(strcmp(m, "context deadline exceeded") == 0);
	free(m);
	m = text_failure_message("");
	CHECK(strcmp(m, "") == 0);
	free(m);
	m = text_failure_message(" \t\n ");
	CHECK(strcmp(m, "") == 0);
	free(m);
}

static void
cap_multibyte(void)
{
	/* 600 code points of a 3-byte character */
	char  in[600 * 3 + 1];
	char *m;

	for (int i = 0; i < 600; i++) {
		memcpy(in + 3 * i, "\xe2\x82\xac", 3); /* the euro sign */
	}
	in[600 * 3] = '\0';
	m           = text_failure_message(in);
	CHECK_EQ(code_points(m), 512);
	CHECK_EQ(strlen(m), 511 * 3 + 3);
	CHECK(strcmp(m + 511 * 3, "\xe2\x80\xa6") == 0); /* "…" */
	CHECK(memcmp(m, in, 511 * 3) == 0);
	free(m);
	/* exactly 512 is kept whole */
	in[512 * 3] = '\0';
	m           = text_failure_message(in);
	CHECK_EQ(code_points(m), 512);
	CHECK(strcmp(m, in) == 0);
	free(m);
	/* mixed widths and whitespace runs count after collapsing */
	char mixed[2000] = "";
	for (int i = 0; i < 300; i++) {
		strcat(mixed, "a\t\xc3\xa9 ");
	}
	m = text_failure_message(mixed);
	CHECK_EQ(code_points(m), 512);
	CHECK(strstr(m, "\t") == NULL);
	free(m);
}

static void
invalid_utf8(void)
{
	char *m = text_failure_message("bad \xff\xfe bytes \xe2\x82");

	CHECK(strcmp(m, "bad ?? bytes ??") == 0);
	free(m);
}

int
main(void)
{
	RUN(whitespace);
	RUN(cap_multibyte);
	RUN(invalid_utf8);
	return (0);
}
