#!/usr/bin/env node
// streams.mjs - an MCP server (2025-11-25) whose SSE streams drop, resume
// and carry server-to-client requests, for the tests of stream handling.
//
// Usage: node streams.mjs [--port N] [--retry MS] [--get 405|sdk]
//        (port 0 = any free port; --retry default 200)
//
// Streamable HTTP at POST/GET/DELETE /mcp on 127.0.0.1, one McpServer +
// StreamableHTTPServerTransport per session (ids are random UUIDs), each
// transport with its own in-memory event store (so every stream is
// resumable with GET + Last-Event-ID) and retryInterval MS.  Prints
// exactly one stdout line, "listening on port <N>", once listening; logs
// go to stderr.
//
// On the wire (SDK 1.32.2): a POST that carries a request is answered
// with an SSE stream whose first event is the SDK's priming event,
// "id: <id>\nretry: <MS>\ndata: \n\n" (only when the client's protocol
// version, the initialize params or the Mcp-Protocol-Version header, is
// 2025-11-25 or later; without the header the SDK assumes 2025-03-26:
// no priming event, so a stream dropped before its first message cannot
// be resumed, though later events still carry ids).  Every later event
// is "event: message\nid: <id>\ndata: <json>\n\n".  Event ids are
// decimal numbers, increasing across the whole process.  A GET with
// Last-Event-ID replays the stored events after that id of that id's
// stream (an unknown id: 400 "Invalid event ID format"; a stream still
// connected: 409), then stays open for what the stream sends later; it
// ends when the request's answer went out on it (an answer that was only
// replayed does not end it: the SDK leaves that stream open).
// The SDK writes no priming event on the standalone GET stream; this peer
// writes one itself ("id: <id>\nretry: <MS>\ndata: \n\n", stored in the
// session's event store like the SDK's own) right after the 200 head, so
// a closed GET stream can be resumed too.  --get sdk leaves the GET
// stream as the SDK writes it (no event, no id, until the first message).
// --get 405: every GET /mcp without Last-Event-ID is answered 405 (Allow:
// POST, DELETE) here, before the SDK sees it (a server without a
// standalone stream); GETs with Last-Event-ID still reach the SDK.
// DELETE /mcp goes to the SDK (it ends the session).  An unknown
// Mcp-Session-Id gets 404 -32001 "Session not found"; GET or DELETE
// without one 400.
//
// Admin endpoints (plain JSON, no auth):
//   POST /admin/list-changed   notifications/tools/list_changed to every
//                              session (on its standalone GET stream, or
//                              stored for a resume when none is open):
//                              {"sessions": n}
//   POST /admin/log-message    {"level": "info", "data": ..., "logger":
//                              ...}: notifications/message to every
//                              session (GET stream; a level the session
//                              set with logging/setLevel filters it):
//                              {"sessions": n}
//   POST /admin/close-get      closes every session's standalone GET
//                              stream (the client reconnects after retry,
//                              with Last-Event-ID): {"sessions": n}
//   GET  /admin/requests       {"requests": [...]}: one entry per HTTP
//                              request to /mcp, in arrival order:
//                              {"method", "status" (set when the head is
//                              sent: an SSE stream still open shows 200;
//                              null if none was ever sent), "session",
//                              "protocol_version", "last_event_id",
//                              "accept" (those headers, or null), "rpc"
//                              (a POST body's JSON-RPC method, "response"
//                              for a response, an array of those for a
//                              batch, else null), "rpc_id" (its id, or
//                              null), "elicitation_caps" (for initialize:
//                              params.capabilities, as sent; else null)}
//   POST /admin/requests/clear empties that list
//   GET  /admin/counters       {"sessions": live sessions, "get_streams":
//                              standalone GET streams opened (GETs without
//                              Last-Event-ID answered 200), "resumes":
//                              GETs with Last-Event-ID, "deletes":
//                              DELETEs, "cancelled":
//                              notifications/cancelled received in POST
//                              bodies, "cancelled_ids": their requestIds}
//
// Tools (every session):
//   echo {message}             text = message
//   drop_then_answer {ms}      closes its own SSE stream at once, waits ms
//                              (default 300), answers "answered after
//                              drop" (stored: a GET with Last-Event-ID
//                              gets it, live or replayed)
//   progress_drop {steps, ms}  steps (default 4) notifications/progress
//                              (when the request has
//                              _meta.progressToken), ms (default 400)/steps
//                              apart; closes its stream after the first
//                              ceil(steps/2); answers "done"
//   drop_no_resume {}          closes its stream and never answers (until
//                              notifications/cancelled or the session
//                              ends; a resume gets nothing)
//   elicit_form {message}      form elicitation (name string default
//                              "anon", count integer default 3, ok
//                              boolean; required ok): text =
//                              JSON.stringify(the ElicitResult)
//   elicit_url {url, message}  URL-mode elicitation (elicitationId
//                              random): text = JSON.stringify(result)
//   sample {prompt}            sampling/createMessage (maxTokens 50):
//                              text = JSON.stringify(result)
//   roots {}                   roots/list: text = JSON.stringify(result)
//   notify {count}             count (default 1)
//                              notifications/tools/list_changed on the
//                              session's GET stream, then "sent"
//   client_caps {}             JSON.stringify(getClientCapabilities()):
//                              the capabilities as the SDK parsed them
//                              (an empty "elicitation" reads {"form":{}})
// elicit_*, sample and roots send their request on the tool call's own
// stream (relatedRequestId), so they work without a GET stream too.  When
// the SDK refuses it (elicit_*: the client did not declare
// elicitation.form / .url, "Client does not support form elicitation.")
// or the client answers an error (the SDK sends sampling/createMessage
// and roots/list without checking the client's capabilities: "MCP error
// -32601: Method not found"), the tool answers isError true with text =
// the error's message.
// The drop tools need a client of 2025-11-25 or later (see above); with
// an older one they close the stream anyway and the answer is lost (a
// line on stderr says so).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import process from 'node:process';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function usage() {
	process.stderr.write('usage: node streams.mjs [--port N] [--retry MS] ' +
		'[--get 405|sdk]\n');
	process.exit(2);
}

