/*
 * sv_impl.h - the supervisor actor's private state, shared by its files:
 * actor.c (dispatch, replies, ask contexts, lifecycle ops, stats),
 * registry.c (the client table, its indexes, the views clients push),
 * schedule.c (health ticks with jitter), boot.c (add, load, restore,
 * reload, global settings), list.c (the list view's filter, sort and
 * page: pure).
 *
 * DESIGN: one thread; its table of clients is touched only there.  API
 * threads ask it; client actors tell it their views and answer its
 * asynchronous asks (connect, check, lifecycle), so it never waits on a
 * client - except to join a client's thread on remove, which is bounded
 * by that client's own shutdown.
 *
 * Threads: every function below runs on the supervisor's thread, but
 * list.c's, which touch only their arguments (any thread).  None blocks
 * but sv_drop, which joins the client's thread.
 */
#ifndef ACTORS_SV_IMPL_H
#define ACTORS_SV_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/supervisor/supervisor.h"
#include "codec/strmap.h"

#define SV_ASK_MS      60000 /* a client's answer to a check or lifecycle op */
#define SV_SYNC_MS     10000 /* the store making a lifecycle op durable */
#define SV_STOP_WAVE   64    /* clients asked to stop at once at the end */
#define SV_UNKNOWN_MAX 1000  /* calls the unknown-outcome ledger keeps */

enum { BY_ID, BY_NAME }; /* the entry indexes */

typedef struct entry {
	char          *id;        /* client_id */
	char          *name;      /* name */
	kn_actor      *actor;     /* the client actor (owner reference) */
	char          *view;      /* its latest view, JSON text */
	model_failure *lf;        /* the last_failure it shows, or NULL */
	char          *metrics;   /* its latest counters, JSON text, or NULL */
	cl_state       state;     /* its latest state (the runtime's) */
	cl_state       shown;     /* the state its view shows (filters) */
	char           conn[8];   /* connection_type */
	char           auth[24];  /* auth_type */
	int64_t        sync_ms;   /* healthy interval */
	uint64_t       tick;      /* timer id, 0 none */
	int64_t        due_ns;    /* when the tick should fire */
	char           due[32];   /* that in RFC 3339 (next_check_at) */
	bool           checking;  /* a check ask is out */
	bool           connected; /* the first connect answered */
	bool           sticky;    /* its connection mode */
	bool           restored;  /* came back from the store */
	bool           storing;   /* an API change waits for the store */
	const sv_peer *peers;     /* its states on the other live nodes, in
	                           * sv->peers (MSG_SV_PEERS) */
	size_t npeers;            /* how many */
	char  *pub; /* the state and failure told the cluster, or NULL */
	struct sv_self *sv;     /* the supervisor, for timer callbacks */
	strmap_ent      ent[2]; /* in sv->idx[BY_ID] (key id) and
	                         * sv->idx[BY_NAME] (key name) */
	size_t   pos;           /* index in sv->all */
	uint64_t serial;        /* this entry among all made (a client
	                         * replaced under the same id is another) */
} entry;

typedef struct sv_self {
	sv_args      a;        /* settings */
	strmap       idx[2];   /* BY_ID, BY_NAME: id or name -> entry */
	entry      **all;      /* every entry */
	size_t       n;        /* entries in all */
	size_t       cap;      /* allocated all */
	uint64_t     pings;    /* pings answered */
	uint64_t     ticks;    /* ticks fired */
	uint64_t     late[40]; /* tick lateness histogram, log2 us */
	uint32_t     rnd;      /* jitter state */
	uint64_t     tickets;  /* the last API change's ticket (persister.h) */
	uint64_t     serials;  /* the last entry's serial */
	sv_peers_msg peers;    /* the other nodes' states as last told
	                        * (MSG_SV_PEERS), by client_id */
	json_t *unknown;       /* the ledger: calls whose outcome is unknown,
	                        * the last SV_UNKNOWN_MAX, oldest first */
	json_t *file;          /* the clients of the config file last loaded or
	                        * reloaded, by name (copies of their objects):
	                        * a reload's diff base; NULL before any */
} sv_self;

