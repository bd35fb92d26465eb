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
	/* supervisor (actors/supervisor.h has the fields) */
	MSG_SV_ADD       = 6,  /* ask: add a client from its config */
	MSG_SV_REMOVE    = 7,  /* ask: stop and forget a client */
	MSG_SV_DISABLE   = 8,  /* ask: disable a client */
	MSG_SV_ENABLE    = 9,  /* ask: enable a client */
	MSG_SV_RECONNECT = 10, /* ask: reconnect a sticky client */
	MSG_SV_LIST      = 11, /* ask: the client list view */
	MSG_SV_VIEW      = 12, /* tell (client): my view changed */
	MSG_SV_LOAD      = 13, /* ask: boot every client of a config file */
	/* client (actors/client/client.h has the fields) */
	MSG_CL_CONNECT   = 14, /* ask: first connect or discovery */
	MSG_CL_CHECK     = 15, /* ask: run one health check */
	MSG_CL_CALL      = 16, /* ask: call a tool */
	MSG_CL_RECONNECT = 17, /* ask: make-before-break reconnect */
	MSG_CL_DISABLE   = 18, /* ask: close everything, state disabled */
	MSG_CL_ENABLE    = 19, /* ask: leave disabled, connect again */
	MSG_SV_UPDATE    = 20, /* ask: change a client's config */
	MSG_CL_UPDATE    = 21, /* ask: apply a config patch */
	/* persister (actors/persister.h has the fields) */
	MSG_PS_CLIENT_PUT = 22, /* tell/ask (durable): store a client */
	MSG_PS_CLIENT_DEL = 23, /* tell/ask (durable): forget a client */
	MSG_PS_TOOLS_PUT  = 24, /* tell: store a changed tool list */
	MSG_PS_LOAD       = 25, /* ask: every stored client, with tools */
	MSG_PS_STATS      = 26, /* ask: statement counters, store health */
	MSG_PS_ROW_PUT    = 27, /* tell/ask (durable): a credential row */
	MSG_PS_ROW_DEL    = 28, /* tell/ask (durable): delete one by key */
	MSG_PS_ROWS       = 29, /* ask: every row of a credential table */
	MSG_PS_SYNC       = 30, /* ask: everything queued, made durable */
	/* credential actor (actors/credential/credential.h) */
	MSG_CR_REGISTER = 31, /* tell (client): who I am, my OAuth config */
	MSG_CR_FORGET   = 32, /* tell: a client is gone */
	MSG_CR_GET      = 33, /* ask: the header a connection needs */
	MSG_CR_INITIATE = 34, /* ask: start an OAuth flow */
	MSG_CR_COMPLETE = 35, /* ask: complete one (state, code) */
	MSG_CR_STATS    = 36, /* ask: refresh counters */
	MSG_CL_CRED     = 37, /* tell (client): its credential changed */
	MSG_CR_VERIFY_HEADERS  = 38, /* ask: per_user_headers admin sample */
	MSG_CR_SUBMIT_HEADERS  = 39, /* ask: a caller's header values */
	MSG_CR_VERIFY_EXCHANGE = 40, /* ask: token_exchange admin subject */
	MSG_PS_ROW_GET         = 41, /* ask: one credential row by key */
	MSG_CR_EVICT           = 42, /* ask: drop cached caller credentials */
	MSG_SV_REFRESH  = 43, /* ask: a client's check (tool list) now */
	MSG_CL_METRICS  = 44, /* ask: a client's counters */
	MSG_SV_SETTINGS = 45, /* ask: the global settings of config.json */
	MSG_CL_SETTINGS = 46, /* tell (supervisor): the global settings */
	MSG_SV_RELOAD   = 47, /* ask: a config file again, as a diff */
	MSG_COUNT             /* number of types; not a type */
} codec_msg_type;

/* codec_msg_name returns the type's name, or "?" when out of range. */
const char *codec_msg_name(unsigned type);

#endif /* CODEC_MSG_H */
