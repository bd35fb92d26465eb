/*
 * error.c - mcp_error helpers (see error.h).
 */
#include "transport/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static const char *kind_names[] = {
        [MCP_OK]          = "ok",
        [MCP_E_TIMEOUT]   = "timeout",
        [MCP_E_CONNECT]   = "connect",
        [MCP_E_HTTP]      = "http",
        [MCP_E_AUTH]      = "auth",
        [MCP_E_GONE]      = "session_gone",
        [MCP_E_PROTOCOL]  = "protocol",
        [MCP_E_SERVER]    = "server",
        [MCP_E_LOST]      = "transport_lost",
        [MCP_E_CANCELLED] = "cancelled",
        [MCP_E_LOCAL]     = "local",
        [MCP_E_LIMIT]     = "limit",
        [MCP_E_UNKNOWN]   = "outcome_unknown",
};

const char *
mcp_errkind_name(mcp_errkind kind)
{
	if ((unsigned)kind >= sizeof(kind_names) / sizeof(kind_names[0])) {
		return ("?");
	}
	return (kind_names[kind]);
}

mcp_error *
mcp_error_fd_limit(mcp_error *e, int errnum)
{
	struct rlimit lim = {0, 0};

	(void)getrlimit(RLIMIT_NOFILE, &lim);
	return (mcp_error_set(
	        e, MCP_E_LIMIT,
	        "out of file descriptors (%s; RLIMIT_NOFILE %llu, hard %llu)",
	        errnum == ENFILE ? "the system is at its limit"
	                         : "the process is at its limit",
	        (unsigned long long)lim.rlim_cur,
	        (unsigned long long)lim.rlim_max));
}

mcp_error *
mcp_error_set(mcp_error *e, mcp_errkind kind, const char *fmt, ...)
{
	va_list ap;
	size_t  n;

	memset(e, 0, sizeof(*e));
	e->kind = kind;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	for (char *p = e->message; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20) {
			*p = ' '; /* one line */
		}
	}
	/* vsnprintf may have cut inside a UTF-8 sequence: back off to the
	 * start of the last, incomplete one */
	n = strlen(e->message);
	if (n == sizeof(e->message) - 1) {
		size_t i = n;
		while (i > 0 &&
		       ((unsigned char)e->message[i - 1] & 0xc0) == 0x80) {
			i--;
		}
		if (i > 0 && ((unsigned char)e->message[i - 1] & 0x80) != 0) {
			unsigned char lead = (unsigned char)e->message[i - 1];
			size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
			if (n - (i - 1) < want) {
				e->message[i - 1] = '\0';
			}
		}
	}
	return (e);
}
