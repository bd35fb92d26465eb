/*
 * config_view.c - a client's config as the API shows it and takes it
 * back (see config.h): the redacted view, an update's redacted values
 * put back, and the literal mask after a patch.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "model/config_impl.h"

/* Redacts o's string at key unless it is a reference (at mask m, o's). */
static void
redact(json_t *o, const char *key, json_t *m)
{
	json_t *v = json_object_get(o, key);

	if (json_is_string(v) && !cfg_is_ref(v, cfg_lit_key(m, key))) {
		json_object_set_new(o, key, json_string("<redacted>"));
	}
}

json_t *
cfg_client_redacted(const cfg_client *c)
{
	json_t     *o   = json_deep_copy(c->raw), *h, *sc, *envs, *v;
	json_t     *lit = c->literal, *elit;
	const char *k;
	size_t      i;

	if (o == NULL) {
		return (NULL);
	}
	if ((h = json_object_get(o, "headers")) != NULL) {
		json_object_foreach(h, k, v)
		{
			redact(h, k, cfg_lit_key(lit, "headers"));
		}
	}
	redact(json_object_get(o, "oauth_config"), "client_secret",
	       cfg_lit_key(lit, "oauth_config"));
	redact(json_object_get(o, "oauth_config"), "private_key",
	       cfg_lit_key(lit, "oauth_config"));
	redact(json_object_get(o, "token_exchange"), "client_secret",
	       cfg_lit_key(lit, "token_exchange"));
	sc   = json_object_get(o, "stdio_config");
	envs = json_object_get(sc, "envs");
	elit = cfg_lit_key(cfg_lit_key(lit, "stdio_config"), "envs");
	json_array_foreach(envs, i, v)
	{
		const char *s  = json_string_value(v);
		const char *eq = s != NULL ? strchr(s, '=') : NULL;
		if (eq != NULL &&
		    (json_is_true(cfg_lit_idx(elit, i)) ||
		     strncmp(eq + 1, "env.", 4) != 0)) {
			char buf[160];
			snprintf(buf, sizeof(buf), "%.*s=<redacted>",
			         (int)(eq - s) > 100 ? 100 : (int)(eq - s), s);
			json_array_set_new(envs, i, json_string(buf));
		}
	}
	/* a literal URL may carry a key in its query or userinfo */
	v = json_object_get(o, "connection_string");
	if (json_is_string(v) &&
	    !cfg_is_ref(v, cfg_lit_key(lit, "connection_string"))) {
		const char *u  = json_string_value(v);
		const char *q  = strchr(u, '?');
		const char *at = strchr(u, '@');
		const char *sl = strstr(u, "://");
		if (q != NULL || (at != NULL && sl != NULL && at > sl)) {
			char   buf[600];
			size_t n = q != NULL ? (size_t)(q - u) : strlen(u);
			if (at != NULL && sl != NULL && at > sl &&
			    (q == NULL || at < q)) {
				snprintf(buf, sizeof(buf),
				         "%.*s<redacted>@%.*s%s",
				         (int)(sl + 3 - u), u,
				         (int)(n - (size_t)(at + 1 - u)),
				         at + 1,
				         q != NULL ? "?<redacted>" : "");
			} else {
				snprintf(buf, sizeof(buf), "%.*s?<redacted>",
				         (int)n, u);
			}
			json_object_set_new(o, "connection_string",
			                    json_string(buf));
		}
	}
	return (o);
}

/* patch, red and raw at the same place: a string of patch equal to the
 * redacted one (and holding the marker) becomes raw's. */
static json_t *
unredact_at(json_t *patch, json_t *red, json_t *raw)
{
	json_t     *v;
	const char *k;
	size_t      i;

	if (json_is_string(patch) && json_is_string(red) && raw != NULL &&
	    strstr(json_string_value(patch), "<redacted>") != NULL &&
	    json_equal(patch, red)) {
		return (json_incref(raw));
	}
	if (json_is_object(patch) && json_is_object(red)) {
		json_object_foreach(patch, k, v)
		{
			json_t *n = unredact_at(v, json_object_get(red, k),
			                        json_object_get(raw, k));
			if (n != NULL) {
				json_object_set_new(patch, k, n);
			}
		}
	} else if (json_is_array(patch) && json_is_array(red)) {
		json_array_foreach(patch, i, v)
		{
			json_t *n = unredact_at(v, json_array_get(red, i),
			                        json_array_get(raw, i));
			if (n != NULL) {
				json_array_set_new(patch, i, n);
			}
		}
	}
	return (NULL);
}

void
cfg_unredact(json_t *patch, const cfg_client *c)
{
	json_t *red = cfg_client_redacted(c);

	if (red != NULL) {
		(void)unredact_at(patch, red, c->raw);
		json_decref(red);
	}
}

/* The mask of p, a patch's value set where the config had r with mask
 * om: a string kept as it was keeps its meaning; an env. string the
 * patch brings is literal (other strings have nothing to resolve). */
static json_t *
lit_diff(json_t *p, json_t *r, json_t *om)
{
	json_t     *m, *v, *n;
	const char *k;
	size_t      i;
	bool        any = false;

	if (json_is_true(om)) {
		return (json_true());
	}
	if (json_is_string(p)) {
		if (json_is_string(r) && json_equal(p, r)) {
			return (NULL);
		}
		return (strncmp(json_string_value(p), "env.", 4) == 0
		                ? json_true()
		                : NULL);
	}
	if (json_is_object(p)) {
		m = json_object();
		json_object_foreach(p, k, v)
		{
			if ((n = lit_diff(v, json_object_get(r, k),
			                  json_object_get(om, k))) != NULL) {
				json_object_set_new(m, k, n);
			}
		}
		any = json_object_size(m) != 0;
	} else if (json_is_array(p)) {
		m = json_array();
		json_array_foreach(p, i, v)
		{
			n = lit_diff(v, json_array_get(r, i),
			             json_array_get(om, i));
			any |= n != NULL;
			json_array_append_new(m, n != NULL ? n : json_null());
		}
	} else {
		return (NULL);
	}
	if (!any) {
		json_decref(m);
		return (NULL);
	}
	return (m);
}

json_t *
cfg_literal_patched(const cfg_client *c, json_t *patch)
{
	json_t     *m, *v, *n;
	const char *k;

	if (json_is_true(c->literal)) {
		return (json_true());
	}
	m = json_is_object(c->literal) ? json_deep_copy(c->literal)
	                               : json_object();
	if (m == NULL) {
		return (json_true()); /* out of memory: never resolve */
	}
	json_object_foreach(patch, k, v)
	{
		n = lit_diff(v, json_object_get(c->raw, k),
		             json_object_get(c->literal, k));
		if (n != NULL) {
			json_object_set_new(m, k, n);
		} else {
			json_object_del(m, k);
		}
	}
	if (json_object_size(m) == 0) {
		json_decref(m);
		return (NULL);
	}
	return (m);
}
