/*
 * persister_msg.h - the persistence actor's messages: what its peers send
 * it and what it answers (persister.h says what it does with them).
 *
 * Messages: the definitions below, rendered by the msgdoc test (it fails
 * when this table differs; `msgdoc_test --write` rewrites it).  An error
 * reply has a non-zero status and {"error": text}.  MSG_PS_CLIENT_DEL
 * takes the client's tools and credential rows with it; MSG_PS_LOAD,
 * MSG_PS_ROW_GET, MSG_PS_LEASE and MSG_PS_STATS flush pending writes first (a
 * row is read as the store holds it).
 *
 * <msgdoc>
 *   MSG_PS_CLIENT_PUT tell|ask: store a client (an ask: durable)
 *     id     str    the client's id
 *     name   str    its name
 *     config str    its config, JSON text
 *     ticket int    an acknowledged change's (its writes leave the queue if
 *                   the flush fails), 0: none
 *     ok:     {}
 *
 *   MSG_PS_CLIENT_DEL tell|ask: forget a client (an ask: durable)
 *     id     str    the client's id
 *     ticket int    an acknowledged change's (its writes leave the queue if
 *                   the flush fails), 0: none
 *     ok:     {}
 *
 *   MSG_PS_TOOLS_PUT tell: store a changed tool list
 *     id      str    the client's id
 *     hash    str    the tool list's hash
 *     tools   str    the tool list, JSON text
 *     version str    the version it makes, JSON object text (persist/hash.h:
 *                    digest, at, count, diff), or absent
 *
 *   MSG_PS_ROW_PUT tell|ask: store a credential row (an ask: durable)
 *     table  str    a credential table's name
 *     row    secret the row, JSON object text (store_row_put)
 *     ticket int    an acknowledged change's (its writes leave the queue if
 *                   the flush fails), 0: none
 *     ok:     {}
 *
 *   MSG_PS_ROW_DEL tell|ask: delete a credential row by key (an ask: durable)
 *     table  str    a credential table's name
 *     key    secret the row's key columns, JSON object text
 *     ticket int    an acknowledged change's (its writes leave the queue if
 *                   the flush fails), 0: none
 *     ok:     {}
 *
 *   MSG_PS_LOAD ask: every stored client, with its tools
 *     {}
 *     ok:     clients str    JSON text: [{id, name, config: object, tools:
 *                            array|null, hash}]
 *
 *   MSG_PS_ROWS ask: every row of a credential table
 *     table str    a credential table's name
 *     ok:     rows secret JSON text: [objects]
 *
 *   MSG_PS_ROW_GET ask: one credential row by key
 *     table  str    a credential table's name
 *     key    secret the row's key columns, JSON object text
 *     ticket int    an acknowledged change's (its writes leave the queue if
 *                   the flush fails), 0: none
 *     ok:     row        secret the row, JSON object text; absent: none
 *             unreadable bool   there is a row, but it cannot be read (a plain
 *                               value in a sealed store, or one that does not
 *                               open): refused
 *
 *   MSG_PS_VERSIONS ask: a client's stored tool-list versions (MK_ESYS: the
 *                        store cannot be read)
 *     id str    the client's id
 *     ok:     json str    its tool-list versions, JSON array text, oldest
 *                         first (store_tool_versions)
 *
 *   MSG_PS_SYNC ask: answered once every write queued before it is durable
 *                    (MK_ESYS: not yet, kept and retried; with a ticket
 *                    MK_ESTORE: its writes refused, out of the queue)
 *     ticket int    the acknowledged change waited for (refused: its writes
 *                   leave the queue), 0: none
 *     ok:     {}
 *
 *   MSG_PS_STATS ask: statement counters, store health
 *     {}
 *     ok:     tool_writes int    tool lists written
 *             flushes     int    transactions committed
 *             failures    int    flushes that failed
 *             dropped     int    rows the schema refused
 *             queued      int    writes waiting
 *             healthy     bool   the store takes writes
 *             sealed      bool   the store is encrypted
 *             error       str    why not healthy ("" when healthy)
 *
 *   MSG_PS_LEASE ask: a token's refresh lease, a shared store's (store.h)
 *     op     str    take, put (the refreshed row), drop, claim (a flow)
 *     table  str    a credential table's name (oauth_tokens)
 *     row    secret the row (put) or its key columns, JSON text
 *     gen    int    put, drop: the lease's generation
 *     ttl_ms int    take: how long the lease holds
 *     ok:     gen     int    take: the lease's generation, 0: another node's
 *             written bool   put: written under the lease
 *             row     secret take: the row now; claim: the flow's; absent:
 *                            none
 * </msgdoc>
 */
