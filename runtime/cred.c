/*
 * cred.c - what the public API asks of the credential actor: OAuth
 * flows started and completed (the shared credential's and a caller's
 * own), per-user headers and token exchange verified, a caller's headers
 * submitted, cached credentials evicted.
 */
#include <stdlib.h>
#include <string.h>

#include "actors/credential/credential.h"
#include "actors/kernel/kernel.h"
#include "codec/mp.h"
#include "mcpkeep.h"
#include "runtime/runtime_impl.h"

#define CR_ASK_MS 90000 /* discovery, registration, then the flow */

/*
 * Asks the credential actor with the string fields kv (key, value, ...;
 * n pairs; a NULL value is left out, a NULL required one refused).  On
 * 0, *a holds the reply (the caller frees a->data).
 */
static int
cr_ask(mk_runtime *rt, uint32_t type, const char *const *kv, int n,
       int required, kn_answer *a, char **err)
{
	mp_w     w;
	uint32_t present = 0;
	int      rv;

	memset(a, 0, sizeof(*a));
	if (err != NULL) {
		*err = NULL;
	}
	if (!rt_valid(rt)) {
		return (MK_EHANDLE);
	}
	for (int i = 0; i < n; i++) {
		if (kv[2 * i + 1] == NULL && i < required) {
			return (MK_EINVAL);
		}
		present += kv[2 * i + 1] != NULL;
	}
	mp_w_init(&w);
	mp_map(&w, present);
	for (int i = 0; i < n; i++) {
		if (kv[2 * i + 1] != NULL) {
			mp_kv_str(&w, kv[2 * i], kv[2 * i + 1]);
		}
	}
	rv = kn_ask(rt->credential, type, w.sb.data, w.sb.size, CR_ASK_MS, a);
	mp_w_fini(&w);
	if (rv != 0) {
		rt_take_error(a, rv, err);
		free(a->data);
		a->data = NULL;
	}
	return (rv);
}

/* The string out of a reply (malloc'd, or NULL); frees the reply. */
static char *
reply_str(kn_answer *a, const char *key)
{
	mp_r  r;
	char *v;

	mp_r_open(&r, a->data, a->len);
	v = mp_dup_str(mp_get(&r, key));
	mp_r_close(&r);
	return (v);
}

static int
oauth_start(mk_runtime *rt, const char *client, const char *mode,
            const char *identity, char **url, char **state, char **err)
{
	const char *kv[] = {"client", client,     "mode",
	                    mode,     "identity", identity};
	kn_answer   a;
	int         rv;

	if (url == NULL) {
		return (MK_EINVAL);
	}
	*url = NULL;
	if ((rv = cr_ask(rt, MSG_CR_INITIATE, kv, 3, 3, &a, err)) != 0) {
		return (rv);
	}
	*url = reply_str(&a, "authorize_url");
	if (state != NULL) {
		*state = reply_str(&a, "state");
	}
	free(a.data);
	return (*url != NULL ? 0 : MK_ENOMEM);
}

int
mk_client_initiate_verification(mk_runtime *rt, const char *client,
                                char **authorize_url, char **state, char **err)
{
	return (oauth_start(rt, client, "shared", "", authorize_url, state,
	                    err));
}

int
mk_client_reauthorize(mk_runtime *rt, const char *client, char **authorize_url,
                      char **state, char **err)
{
	return (oauth_start(rt, client, "shared", "", authorize_url, state,
	                    err));
}

int
mk_user_oauth_start(mk_runtime *rt, const char *client, const char *mode,
                    const char *identity, char **authorize_url, char **state,
                    char **err)
{
	if (mode == NULL || identity == NULL || *identity == '\0' ||
	    (strcmp(mode, "user") != 0 && strcmp(mode, "vk") != 0 &&
	     strcmp(mode, "session") != 0)) {
		return (MK_EINVAL);
	}
	return (oauth_start(rt, client, mode, identity, authorize_url, state,
	                    err));
}

int
mk_oauth_complete(mk_runtime *rt, const char *state, const char *code,
                  char **client_id, char **err)
{
	const char *kv[] = {"state", state, "code", code};
	kn_answer   a;
	int         rv;

	if ((rv = cr_ask(rt, MSG_CR_COMPLETE, kv, 2, 2, &a, err)) != 0) {
		return (rv);
	}
	if (client_id != NULL) {
		*client_id = reply_str(&a, "client_id");
	}
	free(a.data);
	return (0);
}

int
mk_client_complete_oauth(mk_runtime *rt, const char *client, const char *state,
                         const char *code, char **err)
{
	const char *kv[] = {"state", state, "code", code, "client", client};
	kn_answer   a;
	int         rv;

	if ((rv = cr_ask(rt, MSG_CR_COMPLETE, kv, 3, 3, &a, err)) == 0) {
		free(a.data);
	}
	return (rv);
}

/* A two-string ask of the credential actor answered with nothing. */
static int
cr_pair(mk_runtime *rt, uint32_t type, const char *k1, const char *v1,
        const char *k2, const char *v2, char **err)
{
	const char *kv[] = {k1, v1, k2, v2};
	kn_answer   a;
	int         rv;

	if ((rv = cr_ask(rt, type, kv, 2, 2, &a, err)) == 0) {
		free(a.data);
	}
	return (rv);
}

int
mk_client_verify_headers(mk_runtime *rt, const char *client,
                         const char *headers_json, char **err)
{
	return (cr_pair(rt, MSG_CR_VERIFY_HEADERS, "client", client, "headers",
	                headers_json, err));
}

int
mk_client_verify_exchange(mk_runtime *rt, const char *client,
                          const char *subject_token, char **err)
{
	return (cr_pair(rt, MSG_CR_VERIFY_EXCHANGE, "client", client,
	                "subject", subject_token, err));
}

int
mk_user_headers_submit(mk_runtime *rt, const char *session_id,
                       const char *headers_json, char **err)
{
	return (cr_pair(rt, MSG_CR_SUBMIT_HEADERS, "session_id", session_id,
	                "headers", headers_json, err));
}

int
mk_credentials_evict(mk_runtime *rt, const char *client, const char *mode,
                     const char *identity, const char *subject_token,
                     unsigned *count, char **err)
{
	const char *kv[] = {"client",   client,   "mode",    mode,
	                    "identity", identity, "subject", subject_token};
	kn_answer   a;
	mp_r        r;
	int         rv;

	if ((rv = cr_ask(rt, MSG_CR_EVICT, kv, 4, 0, &a, err)) != 0) {
		return (rv);
	}
	mp_r_open(&r, a.data, a.len);
	if (count != NULL) {
		*count = (unsigned)mp_int(mp_get(&r, "evicted"), 0);
	}
	mp_r_close(&r);
	free(a.data);
	return (0);
}
