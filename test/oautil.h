/*
 * oautil.h - what the tests against test/peers/oauth.mjs share: the
 * server, runtimes on their own store in a test folder (logging at debug
 * to one file, what their stream and list showed kept for a leak check),
 * the admin's browser (the authorize redirect read, never followed), and
 * calls as a caller.  A failed check exits the test (testutil.h).
 */
#ifndef TEST_OAUTIL_H
#define TEST_OAUTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"

extern peer        srv;         /* oauth.mjs */
extern char        logpath[64]; /* every runtime logs here, at debug */
extern int         logfd;
extern char        dir[];     /* the test folder (mkdtemp'd by main) */
extern unsigned    cache_max; /* credential_cache_max of the next runtimes */
extern const char *client_metadata_url; /* and their
                                         * oauth_client_metadata_url */
extern const char *otlp_endpoint;       /* and otlp_endpoint */
extern FILE       *seen;                /* what the streams and lists showed */

/* oauth_suite_begin: the test folder (dir), the debug log in it, the
 * leak-check file, and oauth.mjs started (srv); oauth_suite_end stops
 * the server and removes the folder. */
void oauth_suite_begin(void);
void oauth_suite_end(void);

mk_runtime *open_rt(sub *sb, const char *name);
void        close_rt(mk_runtime **rt, sub *sb);

json_t *counters(void);              /* the server's /admin/counters */
long    by_grant(const char *grant); /* token requests of a grant */
void    as_admin(const char *path, const char *body);

int  add_oauth(mk_runtime *rt, const char *name, const char *oauth,
               bool sticky);
int  add_user(mk_runtime *rt, const char *name, const char *auth,
              const char *extra);
void authorize(const char *url, char *code, size_t clen, char *state,
               size_t slen);
void bootstrap(mk_runtime *rt, const char *name, bool reauth);
void authorize_as(mk_runtime *rt, json_t *p, const char *user);

void    whoami_is(mk_runtime *rt, const char *name, const char *who);
int     call_as(mk_runtime *rt, const char *client, const char *user,
                const char *subject, mk_result **res);
void    whoami_as(mk_runtime *rt, const char *client, const char *user,
                  const char *subject, const char *want);
json_t *auth_required(mk_runtime *rt, const char *client, const char *user,
                      const char *subject);
int64_t cr_stat(mk_runtime *rt, const char *key);
char   *id_of(sub *sb, const char *name);
/* force asks the credential actor for the token of (client_id, mode,
 * identity) refreshed now (or exchanged again: subject); its status */
int force(mk_runtime *rt, const char *client_id, const char *mode,
          const char *identity, const char *subject);
/* as_requests: the server's request log (GET /admin/requests), oldest
 * first: {method, path, status, query, form, json, auth, basic_id} */
json_t *as_requests(void);

#endif /* TEST_OAUTIL_H */
