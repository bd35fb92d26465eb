#!/usr/bin/env node
// inject.mjs - an MCP server whose behaviours the tests inject.
//
// Usage: node inject.mjs http|stdio [--port N]     (port 0 = any free port)
//
// http:  Streamable HTTP at POST/GET/DELETE /mcp on 127.0.0.1, one
//        McpServer + StreamableHTTPServerTransport per session (ids are
//        random UUIDs).  Prints exactly one stdout line,
//        "listening on port <N>", once listening; logs go to stderr.
//        Admin endpoints (plain JSON, no auth):
//          POST /admin/drop-sessions  close and forget every session; the
//                                     next request with an old
//                                     Mcp-Session-Id gets 404 -32001
//                                     "Session not found" (as the SDK's
//                                     own transport answers a wrong id)
//          GET  /admin/counters       {"counted_destructive": n, ...,
//                                     "new_sessions": initialize requests
//                                     (POSTs without a session id)}
//          GET  /admin/sessions       {"sessions": n} (live sessions)
//          POST /admin/ping-mode      {"delay_ms": n, "status": code}:
//                                     later pings wait, then fail with
//                                     that HTTP status ({} turns it off);
//                                     counters pings_seen / pings_done
//                                     count the pings it held;
//                                     slow_running / slow_most: `slow`
//                                     calls running now / at most at
//                                     once; slow_cancelled: those that
//                                     stopped when their request was
//                                     cancelled; hanging: `hang` calls
//                                     received
//          POST /admin/describe       {"description": text}: echo's
//                                     description, in every session and
//                                     for new ones (the tool list changes)
//          POST /admin/add-tool       {"name": n}: a new tool n (answers
//                                     "added <n>") in every session and
//                                     for new ones; the SDK tells each
//                                     session (tools/list_changed)
//          POST /admin/annotate       {"annotations": {...}}: echo's
//                                     annotations, everywhere (the tool
//                                     list changes; {} or none: none)
//          POST /admin/remove-tool    {"name": n}: a tool add-tool added
//                                     is gone, everywhere (list_changed)
//          POST /admin/drop-calls     {"count": n}: the connection of
//                                     each of the next n tools/call
//                                     requests is cut once the request
//                                     arrived (it never runs); counter
//                                     calls_dropped; a tool that runs
//                                     later with the idempotency key of
//                                     such a request counts keys_replayed
//          POST /admin/idempotency    {"declare": bool}: sessions made
//                                     from now on declare the capability
//                                     tools.idempotency (SEP-3182)
//          POST /admin/list-changed   notifications/tools/list_changed to
//                                     every session (it travels on the
//                                     session's GET /mcp stream: a session
//                                     without one does not see it)
//          POST /admin/big-tools      {"pages": n, "bytes": m,
//                                     "repeat": bool, "empty": bool}:
//                                     tools/list is
//                                     answered here, not by the SDK: n
//                                     pages of one tool each whose
//                                     description is m 'x's (nextCursor
//                                     "page-<k>"); with repeat every page
//                                     names the cursor "stuck" (it never
//                                     advances); with empty the list
//                                     has no tools; {} turns it off (see
//                                     "big tools" below)
// stdio: StdioServerTransport; stdout carries nothing but JSON-RPC (except
//        what the `garbage` tool writes on purpose).  With
//        MK_INJECT_EXIT_MS=n in its environment it exits (code 5) n ms
//        after the client's notifications/initialized: a server that
//        dies right after every start.  After stdin ends it
//        exits once nothing is pending but `hang` calls (calls still
//        running, like `slow`, are answered first).
//
// Tools (the same in both modes):
//   echo {message}        text = message
//   slow {ms, steps}      `steps` progress notifications over `ms` (when the
//                         request has _meta.progressToken), then "done"
//   hang {}               never answers
//   exit {}               the process exits with code 3 mid-call
//   big {bytes}           text of `bytes` 'x' characters
//   garbage {}            stdio: writes the line "this is not json" to
//                         stdout, then answers "ok"; http: just "ok"
//   structured {}         structuredContent {"answer": 42} + text
//   fail {}               isError: true, text "it failed"
//   headers {}            http: the request's x-* headers as JSON text
//   notify_list_changed {count} `count` (default 1)
//                         notifications/tools/list_changed on the
//                         request's own stream, then "sent"
//   counted_destructive, counted_idempotent, counted_readonly,
//   counted_cacheable (readOnlyHint and idempotentHint),
//   counted_none {}       bump their own counter, answer its new value
//   counted_keyed {idempotencyKey?} the same, destructive, with a key
//                         (counters are per process, shared by sessions)
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import process from 'node:process';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function usage() {
	process.stderr.write('usage: node inject.mjs http|stdio [--port N]\n');
	process.exit(2);
}

