/*
 * pin.c - tool_changes: under "hold" or "block" a client pins the tools
 * it approved - the first list it sees, then each list an admin approves
 * - and holds back a tool whose title, description, schemas or
 * annotations changed since, or that is new: the view still lists it,
 * marked ("tools_held"), but the gateway does not, and its calls are
 * refused, until an admin approves that list ("hold": another config
 * change approves nothing) or the client's config changes ("block").  A
 * removed tool is simply gone.
 */
#include <stdio.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/log.h"

/* The fields a change of which holds a tool back. */
static const char *const reviewed[] = {"title",       "description",
                                       "inputSchema", "outputSchema",
                                       "annotations", NULL};

/* The approved list: every tool of the client's list now, by name. */
static void
approve_all(client *cl)
{
	size_t  i;
	json_t *t;

	json_decref(cl->approved);
	json_decref(cl->pin_held);
	cl->approved = json_object();
	cl->pin_held = json_object();
	json_array_foreach(cl->tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n != NULL) {
			json_object_set(cl->approved, n, t);
		}
	}
	cl->rejected[0] = '\0';
}

/* cl->pin_held from the list now against the approved one. */
static void
hold_changed(client *cl)
{
	size_t  i;
	json_t *t, *a, *x, *y;

	json_decref(cl->pin_held);
	cl->pin_held = json_object();
	json_array_foreach(cl->tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		json_t     *fields;

		if (n == NULL) {
			continue;
		}
		if ((a = json_object_get(cl->approved, n)) == NULL) {
			json_object_set_new(cl->pin_held, n,
			                    json_pack("{s:b}", "new", 1));
			continue;
		}
		fields = json_array();
		for (int k = 0; reviewed[k] != NULL; k++) {
			x = json_object_get(a, reviewed[k]);
			y = json_object_get(t, reviewed[k]);
			if ((x == NULL) != (y == NULL) ||
			    (x != NULL && !json_equal(x, y))) {
				json_array_append_new(
				        fields, json_string(reviewed[k]));
			}
		}
		if (json_array_size(fields) > 0) {
			json_object_set_new(
			        cl->pin_held, n,
			        json_pack("{s:o}", "fields", fields));
		} else {
			json_decref(fields);
		}
	}
}

void
cl_pin_listed(client *cl)
{
	const char *n;
	json_t     *h;
	char        names[256] = "";
	size_t      at         = 0;

	if (cl->cfg->changes == CFG_CHANGES_ACCEPT) {
		json_decref(cl->approved);
		json_decref(cl->pin_held);
		cl->approved = cl->pin_held = NULL;
		return;
	}
	if (cl->approved == NULL) {
		approve_all(cl); /* the first list seen */
		return;
	}
	cl->rejected[0] = '\0'; /* (a rejection was of the list before) */
	hold_changed(cl);
	if (json_object_size(cl->pin_held) == 0) {
		return;
	}
	json_object_foreach(cl->pin_held, n, h)
	{
		if (at < sizeof(names)) {
			at += (size_t)snprintf(names + at, sizeof(names) - at,
			                       "%s%s", at ? ", " : "", n);
		}
	}
	KN_INFO("client", "%s: %zu tools held (tool_changes %s): %s; %s",
	        cl->cfg->name, json_object_size(cl->pin_held),
	        cl->cfg->changes == CFG_CHANGES_HOLD ? "hold" : "block", names,
	        cl->cfg->changes == CFG_CHANGES_HOLD
	                ? "an admin approves or rejects the list"
	                : "the client's config must change to take them");
}

void
cl_pin_config(client *cl)
{
	if (cl->cfg->changes == CFG_CHANGES_BLOCK &&
	    json_array_size(cl->tools) > 0) {
		approve_all(cl); /* a new config takes the list it finds */
	} else if (cl->cfg->changes == CFG_CHANGES_ACCEPT ||
	           cl->approved == NULL) {
		cl_pin_listed(
		        cl); /* (from accept: the list now is approved) */
	} else {
		hold_changed(cl); /* hold: approvals are kept */
	}
}

bool
cl_pin_refuses(client *cl, const char *tool, char *why, size_t len)
{
	json_t *h         = json_object_get(cl->pin_held, tool), *f;
	char    what[160] = "";
	size_t  at        = 0, i;

	if (h == NULL) {
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
	         tool, cl->cfg->name, what,
	         cl->cfg->changes == CFG_CHANGES_BLOCK ? "block" : "hold",
	         cl->cfg->changes == CFG_CHANGES_BLOCK
	                 ? "change the client's config to take it"
	                 : cl->rejected[0] != '\0' ? "the change was rejected"
	                                           : "approve the list first");
	return (true);
}

void
cl_pin_view(const client *cl, json_t *v)
{
	if (json_object_size(cl->pin_held) == 0) {
		return;
	}
	json_object_set(v, "tools_held", cl->pin_held);
	json_object_set_new(v, "tools_pending", json_string(cl->hash));
	if (cl->rejected[0] != '\0') {
		json_object_set_new(v, "tools_rejected", json_true());
	}
}

void
cl_on_decide(client *cl, kn_msg *msg)
{
	cl_decide_msg m;
	uint64_t      corr = kn_defer(msg);

	(void)cl_decide_msg_unpack(msg->env.payload, msg->env.payload_len, &m);
	if (cl->cfg->changes != CFG_CHANGES_HOLD) {
		kn_reply_why(cl->self, corr, MK_ESTATE,
		             "MCP client %s has tool_changes %s: there is no "
		             "list to %s%s",
		             cl->cfg->name,
		             cl->cfg->changes == CFG_CHANGES_BLOCK ? "block"
		                                                   : "accept",
		             m.approve ? "approve" : "reject",
		             cl->cfg->changes == CFG_CHANGES_BLOCK
		                     ? " (change the config to take a change)"
		                     : "");
	} else if (m.digest == NULL || strcmp(m.digest, cl->hash) != 0) {
		kn_reply_why(cl->self, corr, MK_EINVAL,
		             "digest %.70s is not MCP client %s's list now "
		             "(%s)",
		             m.digest != NULL ? m.digest : "(none)",
		             cl->cfg->name, cl->hash);
	} else {
		if (m.approve) {
			approve_all(cl);
		} else {
			memcpy(cl->rejected, cl->hash, sizeof(cl->rejected));
		}
		KN_INFO("client", "%s: the tool list %.12s %s", cl->cfg->name,
		        cl->hash, m.approve ? "approved" : "rejected");
		client_push_view(cl);
		kn_reply_corr(kn_actor_kernel(cl->self), corr, 0, CODEC_EMPTY,
		              CODEC_EMPTY_LEN);
	}
	cl_decide_msg_clear(&m);
}
