/*
 * store.h - the store: schema, migrations, statements, secrets sealed at
 * rest, on one of two backends - an embedded SQLite file (the default),
 * or a PostgreSQL database the nodes of a cluster share (a location
 * "postgresql://..." or "postgres://...").
 *
 * One handle belongs to one thread (the persister actor owns the only
 * write handle; readers open their own read-only one).  A leaf: no
 * logging, no threads; every failure comes back as an MK_ code and a
 * one-line message naming the database (a URL without its password) and
 * what failed.
 *
 * PostgreSQL: the same tables (pg.c has its schema's versions, in
 * mk_schema; nodes migrate one at a time under an advisory lock); every
 * wait is bounded (connecting 5 s, a statement 10 s, a lock 5 s); a
 * connection lost outside a transaction is made again, at most once a
 * second, by the next call; every commit is durable.
 *
 * SQLite schema (PRAGMA user_version; migrations are forward-only, each
 * in its own transaction, idempotent on reopen; a newer database is
 * refused):
 *   v1  mcp_clients        id, name, config (json; sealed when a key is
 *                          set), timestamps
 *       mcp_tools          client_id, hash (SHA-256 of the canonical
 *                          list), tools (json), updated_at
 *       oauth_configs      id, client_id, config (json, sealed)
 *       oauth_tokens       client_id, mode (shared|admin|user|vk|session),
 *                          identity, access/refresh token (sealed),
 *                          token_type, scopes, expires_at,
 *                          last_refreshed, status (active|needs_reauth)
 *       oauth_flows        state, client_id, mode, identity, pkce_verifier
 *                          (sealed), redirect_uri, status
 *                          (pending|claiming), expires_at
 *       header_credentials client_id, mode, identity, headers (json,
 *                          sealed), status (active|needs_update)
 *       header_flows       id, client_id, mode, identity, status,
 *                          expires_at
 *   v2  store_meta         key, value: the seal salt and a sealed check
 *                          value that tells a wrong key at open
 *       oauth_flows.data, header_flows.data: json the flow carries
 *                          (endpoints, scopes, required header keys)
 *   v3  mcp_tools.versions json: the list's last versions, oldest first
 *                          ({digest, at, count, diff}: hash.h)
 *   v4  tool_approvals     client_id, digest (the approved list's),
 *                          tools (json: the approved tool objects),
 *                          rejected (the digest of a rejected list, or
 *                          null) - sealed when a key is set, so that a
 *                          row written around mcpkeep approves nothing
 *
 * Sealing: with a key, every secret-bearing column (client configs -
 * they hold header values and client secrets - tokens, PKCE verifiers,
 * header credentials, OAuth configs) is written AES-256-GCM sealed (see
 * seal.h), bound to its table and primary key.  A store first opened with
 * a key has its plain values sealed in place, and its seal check written;
 * a sealed store opened without its key, or with another key, is
 * refused.  In a sealed store a sealed column's value must be sealed:
 * a plain one (written around mcpkeep, by SQL or by a node without the
 * key) is refused where it is read, as one that does not open is - its
 * row skipped by a walk, MK_EPROTO from a get, store_error naming the
 * table, the row's key and the column, never the value.  Without a key
 * every value is read as it is.
 */
#ifndef PERSIST_STORE_H
#define PERSIST_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_VERSION       4  /* the schema this build writes */
#define STORE_TOOL_VERSIONS 20 /* tool-list versions kept per client */
#define STORE_ERR_MAX       512

typedef struct store store;

/* The tables written as rows of named columns: the credentials', and
 * the tool-list approvals (tool_changes hold/block). */
typedef enum store_table {
	STORE_OAUTH_CONFIGS,      /* key: id */
	STORE_OAUTH_TOKENS,       /* key: client_id, mode, identity */
	STORE_OAUTH_FLOWS,        /* key: state */
	STORE_HEADER_CREDENTIALS, /* key: client_id, mode, identity */
	STORE_HEADER_FLOWS,       /* key: id */
	STORE_TOOL_APPROVALS,     /* key: client_id */
	STORE_NTABLES             /* number of tables; not a table */
} store_table;

/* How store_open opens the file. */
typedef enum store_mode {
	STORE_RW,       /* the writer: created and migrated when needed */
	STORE_RO,       /* a reader beside the writer */
	STORE_SNAPSHOT, /* read-only media: the file as it is, unchanging
	                 * (no -shm needed; what a -wal holds is not seen) */
} store_mode;

/* store_is_url tells whether location names a PostgreSQL database. */
bool store_is_url(const char *location);

/* store_display writes location as it may be shown: a path as it is, a
 * URL as postgresql://user@host:port/dbname (never its password or
 * other parameters). */
void store_display(const char *location, char *buf, size_t len);

