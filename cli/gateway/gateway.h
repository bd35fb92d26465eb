/*
 * gateway.h - /mcp: the daemon as one MCP server (Streamable HTTP) that
 * serves the tools of every client a caller may reach, named
 * "<client>-<tool>", and runs their calls through the runtime.
 *   mcp.c       the JSON-RPC methods, the calls, the audit line
 *   lists.c     what a caller sees: tools, prompts, resources, renamed
 *   sessions.c  the downstream sessions (Mcp-Session-Id)
 *   changes.c   list changes: each streaming session told when what it
 *               sees changed
 *   relay.c     the upstreams' requests, to the session that caused them
 *   mrtr.c      ... or, to a 2026-07-28 caller, as input_required results
 *   modern.c    the 2026-07-28 stateless form: server/discover, the
 *               version and capabilities in each request's _meta, the
 *               headers checked against the body, subscriptions/listen
 */
#ifndef CLI_GATEWAY_H
#define CLI_GATEWAY_H

#include "cli/daemon.h"

#define GW_SESSIONS_MAX    4096 /* downstream sessions open at once */
#define GW_SESSION_IDLE_S  1800 /* a session unused this long has ended */
#define GW_SID_LEN         32   /* hex digits of a session id */
#define GW_OWNER_LEN       240
#define GW_PAGE            500          /* items per list page */
#define GW_URI             "mcpkeep://" /* a resource's: GW_URI<client>/<uri> */
#define GW_VERSION_LATEST  "2025-11-25"
#define GW_VERSION_MODERN  "2026-07-28"
#define GW_META_VERSION    "io.modelcontextprotocol/protocolVersion"
#define GW_META_CAPS       "io.modelcontextprotocol/clientCapabilities"
#define GW_META_SERVER     "io.modelcontextprotocol/serverInfo"
#define GW_META_SUB        "io.modelcontextprotocol/subscriptionId"
#define GW_META            "dev.mcpkeep/" /* the gateway's own _meta keys */
#define GW_TTL_LIST_MS     5000           /* tools/list: cacheable this long */
#define GW_TTL_DISCOVER_MS 60000          /* server/discover */
#define GW_STR_(x)         #x
#define GW_STR(x)          GW_STR_(x)

/* The lists a caller sees (lists.c). */
typedef enum gw_kind {
	GW_TOOLS,
	GW_PROMPTS,
	GW_RESOURCES,
	GW_TEMPLATES,
	GW_KINDS
} gw_kind;
#define GW_ALL_KINDS ((1u << GW_KINDS) - 1)

/* The caller a session belongs to: r's key, or the admin, or the
 * anonymous loopback caller. */
void gw_owner(const req *r, char *out, size_t len);
/* What a session agreed at initialize. */
typedef struct gw_agreed {
	char     version[16]; /* the protocol version */
	bool     url_elicit;  /* the client takes URL-mode elicitations */
	unsigned takes;       /* the server requests it takes (GW_TAKES_*) */
} gw_agreed;
/* The server requests a client takes, by its capabilities (relay.c). */
#define GW_TAKES_FORM     1u /* elicitation/create, form mode */
#define GW_TAKES_URL      2u /* elicitation/create, URL mode */
#define GW_TAKES_SAMPLING 4u /* sampling/createMessage */
#define GW_TAKES_ROOTS    8u /* roots/list */
unsigned gw_takes(const json_t *caps);
/* What a caller must take for an upstream's request method with params
 * (GW_TAKES_*; ~0u: no such request). */
unsigned gw_needs(const char *method, const json_t *params);
/* Where an upstream's request caused by a call goes: the call's
 * session and its SSE answer's stream. */
typedef struct gw_relay_to {
	const void *owner;  /* the call (gw_relay_drop) */
	const char *sid;    /* its session: the one that may answer */
	const char *stream; /* its answer's stream */
	const char *client; /* the upstream client */
	unsigned    takes;  /* what the session takes */
} gw_relay_to;
/* gw_relay_send sends the upstream's request request_id (method, params
 * as JSON text) to to's stream: 0, or -1 when it is declined (the
 * session does not take it, or it cannot be sent).  gw_relay_answer:
 * when body (a JSON-RPC response POSTed in session sid) answers a
 * request relayed to that session, hands it to the runtime and answers
 * r (true).  gw_relay_drop: the call owner ended.  Any thread. */
int  gw_relay_send(const gw_relay_to *to, const char *request_id,
                   const char *method, const char *params);
bool gw_relay_answer(req *r, const char *sid, json_t *body);
void gw_relay_drop(const void *owner);

/* A 2026-07-28 call whose upstream asks its caller (mrtr.c). */
typedef struct gw_park_to {
	const void *owner;  /* the call */
	req        *r;      /* its request, waiting; or NULL and ... */
	const char *stream; /* ... its streamed answer */
	json_t     *id;     /* its request id */
	const char *caller; /* gw_owner */
	const char *client; /* the upstream client */
	const char *name;   /* "<kind>:<the name the caller used>" */
	unsigned    takes;  /* what the caller takes (GW_TAKES_*) */
} gw_park_to;
/* gw_park_ask parks to's call (the first time) and asks its caller the
 * upstream's request request_id (method, params as JSON text): 0, or -1
 * when it is declined (the caller does not take it, too many parked).
 * gw_park_done: the parked call owner ended with msg (taken; true), or
 * false when it is not parked.  gw_park_retry_of: whether params are a
 * retry's (requestState or inputResponses); gw_park_retry answers the
 * retry r (request id, name as in gw_park_to) of a parked call.
 * gw_park_stop frees what is left.  Any thread. */
