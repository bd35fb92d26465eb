/*
 * store_impl.h - the store's private state, shared by its files: store.c
 * (errors, open and close, transactions), schema.c (migrations, the
 * credential tables' definitions, statements), rekey.c (secrets sealed
 * and opened, the key set up at open, plain values sealed in place),
 * rows.c (clients, tool lists, credential rows).  A handle belongs to
 * one thread (store.h): every function here runs on that thread and
 * blocks on disk I/O (and briefly on another process's lock).
 */
#ifndef PERSIST_STORE_IMPL_H
#define PERSIST_STORE_IMPL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "persist/seal.h"
#include "persist/store.h"

/* The credential tables: columns (the first nkey are the primary key),
 * the ones sealed at rest, and the timestamp the store keeps. */
#define NCOLS_MAX 12
typedef struct tabledef {
	const char *name;            /* SQL name */
	const char *cols[NCOLS_MAX]; /* NULL-terminated */
	unsigned    nkey;            /* leading key columns */
	unsigned    sealed;          /* bit i: cols[i] is sealed */
	const char *stamp;           /* set to now at every write */
	bool        stamp_on_insert; /* only when the row is created */
} tabledef;

/* The fixed statements (schema.c's sql[]), in s->st. */
enum {
	ST_CLIENT_PUT,
	ST_CLIENT_DEL,
	ST_CLIENT_CONFIG,
	ST_TOOLS_HASH,
	ST_TOOLS_PUT,
	ST_CLIENTS_EACH,
	ST_META_GET,
	ST_META_PUT,
	ST_COUNT
};

/* A table's statements, built from its tabledef at open. */
enum { RS_PUT, RS_DEL, RS_EACH, RS_DEL_CLIENT, RS_GET, RS_COUNT };

struct store {
	sqlite3      *db;                          /* the connection */
	sqlite3_stmt *st[ST_COUNT];                /* prepared statements */
	sqlite3_stmt *rs[STORE_NTABLES][RS_COUNT]; /* per credential table */
	char         *path;                        /* for messages */
	bool          keyed;                       /* key holds the seal key */
	bool          durable;                     /* in a FULL-sync tx */
	seal_key      key;                         /* when keyed */
	uint64_t      tool_writes;                 /* tool lists written */
	char          err[STORE_ERR_MAX];          /* the last error */
};

/* store.c */
/* store_fail_db records what failed with SQLite's own error: returns its
 * MK_ code. */
int store_fail_db(store *s, const char *what);
/* store_failf records a message (the file's name, then fmt): returns
 * rv. */
int store_failf(store *s, int rv, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* store_exec runs stmt (SQL text, no rows): 0, or store_fail_db(what). */
int store_exec(store *s, const char *what, const char *stmt);

/* schema.c */
/* The credential tables, by store_table. */
extern const tabledef store_tables[STORE_NTABLES];
/* store_migrate applies the migrations from the file's version up to
 * upto, each in its own transaction; a newer file is MK_EINVAL. */
int store_migrate(store *s, int upto);
/* store_prepare_all prepares every statement (s->st, s->rs). */
int store_prepare_all(store *s);

/* rekey.c */
/* store_key_setup sets up the seal key at open (store.h: Sealing):
 * without secret, refuses a sealed store; with one, makes or reads the
 * salt, checks the key, and (readonly false) seals every plain value. */
int store_key_setup(store *s, bool readonly, const char *secret);
/* store_bind_secret binds text (sealed with aad when the store has a
 * key) to q's slot i. */
int store_bind_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                      const char *text);
/* store_column_secret reads column i of q as text, unsealing it: *out
 * malloc'd (NULL for a NULL column).  Returns 0, or MK_EPROTO (does not
 * open) / MK_ENOMEM. */
int store_column_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                        char **out);

#endif /* PERSIST_STORE_IMPL_H */
