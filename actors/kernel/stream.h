/*
 * stream.h - the state-stream publisher: one nng pub0 socket that any
 * thread may publish on.  A message is a topic ("state", "tools"), one
 * NUL byte, then a msgpack map (see include/mcpkeep.h for the fields).
 * Publishing never blocks: pub0 drops messages for a subscriber whose
 * queue is full.
 */
#ifndef KN_STREAM_H
#define KN_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "codec/msgdef.h"

typedef struct kn_stream kn_stream;

/* kn_stream_open listens on url and on each extra url (NULL-terminated,
 * may be NULL).  Returns 0, MK_EINVAL (a bad or busy address, named in
 * err), MK_ENOMEM. */
int kn_stream_open(kn_stream **sp, const char *url, const char *const *extra,
                   char *err, size_t errlen);

/* kn_stream_subscribers: subscribers connected now (tcp, ws, ipc), from
 * nng's statistics of the socket; 0 if nng keeps none.  Any thread; costs
 * a snapshot of all of nng's statistics (one per scrape, not per call). */
uint64_t kn_stream_subscribers(kn_stream *s);

/* kn_stream_close closes the socket and nulls *sp; safe with NULL. */
void kn_stream_close(kn_stream **sp);

/* kn_stream_publish sends topic + NUL + body.  Any thread.  Returns 0 or
 * MK_ENOMEM; a subscriber-side drop is not an error. */
int kn_stream_publish(kn_stream *s, const char *topic, const void *body,
                      size_t len);

/* kn_stream_publish_msg sends the event m, a struct of the fields f
 * (codec/msgdef.h), as the body. */
int kn_stream_publish_msg(kn_stream *s, const char *topic,
                          const codec_fields *f, const void *m);

#endif /* KN_STREAM_H */
