/*
 * changes.c - list changes: every downstream session with its GET stream
 * open hears notifications/tools/list_changed (prompts/, resources/)
 * within a second of a change to what it sees, and only then.
 *
 * DESIGN: anything that may change a session's view - a client's state
 * or tools (the state stream, events.c), the keys (a reload) - calls
 * gw_changed, which only sets a flag.  One watcher thread waits for it,
 * lets GW_COALESCE_MS of further changes gather, then reads the client
 * views once and, for each streaming session, each list its caller sees
 * now: its digest is compared with the one the session saw last (its
 * list request, or the watcher's previous look), and a session whose
 * list really changed gets one notification for it.  A burst of changes is one
 * look; a change that leaves a session's view as it was (another key's client,
 * a reconnect) tells it nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "cli/gateway/gateway.h"

/* The notification of each list (templates are the resources'). */
static const char *const notice[GW_KINDS] = {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/list_changed",
};

static struct {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	bool            dirty;   /* something may have changed */
	bool            stop;    /* gw_stop */
	bool            running; /* the thread is */
	pthread_t       thr;
} W = {.mtx = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

void
gw_changed(void)
{
	pthread_mutex_lock(&W.mtx);
	W.dirty = true;
	pthread_cond_signal(&W.cv);
	pthread_mutex_unlock(&W.mtx);
}

/* Tells session w that list k changed. */
static void
tell(const gw_watched *w, gw_kind k)
{
	char msg[320];

	if (w->listen) {
		/* 2026-07-28: the notification names its listen */
		snprintf(
		        msg, sizeof(msg),
		        "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":{\"_meta\":{\"" GW_META_SUB
		        "\":%s}}}",
		        notice[k], w->sub);
	} else {
		snprintf(msg, sizeof(msg),
		         "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}", notice[k]);
	}
	(void)events_notify(w->id, msg);
}

/* Whether list k that session w sees changed since its last look. */
static bool
changed(const gw_watched *w, const json_t *all, const json_t *grants,
        const json_t *group, gw_kind k)
{
	json_t       *items = gw_items(all, k, grants, group);
	unsigned char digest[32];

	gw_digest(items, digest);
	json_decref(items);
	return (gw_session_seen(w->id, k, digest));
}

/* One look: each streaming session's view against the last it saw. */
static void
look(void)
{
	static gw_watched ws[GW_SESSIONS_MAX];
	int               n = gw_sessions_streaming(ws, GW_SESSIONS_MAX);
	json_t           *all;

	if (n == 0 || (all = clients_all(false)) == NULL) {
		return;
	}
	for (int i = 0; i < n; i++) {
		json_t *grants =
		        ws[i].keyed ? auth_keys_clients(ws[i].key) : NULL;
		if (ws[i].keyed && grants == NULL) {
			continue; /* its key is gone: the reload ends it */
		}
		json_t *group =
		        ws[i].group[0] != '\0' ? gw_group(ws[i].group) : NULL;
		if (ws[i].group[0] != '\0' && group == NULL) {
			/* its group is gone: it sees nothing now */
			group = json_pack("{s:[]}", "-");
		}
		bool told = false; /* (resources: one notice for both) */
		for (int k = 0; k < GW_KINDS; k++) {
			/* (unchanged, or its first look: nothing to tell) */
			if ((ws[i].kinds & (1u << k)) != 0 &&
			    changed(&ws[i], all, grants, group, (gw_kind)k) &&
			    !(k == GW_TEMPLATES && told)) {
				tell(&ws[i], (gw_kind)k);
				told = k == GW_RESOURCES;
			}
		}
		json_decref(group);
		json_decref(grants);
	}
	json_decref(all);
}

/* Waits until ms passed or gw_stop; W.mtx held.  Returns W.stop. */
static bool
pause_ms(int ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)ms * 1000000;
	until.tv_sec += until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	while (!W.stop &&
	       pthread_cond_timedwait(&W.cv, &W.mtx, &until) != ETIMEDOUT) {
	}
	return (W.stop);
}

static void *
watch_main(void *arg)
{
	pthread_mutex_lock(&W.mtx);
	for (;;) {
		while (!W.dirty && !W.stop) {
			pthread_cond_wait(&W.cv, &W.mtx);
		}
		/* the changes of a burst, gathered into one look */
		if (W.stop || pause_ms(GW_COALESCE_MS)) {
			break;
		}
		W.dirty = false;
		pthread_mutex_unlock(&W.mtx);
		look();
		pthread_mutex_lock(&W.mtx);
	}
	pthread_mutex_unlock(&W.mtx);
	return (NULL);
}

int
gw_start(void)
{
	int rv = pthread_create(&W.thr, NULL, watch_main, NULL);

	W.running = rv == 0;
	return (rv);
}

void
gw_stop(void)
{
	if (!W.running) {
		return;
	}
	pthread_mutex_lock(&W.mtx);
	W.stop = true;
	pthread_cond_broadcast(&W.cv);
	pthread_mutex_unlock(&W.mtx);
	pthread_join(W.thr, NULL);
	W.running = false;
}
