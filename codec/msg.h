/*
 * msg.h - the one table of message types that cross an actor inbox.
 *
 * Each actor's header documents which of these it accepts, their payload
 * fields and their reply.  Values are stable within a process only (inboxes
 * are inproc), but keep the list append-only anyway: logs print the numbers.
 */
#ifndef CODEC_MSG_H
#define CODEC_MSG_H

typedef enum codec_msg_type {
	MSG_NONE  = 0, /* never sent: zero is not a valid type */
	MSG_TERM  = 1, /* kernel: finish the loop and exit; no payload */
	MSG_REPLY = 2, /* kernel: the answer to an actor's async ask; status
	                * in the envelope, body in the payload */
	MSG_PING  = 3, /* ask: liveness; the reply echoes the payload */
	MSG_STATS = 4, /* ask (supervisor): runtime counters; reply is a
	                * msgpack map of name -> uint */
	MSG_USER = 5,  /* free for tests and benchmarks; no system actor
	                * accepts it */
	MSG_COUNT      /* number of types; not a type */
} codec_msg_type;

/* codec_msg_name returns the type's name, or "?" when out of range. */
const char *codec_msg_name(unsigned type);

#endif /* CODEC_MSG_H */
