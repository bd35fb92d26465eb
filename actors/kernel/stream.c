/*
 * stream.c - the state-stream publisher (see stream.h).
 */
#include "actors/kernel/stream.h"

#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

struct kn_stream {
	nng_socket pub; /* thread-safe */
};

int
kn_stream_open(kn_stream **sp, const char *url, const char *const *extra,
               char *err, size_t errlen)
{
	kn_stream *s;
	int        rv;

	*sp = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = nng_pub0_open(&s->pub)) != 0) {
		free(s);
		return (MK_ENOMEM);
	}
	for (int i = -1; i == -1 || (extra != NULL && extra[i] != NULL); i++) {
		const char *u = i < 0 ? url : extra[i];
		if ((rv = nng_listen(s->pub, u, NULL, 0)) != 0) {
			snprintf(err, errlen,
			         "state stream: cannot listen on %s: %s", u,
			         nng_strerror(rv));
			nng_close(s->pub);
			free(s);
			return (MK_EINVAL);
		}
	}
	*sp = s;
	return (0);
}

uint64_t
kn_stream_subscribers(kn_stream *s)
{
	nng_stat *all, *sock, *pipes;
	uint64_t  n = 0;

	/* The socket's own count: a pipe is one connected subscriber.  (Not
	 * nng_pipe_notify: its callbacks run on nng's pipe threads, and a
	 * count kept here could only mirror this one.) */
	if (nng_stats_get(&all) != 0) {
		return (0);
	}
	if ((sock = nng_stat_find_socket(all, s->pub)) != NULL &&
	    (pipes = nng_stat_find(sock, "pipes")) != NULL) {
		n = nng_stat_value(pipes);
	}
	nng_stats_free(all);
	return (n);
}

void
kn_stream_close(kn_stream **sp)
{
	kn_stream *s;

	if (sp == NULL || (s = *sp) == NULL) {
		return;
	}
	*sp = NULL;
	nng_close(s->pub);
	free(s);
}

int
kn_stream_publish(kn_stream *s, const char *topic, const void *body,
                  size_t len)
{
	nng_msg *m;
	size_t   tl = strlen(topic) + 1;

	if (nng_msg_alloc(&m, tl + len) != 0) {
		return (MK_ENOMEM);
	}
	memcpy(nng_msg_body(m), topic, tl);
	if (len != 0) {
		memcpy((char *)nng_msg_body(m) + tl, body, len);
	}
	if (nng_sendmsg(s->pub, m, NNG_FLAG_NONBLOCK) != 0) {
		nng_msg_free(m); /* pub0 only fails when closing */
	}
	return (0);
}

int
kn_stream_publish_msg(kn_stream *s, const char *topic, const codec_fields *f,
                      const void *m)
{
	msgpack_sbuffer b = codec_msg_packed(f, m);
	int             rv;

	rv = kn_stream_publish(s, topic, b.data, b.size);
	codec_msg_wipe(f, &b);
	return (rv);
}
