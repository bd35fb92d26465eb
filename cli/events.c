/*
 * events.c - GET /api/events: the runtime's state stream re-served as
 * Server-Sent Events of JSON, for the status page and `mcpkeep watch`
 * (no msgpack decoder runs in a browser).
 *
 * DESIGN: one thread subscribes to the stream (nng sub0 on the
 * runtime's inproc address) and turns each message into one event,
 * appended to every subscriber's buffer; a subscriber's response is
 * libmicrohttpd's content reader, which hands out what is buffered and
 * suspends its connection while nothing is (an event resumes it).  A
 * subscriber that falls SUB_BUF_MAX behind is ended (it reconnects and
 * reads the list again), and a comment every KEEPALIVE_MS keeps proxies
 * from closing an idle one and finds dead ones.  Streams have budgets
 * by who opened them, as requests have lanes, so that no key locks the
 * admin's page out: SUBS_ADMIN_MAX the admin's, SUBS_KEYS_MAX the
 * virtual keys' in all and SUBS_KEY_MAX one key's (503 past them).  A
 * virtual key's subscriber sees its clients' state and tools events
 * only; the store's events and the servers' requests (input: an
 * elicitation's message) go to the admin only.  A reload that rotates
 * the admin token ends the admin's streams; one that drops a key or
 * changes its clients ends that key's (events_revoke).
 *
 * The gateway's streams (GET /mcp, events_open_mcp) live here too: one
 * per downstream session, they carry that session's JSON-RPC messages
 * (events_notify) and none of the state stream's; a change to what the
 * state stream reports tells the gateway to look again (gw_changed).
 *
 * Events:  event: state | tools | store, data: one JSON object
 *   state  client_id, name, state, old_state, last_failure (null or
 *          stage, message, at, since), generation, tools_count, time,
 *          node_id
 *   tools  client_id, name, hash, count
 *   store  healthy, error
 * and a first "event: hello" once the stream is open.
 */
#include <microhttpd.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cli/daemon.h"
#include "cli/gateway/gateway.h"

#define SUBS_ADMIN_MAX 64  /* the admin's streams */
#define SUBS_KEYS_MAX  256 /* the virtual keys' streams, in all */
#define SUBS_KEY_MAX   64  /* one key's */
#define SUB_BUF_MAX    (256 * 1024)
#define KEEPALIVE_MS   15000

struct sub {
	struct MHD_Connection *conn;
	char                  *buf; /* what is not yet handed out */
	size_t                 len, cap;
	bool                   suspended; /* waiting for an event */
	bool                   ended;     /* the reader ends the stream */
	json_t                *clients;   /* a key's grants; NULL: all */
	unsigned char          key[32];   /* the key's digest (clients) */
	char session[GW_SID_LEN + 1]; /* a gateway session's stream, or "" */
	bool keyed;                   /* that session's caller is a key */
	struct sub *next;
};

static struct {
	pthread_mutex_t mtx;
	struct sub     *subs;
	int             n[2]; /* open: the admin's, the keys' */
	nng_socket      sock;
	pthread_t       thr;
	bool            running;
} E = {.mtx = PTHREAD_MUTEX_INITIALIZER};

/* Appends text to s; a subscriber too far behind is ended.  E.mtx. */
static void
push(struct sub *s, const char *text, size_t n)
{
	if (s->ended) {
		return;
	}
	if (s->len + n > SUB_BUF_MAX) {
		s->ended = true;
	} else {
		if (s->len + n > s->cap) {
			size_t cap = s->cap == 0 ? 4096 : s->cap;
			while (cap < s->len + n) {
				cap *= 2;
			}
			char *nb = realloc(s->buf, cap);
			if (nb == NULL) {
				s->ended = true;
				goto wake;
			}
			s->buf = nb;
			s->cap = cap;
		}
		memcpy(s->buf + s->len, text, n);
		s->len += n;
	}
wake:
	if (s->suspended) {
		s->suspended = false;
		MHD_resume_connection(s->conn);
	}
}