/*
 * store_open opens the database at path (a file, or a PostgreSQL URL:
 * see above; the rest of this comment is the file's): STORE_RW creates it when
 * missing, sets WAL, secure delete and foreign keys, and applies every
 * migration it lacks.  secret is the encryption key (see seal_key_from)
 * or NULL for none.  Blocks on disk I/O, up to a short busy timeout when
 * another process holds a lock.  Returns 0, or:
 *   MK_EINVAL  refused: a newer schema, a sealed store without its key,
 *              a key that does not match;
 *   MK_EPROTO  damaged: not a database, or corrupt;
 *   MK_ESYS    cannot open or write (missing folder, read-only, locked,
 *              full): worth a retry;
 *   MK_ENOMEM;
 * with err holding one line that says which.
 */
int store_open(store **sp, const char *path, store_mode mode,
               const char *secret, char *err, size_t errlen);

/* store_close closes and nulls *sp; safe with NULL. */
void store_close(store **sp);

/* store_version reads the schema version (PRAGMA user_version). */
int store_version(store *s, int *version);

/* store_sealed tells whether this handle seals secrets (a key is set). */
bool store_sealed(const store *s);

/*
 * Transactions around a batch of writes.  store_begin(s, durable): a
 * durable transaction is synced to disk at commit (synchronous=FULL)
 * rather than at the next checkpoint.
 */
int  store_begin(store *s, bool durable);
int  store_commit(store *s);
void store_rollback(store *s);

/* Writes return 0, MK_EINVAL when the schema refuses the row (a
 * constraint: permanent) or MK_ESYS (busy, full, read-only: worth a
 * retry). */

/* Clients: insert or replace by id; delete (tools and every credential
 * row of the client go with it). */
int store_client_put(store *s, const char *id, const char *name,
                     const char *config_json);
int store_client_del(store *s, const char *id);

/*
 * store_tools_put writes a client's tool list unless the stored hash is
 * already hash: *written tells which.  When it writes, added (a JSON
 * array's text of version objects, or NULL) is appended to the client's
 * versions, the oldest beyond STORE_TOOL_VERSIONS dropped - so of nodes
 * writing the same change, one appends it.  Returns 0 or an error.
 */
int store_tools_put(store *s, const char *client_id, const char *hash,
                    const char *tools_json, const char *added, bool *written);

/* store_versions_add gives the JSON array text versions (NULL, or not
 * an array: none) with the objects of the array text added (NULL: none)
 * appended, the oldest beyond max dropped: malloc'd, or NULL out of
 * memory. */
char *store_versions_add(const char *versions, const char *added, size_t max);

/* store_tool_versions reads a client's tool-list versions, oldest first:
 * *json a malloc'd JSON array text, "[]" when it has none.  Returns 0,
 * MK_ENOMEM or MK_ESYS. */
int store_tool_versions(store *s, const char *client_id, char **json);

/* Called per stored client, in name order; tools and hash may be NULL.
 * A non-zero return stops the walk and is returned.  A row that cannot
 * be read (a sealed config that does not open, or a plain one in a sealed
 * store) is skipped and counted in *skipped, store_error naming it. */
typedef int (*store_client_fn)(void *arg, const char *id, const char *name,
                               const char *config_json, const char *tools_json,
                               const char *hash);
int store_clients_each(store *s, store_client_fn fn, void *arg,
                       unsigned *skipped);

/*
 * store_row_put inserts or replaces one row of table t.  row is a JSON
 * object of column -> string, integer or null; the key columns must be
 * strings, and a sealed column a string or null; an absent column is
 * written NULL (a put is the whole row).  Returns 0, MK_EINVAL (unknown
 * column, wrong type, a constraint) or MK_ESYS.
 */
int store_row_put(store *s, store_table t, json_t *row);

/* store_row_del deletes the row whose key columns are in key.  Returns as
 * store_row_put; deleting nothing is 0. */
int store_row_del(store *s, store_table t, json_t *key);

/* store_row_get reads the row whose key columns are in key: *row a new
 * object, or NULL when there is none.  Returns 0, MK_EINVAL, MK_EPROTO
 * (a sealed value does not open, or a plain one in a sealed store),
 * MK_ENOMEM or MK_ESYS. */
int store_row_get(store *s, store_table t, json_t *key, json_t **row);

/* Called per row (an object the callee may keep with json_incref); a
 * non-zero return stops the walk and is returned.  Rows that cannot be
 * read are skipped and counted in *skipped. */
typedef int (*store_row_fn)(void *arg, json_t *row);
int store_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
                    unsigned *skipped);

/* store_table_find maps a table name to its id, or -1. */
int store_table_find(const char *name);

/* store_table_name gives t's SQL name. */
const char *store_table_name(store_table t);