const mode = process.argv[2];
let port = 0;
if (mode !== 'http' && mode !== 'stdio') {
	usage();
}
for (let i = 3; i < process.argv.length; i++) {
	if (process.argv[i] === '--port' && i + 1 < process.argv.length) {
		port = Number(process.argv[++i]);
		if (!Number.isInteger(port) || port < 0 || port > 65535) {
			usage();
		}
	} else {
		usage();
	}
}

const counters = {
	counted_destructive: 0,
	counted_idempotent: 0,
	counted_readonly: 0,
	counted_cacheable: 0,
	counted_none: 0,
	counted_keyed: 0,
	keys_replayed: 0,
};

// echo's description; POST /admin/describe changes it everywhere.
let echoDescription = 'Answers the message';
// echo's annotations; POST /admin/annotate changes them everywhere.
let echoAnnotations;
// The tools POST /admin/add-tool added (each answers "added <name>").
const addedTools = [];

function addTool(s, name) {
	s.mkAdded ??= {};
	s.mkAdded[name] = s.registerTool(name,
		{ description: 'Added by /admin/add-tool' },
		async () => text(`added ${name}`));
}

const counted = {
	counted_destructive: {
		destructiveHint: true,
		idempotentHint: false,
		readOnlyHint: false,
	},
	counted_idempotent: { destructiveHint: true, idempotentHint: true },
	counted_readonly: { readOnlyHint: true },
	counted_cacheable: { readOnlyHint: true, idempotentHint: true },
	counted_none: undefined,
};

function text(s) {
	return { content: [{ type: 'text', text: s }] };
}

