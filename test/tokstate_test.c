/*
 * tokstate_test.c - a token refresh's state machine
 * (actors/credential/tokstate.c): the transition table walked state by
 * state, and each state's invariants held and broken.  Pure functions:
 * no actor, no kernel.
 */
#include <string.h>

#include "actors/credential/tokstate.h"
#include "testutil.h"

#define B(s) (1u << (s))

/* The states to reaches in one step. */
static unsigned
ways_out(tok_state from)
{
	unsigned m = 0;

	for (int to = 0; to < TOK_COUNT; to++) {
		m |= tok_allowed(from, (tok_state)to) ? B(to) : 0;
	}
	return (m);
}

/* The states from reaches in any number of steps (itself included). */
static unsigned
reach(tok_state from)
{
	unsigned seen = B(from), grew;

	do {
		grew = seen;
		for (int s = 0; s < TOK_COUNT; s++) {
			if (seen & B(s)) {
				seen |= ways_out((tok_state)s);
			}
		}
	} while (seen != grew);
	return (seen);
}

/* The states that enter to in one step. */
static unsigned
ways_in(tok_state to)
{
	unsigned m = 0;

	for (int from = 0; from < TOK_COUNT; from++) {
		m |= tok_allowed((tok_state)from, to) ? B(from) : 0;
	}
	return (m);
}

static void
names(void)
{
	for (int s = 0; s < TOK_COUNT; s++) {
		CHECK(strcmp(tok_state_name((tok_state)s), "?") != 0);
		for (int o = 0; o < s; o++) {
			CHECK(strcmp(tok_state_name((tok_state)s),
			             tok_state_name((tok_state)o)) != 0);
		}
	}
	CHECK(strcmp(tok_state_name(TOK_IDLE), "idle") == 0);
	CHECK(strcmp(tok_state_name(TOK_COUNT), "?") == 0);
	CHECK(strcmp(tok_state_name((tok_state)-1), "?") == 0);
}

/* Every refresh can end (a stop, an answer) and every state is reached
 * from IDLE: no state is a trap, none is dead. */
static void
walk(void)
{
	unsigned all = B(TOK_COUNT) - 1;

	CHECK(reach(TOK_IDLE) == all);
	for (int s = 0; s < TOK_COUNT; s++) {
		CHECK(tok_allowed((tok_state)s, TOK_IDLE));
		CHECK(reach((tok_state)s) & B(TOK_IDLE));
	}
	CHECK(!tok_allowed(TOK_COUNT, TOK_IDLE));
	CHECK(!tok_allowed(TOK_IDLE, TOK_COUNT));
}

/* What the diagram says of each way in. */
static void
edges(void)
{
	/* only an answer of the token endpoint re-registers, retries or
	 * doubts */
	CHECK(ways_in(TOK_REREGISTERING) == B(TOK_REFRESHING));
	CHECK(ways_in(TOK_UNSURE) == (B(TOK_REFRESHING) | B(TOK_UNSURE)));
	CHECK(ways_in(TOK_WAITING) == (B(TOK_IDLE) | B(TOK_REFRESHING)));
	/* another node's lease is known from a take's answer, and looked
	 * at again by another take */
	CHECK(ways_in(TOK_PEER) == B(TOK_LEASING));
	CHECK(ways_out(TOK_PEER) == (B(TOK_IDLE) | B(TOK_LEASING)));
	/* a request goes out from wherever one starts, never past
	 * another node's lease */
	CHECK(ways_in(TOK_REFRESHING) ==
	      (B(TOK_IDLE) | B(TOK_WAITING) | B(TOK_DISCOVERING) |
	       B(TOK_REREGISTERING) | B(TOK_LEASING) | B(TOK_UNSURE)));
	CHECK(!tok_allowed(TOK_REFRESHING, TOK_REFRESHING));
	/* an exchange (the only one to discover) is never leased */
	CHECK(!tok_allowed(TOK_DISCOVERING, TOK_LEASING));
	/* the refresh a registration waited for is one request: it does
	 * not discover */
	CHECK(!tok_allowed(TOK_REREGISTERING, TOK_DISCOVERING));
	/* a refresh waits for one thing: nothing is entered from a wait
	 * but what it waited for */
	CHECK(ways_out(TOK_LEASING) ==
	      (B(TOK_IDLE) | B(TOK_PEER) | B(TOK_REFRESHING)));
}

