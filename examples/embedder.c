/*
 * embedder.c - a complete embedder of libmcpkeep: opens a runtime,
 * subscribes to its state stream, adds an MCP server, waits (with a
 * deadline) until the stream says it is healthy, calls one of its tools,
 * tells a caller who must authorize first where to (MK_EAUTH), and
 * closes.  Built against an installed copy with pkg-config alone:
 *
 *     cc embedder.c $(pkg-config --cflags --libs mcpkeep) -o embedder
 *
 * usage: embedder CLIENT_CONFIG TOOL [ARGUMENTS] [USER [HEADERS]]
 *   CLIENT_CONFIG  one client's config as JSON (an entry of
 *                  mcp.client_configs)
 *   ARGUMENTS      the tool's arguments as a JSON object (default {})
 *   USER           the caller, for a client with per-user credentials
 *   HEADERS        per_user_headers: the admin's own values, as a JSON
 *                  object, that verify the server before anyone calls
 *                  (its state pending_verification until then)
 * Exit codes: 0 the tool ran (its result printed), 1 a failure, 2 usage,
 * 3 the caller must authorize first (where printed).
 */
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <mcpkeep.h>

#define HEALTHY_WAIT_MS 30000

/* Waits on the subscribed stream for client name's state want (true),
 * or until the deadline; prints each of its transitions. */
static int
wait_state(nng_socket sub, const char *name, const char *want)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		nng_msg         *msg;
		mk_stream_event *ev;
		long             ms;
		int              rv, done;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (now.tv_sec - t0.tv_sec) * 1000 +
		        (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= HEALTHY_WAIT_MS) {
			return (0);
		}
		nng_socket_set_ms(sub, NNG_OPT_RECVTIMEO,
		                  (nng_duration)(HEALTHY_WAIT_MS - ms));
		if (nng_recvmsg(sub, &msg, 0) != 0) {
			return (0); /* (the deadline passed) */
		}
		rv = mk_stream_event_parse(nng_msg_body(msg), nng_msg_len(msg),
		                           &ev);
		nng_msg_free(msg);
		if (rv != MK_OK) {
			continue;
		}
		done = 0;
		if (strcmp(ev->topic, "state") == 0 &&
		    strcmp(ev->name, name) == 0) {
			printf("%s: %s -> %s%s%s\n", ev->name,
			       ev->old_state[0] != '\0' ? ev->old_state
			                                : "(new)",
			       ev->state, ev->message[0] != '\0' ? ": " : "",
			       ev->message);
			done = strcmp(ev->state, want) == 0;
		}
		mk_stream_event_free(ev);
		if (done) {
			return (1);
		}
	}
}

/* The client's name in its config (the stream names it so). */
static void
name_of(const char *config, char *out, size_t len)
{
	const char *n = strstr(config, "\"name\"");
	const char *q = n != NULL ? strchr(n + 6, '"') : NULL;
	const char *e = q != NULL ? strchr(q + 1, '"') : NULL;

	snprintf(out, len, "%.*s", e != NULL ? (int)(e - q - 1) : 0,
	         e != NULL ? q + 1 : "");
}

int
main(int argc, char **argv)
{
	mk_runtime *rt = NULL;
	mk_options  o;
	mk_result  *res = NULL;
	nng_socket  sub;
	char       *id = NULL, *err = NULL, name[72];
	int         rv, code        = 1;

	if (argc < 3 || argc > 6) {
		fprintf(stderr,
		        "usage: embedder CLIENT_CONFIG TOOL "
		        "[ARGUMENTS] [USER [HEADERS]]\n");
		return (2);
	}
	name_of(argv[1], name, sizeof(name));
	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_WARN;
	o.stream_url = "inproc://embedder";
	if ((rv = mk_runtime_open(&rt, &o)) != MK_OK) {
		fprintf(stderr, "open: %s\n", mk_strerror(rv));
		return (1);
	}
	/* subscribed before the client is added: nothing is missed */
	if ((rv = nng_sub0_open(&sub)) != 0 ||
	    (rv = nng_socket_set(sub, NNG_OPT_SUB_SUBSCRIBE, "", 0)) != 0 ||
	    (rv = nng_dial(sub, mk_stream_url(rt), NULL, 0)) != 0) {
		fprintf(stderr, "stream: %s\n", nng_strerror(rv));
		mk_runtime_close(&rt);
		return (1);
	}
	if ((rv = mk_client_add(rt, argv[1], &id, &err)) != MK_OK) {
		fprintf(stderr, "add: %s\n",
		        err != NULL ? err : mk_strerror(rv));
		goto out;
	}
	printf("added %s (client_id %s)\n", name, id);
	if (argc > 5 &&
	    ((rv = mk_client_verify_headers(rt, name, argv[5], &err)) !=
	     MK_OK)) {
		fprintf(stderr, "verify: %s\n",
		        err != NULL ? err : mk_strerror(rv));
		goto out;
	}
	if (!wait_state(sub, name, "healthy")) {
		fprintf(stderr, "%s did not become healthy within %d ms\n",
		        name, HEALTHY_WAIT_MS);
		goto out;
	}
	mk_call call = {.size      = sizeof(mk_call),
	                .client    = name,
	                .tool      = argv[2],
	                .arguments = argc > 3 ? argv[3] : NULL,
	                .user_id   = argc > 4 ? argv[4] : NULL};
	rv           = mk_tool_call(rt, &call, &res);
	if (rv == MK_OK) {
		printf("result: %s\n", res->result);
		code = 0;
	} else if (rv == MK_EAUTH && res != NULL &&
	           res->auth_required != NULL) {
		/* the caller signs in (or gives its header values) there,
		 * then calls again */
		printf("authorize first: %s\n", res->auth_required);
		code = 3;
	} else {
		fprintf(stderr, "call: %s\n",
		        res != NULL && res->error != NULL ? res->error
		                                          : mk_strerror(rv));
	}
out:
	mk_result_free(&res);
	mk_free(err);
	mk_free(id);
	nng_close(sub);
	mk_runtime_close(&rt);
	return (code);
}
