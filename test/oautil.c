/*
 * oautil.c - what the tests against test/peers/oauth.mjs share (see
 * oautil.h).
 */
#include "oautil.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/credential/credential.h"
#include "actors/kernel/kernel.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "runtime/runtime_impl.h"
#include "testutil.h"

peer        srv;         /* oauth.mjs */
char        logpath[64]; /* every runtime logs here, at debug */
int         logfd = -1;
char        dir[] = "/tmp/mk-oauth-XXXXXX";
int         seq;
unsigned    cache_max; /* credential_cache_max of the next runtimes */
const char *client_metadata_url; /* their oauth_client_metadata_url */
const char *otlp_endpoint;       /* and otlp_endpoint */
FILE       *seen;                /* what the stream and the list showed */

void
oauth_suite_begin(void)
{
	char        js[512], seenpath[80];
	const char *argv[] = {"node", js, "--port", "0", NULL};

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	CHECK((logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND,
	                    0600)) >= 0);
	snprintf(seenpath, sizeof(seenpath), "%s/seen", dir);
	CHECK((seen = fopen(seenpath, "w")) != NULL);
	unsetenv("MCPKEEP_LOG"); /* debug, to look for leaks in it */
	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	CHECK_EQ(peer_start(&srv, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
}

void
oauth_suite_end(void)
{
	char cmd[128];

	peer_stop(&srv);
	close(logfd);
	fclose(seen);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	curl_global_cleanup();
}

/* Closes the runtime, keeping what its stream and its list showed (and
 * the errors calls gave) for the leak check at the end. */
void
close_rt(mk_runtime **rt, sub *sb)
{
	char *list = NULL;

	if (mk_clients_json(*rt, "{\"limit\": 100}", &list) == 0) {
		fprintf(seen, "%s\n", list);
		mk_free(list);
	}
	pthread_mutex_lock(&sb->mtx);
	for (int i = 0; i < sb->n; i++) {
		fprintf(seen, "%s %s %s %s %s %s\n", sb->ev[i].topic,
		        sb->ev[i].name, sb->ev[i].state, sb->ev[i].stage,
		        sb->ev[i].message, sb->ev[i].hash);
	}
	pthread_mutex_unlock(&sb->mtx);
	rt_close(rt, sb);
}

/* A runtime with a store in dir/name, logging to logpath. */
mk_runtime *
open_rt(sub *sb, const char *name)
{
	mk_runtime *rt;
	mk_options  o;
	char        url[64], db[128];

	snprintf(url, sizeof(url), "inproc://oauth-test-%d", ++seq);
	snprintf(db, sizeof(db), "%s/%s", dir, name);
	mk_options_init(&o, sizeof(o));
	o.log_level                 = MK_LOG_DEBUG;
	o.log_fd                    = logfd;
	o.stream_url                = url;
	o.store_path                = db;
	o.oauth_redirect_uri        = "http://127.0.0.1:9/callback";
	o.unstable_check_ms         = 1000;
	o.credential_cache_max      = cache_max;
	o.oauth_client_metadata_url = client_metadata_url;
	o.otlp_endpoint             = otlp_endpoint;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	sub_open(sb, mk_stream_url(rt));
	return (rt);
}

json_t *
counters(void)
{
	json_t *c = admin_json(srv.port, "/admin/counters", NULL);

	CHECK(c != NULL);
	return (c);
}

long
by_grant(const char *grant)
{
	json_t *c = counters();
	long    n = (long)json_integer_value(
	           json_object_get(json_object_get(c, "by_grant"), grant));

	json_decref(c);
	return (n);
}

void
as_admin(const char *path, const char *body)
{
	json_decref(admin_json(srv.port, path, body));
}

int
add_oauth(mk_runtime *rt, const char *name, const char *oauth, bool sticky)
{
	char *err = NULL;
	int   rv  = add(
	           rt, &err,
	           "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": %s, \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"]}",
	           name, srv.port, oauth, sticky ? "true" : "false");

	if (rv != 0) {
		fprintf(stderr, "add %s: %s\n", name, err);
	}
	mk_free(err);
	return (rv);
}

/* The admin's browser: follows nothing, reads the redirect. */
void
authorize(const char *url, char *code, size_t clen, char *state, size_t slen)
{
	CURL  *e   = curl_easy_init();
	char  *loc = NULL;
	CURLU *u   = curl_url();
	char  *q   = NULL;
	long   status;

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, stderr);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	CHECK_EQ(status, 302);
	curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc);
	CHECK(loc != NULL);
	CHECK(strncmp(loc, "http://127.0.0.1:9/callback?", 28) == 0);
	CHECK_EQ(curl_url_set(u, CURLUPART_URL, loc, 0), CURLUE_OK);
	CHECK_EQ(curl_url_get(u, CURLUPART_QUERY, &q, 0), CURLUE_OK);
	code[0] = state[0] = '\0';
	for (char *p = strtok(q, "&"); p != NULL; p = strtok(NULL, "&")) {
		if (strncmp(p, "code=", 5) == 0) {
			snprintf(code, clen, "%s", p + 5);
		} else if (strncmp(p, "state=", 6) == 0) {
			snprintf(state, slen, "%s", p + 6);
		}
	}
	CHECK(code[0] != '\0' && state[0] != '\0');
	curl_free(q);
	curl_url_cleanup(u);
	curl_easy_cleanup(e);
}