/* An async ask's context: what to do with the answer. */
typedef struct actx {
	sv_self     *sv;     /* the supervisor */
	char        *id;     /* the client it concerns */
	uint64_t     serial; /* ... that entry of it (start_client), or 0 */
	uint64_t     corr;   /* the API ask to answer, or 0 */
	bool         boot;   /* MSG_CL_CONNECT at boot */
	bool         check;  /* MSG_CL_CHECK for the API (MSG_SV_REFRESH) */
	uint64_t     ticket; /* an API change's: the reply waits for it */
	struct load *load;   /* MSG_SV_LOAD or _RELOAD in progress, or NULL */
	json_t      *was;    /* a reload's update: the base entry it replaces
	                      * (back in the base if the update fails) */
	int lane;            /* the boot lane that throttles it (BOOT_*),
	                      * or -1: sent at once */
	char *tools;         /* while it waits for its turn: the known
	                      * tools it carries, or NULL */
	struct actx *next;   /* the load's queue of those */
} actx;

/* A config file being booted or reloaded. */
/* A boot's connects of one kind, so many at once, the rest waiting in
 * config order: BOOT_SLOW, stdio starts and per-call discoveries (twice
 * the cores: each a process or a whole session); BOOT_NET, sticky network
 * clients' dials (BOOT_NET_AT_ONCE: each holds file descriptors until
 * its loop rests, so 10,000 do not dial at once). */
enum { BOOT_SLOW, BOOT_NET, BOOT_LANES };
#define BOOT_NET_AT_ONCE 256

typedef struct boot_lane {
	size_t conc;  /* connects at once */
	size_t out;   /* out now */
	actx  *queue; /* waiting, in config order */
	actx  *tail;  /* its last */
} boot_lane;

typedef struct load {
	struct sv_self *sv;      /* the supervisor */
	uint64_t        corr;    /* the API ask */
	size_t          left;    /* connects (and updates) not yet answered */
	size_t          count;   /* clients added */
	bool            reload;  /* MSG_SV_RELOAD: the reply is its summary */
	int             updated; /* reload: clients updated in place */
	int             removed; /* reload: clients removed */
	int             failed;  /* reload: clients not applied */
	size_t          stopped; /* clients not started: the supervisor
	                          * stopped first (the answer: MK_ECLOSED) */
	boot_lane lanes[BOOT_LANES]; /* the throttled connects */
	size_t    total; /* connects of a boot (its progress line) */
	size_t    done;  /* of them answered */
} load;

/* registry.c */
/* The entry of index w (BY_ID, BY_NAME) keyed s, or NULL. */
entry *sv_lookup(sv_self *sv, int w, const char *s);
/* The entry whose id, else whose name, is id_or_name, or NULL. */
entry *sv_find(sv_self *sv, const char *id_or_name);
/* Adds e to the table and both indexes.  Returns 0 or MK_ENOMEM (e not
 * added). */
int sv_insert(sv_self *sv, entry *e);
/* Frees an entry not (or no longer) in the table; its actor is not
 * touched. */
void sv_entry_free(entry *e);
/* Stops e's client and forgets it: its tick cancelled, out of the table,
 * its actor destroyed (blocks: joins the client's thread), e freed. */
void sv_drop(kn_actor *self, sv_self *sv, entry *e);
/* Tells the store to forget the client id (removed by an operator), its
 * write part of the API change ticket (0: none); a tell, does not wait. */
void sv_persist_del(kn_actor *self, sv_self *sv, const char *id,
                    uint64_t ticket);
/* In cluster mode, tells the cluster actor e's state and last_failure
 * when they changed since it was last told, or (gone) that e is gone. */
void sv_publish(kn_actor *self, sv_self *sv, entry *e, bool gone);
/* MSG_SV_PEERS: every entry's peers replaced. */
/* MSG_SV_METRICS: keeps a client's pushed counters. */
/* MSG_SV_VIEW: records a client's pushed view and state, and its
 * schedule follows a change. */

/* actor.c */
/* What an API change does once the store answered (sv_reply_change). */
typedef enum sv_change {
	SV_ADDED,   /* refused: the client is dropped */
	SV_REMOVED, /* stored: the client is dropped; refused: it stays */
	SV_CHANGED, /* refused: the client goes back to its config before */
} sv_change;
/* Answers corr with data (copied) once the store synced the writes that
 * came before (at once without a store); does not wait.  A failed sync
 * is logged and the reply sent (the writes stay queued). */
