/*
 * names.h - the fixed vocabularies the API shows, defined once: the
 * seven client states, the last_failure stages and the call-latency
 * bounds.  The library counts and names with them; mcpkeep.h gives them
 * to embedders (mk_state_name, mk_stage_name, mk_latency_bound_ms), so
 * the daemon's /metrics has no copy of its own.
 */
#ifndef CODEC_NAMES_H
#define CODEC_NAMES_H

#include <stdint.h>

#define CODEC_STATES         7  /* healthy ... degraded */
#define CODEC_STAGES         6  /* connect ... credential */
#define CODEC_LATENCY_BOUNDS 12 /* 5 ms ... 30 s, then +Inf */

/* The i-th state ("healthy", "unstable", "needs_reauth",
 * "pending_verification", "disabled", "error", "degraded"), or NULL past
 * the last.  The client actor's cl_state numbers them in this order. */
const char *codec_state_name(unsigned i);

/* The i-th last_failure stage ("connect", "ping", "list_tools",
 * "tool_discovery", "transport_lost", "credential"), or NULL. */
const char *codec_stage_name(unsigned i);

/* The i-th call-latency bucket's upper bound in ms, or -1 past the last
 * (the +Inf bucket). */
int64_t codec_latency_bound_ms(unsigned i);

#endif /* CODEC_NAMES_H */