// A new McpServer with every tool; one per session (an McpServer serves
// one transport).
function makeServer() {
	const s = new McpServer({ name: 'mk-inject', version: '1.0.0' },
		declareIdempotency
			? { capabilities: { tools: { idempotency: {} } } }
			: undefined);

	s.mkEcho = s.registerTool('echo', {
		description: echoDescription,
		annotations: echoAnnotations,
		inputSchema: { message: z.string() },
	}, async ({ message }) => text(message));

	s.registerTool('slow', {
		description: 'Sends `steps` progress notifications over `ms`, then "done"',
		inputSchema: {
			ms: z.number().int().nonnegative(),
			steps: z.number().int().nonnegative(),
		},
	}, async ({ ms, steps }, extra) => {
		const token = extra._meta?.progressToken;
		counters.slow_running = (counters.slow_running ?? 0) + 1;
		counters.slow_most = Math.max(counters.slow_most ?? 0,
			counters.slow_running);
		try {
			return await slowly(ms, steps, token, extra);
		} finally {
			counters.slow_running--;
		}
	});

	async function slowly(ms, steps, token, extra) {
		for (let i = 1; i <= steps; i++) {
			await new Promise((r) => setTimeout(r, ms / steps));
			if (extra.signal.aborted) {
				counters.slow_cancelled =
					(counters.slow_cancelled ?? 0) + 1;
				break;
			}
			if (token !== undefined) {
				await extra.sendNotification({
					method: 'notifications/progress',
					params: { progressToken: token, progress: i, total: steps },
				});
			}
		}
		if (steps === 0 && ms > 0) {
			await new Promise((r) => setTimeout(r, ms));
		}
		return text('done');
	}

	s.registerTool('hang', {
		description: 'Never answers',
		inputSchema: {},
	}, () => {
		counters.hanging = (counters.hanging ?? 0) + 1;
		return new Promise(() => {});
	});

	s.registerTool('exit', {
		description: 'The server process exits (code 3) mid-call',
		inputSchema: {},
	}, () => process.exit(3));

	s.registerTool('big', {
		description: 'A text of `bytes` x characters',
		inputSchema: { bytes: z.number().int().nonnegative() },
	}, async ({ bytes }) => text('x'.repeat(bytes)));

	s.registerTool('garbage', {
		description: 'stdio: writes a non-JSON line to stdout, then "ok"',
		inputSchema: {},
	}, async () => {
		if (mode === 'stdio') {
			process.stdout.write('this is not json\n');
		}
		return text('ok');
	});

	s.registerTool('structured', {
		description: 'structuredContent {"answer": 42}',
		inputSchema: {},
		outputSchema: { answer: z.number() },
	}, async () => ({
		content: [{ type: 'text', text: '{"answer":42}' }],
		structuredContent: { answer: 42 },
	}));

	s.registerTool('fail', {
		description: 'A tool error: isError true, "it failed"',
		inputSchema: {},
	}, async () => ({ ...text('it failed'), isError: true }));

	s.registerTool('headers', {
		description: 'http: the request\'s x-* headers as JSON text',
		inputSchema: {},
	}, async (args, extra) => {
		const seen = {};
		for (const [k, v] of Object.entries(extra.requestInfo?.headers ?? {})) {
			if (k.startsWith('x-')) {
				seen[k] = v;
			}
		}
		return text(JSON.stringify(seen));
	});

	s.registerTool('notify_list_changed', {
		description: 'Sends `count` notifications/tools/list_changed on ' +
			'this request\'s own stream, then answers "sent"',
		inputSchema: { count: z.number().int().min(1).max(1000).optional() },
	}, async ({ count }, extra) => {
		for (let i = 0; i < (count ?? 1); i++) {
			await extra.sendNotification({
				method: 'notifications/tools/list_changed',
			});
		}
		return text('sent');
	});

	for (const [name, annotations] of Object.entries(counted)) {
		const config = {
			description: `Counts its executions (${name})`,
			inputSchema: {},
		};
		if (annotations !== undefined) {
			config.annotations = annotations;
		}
		s.registerTool(name, config, async (_args, extra) => {
			counters[name]++;
			replayed(extra._meta?.idempotencyKey);
			return text(String(counters[name]));
		});
	}
	s.registerTool('counted_keyed', {
		description: 'Counts its executions; takes an idempotency key',
		annotations: counted.counted_destructive,
		inputSchema: { idempotencyKey: z.string().optional() },
	}, async ({ idempotencyKey }) => {
		counters.counted_keyed = (counters.counted_keyed ?? 0) + 1;
		replayed(idempotencyKey);
		return text(String(counters.counted_keyed));
	});

	// ---- pid {}: text = this server's process id (tests tell whether
	// a stdio server was restarted) ----
	s.registerTool('pid', {
		description: 'Answers the server\'s process id',
		inputSchema: {},
	}, async () => text(String(process.pid)));
	// ---- end pid ----
	for (const name of addedTools) {
		addTool(s, name);
	}
	return s;
}

async function runStdio() {
	const server = makeServer();
	const exitMs = process.env.MK_INJECT_EXIT_MS;
	if (exitMs !== undefined) {
		server.server.oninitialized = () => {
			setTimeout(() => process.exit(5), Number(exitMs));
		};
	}
	await server.connect(new StdioServerTransport());
}

// ---- http ----

