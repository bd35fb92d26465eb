/*
 * errors.c - the texts of the result codes (see errors.h).
 */
#include "codec/errors.h"

#include <stddef.h>

#include "mcpkeep.h"

static const char *err_text[] = {
        [MK_OK]        = "success",
        [MK_EINVAL]    = "invalid argument",
        [MK_ENOMEM]    = "out of memory",
        [MK_ECLOSED]   = "closed",
        [MK_ETIMEDOUT] = "timed out",
        [MK_ENOENT]    = "not found",
        [MK_EEXIST]    = "already exists",
        [MK_EBUSY]     = "busy: a conflicting operation is in progress",
        [MK_EPROTO]    = "protocol error",
        [MK_ESYS]      = "system call failed",
        [MK_EHANDLE]   = "invalid or closed handle",
        [MK_ETOOBIG]   = "input exceeds its size limit",
        [MK_EACTOR]    = "actor handler failed",
        [MK_EINTERNAL] = "internal error",
        [MK_EUPSTREAM] = "the MCP server failed the request",
        [MK_ESTATE]    = "the client's state does not allow it",
        [MK_EAUTH]     = "the caller must authorize first",
        [MK_ESTORE]    = "the store cannot write",
        [MK_EUNKNOWN]  = "the call's outcome is unknown",
};

const char *
codec_strerror(int rc)
{
	if (rc < 0 || (size_t)rc >= sizeof(err_text) / sizeof(err_text[0]) ||
	    err_text[rc] == NULL) {
		return ("unknown error");
	}
	return (err_text[rc]);
}
