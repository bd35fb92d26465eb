/*
 * pin.c - tool_changes: under "hold" or "block" a client pins the tools
 * it approved - the first list it sees, then each list an admin approves
 * - and holds back a tool whose title, description, schemas or
 * annotations changed since, or that is new: the view still lists it,
 * marked ("tools_held"), but the gateway does not, its calls are
 * refused, and its annotations are not trusted (the retry-safety rule
 * reads it as unannotated), until an admin approves that list ("hold":
 * another config change approves nothing) or the client's config changes
 * ("block").  A removed tool is simply gone.
 *
 * The approval is a row of the store (tool_approvals: the approved
 * tools, and the digest of a rejected list), read at the client's first
 * connect - every tool is held until it is read - and again when another
 * node of a cluster wrote it (MSG_CL_APPROVALS); written at each
 * decision, an admin's answered only once it is on disk.  A row that
 * cannot be read (written around mcpkeep into a sealed store) approves
 * nothing.  Each decision is on the stream ("pin" events), in the log and
 * in the client's counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "codec/errors.h"
#include "codec/mp.h"

#define PIN_ASK_MS   10000 /* the persister reading or writing the row */
#define PIN_RETRY_MS 5000  /* a store that could not be read, asked again */

/* The fields a change of which holds a tool back. */
static const char *const reviewed[] = {"title",       "description",
                                       "inputSchema", "outputSchema",
                                       "annotations", NULL};

static const char *const mode_names[] = {
        [CFG_CHANGES_DEFAULT] = "accept",
        [CFG_CHANGES_ACCEPT]  = "accept",
        [CFG_CHANGES_HOLD]    = "hold",
        [CFG_CHANGES_BLOCK]   = "block",
};

int
cl_pin_mode(const client *cl)
{
	return (cl->cfg->changes != CFG_CHANGES_DEFAULT ? cl->cfg->changes
	                : cl->def_changes != CFG_CHANGES_DEFAULT
	                ? cl->def_changes
	                : CFG_CHANGES_ACCEPT);
}

/* ---- what is held ------------------------------------------------------- */

/* One line naming the held tools and what changed in each. */
static void
held_line(const client *cl, char *buf, size_t len)
{
	const char *n;
	json_t     *h, *f;
	size_t      at = 0, i;

	buf[0] = '\0';
	json_object_foreach(cl->pin_held, n, h)
	{
		if (at + 1 >= len) {
			break;
		}
		at += (size_t)snprintf(
		        buf + at, len - at, "%s%s: %s", at ? "; " : "", n,
		        json_is_true(json_object_get(h, "new")) ? "new" : "");
		json_array_foreach(json_object_get(h, "fields"), i, f)
		{
			if (at + 1 < len) {
				at += (size_t)snprintf(buf + at, len - at,
				                       "%s%s", i ? ", " : "",
				                       json_string_value(f));
			}
		}
	}
}

static void
publish(client *cl, const char *state, const char *digest)
{
	char         line[1024], ts[40];
	cl_pin_event ev = {
	        .client_id = cl->cfg->id,
	        .name      = cl->cfg->name,
	        .state     = (char *)state,
	        .hash      = (char *)digest,
	        .count     = (int64_t)json_object_size(cl->pin_held),
	        .message   = line,
	        .time      = kn_rfc3339(ts, sizeof(ts)),
	        .node_id   = (char *)cl->node_id,
	};

	held_line(cl, line, sizeof(line));
	kn_stream_publish_msg(cl->stream, "pin", CODEC_OF(cl_pin_event, &ev));
}

/* The fields of reviewed in which t differs from a, as an array. */
static json_t *
changed_fields(json_t *a, json_t *t)
{
	json_t *fields = json_array(), *x, *y;

	for (int k = 0; reviewed[k] != NULL; k++) {
		x = json_object_get(a, reviewed[k]);
		y = json_object_get(t, reviewed[k]);
		if ((x == NULL) != (y == NULL) ||
		    (x != NULL && !json_equal(x, y))) {
			json_array_append_new(fields,
			                      json_string(reviewed[k]));
		}
	}
	return (fields);
}

