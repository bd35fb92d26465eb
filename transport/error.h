/*
 * error.h - what went wrong with an MCP request or connection, in kinds a
 * caller can branch on.
 *
 * Messages are one line, readable, and never carry a secret: no header
 * values, no tokens, no URL query strings.
 */
#ifndef TP_ERROR_H
#define TP_ERROR_H

#include <stdint.h>

typedef enum mcp_errkind {
	MCP_OK          = 0,  /* no error */
	MCP_E_TIMEOUT   = 1,  /* the request's deadline passed */
	MCP_E_CONNECT   = 2,  /* connection refused, reset, DNS, TLS */
	MCP_E_HTTP      = 3,  /* an unexpected HTTP status (http_status) */
	MCP_E_AUTH      = 4,  /* HTTP 401/403; www_authenticate kept */
	MCP_E_GONE      = 5,  /* the MCP session is gone: re-initialize */
	MCP_E_PROTOCOL  = 6,  /* the peer broke JSON-RPC/MCP or a limit */
	MCP_E_SERVER    = 7,  /* a JSON-RPC error response (rpc_code) */
	MCP_E_LOST      = 8,  /* the stream or the child process went away */
	MCP_E_CANCELLED = 9,  /* the caller gave up or the session closed */
	MCP_E_LOCAL     = 10, /* a local failure: memory, fork, bad input */
	MCP_E_LIMIT     = 11, /* a process limit: out of file descriptors */
	MCP_E_UNKNOWN   = 12, /* the connection failed after a call was
	                       * sent, and it was not sent again: it may or
	                       * may not have run (the client's verdict) */
} mcp_errkind;

#define MCP_ERRMSG_MAX  512
#define MCP_WWWAUTH_MAX 1024

typedef struct mcp_error {
	mcp_errkind kind;        /* what happened */
	int         http_status; /* HTTP status when there was one, else 0 */
	int64_t     rpc_code;    /* JSON-RPC error code (MCP_E_SERVER) */
	char        message[MCP_ERRMSG_MAX];           /* one line */
	char        www_authenticate[MCP_WWWAUTH_MAX]; /* MCP_E_AUTH */
	int         maybe_ran; /* 1: the request may have reached the
	                        * server before the connection failed (a
	                        * stream lost, a reply never read) */
} mcp_error;

/* mcp_error_set fills e: kind and a printf-formatted message, flattened
 * to one line and cut at MCP_ERRMSG_MAX - 1 bytes on a UTF-8 boundary.
 * Returns e. */
/* mcp_error_fd_limit sets e to MCP_E_LIMIT for errnum EMFILE (the
 * process's RLIMIT_NOFILE, named with its values) or ENFILE (the
 * system's); returns e. */
mcp_error *mcp_error_fd_limit(mcp_error *e, int errnum);

mcp_error *mcp_error_set(mcp_error *e, mcp_errkind kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* mcp_errkind_name gives a short stable name ("timeout", "auth", ...). */
const char *mcp_errkind_name(mcp_errkind kind);

#endif /* TP_ERROR_H */
