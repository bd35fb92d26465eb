/*
 * tokstate.h - the states of a token's refresh, the transitions allowed
 * between them, and what holds in each (SQLite's pager.c is the model:
 * a diagram, a transition table, an assert_pager_state).  Pure: no actor,
 * no kernel, so that its unit test walks the table alone.
 *
 * A token's refresh is in exactly one state, the one thing it waits
 * for.  Every state returns to IDLE when the refresh ends (answered,
 * refused, failed, or stopped).  "start" sends a request from IDLE, a
 * WAITING timer, or when what DISCOVERING or REREGISTERING waited for
 * came: to DISCOVERING, LEASING or REFRESHING (or IDLE: it cannot).
 *
 *   state          entered when                left, besides for IDLE
 *   IDLE           the refresh ends            start; WAITING (the gap)
 *   WAITING        an ask within CR_GAP_MS of  start, at its timer
 *                  the last request; a retry
 *                  (5xx, network: 1 s * 2^n)
 *   DISCOVERING    an ID-JAG exchange's        start, once they are known
 *                  endpoints are not known
 *   REREGISTERING  invalid_client for a        start, once registered
 *                  registered client (once)
 *   LEASING        start, a cluster's stored   REFRESHING (taken, or the
 *                  token: its lease asked      store away); PEER
 *   PEER           another node holds it       LEASING, at its timer or
 *                                              when that node's write comes
 *   UNSURE         sent without a lease and    its row looked at (a take,
 *                  refused as spent: another   UNSURE again) until it
 *                  node may have spent it      changes or CR_LEASE_MS
 *                                              passes: REFRESHING, leased
 *   REFRESHING     a request sent              WAITING, REREGISTERING,
 *                                              UNSURE
 *
 * "Needs reauthorization" is not a refresh state: it is the credential's
 * status (token.active), stored with its row, and a reauthorization (a
 * flow, another node's write) may replace the tokens while a refresh is
 * in flight - the refresh's compare-and-swap of the refresh token it
 * spent decides which tokens win.
 */
#ifndef ACTORS_CREDENTIAL_TOKSTATE_H
#define ACTORS_CREDENTIAL_TOKSTATE_H

#include <stdbool.h>
#include <stdint.h>

/* S(state, name, what it waits for) */
#define TOK_STATES(S)                                                         \
	S(TOK_IDLE, "idle", "nothing: the token is used as it is")            \
	S(TOK_WAITING, "waiting",                                             \
	  "its timer: a retry's backoff, or the gap after the last request")  \
	S(TOK_DISCOVERING, "discovering",                                     \
	  "its client's endpoints, which an ID-JAG exchange needs")           \
	S(TOK_REREGISTERING, "reregistering",                                 \
	  "its client's registration, made again (invalid_client)")           \
	S(TOK_LEASING, "leasing", "the store's answer to a lease take")       \
	S(TOK_PEER, "peer",                                                   \
	  "another node's refresh: its write, or its timer to look again")    \
	S(TOK_UNSURE, "unsure",                                               \
	  "the store's row, after a refresh without a lease was refused as "  \
	  "spent: its timer, or a take")                                      \
	S(TOK_REFRESHING, "refreshing", "the token endpoint's answer")

typedef enum tok_state {
#define TOK_ENUM(s, name, doc) s,
	TOK_STATES(TOK_ENUM)
#undef TOK_ENUM
	        TOK_COUNT
} tok_state;

/* What assert_token_state looks at of a token: whether each of its
 * refresh's parts is there. */
typedef struct tok_facts {
	tok_state state;
	bool      req;       /* a token request in flight */
	bool      jag;       /* an ID-JAG being redeemed */
	bool      timer;     /* its timer armed */
	bool      take;      /* a lease take asked */
	bool      waiters;   /* asks waiting for the refresh */
	bool      prior;     /* the refresh token it spends */
	bool      rereg;     /* this refresh registered its client again */
	int       attempt;   /* its transient failures */
	int64_t   lease_gen; /* the refresh lease held, 0 none */
} tok_facts;

/* tok_state_name is s's name ("idle", ...), or "?" for no state. */
const char *tok_state_name(tok_state s);

/* tok_allowed says whether a token in from may enter to. */
bool tok_allowed(tok_state from, tok_state to);

/* tok_broken returns the invariant of f's state that f breaks (a text),
 * or NULL when all hold. */
const char *tok_broken(const tok_facts *f);

#endif /* ACTORS_CREDENTIAL_TOKSTATE_H */
