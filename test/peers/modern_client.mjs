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
// Usage: node modern_client.mjs URL KEY OUT mrtr OTHER_KEY
//   the upstream's requests during a call, as multi round-trip requests
//   (basic/patterns/mrtr), against server-everything's elicitation and
//   sampling tools held as client "every": OUT gets {"first" (an
//   input_required), "forged" (a made-up requestState), "other" (the
//   state retried with OTHER_KEY), "again" (a retry without the answer:
//   asked again), "done" (the answered retry's result), "stale" (the
//   finished state retried), "sampled" (a sampling answered, over an SSE
//   answer with progress), "declined" (no capability), "nested" (the
//   same from a 2026-07-28 upstream, client "mod": its ask_name),
//   "param_ok", "param_b64", "param_forged", "param_missing" ({status,
//   body}: mod's with_header called with Mcp-Param-Region as the
//   argument, the same in base64, another value, none)}, then prints
//   "modern done 1".
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

// The last JSON-RPC message of an SSE body (or the JSON body itself).
function lastMessage(text) {
	const datas = text.replace(/\r/g, '').split('\n')
		.filter((l) => l.startsWith('data:'))
		.map((l) => l.slice(5).trim()).filter((d) => d);
	return datas.length ? JSON.parse(datas[datas.length - 1]) : null;
}

// A tools/call of the mrtr mode, with the capabilities caps and extra
// params; over: headers to change (the key) and sse (Accept the stream
// only, a progressToken asked).
async function mrtrCall(name, caps, extra = {}, over = {}) {
	const params = { arguments: {}, ...extra, name };
	if (over.sse) {
		params._meta = { progressToken: 'p1' };
	}
	const body = {
		jsonrpc: '2.0', id: nextId++, method: 'tools/call',
		params: {
			...params,
			_meta: { ...params._meta, [PV]: '2026-07-28', [CAPS]: caps },
		},
	};
	const r = await fetch(url, {
		method: 'POST',
		headers: {
			'Content-Type': 'application/json',
			Accept: over.sse ? 'text/event-stream, application/json'
				: 'application/json, text/event-stream',
			Authorization: `Bearer ${over.key ?? key}`,
			'MCP-Protocol-Version': '2026-07-28',
			'Mcp-Method': 'tools/call',
			'Mcp-Name': name,
			...over.headers,
		},
		body: JSON.stringify(body),
	});
	const text = await r.text();
	const type = r.headers.get('content-type') ?? '';
	const msg = type.startsWith('text/event-stream') ? lastMessage(text)
		: JSON.parse(text);
	return over.status ? { status: r.status, body: msg } : msg;
}

async function mrtr(other) {
	const ELICIT = 'every-trigger-elicitation-request';
	const SAMPLE = 'every-trigger-sampling-request';
	const form = { elicitation: { form: {} } };
	out.first = await mrtrCall(ELICIT, form);
	const state = out.first.result?.requestState;
	const [k] = Object.keys(out.first.result?.inputRequests ?? {});
	if (!state || !k) {
		throw new Error('the first call was not input_required');
	}
	out.forged = await mrtrCall(ELICIT, form,
		{ requestState: '0'.repeat(32), inputResponses: {} });
	out.other = await mrtrCall(ELICIT, form,
		{ requestState: state, inputResponses: {} }, { key: other });
	out.again = await mrtrCall(ELICIT, form, { requestState: state });
	out.done = await mrtrCall(ELICIT, form, {
		requestState: state,
		inputResponses: { [k]: { action: 'accept',
			content: { name: 'Ada Lovelace', check: true } } },
	});
	out.stale = await mrtrCall(ELICIT, form,
		{ requestState: state, inputResponses: {} });
	const args = { prompt: 'hi', maxTokens: 10 };
	const first = await mrtrCall(SAMPLE, { sampling: {} },
		{ arguments: args }, { sse: true });
	const sk = Object.keys(first.result?.inputRequests ?? {})[0];
	out.sampled = await mrtrCall(SAMPLE, { sampling: {} }, {
		arguments: args,
		requestState: first.result?.requestState,
		inputResponses: { [sk]: { role: 'assistant', model: 'modern-model',
			content: { type: 'text', text: 'relayed by modern' } } },
	});
	out.sampled_asked = first.result?.inputRequests?.[sk]?.method;
	out.declined = await mrtrCall(ELICIT, {});

	// a 2026-07-28 upstream's own input_required, relayed the same way
	const ASK = 'mod-ask_name';
	const asked = await mrtrCall(ASK, form);
	const nk = Object.keys(asked.result?.inputRequests ?? {})[0];
	out.nested_asked = asked.result?.inputRequests?.[nk]?.method;
	out.nested = await mrtrCall(ASK, form, {
		requestState: asked.result?.requestState,
		inputResponses: { [nk]: { action: 'accept',
			content: { name: 'Grace' } } },
	});

	// x-mcp-header: Mcp-Param-Region checked against the arguments
	const HDR = 'mod-with_header';
	const region = { arguments: { region: 'eu-west' } };
	out.param_ok = await mrtrCall(HDR, {}, region,
		{ headers: { 'Mcp-Param-Region': 'eu-west' }, status: true });
	out.param_b64 = await mrtrCall(HDR, {}, region, { status: true,
		headers: { 'Mcp-Param-Region': '=?base64?ZXUtd2VzdA==?=' } });
	out.param_forged = await mrtrCall(HDR, {}, region,
		{ headers: { 'Mcp-Param-Region': 'us-east' }, status: true });
	out.param_missing = await mrtrCall(HDR, {}, region, { status: true });
}

if (process.argv[5] === 'mrtr') {
	try {
		await mrtr(process.argv[6]);
	} catch (e) {
		writeFileSync(file, JSON.stringify({ fatal: e.message, ...out }));
		console.log('modern done 1');
		process.exit(1);
	}
	writeFileSync(file, JSON.stringify(out));
	console.log('modern done 1');
	process.exit(0);
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
