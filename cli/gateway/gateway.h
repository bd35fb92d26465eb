/*
 * gateway.h - /mcp: the daemon as one MCP server (Streamable HTTP) that
 * serves the tools of every client a caller may reach, named
 * "<client>-<tool>", and runs their calls through the runtime.
 *   mcp.c       the JSON-RPC methods, the answers, the audit line
 *   sessions.c  the downstream sessions (Mcp-Session-Id)
 */
#ifndef CLI_GATEWAY_H
#define CLI_GATEWAY_H

#include "cli/daemon.h"

#define GW_SESSIONS_MAX   4096 /* downstream sessions open at once */
#define GW_SESSION_IDLE_S 1800 /* a session unused this long has ended */
#define GW_SID_LEN        32   /* hex digits of a session id */
#define GW_OWNER_LEN      160
#define GW_PAGE           500 /* tools per tools/list page */
#define GW_VERSION_LATEST "2025-11-25"
#define GW_STR_(x)        #x
#define GW_STR(x)         GW_STR_(x)

/* The caller a session belongs to: r's key, or the admin, or the
 * anonymous loopback caller. */
void gw_owner(const req *r, char *out, size_t len);
/* gw_session_new makes a session of r's caller that agreed version; id
 * gets its id (GW_SID_LEN + 1 bytes).  0, MK_EBUSY (GW_SESSIONS_MAX are
 * open) or MK_ENOMEM.  Any thread. */
int gw_session_new(const req *r, const char *version, char *id);
/* gw_session_use: whether id is an open session of r's caller (its use
 * noted; version gets its version); gw_session_end ends it (false: no
 * such session of r's caller). */
bool gw_session_use(const req *r, const char *id, char *version, size_t len);
bool gw_session_end(const req *r, const char *id);
int  gw_sessions_open(void);

#endif
