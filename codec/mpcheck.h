/*
 * mpcheck.h - a bounds pre-check for msgpack input.
 *
 * msgpack-c's C unpacker allocates an array's or a map's element storage
 * from the count in its header before reading the elements, so a short
 * hostile input can ask for gigabytes.  codec_mp_check walks the encoded
 * tokens without allocating and accepts the input only when it is exactly
 * one well-formed object whose every container count fits in the bytes
 * that remain (each element needs at least one byte) and whose nesting is
 * at most max_depth.  After it passes, unpacking allocates O(len).
 */
#ifndef CODEC_MPCHECK_H
#define CODEC_MPCHECK_H

#include <stddef.h>

/* Returns 0 or MK_EPROTO.  Never reads outside buf[0..len). */
int codec_mp_check(const void *buf, size_t len, unsigned max_depth);

#endif /* CODEC_MPCHECK_H */
