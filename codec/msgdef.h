/*
 * msgdef.h - typed inbox messages: one definition, both ends use it.
 *
 * A message's fields are written once, as an X-macro list in its actor's
 * header:
 *
 *   #define CL_CALL_FIELDS(F, S)                          \
 *   	F(S, STR, tool, "the tool's name")                 \
 *   	F(S, INT, timeout_ms, "0: the client's")
 *   CODEC_MSG_STRUCT(cl_call_msg, CL_CALL_FIELDS)
 *
 * which declares the struct (char *tool; int64_t timeout_ms;), its field
 * table cl_call_msg_fields (defined by CODEC_MSG_FIELDS in one .c) and the
 * typed pair cl_call_msg_pack / cl_call_msg_unpack plus cl_call_msg_clear.
 * The wire is a msgpack map keyed by the field names.  A field added to
 * the list reaches both ends, and the actor's header table of messages
 * is rendered from the same definitions (codec_msg_doc; the msgdoc test
 * fails when a header's table differs).
 *
 * Field types: STR (char *, malloc'd by unpack, NULL when absent; pack
 * leaves a NULL out), NSTR (a STR whose NULL is packed as nil: the key is
 * always there), SECRET (a STR that clear overwrites before freeing it),
 * INT (int64_t, 0 when absent), BOOL (bool, false when absent) and
 * SUB(T) (a T *, a nested map of T's fields: NULL is nil; unpack
 * allocates it, clear frees it) and LIST(T) ({T *items; size_t n}, an
 * array of such maps: unpack allocates the items, clear frees them).
 * Messages never cross a process: the definitions are the only contract.
 */
#ifndef CODEC_MSGDEF_H
#define CODEC_MSGDEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/mp.h"

typedef enum codec_ftype {
	CODEC_F_STR,    /* char *: text, JSON text included */
	CODEC_F_NSTR,   /* char *: text, nil when NULL */
	CODEC_F_SECRET, /* char *: a secret; clear cleanses it */
	CODEC_F_INT,    /* int64_t */
	CODEC_F_BOOL,   /* bool */
	CODEC_F_SUB,    /* a struct's pointer: a nested map, nil when NULL */
	CODEC_F_LIST    /* structs: an array of nested maps */
} codec_ftype;

/* A LIST field as the codec sees it (every LIST(T) member has this
 * layout, its items typed). */
typedef struct codec_list {
	void  *items; /* n structs of the list's fields, NULL when n is 0 */
	size_t n;
} codec_list;

struct codec_fields;

/* One field of a message. */
typedef struct codec_field {
	const char                *name; /* the map key, the member's name */
	codec_ftype                type; /* its type */
	const struct codec_fields *sub;  /* a SUB's or a LIST's fields */
	size_t                     off;  /* offsetof in the struct */
	const char                *doc;  /* what it holds, for the table */
} codec_field;

/* The fields of one message struct (n == 0: the payload is {}). */
typedef struct codec_fields {
	const char        *name; /* the struct's name */
	const codec_field *f;    /* the fields, in wire order */
	size_t             n;    /* how many */
	size_t size; /* sizeof the struct (CODEC_MSG_MAX at most) */
} codec_fields;

/* The most bytes a message struct may take: a receiver unpacks one into a
 * buffer of this size on its stack (kn_route). */
#define CODEC_MSG_MAX 512

/* One message type, as its actor's header documents it. */
typedef struct codec_msgdef {
	unsigned            type;  /* MSG_* */
	const char         *name;  /* its name, "MSG_..." (CODEC_MSG) */
	const char         *kind;  /* "ask", "tell" or "tell|ask" */
	const codec_fields *req;   /* the payload */
	const codec_fields *reply; /* an ask's reply on success, or NULL */
	const codec_fields *fail;  /* its error reply when not {"error"} */
	const char         *doc;   /* one line: what it does */
} codec_msgdef;

/* CODEC_OF(S, p) is the field table of S and p, checked to point to an
 * S: the two arguments a typed send takes. */
#define CODEC_OF(S, p) &S##_fields, (1 ? (p) : (const S *)0)

/* CODEC_MSG(MSG_X) fills a codec_msgdef's type and name. */
#define CODEC_MSG(t) t, #t

/* The payload of a message without fields, and its bytes: {}.  In a
 * message list (below) codec_no names it, and codec_nil a reply that is
 * not there (a tell's) or an error reply that is the usual {"error"}. */
extern const codec_fields codec_no_fields;
typedef struct codec_no   codec_no; /* never defined: a handler's NULL */
#define codec_nil_fields (*(const codec_fields *)0)
#define CODEC_EMPTY      "\x80"
#define CODEC_EMPTY_LEN  1

/* codec_msg_pack writes st (a struct of fields f) into w (mp_w_init'd by
 * the caller, who sends w->sb and calls mp_w_fini).  Never fails. */
void codec_msg_pack(const codec_fields *f, const void *st, mp_w *w);

/* codec_msg_unpack fills st from buf[0..len): every field zero (NULL,
 * 0, false) first, then each one the map carries with the right type.
 * Returns 0, or MK_EPROTO when buf is not one map (st is zeroed, nothing
 * to clear).  On 0 the caller owns the strings: codec_msg_clear. */
int codec_msg_unpack(const codec_fields *f, const void *buf, size_t len,
                     void *st);