static ssize_t
reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct sub *s = cls;
	ssize_t     n;

	pthread_mutex_lock(&E.mtx);
	if (s->len > 0) {
		n = (ssize_t)(s->len < max ? s->len : max);
		memcpy(out, s->buf, (size_t)n);
		memmove(s->buf, s->buf + n, s->len - (size_t)n);
		s->len -= (size_t)n;
	} else if (s->ended) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		/* nothing now: an event resumes it */
		s->suspended = true;
		MHD_suspend_connection(s->conn);
		n = 0;
	}
	pthread_mutex_unlock(&E.mtx);
	return (n);
}

/* The event of a stream message as "event: ...\ndata: {...}\n\n"
 * (malloc'd), its client's name in *name, whether only the admin sees it
 * in *admin_only; NULL when not one. */
static char *
event_text(const void *msg, size_t len, char *name, size_t nlen,
           bool *admin_only)
{
	mk_stream_event *e;
	json_t          *j;
	char            *data, *out = NULL;

	if (mk_stream_event_parse(msg, len, &e) != 0) {
		return (NULL);
	}
	/* a server's request (an elicitation's message) and the store's
	 * health are the admin's */
	*admin_only = strcmp(e->topic, "state") != 0 &&
	        strcmp(e->topic, "tools") != 0 &&
	        strcmp(e->topic, "lists") != 0 && strcmp(e->topic, "pin") != 0;
	if (strcmp(e->topic, "state") == 0) {
		j = json_pack(
		        "{s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:s, s:s, s:s}",
		        "client_id", e->client_id, "name", e->name, "state",
		        e->state, "old_state", e->old_state, "last_failure",
		        e->stage[0] != '\0'
		                ? json_pack("{s:s, s:s, s:s, s:s}", "stage",
		                            e->stage, "message", e->message,
		                            "at", e->at, "since", e->since)
		                : json_null(),
		        "generation", (json_int_t)e->generation, "tools_count",
		        (json_int_t)e->tools_count, "time", e->time, "node_id",
		        e->node_id, "protocol_version", e->protocol_version);
	} else if (strcmp(e->topic, "tools") == 0 ||
	           strcmp(e->topic, "lists") == 0) {
		j = json_pack("{s:s, s:s, s:s, s:I}", "client_id",
		              e->client_id, "name", e->name, "hash", e->hash,
		              "count", (json_int_t)e->count);
		if (j != NULL && e->diff[0] != '\0') { /* (a tools event's) */
			json_object_set_new(j, "diff",
			                    json_loads(e->diff, 0, NULL));
		}
	} else if (strcmp(e->topic, "pin") == 0) {
		j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s}",
		              "client_id", e->client_id, "name", e->name,
		              "state", e->state, "hash", e->hash, "count",
		              (json_int_t)e->count, "message", e->message,
		              "time", e->time, "node_id", e->node_id);
	} else if (strcmp(e->topic, "input") == 0) {
		j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
		              "client_id", e->client_id, "name", e->name,
		              "request_id", e->request_id, "method", e->method,
		              "state", e->state, "message", e->message, "time",
		              e->time, "node_id", e->node_id);
	} else {
		j = json_pack("{s:b, s:s}", "healthy", e->healthy, "error",
		              e->message);
	}
	data = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (data != NULL &&
	    asprintf(&out, "event: %s\ndata: %s\n\n", e->topic, data) < 0) {
		out = NULL;
	}
	free(data);
	snprintf(name, nlen, "%s", e->name);
	mk_stream_event_free(e);
	return (out);
}

static bool
sees(const struct sub *s, const char *client, bool admin_only)
{
	if (s->session[0] != '\0') {
		return (false); /* the gateway's: JSON-RPC only */
	}
	if (s->clients == NULL) {
		return (true);
	}
	if (admin_only || *client == '\0') {
		return (false);
	}
	return (json_object_get(s->clients, client) != NULL ||
	        json_object_get(s->clients, "*") != NULL);
}

