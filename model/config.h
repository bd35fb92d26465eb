/*
 * config.h - config.json: the clients' configuration and the daemon's
 * settings, validated into structs.
 *
 * Any string of a config file may be "env.NAME", read from the
 * environment (a missing variable is an error naming it).  A client
 * that did not come from a file (the API's) is literal: its "env.X" is
 * the text "env.X", never looked up, so no caller learns a variable's
 * value or whether it exists.  Which strings of a
 * client are literal is its literal mask: NULL (none: a file's client),
 * JSON true (all: the API's), or an object of the config's shape whose
 * true leaves mark the literal strings (a file's client changed through
 * the API: what the patch brought is literal, what it kept keeps its
 * meaning).  Unknown keys and invalid values are errors naming the
 * field and the client; a file with any error yields nothing (nothing
 * half-applied).  Pure: no I/O but getenv, no logging.
 */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_MAX_CALLS_MAX    100000 /* max_concurrent_calls at most */
#define CFG_SYNC_DEFAULT_MS  (10 * 60 * 1000)   /* tool_sync_interval */
#define CFG_EXEC_DEFAULT_MS  (30 * 1000)        /* tool_execution_timeout */
#define CFG_CACHE_TTL_MAX_MS (24 * 3600 * 1000) /* a cache_results ttl */
#define CFG_ERR_MAX          512
#define VKEY_MIN             16 /* bytes of a virtual key's value */

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

/* What a client does with a tool the server changed (tool_changes). */
typedef enum cfg_changes {
	CFG_CHANGES_DEFAULT, /* none given: mcp.tool_changes, else accept */
	CFG_CHANGES_ACCEPT,  /* takes it */
	CFG_CHANGES_HOLD,    /* holds a changed or new tool until approved */
	CFG_CHANGES_BLOCK,   /* refuses it until the config changes */
} cfg_changes;

/* cfg_changes_of reads a tool_changes value ("accept", "hold", "block"):
 * a cfg_changes, or -1 when it is none of them. */
int cfg_changes_of(const json_t *v);

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
	bool     sticky;    /* sticky (one session kept), else per-call */
	bool     tools_all; /* tools_to_execute is ["*"] */
	char   **tools;     /* tools_to_execute names, NULL-terminated */
	bool     ping;      /* is_ping_available, default true */
	int64_t  sync_ms;   /* tool_sync_interval; 0: the global one */
	int64_t  exec_ms;   /* tool_execution_timeout; 0: the global one */
	unsigned max_calls; /* max_concurrent_calls: calls in flight at
	                     * once (more wait within their deadline); 0:
	                     * no limit */
	bool    disabled;   /* disabled */
	json_t *oauth;      /* oauth_config, resolved (secrets!), or NULL */
	json_t *exchange;   /* token_exchange, resolved (secrets!), or NULL */
	json_t *cache;      /* cache_results as {tool: ttl ms}, or NULL */
	int     changes;    /* tool_changes: a cfg_changes */
	json_t *raw;        /* the object as given (env. refs kept) */
	json_t *literal;    /* its literal mask (above), or NULL */
} cfg_client;

/* The key that carries the literal mask in a stored config. */
#define CFG_LITERAL_KEY "$literal"

