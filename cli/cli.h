/*
 * cli.h - what the mcpkeep program's commands share.
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <stddef.h>

#include "mcpkeep.h"

/* cli_read_file reads a whole file (at most 4 MiB) into a malloc'd,
 * NUL-terminated text; NULL with err on failure. */
char *cli_read_file(const char *path, char *err, size_t errlen);

/* cli_parse_level reads debug|info|warn|error.  Returns 0 or -1. */
int cli_parse_level(const char *s, mk_log_level *out);

/* cli_positive reads a whole decimal number 1..INT_MAX.  Returns it, or
 * -1 for anything else. */
int cli_positive(const char *s);

/* The commands; each returns the exit code. */
int cmd_serve(int argc, char **argv);   /* serve.c */
int cmd_clients(int argc, char **argv); /* remote.c */
int cmd_call(int argc, char **argv);    /* remote.c */

#endif /* CLI_CLI_H */
