/*
 * sessions.c - the gateway's downstream sessions (Mcp-Session-Id): made
 * at initialize, bound to the caller that made them, bounded, and
 * dropped when ended (DELETE) or idle too long.
 *
 * DESIGN: a session holds no upstream state (each call runs through the
 * runtime's own path), so a session is an id, its owner and the
 * protocol version it agreed.  The table is small and guarded by one
 * mutex; a lookup is a scan of at most GW_SESSIONS_MAX entries under it
 * (a memcmp each), far below a call's cost.  An id is 128 random bits,
 * compared in constant time; a session of another caller is answered as
 * one that does not exist.
 */
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cli/gateway/gateway.h"

typedef struct gw_session {
	char          id[GW_SID_LEN + 1];   /* "" when the slot is free */
	char          owner[GW_OWNER_LEN];  /* the caller (gw_owner) */
	gw_agreed     agreed;               /* at its initialize */
	int64_t       used;                 /* last request, monotonic ns */
	bool          keyed;                /* the caller is a key ... */
	unsigned char key[32];              /* ... of this digest */
	bool          streaming;            /* its GET stream is open */
	bool          listed[GW_KINDS];     /* digest is set */
	unsigned char digest[GW_KINDS][32]; /* of each list it sees */
	unsigned      kinds; /* the lists whose changes it hears (1 << k) */
	char          group[65]; /* its /mcp/<group>, or "" */
	bool          listen;    /* 2026-07-28: a subscriptions/listen ... */
	char          sub[72];   /* ... whose request id (JSON) this is */
} gw_session;

static struct {
	pthread_mutex_t mtx;
	gw_session      s[GW_SESSIONS_MAX];
	int             n; /* slots in use */
} S = {.mtx = PTHREAD_MUTEX_INITIALIZER};

void
gw_owner(const req *r, char *out, size_t len)
{
	/* the group it was made on (r->id: /mcp/<group>; "" for /mcp), and
	 * a key by its name; the admin and the anonymous loopback caller
	 * apart from every key (a key's name has no ':') */
	snprintf(out, len, "%s/%s", r->id != NULL ? r->id : "",
	         r->key != NULL     ? r->key->name
	                 : r->admin ? ":admin"
	                            : ":anonymous");
}

static bool
idle(const gw_session *s, int64_t now)
{
	return (s->id[0] != '\0' &&
	        now - s->used > (int64_t)GW_SESSION_IDLE_S * 1000000000);
}

int
gw_stream_id(char *id)
{
	unsigned char raw[GW_SID_LEN / 2];

	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		return (MK_ENOMEM);
	}
	for (size_t i = 0; i < sizeof(raw); i++) {
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	}
	return (0);
}

int
gw_session_new(const req *r, const gw_agreed *a, char *id)
{
	int64_t     now = answer_mono_ns();
	gw_session *got = NULL;

	if (gw_stream_id(id) != 0) {
		return (MK_ENOMEM);
	}
	pthread_mutex_lock(&S.mtx);
	for (int i = 0; i < GW_SESSIONS_MAX && got == NULL; i++) {
		if (idle(&S.s[i], now)) {
			S.s[i].id[0] = '\0'; /* idle too long: ended */
			S.n--;
		}
		if (S.s[i].id[0] == '\0') {
			got = &S.s[i];
		}
	}
	if (got != NULL) {
		*got = (gw_session) {.used = now, .kinds = GW_ALL_KINDS};
		memcpy(got->id, id, GW_SID_LEN + 1);
		gw_owner(r, got->owner, sizeof(got->owner));
		got->agreed = *a;
		if ((got->keyed = r->key != NULL)) {
			memcpy(got->key, r->key->hash, sizeof(got->key));
		}
		snprintf(got->group, sizeof(got->group), "%s",
		         r->id != NULL ? r->id : "");
		S.n++;
	}
	pthread_mutex_unlock(&S.mtx);
	return (got != NULL ? 0 : MK_EBUSY);
}

