/*
 * store_impl.h - the store's private state, shared by its files: store.c
 * (the handle: errors, open and close, the calls of store.h, each handed
 * to the backend), and two backends behind one table of operations -
 * tables.c (the credential tables' definitions, shared), rekey.c (secrets
 * sealed and opened, the key set up at open); SQLite: sqlite.c (the
 * connection, transactions, sealing in place), schema.c (migrations,
 * statements), rows.c (clients, tool lists, credential rows);
 * PostgreSQL: pg.c (the connection, reconnects, migrations,
 * transactions, sealing in place) and pg_rows.c (what it holds).  A
 * handle belongs to one thread (store.h): every function here runs on
 * that thread and blocks on disk or network I/O, each wait bounded.
 */
#ifndef PERSIST_STORE_IMPL_H
#define PERSIST_STORE_IMPL_H

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
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
	bool        told;   /* PostgreSQL: its writes told to every node */
	bool        leased; /* PostgreSQL: refreshed under a lease */
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

/* The channels a PostgreSQL store tells on: client changes, and a
 * node's states of its clients. */
#define STORE_CHANNEL        "mk_clients"
#define STORE_STATES_CHANNEL "mk_states"
#define STORE_ROWS_CHANNEL   "mk_rows" /* a leased row changed */

/* What a backend does: store.h's calls (each as documented there), and
 * the seal settings (store_meta) the key setup reads and writes. */
typedef struct store_ops {
	/* connects, migrates (STORE_RW), checks the version, prepares */
	int (*open)(store *s, store_mode mode);
	void (*close)(store *s);
	int (*version)(store *s, int *version);
	int (*begin)(store *s, bool durable);
	int (*commit)(store *s);
	void (*rollback)(store *s);
	int (*client_put)(store *s, const char *id, const char *name,
	                  const char *config_json);
	int (*client_del)(store *s, const char *id);
	int (*tools_put)(store *s, const char *client_id, const char *hash,
	                 const char *tools_json, const char *added,
	                 bool *written);
	int (*tool_versions)(store *s, const char *client_id, char **json);
	int (*clients_each)(store *s, store_client_fn fn, void *arg,
	                    unsigned *skipped);
	int (*row_put)(store *s, store_table t, json_t *row);
	int (*row_del)(store *s, store_table t, json_t *key);
	int (*row_get)(store *s, store_table t, json_t *key, json_t **row);
	int (*rows_each)(store *s, store_table t, store_row_fn fn, void *arg,
	                 unsigned *skipped);
	/* a store_meta value into buf (at most len bytes): *n its length,
	 * -1 when absent */
	int (*meta_get)(store *s, const char *key, uint8_t *buf, size_t len,
	                long *n);
	int (*meta_put)(store *s, const char *key, const void *v, size_t n);
	/* seals every plain secret and writes the seal check, in one
	 * transaction */
	int (*seal_all)(store *s, const uint8_t *check, size_t n);
} store_ops;

extern const store_ops store_sqlite_ops;
extern const store_ops store_pg_ops;

struct store {
	const store_ops *ops;        /* the backend */
	char            *path;       /* the file, or the URL without its
	                              * password: for messages */
	char *url;                   /* PostgreSQL: the URL as given */
	bool  keyed;                 /* key holds the seal key */
	bool  all_sealed;            /* keyed, and the seal check is written:
	                              * every sealed column's value is
	                              * sealed, a plain one refused */
	bool     durable;            /* in a FULL-sync tx */
	seal_key key;                /* when keyed */
	uint64_t tool_writes;        /* tool lists written */
	char     err[STORE_ERR_MAX]; /* the last error */
	/* SQLite */
	sqlite3      *db;                          /* the connection */
	sqlite3_stmt *st[ST_COUNT];                /* prepared statements */
	sqlite3_stmt *rs[STORE_NTABLES][RS_COUNT]; /* per credential table */
	/* PostgreSQL */
	PGconn *pq;        /* the connection */
	bool    pq_ro;     /* opened read-only */
	bool    pq_ready;  /* this session's statements are prepared */
	bool    pq_tx;     /* in a transaction: never reconnects */
	bool    pq_listen; /* LISTENs (again at every reconnect) */
	bool    pq_resync; /* reconnected since store_changes last said */
	char   *node;      /* this node, named in what it tells others */
	int64_t pq_retry;  /* no reconnect before (monotonic ns) */
};

/* store.c */
/* store_new makes a handle for location (a file or a URL) on ops, or
 * NULL with err set. */
store *store_new(const char *location, const store_ops *ops, char *err,
                 size_t errlen);
/* store_failf records a message (the store's name, then fmt): returns
 * rv. */
