#!/usr/bin/env node
// sdkbench.mjs - the TS SDK's Client as a benchmark driver: CONC clients
// (each over its own StreamableHTTPClientTransport and session, as
// agents connect) call one tool N times in all, side by side.
//
// Usage: node sdkbench.mjs URL TOOL N CONC
// Prints one line: {"calls_s", "p50_us", "p99_us"} of the N calls (after
// a warm-up of CONC * 20 calls), then exits 0; on a failure, the error
// on stderr and exit 1.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from
	'@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, tool, n, conc] = process.argv.slice(2);
const total = Number(n);
const width = Number(conc);

async function open() {
	const c = new Client({ name: 'mk-sdkbench', version: '1.0.0' });
	await c.connect(new StreamableHTTPClientTransport(new URL(url)));
	return c;
}

// Runs count calls over the clients, each taking the next while any is
// left; the latencies in us.
async function run(clients, count) {
	const lat = [];
	let next = 0;
	await Promise.all(clients.map(async (c) => {
		while (next < count) {
			next++;
			const t0 = process.hrtime.bigint();
			const r = await c.callTool({ name: tool, arguments: {} });
			if (r.isError) {
				throw new Error(`${tool} failed: ${JSON.stringify(r)}`);
			}
			lat.push(Number(process.hrtime.bigint() - t0) / 1000);
		}
	}));
	return lat;
}

try {
	const clients = await Promise.all(
		Array.from({ length: width }, () => open()));
	await run(clients, width * 20);
	const t0 = process.hrtime.bigint();
	const lat = await run(clients, total);
	const s = Number(process.hrtime.bigint() - t0) / 1e9;
	lat.sort((a, b) => a - b);
	console.log(JSON.stringify({
		calls_s: total / s,
		p50_us: lat[Math.floor(lat.length * 0.5)],
		p99_us: lat[Math.floor(lat.length * 0.99)],
	}));
	await Promise.all(clients.map((c) => c.close()));
	process.exit(0);
} catch (e) {
	console.error(e.message);
	process.exit(1);
}
