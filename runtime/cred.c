/*
 * cred.c - what the public API asks of the credential actor: OAuth
 * flows started and completed (the shared credential's and a caller's
 * own), per-user headers and token exchange verified, a caller's headers
 * submitted, cached credentials evicted.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/credential.h"
#include "actors/kernel/kernel.h"
#include "mcpkeep.h"
#include "runtime/runtime_impl.h"
#include "transport/oauth.h"

#define CR_ASK_MS 90000 /* discovery, registration, then the flow */

/* rt_ask of the credential actor (discovery, registration, a flow). */
static int
cr_ask(mk_runtime *rt, uint32_t type, bool given, const codec_fields *f,
       const void *m, kn_answer *a, char **err)
{
	return (rt_ask(rt, RT_TO_CREDENTIAL, type, given, f, m, CR_ASK_MS, a,
	               err));
}

static int
oauth_start(mk_runtime *rt, const char *client, const char *mode,
            const char *identity, const char *by, bool again, char **url,
            char **state, char **err)
{
	cr_initiate_msg m = {.client   = (char *)client,
	                     .mode     = (char *)mode,
	                     .identity = (char *)identity,
	                     .by       = (char *)by,
	                     .again    = again};
	cr_flow_msg     flow;
	kn_answer       a;
	int             rv;

	if (url == NULL) {
		return (MK_EINVAL);
	}
	*url = NULL;
	if ((rv = cr_ask(rt, MSG_CR_INITIATE,
	                 client != NULL && mode != NULL && identity != NULL,
	                 CODEC_OF(cr_initiate_msg, &m), &a, err)) != 0) {
		return (rv);
	}
	if (cr_flow_msg_unpack(a.data, a.len, &flow) == 0) {
		*url               = flow.authorize_url;
		flow.authorize_url = NULL;
		if (state != NULL) {
			*state     = flow.state;
			flow.state = NULL;
		}
		cr_flow_msg_clear(&flow);
	}
	free(a.data);
	return (*url != NULL ? 0 : MK_ENOMEM);
}

int
mk_client_initiate_verification(mk_runtime *rt, const char *client,
                                char **authorize_url, char **state, char **err)
{
	return (oauth_start(rt, client, "shared", "", NULL, false,
	                    authorize_url, state, err));
}

int
mk_client_reauthorize(mk_runtime *rt, const char *client, char **authorize_url,
                      char **state, char **err)
{
	return (oauth_start(rt, client, "shared", "", NULL, true,
	                    authorize_url, state, err));
}

int
mk_user_oauth_start(mk_runtime *rt, const char *client, const char *mode,
                    const char *identity, const char *requester,
                    char **authorize_url, char **state, char **err)
{
	if (mode == NULL || identity == NULL || *identity == '\0' ||
	    (strcmp(mode, "user") != 0 && strcmp(mode, "vk") != 0 &&
	     strcmp(mode, "session") != 0)) {
		return (MK_EINVAL);
	}
	return (oauth_start(rt, client, mode, identity, requester, false,
	                    authorize_url, state, err));
}

/* Completes a flow: the client's when client is not NULL. */
static int
complete(mk_runtime *rt, const char *client, const char *state,
         const char *code, const char *iss, char **client_id, char **err)
{
	cr_complete_msg  m = {.state  = (char *)state,
	                      .code   = (char *)code,
	                      .client = (char *)client,
	                      .iss    = (char *)iss};
	cr_client_id_msg out;
	kn_answer        a;
	int              rv;

	if ((rv = cr_ask(rt, MSG_CR_COMPLETE, state != NULL && code != NULL,
	                 CODEC_OF(cr_complete_msg, &m), &a, err)) != 0) {
		return (rv);
	}
	if (client_id != NULL &&
	    cr_client_id_msg_unpack(a.data, a.len, &out) == 0) {
		*client_id = out.client_id;
	}
	free(a.data);
	return (0);
}

int
mk_oauth_complete(mk_runtime *rt, const char *state, const char *code,
                  char **client_id, char **err)
{
	return (complete(rt, NULL, state, code, NULL, client_id, err));
}

char *
mk_query_param(const char *query, const char *name)
{
	return (query != NULL && name != NULL ? oa_query_param(query, name)
	                                      : NULL);
}