/* The whole file. */
typedef struct cfg_file {
	cfg_client **clients;        /* mcp.client_configs */
	size_t       nclients;       /* entries in clients */
	int64_t      sync_ms;        /* mcp.tool_sync_interval */
	int64_t      exec_ms;        /* mcp.tool_execution_timeout */
	unsigned     start_conc;     /* mcp.stdio_start_concurrency, or 0 */
	int          changes;        /* mcp.tool_changes: a cfg_changes */
	char        *store_path;     /* store.path, or NULL */
	char        *store_url;      /* store.url, or NULL */
	char        *node_id;        /* cluster.node_id, or NULL */
	int64_t      heartbeat_ms;   /* cluster.heartbeat_interval, 0: unset */
	char        *listen;         /* server.listen, or NULL */
	char        *admin_token;    /* server.admin_token, or NULL (secret) */
	char       **streams;        /* server.stream, NULL-terminated */
	char       **origins;        /* server.allowed_origins, or NULL */
	bool         stream_public;  /* server.stream_public */
	char        *metrics_token;  /* server.metrics_token (secret) */
	char   *client_metadata_url; /* server.client_metadata_url, or NULL */
	json_t *vkeys;               /* server.virtual_keys, values resolved
	                              * (secrets), or NULL */
	unsigned inputs;             /* server.inputs: a bit each of
	                              * elicitation, sampling, roots (as
	                              * mk_options' MK_INPUT_*) */
	json_t *roots;               /* server.roots, or NULL */
	json_t *groups;              /* server.tool_groups, or NULL */
	char   *otlp_endpoint;       /* telemetry.otlp_endpoint, or NULL */
} cfg_file;

/*
 * cfg_client_parse validates one client object, resolving its env.
 * references except where the literal mask literal (NULL: none, json
 * true: all) marks a string literal; *out keeps a reference to obj and
 * literal.  On 0, *out is the caller's (cfg_client_free).  On error,
 * err holds one line naming the client and the field (never a
 * variable's value, nor a literal string's existence in the
 * environment).  Returns 0, MK_EINVAL or MK_ENOMEM.
 */
int cfg_client_parse(json_t *obj, json_t *literal, cfg_client **out, char *err,
                     size_t errlen);

/* cfg_name_valid says whether s is a valid client name: 1 to 64 of
 * [A-Za-z0-9_] (so that it needs no escaping anywhere it is shown). */
bool cfg_name_valid(const char *s);

/* cfg_client_stored gives the config to store: raw, with the literal
 * mask under CFG_LITERAL_KEY when there is one (so a literal client
 * stays literal after a restart).  New reference, or NULL. */
json_t *cfg_client_stored(const cfg_client *c);

/* cfg_client_parse_stored is cfg_client_parse of what cfg_client_stored
 * gave: the mask taken out of the object (a mask that is not an object
 * makes every string literal); a config stored without one resolves
 * its references, as a file's does.  Returns as cfg_client_parse. */
int cfg_client_parse_stored(json_t *stored, cfg_client **out, char *err,
                            size_t errlen);

/* cfg_literal_patched gives the literal mask of c's config after patch
 * (top-level fields replaced, as an update does): a literal client
 * stays literal; otherwise c's mask, where every string of patch equal
 * to c's at the same place keeps its meaning and every other env.
 * string of patch is literal.  New reference, or NULL (none literal). */
json_t *cfg_literal_patched(const cfg_client *c, json_t *patch);

/* cfg_client_free frees c and nulls *cp; safe with NULL. */
void cfg_client_free(cfg_client **cp);

/* cfg_client_redacted gives the client's config as given, with every
 * secret value replaced by "<redacted>" (env. references are kept: they
 * name a variable, not a secret; a literal "env." string is a value and
 * redacted like any).  Never a resolved value: stdio args, say, are
 * shown as given, references as references.  New reference, or NULL. */
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
/* cfg_file_check (config_check.c): text checked for an operator -
 * *out gets a JSON array of {"level": "error" | "warning", "path",
 * "message"}: each client's first error and the file's, or, for a valid
 * file, what is valid but likely wrong; file (may be NULL) gets the file
 * parsed when it is valid (cfg_file_free), else NULL.  Returns 0 (no
 * error), MK_EINVAL or MK_ENOMEM. */
int cfg_file_check(const char *text, size_t len, json_t **out,
                   cfg_file **file);
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
/* cfg_oauth_alone: auth type a with oauth_config oauth is an oauth
 * client whose grant_type is client_credentials: it acts on its own
 * behalf, so no admin verifies it (no pending_verification) and no
 * browser is involved; cfg_acts_alone asks it of a parsed client */
bool cfg_oauth_alone(cfg_auth a, const json_t *oauth);
bool cfg_acts_alone(const cfg_client *c);

#endif /* MODEL_CONFIG_H */
