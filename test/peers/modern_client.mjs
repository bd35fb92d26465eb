#!/usr/bin/env node
// modern_client.mjs - a 2026-07-28 client of mcpkeep's gateway, written
// from the revision's text (no npm package speaks it yet): stateless
// requests, each with params._meta protocolVersion and clientCapabilities
// and the headers MCP-Protocol-Version, Mcp-Method and Mcp-Name
// (streamable-http "Server Validation"); server/discover; tools/list;
// tools/call; a forged Mcp-Name; subscriptions/listen.
//
// Usage: node modern_client.mjs URL KEY OUT
//   URL  the gateway, e.g. http://127.0.0.1:8080/mcp
//   KEY  a virtual key, sent as Authorization: Bearer
//   OUT  a file that gets one JSON object: {"discover", "list", "call",
//        "forged": {status, body}, "no_method": {status, body},
//        "no_caps": {status, body}, "old": {status, body} (a version it
//        does not serve), "unknown": {status, body}, "ack" (the listen's
//        acknowledgement), "changed" (its first list_changed)}
// After the listen is acknowledged it prints "modern listening 1" and
// waits (30 s at most) for notifications/tools/list_changed on it, then
// closes the stream, writes OUT, prints "modern done 1" and exits 0 (1
// after a failure, with {"fatal": message} in OUT).
import { writeFileSync } from 'node:fs';

const [url, key, file] = process.argv.slice(2);
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const out = {};
let nextId = 1;

// One request; headers as the revision asks unless overridden (null:
// left out).  Its HTTP status and the JSON body (or the raw text).
async function rpc(method, params = {}, over = {}, version = '2026-07-28') {
	const body = {
		jsonrpc: '2.0',
		id: nextId++,
		method,
		params: { ...params, _meta: { [PV]: version, [CAPS]: {} } },
	};
	if (over.meta) {
		body.params._meta = over.meta;
	}
	const headers = {
		'Content-Type': 'application/json',
		Accept: 'application/json, text/event-stream',
		Authorization: `Bearer ${key}`,
		'MCP-Protocol-Version': version,
		'Mcp-Method': method,
	};
	if (params.name !== undefined) {
		headers['Mcp-Name'] = params.name;
	}
	for (const [h, v] of Object.entries(over.headers ?? {})) {
		if (v === null) {
			delete headers[h];
		} else {
			headers[h] = v;
		}
	}
	const r = await fetch(url, {
		method: 'POST', headers, body: JSON.stringify(body),
	});
	const text = await r.text();
	let json;
	try {
		json = JSON.parse(text);
	} catch {
		json = text;
	}
	return { status: r.status, body: json };
}

// The SSE events of a response, one JSON message each.
async function* events(res) {
	const dec = new TextDecoder();
	let buf = '';
	for await (const chunk of res.body) {
		buf += dec.decode(chunk, { stream: true }).replace(/\r/g, '');
		let at;
		while ((at = buf.indexOf('\n\n')) >= 0) {
			const ev = buf.slice(0, at);
			buf = buf.slice(at + 2);
			const data = ev.split('\n').filter((l) => l.startsWith('data:'))
				.map((l) => l.slice(5).trimStart()).join('\n');
			if (data) {
				yield JSON.parse(data);
			}
		}
	}
}

try {
	out.discover = (await rpc('server/discover')).body;
	out.list = (await rpc('tools/list')).body;
	out.call = (await rpc('tools/call',
		{ name: 'alpha-echo', arguments: { message: 'stateless' } })).body;
	out.forged = await rpc('tools/call',
		{ name: 'alpha-echo', arguments: { message: 'x' } },
		{ headers: { 'Mcp-Name': 'alpha-structured' } });
	out.no_method = await rpc('tools/list', {},
		{ headers: { 'Mcp-Method': null } });
	out.no_caps = await rpc('tools/list', {},
		{ meta: { [PV]: '2026-07-28' } });
	out.old = await rpc('tools/list', {}, {}, '2099-01-01');
	out.unknown = await rpc('prompts/nope');

	const ctl = new AbortController();
	const listenId = nextId++;
	const res = await fetch(url, {
		method: 'POST',
		signal: ctl.signal,
		headers: {
			'Content-Type': 'application/json',
			Accept: 'application/json, text/event-stream',
			Authorization: `Bearer ${key}`,
			'MCP-Protocol-Version': '2026-07-28',
			'Mcp-Method': 'subscriptions/listen',
		},
		body: JSON.stringify({
			jsonrpc: '2.0', id: listenId, method: 'subscriptions/listen',
			params: {
				notifications: { toolsListChanged: true },
				_meta: { [PV]: '2026-07-28', [CAPS]: {} },
			},
		}),
	});
	const timer = setTimeout(() => ctl.abort(), 30000);
	for await (const m of events(res)) {
		if (m.method === 'notifications/subscriptions/acknowledged') {
			out.ack = m;
			console.log('modern listening 1');
		} else if (m.method === 'notifications/tools/list_changed') {
			out.changed = m;
			break;
		}
	}
	clearTimeout(timer);
	ctl.abort();
	if (!out.changed) {
		throw new Error('no list_changed on the listen within 30 s');
	}
} catch (e) {
	writeFileSync(file, JSON.stringify({ fatal: e.message, ...out }));
	console.log('modern done 1');
	process.exit(1);
}
writeFileSync(file, JSON.stringify(out));
console.log('modern done 1');
