/*
 * conns.c - the daemon's connections: deadlines for a request's headers
 * and body, each address's share of the slots, and a reserve that slow
 * or anonymous traffic cannot hold.
 *
 * DESIGN: libmicrohttpd's idle timeout is reset by every byte, so a
 * client that sends a header line every few seconds holds its slot for
 * ever; 256 of them from one address used to lock that address out (the
 * admin's page too), a couple of thousand from a few addresses everyone.
 * Here every connection libmicrohttpd accepts is tracked (its
 * notify-connection callback, any of its threads) in one list under
 * C.mtx:
 *   headers   a request's headers must be in whole within header_s of
 *             the connection's start (idle_s after the request before on
 *             a kept-alive one); its body within body_s of its headers;
 *   share     an address holds at most conns_ip connections, the daemon
 *             conns; past either a new one is a reserve connection: its
 *             headers are due within RESERVE_HEADER_MS, and it serves
 *             only the admin token and loopback probes (http.c asks
 *             conns_reserved), closed after its answer;
 *   eviction  the reserve (CONNS_RESERVE_IP per address, CONNS_RESERVE
 *             in all) is kept free: a connection that lands in it makes
 *             room by closing the oldest one of its address (or of all)
 *             that has sent no headers yet.
 * A late or evicted connection is shut down (shutdown(2), under C.mtx,
 * after checking its peer is still the one accepted) from the sweeper
 * thread, every SWEEP_MS; libmicrohttpd sees it end and closes it, its
 * closed notification taking it off the list under the same lock, so
 * an fd is never shut down once libmicrohttpd may have reused it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cli/daemon.h"

#define SWEEP_MS          200  /* the sweeper's pace */
#define RESERVE_HEADER_MS 1000 /* a reserve connection's headers */

typedef struct conn {
	struct conn            *prev, *next;
	struct sockaddr_storage peer;     /* as accepted */
	socklen_t               peer_len; /* its length */
	int                     fd;
	int64_t since;    /* waiting for headers since (mono ns), or 0 */
	int64_t wait_ms;  /* ... for at most this long */
	int64_t body_at;  /* its body due by (mono ns), or 0 */
	bool    reserve;  /* taken past its address's or the total share */
	bool    loopback; /* from a loopback address */
	bool    shut;     /* shut down: the sweeper is done with it */
} conn;

static struct {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	pthread_t       sweeper;
	bool            running, stopping;
	conn           *head;
	int             n;               /* connections on the list */
	int             conns, conns_ip; /* the shares */
	int64_t         header_ms, body_ms, idle_ms;
	uint64_t        late, evicted; /* counters */
} C = {.mtx = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static bool
same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family) {
		return (false);
	}
	if (a->ss_family == AF_INET) {
		return (((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		        ((const struct sockaddr_in *)b)->sin_addr.s_addr);
	}
	return (a->ss_family == AF_INET6 &&
	        memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
	               &((const struct sockaddr_in6 *)b)->sin6_addr,
	               sizeof(struct in6_addr)) == 0);
}

static bool
is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET) {
		return ((ntohl(((const struct sockaddr_in *)a)
		                       ->sin_addr.s_addr) >>
		         24) == 127);
	}
	return (a->ss_family == AF_INET6 &&
	        IN6_IS_ADDR_LOOPBACK(
	                &((const struct sockaddr_in6 *)a)->sin6_addr));
}

/* Shuts k down (C.mtx held) when its socket's peer is still the one
 * accepted. */
static void
shut(conn *k)
{
	struct sockaddr_storage now;
	socklen_t               len = sizeof(now);

	if (!k->shut &&
	    getpeername(k->fd, (struct sockaddr *)&now, &len) == 0 &&
	    len == k->peer_len && memcmp(&now, &k->peer, len) == 0) {
		(void)shutdown(k->fd, SHUT_RDWR);
	}
	k->shut = true;
}

/* The oldest connection (of addr's, or of all: NULL) still without
 * headers, or NULL. */
static conn *
oldest_waiting(const struct sockaddr_storage *addr)
{
	conn *best = NULL;

	for (conn *k = C.head; k != NULL; k = k->next) {
		if (k->since != 0 && !k->shut &&
		    (addr == NULL || same_addr(&k->peer, addr)) &&
		    (best == NULL || k->since < best->since)) {
			best = k;
		}
	}
	return (best);
}