/* codec_msg_packed returns st (a struct of the fields f) packed, in a
 * buffer the caller frees with codec_msg_wipe.  Never fails. */
msgpack_sbuffer codec_msg_packed(const codec_fields *f, const void *st);

/* codec_msg_wipe frees sb, the bytes of a struct of the fields f (packed
 * by codec_msg_packed or into an mp_w): overwritten first when a field is
 * SECRET. */
void codec_msg_wipe(const codec_fields *f, msgpack_sbuffer *sb);

/* codec_msg_clear frees st's strings (cleansing SECRET ones) and zeroes
 * it; calling it twice is safe. */
void codec_msg_clear(const codec_fields *f, void *st);

/* codec_msg_doc renders the message table of defs[0..n) as the comment
 * lines an actor header carries (" *   ..." each, with a trailing
 * newline).  Returns malloc'd text, or NULL when out of memory. */
char *codec_msg_doc(const codec_msgdef *defs, size_t n);

/* The X-macro glue (see the top of this file). */
#define CODEC_CTYPE_STR    char *
#define CODEC_CTYPE_NSTR   char *
#define CODEC_CTYPE_SECRET char *
#define CODEC_CTYPE_INT    int64_t
#define CODEC_CTYPE_BOOL   bool
#define CODEC_CTYPE_SUB(T) struct T *
#define CODEC_CTYPE_LIST(T)                                                   \
	struct {                                                              \
		struct T *items;                                              \
		size_t    n;                                                  \
	}
#define CODEC_FT_STR              CODEC_F_STR, NULL
#define CODEC_FT_NSTR             CODEC_F_NSTR, NULL
#define CODEC_FT_SECRET           CODEC_F_SECRET, NULL
#define CODEC_FT_INT              CODEC_F_INT, NULL
#define CODEC_FT_BOOL             CODEC_F_BOOL, NULL
#define CODEC_FT_SUB(T)           CODEC_F_SUB, &T##_fields
#define CODEC_FT_LIST(T)          CODEC_F_LIST, &T##_fields
#define CODEC_MEMBER_(S, t, n, d) CODEC_CTYPE_##t n;
#define CODEC_FIELD_(S, t, n, d)  {#n, CODEC_FT_##t, offsetof(S, n), d},

#define CODEC_MSG_STRUCT(S, FIELDS)                                           \
	typedef struct S {                                                    \
		FIELDS(CODEC_MEMBER_, S)                                      \
	} S;                                                                  \
	extern const codec_fields S##_fields;                                 \
	static inline void        S##_pack(const S *m, mp_w *w)               \
	{                                                                     \
		codec_msg_pack(&S##_fields, m, w);                            \
	}                                                                     \
	static inline int S##_unpack(const void *data, size_t len, S *m)      \
	{                                                                     \
		return (codec_msg_unpack(&S##_fields, data, len, m));         \
	}                                                                     \
	static inline void S##_clear(S *m)                                    \
	{                                                                     \
		codec_msg_clear(&S##_fields, m);                              \
	}

#define CODEC_MSG_FIELDS(S, FIELDS)                                           \
	_Static_assert(sizeof(S) <= CODEC_MSG_MAX, #S " is too big");         \
	static const codec_field S##_list[] = {FIELDS(CODEC_FIELD_, S)};      \
	const codec_fields       S##_fields = {                               \
	              #S, S##_list, sizeof(S##_list) / sizeof(S##_list[0]),   \
	              sizeof(S)}

/*
 * An actor's messages are one list in its <x>_msg.h, a row each:
 *
 *   #define CL_MESSAGES(M)                                          \
 *   	M(MSG_CL_CALL, ask, cl_call_msg, cl_result_msg, cl_failed_msg, \
 *   	  cl_on_call, "call a tool")
 *
 * the type, its kind (ask, tell, or tellask: a tell that may be asked),
 * the payload's struct, the reply's (codec_no: {}; codec_nil: none, a
 * tell's), the error reply's (codec_nil: {"error"}), the handler
 * (kn_route) and one line of what it does.  CODEC_MSG_ENUM numbers the
 * types from the actor's base (actors/msgbase.h), CODEC_MSG_DEFS makes
 * the table its header renders and the kernel routes by.
 */
#define CODEC_KIND_ask                                "ask"
#define CODEC_KIND_tell                               "tell"
#define CODEC_KIND_tellask                            "tell|ask"
#define CODEC_MSG_TYPE_(T, k, req, rep, fail, h, doc) T,
#define CODEC_MSG_DEF_(T, k, req, rep, fail, h, doc)                          \
	{                                                                     \
	        T,                                                            \
	        #T,                                                           \
	        CODEC_KIND_##k,                                               \
	        &req##_fields,                                                \
	        &rep##_fields,                                                \
	        &fail##_fields,                                               \
	        doc},
#define CODEC_MSG_ENUM(P, BASE, LIST)                                         \
	enum { P##_BEFORE = (BASE)-1, LIST(CODEC_MSG_TYPE_) P##_END }
#define CODEC_MSG_DEFS(NAME, LIST)                                            \
	const codec_msgdef NAME[]   = {LIST(CODEC_MSG_DEF_)};                 \
	const size_t       NAME##_n = sizeof(NAME) / sizeof(NAME[0])

#endif /* CODEC_MSGDEF_H */
