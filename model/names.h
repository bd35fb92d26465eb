/*
 * names.h - the fixed vocabularies the API shows, defined once: the
 * seven client states, the last_failure stages and the call-latency
 * bounds.  The library counts and names with them; mcpkeep.h gives them
 * to embedders (mk_state_name, mk_stage_name, mk_latency_bound_ms), so
 * the daemon's /metrics has no copy of its own.
 */
#ifndef MODEL_NAMES_H
#define MODEL_NAMES_H

#include <stdint.h>

#define MODEL_STATES         7  /* healthy ... degraded */
#define MODEL_STAGES         6  /* connect ... credential */
#define MODEL_LATENCY_BOUNDS 12 /* 5 ms ... 30 s, then +Inf */

/* The i-th state ("healthy", "unstable", "needs_reauth",
 * "pending_verification", "disabled", "error", "degraded"), or NULL past
 * the last.  The client actor's cl_state numbers them in this order. */
const char *model_state_name(unsigned i);

/* The i-th last_failure stage ("connect", "ping", "list_tools",
 * "tool_discovery", "transport_lost", "credential"), or NULL. */
const char *model_stage_name(unsigned i);

/* The i-th call-latency bucket's upper bound in ms, or -1 past the last
 * (the +Inf bucket). */
int64_t model_latency_bound_ms(unsigned i);

#endif /* MODEL_NAMES_H */
