/*
 * msg.h - the one table of message types that cross an actor inbox.
 *
 * Two ranges.  Below MSG_BASE, the kernel's own types (actors/kernel/
 * kernel.h): the kernel knows no others.  From MSG_BASE, the application's
 * types, one block per actor; each actor's <x>_msg.h documents which it
 * accepts, their payload fields and their reply.  Values are stable within
 * a process only (inboxes are inproc), but keep each range append-only
 * anyway: logs print the numbers.  The envelope codec (envelope.h) refuses
 * a number that names no type, the gap between the ranges included.
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

	/* the application's types, from MSG_BASE */
	MSG_BASE = 16, /* the first application type */
	/* supervisor (actors/supervisor/supervisor_msg.h has the fields) */
	MSG_STATS = MSG_BASE, /* ask: runtime counters; reply is a msgpack
	                       * map of name -> uint */
	MSG_SV_ADD,           /* ask: add a client from its config */
	MSG_SV_REMOVE,        /* ask: stop and forget a client */
	MSG_SV_DISABLE,       /* ask: disable a client */
	MSG_SV_ENABLE,        /* ask: enable a client */
	MSG_SV_RECONNECT,     /* ask: reconnect a sticky client */
	MSG_SV_LIST,          /* ask: the client list view */
	MSG_SV_VIEW,          /* tell (client): my view changed */
	MSG_SV_LOAD,          /* ask: boot every client of a config file */
	/* client (actors/client/client_msg.h has the fields) */
	MSG_CL_CONNECT,   /* ask: first connect or discovery */
	MSG_CL_CHECK,     /* ask: run one health check */
	MSG_CL_CALL,      /* ask: call a tool */
	MSG_CL_RECONNECT, /* ask: make-before-break reconnect */
	MSG_CL_DISABLE,   /* ask: close everything, state disabled */
	MSG_CL_ENABLE,    /* ask: leave disabled, connect again */
	MSG_SV_UPDATE,    /* ask: change a client's config */
	MSG_CL_UPDATE,    /* ask: apply a config patch */
	/* persister (actors/persister_msg.h has the fields) */
	MSG_PS_CLIENT_PUT, /* tell/ask (durable): store a client */
	MSG_PS_CLIENT_DEL, /* tell/ask (durable): forget a client */
	MSG_PS_TOOLS_PUT,  /* tell: store a changed tool list */
	MSG_PS_LOAD,       /* ask: every stored client, with tools */
	MSG_PS_STATS,      /* ask: statement counters, store health */
	MSG_PS_ROW_PUT,    /* tell/ask (durable): a credential row */
	MSG_PS_ROW_DEL,    /* tell/ask (durable): delete one by key */
	MSG_PS_ROWS,       /* ask: every row of a credential table */
	MSG_PS_SYNC,       /* ask: everything queued, made durable */
	/* credential actor (actors/credential/credential_msg.h) */
	MSG_CR_REGISTER,        /* tell (client): who I am, my OAuth config */
	MSG_CR_FORGET,          /* tell: a client is gone */
	MSG_CR_GET,             /* ask: the header a connection needs */
	MSG_CR_INITIATE,        /* ask: start an OAuth flow */
	MSG_CR_COMPLETE,        /* ask: complete one (state, code) */
	MSG_CR_STATS,           /* ask: refresh counters */
	MSG_CL_CRED,            /* tell (client): its credential changed */
	MSG_CR_VERIFY_HEADERS,  /* ask: per_user_headers admin sample */
	MSG_CR_SUBMIT_HEADERS,  /* ask: a caller's header values */
	MSG_CR_VERIFY_EXCHANGE, /* ask: token_exchange admin subject */
	MSG_PS_ROW_GET,         /* ask: one credential row by key */
	MSG_CR_EVICT,           /* ask: drop cached caller credentials */
	MSG_SV_REFRESH,         /* ask: a client's check (tool list) now */
	MSG_CL_METRICS,         /* ask: a client's counters */
	MSG_SV_SETTINGS,        /* ask: the global settings of config.json */
	MSG_CL_SETTINGS,        /* tell (supervisor): the global settings */
	MSG_SV_RELOAD,          /* ask: a config file again, as a diff */
	MSG_SV_METRICS,         /* tell (client): my counters changed */
	MSG_CL_INPUT,  /* ask: the host's answer to a server's request */
	MSG_CL_INPUTS, /* ask: the server requests waiting */
	MSG_SV_SYNC,   /* tell (cluster): a client another node changed */
	MSG_CS_STATE,  /* tell (supervisor): this node's state of a client */
	MSG_SV_PEERS,  /* tell (cluster): the other live nodes' states */
	MSG_PS_LEASE,  /* ask: a token's refresh lease (a shared store) */
	MSG_CR_ROW_CHANGED, /* tell (cluster): another node wrote a token */
	MSG_CR_RESYNC,      /* tell (cluster): rows may have changed unseen */
	MSG_CL_CANCEL,      /* tell: give up on a call (its ticket) */
	MSG_SV_SNAPSHOT,    /* ask: every client's state on the stream */
	MSG_CL_SNAPSHOT,    /* tell: publish your state on the stream */
	MSG_CL_HISTORY,     /* ask: a client's last transitions */
	MSG_CL_VERSIONS,    /* ask: a client's tool-list versions */
	MSG_PS_VERSIONS,    /* ask: a client's stored tool-list versions */
	MSG_SV_UNKNOWN,     /* tell: a call whose outcome is unknown */
	MSG_SV_UNKNOWNS,    /* ask: the calls whose outcome is unknown */
	MSG_CL_DECIDE,      /* ask: approve or reject a held tool list */
	MSG_CL_APPROVALS,   /* tell: read the approved tool list again */
	MSG_COUNT           /* one past the last type; not a type */
} codec_msg_type;

_Static_assert(MSG_KERNEL_END <= MSG_BASE, "kernel types reach MSG_BASE");

/* codec_msg_valid says whether type names a message type (MSG_NONE and
 * the numbers between the two ranges do not). */
int codec_msg_valid(unsigned type);

/* codec_msg_name returns the type's name, or "?" when it names none. */
const char *codec_msg_name(unsigned type);

#endif /* CODEC_MSG_H */