static void
started(struct MHD_Connection *c, void **ctx)
{
	const union MHD_ConnectionInfo *fd, *ad;
	conn                           *k = calloc(1, sizeof(*k));
	conn                           *old;
	int                             ip = 0;

	fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (k == NULL || fd == NULL || ad == NULL || ad->client_addr == NULL) {
		free(k); /* (untracked: its idle timeout still holds) */
		return;
	}
	k->fd       = fd->connect_fd;
	k->peer_len = ad->client_addr->sa_family == AF_INET6
	        ? sizeof(struct sockaddr_in6)
	        : sizeof(struct sockaddr_in);
	memcpy(&k->peer, ad->client_addr, k->peer_len);
	k->loopback = is_loopback(&k->peer);
	k->since    = answer_mono_ns();
	pthread_mutex_lock(&C.mtx);
	for (conn *o = C.head; o != NULL; o = o->next) {
		ip += same_addr(&o->peer, &k->peer);
	}
	k->reserve = ip >= C.conns_ip || C.n >= C.conns;
	k->wait_ms = k->reserve ? RESERVE_HEADER_MS : C.header_ms;
	/* one in the reserve: one freed, so that the reserve stays free
	 * for whom it serves (libmicrohttpd refuses past it) */
	if ((ip >= C.conns_ip && (old = oldest_waiting(&k->peer)) != NULL) ||
	    (C.n >= C.conns && (old = oldest_waiting(NULL)) != NULL)) {
		shut(old);
		C.evicted++;
	}
	if ((k->next = C.head) != NULL) {
		C.head->prev = k;
	}
	C.head = k;
	C.n++;
	pthread_mutex_unlock(&C.mtx);
	*ctx = k;
}

static void
closed(void **ctx)
{
	conn *k = *ctx;

	if (k == NULL) {
		return;
	}
	pthread_mutex_lock(&C.mtx);
	if (k->prev != NULL) {
		k->prev->next = k->next;
	} else {
		C.head = k->next;
	}
	if (k->next != NULL) {
		k->next->prev = k->prev;
	}
	C.n--;
	pthread_mutex_unlock(&C.mtx);
	free(k);
	*ctx = NULL;
}

void
conns_notify(void *cls, struct MHD_Connection *c, void **ctx,
             enum MHD_ConnectionNotificationCode code)
{
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		started(c, ctx);
	} else {
		closed(ctx);
	}
}

static conn *
conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
	        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return (i != NULL ? i->socket_context : NULL);
}

void
conns_headers_in(struct MHD_Connection *c, bool body)
{
	conn *k = conn_of(c);

	if (k != NULL) {
		pthread_mutex_lock(&C.mtx);
		k->since   = 0;
		k->body_at = body ? answer_mono_ns() + C.body_ms * 1000000 : 0;
		pthread_mutex_unlock(&C.mtx);
	}
}

void
conns_body_in(struct MHD_Connection *c)
{
	conn *k = conn_of(c);

	if (k != NULL) {
		pthread_mutex_lock(&C.mtx);
		k->body_at = 0;
		pthread_mutex_unlock(&C.mtx);
	}
}

void
conns_request_done(struct MHD_Connection *c)
{
	conn *k = conn_of(c);

	if (k != NULL) {
		pthread_mutex_lock(&C.mtx);
		k->since = answer_mono_ns(); /* kept alive: the next one's
		                                headers */
		k->wait_ms = C.idle_ms > C.header_ms ? C.idle_ms : C.header_ms;
		k->body_at = 0;
		pthread_mutex_unlock(&C.mtx);
	}
}

bool
conns_reserved(struct MHD_Connection *c, bool *loopback)
{
	conn *k = conn_of(c);

	*loopback = k != NULL && k->loopback;
	return (k != NULL && k->reserve);
}

void
conns_stats(uint64_t *late, uint64_t *evicted)
{
	pthread_mutex_lock(&C.mtx);
	*late    = C.late;
	*evicted = C.evicted;
	pthread_mutex_unlock(&C.mtx);
}

static void *
sweeper(void *arg)
{
	struct timespec ts;

	pthread_mutex_lock(&C.mtx);
	while (!C.stopping) {
		int64_t now = answer_mono_ns();
		for (conn *k = C.head; k != NULL; k = k->next) {
			if (!k->shut &&
			    ((k->since != 0 &&
			      now - k->since > k->wait_ms * 1000000) ||
			     (k->body_at != 0 && now > k->body_at))) {
				shut(k);
				C.late++;
			}
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += SWEEP_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&C.cv, &C.mtx, &ts);
	}
	pthread_mutex_unlock(&C.mtx);
	return (NULL);
}

int
conns_start(const http_opts *o)
{
	C.conns     = o->conns;
	C.conns_ip  = o->conns_ip;
	C.header_ms = (int64_t)o->header_s * 1000;
	C.body_ms   = (int64_t)o->body_s * 1000;
	C.idle_ms   = (int64_t)o->idle_s * 1000;
	C.stopping  = false;
	if (pthread_create(&C.sweeper, NULL, sweeper, NULL) != 0) {
		return (errno != 0 ? errno : EAGAIN);
	}
	C.running = true;
	return (0);
}

void
conns_stop(void)
{
	if (!C.running) {
		return;
	}
	pthread_mutex_lock(&C.mtx);
	C.stopping = true;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mtx);
	pthread_join(C.sweeper, NULL);
	C.running = false;
}
