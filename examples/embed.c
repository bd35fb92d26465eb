/*
 * embed.c - the smallest embedder: links the shared libmcpkeep (public
 * symbols only), boots a runtime, reads its counters, shuts it down.
 * Build against an installed copy with
 *     cc embed.c $(pkg-config --cflags --libs mcpkeep)
 */
#include <stdio.h>

#include <mcpkeep.h>

int
main(void)
{
	mk_runtime *rt;
	mk_options  o;
	mk_stats    st = MK_STATS_INIT;
	int         rv;

	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_WARN;
	o.stream_url = "inproc://embed-example";
	if ((rv = mk_runtime_open(&rt, &o)) != MK_OK) {
		fprintf(stderr, "open: %s\n", mk_strerror(rv));
		return (1);
	}
	if ((rv = mk_runtime_stats(rt, &st, 0)) != MK_OK) {
		fprintf(stderr, "stats: %s\n", mk_strerror(rv));
		mk_runtime_close(&rt);
		return (1);
	}
	printf("mcpkeep %s: %llu actor(s) running, stream %s\n",
	       MCPKEEP_VERSION, (unsigned long long)st.actors,
	       mk_stream_url(rt));
	mk_runtime_close(&rt);
	return (0);
}