int
mk_oauth_callback(mk_runtime *rt, const char *query, char **client_id,
                  char **err)
{
	char *state = query != NULL ? oa_query_param(query, "state") : NULL;
	char *code  = query != NULL ? oa_query_param(query, "code") : NULL;
	char *iss   = query != NULL ? oa_query_param(query, "iss") : NULL;
	char *error = query != NULL ? oa_query_param(query, "error") : NULL;
	int   rv;

	if (error != NULL && rt_valid(rt)) {
		/* RFC 6749 section 4.1.2.1: the flow stays until it expires
		 * (a state is no proof that this answer is the AS's); only an
		 * error code is shown, never what else came with it */
		bool word = strspn(error, "abcdefghijklmnopqrstuvwxyz_") ==
		                strlen(error) &&
		        strlen(error) <= 64;
		rv = MK_EINVAL;
		if (err != NULL &&
		    asprintf(err,
		             "the authorization server did not authorize: %s",
		             word ? error : "(not an OAuth error code)") < 0) {
			*err = NULL;
		}
	} else {
		rv = complete(rt, NULL, state, code, iss, client_id, err);
	}
	free(state);
	mk_free_secret(code);
	free(iss);
	free(error);
	return (rv);
}

int
mk_client_complete_oauth(mk_runtime *rt, const char *client, const char *state,
                         const char *code, char **err)
{
	if (client == NULL) {
		if (err != NULL) {
			*err = NULL;
		}
		return (rt_valid(rt) ? MK_EINVAL : MK_EHANDLE);
	}
	return (complete(rt, client, state, code, NULL, NULL, err));
}

/* An ask of the credential actor answered with nothing. */
static int
cr_void(mk_runtime *rt, uint32_t type, bool given, const codec_fields *f,
        const void *m, char **err)
{
	kn_answer a;
	int       rv;

	if ((rv = cr_ask(rt, type, given, f, m, &a, err)) == 0) {
		free(a.data);
	}
	return (rv);
}

int
mk_client_verify_headers(mk_runtime *rt, const char *client,
                         const char *headers_json, char **err)
{
	cr_verify_headers_msg m = {.client  = (char *)client,
	                           .headers = (char *)headers_json};

	return (cr_void(rt, MSG_CR_VERIFY_HEADERS,
	                client != NULL && headers_json != NULL,
	                CODEC_OF(cr_verify_headers_msg, &m), err));
}

int
mk_client_verify_exchange(mk_runtime *rt, const char *client,
                          const char *subject_token, char **err)
{
	cr_verify_exchange_msg m = {.client  = (char *)client,
	                            .subject = (char *)subject_token};

	return (cr_void(rt, MSG_CR_VERIFY_EXCHANGE,
	                client != NULL && subject_token != NULL,
	                CODEC_OF(cr_verify_exchange_msg, &m), err));
}

int
mk_user_headers_submit(mk_runtime *rt, const char *client, const char *mode,
                       const char *identity, const char *session_id,
                       const char *headers_json, char **err)
{
	cr_submit_headers_msg m = {.session_id = (char *)session_id,
	                           .headers    = (char *)headers_json,
	                           .client     = (char *)client,
	                           .mode       = (char *)mode,
	                           .identity   = (char *)identity};

	return (cr_void(rt, MSG_CR_SUBMIT_HEADERS,
	                client != NULL && mode != NULL && identity != NULL &&
	                        session_id != NULL && headers_json != NULL,
	                CODEC_OF(cr_submit_headers_msg, &m), err));
}

int
mk_credentials_evict(mk_runtime *rt, const char *client, const char *mode,
                     const char *identity, const char *subject_token,
                     unsigned *count, char **err)
{
	cr_evict_msg   m = {.client   = (char *)client,
	                    .mode     = (char *)mode,
	                    .identity = (char *)identity,
	                    .subject  = (char *)subject_token};
	cr_evicted_msg out;
	kn_answer      a;
	int            rv;

	if ((rv = cr_ask(rt, MSG_CR_EVICT, true, CODEC_OF(cr_evict_msg, &m),
	                 &a, err)) != 0) {
		return (rv);
	}
	if (count != NULL && cr_evicted_msg_unpack(a.data, a.len, &out) == 0) {
		*count = (unsigned)out.evicted;
	}
	free(a.data);
	return (0);
}