/* The slot of id owned by r's caller, or NULL; S.mtx held. */
static gw_session *
find(const req *r, const char *id)
{
	char owner[GW_OWNER_LEN];

	if (id == NULL || strlen(id) != GW_SID_LEN) {
		return (NULL);
	}
	gw_owner(r, owner, sizeof(owner));
	for (int i = 0; i < GW_SESSIONS_MAX; i++) {
		gw_session *s = &S.s[i];
		if (s->id[0] != '\0' && !s->listen &&
		    CRYPTO_memcmp(s->id, id, GW_SID_LEN) == 0) {
			return (strcmp(s->owner, owner) == 0 &&
			                        !idle(s, answer_mono_ns())
			                ? s
			                : NULL);
		}
	}
	return (NULL);
}

bool
gw_session_use(const req *r, const char *id, gw_agreed *a)
{
	gw_session *s;

	pthread_mutex_lock(&S.mtx);
	if ((s = find(r, id)) != NULL) {
		s->used = answer_mono_ns();
		*a      = s->agreed;
	}
	pthread_mutex_unlock(&S.mtx);
	return (s != NULL);
}

bool
gw_session_end(const req *r, const char *id)
{
	gw_session *s;

	pthread_mutex_lock(&S.mtx);
	if ((s = find(r, id)) != NULL) {
		s->id[0] = '\0';
		S.n--;
	}
	pthread_mutex_unlock(&S.mtx);
	return (s != NULL);
}

int
gw_sessions_open(void)
{
	int n;

	pthread_mutex_lock(&S.mtx);
	n = S.n;
	pthread_mutex_unlock(&S.mtx);
	return (n);
}

/* The open slot of id (whoever's), or NULL.  S.mtx. */
static gw_session *
slot(const char *id)
{
	for (int i = 0; i < GW_SESSIONS_MAX; i++) {
		if (S.s[i].id[0] != '\0' && strcmp(S.s[i].id, id) == 0) {
			return (&S.s[i]);
		}
	}
	return (NULL);
}

bool
gw_session_stream(const char *id, bool open)
{
	gw_session *s;
	bool        ok;

	pthread_mutex_lock(&S.mtx);
	s  = slot(id);
	ok = s != NULL && (!open || !s->streaming);
	if (ok) {
		s->streaming = open;
	}
	if (ok && !open && s->listen) {
		s->id[0] = '\0'; /* a listen ends with its stream */
		S.n--;
	}
	pthread_mutex_unlock(&S.mtx);
	return (ok);
}

bool
gw_session_seen(const char *id, gw_kind k, const unsigned char digest[32])
{
	gw_session *s;
	bool        changed = false;

	pthread_mutex_lock(&S.mtx);
	if ((s = slot(id)) != NULL) {
		changed =
		        s->listed[k] && memcmp(s->digest[k], digest, 32) != 0;
		memcpy(s->digest[k], digest, 32);
		s->listed[k] = true;
	}
	pthread_mutex_unlock(&S.mtx);
	return (changed);
}

int
gw_sessions_streaming(gw_watched *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&S.mtx);
	for (int i = 0; i < GW_SESSIONS_MAX && n < max; i++) {
		gw_session *s = &S.s[i];
		if (s->id[0] == '\0' || !s->streaming) {
			continue;
		}
		memcpy(out[n].id, s->id, sizeof(out[n].id));
		memcpy(out[n].group, s->group, sizeof(out[n].group));
		memcpy(out[n].sub, s->sub, sizeof(out[n].sub));
		out[n].listen = s->listen;
		out[n].kinds  = s->kinds;
		if ((out[n].keyed = s->keyed)) {
			memcpy(out[n].key, s->key, sizeof(out[n].key));
		}
		n++;
	}
	pthread_mutex_unlock(&S.mtx);
	return (n);
}

int
gw_listen_new(const req *r, const char *sub, unsigned kinds, char *id)
{
	gw_agreed a = {.version = GW_VERSION_MODERN};
	int       rv;

	if ((rv = gw_session_new(r, &a, id)) != 0) {
		return (rv);
	}
	pthread_mutex_lock(&S.mtx);
	gw_session *s = slot(id);
	if (s != NULL) {
		s->listen    = true;
		s->streaming = true;
		s->kinds     = kinds;
		snprintf(s->sub, sizeof(s->sub), "%s", sub);
	}
	pthread_mutex_unlock(&S.mtx);
	return (0);
}