#ifndef ACTORS_PERSISTER_MSG_H
#define ACTORS_PERSISTER_MSG_H

#include "actors/msgbase.h"
#include "codec/mp.h"
#include "codec/msgdef.h"

/* ---- messages (their fields; the table above is rendered from these) */

#define PS_CLIENT_FIELDS(F, S)                                                \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, name, "its name")                                           \
	F(S, STR, config, "its config, JSON text")                            \
	F(S, INT, ticket,                                                     \
	  "an acknowledged change's (its writes leave the queue if the "      \
	  "flush fails), 0: none")
CODEC_MSG_STRUCT(ps_client_msg, PS_CLIENT_FIELDS)

#define PS_ID_FIELDS(F, S)                                                    \
	F(S, STR, id, "the client's id")                                      \
	F(S, INT, ticket,                                                     \
	  "an acknowledged change's (its writes leave the queue if the "      \
	  "flush fails), 0: none")
CODEC_MSG_STRUCT(ps_id_msg, PS_ID_FIELDS)

#define PS_TOOLS_FIELDS(F, S)                                                 \
	F(S, STR, id, "the client's id")                                      \
	F(S, STR, hash, "the tool list's hash")                               \
	F(S, STR, tools, "the tool list, JSON text")                          \
	F(S, STR, version,                                                    \
	  "the version it makes, JSON object text (persist/hash.h: digest, "  \
	  "at, count, diff), or absent")
CODEC_MSG_STRUCT(ps_tools_msg, PS_TOOLS_FIELDS)

#define PS_CLIENT_ID_FIELDS(F, S) F(S, STR, id, "the client's id")
CODEC_MSG_STRUCT(ps_client_id_msg, PS_CLIENT_ID_FIELDS)

#define PS_VERSIONS_FIELDS(F, S)                                              \
	F(S, STR, json,                                                       \
	  "its tool-list versions, JSON array text, oldest first "            \
	  "(store_tool_versions)")
CODEC_MSG_STRUCT(ps_versions_msg, PS_VERSIONS_FIELDS)

#define PS_ROW_FIELDS(F, S)                                                   \
	F(S, STR, table, "a credential table's name")                         \
	F(S, SECRET, row, "the row, JSON object text (store_row_put)")        \
	F(S, INT, ticket,                                                     \
	  "an acknowledged change's (its writes leave the queue if the "      \
	  "flush fails), 0: none")
CODEC_MSG_STRUCT(ps_row_msg, PS_ROW_FIELDS)

#define PS_KEY_FIELDS(F, S)                                                   \
	F(S, STR, table, "a credential table's name")                         \
	F(S, SECRET, key, "the row's key columns, JSON object text")          \
	F(S, INT, ticket,                                                     \
	  "an acknowledged change's (its writes leave the queue if the "      \
	  "flush fails), 0: none")
CODEC_MSG_STRUCT(ps_key_msg, PS_KEY_FIELDS)

#define PS_TABLE_FIELDS(F, S) F(S, STR, table, "a credential table's name")
CODEC_MSG_STRUCT(ps_table_msg, PS_TABLE_FIELDS)

#define PS_CLIENTS_FIELDS(F, S)                                               \
	F(S, STR, clients,                                                    \
	  "JSON text: [{id, name, config: object, tools: array|null, "        \
	  "hash}]")
CODEC_MSG_STRUCT(ps_clients_msg, PS_CLIENTS_FIELDS)

#define PS_ROWS_FIELDS(F, S) F(S, SECRET, rows, "JSON text: [objects]")
CODEC_MSG_STRUCT(ps_rows_msg, PS_ROWS_FIELDS)

#define PS_ROW_FOUND_FIELDS(F, S)                                             \
	F(S, SECRET, row, "the row, JSON object text; absent: none")          \
	F(S, BOOL, unreadable,                                                \
	  "there is a row, but it cannot be read (a plain value in a sealed " \
	  "store, or one that does not open): refused")
CODEC_MSG_STRUCT(ps_found_msg, PS_ROW_FOUND_FIELDS)

#define PS_LEASE_FIELDS(F, S)                                                 \
	F(S, STR, op, "take, put (the refreshed row), drop, claim (a flow)")  \
	F(S, STR, table, "a credential table's name (oauth_tokens)")          \
	F(S, SECRET, row, "the row (put) or its key columns, JSON text")      \
	F(S, INT, gen, "put, drop: the lease's generation")                   \
	F(S, INT, ttl_ms, "take: how long the lease holds")
