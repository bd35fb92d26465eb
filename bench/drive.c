/*
 * drive.c - see drive.h.
 */
#include "drive.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/loop.h"

#define IN_MAX 16384 /* an answer's bytes, headers and body */

typedef struct dconn {
	int     fd;
	size_t  have;        /* bytes in buf */
	int64_t t0;          /* when its request went out */
	char    buf[IN_MAX]; /* the answer coming in */
} dconn;

typedef struct driver {
	const char *req;    /* the request, whole */
	size_t      reqlen; /* its bytes */
	int         ep;     /* epoll */
	dconn      *c;      /* the connections */
	int         nc;     /* how many */
} driver;

static void
send_on(const driver *d, dconn *c)
{
	c->t0 = tp_now_ns();
	if (write(c->fd, d->req, d->reqlen) != (ssize_t)d->reqlen) {
		die("drive: a request could not be written whole");
	}
}

/* The bytes of the whole answer at the head of c's buffer, or 0 while it
 * is still coming in. */
static size_t
answer_len(dconn *c)
{
	char  *end = memmem(c->buf, c->have, "\r\n\r\n", 4), *cl;
	size_t hlen;

	if (end == NULL) {
		if (c->have == IN_MAX) {
			die("drive: an answer's headers are over 16 KiB");
		}
		return (0);
	}
	hlen = (size_t)(end - c->buf) + 4;
	*end = '\0';
	if (strncmp(c->buf, "HTTP/1.1 200 ", 13) != 0) {
		fprintf(stderr, "drive: %.80s\n", c->buf);
		die("drive: an answer was not 200");
	}
	if ((cl = strcasestr(c->buf, "\r\nContent-Length:")) == NULL) {
		die("drive: an answer without Content-Length");
	}
	size_t blen = strtoul(cl + 17, NULL, 10);
	*end        = '\r';
	if (hlen + blen > IN_MAX) {
		die("drive: an answer is over 16 KiB");
	}
	return (c->have >= hlen + blen ? hlen + blen : 0);
}

/* Sends count requests, conns at a time, and waits for every answer;
 * each one's latency into lat (NULL: not kept). */
static void
phase(driver *d, int count, int64_t *lat)
{
	struct epoll_event ev[64];
	int                sent = 0, done = 0;

	for (int i = 0; i < d->nc && sent < count; i++, sent++) {
		send_on(d, &d->c[i]);
	}
	while (done < count) {
		int n = epoll_wait(d->ep, ev, 64, 30000);
		if (n == 0) {
			die("drive: no answer in 30 s");
		}
		for (int i = 0; i < n; i++) {
			dconn  *c = ev[i].data.ptr;
			ssize_t r = read(c->fd, c->buf + c->have,
			                 IN_MAX - c->have);
			size_t  len;
			if (r <= 0) {
				die(r == 0 ? "drive: a connection was closed"
				           : "drive: read failed");
			}
			c->have += (size_t)r;
			if ((len = answer_len(c)) == 0) {
				continue;
			}
			if (lat != NULL) {
				lat[done] = tp_now_ns() - c->t0;
			}
			done++;
			memmove(c->buf, c->buf + len, c->have - len);
			c->have -= len;
			if (c->have != 0) {
				die("drive: an answer nobody asked for");
			}
			if (sent < count) {
				sent++;
				send_on(d, c);
			}
		}
	}
}

static void
connect_all(driver *d, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port   = htons((uint16_t)port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < d->nc; i++) {
		dconn             *c   = &d->c[i];
		int                one = 1;
		struct epoll_event ev  = {.events = EPOLLIN, .data.ptr = c};
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 ||
		    connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			die("drive: cannot connect");
		}
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (epoll_ctl(d->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
			die("drive: epoll_ctl");
		}
	}
}

stats
drive(const drive_req *q)
{
	driver   d = {.nc = q->conns};
	char    *req;
	int64_t *lat, t0;
	stats    s;
	int      len;

	len = asprintf(&req,
	               "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
	               "Content-Type: application/json\r\n"
	               "Accept: application/json, text/event-stream\r\n"
	               "%sContent-Length: %zu\r\n\r\n%s",
	               q->path, q->port, q->headers != NULL ? q->headers : "",
	               strlen(q->body), q->body);
	if (len < 0 || (d.c = calloc((size_t)d.nc, sizeof(*d.c))) == NULL ||
	    (lat = calloc((size_t)q->n, sizeof(*lat))) == NULL ||
	    (d.ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		die("drive: out of memory");
	}
	d.req    = req;
	d.reqlen = (size_t)len;
	connect_all(&d, q->port);
	phase(&d, d.nc * 20, NULL);
	cpu0 = thread_cpu_ns();
	t0   = tp_now_ns();
	phase(&d, q->n, lat);
	s        = summarize(lat, q->n, t0);
	s.cpu_us = 0;
	for (int i = 0; i < d.nc; i++) {
		close(d.c[i].fd);
	}
	close(d.ep);
	free(lat);
	free(d.c);
	free(req);
	return (s);
}
