/*
 * cli.h - what the mcpkeep program's commands share.
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcpkeep.h"

/* cli_read_file reads a whole file (at most 4 MiB) into a malloc'd,
 * NUL-terminated text; NULL with err on failure. */
char *cli_read_file(const char *path, char *err, size_t errlen);

/* cli_store sets o's store: flag (--store: a file, or a postgresql://
 * URL) when given, else the config text's store.url or store.path (into
 * *own, the caller's to mk_free).  Returns 0, or mk_config_get's error
 * with *err. */
int cli_store(mk_options *o, const char *flag, const char *text, char **own,
              char **err);

/* cli_credential: the credential header line of a command - token
 * (--token, else MCPKEEP_ADMIN_TOKEN) as the admin's bearer, else key
 * (--key, else MCPKEEP_KEY) as a virtual key; an empty variable is
 * unset - into out, or NULL when there is none. */
const char *cli_credential(const char *token, const char *key, char *out,
                           size_t len);

/* cli_request sends one request to a daemon (body: JSON text for a
 * POST, or NULL for a GET; headers: NULL-terminated lines, may be NULL)
 * within 10 minutes, its answer capped at 16 MiB: the answer's JSON (or
 * NULL; a failure to reach it said on stderr) and *status (0: none). */
json_t *cli_request(const char *url, const char *body,
                    const char *const *headers, long *status);

/*
 * A command's options, one row each, ended by {CLI_END}: a flag (sets a
 * bool), a text, a whole number 1..INT_MAX (an int) or a log level (an
 * mk_log_level) that takes the next argument, or a positional argument
 * (a text; rows of CLI_ARG take those not starting with '-', in order);
 * the table ends with CLI_OPTS_END.
 * cli_args parses argv by opts: 0; 1 after "--help" (usage printed on
 * stdout); 2 on a bad argument (said on stderr, with usage).
 */
typedef enum cli_kind {
	CLI_END,
	CLI_FLAG,
	CLI_TEXT,
	CLI_NUM,
	CLI_LEVEL,
	CLI_ARG
} cli_kind;
typedef struct cli_opt {
	cli_kind    kind;
	const char *name; /* "--store" (CLI_ARG: what it is, for reading) */
	void       *to;   /* where its value goes (two rows may share it) */
} cli_opt;
#define CLI_OPTS_END                                                          \
	{                                                                     \
		CLI_END, NULL, NULL                                           \
	}
int cli_args(const char *cmd, int argc, char **argv, const cli_opt *opts,
             const char *usage);

/* cli_parse_level reads debug|info|warn|error.  Returns 0 or -1. */
int cli_parse_level(const char *s, mk_log_level *out);

/* cli_positive reads a whole decimal number 1..INT_MAX.  Returns it, or
 * -1 for anything else. */
int cli_positive(const char *s);

/* A live view of a state stream (watch.c): url is http(s)://HOST:PORT
 * (the daemon's /api/events, with auth the header line of its
 * credential, or NULL) or an nng address; the events are printed, one
 * line each, by a thread of its own until cli_watch_stop. */
typedef struct cli_watch cli_watch;
int  cli_watch_start(cli_watch **w, const char *url, const char *auth,
                     int count); /* over HTTP: SIGTERM after count */
void cli_watch_stop(cli_watch **w);

/* The commands; each returns the exit code. */
int cmd_serve(int argc, char **argv);   /* serve.c */
int cmd_clients(int argc, char **argv); /* remote.c */
int cmd_call(int argc, char **argv);    /* remote.c */
int cmd_tools(int argc, char **argv);   /* remote.c */
int cmd_watch(int argc, char **argv);   /* watch.c */
int cmd_connect(int argc, char **argv); /* connect.c */
int cmd_check(int argc, char **argv);   /* check.c */
int cmd_import(int argc, char **argv);  /* check.c */

/* cli_config_warnings logs (WARN) what mk_config_check finds valid but
 * likely wrong in a config text: at boot, as `check` prints it. */
void cli_config_warnings(const char *text);

#endif /* CLI_CLI_H */
