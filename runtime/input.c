/*
 * input.c - what the host offers MCP servers (mk_options.inputs, roots,
 * on_input) made into the client actors' cl_host, and the host's answers
 * to the servers' requests (mk_input_answer, mk_inputs_json).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actors/client/client.h"
#include "runtime/runtime_impl.h"

/* The host's on_input, in the public form. */
static void
tell_host(void *arg, const char *client_id, const char *name,
          const char *request_id, const char *method, const char *params)
{
	mk_runtime *rt = arg;
	mk_input    in = {
	           .client_id   = client_id,
	           .client_name = name,
	           .request_id  = request_id,
	           .method      = method,
	           .params      = params,
        };

	rt->opts.on_input(rt->opts.input_arg, &in);
}

/* Roots as the runtime answers them: an array of {"uri": "file://...",
 * "name"?}; the roots/list result's text, or NULL when they will not
 * do. */
static char *
roots_result(const char *roots)
{
	json_t *a = json_loads(roots, 0, NULL);
	json_t *r = NULL, *root;
	size_t  i;
	char   *text;

	if (!json_is_array(a)) {
		json_decref(a);
		return (NULL);
	}
	json_array_foreach(a, i, root)
	{
		const char *uri =
		        json_string_value(json_object_get(root, "uri"));
		json_t *name = json_object_get(root, "name");
		if (uri == NULL || strncmp(uri, "file://", 7) != 0 ||
		    (name != NULL && !json_is_string(name))) {
			json_decref(a);
			return (NULL);
		}
	}
	r    = json_pack("{s:o}", "roots", a);
	text = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	return (text);
}

int
rt_host_init(mk_runtime *rt)
{
	unsigned in = rt->opts.inputs;
	json_t  *caps;

	if ((in &
	     ~(MK_INPUT_ELICITATION | MK_INPUT_SAMPLING | MK_INPUT_ROOTS)) !=
	    0) {
		return (MK_EINVAL);
	}
	rt->host.inputs = in;
	if ((in & MK_INPUT_ROOTS) && rt->opts.roots != NULL &&
	    (rt->roots = roots_result(rt->opts.roots)) == NULL) {
		return (MK_EINVAL);
	}
	rt->host.roots = rt->roots;
	caps           = json_object();
	if (in & MK_INPUT_ELICITATION) {
		json_object_set_new(caps, "elicitation",
		                    json_pack("{s:{}, s:{}}", "form", "url"));
	}
	if (in & MK_INPUT_SAMPLING) {
		json_object_set_new(caps, "sampling", json_object());
	}
	if (in & MK_INPUT_ROOTS) {
		json_object_set_new(caps, "roots", json_object());
	}
	rt->caps = caps != NULL ? json_dumps(caps, JSON_COMPACT) : NULL;
	json_decref(caps);
	if (rt->caps == NULL) {
		return (MK_ENOMEM);
	}
	rt->host.caps = rt->caps;
	if (rt->opts.on_input != NULL) {
		rt->host.on_input = tell_host;
		rt->host.arg      = rt;
	}
	return (0);
}

void
rt_host_fini(mk_runtime *rt)
{
	free(rt->caps);
	free(rt->roots);
	rt->caps = rt->roots = NULL;
}

int
mk_input_answer(mk_runtime *rt, const char *client, const char *request_id,
                const char *result_json, char **err)
{
	cl_input_msg m = {.request_id = (char *)request_id,
	                  .result     = (char *)result_json};
	kn_answer    ans;
	int          rv;

	if (err != NULL) {
		*err = NULL;
	}
	if (request_id == NULL) {
		return (rt_valid(rt) ? MK_EINVAL : MK_EHANDLE);
	}
	rv = rt_client_ask(rt, client, MSG_CL_INPUT,
	                   CODEC_OF(cl_input_msg, &m), &ans);
	if (rv != 0) {
		rt_take_error(&ans, rv, err);
	}
	free(ans.data);
	return (rv);
}

int
mk_inputs_json(mk_runtime *rt, const char *client, char **json)
{
	cl_inputs_msg m;
	kn_answer     ans;
	int           rv;

	if (json == NULL) {
		return (MK_EINVAL);
	}
	*json = NULL;
	rv = rt_client_ask(rt, client, MSG_CL_INPUTS, &codec_no_fields, NULL,
	                   &ans);
	if (rv == 0 && cl_inputs_msg_unpack(ans.data, ans.len, &m) == 0) {
		*json = m.json;
		rv    = *json != NULL ? 0 : MK_EPROTO;
	}
	free(ans.data);
	return (rv);
}
