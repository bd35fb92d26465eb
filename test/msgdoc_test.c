/*
 * msgdoc_test.c - every actor header's message table is the one its
 * message definitions render (codec_msg_doc), and the typed pack/unpack
 * round-trips each field type.
 *
 * Run with --write to rewrite the tables in place (after changing a
 * definition):  build/test/msgdoc_test --write
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client.h"
#include "actors/cluster.h"
#include "actors/credential/credential.h"
#include "actors/persister.h"
#include "actors/supervisor/supervisor.h"
#include "codec/msgdef.h"
#include "testutil.h"

static const char *src_root;
static int         writing;

/* Each header with a table, and the definitions it shows. */
static const struct {
	const char         *path;
	const codec_msgdef *defs;
	const size_t       *n;
} tables[] = {
        {"actors/client/client_msg.h", cl_msgs, &cl_msgs_n},
        {"actors/cluster_msg.h", cluster_msgs, &cluster_msgs_n},
        {"actors/credential/credential_msg.h", credential_msgs,
         &credential_msgs_n},
        {"actors/persister_msg.h", persister_msgs, &persister_msgs_n},
        {"actors/supervisor/supervisor_msg.h", supervisor_msgs,
         &supervisor_msgs_n},
};

#define BEGIN " * <msgdoc>\n"
#define END   " * </msgdoc>\n"

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long  n;

	CHECK(f != NULL);
	CHECK(fseek(f, 0, SEEK_END) == 0);
	n = ftell(f);
	CHECK(n >= 0 && fseek(f, 0, SEEK_SET) == 0);
	CHECK((s = malloc((size_t)n + 1)) != NULL);
	CHECK(fread(s, 1, (size_t)n, f) == (size_t)n);
	s[n] = '\0';
	fclose(f);
	return (s);
}

static void
one_table(const char *rel, const codec_msgdef *defs, size_t n)
{
	char  path[4096];
	char *text, *doc, *b, *e;

	snprintf(path, sizeof(path), "%s/%s", src_root, rel);
	text = slurp(path);
	CHECK((doc = codec_msg_doc(defs, n)) != NULL);
	b = strstr(text, BEGIN);
	e = b != NULL ? strstr(b, END) : NULL;
	if (b == NULL || e == NULL) {
		fprintf(stderr, "%s: no " BEGIN " ... " END " block\n", rel);
		CHECK(0);
	}
	b += strlen(BEGIN);
	if ((size_t)(e - b) == strlen(doc) &&
	    memcmp(b, doc, strlen(doc)) == 0) {
		free(doc);
		free(text);
		return;
	}
	if (writing) {
		FILE *f = fopen(path, "wb");
		CHECK(f != NULL);
		fwrite(text, 1, (size_t)(b - text), f);
		fputs(doc, f);
		fputs(e, f);
		CHECK(fclose(f) == 0);
		printf("%s: table rewritten\n", rel);
	} else {
		fprintf(stderr,
		        "%s: the message table differs from the definitions; it should be:\n%s(msgdoc_test --write rewrites it)\n",
		        rel, doc);
		CHECK(0);
	}
	free(doc);
	free(text);
}

static void
headers(void)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		one_table(tables[i].path, tables[i].defs, *tables[i].n);
	}
}

/* Every field type survives pack and unpack; an absent string is NULL,
 * a NULL one is left out; a non-map is MK_EPROTO. */
static void
round_trip(void)
{
	cl_call_msg    in = {.tool       = "echo",
	                     .arguments  = "{\"a\":1}",
	                     .timeout_ms = -42,
	                     .subject    = "tok"};
	cl_call_msg    out;
	cl_connect_msg c = {.boot = true}, c2;
	mp_w           w;

	mp_w_init(&w);
	cl_call_msg_pack(&in, &w);
	CHECK_EQ(cl_call_msg_unpack(w.sb.data, w.sb.size, &out), 0);
	mp_w_fini(&w);
	CHECK(strcmp(out.tool, "echo") == 0);
	CHECK(strcmp(out.arguments, "{\"a\":1}") == 0);
	CHECK_EQ(out.timeout_ms, -42);
	CHECK(out.mode == NULL && out.identity == NULL);
	CHECK(strcmp(out.subject, "tok") == 0);
	cl_call_msg_clear(&out);
	cl_call_msg_clear(&out); /* twice is safe */
	CHECK(out.tool == NULL && out.subject == NULL);

	mp_w_init(&w);
	cl_connect_msg_pack(&c, &w);
	CHECK_EQ(cl_connect_msg_unpack(w.sb.data, w.sb.size, &c2), 0);
	mp_w_fini(&w);
	CHECK(c2.boot && !c2.restored && c2.tools == NULL);

	CHECK_EQ(cl_connect_msg_unpack("\x91\x01", 2, &c2), MK_EPROTO);
	CHECK(!c2.boot && c2.tools == NULL);
	CHECK_EQ(cl_connect_msg_unpack(CODEC_EMPTY, CODEC_EMPTY_LEN, &c2), 0);
	CHECK(!c2.boot && c2.tools == NULL);
}

int
main(int argc, char **argv)
{
	writing  = argc > 1 && strcmp(argv[1], "--write") == 0;
	src_root = getenv("MK_SRC_ROOT") != NULL ? getenv("MK_SRC_ROOT") : ".";
	RUN(headers);
	RUN(round_trip);
	return (0);
}
