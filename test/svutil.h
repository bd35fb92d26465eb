/*
 * svutil.h - helpers of the daemon's tests (svutil.c): the daemon is the
 * built program (MK_MCPKEEP), started on a config written to sv_dir.
 */
#ifndef TEST_SVUTIL_H
#define TEST_SVUTIL_H

#include <stdbool.h>

#include "peer.h"

#define WAIT_MS 40000

extern char        sv_dir[];      /* configs (mkdtemp'd by main) */
extern char        sv_base[];     /* http://127.0.0.1:port of the daemon */
extern const char *sv_admin;      /* the token requests without one carry */
extern long        sv_timeout_ms; /* each request's deadline (30 s; set it
                                   * before starting threads that use it) */

/* A request with headers ("Name: value", NULL-terminated; a state
 * change gets Content-Type: application/json unless one is given); the
 * answer's body (malloc'd) and *status, or NULL when none came. */
char *http_req(const char *method, const char *path, const char *body,
               const char *const *headers, long *status);

/* http_req with the token (else sv_admin) as the bearer. */
char *http_try(const char *method, const char *path, const char *body,
               const char *token, long *status);

/* http_try that must be answered. */
char *http(const char *method, const char *path, const char *body,
           const char *token, long *status);

/* The request answers want_status, and its body contains want. */
void expect(const char *method, const char *path, const char *body,
            const char *token, long want_status, const char *want);

/* The value of one series in /metrics text, or -1 when absent. */
double metric(const char *text, const char *series);

/* Reads /metrics until series is within [lo, hi] (true), or WAIT_MS. */
bool metric_within(const char *series, double lo, double hi);

/* Writes config text to sv_dir/name. */
void write_config(const char *name, const char *text);

/* Starts the daemon on config (written to sv_dir/name) with env extra
 * and one option (opt, value; or NULL), waiting up to banner_ms for the
 * line that says it listens; sets sv_base. */
void serve_start(peer *d, const char *name, const char *config,
                 const char *const *env, const char *opt, const char *value,
                 int banner_ms);

/* serve_start of a config written already, leaving sv_base alone (the
 * port is d->port): any thread may start its own daemon. */
void serve_spawn(peer *d, const char *name, const char *const *env,
                 const char *opt, const char *value, int banner_ms);

/* Waits up to ms for /readyz to answer 200 (true). */
bool ready_within(int ms);

/* Waits up to ms for the daemon's list to show client name in state
 * (true); polled like ready_within. */
bool state_within(const char *name, const char *state, int ms);

/* serve_start, then waits for the boot's end (/readyz 200). */
void serve_opt(peer *d, const char *name, const char *config,
               const char *const *env, const char *opt, const char *value);
void serve(peer *d, const char *name, const char *config,
           const char *const *env);

/* Whether the client list (first page of 100, sv_admin's) names client;
 * the list must answer 200. */
bool listed(const char *client);

/* A raw connection to the daemon that sent text (a whole request) and
 * waits for what comes back; -1 when it could not connect. */
int sv_raw(const char *text);

/* GET /api/events with one header ("Name: value", or NULL) and
 * Connection: close: the connection, once its status line came; *status
 * gets the status (200: the stream is open, its hello read); *head (may
 * be NULL) what was read (malloc'd; a refusal's whole answer). */
int sv_events(const char *header, long *status, char **head);

/* Reads fd (up to ms) until what came (true) or it closed or the time
 * passed (false); *seen (may be NULL) gets everything read (malloc'd). */
bool sv_until(int fd, const char *what, int ms, char **seen);

/* Reads fd (up to ms) until it closed: true when it did. */
bool sv_closed(int fd, int ms);

/* A suite's start (SIGPIPE ignored, no inherited admin token, curl, a
 * fresh sv_dir, inject.mjs started in mcp) and its end. */
void sv_begin(peer *mcp);
void sv_end(peer *mcp);

/* sv_cli runs `env mcpkeep args --url <the daemon>` (a shell command
 * line; env: assignments, or ""): its exit status, its output kept;
 * sv_cli_said: whether that output holds text (else it is shown). */
int  sv_cli(const char *env, const char *args);
bool sv_cli_said(const char *text);

#endif /* TEST_SVUTIL_H */