/* cl->pin_held from the list now against the approved one; a change of
 * what is held is logged, counted and published when announce. */
static void
rehold(client *cl, bool announce)
{
	json_t *was = cl->pin_held, *t, *a, *fields;
	size_t  i;
	char    line[512];

	cl->pin_held = json_object();
	json_array_foreach(cl->tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n == NULL) {
			continue;
		}
		if ((a = json_object_get(cl->approved, n)) == NULL) {
			json_object_set_new(cl->pin_held, n,
			                    json_pack("{s:b}", "new", 1));
		} else if (json_array_size(fields = changed_fields(a, t)) >
		           0) {
			json_object_set_new(
			        cl->pin_held, n,
			        json_pack("{s:o}", "fields", fields));
		} else {
			json_decref(fields);
		}
	}
	if (announce && json_object_size(cl->pin_held) > 0 &&
	    !json_equal(was, cl->pin_held)) {
		held_line(cl, line, sizeof(line));
		KN_INFO("client",
		        "%s: %zu tools held (tool_changes %s): %s; %s",
		        cl->cfg->name, json_object_size(cl->pin_held),
		        mode_names[cl_pin_mode(cl)], line,
		        cl_pin_mode(cl) == CFG_CHANGES_HOLD
		                ? "an admin approves or rejects the list"
		                : "the client's config must change to take "
		                  "them");
		cl->m.pin[0]++;
		cl_counted(cl);
		publish(cl, "held", cl->hash);
	}
	json_decref(was);
}

/* ---- the approval ------------------------------------------------------- */

/* Approves tools (an array), the list of digest. */
static void
set_approved(client *cl, json_t *tools, const char *digest)
{
	json_t *t;
	size_t  i;

	json_decref(cl->approved);
	cl->approved = json_object();
	json_array_foreach(tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n != NULL) {
			json_object_set(cl->approved, n, t);
		}
	}
	snprintf(cl->approved_digest, sizeof(cl->approved_digest), "%s",
	         digest);
}

/* The approved tools as an array (for the row). */
static json_t *
approved_list(const client *cl)
{
	json_t     *list = json_array(), *t;
	const char *n;

	json_object_foreach(cl->approved, n, t)
	{
		json_array_append(list, t);
	}
	return (list);
}

/* Stores the approval (tools, digest, rejected): a tell, or an ask whose
 * answer goes to fn.  Returns 0 or an error (then fn never runs). */
static int
pin_store(client *cl, json_t *tools, const char *digest, const char *rejected,
          kn_reply_fn fn, void *arg)
{
	char   *list = json_dumps(tools, JSON_COMPACT), *text = NULL;
	json_t *row = list == NULL
	        ? NULL
	        : json_pack("{s:s, s:s, s:s, s:s?}", "client_id", cl->cfg->id,
	                    "digest", digest, "tools", list, "rejected",
	                    rejected[0] ? rejected : NULL);
	/* an admin's has a ticket: refused, it leaves the queue */
	ps_row_msg m  = {.table = "tool_approvals", .ticket = fn != NULL};
	int        rv = MK_ENOMEM;

	if (row != NULL && (text = json_dumps(row, JSON_COMPACT)) != NULL) {
		m.row = text;
		rv    = fn != NULL
		           ? kn_ask_async_msg(cl->self, cl->ps, MSG_PS_ROW_PUT,
		                              CODEC_OF(ps_row_msg, &m),
		                              PIN_ASK_MS, fn, arg)
		           : kn_tell_msg(cl->ps, cl->self, MSG_PS_ROW_PUT,
		                         CODEC_OF(ps_row_msg, &m));
	}
	free(text);
	free(list);
	json_decref(row);
	return (rv);
}

