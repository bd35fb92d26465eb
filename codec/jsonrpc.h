/*
 * jsonrpc.h - JSON-RPC 2.0 framing for MCP: building requests and
 * notifications, and validating what a server sends.
 *
 * Pure (no I/O, no logging).  Incoming text is parsed with jansson under a
 * size limit; a message that is not valid JSON-RPC is an error for that
 * message with a readable reason, never a crash.
 */
#ifndef CODEC_JSONRPC_H
#define CODEC_JSONRPC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CODEC_JR_MAX_DEFAULT (16u * 1024u * 1024u) /* bytes per message */

typedef enum codec_jr_kind {
	JR_RESULT,       /* a response carrying "result" */
	JR_ERROR,        /* a response carrying "error" */
	JR_NOTIFICATION, /* "method" and no "id" */
	JR_REQUEST,      /* "method" and an "id": server-to-client request */
} codec_jr_kind;

/* A validated incoming message; pointers borrow from the json_t. */
typedef struct codec_jr_msg {
	codec_jr_kind kind;      /* see above */
	int64_t       id;        /* JR_RESULT/JR_ERROR/JR_REQUEST; a response
	                          * id that is not an integer is rejected */
	const char *method;      /* JR_NOTIFICATION/JR_REQUEST */
	json_t     *params;      /* method params or NULL */
	json_t     *result;      /* JR_RESULT */
	int64_t     err_code;    /* JR_ERROR */
	const char *err_message; /* JR_ERROR */
	json_t     *raw;         /* the whole message */
} codec_jr_msg;

/*
 * codec_jr_parse parses len bytes of text into one message.  max 0 means
 * CODEC_JR_MAX_DEFAULT.  On success *root owns the JSON (json_decref it)
 * and msg borrows from it.  On failure err holds a one-line reason.
 * Returns 0, MK_ETOOBIG or MK_EPROTO.
 */
int codec_jr_parse(const char *buf, size_t len, size_t max, json_t **root,
                   codec_jr_msg *msg, char *err, size_t errlen);

/* codec_jr_classify validates an already parsed message (as parse). */
int codec_jr_classify(json_t *root, codec_jr_msg *msg, char *err,
                      size_t errlen);

/*
 * codec_jr_request / codec_jr_notification build a message and serialize
 * it compactly; params is borrowed and may be NULL.  id must be > 0;
 * method is a plain name (nothing JSON would escape).
 * Return a malloc'd NUL-terminated string, or NULL when out of memory.
 */
char *codec_jr_request(int64_t id, const char *method, json_t *params);
char *codec_jr_notification(const char *method, json_t *params);

#endif /* CODEC_JSONRPC_H */
