/*
 * names.c - the fixed vocabularies the API shows (see names.h).
 */
#include "model/names.h"

#include <stddef.h>

static const char *const states[] = {
        "healthy",  "unstable", "needs_reauth", "pending_verification",
        "disabled", "error",    "degraded"};

static const char *const stages[] = {"connect",        "ping",
                                     "list_tools",     "tool_discovery",
                                     "transport_lost", "credential"};

static const int64_t bounds_ms[] = {5,   10,   25,   50,   100,   250,
                                    500, 1000, 2500, 5000, 10000, 30000};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(NELEM(states) == MODEL_STATES, "MODEL_STATES: one name each");
_Static_assert(NELEM(stages) == MODEL_STAGES, "MODEL_STAGES: one name each");
_Static_assert(NELEM(bounds_ms) == MODEL_LATENCY_BOUNDS,
               "MODEL_LATENCY_BOUNDS: one bound each");

const char *
model_state_name(unsigned i)
{
	return (i < MODEL_STATES ? states[i] : NULL);
}

const char *
model_stage_name(unsigned i)
{
	return (i < MODEL_STAGES ? stages[i] : NULL);
}

int64_t
model_latency_bound_ms(unsigned i)
{
	return (i < MODEL_LATENCY_BOUNDS ? bounds_ms[i] : -1);
}