let port = 0;
let retryMs = 200;
let getMode = 'primed'; // 'primed' | '405' | 'sdk'
for (let i = 2; i < process.argv.length; i++) {
	const arg = process.argv[i];
	if ((arg === '--port' || arg === '--retry') &&
	    i + 1 < process.argv.length) {
		const n = Number(process.argv[++i]);
		if (!Number.isInteger(n) || n < 0 ||
		    (arg === '--port' && n > 65535)) {
			usage();
		}
		if (arg === '--port') {
			port = n;
		} else {
			retryMs = n;
		}
	} else if (arg === '--get' && i + 1 < process.argv.length &&
	    ['405', 'sdk'].includes(process.argv[i + 1])) {
		getMode = process.argv[++i];
	} else {
		usage();
	}
}

function log(s) {
	process.stderr.write(`streams: ${s}\n`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the event store ----
// One per session (transport).  Event ids are decimal numbers from one
// process-wide sequence, so they increase in the order events are
// stored; a replay sends the events of the id's stream stored after it.
// Priming events (the SDK stores them as the message {}) are never
// replayed.

let eventSeq = 0;

class EventStore {
	constructor() {
		this.events = new Map(); // id -> { streamId, seq, message }
		this.streams = new Map(); // streamId -> [id, ...] (in order)
	}

	storeSync(streamId, message) {
		const seq = ++eventSeq;
		const id = String(seq);
		this.events.set(id, { streamId, seq, message });
		let ids = this.streams.get(streamId);
		if (ids === undefined) {
			ids = [];
			this.streams.set(streamId, ids);
		}
		ids.push(id);
		return id;
	}

	async storeEvent(streamId, message) {
		return this.storeSync(streamId, message);
	}

	async getStreamIdForEventId(eventId) {
		return this.events.get(eventId)?.streamId;
	}

	async replayEventsAfter(lastEventId, { send }) {
		const last = this.events.get(lastEventId);
		if (last === undefined) {
			return '';
		}
		// A snapshot: what is stored while this replays goes out live.
		const ids = [...this.streams.get(last.streamId)];
		for (const id of ids) {
			const ev = this.events.get(id);
			if (ev.seq <= last.seq || ev.message?.jsonrpc === undefined) {
				continue;
			}
			await send(id, ev.message);
		}
		return last.streamId;
	}
}

// ---- the MCP server of one session ----

function text(s) {
	return { content: [{ type: 'text', text: s }] };
}

function failure(e) {
	return { ...text(e?.message ?? String(e)), isError: true };
}

// Closes the SSE stream of the request the handler serves.  The SDK gives
// the handler closeSSEStream only with an event store and a client of
// 2025-11-25 or later (one that got a priming event and can resume).
function dropStream(sess, extra) {
	if (extra.closeSSEStream !== undefined) {
		extra.closeSSEStream();
	} else {
		log(`request ${extra.requestId}: no closeSSEStream (old protocol ` +
			'version?): closing the stream anyway, the answer is lost');
		sess.transport.closeSSEStream(extra.requestId);
	}
}

function makeServer(sess) {
	const s = new McpServer({ name: 'mk-streams', version: '1.0.0' },
		{ capabilities: { logging: {} } });

	s.registerTool('echo', {
		description: 'Answers the message',
		inputSchema: { message: z.string() },
	}, async ({ message }) => text(message));

	s.registerTool('drop_then_answer', {
		description: 'Closes its own SSE stream, waits `ms`, then answers',
		inputSchema: { ms: z.number().int().nonnegative().optional() },
	}, async ({ ms }, extra) => {
		dropStream(sess, extra);
		await sleep(ms ?? 300);
		return text('answered after drop');
	});

	s.registerTool('progress_drop', {
		description: 'Sends `steps` progress notifications over `ms`, ' +
			'closing its stream after the first half, then "done"',
		inputSchema: {
			steps: z.number().int().nonnegative().optional(),
			ms: z.number().int().nonnegative().optional(),
		},
	}, async ({ steps, ms }, extra) => {
		const n = steps ?? 4;
		const total = ms ?? 400;
		const half = Math.ceil(n / 2);
		const token = extra._meta?.progressToken;
		if (half === 0) {
			dropStream(sess, extra);
		}
		for (let i = 1; i <= n; i++) {
			await sleep(total / n);
			if (extra.signal.aborted) {
				break;
			}
			if (token !== undefined) {
				await extra.sendNotification({
					method: 'notifications/progress',
					params: { progressToken: token, progress: i, total: n },
				});
			}
			if (i === half) {
				dropStream(sess, extra);
			}
		}
		if (n === 0) {
			await sleep(total);
		}
		return text('done');
	});

	s.registerTool('drop_no_resume', {
		description: 'Closes its stream and never answers',
		inputSchema: {},
	}, (args, extra) => {
		dropStream(sess, extra);
		// Settles only when cancelled (or the session ends); the SDK sends
		// nothing for an aborted request.
		return new Promise((resolve) => {
			extra.signal.addEventListener('abort',
				() => resolve(text('cancelled')), { once: true });
		});
	});

	const related = (extra) => ({ relatedRequestId: extra.requestId });

	s.registerTool('elicit_form', {
		description: 'Form elicitation; answers the ElicitResult as JSON',
		inputSchema: { message: z.string().optional() },
	}, async ({ message }, extra) => {
		try {
			const result = await s.server.elicitInput({
				mode: 'form',
				message: message ?? 'Please fill in the form',
				requestedSchema: {
					type: 'object',
					properties: {
						name: { type: 'string', default: 'anon' },
						count: { type: 'integer', default: 3 },
						ok: { type: 'boolean' },
					},
					required: ['ok'],
				},
			}, related(extra));
			return text(JSON.stringify(result));
		} catch (e) {
			return failure(e);
		}
	});

	s.registerTool('elicit_url', {
		description: 'URL-mode elicitation; answers the ElicitResult as JSON',
		inputSchema: { url: z.string(), message: z.string().optional() },
	}, async ({ url, message }, extra) => {
		try {
			const result = await s.server.elicitInput({
				mode: 'url',
				elicitationId: randomUUID(),
				url,
				message: message ?? 'Please open the link',
			}, related(extra));
			return text(JSON.stringify(result));
		} catch (e) {
			return failure(e);
		}
	});

	s.registerTool('sample', {
		description: 'sampling/createMessage; answers the result as JSON',
		inputSchema: { prompt: z.string() },
	}, async ({ prompt }, extra) => {
		try {
			const result = await s.server.createMessage({
				messages: [{
					role: 'user',
					content: { type: 'text', text: prompt },
				}],
				maxTokens: 50,
			}, related(extra));
			return text(JSON.stringify(result));
		} catch (e) {
			return failure(e);
		}
	});

	s.registerTool('roots', {
		description: 'roots/list; answers the result as JSON',
		inputSchema: {},
	}, async (args, extra) => {
		try {
			return text(JSON.stringify(
				await s.server.listRoots(undefined, related(extra))));
		} catch (e) {
			return failure(e);
		}
	});

	s.registerTool('notify', {
		description: 'Sends `count` notifications/tools/list_changed on the ' +
			'session\'s GET stream, then "sent"',
		inputSchema: { count: z.number().int().min(1).max(1000).optional() },
	}, async ({ count }) => {
		for (let i = 0; i < (count ?? 1); i++) {
			await s.server.sendToolListChanged();
		}
		return text('sent');
	});

	s.registerTool('client_caps', {
		description: 'The client\'s capabilities as JSON',
		inputSchema: {},
	}, async () => text(JSON.stringify(
		s.server.getClientCapabilities() ?? null)));

	return s;
}

// ---- http ----

// session id -> { transport, server, store }
const sessions = new Map();

const counters = {
	get_streams: 0,
	resumes: 0,
	deletes: 0,
	cancelled: 0,
	cancelled_ids: [],
};

const requests = [];

async function readBody(req) {
	const chunks = [];
	for await (const c of req) {
		chunks.push(c);
	}
	return Buffer.concat(chunks).toString();
}

async function readJson(req) {
	const body = await readBody(req);
	try {
		return body ? JSON.parse(body) : null;
	} catch {
		return null;
	}
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

function rpcError(res, status, code, message, headers = {}) {
	sendJson(res, status,
		{ jsonrpc: '2.0', error: { code, message }, id: null }, headers);
}

function rpcKind(m) {
	if (m === null || typeof m !== 'object') {
		return null;
	}
	if (typeof m.method === 'string') {
		return m.method;
	}
	if ('result' in m || 'error' in m) {
		return 'response';
	}
	return null;
}

// The /admin/requests entry of one request to /mcp; its status is set
// when the response head goes out.
function logRequest(req, res) {
	const h = req.headers;
	const entry = {
		method: req.method,
		status: null,
		session: h['mcp-session-id'] ?? null,
		protocol_version: h['mcp-protocol-version'] ?? null,
		last_event_id: h['last-event-id'] ?? null,
		accept: h.accept ?? null,
		rpc: null,
		rpc_id: null,
		elicitation_caps: null,
	};
	requests.push(entry);
	const writeHead = res.writeHead;
	res.writeHead = function (status, ...rest) {
		entry.status = status;
		const r = writeHead.call(this, status, ...rest);
		res.mkAfterHead?.(status);
		return r;
	};
	const settle = () => {
		if (entry.status === null && res.headersSent) {
			entry.status = res.statusCode;
		}
	};
	res.on('finish', settle);
	res.on('close', settle);
	return entry;
}

function notePost(entry, body) {
	const msgs = Array.isArray(body) ? body : [body];
	for (const m of msgs) {
		if (m?.method === 'notifications/cancelled') {
			counters.cancelled++;
			counters.cancelled_ids.push(m.params?.requestId ?? null);
		}
		if (m?.method === 'initialize') {
			entry.elicitation_caps = m.params?.capabilities ?? null;
		}
	}
	if (Array.isArray(body)) {
		entry.rpc = body.map(rpcKind);
		entry.rpc_id = body.map((m) => m?.id ?? null);
	} else {
		entry.rpc = rpcKind(body);
		entry.rpc_id = body?.id ?? null;
	}
}

// A fresh standalone GET stream: the SDK writes no priming event on it,
// so write one (stored like the SDK's own) as soon as its head is out.
function primeGet(res, sess) {
	res.mkAfterHead = (status) => {
		res.mkAfterHead = undefined;
		if (status !== 200) {
			return;
		}
		counters.get_streams++;
		if (getMode === 'sdk') {
			return;
		}
		const id = sess.store.storeSync('_GET_stream', {});
		res.write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
	};
}

async function newSession(req, res, body) {
	// A new transport validates the request itself (initialize, or 400
	// "Server not initialized"); it is kept only if it got an id.
	const sess = { store: new EventStore() };
	sess.server = makeServer(sess);
	sess.transport = new StreamableHTTPServerTransport({
		sessionIdGenerator: () => randomUUID(),
		eventStore: sess.store,
		retryInterval: retryMs,
		onsessioninitialized: (id) => {
			sessions.set(id, sess);
		},
	});
	sess.transport.onclose = () => {
		const id = sess.transport.sessionId;
		if (id !== undefined && sessions.get(id) === sess) {
			sessions.delete(id);
		}
	};
	sess.transport.onerror = (e) => log(`transport: ${e.message}`);
	await sess.server.connect(sess.transport);
	await sess.transport.handleRequest(req, res, body);
	if (sess.transport.sessionId === undefined) {
		await sess.server.close();
	}
}

async function onMcp(req, res) {
	const entry = logRequest(req, res);
	const sid = req.headers['mcp-session-id'];
	const lastEventId = req.headers['last-event-id'];

	if (req.method === 'GET') {
		if (lastEventId !== undefined) {
			counters.resumes++;
		} else if (getMode === '405') {
			rpcError(res, 405, -32000, 'Method Not Allowed',
				{ Allow: 'POST, DELETE' });
			return;
		}
	} else if (req.method === 'DELETE') {
		counters.deletes++;
	}

	let body;
	if (req.method === 'POST') {
		try {
			body = JSON.parse(await readBody(req));
		} catch {
			rpcError(res, 400, -32700, 'Parse error: Invalid JSON');
			return;
		}
		notePost(entry, body);
	}

	if (sid === undefined) {
		if (req.method !== 'POST') {
			rpcError(res, 400, -32000,
				'Bad Request: Mcp-Session-Id header is required');
			return;
		}
		await newSession(req, res, body);
		return;
	}
	const sess = sessions.get(sid);
	if (sess === undefined) {
		// What the SDK transport answers a wrong session id.
		rpcError(res, 404, -32001, 'Session not found');
		return;
	}
	if (req.method === 'GET' && lastEventId === undefined) {
		primeGet(res, sess);
	}
	await sess.transport.handleRequest(req, res, body);
}

async function onAdmin(req, res, path) {
	const route = `${req.method} ${path}`;
	if (route === 'POST /admin/log-message') {
		const p = (await readJson(req)) ?? {};
		const params = { level: p.level ?? 'info', data: p.data ?? null };
		if (p.logger !== undefined) {
			params.logger = p.logger;
		}
		let n = 0;
		for (const [id, { server }] of sessions) {
			server.server.sendLoggingMessage(params, id).catch(
				(e) => log(`log-message to ${id}: ${e.message}`));
			n++;
		}
		sendJson(res, 200, { sessions: n });
		return;
	}
	req.resume(); // the others read no body
	if (route === 'GET /admin/counters') {
		sendJson(res, 200, { sessions: sessions.size, ...counters });
	} else if (route === 'GET /admin/requests') {
		sendJson(res, 200, { requests });
	} else if (route === 'POST /admin/requests/clear') {
		requests.length = 0;
		sendJson(res, 200, { requests: [] });
	} else if (route === 'POST /admin/list-changed') {
		let n = 0;
		for (const [id, { server }] of sessions) {
			server.server.sendToolListChanged().catch(
				(e) => log(`list-changed to ${id}: ${e.message}`));
			n++;
		}
		sendJson(res, 200, { sessions: n });
	} else if (route === 'POST /admin/close-get') {
		let n = 0;
		for (const { transport } of sessions.values()) {
			transport.closeStandaloneSSEStream();
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
		log(`${req.method} ${req.url}: ${e?.stack ?? e}`);
		rpcError(res, 500, -32603, 'Internal server error');
	}
}

const srv = http.createServer((req, res) => {
	onRequest(req, res);
});
srv.on('error', (e) => {
	log(e.message);
	process.exit(1);
});
srv.listen(port, '127.0.0.1', () => {
	// stdout to a pipe or file is synchronous in Node on Linux: the line
	// is out when write() returns.
	process.stdout.write(`listening on port ${srv.address().port}\n`);
});
