/*
 * config.h - config.json: the clients' configuration and the daemon's
 * settings (SPEC section 10), validated into structs.
 *
 * Any string may be "env.NAME", read from the environment (a missing
 * variable is an error naming it).  Unknown keys and invalid values are
 * errors naming the field and the client; a file with any error yields
 * nothing (nothing half-applied).  Pure: no I/O but getenv, no logging.
 */
#ifndef CODEC_CONFIG_H
#define CODEC_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_SYNC_DEFAULT_MS (10 * 60 * 1000) /* tool_sync_interval */
#define CFG_EXEC_DEFAULT_MS (30 * 1000)      /* tool_execution_timeout */
#define CFG_ERR_MAX         512
#define VKEY_MIN            16 /* bytes of a virtual key's value */

typedef enum cfg_conn {
	CFG_HTTP,  /* Streamable HTTP */
	CFG_SSE,   /* legacy HTTP+SSE */
	CFG_STDIO, /* child process */
} cfg_conn;

typedef enum cfg_auth {
	CFG_AUTH_NONE,             /* no credential */
	CFG_AUTH_HEADERS,          /* static headers */
	CFG_AUTH_OAUTH,            /* one shared OAuth token */
	CFG_AUTH_PER_USER_HEADERS, /* each identity's own headers */
	CFG_AUTH_PER_USER_OAUTH,   /* each identity's own OAuth token */
	CFG_AUTH_TOKEN_EXCHANGE,   /* RFC 8693 per identity */
} cfg_auth;

/* One MCP client, resolved (env. references replaced). */
typedef struct cfg_client {
	char    *name;      /* unique; letters, digits, '_' */
	char    *id;        /* client_id, generated when absent */
	cfg_conn conn;      /* connection_type */
	char    *url;       /* connection_string (http/sse) */
	char    *command;   /* stdio_config.command */
	char   **args;      /* stdio_config.args, NULL-terminated */
	char   **envs;      /* stdio_config.envs, NULL-terminated */
	cfg_auth auth;      /* auth_type */
	char   **headers;   /* "Name: value", NULL-terminated */
	bool     sticky;    /* the connection mode (SPEC section 1) */
	bool     tools_all; /* tools_to_execute is ["*"] */
	char   **tools;     /* tools_to_execute names, NULL-terminated */
	bool     ping;      /* is_ping_available, default true */
	int64_t  sync_ms;   /* tool_sync_interval; 0: the global one */
	int64_t  exec_ms;   /* tool_execution_timeout; 0: the global one */
	bool     disabled;  /* disabled */
	json_t  *oauth;     /* oauth_config, resolved (secrets!), or NULL */
	json_t  *exchange;  /* token_exchange, resolved (secrets!), or NULL */
	json_t  *raw;       /* the object as given (env. refs kept) */
} cfg_client;

/* The whole file. */
typedef struct cfg_file {
	cfg_client **clients;       /* mcp.client_configs */
	size_t       nclients;      /* entries in clients */
	int64_t      sync_ms;       /* mcp.tool_sync_interval */
	int64_t      exec_ms;       /* mcp.tool_execution_timeout */
	char        *store_path;    /* store.path, or NULL */
	char        *listen;        /* server.listen, or NULL */
	char        *admin_token;   /* server.admin_token, or NULL (secret) */
	char       **streams;       /* server.stream, NULL-terminated */
	char       **origins;       /* server.allowed_origins, or NULL */
	bool         stream_public; /* server.stream_public */
	char        *metrics_token; /* server.metrics_token (secret) */
	json_t      *vkeys;         /* server.virtual_keys, values resolved
	                             * (secrets), or NULL */
} cfg_file;

/*
 * cfg_client_parse validates one client object.  On 0, *out is the
 * caller's (cfg_client_free).  On error, err holds one line naming the
 * client and the field.  Returns 0, MK_EINVAL or MK_ENOMEM.
 */
int cfg_client_parse(json_t *obj, cfg_client **out, char *err, size_t errlen);

/* cfg_client_free frees c and nulls *cp; safe with NULL. */
void cfg_client_free(cfg_client **cp);

/* cfg_client_redacted gives the client's config as given, with every
 * secret value replaced by "<redacted>" (env. references are kept: they
 * name a variable, not a secret).  New reference, or NULL. */
json_t *cfg_client_redacted(const cfg_client *c);

/* cfg_unredact puts c's own values back into patch (an update) wherever
 * the patch carries the redacted form cfg_client_redacted shows for the
 * same place: a view's config sent back as an update keeps the secrets
 * it could not see.  Modifies patch. */
void cfg_unredact(json_t *patch, const cfg_client *c);

/*
 * cfg_file_parse validates a whole config.json text (len bytes, at most
 * 4 MiB).  Client names and ids must be unique, and no id another client's
 * name.  Returns 0 with *out the caller's (cfg_file_free), or MK_EINVAL /
 * MK_ENOMEM / MK_ETOOBIG with err.
 */
int cfg_file_parse(const char *text, size_t len, cfg_file **out, char *err,
                   size_t errlen);

void cfg_file_free(cfg_file **fp);

/* cfg_duration reads "250ms", "30s", "10m", "1h" or an integer number of
 * seconds into milliseconds.  Returns 0 or -1. */
int cfg_duration(json_t *v, int64_t *ms);

/* Names for messages and views. */
const char *cfg_conn_name(cfg_conn c);
const char *cfg_auth_name(cfg_auth a);
bool        cfg_auth_per_user(cfg_auth a);

#endif /* CODEC_CONFIG_H */