int  gw_park_ask(const gw_park_to *to, const char *request_id,
                 const char *method, const char *params);
bool gw_park_done(const void *owner, json_t *msg);
bool gw_park_retry_of(const json_t *params);
void gw_park_retry(req *r, json_t *id, const char *name, json_t *params);
void gw_park_stop(void);

/* gw_session_new makes a session of r's caller that agreed a; id gets
 * its id (GW_SID_LEN + 1 bytes).  0, MK_EBUSY (GW_SESSIONS_MAX are open)
 * or MK_ENOMEM.  Any thread. */
int gw_session_new(const req *r, const gw_agreed *a, char *id);
/* gw_stream_id makes a random id (GW_SID_LEN + 1 bytes), as a session's:
 * a streamed answer's.  0 or MK_ENOMEM. */
int gw_stream_id(char *id);
/* gw_session_use: whether id is an open session of r's caller (its use
 * noted; *a gets what it agreed); gw_session_end ends it (false: no such
 * session of r's caller). */
bool gw_session_use(const req *r, const char *id, gw_agreed *a);
bool gw_session_end(const req *r, const char *id);
int  gw_sessions_open(void);
/* gw_session_stream notes that session id's GET stream opened (open;
 * false when it has one already or no such session) or closed. */
bool gw_session_stream(const char *id, bool open);
/* gw_session_seen records the digest of list k session id sees now;
 * true when it had one before and it differs (a list change). */
bool gw_session_seen(const char *id, gw_kind k,
                     const unsigned char digest[32]);
/* A streaming session, as the watcher sees it. */
typedef struct gw_watched {
	char          id[GW_SID_LEN + 1];
	bool          listen;    /* a 2026-07-28 listen: ... */
	char          sub[72];   /* ... its subscription id (JSON) */
	char          group[65]; /* "" for /mcp */
	unsigned      kinds;     /* the lists it hears of (1 << gw_kind) */
	bool          keyed;
	unsigned char key[32];
} gw_watched;
/* gw_sessions_streaming copies up to max streaming sessions to out. */
int gw_sessions_streaming(gw_watched *out, int max);
/* gw_listen_new makes the streaming pseudo-session of a 2026-07-28
 * subscriptions/listen of r's caller (sub: its request id as JSON text)
 * that hears of changes to the lists kinds (1 << gw_kind; a session
 * hears of all); it ends when its stream closes.  As gw_session_new. */
int gw_listen_new(const req *r, const char *sub, unsigned kinds, char *id);

/* lists.c: the items of kind k a caller with grants (NULL: every
 * client) sees in the client views all through group (grants of the
 * same shape; NULL: /mcp itself), renamed and in order (new reference);
 * the digest of such a list; gw_list answers k's list method (sid: the
 * session whose view is noted, or NULL); gw_resource_split reads a
 * resource URI of the gateway's: its client and the upstream's URI (in
 * uri), false when it is not one. */
json_t *gw_items(const json_t *all, gw_kind k, const json_t *grants,
                 const json_t *group);
void    gw_digest(const json_t *items, unsigned char out[32]);
void    gw_list(req *r, const json_t *group, const char *sid, json_t *id,
                json_t *params, gw_kind k);
bool    gw_resource_split(const char *uri, char client[65], const char **rest);
/* mcp.c: gw_result_msg is the message answering request id with result
 * (taken; 2026-07-28: with its resultType, "complete" unless it has one,
 * and serverInfo); gw_result answers r with it; gw_ask answers
 * tools/call, prompts/get (GW_PROMPTS) and resources/read
 * (GW_RESOURCES). */
json_t *gw_result_msg(bool modern, json_t *id, json_t *result);
void    gw_result(req *r, json_t *id, json_t *result);
/* gw_method answers method when it is a list or a call (false: neither);
 * gw_capabilities: the server's (new reference). */
bool    gw_method(req *r, const json_t *group, const char *sid,
                  const gw_agreed *agreed, json_t *id, const char *method,
                  json_t *params);
json_t *gw_capabilities(void);
#define GW_INSTRUCTIONS                                                       \
	"The tools, prompts and resources of the MCP servers this mcpkeep "   \
	"holds: tools and prompts named <server>-<name>, resources "          \
	"mcpkeep://<server>/<uri>."
void gw_ask(req *r, const json_t *group, const gw_agreed *agreed, json_t *id,
            json_t *params, gw_kind k);
/* gw_stream_gone: an SSE stream of the gateway's (events.c) closed; a
 * call still answering on it (a streamed tools/call whose caller went)
 * is given up, the upstream told.  Any thread. */
void gw_stream_gone(const char *stream);
/* modern.c: a 2026-07-28 request (its _meta names a version past
 * 2025-11-25), answered */
void gw_modern(req *r, const json_t *group, json_t *body);

/* changes.c: gw_changed says that a client's state, tools or the keys
 * may have changed (any thread, never blocks); the watcher looks again
 * within GW_COALESCE_MS and sends notifications/tools/list_changed to
 * each streaming session whose view changed. */
#define GW_COALESCE_MS 200
void gw_changed(void);
int  gw_start(void); /* the watcher: 0 or an errno */
/* gw_groups_set puts server.tool_groups (JSON text of {name, clients}
 * each, or NULL: none) in force; gw_group gives a group's clients (a
 * copy: json_decref), NULL when there is no such group.  Any thread. */
void    gw_groups_set(const char *json_text);
json_t *gw_group(const char *name);
void    gw_stop(void);

#endif
