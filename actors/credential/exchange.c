/*
 * exchange.c - token_exchange (RFC 8693): the admin's exchange,
 * verified with its subject token, and a caller's, from the caller's own
 * access token and cached only (user.c's DESIGN has the cache); the
 * exchange request itself is refresh.c's.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "codec/mp.h"
#include "codec/text.h"

/* The cache identity of (identity, subject): identity, then 16 hex of
 * SHA-256 of the subject token. */
void
cr_cache_identity(const char *identity, const char *subject, char *out,
                  size_t len)
{
	uint8_t      md[32];
	unsigned int n;

	EVP_Digest(subject, strlen(subject), md, &n, EVP_sha256(), NULL);
	snprintf(out, len, "%s\x1f%02x%02x%02x%02x%02x%02x%02x%02x", identity,
	         md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

void
cr_exchange_get(cr_self *cr, cclient *c, const char *mode,
                const char *identity, const char *subject, bool force,
                uint64_t corr)
{
	bool   admin = strcmp(mode, "admin") == 0;
	token *t;

	if (admin) {
		t = cr_token(cr, c->id, "admin", "", false);
		if (t == NULL) {
			cr_reply_error(
			        cr, corr, MK_ESTATE, "none",
			        "MCP client %s has no admin credential: verify-exchange first",
			        c->name);
		} else if (!t->active) {
			cr_answer_token(cr, t, corr);
		} else {
			cr_token_use(cr, t, force, corr);
		}
		return;
	}
	if (subject == NULL || *subject == '\0') {
		json_t *x = json_pack("{s:b}", "subject_token_missing", 1);
		cr_auth_reply(
		        cr, corr, c, "exchange", x,
		        "this MCP client exchanges the caller's own access token: send it (Authorization: Bearer)");
		json_decref(x);
		return;
	}
	char ci[512];
	cr_cache_identity(identity, subject, ci, sizeof(ci));
	if ((t = cr_token(cr, c->id, mode, ci, false)) == NULL) {
		if ((t = cr_token(cr, c->id, mode, ci, true)) == NULL ||
		    (t->refresh = strdup(subject)) == NULL) {
			cr_reply_error(cr, corr, MK_ENOMEM, NULL,
			               "out of memory");
			return;
		}
		t->ephemeral = true; /* cached, never stored */
		t->active    = true;
	}
	cr_lru_touch(cr, t);
	if (!t->active) {
		json_t *x = json_pack("{s:s}", "exchange_error", t->err);
		cr_auth_reply(
		        cr, corr, c, "exchange", x,
		        "the authorization server rejected the exchange of your token");
		json_decref(x);
	} else {
		/* a cache hit, or an exchange, single-flight */
		cr_token_use(cr, t, force, corr);
	}
}

int
cr_on_verify_exchange(kn_actor *self, cr_self *cr, kn_msg *msg,
                      cr_verify_exchange_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	const char *who;
	char       *subject;
	cclient    *c;
	token      *t;

	who        = m->client;
	subject    = m->subject; /* ours now */
	m->subject = NULL;
	if ((c = who != NULL ? cr_client(cr, who) : NULL) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s",
		               who != NULL ? who : "(none given)");
	} else if (c->auth != CFG_AUTH_TOKEN_EXCHANGE) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses auth_type %s: verify-exchange applies to token_exchange",
		        c->name, cfg_auth_name(c->auth));
	} else if (subject == NULL || *subject == '\0') {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "verify-exchange needs the admin's subject token");
	} else if ((t = cr_token(cr, c->id, "admin", "", true)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
	} else {
		/* the subject is retained as what a refresh re-exchanges */
		cr_refresh_stop(t);
		text_secret_free(t->refresh);
		text_secret_free(t->access);
		t->access  = NULL;
		t->refresh = subject;
		subject    = NULL;
		t->active  = true;
		cr_refresh_join(cr, t, corr);
	}
	text_secret_free(subject);
	return (0);
}
