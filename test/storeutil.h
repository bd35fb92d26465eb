/*
 * storeutil.h - the store's contract checks both backends' tests run
 * (store_test on SQLite, pgstore_test on PostgreSQL).
 */
#ifndef TEST_STOREUTIL_H
#define TEST_STOREUTIL_H

#include "persist/store.h"

/* A client's tool-list versions (id: a stored client): appended only with
 * a written list, in order, the last STORE_TOOL_VERSIONS kept; none for
 * a client without tools. */
void storeutil_versions(store *s, const char *id);

/* A client's tool-list approval (id: a client, deleted by the
 * check): one row, written whole, read back as written; deleting the
 * client takes it. */
void storeutil_approvals(store *s, const char *id);

#endif /* TEST_STOREUTIL_H */
