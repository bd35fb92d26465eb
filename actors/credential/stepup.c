/*
 * stepup.c - scope step-up (the MCP authorization spec, "Scope Challenge
 * Handling"): a 403 with WWW-Authenticate: Bearer
 * error="insufficient_scope", scope="..." from the MCP server starts a
 * new authorization for the union of the scopes held and asked for.
 *
 * DESIGN: the challenge's scopes are authoritative: they join the
 * client's scope (what every later flow of it asks for) and the
 * token's granted ones.  The token is needs_reauth: for an oauth
 * client its state becomes needs_reauth (stage credential, the message
 * naming the scopes), for a per-user caller the answer is a new
 * mcp_auth_required with an authorize_url.  A server that keeps asking
 * for scopes the token was granted is answered CR_STEP_UPS_MAX times,
 * then refused without another authorization, so it cannot loop.  A
 * client_credentials client has no one to ask: it is refused, naming the
 * scopes to configure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"

#define CR_STEP_UPS_MAX 2 /* step-ups in a row for scopes already held */
#define SCOPES_MAX      1024

/* Whether the space-separated list has the scope w (n bytes). */
static bool
has_scope(const char *list, const char *w, size_t n)
{
	for (const char *p = list; p != NULL && *p != '\0';) {
		size_t k = strcspn(p, " ");
		if (k == n && strncmp(p, w, n) == 0) {
			return (true);
		}
		p += k + (p[k] == ' ');
	}
	return (false);
}

/* Appends to out (len bytes) each scope of list it lacks. */
static void
join_scopes(char *out, size_t len, const char *list)
{
	for (const char *p = list; p != NULL && *p != '\0';) {
		size_t k = strcspn(p, " ");
		size_t o = strlen(out);
		if (k > 0 && !has_scope(out, p, k) && o + k + 2 <= len) {
			snprintf(out + o, len - o, "%s%.*s", o > 0 ? " " : "",
			         (int)k, p);
		}
		p += k + (p[k] == ' ');
	}
}

/* Whether every scope of need is in held. */
static bool
covered(const char *need, const char *held)
{
	for (const char *p = need; *p != '\0';) {
		size_t k = strcspn(p, " ");
		if (k > 0 && !has_scope(held, p, k)) {
			return (false);
		}
		p += k + (p[k] == ' ');
	}
	return (true);
}

void
cr_step_up(cr_self *cr, cclient *c, const char *mode, const char *identity,
           const char *need, uint64_t corr)
{
	token *t                = cr_token(cr, c->id, mode, identity, false);
	char   want[SCOPES_MAX] = "", why[SCOPES_MAX + 200];

	if ((c->auth != CFG_AUTH_OAUTH &&
	     c->auth != CFG_AUTH_PER_USER_OAUTH) ||
	    c->meta == NULL || t == NULL) {
		cr_reply_error(
		        cr, corr, MK_EAUTH, NULL,
		        "the MCP server needs the scopes \"%.300s\" (insufficient_scope), and MCP client %s has no OAuth authorization to widen",
		        need, c->name);
		return;
	}
	if (cr_client_credentials(c)) {
		cr_reply_error(
		        cr, corr, MK_EAUTH, NULL,
		        "the MCP server needs the scopes \"%.300s\" (insufficient_scope): MCP client %s acts on its own behalf (client_credentials); add them to oauth_config.scopes",
		        need, c->name);
		return;
	}
	if (!covered(need, t->scopes != NULL ? t->scopes : "")) {
		t->stepups = 0;
	} else if (++t->stepups >= CR_STEP_UPS_MAX) {
		KN_WARN("credential",
		        "%s: the MCP server keeps asking for scopes the token holds: not authorizing again",
		        c->name);
		cr_reply_error(
		        cr, corr, MK_EAUTH, NULL,
		        "the MCP server keeps refusing for the scopes \"%.300s\" (insufficient_scope) though they were granted: not authorizing again (%d step-ups)",
		        need, CR_STEP_UPS_MAX);
		return;
	}
	/* the challenge's scopes, then what the client asked for, then what
	 * the token holds */
	join_scopes(want, sizeof(want), need);
	join_scopes(want, sizeof(want), cr_meta_str(c->meta, "scope"));
	join_scopes(want, sizeof(want), t->scopes);
	json_object_set_new(c->meta, "scope", json_string(want));
	cr_meta_store(c);
	t->active = false;
	cr_token_store(cr, t);
	snprintf(
	        why, sizeof(why),
	        "the MCP server needs the scopes \"%.300s\" (insufficient_scope): reauthorize for \"%.600s\"",
	        need, want);
	KN_INFO("credential", "%s: step-up: %s", c->name, why);
	if (cr_callers_mode(mode)) {
		cr_flow_for(cr, c, mode, identity, NULL, corr, true);
		return;
	}
	cr_notify(cr, c->id, "needs_reauth", why); /* (first: cr_notify) */
	cr_reply_error(cr, corr, MK_ESTATE, "needs_reauth", "%s", why);
}
