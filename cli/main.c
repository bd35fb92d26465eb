/*
 * main.c - the mcpkeep program.
 *
 * Uses include/mcpkeep.h only.  Exit codes: 0 success, 1 runtime failure,
 * 2 usage error.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

static const char usage[] =
        "usage: mcpkeep <command> [options]\n"
        "\n"
        "commands:\n"
        "  run      boot the runtime, show its actors and counters, stop\n"
        "  version  print the version\n"
        "\n"
        "run options:\n"
        "  --hold          keep running until SIGINT or SIGTERM\n"
        "  --log LEVEL     debug | info | warn | error (default info;\n"
        "                  MCPKEEP_LOG overrides)\n"
        "  --json          log as JSON lines\n"
        "\n"
        "exit codes: 0 success, 1 runtime failure, 2 usage error\n";

static int
parse_level(const char *s, mk_log_level *out)
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

static void
print_stats(const mk_stats *st)
{
	printf("  actors running     %llu\n"
	       "  messages handled   %llu\n"
	       "  asks sent          %llu\n"
	       "  late replies       %llu\n"
	       "  expired asks       %llu\n"
	       "  handler errors     %llu\n",
	       (unsigned long long)st->actors,
	       (unsigned long long)st->messages, (unsigned long long)st->asks,
	       (unsigned long long)st->late_replies,
	       (unsigned long long)st->expired,
	       (unsigned long long)st->handler_errors);
}

static int
cmd_run(int argc, char **argv)
{
	mk_options  opts;
	mk_runtime *rt = NULL;
	mk_stats    st;
	sigset_t    set;
	int         hold = 0;
	int         rv;

	mk_options_init(&opts);
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--hold") == 0) {
			hold = 1;
		} else if (strcmp(argv[i], "--json") == 0) {
			opts.log_json = 1;
		} else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc &&
		           parse_level(argv[i + 1], &opts.log_level) == 0) {
			i++;
		} else if (strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return (0);
		} else {
			fprintf(stderr, "mcpkeep run: bad option '%s'\n%s",
			        argv[i], usage);
			return (2);
		}
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (hold) {
		/* Before any thread exists, so every thread inherits it and
		 * only sigwait below takes the signals. */
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	if ((rv = mk_runtime_open(&rt, &opts)) != 0) {
		fprintf(stderr, "mcpkeep: cannot start the runtime: %s\n",
		        mk_strerror(rv));
		return (1);
	}
	if ((rv = mk_runtime_stats(rt, &st, 0)) != 0) {
		fprintf(stderr, "mcpkeep: supervisor did not answer: %s\n",
		        mk_strerror(rv));
		mk_runtime_close(&rt);
		return (1);
	}
	printf("mcpkeep %s: runtime up\n", MCPKEEP_VERSION);
	print_stats(&st);
	fflush(stdout);
	if (hold) {
		int sig;

		printf("holding; Ctrl-C to stop\n");
		fflush(stdout);
		sigwait(&set, &sig);
	}
	mk_runtime_close(&rt);
	printf("mcpkeep: runtime closed\n");
	return (0);
}

int
main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return (argc < 2 ? 2 : 0);
	}
	if (strcmp(argv[1], "version") == 0) {
		printf("mcpkeep %s\n", MCPKEEP_VERSION);
		return (0);
	}
	if (strcmp(argv[1], "run") == 0) {
		return (cmd_run(argc - 2, argv + 2));
	}
	fprintf(stderr, "mcpkeep: unknown command '%s'\n%s", argv[1], usage);
	return (2);
}