/* The list now becomes the approved one (the first list seen, or a
 * config change under block), stored for a restart and the other
 * nodes. */
static void
approve_now(client *cl, const char *why)
{
	set_approved(cl, cl->tools, cl->hash);
	cl->rejected[0] = '\0';
	json_decref(cl->pin_held);
	cl->pin_held    = json_object();
	cl->pin_known   = true;
	cl->pin_reading = false;
	cl->pin_gen++; /* (a read begun before is stale) */
	KN_INFO("client", "%s: the tool list %.12s approved (%s)",
	        cl->cfg->name, cl->hash, why);
	if (cl->ps != NULL &&
	    pin_store(cl, cl->tools, cl->hash, "", NULL, NULL) != 0) {
		KN_WARN("client",
		        "%s: the approved tool list was not stored: a restart "
		        "approves the list it finds",
		        cl->cfg->name);
	}
}

/* The approval is known: the list now is held against it, or approved
 * when there is none yet. */
static void
evaluate(client *cl)
{
	if (cl->approved != NULL) {
		rehold(cl, true);
	} else if (json_array_size(cl->tools) > 0) {
		approve_now(cl, "the first list seen");
	}
}

/* The first connect waits no more (the approval is read, or cannot be
 * yet, or is not needed). */
static void
resume(client *cl)
{
	if (cl->pin_waits) {
		cl->pin_waits = false;
		cl_connect_go(cl, cl->pin_corr, cl->pin_boot);
	}
}

/* Forgets the approval (tool_changes accept). */
static void
drop(client *cl)
{
	json_decref(cl->approved);
	json_decref(cl->pin_held);
	cl->approved = cl->pin_held = NULL;
	cl->approved_digest[0] = cl->rejected[0] = '\0';
	cl->pin_known = cl->pin_reading = false;
	cl->pin_gen++;
	resume(cl);
}

/* The row read from the store (NULL: none; unreadable: one refused). */
static void
take_row(client *cl, json_t *row, bool unreadable)
{
	const char *digest = json_string_value(json_object_get(row, "digest"));
	const char *rej  = json_string_value(json_object_get(row, "rejected"));
	const char *text = json_string_value(json_object_get(row, "tools"));
	json_t     *tools = text != NULL ? json_loads(text, 0, NULL) : NULL;
	char        was[TOOLS_HASH_HEX], wasrej[TOOLS_HASH_HEX];

	memcpy(was, cl->approved_digest, sizeof(was));
	memcpy(wasrej, cl->rejected, sizeof(wasrej));
	cl->pin_known = true;
	if (unreadable ||
	    (row != NULL && (digest == NULL || !json_is_array(tools)))) {
		KN_WARN("client",
		        "%s: the stored tool approval cannot be read (see the "
		        "persister's warning): it approves nothing, every tool "
		        "is held until an admin approves a list",
		        cl->cfg->name);
		json_decref(cl->approved);
		cl->approved           = json_object();
		cl->approved_digest[0] = '\0';
	} else if (row != NULL) {
		set_approved(cl, tools, digest);
		snprintf(cl->rejected, sizeof(cl->rejected), "%s",
		         rej != NULL ? rej : "");
	}
	json_decref(tools);
	evaluate(cl);
	if (strcmp(was, cl->approved_digest) != 0 && was[0] != '\0') {
		publish(cl, "approved", cl->approved_digest); /* elsewhere */
	} else if (cl->rejected[0] != '\0' &&
	           strcmp(wasrej, cl->rejected) != 0) {
		publish(cl, "rejected", cl->rejected);
	}
	cl_push_view(cl);
}

/* A read of the row in flight. */
typedef struct pin_read {
	client  *cl;
	uint64_t gen;
} pin_read;

static void
on_retry(kn_actor *self, void *arg)
{
	cl_pin_start(arg, true);
}

