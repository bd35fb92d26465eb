/*
 * jsonrpc_test.c - JSON-RPC framing: building and validating messages.
 */
#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "testutil.h"

static int
parse(const char *text, codec_jr_msg *m, json_t **root, char *why)
{
	return (codec_jr_parse(text, strlen(text), 0, root, m, why, 200));
}

static void
classify_good(void)
{
	codec_jr_msg m;
	json_t      *root;
	char         why[200];

	CHECK_EQ(parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"a\":1}}",
	               &m, &root, why),
	         0);
	CHECK_EQ(m.kind, JR_RESULT);
	CHECK_EQ(m.id, 7);
	CHECK(json_is_object(m.result));
	json_decref(root);

	CHECK_EQ(
	        parse("{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":-32602,\"message\":\"bad\"}}",
	              &m, &root, why),
	        0);
	CHECK_EQ(m.kind, JR_ERROR);
	CHECK_EQ(m.err_code, -32602);
	CHECK(strcmp(m.err_message, "bad") == 0);
	json_decref(root);

	CHECK_EQ(
	        parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}",
	              &m, &root, why),
	        0);
	CHECK_EQ(m.kind, JR_NOTIFICATION);
	CHECK(strcmp(m.method, "notifications/progress") == 0);
	json_decref(root);

	CHECK_EQ(
	        parse("{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}",
	              &m, &root, why),
	        0);
	CHECK_EQ(m.kind, JR_REQUEST);
	json_decref(root);
}

static void
classify_bad(void)
{
	static const char *bad[] = {
	        "",
	        "not json",
	        "[1,2]",
	        "42",
	        "{\"id\":1,\"result\":{}}",
	        "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}",
	        "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}",
	        "{\"jsonrpc\":\"2.0\",\"result\":{}}",
	        "{\"jsonrpc\":\"2.0\",\"id\":1}",
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}",
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}",
	        "{\"jsonrpc\":\"2.0\",\"method\":5}",
	        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":3}",
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} trailing",
	};
	codec_jr_msg m;
	json_t      *root;
	char         why[200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		CHECK_EQ(parse(bad[i], &m, &root, why), MK_EPROTO);
		CHECK(root == NULL);
		CHECK(why[0] != '\0');
		CHECK(strchr(why, '\n') == NULL);
	}
}

static void
size_limit(void)
{
	codec_jr_msg m;
	json_t      *root;
	char         why[200];
	const char  *msg = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";

	CHECK_EQ(codec_jr_parse(msg, strlen(msg), 10, &root, &m, why, 200),
	         MK_ETOOBIG);
	CHECK(strstr(why, "exceeds the 10-byte limit") != NULL);
	CHECK_EQ(codec_jr_parse(msg, strlen(msg), strlen(msg), &root, &m, why,
	                        200),
	         0);
	json_decref(root);
}

static void
build(void)
{
	json_t *p = json_pack("{s:s}", "name", "echo");
	char   *s = codec_jr_request(3, "tools/call", p);

	CHECK(strcmp(s,
	             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}") ==
	      0);
	free(s);
	s = codec_jr_notification("notifications/initialized", NULL);
	CHECK(strcmp(s,
	             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") ==
	      0);
	free(s);
	json_decref(p);
}

int
main(void)
{
	RUN(classify_good);
	RUN(classify_bad);
	RUN(size_limit);
	RUN(build);
	return (0);
}
