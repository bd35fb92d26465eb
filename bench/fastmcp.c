/*
 * fastmcp.c - see fastmcp.h.
 */
#include "fastmcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536

static const char init_body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"fastmcp\",\"version\":\"1\"}}}";
static const char list_body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[{\"name\":\"echo\",\"description\":\"echo\",\"inputSchema\":{\"type\":\"object\"}}]}}";
static const char ping_body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}";
static const char call_body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}";

/* Copies the JSON-RPC id's digits out of body ("" when none). */
static void
find_id(const char *body, char *id, size_t cap)
{
	const char *p = strstr(body, "\"id\":");
	size_t      n = 0;

	if (p != NULL) {
		for (p += 5; *p >= '0' && *p <= '9' && n + 1 < cap; p++) {
			id[n++] = *p;
		}
	}
	id[n] = '\0';
}

static void *
serve(void *arg)
{
	int    fd   = (int)(intptr_t)arg;
	char  *buf  = malloc(BUF);
	size_t have = 0;

	for (;;) {
		char   *end, *cl, id[32], body[1024], resp[1536];
		size_t  hlen, blen = 0;
		ssize_t n;
		int     len;

		while ((end = memmem(buf, have, "\r\n\r\n", 4)) == NULL) {
			if (have == BUF ||
			    (n = read(fd, buf + have, BUF - have)) <= 0) {
				goto out;
			}
			have += (size_t)n;
		}
		hlen = (size_t)(end - buf) + 4;
		*end = '\0';
		if ((cl = strcasestr(buf, "content-length:")) != NULL) {
			blen = (size_t)atol(cl + 15);
		}
		while (have < hlen + blen) {
			if (hlen + blen > BUF ||
			    (n = read(fd, buf + have, BUF - have)) <= 0) {
				goto out;
			}
			have += (size_t)n;
		}
		char save        = buf[hlen + blen];
		buf[hlen + blen] = '\0';
		find_id(buf + hlen, id, sizeof(id));
		const char *fmt  = strstr(buf + hlen, "\"initialize\"") != NULL
		         ? init_body
		         : strstr(buf + hlen, "\"tools/list\"") != NULL
		         ? list_body
		         : strstr(buf + hlen, "\"ping\"") != NULL ? ping_body
		                                                  : call_body;
		buf[hlen + blen] = save;
		if (strncmp(buf, "DELETE", 6) == 0 || id[0] == '\0') {
			len = snprintf(
			        resp, sizeof(resp),
			        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
		} else {
			int bl = snprintf(body, sizeof(body), fmt, id);
			len    = snprintf(
			           resp, sizeof(resp),
			           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			              "Mcp-Session-Id: bench\r\nContent-Length: %d\r\n\r\n%s",
			           bl, body);
		}
		if (write(fd, resp, (size_t)len) != len) {
			goto out;
		}
		memmove(buf, buf + hlen + blen, have - hlen - blen);
		have -= hlen + blen;
	}
out:
	close(fd);
	free(buf);
	return (NULL);
}

static void *
acceptor(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int       fd  = accept(lfd, NULL, NULL);
		int       one = 1;
		pthread_t t;

		if (fd < 0) {
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_create(&t, NULL, serve, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
	return (NULL);
}

int
fastmcp_start(void)
{
	struct sockaddr_in a   = {.sin_family = AF_INET};
	socklen_t          len = sizeof(a);
	int       lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pthread_t t;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* a backlog as deep as the kernel allows (net.core.somaxconn): with
	 * 128, thousands of clients booting at once lost SYNs and waited
	 * out their retransmits (5,000 took 35 s, not the runtime's time) */
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(lfd, 4096) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) != 0) {
		return (-1);
	}
	pthread_create(&t, NULL, acceptor, (void *)(intptr_t)lfd);
	pthread_detach(t);
	return (ntohs(a.sin_port));
}

int
fastmcp_child(pid_t *pid)
{
	pid_t parent = getpid();
	int   fds[2], port = -1;

	if (pipe(fds) != 0) {
		return (-1);
	}
	if ((*pid = fork()) == 0) {
		close(fds[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent) {
			_exit(1);
		}
		port = fastmcp_start();
		if (write(fds[1], &port, sizeof(port)) != sizeof(port)) {
			_exit(1);
		}
		for (;;) {
			pause();
		}
	}
	close(fds[1]);
	if (*pid < 0 || read(fds[0], &port, sizeof(port)) != sizeof(port)) {
		port = -1;
	}
	close(fds[0]);
	return (port);
}
