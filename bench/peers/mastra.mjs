// mastra.mjs - Mastra's MCPClient (@mastra/mcp, a multi-server client
// manager, pinned in test/peers) as peers_bench.c drives it: one call of
// the tool "echo" at URL through the Mastra tool it makes of it
// (tools['s0_echo'].execute: Mastra names a tool SERVER_TOOL), CALLS
// times sequentially on a client of one server and CALLS times 16-way on
// a client of 16 servers (each its own transport and session, one caller
// each), after a warm-up; and the resident memory one MCPClient of
// CONNECTIONS servers, connected and initialized (listTools() connects
// every server and lists its tools), adds to the process (after a full
// GC), per server.
//
// @mastra/mcp 2.x and @mastra/core want Node >= 22.13: peers_bench runs
// this with test/peers/node_modules/node/bin/node (the pinned npm package
// node@22).  Each server is pinned to the pre-2026 protocol
// (protocolVersion 'legacy'), as a host configures a server it knows: by
// default Mastra first probes with server/discover, whose string id
// fastmcp does not answer (it reads numeric ids only), and the connect
// fails after the probe's 3 s timeout.
//
// Usage: node --expose-gc mastra.mjs URL CALLS CONNECTIONS  (MK_PEERS_DIR
// set).  Prints one JSON line as sdk.mjs does; exits 0.  On a failure,
// the error on stderr and exit 1.
import { args, fail, footprint, peer, report, timed } from './common.mjs';

const CONC = 16;
let ids = 0;

try {
	const { url, calls, conns } = args('mastra.mjs');
	const { mod: { MCPClient }, version } = await peer('@mastra/mcp');

	// An MCPClient of n servers s0..s(n-1), connected: [client, tools].
	const open = async (n) => {
		const servers = {};
		for (let i = 0; i < n; i++) {
			servers[`s${i}`] = { url: new URL(url), protocolVersion: 'legacy' };
		}
		const c = new MCPClient({ id: `mk-peers-bench-${ids++}`, servers });
		const { tools, errors } = await c.listToolsWithErrors();
		if (Object.keys(tools).length !== n) {
			throw new Error(`${n} servers gave ${Object.keys(tools).length} tools: ${JSON.stringify(errors)}`);
		}
		return [c, tools];
	};
	const caller = (tool) => async () => {
		const r = await tool.execute({}, {});
		if (r?.isError || !Array.isArray(r?.content)) {
			throw new Error(`echo failed: ${JSON.stringify(r)}`);
		}
	};
	const callers = (tools, n) =>
		Array.from({ length: n }, (_, i) => caller(tools[`s${i}_echo`]));

	// memory: one client first, so that code loaded once is not counted
	await (await open(1))[0].disconnect();
	const f0 = footprint();
	let [many] = await open(conns);
	const f1 = footprint();
	await many.disconnect();
	many = null;

	const [one, t1] = await open(1);
	const seq = await timed(callers(t1, 1), calls);
	await one.disconnect();
	const [width, t16] = await open(CONC);
	const conc = await timed(callers(t16, CONC), calls);
	await width.disconnect();
	report(version, seq, conc, f0, f1, conns);
} catch (e) {
	fail(e);
}