// session id -> { transport, server }
const sessions = new Map();

// POST /admin/ping-mode {"delay_ms": n, "status": code, "html": bool}:
// every later ping waits delay_ms, then (status set) fails with that
// HTTP status (html: a proxy's HTML error page, else a JSON-RPC error);
// {} or null turns it off.
let pingMode = null;

async function readJson(req) {
	const chunks = [];
	for await (const c of req) {
		chunks.push(c);
	}
	const text = Buffer.concat(chunks).toString();
	const v = text ? JSON.parse(text) : null;
	return v && Object.keys(v).length ? v : null;
}

function sendJson(res, status, body, headers = {}) {
	if (res.headersSent) {
		res.end();
		return;
	}
	const data = JSON.stringify(body);
	res.writeHead(status, {
		'Content-Type': 'application/json',
		'Content-Length': Buffer.byteLength(data),
		...headers,
	});
	res.end(data);
}

function rpcError(res, status, code, message) {
	sendJson(res, status, { jsonrpc: '2.0', error: { code, message }, id: null });
}

async function closeSession(id) {
	const sess = sessions.get(id);
	if (sess === undefined) {
		return;
	}
	sessions.delete(id);
	try {
		await sess.server.close();
	} catch (e) {
		process.stderr.write(`closing session ${id}: ${e}\n`);
	}
}

async function onMcp(req, res) {
	const sid = req.headers['mcp-session-id'];

	if (sid !== undefined) {
		const sess = sessions.get(sid);
		if (sess === undefined) {
			// What the SDK transport answers a wrong session id.
			rpcError(res, 404, -32001, 'Session not found');
			return;
		}
		if (req.method === 'POST' && dropCalls > 0) {
			// Read the body ourselves: a tools/call's connection is
			// cut once it has arrived (it never runs).
			const chunks = [];
			for await (const c of req) {
				chunks.push(c);
			}
			const body = JSON.parse(Buffer.concat(chunks).toString());
			if (body?.method === 'tools/call') {
				const key = body.params?._meta?.idempotencyKey ??
					body.params?.arguments?.idempotencyKey;
				if (key !== undefined) {
					droppedKeys.add(key);
				}
				dropCalls--;
				counters.calls_dropped = (counters.calls_dropped ?? 0) + 1;
				req.socket.destroy();
				return;
			}
			await sess.transport.handleRequest(req, res, body);
			return;
		}
		if (req.method === 'POST' && bigTools !== null) {
			await onBigTools(req, res, sess);
			return;
		}
		if (req.method === 'POST' && pingMode !== null) {
			// Read the body ourselves to see whether it is a ping.
			const chunks = [];
			for await (const c of req) {
				chunks.push(c);
			}
			const body = JSON.parse(Buffer.concat(chunks).toString());
			if (body?.method === 'ping') {
				const mode = pingMode;
				counters.pings_seen = (counters.pings_seen ?? 0) + 1;
				await new Promise((r) => setTimeout(r, mode.delay_ms ?? 0));
				counters.pings_done = (counters.pings_done ?? 0) + 1;
				if (mode.status && mode.html) {
					res.writeHead(mode.status,
						{ 'Content-Type': 'text/html' });
					res.end('<!DOCTYPE html>\n<html><head><title>' +
						`${mode.status} Bad Gateway</title></head>` +
						'<body><h1>Bad Gateway</h1><p>The proxy ' +
						'could not reach the server.</p></body></html>');
					return;
				}
				if (mode.status) {
					rpcError(res, mode.status, -32603, 'injected failure');
					return;
				}
			}
			await sess.transport.handleRequest(req, res, body);
			return;
		}
		await sess.transport.handleRequest(req, res);
		return;
	}
	if (req.method !== 'POST') {
		rpcError(res, 400, -32000,
			'Bad Request: Mcp-Session-Id header is required');
		return;
	}
	// No session: a new transport validates the request itself (initialize
	// or 400 "Server not initialized"); it is kept only if it got an id.
	// Only an initialize counts as a new session (a 2026-07-28 client's
	// server/discover probe comes first and is refused here).
	const chunks = [];
	for await (const c of req) {
		chunks.push(c);
	}
	let body;
	try {
		body = JSON.parse(Buffer.concat(chunks).toString());
	} catch {
		rpcError(res, 400, -32700, 'Parse error');
		return;
	}
	if (body?.method === 'initialize') {
		counters.new_sessions = (counters.new_sessions ?? 0) + 1;
	}
	const server = makeServer();
	const transport = new StreamableHTTPServerTransport({
		sessionIdGenerator: () => randomUUID(),
		onsessioninitialized: (id) => {
			sessions.set(id, { transport, server });
		},
	});
	transport.onclose = () => {
		if (transport.sessionId !== undefined &&
		    sessions.get(transport.sessionId)?.transport === transport) {
			sessions.delete(transport.sessionId);
		}
	};
	await server.connect(transport);
	await transport.handleRequest(req, res, body);
	if (transport.sessionId === undefined) {
		await server.close();
	}
}

