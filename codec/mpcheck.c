/*
 * mpcheck.c - msgpack token walk with bounds (see mpcheck.h).
 */
#include "codec/mpcheck.h"

#include <stdint.h>

#include "mcpkeep.h"

typedef struct cursor {
	const uint8_t *p;    /* next byte */
	size_t         left; /* bytes from p to the end */
} cursor;

/* Reads an n-byte big-endian length. */
static int
read_len(cursor *c, unsigned n, uint64_t *out)
{
	uint64_t v = 0;

	if (c->left < n) {
		return (MK_EPROTO);
	}
	for (unsigned i = 0; i < n; i++) {
		v = (v << 8) | c->p[i];
	}
	c->p += n;
	c->left -= n;
	*out = v;
	return (0);
}

static int
skip(cursor *c, uint64_t n)
{
	if (c->left < n) {
		return (MK_EPROTO);
	}
	c->p += n;
	c->left -= n;
	return (0);
}

/*
 * Classifies the token at c: bytes of body to skip (*body), elements that
 * follow (*items: array count, 2 x map count).  Consumes the header.
 */
static int
token(cursor *c, uint64_t *body, uint64_t *items)
{
	uint8_t  b;
	uint64_t n;
	int      rv = 0;

	if (c->left == 0) {
		return (MK_EPROTO);
	}
	b = *c->p++;
	c->left--;
	*body  = 0;
	*items = 0;
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
		return (0); /* fixint, nil, bool */
	}
	if ((b & 0xe0) == 0xa0) {
		*body = b & 0x1f; /* fixstr */
		return (0);
	}
	if ((b & 0xf0) == 0x90) {
		*items = b & 0x0f; /* fixarray */
		return (0);
	}
	if ((b & 0xf0) == 0x80) {
		*items = 2u * (b & 0x0f); /* fixmap */
		return (0);
	}
	switch (b) {
	case 0xcc:
	case 0xd0:
		*body = 1;
		break; /* 8-bit ints */
	case 0xcd:
	case 0xd1:
		*body = 2;
		break; /* 16-bit ints */
	case 0xce:
	case 0xd2:
	case 0xca:
		*body = 4;
		break;
	case 0xcf:
	case 0xd3:
	case 0xcb:
		*body = 8;
		break;
	case 0xd4:
		*body = 2;
		break; /* fixext 1 + type */
	case 0xd5:
		*body = 3;
		break;
	case 0xd6:
		*body = 5;
		break;
	case 0xd7:
		*body = 9;
		break;
	case 0xd8:
		*body = 17;
		break;
	case 0xc4:
	case 0xd9:
		rv = read_len(c, 1, body);
		break;
	case 0xc5:
	case 0xda:
		rv = read_len(c, 2, body);
		break;
	case 0xc6:
	case 0xdb:
		rv = read_len(c, 4, body);
		break;
	case 0xc7:
		rv    = read_len(c, 1, &n);
		*body = n + 1;
		break;
	case 0xc8:
		rv    = read_len(c, 2, &n);
		*body = n + 1;
		break;
	case 0xc9:
		rv    = read_len(c, 4, &n);
		*body = n + 1;
		break;
	case 0xdc:
		rv = read_len(c, 2, items);
		break;
	case 0xdd:
		rv = read_len(c, 4, items);
		break;
	case 0xde:
		rv     = read_len(c, 2, &n);
		*items = 2 * n;
		break;
	case 0xdf:
		rv     = read_len(c, 4, &n);
		*items = 2 * n;
		break;
	default:
		rv = MK_EPROTO;
		break; /* 0xc1 is never used */
	}
	return (rv);
}

int
codec_mp_check(const void *buf, size_t len, unsigned max_depth)
{
	/* Elements still owed by each open container, innermost last. */
	uint64_t owed[64];
	unsigned depth = 0;
	cursor   c     = {buf, len};

	if (buf == NULL || max_depth > 63) {
		return (MK_EPROTO);
	}
	owed[0] = 1; /* exactly one top-level object */
	for (;;) {
		uint64_t body, items;

		while (owed[depth] == 0) {
			if (depth == 0) {
				return (c.left == 0 ? 0 : MK_EPROTO);
			}
			depth--;
		}
		owed[depth]--;
		if (token(&c, &body, &items) != 0 || skip(&c, body) != 0) {
			return (MK_EPROTO);
		}
		if (items != 0) {
			if (items > c.left || depth == max_depth) {
				return (MK_EPROTO);
			}
			owed[++depth] = items;
		}
	}
}