/* initiate-verification (or reauthorize) -> browser -> complete. */
void
bootstrap(mk_runtime *rt, const char *name, bool reauth)
{
	char *url = NULL, *state = NULL, *err = NULL, *id = NULL;
	char  code[256], st[64];

	CHECK_EQ(reauth ? mk_client_reauthorize(rt, name, &url, &state, &err)
	                : mk_client_initiate_verification(rt, name, &url,
	                                                  &state, &err),
	         0);
	CHECK(strlen(state) == 32);
	CHECK(strstr(url, "code_challenge_method=S256") != NULL);
	CHECK(strstr(url, "code_challenge=") != NULL);
	authorize(url, code, sizeof(code), st, sizeof(st));
	CHECK(strcmp(st, state) == 0);
	CHECK_EQ(mk_oauth_complete(rt, st, code, &id, &err), 0);
	CHECK(id != NULL);
	mk_free(url);
	mk_free(state);
	mk_free(id);
}

void
whoami_is(mk_runtime *rt, const char *name, const char *who)
{
	int   rc;
	char *out = call_text(rt, name, "whoami", "{}", &rc);

	if (rc != 0 || strstr(out, who) == NULL) {
		fprintf(stderr, "whoami on %s: rc %d: %s\n", name, rc, out);
	}
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, who) != NULL);
	free(out);
}

int64_t
cr_stat(mk_runtime *rt, const char *key)
{
	kn_answer a;
	mp_r      r;
	int64_t   v;

	CHECK_EQ(kn_ask(rt->credential, MSG_CR_STATS, CODEC_EMPTY,
	                CODEC_EMPTY_LEN, WAIT_MS, &a),
	         0);
	mp_r_open(&r, a.data, a.len);
	v = mp_int(mp_get(&r, key), -1);
	mp_r_close(&r);
	free(a.data);
	return (v);
}

/* A call as user (user_id), subject token optional; *res kept. */
int
call_as(mk_runtime *rt, const char *client, const char *user,
        const char *subject, mk_result **res)
{
	mk_call c = {.size          = sizeof(mk_call),
	             .client        = client,
	             .tool          = "whoami",
	             .arguments     = "{}",
	             .user_id       = user,
	             .subject_token = subject};

	return (mk_tool_call(rt, &c, res));
}

/* The call as user answers its own name. */
void
whoami_as(mk_runtime *rt, const char *client, const char *user,
          const char *subject, const char *want)
{
	mk_result *res = NULL;
	int        rc  = call_as(rt, client, user, subject, &res);

	if (rc != 0 || res->result == NULL ||
	    strstr(res->result, want) == NULL) {
		fprintf(stderr, "%s as %s: rc %d: %s\n", client, user, rc,
		        res && res->error ? res->error : "");
	}
	CHECK_EQ(rc, 0);
	CHECK(strstr(res->result, want) != NULL);
	mk_result_free(&res);
}

/* The mcp_auth_required of a call as user (new reference). */
json_t *
auth_required(mk_runtime *rt, const char *client, const char *user,
              const char *subject)
{
	mk_result *res = NULL;
	json_t    *p;

	CHECK_EQ(call_as(rt, client, user, subject, &res), MK_EAUTH);
	CHECK(res != NULL && res->auth_required != NULL);
	fprintf(seen, "%s %s\n", res->error, res->auth_required);
	CHECK((p = json_loads(res->auth_required, 0, NULL)) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(p, "mcp_client_name")),
	             client) == 0);
	CHECK(json_string_value(json_object_get(p, "mcp_client_id")) != NULL);
	CHECK(json_string_value(json_object_get(p, "message")) != NULL);
	mk_result_free(&res);
	return (p);
}

int
add_user(mk_runtime *rt, const char *name, const char *auth, const char *extra)
{
	char *err = NULL;
	int   rv  = add(
	           rt, &err,
	           "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"%s\", %s, \"tools_to_execute\": [\"*\"]}",
	           name, srv.port, auth, extra);

	if (rv != 0) {
		fprintf(stderr, "add %s: %s\n", name, err);
	}
	mk_free(err);
	return (rv);
}

void
authorize_as(mk_runtime *rt, json_t *p, const char *user)
{
	char  url[4096], code[256], st[64];
	char *err = NULL;

	CHECK(strcmp(json_string_value(json_object_get(p, "kind")), "oauth") ==
	      0);
	snprintf(url, sizeof(url), "%s&login_hint=%s",
	         json_string_value(json_object_get(p, "authorize_url")), user);
	authorize(url, code, sizeof(code), st, sizeof(st));
	CHECK(strcmp(st,
	             json_string_value(json_object_get(p, "session_id"))) ==
	      0);
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), 0);
}

/* The (generated) id of client name, from its state events. */
char *
id_of(sub *sb, const char *name)
{
	char *id = NULL;

	pthread_mutex_lock(&sb->mtx);
	for (int i = 0; i < sb->n && id == NULL; i++) {
		if (strcmp(sb->ev[i].name, name) == 0) {
			id = strdup(sb->ev[i].client_id);
		}
	}
	pthread_mutex_unlock(&sb->mtx);
	if (id == NULL) {
		fprintf(stderr, "no state event of %s\n", name);
	}
	CHECK(id != NULL);
	return (id);
}

int
force(mk_runtime *rt, const char *client_id, const char *mode,
      const char *identity, const char *subject)
{
	cr_get_msg m = {.id       = (char *)client_id,
	                .mode     = (char *)mode,
	                .identity = (char *)identity,
	                .force    = true,
	                .subject  = (char *)subject};
	kn_answer  a;
	int        rv;

	rv = kn_ask_msg(rt->credential, MSG_CR_GET, CODEC_OF(cr_get_msg, &m),
	                WAIT_MS, &a);
	free(a.data);
	return (rv);
}

json_t *
as_requests(void)
{
	json_t *r = admin_json(srv.port, "/admin/requests", NULL);
	json_t *a = json_incref(json_object_get(r, "requests"));

	CHECK(json_is_array(a));
	json_decref(r);
	return (a);
}
