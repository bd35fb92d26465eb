// sdk.mjs - the official TypeScript SDK's Client (@modelcontextprotocol/sdk,
// pinned in test/peers) as peers_bench.c drives it: one tools/call of TOOL
// "echo" at URL, CALLS times sequentially on one Client and CALLS times
// 16-way over 16 Clients (each its own StreamableHTTPClientTransport and
// session, as agents connect), after a warm-up; and the resident memory
// CONNECTIONS Clients, connected and initialized, add to the process
// (after a full GC), per Client.
//
// Usage: node --expose-gc sdk.mjs URL CALLS CONNECTIONS  (MK_PEERS_DIR set)
// Prints one JSON line: {"version", "seq": {"calls_s", "p50_us", "p99_us"},
// "conc": {...}, "kib_per_conn", "fds_per_conn", "node"}; exits 0.  On a
// failure, the error on stderr and exit 1.
import { args, fail, footprint, peer, report, timed } from './common.mjs';

const CONC = 16;

try {
	const { url, calls, conns } = args('sdk.mjs');
	const { mod: { Client }, version } =
		await peer('@modelcontextprotocol/sdk', './client/index.js');
	const { mod: { StreamableHTTPClientTransport } } = await peer(
		'@modelcontextprotocol/sdk', './client/streamableHttp.js');

	const open = async () => {
		const c = new Client({ name: 'mk-peers-bench', version: '1.0.0' });
		await c.connect(new StreamableHTTPClientTransport(new URL(url)));
		return c;
	};
	const caller = (c) => async () => {
		const r = await c.callTool({ name: 'echo', arguments: {} });
		if (r.isError) {
			throw new Error(`echo failed: ${JSON.stringify(r)}`);
		}
	};
	const closeAll = (cs) => Promise.all(cs.map((c) => c.close()));

	// memory: one Client first, so that code loaded once is not counted
	await closeAll([await open()]);
	const f0 = footprint();
	let many = await Promise.all(Array.from({ length: conns }, open));
	const f1 = footprint();
	await closeAll(many);
	many = null;

	const one = [await open()];
	const seq = await timed(one.map(caller), calls);
	await closeAll(one);
	const width = await Promise.all(Array.from({ length: CONC }, open));
	const conc = await timed(width.map(caller), calls);
	await closeAll(width);
	report(version, seq, conc, f0, f1, conns);
} catch (e) {
	fail(e);
}