CODEC_MSG_STRUCT(ps_lease_msg, PS_LEASE_FIELDS)

#define PS_LEASED_FIELDS(F, S)                                                \
	F(S, INT, gen, "take: the lease's generation, 0: another node's")     \
	F(S, BOOL, written, "put: written under the lease")                   \
	F(S, SECRET, row, "take: the row now; claim: the flow's; absent: none")
CODEC_MSG_STRUCT(ps_leased_msg, PS_LEASED_FIELDS)

#define PS_STATS_FIELDS(F, S)                                                 \
	F(S, INT, tool_writes, "tool lists written")                          \
	F(S, INT, flushes, "transactions committed")                          \
	F(S, INT, failures, "flushes that failed")                            \
	F(S, INT, dropped, "rows the schema refused")                         \
	F(S, INT, queued, "writes waiting")                                   \
	F(S, BOOL, healthy, "the store takes writes")                         \
	F(S, BOOL, sealed, "the store is encrypted")                          \
	F(S, STR, error, "why not healthy (\"\" when healthy)")
CODEC_MSG_STRUCT(ps_stats_msg, PS_STATS_FIELDS)

#define PS_SYNC_FIELDS(F, S)                                                  \
	F(S, INT, ticket,                                                     \
	  "the acknowledged change waited for (refused: its writes leave "    \
	  "the queue), 0: none")
CODEC_MSG_STRUCT(ps_sync_msg, PS_SYNC_FIELDS)

/* The persister's messages, as the table above shows them. */
/* The "store" event of the state stream: the store started failing, or
 * is written again. */
#define PS_STORE_EVENT_FIELDS(F, S)                                           \
	F(S, BOOL, healthy, "writes reach the store")                         \
	F(S, STR, error, "why it cannot be written; \"\" when healthy")
CODEC_MSG_STRUCT(ps_store_event, PS_STORE_EVENT_FIELDS)

/* ---- the list (codec/msgdef.h): the table above is rendered from it */

#define PS_MESSAGES(M)                                                        \
	M(MSG_PS_CLIENT_PUT, tellask, ps_client_msg, codec_no, codec_nil,     \
	  on_client_put, "store a client (an ask: durable)")                  \
	M(MSG_PS_CLIENT_DEL, tellask, ps_id_msg, codec_no, codec_nil,         \
	  on_client_del, "forget a client (an ask: durable)")                 \
	M(MSG_PS_TOOLS_PUT, tell, ps_tools_msg, codec_nil, codec_nil,         \
	  on_tools_put, "store a changed tool list")                          \
	M(MSG_PS_ROW_PUT, tellask, ps_row_msg, codec_no, codec_nil,           \
	  on_row_put, "store a credential row (an ask: durable)")             \
	M(MSG_PS_ROW_DEL, tellask, ps_key_msg, codec_no, codec_nil,           \
	  on_row_del, "delete a credential row by key (an ask: durable)")     \
	M(MSG_PS_LOAD, ask, codec_no, ps_clients_msg, codec_nil, on_load,     \
	  "every stored client, with its tools")                              \
	M(MSG_PS_ROWS, ask, ps_table_msg, ps_rows_msg, codec_nil, on_rows,    \
	  "every row of a credential table")                                  \
	M(MSG_PS_ROW_GET, ask, ps_key_msg, ps_found_msg, codec_nil,           \
	  on_row_get, "one credential row by key")                            \
	M(MSG_PS_VERSIONS, ask, ps_client_id_msg, ps_versions_msg, codec_nil, \
	  on_versions,                                                        \
	  "a client's stored tool-list versions (MK_ESYS: the store cannot "  \
	  "be read)")                                                         \
	M(MSG_PS_SYNC, ask, ps_sync_msg, codec_no, codec_nil, on_sync,        \
	  "answered once every write queued before it is durable (MK_ESYS: "  \
	  "not yet, kept and retried; with a ticket MK_ESTORE: its writes "   \
	  "refused, out of the queue)")                                       \
	M(MSG_PS_STATS, ask, codec_no, ps_stats_msg, codec_nil, on_stats,     \
	  "statement counters, store health")                                 \
	M(MSG_PS_LEASE, ask, ps_lease_msg, ps_leased_msg, codec_nil,          \
	  on_lease, "a token's refresh lease, a shared store's (store.h)")
CODEC_MSG_ENUM(PS_MSG, PS_MSG_BASE, PS_MESSAGES);
MSG_FITS(PS_MSG, PS_MSG_BASE);

extern const codec_msgdef persister_msgs[];
extern const size_t       persister_msgs_n;

#endif /* ACTORS_PERSISTER_MSG_H */
