/*
 * msg.h - the kernel's message types, and the range left to the rest.
 *
 * Two ranges.  Below MSG_BASE, the kernel's own types (actors/kernel/
 * kernel.h): the kernel knows no others.  From MSG_BASE to MSG_LIMIT, the
 * application's: each actor declares those it takes, with their payload
 * fields, reply and handler, in one list in its <x>_msg.h, and the kernel
 * refuses any other (kn_route).  Values are stable within a process only
 * (inboxes are inproc).  The envelope codec (envelope.h) refuses a number
 * outside both ranges.
 */
#ifndef CODEC_MSG_H
#define CODEC_MSG_H

typedef enum codec_msg_type {
	/* the kernel's types */
	MSG_NONE  = 0,  /* never sent: zero is not a valid type */
	MSG_TERM  = 1,  /* kernel: reserved, never sent (a stop is a flag) */
	MSG_REPLY = 2,  /* kernel: the answer to an actor's async ask; status
	                 * in the envelope, body in the payload */
	MSG_PING = 3,   /* ask: liveness; the reply echoes the payload */
	MSG_USER = 4,   /* free for tests and benchmarks; no system actor
	                 * accepts it */
	MSG_KERNEL_END, /* one past the kernel's last type; not a type */

	/* the application's types: each actor numbers its own in a block
	 * from MSG_BASE (actors/msgbase.h), declared once in its
	 * <x>_msg.h; the codec knows only that they lie in [MSG_BASE,
	 * MSG_LIMIT) */
	MSG_BASE  = 16,   /* the first application type */
	MSG_LIMIT = 1024, /* one past the last type an envelope carries */
} codec_msg_type;

_Static_assert(MSG_KERNEL_END <= MSG_BASE, "kernel types reach MSG_BASE");

/* codec_msg_valid says whether type lies in one of the two ranges
 * (MSG_NONE and the numbers between them do not). */
int codec_msg_valid(unsigned type);

/* codec_msg_name returns a kernel type's name, or "?" for any other (an
 * actor's types are named in its own table: kn_msg_name). */
const char *codec_msg_name(unsigned type);

#endif /* CODEC_MSG_H */