int store_failf(store *s, int rv, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* tables.c */
/* The credential tables, by store_table. */
extern const tabledef store_tables[STORE_NTABLES];
/* store_col_index gives column name's index in d, or -1. */
int store_col_index(const tabledef *d, const char *name);
/* store_key_list writes d's key columns, comma separated, into buf. */
void store_key_list(const tabledef *d, char *buf, size_t len);
/* A table's column lists, for its statements (mark: '?' or '$'). */
typedef struct store_sql {
	unsigned n;          /* columns */
	char     cols[512];  /* "a, b, c" */
	char     vals[128];  /* "?1, ?2, ?3" */
	char     keys[256];  /* the key columns: "a, b" */
	char     where[256]; /* "a = ?1 AND b = ?2" */
	char     set[768];   /* "c = excluded.c" (and the stamp) */
} store_sql;
void store_sql_lists(const tabledef *d, char mark, store_sql *q);
/* store_key_cols fills v[0..d->nkey) with key's values of d's key
 * columns: 0, or MK_EINVAL with the error recorded (one is missing). */
#define STORE_KEY_MAX 3 /* key columns of a table at most */
int store_key_cols(store *s, const tabledef *d, json_t *key, const char **v);
/* store_key_bind hands t's key columns of key to bind, in order (k from
 * 0): a backend's statement parameters.  0 or MK_EINVAL (none bound). */
int store_key_bind(store *s, store_table t, json_t *key,
                   void (*bind)(void *arg, unsigned k, const char *v),
                   void *arg);
/* store_client_aad writes the additional data a client's sealed config
 * is bound to (store_row_key is a credential row's). */
void store_client_aad(char *aad, size_t len, const char *id);
/* store_unopened records why a sealed column's value was refused - rv,
 * store_open_value's: MK_EINVAL plain in a sealed store, else it does
 * not open - naming the row (of table by its first key) and the column,
 * never the value: returns MK_EPROTO.  store_client_skip records the
 * same of a stored client's config (named by id and name), counts it in
 * *skipped, and returns what the reading goes on with: 0, or MK_ENOMEM,
 * which ends it. */
int store_unopened(store *s, int rv, const char *table, const char *key,
                   const char *col);
int store_client_skip(store *s, int rv, const char *id, const char *name,
                      unsigned *skipped);

/* rekey.c */
/* store_key_setup sets up the seal key at open (store.h: Sealing):
 * without secret, refuses a sealed store; with one, makes or reads the
 * salt, checks the key, and (readonly false) seals every plain value. */
int store_key_setup(store *s, bool readonly, const char *secret);
/* store_seal seals text for aad with the store's key: *out, *n
 * malloc'd.  Returns 0 or an error recorded in s. */
int store_seal(store *s, const char *aad, const char *text, uint8_t **out,
               size_t *n);
/* store_open_value opens a stored value (v, n bytes) of a sealed column:
 * a sealed one unsealed with aad; a plain one copied, unless the store
 * is sealed (all_sealed: only a writer without the key, or one around
 * mcpkeep, wrote it).  *out malloc'd and NUL-terminated.  Returns 0,
 * MK_EINVAL (plain, in a sealed store), MK_EPROTO (does not open) or
 * MK_ENOMEM. */
int store_open_value(store *s, const uint8_t *v, size_t n, const char *aad,
                     char **out);

/* sqlite.c */
/* sq_fail_db records what failed with SQLite's own error: returns its
 * MK_ code. */
int sq_fail_db(store *s, const char *what);
/* sq_exec runs stmt (SQL text, no rows): 0, or sq_fail_db(what). */
int sq_exec(store *s, const char *what, const char *stmt);
/* sq_connect opens the connection with the pragmas every handle needs
 * (create: the file is made when missing). */
int sq_connect(store *s, store_mode mode, bool create);
/* sq_bind_secret binds text (sealed with aad when the store has a key)
 * to q's slot i. */
int sq_bind_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                   const char *text);
/* sq_column_secret reads column i of q as text (store_open_value): *out
 * malloc'd (NULL for a NULL column).  Returns 0, or MK_EINVAL (plain, in
 * a sealed store) / MK_EPROTO (does not open) / MK_ENOMEM. */
int sq_column_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                     char **out);

/* schema.c */
int sq_version(store *s, int *version);
/* sq_migrate applies the migrations from the file's version up to upto,
 * each in its own transaction; a newer file is MK_EINVAL. */
int sq_migrate(store *s, int upto);
/* sq_prepare_all prepares every statement (s->st, s->rs). */
int sq_prepare_all(store *s);

/* rows.c: store.h's calls, on SQLite */
int sq_client_put(store *s, const char *id, const char *name,
                  const char *config_json);
int sq_client_del(store *s, const char *id);
int sq_tools_put(store *s, const char *client_id, const char *hash,
                 const char *tools_json, const char *added, bool *written);
