/*
 * main.c - the mcpkeep program.
 *
 * Uses include/mcpkeep.h (and nng to read the state stream, as any
 * embedder would: watch.c).  Exit codes: 0 success, 1 runtime failure,
 * 2 usage error.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "mcpkeep.h"

static const char usage[] =
        "usage: mcpkeep <command> [options]\n"
        "\n"
        "commands:\n"
        "  run      boot the runtime (with -c: the config's clients) and "
        "show\n"
        "           every state transition live, until SIGINT/SIGTERM\n"
        "  serve    the daemon: the admin HTTP API (mcpkeep serve --help)\n"
        "  watch [ADDR]  a daemon's state transitions, live (its\n"
        "           server.stream; default tcp://127.0.0.1:5560)\n"
        "  clients  a daemon's clients as a table (--help)\n"
        "  call CLIENT TOOL [JSON]  a tool call through a daemon (--help)\n"
        "  tools [CLIENT]  each client's tools, allowed or not (--help)\n"
        "  connect URL  a stdio MCP server relaying to a daemon's /mcp\n"
        "           (--help)\n"
        "  check -c FILE  validate a config.json, starting nothing: its\n"
        "           errors and warnings, each with its path (--help)\n"
        "  import [FILE]  print a desktop client's mcpServers config as a\n"
        "           mcpkeep config.json (--help)\n"
        "  version  print the version (--version too)\n"
        "\n"
        "run options:\n"
        "  -c FILE         config.json with mcp.client_configs\n"
        "  --once          exit after the clients' first connects\n"
        "  --store FILE    keep clients, tools and credentials in this\n"
        "                  SQLite file, restored at the next start\n"
        "                  (default: the config's store.path; secrets are\n"
        "                  sealed with MCPKEEP_ENCRYPTION_KEY when set)\n"
        "  --log LEVEL     debug | info | warn | error (default warn;\n"
        "                  MCPKEEP_LOG overrides)\n"
        "  --json          log as JSON lines\n"
        "\n"
        "exit codes: 0 success, 1 runtime failure, 2 usage error\n";

int
cli_store(mk_options *o, const char *flag, const char *text, char **own,
          char **err)
{
	int rv;

	*own = NULL;
	if (flag != NULL) {
		if (strncmp(flag, "postgresql://", 13) == 0 ||
		    strncmp(flag, "postgres://", 11) == 0) {
			o->store_url = flag;
		} else {
			o->store_path = flag;
		}
		return (0);
	}
	if (text == NULL ||
	    (rv = mk_config_get(text, "store.url", own, err)) != 0) {
		return (text == NULL ? 0 : rv);
	}
	if (*own != NULL) {
		o->store_url = *own;
		return (0);
	}
	rv            = mk_config_get(text, "store.path", own, err);
	o->store_path = *own;
	return (rv);
}

char *
cli_read_file(const char *path, char *err, size_t errlen)
{
	FILE  *f   = fopen(path, "rb");
	char  *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		         strerror(errno));
		return (NULL);
	}
	do {
		if (len + 4096 + 1 > cap) {
			char *nb;
			cap = (len + 4096 + 1) * 2;
			if (cap > 8u << 20 ||
			    (nb = realloc(buf, cap)) == NULL) {
				snprintf(err, errlen, "%s is too large", path);
				free(buf);
				fclose(f);
				return (NULL);
			}
			buf = nb;
		}
		n = fread(buf + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return (buf);
}

static void
print_clients(mk_runtime *rt)
{
	char *json = NULL;

	if (mk_clients_json(rt, "{\"limit\": 100}", &json) == 0) {
		printf("clients: %s\n", json);
	}
	mk_free(json);
}

static int
cmd_run(int argc, char **argv)
{
	mk_options  opts;
	mk_runtime *rt     = NULL;
	const char *config = NULL;
	char       *text = NULL, *err = NULL, *store = NULL, ferr[256];
	const char *flag = NULL;
	sigset_t    set;
	cli_watch  *w    = NULL;
	bool        once = false, json = false;
	int         rv, sig;
	cli_opt     opt[] = {
	            {CLI_TEXT, "-c", &config},
	            {CLI_TEXT, "--store", &flag},
	            {CLI_LEVEL, "--log", &opts.log_level},
	            {CLI_FLAG, "--once", &once},
	            {CLI_FLAG, "--json", &json},
	            CLI_OPTS_END,
        };

	mk_options_init(&opts, sizeof(opts));
	opts.log_level      = MK_LOG_WARN;
	opts.raise_fd_limit = 1; /* every connected client holds fds */
	if ((rv = cli_args("run", argc, argv, opt, usage)) != 0) {
		return (rv == 1 ? 0 : rv);
	}
	opts.log_json = json;
	if (config != NULL &&
	    (text = cli_read_file(config, ferr, sizeof(ferr))) == NULL) {
		fprintf(stderr, "mcpkeep: %s\n", ferr);
		return (1);
	}
	if ((rv = cli_store(&opts, flag, text, &store, &err)) != 0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", config,
		        err ? err : mk_strerror(rv));
		mk_free(err);
		free(text);
		return (1);
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	/* before any thread exists: only sigwait below takes them */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((rv = mk_runtime_open(&rt, &opts)) != 0) {
		fprintf(stderr, "mcpkeep: cannot start the runtime: %s\n",
		        mk_strerror(rv));
		free(text);
		mk_free(store);
		return (1);
	}
	if (cli_watch_start(&w, mk_stream_url(rt), NULL, 0) != 0) {
		mk_runtime_close(&rt);
		free(text);
		mk_free(store);
		return (1);
	}
	if (text != NULL) {
		cli_config_warnings(text);
	}
	printf("mcpkeep %s: runtime up; state stream %s\n", MCPKEEP_VERSION,
	       mk_stream_url(rt));
	fflush(stdout);
	if (text != NULL && (rv = mk_runtime_load(rt, text, &err)) != 0) {
		fprintf(stderr, "mcpkeep: %s: %s\n", config,
		        err ? err : mk_strerror(rv));
		mk_free(err);
		free(text);
		cli_watch_stop(&w);
		mk_runtime_close(&rt);
		mk_free(store);
		return (1);
	}
	free(text);
	if (once) {
		print_clients(rt);
	} else {
		printf("watching; Ctrl-C to stop\n");
		fflush(stdout);
		sigwait(&set, &sig);
	}
	cli_watch_stop(&w);
	mk_runtime_close(&rt);
	mk_free(store);
	printf("mcpkeep: runtime closed\n");
	return (0);
}

/* The commands, by name. */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
        {"run", cmd_run},       {"serve", cmd_serve},
        {"watch", cmd_watch},   {"clients", cmd_clients},
        {"call", cmd_call},     {"connect", cmd_connect},
        {"tools", cmd_tools},   {"check", cmd_check},
        {"import", cmd_import},
};

int
main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return (argc < 2 ? 2 : 0);
	}
	if (strcmp(argv[1], "version") == 0 ||
	    strcmp(argv[1], "--version") == 0) {
		printf("mcpkeep %s\n", MCPKEEP_VERSION);
		return (0);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0) {
			return (commands[i].run(argc - 2, argv + 2));
		}
	}
	fprintf(stderr, "mcpkeep: unknown command '%s'\n%s", argv[1], usage);
	return (2);
}
