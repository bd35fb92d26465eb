/*
 * tputil.h - the transport tests' client: a session on its own loop, run
 * until a callback sets a flag (bounded by TP_WAIT_MS), and one request's
 * outcome.  Shared by transport_test (per transport) and stream_test
 * (Streamable HTTP's resumable streams, the standalone GET stream and the
 * server's requests).
 */
#ifndef TEST_TPUTIL_H
#define TEST_TPUTIL_H

#include "transport/mcp.h"

#define TP_WAIT_MS 30000

typedef struct client {
	tp_loop     *l;        /* the loop */
	mcp_session *s;        /* the session */
	int          ready;    /* ready() ran */
	mcp_error    err;      /* its error, if any */
	int          failed;   /* ready() reported an error */
	int          lost;     /* MCP_EV_LOST seen */
	mcp_error    lost_err; /* why */
	int          changed;  /* MCP_EV_TOOLS_CHANGED seen */
	int          logs;     /* the server's log messages seen */
	char         log[160]; /* the last: "level logger: text" */
} client;

/* One request's outcome. */
typedef struct outcome {
	int       done;       /* the callback ran */
	mcp_error err;        /* its error */
	int       failed;     /* err is set */
	json_t   *result;     /* its result (a reference) */
	int       progress;   /* progress notifications seen */
	char      expect[32]; /* for the concurrency test */
	int       matched;    /* result text equals "Echo: " expect */
} outcome;

/* mcp_result_fn and mcp_progress_fn filling an outcome (arg). */
void on_result(void *arg, const mcp_error *err, json_t *result);
void on_progress(void *arg, double progress, double total, const char *msg);

/* Opens a session; returns 0 when READY, else the error kind. */
int open_client(client *c, const mcp_config *cfg);

/* Frees the session, lets its graceful close run a little, frees the
 * loop. */
void close_client(client *c);

/* Calls a tool (args taken) and waits for the answer. */
void call(client *c, const char *tool, json_t *args, int timeout_ms,
          outcome *o);

/* Drops the result's reference. */
void outcome_fini(outcome *o);

/* The text of a CallToolResult's first content item, or NULL. */
const char *first_text(json_t *result);

#endif /* TEST_TPUTIL_H */