static void
on_read(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	pin_read    *a  = arg;
	client      *cl = a->cl;
	ps_found_msg m  = {0};
	json_t      *row;
	bool         stale = a->gen != cl->pin_gen;

	free(a);
	if (status == MK_ECLOSED) {
		if (cl->pin_waits) { /* stopping */
			cl->pin_waits = false;
			kn_reply_why(cl->self, cl->pin_corr, MK_ECLOSED,
			             "MCP client %s is shutting down",
			             cl->cfg->name);
		}
		return;
	}
	if (stale) {
		resume(cl); /* (decided since, or read again) */
		return;
	}
	cl->pin_reading = false;
	if (status != 0 || ps_found_msg_unpack(data, len, &m) != 0) {
		KN_WARN("client",
		        "%s: the tool approval cannot be read from the store "
		        "(%s): every tool is held; asking again in %d s",
		        cl->cfg->name, codec_strerror(status),
		        PIN_RETRY_MS / 1000);
		(void)kn_timer_add(cl->self, PIN_RETRY_MS, on_retry, cl);
		resume(cl); /* (every tool held meanwhile) */
		return;
	}
	row = m.row != NULL ? json_loads(m.row, 0, NULL) : NULL;
	take_row(cl, row, m.unreadable || (m.row != NULL && row == NULL));
	json_decref(row);
	ps_found_msg_clear(&m);
	resume(cl);
}

bool
cl_pin_wait(client *cl, uint64_t corr, bool boot)
{
	cl_pin_start(cl, false);
	if (!cl->pin_reading) {
		return (false);
	}
	cl->pin_waits = true;
	cl->pin_corr  = corr;
	cl->pin_boot  = boot;
	return (true);
}

void
cl_pin_start(client *cl, bool again)
{
	pin_read  *a;
	json_t    *k   = json_pack("{s:s}", "client_id", cl->cfg->id);
	char      *key = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL;
	ps_key_msg m   = {.table = "tool_approvals"};

	json_decref(k);
	if (cl_pin_mode(cl) == CFG_CHANGES_ACCEPT ||
	    (!again && (cl->pin_known || cl->pin_reading))) {
		free(key);
		return;
	}
	if (cl->ps == NULL) {
		cl->pin_known = true; /* (nothing stored: nothing to read) */
		free(key);
		return;
	}
	if (key == NULL || (a = malloc(sizeof(*a))) == NULL) {
		free(key);
		(void)kn_timer_add(cl->self, PIN_RETRY_MS, on_retry, cl);
		return;
	}
	a->cl  = cl;
	a->gen = ++cl->pin_gen;
	m.key  = key;
	if (kn_ask_async_msg(cl->self, cl->ps, MSG_PS_ROW_GET,
	                     CODEC_OF(ps_key_msg, &m), PIN_ASK_MS, on_read,
	                     a) != 0) {
		free(a);
		(void)kn_timer_add(cl->self, PIN_RETRY_MS, on_retry, cl);
	} else {
		cl->pin_reading = true;
	}
	free(key);
}

/* ---- the client's events ------------------------------------------------ */

void
cl_pin_listed(client *cl)
{
	if (cl_pin_mode(cl) == CFG_CHANGES_ACCEPT) {
		drop(cl);
	} else if (!cl->pin_known) {
		cl_pin_start(cl,
		             false); /* (the list is held once it is read) */
	} else {
		evaluate(cl);
	}
}

void
cl_pin_config(client *cl, int mode_was)
{
	int mode = cl_pin_mode(cl);

	if (mode == CFG_CHANGES_ACCEPT) {
		drop(cl);
	} else if (mode_was == CFG_CHANGES_ACCEPT) {
		/* from accept: the list now is the approved one */
		cl->pin_known = true;
		cl->pin_gen++;
		if (json_array_size(cl->tools) > 0) {
			approve_now(cl, "tool_changes was accept");
		}
	} else if (mode == CFG_CHANGES_BLOCK &&
	           json_array_size(cl->tools) > 0) {
		approve_now(cl, "a new config under tool_changes block");
	} else if (!cl->pin_known) {
		cl_pin_start(cl, false);
	} else {
		rehold(cl, true); /* hold: approvals are kept */
	}
}

