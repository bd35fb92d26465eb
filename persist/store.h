/*
 * store.h - the embedded SQLite store: schema, migrations, statements.
 *
 * One handle belongs to one thread (the persister actor owns the only
 * write handle; readers open their own read-only one).  A leaf: no
 * logging, no threads; every failure comes back as an MK_ code and a
 * one-line message naming the database file and what failed.
 *
 * Schema (PRAGMA user_version; migrations are forward-only, each in its
 * own transaction, idempotent on reopen; a newer database is refused):
 *   v1  mcp_clients        id, name, config (json; secrets as stored
 *                          values or env. references), timestamps
 *       mcp_tools          client_id, hash (SHA-256 of the canonical
 *                          list), tools (json), updated_at
 *       oauth_configs      id, client_id, config (json), updated_at
 *       oauth_tokens       client_id, mode (shared|admin|user|vk|session),
 *                          identity, access/refresh token (sealed when a
 *                          key is set), token_type, scopes, expires_at,
 *                          last_refreshed, status (active|needs_reauth)
 *       oauth_flows        state, client_id, mode, identity, pkce_verifier
 *                          (sealed), redirect_uri, status
 *                          (pending|claiming), expires_at
 *       header_credentials client_id, mode, identity, headers (sealed),
 *                          status (active|needs_update)
 *       header_flows       id, client_id, mode, identity, status,
 *                          expires_at
 */
#ifndef PERSIST_STORE_H
#define PERSIST_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_VERSION 1 /* the schema this build writes */
#define STORE_ERR_MAX 512

typedef struct store store;

/*
 * store_open opens (creating when rw) the database at path, sets WAL and
 * foreign keys, and (rw) applies every migration it lacks.  Returns 0,
 * MK_EINVAL (newer schema, not a database, corrupt: err says which),
 * MK_ESYS (cannot open), MK_ENOMEM.
 */
int store_open(store **sp, const char *path, bool readonly, char *err,
               size_t errlen);

/* store_close closes and nulls *sp; safe with NULL. */
void store_close(store **sp);

/* store_version reads the schema version (PRAGMA user_version). */
int store_version(store *s, int *version);

/* Transactions around a batch of writes. */
int  store_begin(store *s);
int  store_commit(store *s);
void store_rollback(store *s);

/* Writes return 0, MK_EINVAL when the schema refuses the row (a
 * constraint: permanent) or MK_ESYS (busy, full, read-only: worth a
 * retry). */

/* Clients: insert or replace by id; delete (tools cascade). */
int store_client_put(store *s, const char *id, const char *name,
                     const char *config_json);
int store_client_del(store *s, const char *id);

/*
 * store_tools_put writes a client's tool list unless the stored hash is
 * already hash: *written tells which.  Returns 0 or an error.
 */
int store_tools_put(store *s, const char *client_id, const char *hash,
                    const char *tools_json, bool *written);

/* Called per stored client, in name order; tools and hash may be NULL.
 * A non-zero return stops the walk and is returned. */
typedef int (*store_client_fn)(void *arg, const char *id, const char *name,
                               const char *config_json, const char *tools_json,
                               const char *hash);
int store_clients_each(store *s, store_client_fn fn, void *arg);

/* Statements that wrote a tool list since open (for the "unchanged
 * ticks write nothing" guarantee). */
uint64_t store_tool_writes(const store *s);

/* The last error's message (one line), "" if none. */
const char *store_error(const store *s);

#endif /* PERSIST_STORE_H */