void sv_reply_stored(kn_actor *self, sv_self *sv, uint64_t corr,
                     const void *data, size_t len);
/* Answers the API change ticket of client id (what: its kind) with data
 * (copied) once its writes are durable; refused by the store, undoes it
 * (the writes are out of the store's queue) and answers MK_ESTORE with
 * the store's why.  The client is marked storing until then.  Without a
 * store, at once.  Does not wait. */
void sv_reply_change(kn_actor *self, sv_self *sv, uint64_t corr,
                     const void *data, size_t len, uint64_t ticket,
                     sv_change what, const char *id);
/* Answers corr with the message m (a struct of the fields f: pass
 * CODEC_OF) through sv_reply_stored. */
void sv_reply_msg(kn_actor *self, sv_self *sv, uint64_t corr,
                  const codec_fields *f, const void *m);
/* A new ask context for the client id (copied) answering corr (0: none),
 * or NULL out of memory; sv_actx_free frees it. */
actx *sv_actx_new(sv_self *sv, const char *id, uint64_t corr);
void  sv_actx_free(actx *x);

/* schedule.c */
/* (Re)arms e's health tick for its state: healthy every sync_ms,
 * unstable every unstable_ms, +-10% jitter; other states none. */
void sv_schedule(kn_actor *self, sv_self *sv, entry *e);

/* sv_checked takes a check's answer (cl_state_msg: its state, and the
 * counters the client now counts as the supervisor's). */
void sv_checked(entry *e, const void *data, size_t len);

/* boot.c: the message handlers MSG_SV_ADD, _LOAD, _RELOAD, _SETTINGS
 * (supervisor.h has their fields); each answers its ask itself, some
 * once the clients' connects answered. */
/* The handlers of boot.c's and registry.c's messages (SV_MESSAGES). */
int sv_on_add(kn_actor *self, sv_self *sv, kn_msg *msg, sv_add_msg *m);
int sv_on_load(kn_actor *self, sv_self *sv, kn_msg *msg, sv_load_msg *m);
int sv_on_reload(kn_actor *self, sv_self *sv, kn_msg *msg, sv_file_msg *m);
int sv_on_settings(kn_actor *self, sv_self *sv, kn_msg *msg,
                   sv_settings_msg *m);
int sv_on_sync(kn_actor *self, sv_self *sv, kn_msg *msg, sv_sync_msg *m);
int sv_on_peers(kn_actor *self, sv_self *sv, kn_msg *msg, sv_peers_msg *m);
/* sv_peers_find points e's peers to its states in sv->peers. */
void sv_peers_find(sv_self *sv, entry *e);
int sv_on_metrics(kn_actor *self, sv_self *sv, kn_msg *msg, sv_metrics_msg *m);
int sv_on_view(kn_actor *self, sv_self *sv, kn_msg *msg, sv_view_msg *m);

/* list.c: pure, no actor, no kernel. */
/* A list view's request: MSG_SV_LIST's filter. */
typedef struct sv_list_spec {
	json_t *filter;      /* the filter object: "state", "connection_type",
	                      * "auth_type", "search" (owned) */
	json_int_t  limit;   /* the page's size, 1..100 (default 25) */
	json_int_t  offset;  /* matches skipped before the page, >= 0 */
	bool        metrics; /* each view with its client's counters */
	const char *node;    /* this node's id (node_states) */
} sv_list_spec;
/* sv_list_spec_parse reads a filter's JSON text (NULL or "" for none)
 * into *spec; the caller json_decrefs spec->filter.  Returns 0, or
 * MK_EINVAL with a reason in err (spec untouched). */
int sv_list_spec_parse(const char *text, sv_list_spec *spec, char *err,
                       size_t errlen);
/* sv_list_page is spec's page of the n entries of all that match its
 * filter, by name: {"clients": [their views, each with "metrics" (its
 * counters, {} before the first) when spec asks], "count": the views in the
 * page, "total_count": every match}.  A client the other nodes hold too
 * shows (and is filtered by) the cluster's state (supervisor.h:
 * MSG_SV_PEERS), with "node_states" when it is not all healthy.  all is not
 * changed; an entry without a view counts but shows no view.  Returns a new
 * object, or NULL out of memory. */
json_t *sv_list_page(entry *const *all, size_t n, const sv_list_spec *spec);

#endif /* ACTORS_SV_IMPL_H */