static void *
events_main(void *arg)
{
	nng_msg *msg;
	int      rv;

	for (;;) {
		rv = nng_recvmsg(E.sock, &msg, 0);
		if (rv == NNG_ETIMEDOUT) {
			pthread_mutex_lock(&E.mtx);
			for (struct sub *s = E.subs; s != NULL; s = s->next) {
				push(s, ": keepalive\n\n", 13);
			}
			pthread_mutex_unlock(&E.mtx);
			continue;
		}
		if (rv != 0) {
			return (NULL); /* (closed: stopping) */
		}
		char  name[72];
		bool  admin_only = true;
		char *text = event_text(nng_msg_body(msg), nng_msg_len(msg),
		                        name, sizeof(name), &admin_only);
		nng_msg_free(msg);
		if (text == NULL) {
			continue;
		}
		if (!admin_only) {
			gw_changed(); /* a client's state or lists */
		}
		size_t n = strlen(text);
		pthread_mutex_lock(&E.mtx);
		for (struct sub *s = E.subs; s != NULL; s = s->next) {
			if (sees(s, name, admin_only)) {
				push(s, text, n);
			}
		}
		pthread_mutex_unlock(&E.mtx);
		free(text);
	}
}

int
events_start(const char *url)
{
	int rv;

	if ((rv = nng_sub0_open(&E.sock)) != 0 ||
	    (rv = nng_socket_set(E.sock, NNG_OPT_SUB_SUBSCRIBE, "", 0)) != 0 ||
	    (rv = nng_socket_set_ms(E.sock, NNG_OPT_RECVTIMEO,
	                            KEEPALIVE_MS)) != 0 ||
	    (rv = nng_dial(E.sock, url, NULL, 0)) != 0 ||
	    (rv = pthread_create(&E.thr, NULL, events_main, NULL)) != 0) {
		return (rv);
	}
	E.running = true;
	return (0);
}

/* Ends s (its reader sees the end once its buffer is out).  E.mtx. */
static void
end(struct sub *s)
{
	s->ended = true;
	if (s->suspended) {
		s->suspended = false;
		MHD_resume_connection(s->conn);
	}
}

/* Ends every stream (each reader sees the end) and the thread. */
void
events_stop(void)
{
	if (E.running) {
		nng_close(E.sock);
		pthread_join(E.thr, NULL);
		E.running = false;
	}
	pthread_mutex_lock(&E.mtx);
	for (struct sub *s = E.subs; s != NULL; s = s->next) {
		end(s);
	}
	pthread_mutex_unlock(&E.mtx);
}

int
events_revoke(bool admin)
{
	int ended = 0;

	pthread_mutex_lock(&E.mtx);
	for (struct sub *s = E.subs; s != NULL; s = s->next) {
		/* a gateway stream: its key gone or rotated (a change of
		 * its grants is a list change, not an end) */
		bool gone = s->session[0] != '\0'
		        ? (s->keyed ? !auth_keys_holds(s->key) : admin)
		        : s->clients == NULL
		        ? admin
		        : !auth_keys_grants(s->key, s->clients);
		if (!s->ended && gone) {
			end(s);
			ended++;
		}
	}
	pthread_mutex_unlock(&E.mtx);
	return (ended);
}

/* Why r may not open one more stream (its budget is spent), or NULL;
 * why is its buffer.  E.mtx. */
static const char *
over_budget(const req *r, char *why, size_t len)
{
	int mine = 0;

	if (r->key == NULL) {
		if (E.n[0] < SUBS_ADMIN_MAX) {
			return (NULL);
		}
		snprintf(why, len,
		         "too many event streams are open for the admin (%d)",
		         SUBS_ADMIN_MAX);
		return (why);
	}
	for (struct sub *s = E.subs; s != NULL; s = s->next) {
		mine += s->clients != NULL &&
		        memcmp(s->key, r->key->hash, sizeof(s->key)) == 0;
	}
	if (mine >= SUBS_KEY_MAX) {
		snprintf(
		        why, len,
		        "too many event streams are open for virtual key \"%.64s\" (%d)",
		        r->key->name, SUBS_KEY_MAX);
		return (why);
	}
	if (E.n[1] >= SUBS_KEYS_MAX) {
		snprintf(
		        why, len,
		        "too many event streams are open for virtual keys (%d)",
		        SUBS_KEYS_MAX);
		return (why);
	}
	return (NULL);
}

