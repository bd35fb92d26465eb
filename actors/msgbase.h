/*
 * msgbase.h - where each actor's message types begin.  codec/msg.h leaves
 * the application [MSG_BASE, MSG_LIMIT): a block of MSG_BLOCK types per
 * actor, which its <x>_msg.h numbers from its base (CODEC_MSG_ENUM) and
 * asserts it does not outgrow (MSG_FITS).
 */
#ifndef ACTORS_MSGBASE_H
#define ACTORS_MSGBASE_H

#include "codec/msg.h"

#define MSG_BLOCK 64

enum {
	SV_MSG_BASE   = MSG_BASE,                /* supervisor */
	CL_MSG_BASE   = SV_MSG_BASE + MSG_BLOCK, /* client */
	PS_MSG_BASE   = CL_MSG_BASE + MSG_BLOCK, /* persister */
	CR_MSG_BASE   = PS_MSG_BASE + MSG_BLOCK, /* credential */
	CS_MSG_BASE   = CR_MSG_BASE + MSG_BLOCK, /* cluster */
	MSG_BASES_END = CS_MSG_BASE + MSG_BLOCK
};

_Static_assert((int)MSG_BASES_END <= (int)MSG_LIMIT,
               "the actors' types pass MSG_LIMIT");

/* MSG_FITS(P, BASE) asserts that the types numbered by
 * CODEC_MSG_ENUM(P, BASE, ...) fit their block. */
#define MSG_FITS(P, BASE)                                                     \
	_Static_assert((int)P##_END <= (int)(BASE) + MSG_BLOCK,               \
	               #P " types outgrow their block (actors/msgbase.h)")

#endif /* ACTORS_MSGBASE_H */