int sq_tool_versions(store *s, const char *client_id, char **json);
int sq_clients_each(store *s, store_client_fn fn, void *arg,
                    unsigned *skipped);
int sq_row_put(store *s, store_table t, json_t *row);
int sq_row_del(store *s, store_table t, json_t *key);
int sq_row_get(store *s, store_table t, json_t *key, json_t **row);
int sq_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
                 unsigned *skipped);

/* pg.c */
/* pg_ok tells whether r is a success, else records what failed (the
 * server's own message) and sets *rv to its MK_ code. */
bool pg_ok(store *s, PGresult *r, const char *what, int *rv);
/* pg_exec runs SQL text (no parameters, any rows discarded). */
int pg_exec(store *s, const char *what, const char *sql);
/* pg_ready reconnects a lost connection (at most once a second) and
 * prepares the statements: 0 or MK_ESYS. */
int pg_ready(store *s);

/* pg_cluster.c: the cluster's calls (store.h) */
/* pg_told_row writes what a leased row's change tells the others. */
void pg_told_row(store *s, store_table t, json_t *row, char *buf, size_t len);
/* pg_prepare_cluster prepares the cluster's statements. */
int pg_prepare_cluster(store *s);
int pg_listen(store *s, int *fd);
int pg_heartbeat(store *s, int interval_ms);
int pg_node_state(store *s, const char *client_id, const char *state,
                  const char *failure);
int pg_node_states(store *s, store_state_fn fn, void *arg);
int pg_node_leave(store *s);
int pg_lease_take(store *s, store_table t, json_t *key, int ttl_ms,
                  int64_t *gen, json_t **row);
int pg_lease_put(store *s, store_table t, json_t *row, int64_t gen,
                 bool *written);
int pg_lease_drop(store *s, store_table t, json_t *key, int64_t gen);
int pg_flow_claim(store *s, const char *state, json_t **row);
int pg_changes(store *s, store_change_fn fn, void *arg, bool *resync, int *fd);
int pg_client_get(store *s, const char *id, store_client_fn fn, void *arg);

/* pg_rows.c: store.h's calls, on PostgreSQL */
#define NPARAMS (NCOLS_MAX + 6) /* a row, its stamp and a fenced write's */

/* The parameters of one statement. */
typedef struct pgargs {
	int         n;
	const char *v[NPARAMS];
	int         len[NPARAMS];
	int         fmt[NPARAMS]; /* 0 text, 1 binary */
	uint8_t    *own[NPARAMS]; /* sealed values, freed after */
	char        num[NPARAMS][24];
} pgargs;
void pg_arg_text(pgargs *a, const char *v);
void pg_arg_int(pgargs *a, long long v);
/* pg_arg_secret: a sealed column's value (sealed when keyed). */
int  pg_arg_secret(store *s, pgargs *a, const char *aad, const char *text);
void pg_args_free(pgargs *a);
/* pg_run runs prepared statement name with a's parameters (freed): the
 * result, or NULL with *rv set (the error recorded as what). */
PGresult *pg_run(store *s, const char *name, pgargs *a, const char *what,
                 int *rv);
/* pg_bind_row binds row's columns of t, then the stamp, to a. */
int pg_bind_row(store *s, store_table t, json_t *row, pgargs *a);
/* pg_prepare prepares one statement of this session. */
int pg_prepare(store *s, const char *name, const char *sql);
/* pg_run_text runs prepared statement name with n text parameters (NULL
 * for NULL): the result, or NULL with *rv set and the error recorded as
 * what.  Outside a transaction a lost connection is made again first. */
PGresult *pg_run_text(store *s, const char *name, int n, const char *const *v,
                      const char *what, int *rv);
/* pg_prepare_all prepares this session's statements. */
int pg_prepare_all(store *s);
int pg_client_put(store *s, const char *id, const char *name,
                  const char *config_json);
int pg_client_del(store *s, const char *id);
int pg_tools_put(store *s, const char *client_id, const char *hash,
                 const char *tools_json, const char *added, bool *written);
int pg_tool_versions(store *s, const char *client_id, char **json);
int pg_clients_each(store *s, store_client_fn fn, void *arg,
                    unsigned *skipped);
int pg_row_put(store *s, store_table t, json_t *row);
int pg_row_del(store *s, store_table t, json_t *key);
int pg_row_get(store *s, store_table t, json_t *key, json_t **row);
int pg_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
                 unsigned *skipped);
int pg_meta_get(store *s, const char *key, uint8_t *buf, size_t len, long *n);
int pg_meta_put(store *s, const char *key, const void *v, size_t n);
int pg_seal_all(store *s, const uint8_t *check, size_t n);

#endif /* PERSIST_STORE_IMPL_H */