/* Whether the list now is the rejected one. */
static bool
rejected_now(const client *cl)
{
	return (cl->rejected[0] != '\0' &&
	        strcmp(cl->rejected, cl->hash) == 0);
}

bool
cl_pin_refuses(client *cl, const char *tool, char *why, size_t len)
{
	int     mode = cl_pin_mode(cl);
	json_t *h, *f;
	char    what[160] = "";
	size_t  at        = 0, i;

	if (mode == CFG_CHANGES_ACCEPT) {
		return (false);
	}
	if (!cl->pin_known) {
		snprintf(
		        why, len,
		        "tool %.200s of MCP client %s is held: its approved "
		        "tool list is being read from the store (tool_changes "
		        "%s)",
		        tool, cl->cfg->name, mode_names[mode]);
		return (true);
	}
	if ((h = json_object_get(cl->pin_held, tool)) == NULL) {
		return (false);
	}
	if (json_is_true(json_object_get(h, "new"))) {
		snprintf(what, sizeof(what),
		         "is new since the list was approved");
	} else {
		at = (size_t)snprintf(what, sizeof(what), "changed its ");
		json_array_foreach(json_object_get(h, "fields"), i, f)
		{
			if (at < sizeof(what)) {
				at += (size_t)snprintf(
				        what + at, sizeof(what) - at, "%s%s",
				        i ? ", " : "", json_string_value(f));
			}
		}
		if (at < sizeof(what)) {
			snprintf(what + at, sizeof(what) - at,
			         " since the list was approved");
		}
	}
	snprintf(why, len,
	         "tool %.200s of MCP client %s is held: it %s (tool_changes "
	         "%s: %s)",
	         tool, cl->cfg->name, what, mode_names[mode],
	         mode == CFG_CHANGES_BLOCK  ? "change the client's config to "
	                                      "take it"
	                 : rejected_now(cl) ? "the change was rejected"
	                                    : "approve the list first");
	return (true);
}

bool
cl_tool_hints(const client *cl, const char *tool, mcp_hints *h)
{
	json_t *t = cl_tool_named(cl, tool), *bare;

	if (t == NULL) {
		return (false);
	}
	if (cl_pin_mode(cl) != CFG_CHANGES_ACCEPT &&
	    (!cl->pin_known || json_object_get(cl->pin_held, tool) != NULL)) {
		bare = json_object(); /* untrusted until approved */
		mcp_tool_hints(bare, h);
		json_decref(bare);
	} else {
		mcp_tool_hints(t, h);
	}
	return (true);
}

void
cl_pin_view(const client *cl, json_t *v)
{
	json_t *held, *t;
	size_t  i;

	if (cl_pin_mode(cl) != CFG_CHANGES_ACCEPT && !cl->pin_known &&
	    json_array_size(cl->tools) > 0) {
		held = json_object(); /* every tool, until the approval is read
		                       */
		json_array_foreach(cl->tools, i, t)
		{
			const char *n =
			        json_string_value(json_object_get(t, "name"));
			if (n != NULL) {
				json_object_set_new(
				        held, n,
				        json_pack("{s:b}", "reading", 1));
			}
		}
		json_object_set_new(v, "tools_held", held);
		return;
	}
	if (json_object_size(cl->pin_held) == 0) {
		return;
	}
	json_object_set(v, "tools_held", cl->pin_held);
	json_object_set_new(v, "tools_pending", json_string(cl->hash));
	if (rejected_now(cl)) {
		json_object_set_new(v, "tools_rejected", json_true());
	}
}

/* ---- an admin's decision ------------------------------------------------ */

