/*
 * kernel_impl.h - structures shared by kernel.c and actor.c only.
 */
#ifndef KN_KERNEL_IMPL_H
#define KN_KERNEL_IMPL_H

#include <assert.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "actors/kernel/kernel.h"
#include "actors/kernel/log.h"
#include "actors/kernel/timer.h"
#include "codec/idmap.h"
#include "codec/strmap.h"

#define KN_SHARDS 16

/* One shard of the pending-ask table. */
typedef struct kn_shard {
	pthread_mutex_t mtx; /* guards map */
	idmap           map; /* corr -> kn_pending */
} kn_shard;

enum kn_pending_kind {
	KN_PENDING_SLOT,  /* a blocked thread waits on the slot */
	KN_PENDING_ACTOR, /* the reply goes to an actor's inbox */
	KN_PENDING_FN,    /* a callback runs on the replier's thread */
};

/* An ask waiting for its reply.  Lives in exactly one shard while
 * pending; whoever removes it from the shard completes it. */
typedef struct kn_pending {
	uint64_t             corr;   /* correlation id */
	enum kn_pending_kind kind;   /* who waits */
	pthread_mutex_t      mtx;    /* slot: guards done/status/data */
	pthread_cond_t       cv;     /* slot: signalled when done */
	bool                 done;   /* slot: the reply is in */
	int                  status; /* slot: reply status */
	void                *data;   /* slot: reply payload (malloc'd) */
	size_t               len;    /* slot: bytes in data */
	kn_actor            *asker;  /* actor: held reference */
	kn_answer_fn         fn;     /* fn: the callback */
	void                *fn_arg; /* fn: its argument */
} kn_pending;

struct kn_kernel {
	atomic_int           refs;       /* owner + one per actor */
	atomic_bool          closing;    /* kn_kernel_close has begun */
	unsigned             id;         /* makes inproc addresses unique */
	size_t               stack_size; /* actor thread stacks */
	kn_logger            log;        /* its actor threads log through it */
	atomic_uint_fast64_t next_corr;  /* last correlation id used */
	atomic_uint_fast64_t next_actor; /* last actor id used */
	kn_shard             shards[KN_SHARDS]; /* pending asks */
	pthread_mutex_t      reg_mtx; /* guards reg and the actor list */
	strmap               reg;     /* name -> actor (reg_ent) */
	strmap               aliases; /* alias -> actor (alias_ent) */
	kn_actor            *newest;  /* running actors, newest first */

	/* counters, relaxed atomics */
	atomic_uint_fast64_t n_actors;   /* running actors */
	atomic_uint_fast64_t n_messages; /* delivered to handlers */
	atomic_uint_fast64_t n_asks;     /* asks sent */
	atomic_uint_fast64_t n_late;     /* replies dropped as late */
	atomic_uint_fast64_t n_expired;  /* asks expired before handling */
	atomic_uint_fast64_t n_errors;   /* handler errors */
};

/* Watched fd. */
typedef struct kn_watch {
	int      fd;     /* the fd */
	short    events; /* poll events */
	kn_fd_fn fn;     /* callback */
	void    *arg;    /* callback argument */
} kn_watch;

struct kn_actor {
	/* shared, set before the thread starts or atomic */
	kn_kernel           *k; /* holds a kernel reference */
	char                 name[KN_NAME_MAX + 1]; /* registry name */
	uint64_t             id;                    /* unique in the kernel */
	atomic_int           refs;    /* references (see kernel.h) */
	atomic_bool          closing; /* stop has begun: new sends refused */
	atomic_bool          stop;    /* stop asked (a flag, not a message) */
	atomic_int           senders; /* threads inside a send to this actor */
	atomic_uint_fast64_t committed; /* messages sent successfully */
	atomic_bool asleep; /* the actor may block in its wait: senders
	                     * must write wake_fd */
	atomic_uint_fast64_t n_errors; /* handler errors */
	nng_socket           pull;    /* inbox; received on the actor thread */
	nng_socket           push;    /* shared by every sender */
	int                  wake_fd; /* eventfd: written when asleep */
	_Atomic(void *)      wake_arg; /* ops->wake's argument, or NULL */
	const kn_actor_ops  *ops;      /* behaviour */
	void                *arg;      /* init argument */
	pthread_t            thread;   /* the actor's thread */
	pthread_mutex_t stop_mtx; /* serialises kn_stop; guards the below */
	pthread_cond_t  ready_cv; /* READY handshake */
	bool            ready;    /* init finished (start_rc is set) */
	int             start_rc; /* init's result */
	bool            joined;   /* the thread was joined */
	strmap_ent      reg_ent;  /* in the registry, key name; reg_mtx */
	char alias[KN_ALIAS_MAX + 1]; /* a second registry name, or "";
	                               * reg_mtx */
	strmap_ent alias_ent;         /* in aliases when alias is set, key
	                               * alias; reg_mtx */
	kn_actor *older;              /* kernel's actor list; reg_mtx */
	kn_actor *newer;              /* kernel's actor list; reg_mtx */
	bool      listed;             /* in registry and list; reg_mtx */

	/* actor thread only */
	pthread_t tid;        /* pthread_self() there (KN_ON_THREAD) */
	void     *state;      /* what init returned */
	bool      terminated; /* stop seen: leave the loop */
	uint64_t  received;   /* messages taken from the inbox */
	nng_aio  *rx_aio;     /* reused for every receive */
	kn_timers timers;     /* one-shot timers */
	idmap     asks;       /* corr -> kn_async, own async asks */
	kn_watch *watches;    /* watched fds */
	unsigned  nwatches;   /* entries in watches */
	unsigned  capwatches; /* allocated watches */
};

/* KN_ON_THREAD asserts that the caller runs on the actor a's own thread:
 * the actor-thread-only calls (kernel.h says which) check it. */
#define KN_ON_THREAD(a) assert(pthread_equal((a)->tid, pthread_self()))

/* kernel.c */
void        kn_kernel_hold(kn_kernel *k);
void        kn_kernel_release(kn_kernel *k);
int         kn_registry_add(kn_kernel *k, kn_actor *a);
void        kn_registry_remove(kn_kernel *k, kn_actor *a);
int         kn_pending_add(kn_kernel *k, kn_pending *p);
kn_pending *kn_pending_take(kn_kernel *k, uint64_t corr);
void        kn_pending_complete(kn_kernel *k, kn_pending *p, int status,
                                const void *data, size_t len);
int         kn_map_nng(int nng_rv);

/* send.c */
/* kn_send_env sends env to the actor (a new sender is refused once its
 * stop began).  Any thread; blocks while the inbox is full, a few
 * seconds at most.  Returns as kn_tell. */
int kn_send_env(kn_actor *to, const codec_env *env);
/* kn_wake wakes the actor out of its wait when it announced it may
 * block there (asleep).  Any thread counted in the actor's senders (its
 * fini waits for them); never blocks. */
void kn_wake(kn_actor *to);

/* kn_route_of: the definition of type among a's routes (kn_routes), or
 * NULL; *i its index. */
const codec_msgdef *kn_route_of(const kn_actor *a, unsigned type, size_t *i);

#endif /* KN_KERNEL_IMPL_H */
