/*
 * jsonrpc_fuzz.c - libFuzzer target for the JSON-RPC response decoder: any
 * input is either rejected with a reason or classified consistently.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	codec_jr_msg m;
	json_t      *root;
	char         why[128] = "";

	if (codec_jr_parse((const char *)data, size, 4096, &root, &m, why,
	                   sizeof(why)) != 0) {
		if (root != NULL || why[0] == '\0' ||
		    memchr(why, '\0', sizeof(why)) == NULL) {
			abort();
		}
		return (0);
	}
	switch (m.kind) {
	case JR_RESULT:
		if (m.result == NULL) {
			abort();
		}
		break;
	case JR_ERROR:
		if (m.err_message == NULL) {
			abort();
		}
		break;
	case JR_NOTIFICATION:
	case JR_REQUEST:
		if (m.method == NULL) {
			abort();
		}
		break;
	}
	json_decref(root);
	return (0);
}
