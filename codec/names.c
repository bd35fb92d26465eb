/*
 * names.c - the fixed vocabularies the API shows (see names.h).
 */
#include "codec/names.h"

#include <stddef.h>

static const char *const states[CODEC_STATES] = {
        "healthy",  "unstable", "needs_reauth", "pending_verification",
        "disabled", "error",    "degraded"};

static const char *const stages[CODEC_STAGES] = {
        "connect",        "ping",           "list_tools",
        "tool_discovery", "transport_lost", "credential"};

static const int64_t bounds_ms[CODEC_LATENCY_BOUNDS] = {
        5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};

const char *
codec_state_name(unsigned i)
{
	return (i < CODEC_STATES ? states[i] : NULL);
}

const char *
codec_stage_name(unsigned i)
{
	return (i < CODEC_STAGES ? stages[i] : NULL);
}

int64_t
codec_latency_bound_ms(unsigned i)
{
	return (i < CODEC_LATENCY_BOUNDS ? bounds_ms[i] : -1);
}