// ---- big tools: POST /admin/big-tools ----
// A tools/list as large (in pages and bytes) as a test asks for, or one
// whose cursor never advances.  While it is on, tools/list requests are
// answered here with a JSON body; every other message still goes to the
// session's SDK transport.

let bigTools = null; // {pages, bytes, repeat}, or null: the SDK's list
let dropCalls = 0; // tools/call requests whose connection is cut
const droppedKeys = new Set(); // the idempotency keys of those
// Sessions made from now on declare tools.idempotency (SEP-3182).
let declareIdempotency = false;

// A tool ran with the key of a request whose connection was cut: counted.
function replayed(key) {
	if (key !== undefined && droppedKeys.has(key)) {
		counters.keys_replayed = (counters.keys_replayed ?? 0) + 1;
	}
}

// Page k of the big list: one tool, and the cursor of the next page.
function bigToolsPage(cursor) {
	if (bigTools.empty) {
		return { tools: [] };
	}
	const k = cursor === undefined ? 0 : Number(cursor.slice(5)) || 0;
	const page = {
		tools: [{
			name: `big_${k}`,
			description: 'x'.repeat(bigTools.bytes ?? 0),
			inputSchema: { type: 'object' },
		}],
	};
	if (bigTools.repeat) {
		page.nextCursor = 'stuck';
	} else if (k + 1 < (bigTools.pages ?? 1)) {
		page.nextCursor = `page-${k + 1}`;
	}
	return page;
}

async function onBigTools(req, res, sess) {
	const chunks = [];
	for await (const c of req) {
		chunks.push(c);
	}
	const body = JSON.parse(Buffer.concat(chunks).toString());
	if (body?.method !== 'tools/list') {
		await sess.transport.handleRequest(req, res, body);
		return;
	}
	sendJson(res, 200, {
		jsonrpc: '2.0',
		id: body.id,
		result: bigToolsPage(body.params?.cursor),
	});
}

async function onBigToolsAdmin(req, res) {
	bigTools = await readJson(req);
	sendJson(res, 200, { bigTools });
}

// ---- end of big tools ----

