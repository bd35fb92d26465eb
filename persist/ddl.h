/*
 * ddl.h - the columns both stores' schemas declare alike (schema.c's
 * SQLite, pg.c's PostgreSQL): their types differ elsewhere (BLOB and
 * BYTEA, INTEGER and BIGINT), these do not.
 */
#ifndef PERSIST_DDL_H
#define PERSIST_DDL_H

/* A caller's credential or flow: whose, for which client. */
#define DDL_CALLER                                                            \
	" client_id TEXT NOT NULL,"                                           \
	" mode TEXT NOT NULL,"                                                \
	" identity TEXT NOT NULL,"

/* An OAuth sign-in's table, up to its verifier. */
#define DDL_OAUTH_FLOWS                                                       \
	"CREATE TABLE oauth_flows ("                                          \
	" state TEXT PRIMARY KEY,"                                            \
	" client_id TEXT NOT NULL,"                                           \
	" mode TEXT NOT NULL,"                                                \
	" identity TEXT NOT NULL DEFAULT '',"

/* A pending sign-in: one node claims it at a time. */
#define DDL_FLOW_STATUS                                                       \
	" status TEXT NOT NULL CHECK (status IN ('pending','claiming')),"

#endif /* PERSIST_DDL_H */
