/*
 * runtime_impl.h - the runtime handle, shared by runtime.c (boot and
 * shutdown), api.c (client and tool calls) and cred.c (the credential
 * actor's calls).
 */
#ifndef RUNTIME_IMPL_H
#define RUNTIME_IMPL_H

#include <stdint.h>

#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "actors/kernel/stream.h"
#include "actors/supervisor/supervisor.h"
#include "mcpkeep.h"

#define RT_MAGIC 0x6d6b7274u /* "mkrt" while open */

struct mk_runtime {
	uint32_t   magic; /* RT_MAGIC while open */
	mk_options opts;  /* effective options */
	kn_logger  log;   /* its log settings: of the threads calling open and
	                   * close, the default while it is the newest open */
	char       stream_url[256]; /* copy of opts.stream_url */
	char       node_id[64];     /* copy of opts.node_id */
	kn_stream *stream;          /* the state stream */
	kn_kernel *kernel;          /* the actor kernel */
	sv_args    sv;              /* the supervisor's settings */
	/* the system actors (owner references; runtime.c boots them in
	 * its steps' order) */
	kn_actor  *persister;  /* the store, or NULL */
	kn_actor  *credential; /* tokens and flows */
	kn_actor  *supervisor; /* the clients */
	kn_actor  *cluster;    /* the other nodes, or NULL */
	cl_host    host;       /* what the host offers servers */
	char      *caps;       /* host.caps (owned) */
	char      *roots;      /* host.roots (owned), or NULL */
	tr_tracer *tracer;     /* spans' exporter, or NULL: off */
};

/* input.c: rt->host from the options (MK_EINVAL: inputs or roots will
 * not do), and its end */
int  rt_host_init(mk_runtime *rt);
void rt_host_fini(mk_runtime *rt);

/* rt_valid: the handle is an open runtime. */
int rt_valid(const mk_runtime *rt);

/* rt_take_error copies an actor's reply's "error" (or mk_strerror(rv))
 * into *err, malloc'd, when err is not NULL.  Never blocks; the API
 * caller's thread, or an async ask's reply callback. */
void rt_take_error(const kn_answer *a, int rv, char **err);

/* Who rt_ask asks. */
typedef enum rt_target { RT_TO_SUPERVISOR, RT_TO_CREDENTIAL } rt_target;

/* rt_ask asks the actor to the message m (a struct of the fields f: pass
 * CODEC_OF); given false (a required argument is NULL) is MK_EINVAL.
 * Blocks until the answer or timeout_ms; any thread but an actor's.  On
 * 0, *a holds the reply (the caller frees a->data); else *err (when err
 * is not NULL) says why (the caller frees it). */
int rt_ask(mk_runtime *rt, rt_target to, uint32_t type, bool given,
           const codec_fields *f, const void *m, int timeout_ms, kn_answer *a,
           char **err);

/* rt_client_ask asks the actor of client (a name or an id) to the
 * message m of the fields f (codec_no_fields: {}), as rt_ask: MK_ENOENT
 * when there is no such client.  On 0 the caller frees ans->data. */
int rt_client_ask(mk_runtime *rt, const char *client, uint32_t type,
                  const codec_fields *f, const void *m, kn_answer *ans);

/* rt_size_ok: size is a caller's struct size this library serves (the
 * ABI rules of mcpkeep.h): its size field, at most the whole struct. */
static inline int
rt_size_ok(size_t size, size_t full)
{
	return (size >= sizeof(size_t) && size <= full);
}

#endif /* RUNTIME_IMPL_H */