/* The stream's response: SSE, from the reader above. */
static void
stream_answer(req *r, struct sub *s)
{
	struct MHD_Response *res;

	r->sub = s;
	http_answered(r); /* (a stream: not in the works) */
	res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader,
	                                        s, NULL);
	if (res != NULL) { /* (else closed: on_done frees s) */
		MHD_add_response_header(res, "Content-Type",
		                        "text/event-stream");
		MHD_add_response_header(res, "Cache-Control", "no-store");
		MHD_add_response_header(res, "X-Content-Type-Options",
		                        "nosniff");
		MHD_add_response_header(res, "X-Accel-Buffering", "no");
		(void)MHD_queue_response(r->conn, 200, res);
		MHD_destroy_response(res);
	}
	if (r->suspended) { /* (a worker's: a POST's listen) */
		MHD_resume_connection(r->conn);
	}
}

void
events_open(req *r, const char *id, json_t *body)
{
	struct sub       *s       = calloc(1, sizeof(*s));
	static const char hello[] = "event: hello\ndata: {}\n\n";
	char              why[160];
	const char       *full;

	pthread_mutex_lock(&E.mtx);
	full = !E.running ? "the daemon is stopping"
	                  : over_budget(r, why, sizeof(why));
	if (full == NULL && s != NULL) {
		E.n[r->key != NULL]++;
		s->conn = r->conn;
		if (r->key != NULL) {
			/* (never NULL: that would be the admin's) */
			s->clients = json_deep_copy(r->key->clients);
			s->clients = s->clients != NULL ? s->clients
			                                : json_object();
			memcpy(s->key, r->key->hash, sizeof(s->key));
		}
		s->next = E.subs;
		E.subs  = s;
		push(s, hello, sizeof(hello) - 1);
	}
	pthread_mutex_unlock(&E.mtx);
	if (full != NULL || s == NULL) {
		free(s);
		answer_error(r, 503, full != NULL ? full : "out of memory");
		return;
	}
	mk_log(MK_LOG_DEBUG, "http", "%s %s 200 (event stream)", r->method,
	       r->path);
	stream_answer(r, s);
}

void
events_close(req *r)
{
	struct sub *s = r->sub, **pp;

	if (s == NULL) {
		return;
	}
	r->sub = NULL;
	pthread_mutex_lock(&E.mtx);
	for (pp = &E.subs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			if (s->session[0] == '\0') {
				E.n[s->clients != NULL]--;
			}
			break;
		}
	}
	pthread_mutex_unlock(&E.mtx);
	if (s->session[0] != '\0') {
		gw_session_stream(s->session, false);
		gw_stream_gone(s->session);
	}
	json_decref(s->clients);
	free(s->buf);
	free(s);
}

/* ---- the gateway's streams ---------------------------------------------- */

int
events_open_mcp(req *r, const char *session)
{
	struct sub *s = calloc(1, sizeof(*s));

	pthread_mutex_lock(&E.mtx);
	bool stopping = !E.running;
	if (!stopping && s != NULL) {
		s->conn = r->conn;
		snprintf(s->session, sizeof(s->session), "%s", session);
		if ((s->keyed = r->key != NULL)) {
			memcpy(s->key, r->key->hash, sizeof(s->key));
		}
		s->next = E.subs;
		E.subs  = s;
		/* (a comment: the headers go out now) */
		push(s, ": open\n\n", 9);
	}
	pthread_mutex_unlock(&E.mtx);
	if (stopping || s == NULL) {
		free(s);
		answer_rpc_error(r, 503, NULL, -32000,
		                 stopping ? "the daemon is stopping"
		                          : "out of memory");
		return (-1);
	}
	stream_answer(r, s);
	return (0);
}

void
events_end_mcp(const char *session)
{
	pthread_mutex_lock(&E.mtx);
	for (struct sub *s = E.subs; s != NULL; s = s->next) {
		if (strcmp(s->session, session) == 0) {
			end(s);
		}
	}
	pthread_mutex_unlock(&E.mtx);
}

int
events_notify(const char *session, const char *json)
{
	char *text = NULL;
	int   n    = 0;

	if (asprintf(&text, "event: message\ndata: %s\n\n", json) < 0) {
		return (0);
	}
	pthread_mutex_lock(&E.mtx);
	for (struct sub *s = E.subs; s != NULL; s = s->next) {
		if (strcmp(s->session, session) == 0 && !s->ended) {
			push(s, text, strlen(text));
			n++;
		}
	}
	pthread_mutex_unlock(&E.mtx);
	free(text);
	return (n);
}
