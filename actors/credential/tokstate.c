/*
 * tokstate.c - a token refresh's transition table and invariants (see
 * tokstate.h for the diagram).
 */
#include <stddef.h>

#include "actors/credential/tokstate.h"

#define B(s) (1u << (s))

static const char *const names[] = {
#define TOK_NAME(s, name, doc) [s] = name,
        TOK_STATES(TOK_NAME)
#undef TOK_NAME
};
_Static_assert(sizeof(names) / sizeof(names[0]) == TOK_COUNT,
               "a name for each token state");

/*
 * Each state's ways out.  Every state may return to IDLE (an answer, a
 * refusal, a failure, a stop).  A request is started (start() in
 * refresh.c) from IDLE, from a WAITING timer, or when what it waited for
 * came (DISCOVERING, REREGISTERING): it discovers first, takes a lease
 * first (a cluster's stored token), or is sent.
 */
static const unsigned allowed[TOK_COUNT] = {
        [TOK_IDLE] = B(TOK_IDLE) | B(TOK_WAITING) | B(TOK_DISCOVERING) |
                B(TOK_LEASING) | B(TOK_REFRESHING),
        [TOK_WAITING] = B(TOK_IDLE) | B(TOK_DISCOVERING) | B(TOK_LEASING) |
                B(TOK_REFRESHING),
        /* an exchange's: never leased */
        [TOK_DISCOVERING]   = B(TOK_IDLE) | B(TOK_REFRESHING),
        [TOK_REREGISTERING] = B(TOK_IDLE) | B(TOK_LEASING) | B(TOK_REFRESHING),
        /* taken: sent; another node's: PEER; the store away: sent
         * without one */
        [TOK_LEASING] = B(TOK_IDLE) | B(TOK_PEER) | B(TOK_REFRESHING),
        [TOK_PEER]    = B(TOK_IDLE) | B(TOK_LEASING),
        /* looks (and takes) until the row settles, then sends again */
        [TOK_UNSURE] = B(TOK_IDLE) | B(TOK_UNSURE) | B(TOK_REFRESHING),
        /* (an ID-JAG redeemed is a second request of the same
         * refresh: no transition) */
        [TOK_REFRESHING] = B(TOK_IDLE) | B(TOK_WAITING) |
                B(TOK_REREGISTERING) | B(TOK_UNSURE),
};

const char *
tok_state_name(tok_state s)
{
	return ((unsigned)s < TOK_COUNT ? names[s] : "?");
}

bool
tok_allowed(tok_state from, tok_state to)
{
	return ((unsigned)from < TOK_COUNT && (unsigned)to < TOK_COUNT &&
	        (allowed[from] & B(to)) != 0);
}

const char *
tok_broken(const tok_facts *f)
{
	tok_state s     = f->state;
	bool      timed = s == TOK_WAITING || s == TOK_PEER ||
	        (s == TOK_UNSURE && !f->take);
	bool taking = s == TOK_LEASING || (s == TOK_UNSURE && !f->timer);

	if ((unsigned)s >= TOK_COUNT) {
		return ("no such state");
	}
	if (f->req != (s == TOK_REFRESHING)) {
		return ("a request is in flight exactly when refreshing");
	}
	if (f->jag && s != TOK_REFRESHING) {
		return ("an ID-JAG is held only while it is redeemed");
	}
	if (f->timer != timed) {
		return ("the timer is armed exactly when a state waits on it");
	}
	if (f->take != taking) {
		return ("a lease take is asked exactly when leasing (or unsure "
		        "and not timed)");
	}
	if (f->lease_gen < 0) {
		return ("a lease generation is 0 or positive");
	}
	if (s == TOK_IDLE &&
	    (f->waiters || f->prior || f->rereg || f->attempt != 0 ||
	     f->lease_gen != 0)) {
		return ("idle: no waiter, no refresh token spent, no attempt, "
		        "no lease");
	}
	if ((s == TOK_LEASING || s == TOK_PEER || s == TOK_DISCOVERING) &&
	    f->lease_gen != 0) {
		return ("no lease is held while one is asked for, another "
		        "node's awaited, or endpoints discovered");
	}
	if (s == TOK_REREGISTERING && !f->rereg) {
		return ("reregistering is this refresh's registration");
	}
	if (s == TOK_DISCOVERING && f->rereg) {
		return ("an exchange (which discovers) never registers again");
	}
	return (NULL);
}