/*
 * store_row_key writes t's key columns of row into buf ("table\x1fk1\x1f
 * k2...", for coalescing writes and sealing).  Returns 0, or MK_EINVAL
 * (a key column missing or not a string) or MK_ETOOBIG.
 */
int store_row_key(store_table t, json_t *row, char *buf, size_t len);

/* Statements that wrote a tool list since open (for the "unchanged
 * ticks write nothing" guarantee). */
uint64_t store_tool_writes(const store *s);

/* The last error's message (one line), "" if none. */
const char *store_error(const store *s);

/*
 * The cluster (a PostgreSQL store; on SQLite each is MK_EINVAL).
 *
 * store_set_node names this node in what it tells the others (its own
 * changes are not told back to it).  Returns 0 or MK_ENOMEM.
 *
 * store_listen subscribes the handle to the clients other nodes write or
 * delete (told at their commit; a write of what was there already is
 * not).  *fd is the connection's socket, to wait on for POLLIN.
 *
 * store_changes reads, without blocking, what has arrived: fn per
 * changed client, written or deleted (its row is then read with
 * store_client_get), and per node whose states changed (read them with
 * store_node_states).  A lost connection is made again (at most once a
 * second): *resync then tells that changes may have been missed, and
 * *fd is the new socket (-1 while there is none: try again later).
 * Returns 0, fn's non-zero return, or MK_ESYS.
 *
 * store_client_get calls fn once with one client, as store_clients_each
 * does, or not at all when there is none.
 */
typedef enum store_change {
	STORE_CLIENT_PUT,  /* id: a client written */
	STORE_CLIENT_DEL,  /* id: a client deleted */
	STORE_NODE_STATES, /* id: a node whose states changed */
	STORE_ROW_CHANGED, /* id: a token row's key (JSON) another node
	                    * wrote: read it again */
} store_change;
typedef int (*store_change_fn)(void *arg, store_change what, const char *id);
int store_set_node(store *s, const char *node_id);
int store_listen(store *s, int *fd);
int store_changes(store *s, store_change_fn fn, void *arg, bool *resync,
                  int *fd);
int store_client_get(store *s, const char *id, store_client_fn fn, void *arg);

/*
 * Node heartbeats and states.  store_heartbeat says this node is alive,
 * and beats every interval_ms: a node unseen for 3 of its intervals (by
 * the server's clock) is not live.  store_node_state writes this node's
 * state of a client (state NULL: forgets it) with its last_failure (JSON
 * text, or NULL), telling the others when it changed.  store_node_states
 * calls fn per state the other live nodes hold (a non-zero return stops
 * it).  store_node_leave forgets this node (a clean stop), telling the
 * others.  Each returns 0, fn's return or an error.
 */
typedef int (*store_state_fn)(void *arg, const char *node_id,
                              const char *client_id, const char *state,
                              const char *failure);
int store_heartbeat(store *s, int interval_ms);
int store_node_state(store *s, const char *client_id, const char *state,
                     const char *failure);
int store_node_states(store *s, store_state_fn fn, void *arg);
int store_node_leave(store *s);

/*
 * Refresh leases: one node at a time refreshes a token (an oauth_tokens
 * row; other tables are MK_EINVAL).  store_lease_take takes the row's
 * lease for ttl_ms unless another node holds one unexpired: *gen its
 * fencing generation (0: not taken), and either way *row the row as it
 * is now, read after taking (another node may have refreshed it: then
 * no request is needed), or NULL when there is none.  store_lease_put
 * writes row (the refreshed tokens) and releases the lease, only while
 * the lease of gen is still this node's: *written tells (false: it
 * expired and another node took it).  store_lease_drop releases the
 * lease of gen unwritten.  A write or release, and every store_row_put
 * of a token, tells the other nodes (STORE_ROW_CHANGED).  Each returns 0
 * or an error.
 */
int store_lease_take(store *s, store_table t, json_t *key, int ttl_ms,
                     int64_t *gen, json_t **row);
int store_lease_put(store *s, store_table t, json_t *row, int64_t gen,
                    bool *written);
int store_lease_drop(store *s, store_table t, json_t *key, int64_t gen);

/* store_flow_claim claims the pending OAuth flow of state for this node,
 * once cluster-wide: *row the flow's row when this call claimed it, NULL
 * when it is unknown or claimed already (by any node).  Returns 0 or an
 * error. */
int store_flow_claim(store *s, const char *state, json_t **row);

/*
 * store_create_version creates a new database at path with the schema of
 * an earlier version (0 < version <= STORE_VERSION) and nothing else, so
 * tests can write an old store and watch it migrate.  Returns as
 * store_open.
 */
int store_create_version(const char *path, int version, char *err,
                         size_t errlen);

#endif /* PERSIST_STORE_H */