/* A decision being stored. */
typedef struct pin_decide {
	client  *cl;
	uint64_t corr;
	bool     approve;
	json_t  *tools; /* approve: the list approved */
	char     digest[TOOLS_HASH_HEX];
} pin_decide;

/* The decision is on disk (or there is no store): it applies. */
static void
decided(client *cl, pin_decide *d)
{
	cl->pin_gen++; /* (a read begun before is stale) */
	cl->pin_known   = true;
	cl->pin_reading = false;
	if (d->approve) {
		set_approved(cl, d->tools, d->digest);
		cl->rejected[0] = '\0';
	} else {
		memcpy(cl->rejected, d->digest, sizeof(cl->rejected));
	}
	rehold(cl, false);
	KN_INFO("client", "%s: the tool list %.12s %s", cl->cfg->name,
	        d->digest, d->approve ? "approved" : "rejected");
	cl->m.pin[d->approve ? 1 : 2]++;
	cl_counted(cl);
	publish(cl, d->approve ? "approved" : "rejected", d->digest);
	cl_push_view(cl);
	kn_reply_corr(kn_actor_kernel(cl->self), d->corr, 0, CODEC_EMPTY,
	              CODEC_EMPTY_LEN);
}

static void
decide_free(pin_decide *d)
{
	json_decref(d->tools);
	free(d);
}

static void
on_stored(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	pin_decide *d = arg;
	char       *why;

	if (status == 0) {
		decided(d->cl, d);
	} else {
		why = kn_error_text(data, len);
		/* (MK_ESTORE: "the store cannot write: ...", a 503) */
		kn_reply_why(self, d->corr, status, "%s",
		             why != NULL ? why : "the store did not answer");
		free(why);
	}
	decide_free(d);
}

int
cl_on_decide(kn_actor *self, client *cl, kn_msg *msg, cl_decide_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	int         mode = cl_pin_mode(cl);
	pin_decide *d;
	json_t     *keep;
	int         rv;

	if (mode != CFG_CHANGES_HOLD) {
		kn_reply_why(cl->self, corr, MK_ESTATE,
		             "MCP client %s has tool_changes %s: there is no "
		             "list to %s%s",
		             cl->cfg->name, mode_names[mode],
		             m->approve ? "approve" : "reject",
		             mode == CFG_CHANGES_BLOCK
		                     ? " (change the config to take a change)"
		                     : "");
	} else if (!cl->pin_known) {
		kn_reply_why(
		        cl->self, corr, MK_EBUSY,
		        "MCP client %s's approved tool list is still being "
		        "read from the store: try again",
		        cl->cfg->name);
	} else if (m->digest == NULL || strcmp(m->digest, cl->hash) != 0) {
		kn_reply_why(cl->self, corr, MK_EINVAL,
		             "digest %.70s is not MCP client %s's list now "
		             "(%s)",
		             m->digest != NULL ? m->digest : "(none)",
		             cl->cfg->name, cl->hash);
	} else if ((d = calloc(1, sizeof(*d))) == NULL) {
		kn_reply_why(cl->self, corr, MK_ENOMEM, "out of memory");
	} else {
		d->cl      = cl;
		d->corr    = corr;
		d->approve = m->approve;
		d->tools   = m->approve ? json_incref(cl->tools) : NULL;
		memcpy(d->digest, cl->hash, sizeof(d->digest));
		if (cl->ps == NULL) {
			decided(cl, d);
			decide_free(d);
		} else {
			keep = m->approve ? NULL : approved_list(cl);
			rv   = m->approve
			          ? pin_store(cl, d->tools, d->digest, "",
			                      on_stored, d)
			          : pin_store(cl, keep, cl->approved_digest,
			                      d->digest, on_stored, d);
			json_decref(keep);
			if (rv != 0) {
				kn_reply_why(cl->self, corr, rv,
				             "the store cannot be asked: %s",
				             codec_strerror(rv));
				decide_free(d);
			}
		}
	}
	return (0);
}