/* A fact set that holds in s. */
static tok_facts
good(tok_state s)
{
	tok_facts f = {.state = s};

	switch (s) {
	case TOK_IDLE:
		break;
	case TOK_WAITING:
		f.timer     = true;
		f.prior     = true;
		f.attempt   = 2;
		f.lease_gen = 7; /* a retry keeps its lease */
		f.waiters   = true;
		break;
	case TOK_DISCOVERING:
		f.waiters = true;
		break;
	case TOK_REREGISTERING:
		f.rereg     = true;
		f.prior     = true;
		f.lease_gen = 3;
		break;
	case TOK_LEASING:
		f.take  = true;
		f.prior = true;
		break;
	case TOK_PEER:
		f.timer = true;
		f.prior = true;
		break;
	case TOK_UNSURE:
		f.timer     = true;
		f.lease_gen = 4;
		break;
	case TOK_REFRESHING:
		f.req = true;
		f.jag = true;
		break;
	default:
		break;
	}
	return (f);
}

static void
invariants_hold(void)
{
	tok_facts f;

	for (int s = 0; s < TOK_COUNT; s++) {
		f = good((tok_state)s);
		CHECK(tok_broken(&f) == NULL);
	}
	/* unsure with a take asked instead of its timer */
	f       = good(TOK_UNSURE);
	f.timer = false;
	f.take  = true;
	CHECK(tok_broken(&f) == NULL);
}

/* Breaks a good fact set of s by what, and expects it caught. */
#define BROKEN(s, what)                                                       \
	do {                                                                  \
		tok_facts f = good(s);                                        \
		what;                                                         \
		CHECK(tok_broken(&f) != NULL);                                \
	} while (0)

static void
invariants_broken(void)
{
	CHECK(tok_broken(&(tok_facts) {.state = TOK_COUNT}) != NULL);
	/* idle holds nothing of a refresh */
	BROKEN(TOK_IDLE, f.waiters = true);
	BROKEN(TOK_IDLE, f.prior = true);
	BROKEN(TOK_IDLE, f.attempt = 1);
	BROKEN(TOK_IDLE, f.rereg = true);
	BROKEN(TOK_IDLE, f.lease_gen = 2);
	BROKEN(TOK_IDLE, f.timer = true);
	BROKEN(TOK_IDLE, f.req = true);
	/* each wait has exactly its one thing */
	BROKEN(TOK_WAITING, f.timer = false);
	BROKEN(TOK_WAITING, f.take = true);
	BROKEN(TOK_PEER, f.timer = false);
	BROKEN(TOK_PEER, f.lease_gen = 1);
	BROKEN(TOK_LEASING, f.take = false);
	BROKEN(TOK_LEASING, f.timer = true);
	BROKEN(TOK_LEASING, f.lease_gen = 1);
	BROKEN(TOK_UNSURE, f.take = true); /* and its timer */
	BROKEN(TOK_UNSURE, f.timer = false);
	BROKEN(TOK_REFRESHING, f.req = false);
	BROKEN(TOK_REFRESHING, f.timer = true);
	BROKEN(TOK_DISCOVERING, f.req = true);
	BROKEN(TOK_DISCOVERING, f.lease_gen = 1);
	BROKEN(TOK_DISCOVERING, f.rereg = true);
	BROKEN(TOK_REREGISTERING, f.rereg = false);
	BROKEN(TOK_REREGISTERING, f.jag = true);
	BROKEN(TOK_WAITING, f.lease_gen = -1);
}

int
main(int argc, char **argv)
{
	RUN_IF(names);
	RUN_IF(walk);
	RUN_IF(edges);
	RUN_IF(invariants_hold);
	RUN_IF(invariants_broken);
	return (0);
}
