/*
 * config_fuzz.c - libFuzzer target for config.json (model/config*.c): a
 * file read from disk and a client object from an API body are external
 * input.  The input is parsed as a whole file, and (when it is JSON) as
 * one client, literal and not.  A parse either fails with a one-line
 * error that fits its buffer, or gives clients that each have a name
 * and an id, whose redacted view exists, whose stored form parses
 * again to the same name and connection, and which free cleanly.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "model/config.h"

static void
check_client(const cfg_client *c)
{
	json_t     *red, *st;
	cfg_client *back = NULL;
	char        err[CFG_ERR_MAX];

	if (c->name == NULL || c->id == NULL || *c->name == '\0') {
		abort();
	}
	if ((red = cfg_client_redacted(c)) == NULL) {
		abort();
	}
	json_decref(red);
	if ((st = cfg_client_stored(c)) == NULL) {
		abort();
	}
	if (cfg_client_parse_stored(st, &back, err, sizeof(err)) == 0) {
		/* (an id the file did not give is generated anew: the
		 * store keeps it beside the config) */
		if (strcmp(back->name, c->name) != 0 ||
		    back->conn != c->conn) {
			abort();
		}
		cfg_client_free(&back);
	}
	json_decref(st);
}

static void
check_err(const char *err, size_t len)
{
	if (memchr(err, '\0', len) == NULL || strchr(err, '\n') != NULL) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char        err[CFG_ERR_MAX];
	cfg_file   *f = NULL;
	cfg_client *c = NULL;
	json_t     *j, *lit;

	memset(err, 0, sizeof(err));
	if (cfg_file_parse((const char *)data, size, &f, err, sizeof(err)) ==
	    0) {
		for (size_t i = 0; i < f->nclients; i++) {
			check_client(f->clients[i]);
		}
		cfg_file_free(&f);
	} else {
		check_err(err, sizeof(err));
	}
	json_t *problems = NULL; /* (mcpkeep check's reading) */
	int     rc = cfg_file_check((const char *)data, size, &problems, NULL);
	if ((rc == 0 || rc == MK_EINVAL) && !json_is_array(problems)) {
		abort();
	}
	json_decref(problems);
	if ((j = json_loadb((const char *)data, size, 0, NULL)) == NULL) {
		return (0);
	}
	lit = json_true(); /* (as an API body: every string literal) */
	for (int k = 0; k < 2; k++) {
		memset(err, 0, sizeof(err));
		if (cfg_client_parse(j, k == 0 ? NULL : lit, &c, err,
		                     sizeof(err)) == 0) {
			check_client(c);
			cfg_client_free(&c);
		} else {
			check_err(err, sizeof(err));
		}
	}
	json_decref(lit);
	json_decref(j);
	return (0);
}
