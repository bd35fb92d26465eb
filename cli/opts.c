/*
 * opts.c - each command's options as a table (curl's aliases[] and
 * nngcat's opts[] are the models): one parser, one wording of its errors.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int
cli_parse_level(const char *s, mk_log_level *out)
{
	static const char *names[] = {"debug", "info", "warn", "error"};

	for (int i = 0; i < 4; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (mk_log_level)i;
			return (0);
		}
	}
	return (-1);
}

int
cli_positive(const char *s)
{
	char *end;
	long  n;

	errno = 0;
	n     = strtol(s, &end, 10);
	return (errno == 0 && end != s && *end == '\0' && n >= 1 &&
	                        n <= INT_MAX
	                ? (int)n
	                : -1);
}

/* Takes v as o's value; false when it is not one (said). */
static bool
take(const char *cmd, const cli_opt *o, const char *v)
{
	switch (o->kind) {
	case CLI_TEXT:
		if (*v == '\0') {
			break;
		}
		*(const char **)o->to = v;
		return (true);
	case CLI_NUM:
		if ((*(int *)o->to = cli_positive(v)) > 0) {
			return (true);
		}
		fprintf(stderr,
		        "mcpkeep %s: %s needs a whole number of 1 or more, not '%s'\n",
		        cmd, o->name, v);
		return (false);
	case CLI_LEVEL:
		if (cli_parse_level(v, o->to) == 0) {
			return (true);
		}
		fprintf(stderr,
		        "mcpkeep %s: %s is debug, info, warn or error, not '%s'\n",
		        cmd, o->name, v);
		return (false);
	default:
		break;
	}
	fprintf(stderr, "mcpkeep %s: %s needs a value\n", cmd, o->name);
	return (false);
}

/* The row of opts named arg, or of the next free positional argument
 * (*pos counts those taken), or NULL. */
static const cli_opt *
row_of(const cli_opt *opts, const char *arg, int *pos)
{
	int p = 0;

	for (const cli_opt *o = opts; o->kind != CLI_END; o++) {
		if (o->kind == CLI_ARG) {
			if (arg[0] != '-' && p++ == *pos) {
				(*pos)++;
				return (o);
			}
		} else if (strcmp(o->name, arg) == 0) {
			return (o);
		}
	}
	return (NULL);
}

int
cli_args(const char *cmd, int argc, char **argv, const cli_opt *opts,
         const char *usage)
{
	int pos = 0;

	for (int i = 0; i < argc; i++) {
		const cli_opt *o = row_of(opts, argv[i], &pos);

		if (strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return (1);
		}
		if (o == NULL) {
			fprintf(stderr, "mcpkeep %s: %s '%s'\n%s", cmd,
			        argv[i][0] == '-' ? "unknown option"
			                          : "one argument too many",
			        argv[i], usage);
			return (2);
		}
		if (o->kind == CLI_FLAG) {
			*(bool *)o->to = true;
		} else if (o->kind == CLI_ARG) {
			*(const char **)o->to = argv[i];
		} else if (i + 1 >= argc) {
			fprintf(stderr, "mcpkeep %s: %s needs a value\n%s",
			        cmd, argv[i], usage);
			return (2);
		} else if (!take(cmd, o, argv[++i])) {
			fputs(usage, stderr);
			return (2);
		}
	}
	return (0);
}
