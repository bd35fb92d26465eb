// common.mjs - what sdk.mjs and mastra.mjs share: loading a pinned peer
// package from test/peers (MK_PEERS_DIR), the timed call loops, resident
// memory, and the one JSON line each prints for peers_bench.c.
//
// The peers live in test/peers/node_modules, not beside these scripts, so
// a bare import would not find them: peer() resolves a package's "import"
// export by hand and fails loudly, naming what to install, when the
// package is missing.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const install = 'run tools/peers.sh (npm ci in test/peers)';

// The module URL of pkg's export sub ('.' or './client/index.js').
function entry(root, pkg, sub) {
	let meta;
	try {
		meta = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
	} catch {
		throw new Error(`${pkg} is not installed in ${process.env.MK_PEERS_DIR}: ${install}`);
	}
	const ex = meta.exports ?? {};
	let e = ex[sub];
	if (e === undefined) {
		for (const [k, v] of Object.entries(ex)) {
			const star = k.indexOf('*');
			if (star >= 0 && sub.startsWith(k.slice(0, star))) {
				const rest = sub.slice(star);
				e = JSON.parse(JSON.stringify(v).replaceAll('*', rest));
				break;
			}
		}
	}
	while (e !== null && typeof e === 'object') {
		e = e.import ?? e.default;
	}
	if (typeof e !== 'string') {
		throw new Error(`${pkg} ${meta.version} has no import export ${sub}`);
	}
	return { url: pathToFileURL(join(root, e)).href, version: meta.version };
}

// Imports export sub of the pinned package pkg; {mod, version}.
export async function peer(pkg, sub = '.') {
	const dir = process.env.MK_PEERS_DIR;
	if (!dir) {
		throw new Error('MK_PEERS_DIR (test/peers) is not set');
	}
	const e = entry(join(dir, 'node_modules', pkg), pkg, sub);
	return { mod: await import(e.url), version: e.version };
}

// Runs count calls over the callers (functions that make one call), each
// taking the next while any is left; the latencies in us.
export async function run(callers, count) {
	const lat = [];
	let next = 0;
	await Promise.all(callers.map(async (call) => {
		while (next < count) {
			next++;
			const t0 = process.hrtime.bigint();
			await call();
			lat.push(Number(process.hrtime.bigint() - t0) / 1000);
		}
	}));
	return lat;
}

// A warm-up of 20 calls per caller, then count calls timed:
// {calls_s, p50_us, p99_us}.
export async function timed(callers, count) {
	await run(callers, callers.length * 20);
	const t0 = process.hrtime.bigint();
	const lat = await run(callers, count);
	const s = Number(process.hrtime.bigint() - t0) / 1e9;
	lat.sort((a, b) => a - b);
	return {
		calls_s: count / s,
		p50_us: lat[Math.floor(lat.length * 0.5)],
		p99_us: lat[Math.floor(lat.length * 0.99)],
	};
}

// Resident KiB and open fds of this process, after a full collection
// (node --expose-gc; without it the garbage counts too).
export function footprint() {
	globalThis.gc?.();
	globalThis.gc?.();
	return {
		rss_kib: process.memoryUsage().rss / 1024,
		fds: readdirSync('/proc/self/fd').length,
	};
}

// The usage line's arguments: URL N M.
export function args(script) {
	const [url, n, m] = process.argv.slice(2);
	if (!url || !(Number(n) > 0) || !(Number(m) > 0)) {
		console.error(`usage: node --expose-gc ${script} URL CALLS CONNECTIONS`);
		process.exit(2);
	}
	return { url, calls: Number(n), conns: Number(m) };
}

// Prints the one result line and exits 0: the runs, and what conns
// connections added between the footprints f0 and f1, per connection.
export function report(version, seq, conc, f0, f1, conns) {
	console.log(JSON.stringify({
		version,
		seq,
		conc,
		kib_per_conn: (f1.rss_kib - f0.rss_kib) / conns,
		fds_per_conn: (f1.fds - f0.fds) / conns,
		node: process.versions.node,
	}));
	process.exit(0);
}

// Prints a failure on stderr and exits 1.
export function fail(e) {
	console.error(e?.stack ?? String(e));
	process.exit(1);
}
