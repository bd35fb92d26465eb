/*
 * rtutil.h - what the tests of the runtime through its public API share:
 * a state-stream subscriber that collects events and waits for one (a
 * condition, with a deadline), runtime open/close around it, the list
 * view of one client, and small calls into the inject server and the
 * persister.  A failed wait or check exits the test (testutil.h).
 */
#ifndef TEST_RTUTIL_H
#define TEST_RTUTIL_H

#include <jansson.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdint.h>

#include "mcpkeep.h"

#define WAIT_MS 40000 /* every wait's deadline */
#define MAXEV   4096  /* events a subscriber keeps */

/* An event as the subscriber keeps it: its strings live until
 * sub_close. */
typedef mk_stream_event event;

/* The state stream, collected by a thread. */
typedef struct sub {
	nng_socket      s;   /* sub0, subscribed to everything */
	pthread_t       thr; /* the collecting thread */
	pthread_mutex_t mtx; /* guards ev and n */
	pthread_cond_t  cv;  /* signalled per event */
	event          *ev;  /* MAXEV, on the heap */
	event         **own; /* each the library's, freed at sub_close */
	int             n;   /* events in ev */
} sub;

void sub_open(sub *sb, const char *url);
void sub_close(sub *sb);
/* How many events sb holds now: where a wait_event from here starts. */
int sub_at(sub *sb);

/* Waits for an event after index *from that match(event, arg) accepts;
 * returns it and moves *from past it.  what names it when time runs out
 * (the test then exits, listing what it saw). */
typedef int (*event_match)(const event *e, const void *arg);
event wait_event(sub *sb, int *from, event_match match, const void *arg,
                 const char *what);

/* Waits for a "state" event of client name into state (any when NULL;
 * and stage when not NULL) after index *from; returns it and moves *from past
 * it. */
event wait_state(sub *sb, int *from, const char *name, const char *state,
                 const char *stage);

/* Waits for a "store" event with healthy as given. */
event wait_store(sub *sb, int *from, int healthy);

/* Events of topic so far. */
int count_topic(sub *sb, const char *topic);

/* "state" events of name into state so far. */
int count_states(sub *sb, const char *name, const char *state);

/* A runtime on its own stream address (store file path, or NULL), with
 * unstable checks every second, and sb subscribed to it. */
mk_runtime *rt_open_store(sub *sb, const char *path);
/* The same in two steps: the options (its own stream address until the
 * next call), to change before opening them. */
void        rt_options(mk_options *o, const char *path);
mk_runtime *rt_open_options(sub *sb, const mk_options *o);
mk_runtime *rt_open(sub *sb);
void        rt_close(mk_runtime **rt, sub *sb);

/* The client's entry in the list view (new reference); view_find gives
 * NULL when there is none, view_of exits the test. */
json_t     *view_find(mk_runtime *rt, const char *name);
json_t     *view_of(mk_runtime *rt, const char *name);
const char *vstr(json_t *v, const char *key);

/* mk_client_add with a printf-formatted config. */
int add(mk_runtime *rt, char **err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* A tool call's result (or error) text, malloc'd; *rc its status. */
char *call_text(mk_runtime *rt, const char *client, const char *tool,
                const char *args, int *rc);
/* ask_text is call_text of any kind (mk_call_run): a prompt's, a
 * resource's. */
char *ask_text(mk_runtime *rt, mk_call_kind kind, const char *client,
               const char *what, const char *args, int *rc);

/* Runs one health check of client name now (MSG_CL_CHECK), waiting for
 * its end. */
void check_client(mk_runtime *rt, const char *name);

/* GET (or POST body to) a test server's path: its JSON answer (new
 * reference, or NULL when not JSON). */
json_t *admin_json(int port, const char *path, const char *body);

/* The same; field of its JSON answer ("a.b": b of the object a), or
 * -1. */
long admin(int port, const char *path, const char *body, const char *field);

/* Waits (10 s at most) until a counter of the inject server reaches min.
 * The server is another process with no event to wait on: its counter
 * is polled, with a deadline. */
void wait_counter(int port, const char *field, long min);

/* One top-level counter of the client's mk_client_metrics_json. */
long client_metric(mk_runtime *rt, const char *client, const char *key);

/* A counter of the persister's MSG_PS_STATS. */
int64_t ps_stat(mk_runtime *rt, const char *key);

#endif /* TEST_RTUTIL_H */