async function onAdmin(req, res, path) {
	if (path === '/admin/big-tools' && req.method === 'POST') {
		await onBigToolsAdmin(req, res);
		return;
	}
	if (!['/admin/ping-mode', '/admin/describe', '/admin/add-tool',
		'/admin/drop-calls', '/admin/annotate', '/admin/idempotency',
		'/admin/remove-tool'].includes(path)) {
		req.resume(); // only these read their body
	}
	if (path === '/admin/counters' && req.method === 'GET') {
		sendJson(res, 200, counters);
	} else if (path === '/admin/ping-mode' && req.method === 'POST') {
		pingMode = await readJson(req);
		sendJson(res, 200, { pingMode });
	} else if (path === '/admin/sessions' && req.method === 'GET') {
		sendJson(res, 200, { sessions: sessions.size });
	} else if (path === '/admin/drop-sessions' && req.method === 'POST') {
		const ids = [...sessions.keys()];
		await Promise.all(ids.map(closeSession));
		sendJson(res, 200, { dropped: ids.length });
	} else if (path === '/admin/describe' && req.method === 'POST') {
		echoDescription = (await readJson(req))?.description ?? echoDescription;
		for (const { server } of sessions.values()) {
			server.mkEcho.update({ description: echoDescription });
		}
		sendJson(res, 200, { description: echoDescription });
	} else if (path === '/admin/add-tool' && req.method === 'POST') {
		const name = (await readJson(req))?.name;
		if (typeof name !== 'string' || addedTools.includes(name)) {
			sendJson(res, 400, { error: 'name: a new tool name' });
			return;
		}
		addedTools.push(name);
		for (const { server } of sessions.values()) {
			addTool(server, name); // (the SDK sends list_changed)
		}
		sendJson(res, 200, { added: name, sessions: sessions.size });
	} else if (path === '/admin/annotate' && req.method === 'POST') {
		echoAnnotations = (await readJson(req))?.annotations;
		for (const { server } of sessions.values()) {
			server.mkEcho.update({ annotations: echoAnnotations });
		}
		sendJson(res, 200, { annotations: echoAnnotations ?? null });
	} else if (path === '/admin/remove-tool' && req.method === 'POST') {
		const name = (await readJson(req))?.name;
		const at = addedTools.indexOf(name);
		if (at < 0) {
			sendJson(res, 400, { error: 'name: a tool /admin/add-tool added' });
			return;
		}
		addedTools.splice(at, 1);
		for (const { server } of sessions.values()) {
			server.mkAdded?.[name]?.remove(); // (list_changed)
			delete server.mkAdded?.[name];
		}
		sendJson(res, 200, { removed: name });
	} else if (path === '/admin/idempotency' && req.method === 'POST') {
		declareIdempotency = (await readJson(req))?.declare === true;
		sendJson(res, 200, { declareIdempotency });
	} else if (path === '/admin/drop-calls' && req.method === 'POST') {
		dropCalls = (await readJson(req))?.count ?? 1;
		sendJson(res, 200, { dropCalls });
	} else if (path === '/admin/list-changed' && req.method === 'POST') {
		let n = 0;
		for (const { server } of sessions.values()) {
			server.sendToolListChanged();
			n++;
		}
		sendJson(res, 200, { sessions: n });
	} else {
		sendJson(res, 404, { error: 'not found' });
	}
}

async function onRequest(req, res) {
	const path = new URL(req.url, 'http://127.0.0.1').pathname;

	try {
		if (path === '/mcp') {
			if (['POST', 'GET', 'DELETE'].includes(req.method)) {
				await onMcp(req, res);
			} else {
				sendJson(res, 405, { error: 'method not allowed' },
					{ Allow: 'GET, POST, DELETE' });
			}
		} else if (path.startsWith('/admin/')) {
			await onAdmin(req, res, path);
		} else {
			sendJson(res, 404, { error: 'not found' });
		}
	} catch (e) {
		process.stderr.write(`${req.method} ${req.url}: ${e?.stack ?? e}\n`);
		rpcError(res, 500, -32603, 'Internal server error');
	}
}

function runHttp() {
	const srv = http.createServer((req, res) => {
		onRequest(req, res);
	});
	srv.on('error', (e) => {
		process.stderr.write(`inject: ${e.message}\n`);
		process.exit(1);
	});
	srv.listen(port, '127.0.0.1', () => {
		// stdout to a pipe or file is synchronous in Node on Linux: the
		// line is out when write() returns.
		process.stdout.write(`listening on port ${srv.address().port}\n`);
	});
}

if (mode === 'stdio') {
	await runStdio();
} else {
	runHttp();
}
