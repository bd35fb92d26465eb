/*
 * stdio_count.c - a minimal stdio MCP server that counts its starts, for
 * booting hundreds of servers where hundreds of Node processes would not
 * fit this machine (a stand-in: the real stdio servers are test/peers'):
 * it appends "+" to the file argv[1] when it starts and "-" as it
 * answers its first tools/list (its connect is done), each one write to
 * a file opened O_APPEND, so the file is the order of starts and ends.
 * Answers initialize, tools/list (one tool, "noop"), tools/call and ping;
 * exits at the end of stdin.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int mark_fd = -1;

static void
mark(const char *what)
{
	if (write(mark_fd, what, strlen(what)) < 0) {
		exit(2);
	}
}

static void
answer(json_t *id, json_t *result)
{
	json_t *m    = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	                         "result", result);
	char   *text = json_dumps(m, JSON_COMPACT);

	printf("%s\n", text);
	fflush(stdout);
	free(text);
	json_decref(m);
}

int
main(int argc, char **argv)
{
	char    line[65536];
	bool    listed = false;
	json_t *req, *id;

	if (argc != 2 ||
	    (mark_fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0600)) <
	            0) {
		fprintf(stderr, "usage: stdio_count MARK_FILE\n");
		return (2);
	}
	mark("+");
	while (fgets(line, sizeof(line), stdin) != NULL) {
		const char *method;

		if ((req = json_loads(line, 0, NULL)) == NULL) {
			continue;
		}
		method = json_string_value(json_object_get(req, "method"));
		id     = json_object_get(req, "id");
		if (id == NULL || method == NULL) {
			json_decref(req); /* a notification, or an answer */
			continue;
		}
		if (strcmp(method, "initialize") == 0) {
			answer(id,
			       json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}",
			                 "protocolVersion", "2025-11-25",
			                 "capabilities", "tools", "serverInfo",
			                 "name", "stdio_count", "version",
			                 "1"));
		} else if (strcmp(method, "tools/list") == 0) {
			/* marked before the answer: once the client reads it,
			 * it may start the next server, whose "+" must come
			 * after this "-" (marked after, a descheduled server
			 * made a 4th start look under way with 3 allowed) */
			if (!listed) {
				listed = true;
				mark("-");
			}
			answer(id,
			       json_pack("{s:[{s:s, s:{s:s}}]}", "tools",
			                 "name", "noop", "inputSchema", "type",
			                 "object"));
		} else if (strcmp(method, "tools/call") == 0) {
			answer(id,
			       json_pack("{s:[{s:s, s:s}]}", "content", "type",
			                 "text", "text", "ok"));
		} else if (strcmp(method, "ping") == 0) {
			answer(id, json_object());
		} else {
			json_t *m    = json_pack("{s:s, s:O, s:{s:i, s:s}}",
			                         "jsonrpc", "2.0", "id", id,
			                         "error", "code", -32601,
			                         "message", "Method not found");
			char   *text = json_dumps(m, JSON_COMPACT);
			printf("%s\n", text);
			fflush(stdout);
			free(text);
			json_decref(m);
		}
		json_decref(req);
	}
	return (0);
}
