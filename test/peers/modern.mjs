#!/usr/bin/env node
// modern.mjs - an MCP server speaking the stateless 2026-07-28 revision.
//
// No npm package implements 2026-07-28 yet (the pinned
// @modelcontextprotocol/sdk 1.32.2 does not), so this server is written by
// hand from the specification text (docs/specification/2026-07-28/ and
// schema/2026-07-28/schema.ts of modelcontextprotocol/modelcontextprotocol)
// using only node built-ins.  Section names below refer to those pages.
//
// Usage: node modern.mjs http|stdio [--port N] [--eras modern|both]
//                       [--ttl MS] [--page-size N] [--admin-port N]
//                       [--keepalive MS]
//   --port N        http: the port on 127.0.0.1 (0 = any free port)
//   --eras modern   (default) only 2026-07-28 is spoken
//   --eras both     also 2025-11-25 the classic way (initialize,
//                   notifications/initialized, ping, tools/list,
//                   tools/call; on HTTP with an Mcp-Session-Id)
//   --ttl MS        ttlMs on tools/list (cacheScope "private") and on
//                   server/discover (cacheScope "public"); default 60000
//   --page-size N   tools/list pages of N tools (default 0: one page)
//   --admin-port N  stdio only: the admin endpoints below on 127.0.0.1:N
//                   (0 = any free port); prints "admin on port <N>" on
//                   stderr
//   --keepalive MS  an SSE comment line ":" every MS on each
//                   subscriptions/listen stream (default 15000, 0 = none)
//
// http:  POST /mcp on 127.0.0.1.  Prints exactly one stdout line,
//        "listening on port <N>", once listening; logs go to stderr.
//        GET and DELETE /mcp: 405 (2026-07-28 has no GET stream and no
//        sessions; 2025-11-25 allows 405 for both).  An Origin header
//        that is not a loopback origin: 403 (Security & Endpoint).
// stdio: newline-delimited JSON-RPC on stdin/stdout; stdout carries
//        nothing but JSON-RPC.  It exits once stdin ends and no tool
//        call is pending (listens do not hold it).
//
// Modern era (2026-07-28), served statelessly in both --eras modes:
//   Every request needs params._meta["io.modelcontextprotocol/
//   protocolVersion"] (a string) and [".../clientCapabilities"] (an
//   object); without them: -32602, HTTP 400 (basic/index "_meta",
//   per-request protocol fields).  A version it does not serve: -32022
//   UnsupportedProtocolVersion, data {"supported": [...], "requested": v},
//   HTTP 400 (basic/versioning; streamable-http "Protocol Version
//   Header").  Every result has "resultType" and
//   _meta["io.modelcontextprotocol/serverInfo"] = {"name": "modern-peer",
//   "version": "1.0.0"}.  An unknown method: -32601, HTTP 404.
//   HTTP checks, each failure -32020 HeaderMismatch with HTTP 400
//   (streamable-http "Server Validation"): MCP-Protocol-Version present
//   and equal to the _meta version; Mcp-Method present and equal to the
//   body's method; Mcp-Name present and equal to params.name (tools/call,
//   prompts/get) or params.uri (resources/read); and for tools/call every
//   valid x-mcp-header annotation of the tool: Mcp-Param-{name} present
//   iff the argument at the annotated property path is present and not
//   null, equal to it after decoding "=?base64?...?=" (integers compared
//   numerically, booleans as "true"/"false"); header values must be
//   visible ASCII, space or tab.  Order of checks: _meta fields (-32602),
//   headers (-32020), version (-32022), method (-32601).
//   HTTP status of other JSON-RPC errors (unknown tool, bad cursor, bad
//   requestState: -32602): 200.  -32021 MissingRequiredClientCapability
//   (data {"requiredCapabilities": {...}}): 400.
//   A request without the _meta version is answered, in --eras modern:
//     initialize: -32022, data {"supported": ["2026-07-28"], "requested":
//       params.protocolVersion} (HTTP 400): basic/versioning asks a
//       modern-only server to name its versions in any error to
//       initialize, and UnsupportedProtocolVersion is the error that
//       carries them;
//     HTTP with an MCP-Protocol-Version header naming a version it does
//       not serve: -32022 with that version as "requested" (HTTP 400);
//     anything else: -32602 "missing _meta ..." (HTTP 400), the message
//       naming the supported versions.
//   server/discover: {"resultType": "complete", "supportedVersions":
//     ["2026-07-28"] (+ "2025-11-25" with --eras both), "capabilities":
//     {"tools": {"listChanged": true}}, "instructions": ..., "ttlMs",
//     "cacheScope": "public", "_meta": {serverInfo}} (server/discover;
//     caching "Cacheable Results": discover carries caching hints).
//     ServerCapabilities has no subscriptions member: tools.listChanged
//     is what says list_changed notifications exist.
//   tools/list: a fixed order; with --page-size an opaque "nextCursor"
//     (a bad cursor: -32602); "ttlMs" (--ttl, POST /admin/ttl) and
//     "cacheScope": "private" on every page.
//   subscriptions/listen {"notifications": {...}}: HTTP: an SSE response
//     that stays open (X-Accel-Buffering: no); stdio: the same messages
//     on stdout.  First notifications/subscriptions/acknowledged
//     {"_meta": {"io.modelcontextprotocol/subscriptionId": <listen id>},
//     "notifications": <the subset honoured: only "toolsListChanged":
//     true, when asked>}; then notifications/tools/list_changed {"_meta":
//     {subscriptionId}} whenever POST /admin/list-changed says so (only
//     to listens that asked for toolsListChanged).  The client ends it by
//     closing the stream (HTTP) or notifications/cancelled (stdio).
//     POST /admin/close-listens ends them from the server side; on
//     SIGTERM/SIGINT they get the graceful result first.
//   notifications/cancelled {"requestId"} (stdio; accepted with 202 on
//     HTTP too): a pending slow call or a listen with that id stops
//     without a response; every one is counted.  On HTTP a stream the
//     client closes before the answer cancels the call (counted as
//     "aborted").
//   MRTR (basic/patterns/mrtr): the first call answers {"resultType":
//     "input_required", "inputRequests": {<key>: <request>},
//     "requestState": <opaque>, "_meta": {serverInfo}}; the retry carries
//     params.inputResponses {<key>: <result>} and the same requestState.
//     requestState is base64url(JSON {v, m: method, t: tool, n: counter,
//     exp}) "." base64url(HMAC-SHA256 with a per-process random key): a
//     changed, expired, other-tool or foreign state is -32602; a retry
//     with inputResponses but no requestState is -32602; a valid state
//     without the <key> response asks again (mrtr "Error Handling").
//     The input request is only sent when _meta clientCapabilities
//     declares it (elicitation with form mode, sampling, roots); else
//     -32021.
//
// Tools (list order):
//   echo {message}        text = message (description: POST /admin/tools)
//   with_header {region}  region carries "x-mcp-header": "Region" (so the
//                         client must send Mcp-Param-Region); text = region
//   bad_header {x}        x carries "x-mcp-header": "Bad Header", not an
//                         RFC 9110 token (a space): an invalid annotation,
//                         so an HTTP client must drop the tool from its
//                         list (tools "x-mcp-header").  If called anyway
//                         it answers "bad_header called" (recorded in
//                         /admin/requests); its annotation is not checked
//   ask_name {}           MRTR key "name": elicitation/create, mode form,
//                         requestedSchema {"type": "object", "properties":
//                         {"name": {"type": "string", "default": "anon"}}};
//                         retry with action accept: "hello <name>" (name
//                         from content, "anon" if absent); decline/cancel:
//                         "no name (<action>)"
//   ask_sample {}         MRTR key "sample": sampling/createMessage
//                         {"messages": [{"role": "user", "content":
//                         {"type": "text", "text": "Say hello"}}],
//                         "maxTokens": 50}; retry: "sampled: <text>"
//   ask_roots {}          MRTR key "roots": {"method": "roots/list"};
//                         retry: "roots: <uri>,<uri>..."
//   trace {}              text = JSON of the traceparent, tracestate and
//                         baggage keys found in _meta ({} if none)
//   slow {ms}             answers "done" after ms (default 500); with
//                         _meta.progressToken the answer is an SSE stream
//                         (HTTP) with notifications/progress 0..3 (total
//                         4) at 0, ms/4, ms/2, 3ms/4
//   break_once {key}      http: the first call for a key opens an SSE
//                         response, sends one notifications/progress (with
//                         a progressToken; else an SSE comment), then
//                         destroys the socket without answering; later
//                         calls with that key answer "ok after break".
//                         stdio: answers "ok (stdio: no stream to
//                         break)".  Every call's request id is kept
//                         (counters "break_ids")
//                         break_once is annotated idempotentHint (a client
//                         may send it again); break_unsafe {key} is the
//                         same without annotations (it may not)
//   counted {}            bumps a counter, answers its new value
//
// Legacy era (2025-11-25, --eras both only).  Results have no resultType,
// no _meta, no ttlMs/cacheScope.  ask_* answer isError "needs 2026-07-28
// (MRTR)"; with_header's header is not checked.
//   initialize: {"protocolVersion": "2025-11-25", "capabilities":
//     {"tools": {"listChanged": true}}, "serverInfo": {"name":
//     "modern-peer", "version": "1.0.0"}} whatever version was asked.
//   http: initialize mints an Mcp-Session-Id (a UUID) on its response.
//     A request is of this era when it is initialize, or lacks the _meta
//     version, or names "2025-11-25" in _meta.  Such a request without
//     Mcp-Session-Id: 400 -32000; with an unknown one: 404 -32001 (the
//     SDK's answers); an MCP-Protocol-Version header other than
//     2025-11-25: 400 -32000 (a missing one means the session's version).
//     Notifications with a session id are checked the same way, then 202.
//     There is no GET stream, so HTTP legacy sessions see no
//     list_changed.  A request carrying the modern _meta version is served
//     statelessly even with an Mcp-Session-Id (which is ignored).
//   stdio: initialize makes the process legacy for requests without the
//     _meta version (before it they get -32600 "send initialize first");
//     POST /admin/list-changed then also writes a plain
//     notifications/tools/list_changed to stdout.
//
// Admin endpoints (http: on the same port; stdio: --admin-port; plain
// JSON, no auth):
//   POST /admin/list-changed   notifications/tools/list_changed to every
//                              live listen that asked for tools:
//                              {"listens": n, "legacy": m}
//   POST /admin/ttl            {"ttl_ms": n}: the ttlMs from now on
//   POST /admin/tools          {"description": text, "notify": bool}:
//                              echo's description (the list changes);
//                              with notify also what list-changed does
//   POST /admin/close-listens  {"how": "result"|"cancelled"|"drop"}:
//                              end every listen: "result" (default) the
//                              graceful response {"resultType":
//                              "complete", "_meta": {subscriptionId,
//                              serverInfo}} then close; "cancelled" a
//                              notifications/cancelled {"requestId"} then
//                              close; "drop" close with nothing (http:
//                              the socket is destroyed): {"closed": n}
//   POST /admin/drop-sessions  forget every legacy HTTP session
//   GET  /admin/requests       {"requests": [...]}, one per POST /mcp
//                              (stdio: per stdin message) in order:
//                              {"status" (HTTP status; null on stdio),
//                              "rpc": method, "rpc_id": id, "headers":
//                              {"mcp-method", "mcp-name",
//                              "mcp-protocol-version", "mcp-session-id",
//                              "traceparent", "tracestate", "accept" (null
//                              when absent), and every x-mcp-* and
//                              mcp-param-* header present, lower case},
//                              "meta": params._meta, "input_responses",
//                              "request_state" (null when absent)}
//   POST /admin/requests/clear forget them
//   GET  /admin/counters       {"counted", "discover", "lists" (modern
//                              tools/list requests), "initialize",
//                              "listens" (live), "cancelled"
//                              (notifications/cancelled seen), "aborted"
//                              (HTTP answers cut off by the client),
//                              "break_ids", "sessions" (live legacy),
//                              "gets", "deletes"}
//
// Where the text leaves a choice:
//   - The server ending a listen: subscriptions says the
//     server SHOULD answer the listen request; cancellation says it MUST
//     send notifications/cancelled when it tears a subscription down.
//     Both are offered (close-listens "result" | "cancelled"); SIGTERM
//     uses "result".
//   - An Mcp-Param-{name} header for an argument that is absent or null
//     is rejected (-32020): the header cannot match a body value, and
//     the client MUST omit it.
//   - A request with the _meta version "2025-11-25" (--eras both) is
//     taken as legacy (that version needs initialize), not stateless.
//   - tools/list is "private", discover "public" (caching "Choosing a
//     Cache Scope").  io.modelcontextprotocol/logLevel is accepted and
//     ignored (no notifications/message are ever sent).
//   - A POST's Accept is recorded, not enforced; Content-Type is not
//     checked.
import {
	createHmac, randomBytes, randomUUID, timingSafeEqual,
} from 'node:crypto';
import http from 'node:http';
import process from 'node:process';
import readline from 'node:readline';

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
const SUB_ID = 'io.modelcontextprotocol/subscriptionId';

const HEADER_MISMATCH = -32020;
const MISSING_CAPABILITY = -32021;
const UNSUPPORTED_VERSION = -32022;

const serverInfo = { name: 'modern-peer', version: '1.0.0' };

function usage() {
	process.stderr.write('usage: node modern.mjs http|stdio [--port N] ' +
		'[--eras modern|both] [--ttl MS] [--page-size N] ' +
		'[--admin-port N] [--keepalive MS]\n');
	process.exit(2);
}

const mode = process.argv[2];
if (mode !== 'http' && mode !== 'stdio') {
	usage();
}
let port = 0;
let eras = 'modern';
let ttlMs = 60000;
let pageSize = 0;
let adminPort = null;
let keepaliveMs = 15000;

function intArg(i, max) {
	const v = Number(process.argv[i]);
	if (i >= process.argv.length || !Number.isInteger(v) || v < 0 || v > max) {
		usage();
	}
	return v;
}

for (let i = 3; i < process.argv.length; i++) {
	const a = process.argv[i];
	if (a === '--port') {
		port = intArg(++i, 65535);
	} else if (a === '--eras') {
		eras = process.argv[++i];
		if (eras !== 'modern' && eras !== 'both') {
			usage();
		}
	} else if (a === '--ttl') {
		ttlMs = intArg(++i, 2 ** 31);
	} else if (a === '--page-size') {
		pageSize = intArg(++i, 1000);
	} else if (a === '--admin-port' && mode === 'stdio') {
		adminPort = intArg(++i, 65535);
	} else if (a === '--keepalive') {
		keepaliveMs = intArg(++i, 2 ** 31);
	} else {
		usage();
	}
}

const supported = eras === 'both' ? [MODERN, LEGACY] : [MODERN];

function log(s) {
	process.stderr.write(`modern: ${s}\n`);
}

const counters = {
	counted: 0,
	discover: 0,
	lists: 0,
	initialize: 0,
	listens: 0,
	cancelled: 0,
	aborted: 0,
	break_ids: [],
	sessions: 0,
	gets: 0,
	deletes: 0,
};

// One entry per POST /mcp (stdio: per message); GET /admin/requests.
let requestsLog = [];

// echo's description; POST /admin/tools changes it.
let echoDescription = 'Answers the message';

// ---- tools ----

function tools() {
	const none = { type: 'object', additionalProperties: false };
	return [
		{
			name: 'echo',
			description: echoDescription,
			inputSchema: {
				type: 'object',
				properties: { message: { type: 'string' } },
				required: ['message'],
			},
		},
		{
			name: 'with_header',
			description: 'Answers the region; the region is mirrored into ' +
				'the Mcp-Param-Region header',
			inputSchema: {
				type: 'object',
				properties: {
					region: {
						type: 'string',
						description: 'The region',
						'x-mcp-header': 'Region',
					},
				},
				required: ['region'],
			},
		},
		{
			name: 'bad_header',
			description: 'Its x-mcp-header "Bad Header" is not an RFC 9110 ' +
				'token (it has a space): HTTP clients must drop this tool',
			inputSchema: {
				type: 'object',
				properties: {
					x: { type: 'string', 'x-mcp-header': 'Bad Header' },
				},
			},
		},
		{
			name: 'ask_name',
			description: 'Asks the user for a name (elicitation), then ' +
				'greets it',
			inputSchema: none,
		},
		{
			name: 'ask_sample',
			description: 'Asks the client\'s LLM for a message (sampling)',
			inputSchema: none,
		},
		{
			name: 'ask_roots',
			description: 'Asks the client for its roots',
			inputSchema: none,
		},
		{
			name: 'trace',
			description: 'Answers the trace context found in _meta',
			inputSchema: none,
		},
		{
			name: 'slow',
			description: 'Answers "done" after ms milliseconds, with ' +
				'progress notifications when asked',
			inputSchema: {
				type: 'object',
				properties: { ms: { type: 'integer', minimum: 0 } },
			},
		},
		{
			name: 'break_once',
			description: 'The first call for a key loses its response ' +
				'stream; later ones answer "ok after break"',
			inputSchema: {
				type: 'object',
				properties: { key: { type: 'string' } },
				required: ['key'],
			},
			annotations: { idempotentHint: true },
		},
		{
			name: 'break_unsafe',
			description: 'break_once without annotations: not safe to ' +
				'run twice by the MCP defaults',
			inputSchema: {
				type: 'object',
				properties: { key: { type: 'string' } },
				required: ['key'],
			},
		},
		{
			name: 'counted',
			description: 'Counts its executions, answers the count',
			inputSchema: none,
		},
	];
}

// RFC 9110 tchar.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const INT_MAX = 2 ** 53 - 1;

// The valid x-mcp-header annotations of a tool as [{name, path, type}],
// or null when any annotation is invalid (streamable-http "Schema
// Extension": then the whole tool definition is invalid).
function headerAnnotations(schema) {
	const found = [];
	let valid = true;
	const walk = (node, path, reachable) => {
		if (node === null || typeof node !== 'object') {
			return;
		}
		if (Array.isArray(node)) {
			node.forEach((n) => walk(n, path, false));
			return;
		}
		if ('x-mcp-header' in node) {
			const name = node['x-mcp-header'];
			const types = Array.isArray(node.type) ? node.type : [node.type];
			if (!reachable || path.length === 0 || typeof name !== 'string' ||
			    !TOKEN.test(name) || types.length !== 1 ||
			    !['string', 'integer', 'boolean'].includes(types[0])) {
				valid = false;
			} else {
				found.push({ name, path, type: types[0] });
			}
		}
		for (const [k, v] of Object.entries(node)) {
			if (k === 'properties' && v && typeof v === 'object' &&
			    !Array.isArray(v)) {
				for (const [p, sub] of Object.entries(v)) {
					walk(sub, [...path, p], reachable);
				}
			} else if (k !== 'x-mcp-header') {
				walk(v, path, false);
			}
		}
	};
	walk(schema, [], true);
	const lower = found.map((f) => f.name.toLowerCase());
	if (new Set(lower).size !== lower.length) {
		valid = false;
	}
	return valid ? found : null;
}

// ---- helpers ----

function result(id, r) {
	return { jsonrpc: '2.0', id, result: r };
}

function rpcError(id, code, message, data) {
	const e = { jsonrpc: '2.0', error: { code, message } };
	if (id !== undefined && id !== null) {
		e.id = id;
	}
	if (data !== undefined) {
		e.error.data = data;
	}
	return e;
}

function text(s, isError) {
	const r = { content: [{ type: 'text', text: s }] };
	if (isError) {
		r.isError = true;
	}
	return r;
}

function isObject(v) {
	return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function b64url(buf) {
	return Buffer.from(buf).toString('base64url');
}

// ---- requestState ----

const stateKey = randomBytes(32);
let stateCounter = 0;
const STATE_TTL_MS = 10 * 60 * 1000;

function mintState(method, tool) {
	const payload = b64url(JSON.stringify({
		v: 1,
		m: method,
		t: tool,
		n: ++stateCounter,
		exp: Date.now() + STATE_TTL_MS,
	}));
	const mac = createHmac('sha256', stateKey).update(payload).digest();
	return `${payload}.${b64url(mac)}`;
}

// The payload of a state this process minted for (method, tool), or a
// string saying why not.
function checkState(state, method, tool) {
	if (typeof state !== 'string') {
		return 'requestState must be a string';
	}
	const [payload, mac, extra] = state.split('.');
	if (payload === undefined || mac === undefined || extra !== undefined) {
		return 'requestState is malformed';
	}
	const want = createHmac('sha256', stateKey).update(payload).digest();
	const got = Buffer.from(mac, 'base64url');
	if (got.length !== want.length || !timingSafeEqual(got, want)) {
		return 'requestState failed verification';
	}
	let p;
	try {
		p = JSON.parse(Buffer.from(payload, 'base64url').toString());
	} catch {
		return 'requestState is malformed';
	}
	if (p.m !== method || p.t !== tool) {
		return `requestState belongs to ${p.m} ${p.t}`;
	}
	if (Date.now() > p.exp) {
		return 'requestState expired';
	}
	return p;
}

// ---- MRTR tools ----

// need(caps): the missing capabilities ({} shape for
// requiredCapabilities) or null; finish(response): the text, or
// {error} for a response that is not a valid result of that request.
const mrtrTools = {
	ask_name: {
		key: 'name',
		request: {
			method: 'elicitation/create',
			params: {
				mode: 'form',
				message: 'What is your name?',
				requestedSchema: {
					type: 'object',
					properties: { name: { type: 'string', default: 'anon' } },
				},
			},
		},
		need(caps) {
			const e = caps.elicitation;
			if (!isObject(e)) {
				return { elicitation: {} };
			}
			// An empty elicitation object means form mode (elicitation
			// "Capabilities").
			if (Object.keys(e).length > 0 && !('form' in e)) {
				return { elicitation: { form: {} } };
			}
			return null;
		},
		finish(r) {
			if (!isObject(r) ||
			    !['accept', 'decline', 'cancel'].includes(r.action)) {
				return { error: 'inputResponses.name is not an ElicitResult' };
			}
			if (r.action !== 'accept') {
				return `no name (${r.action})`;
			}
			const name = r.content?.name;
			return `hello ${typeof name === 'string' ? name : 'anon'}`;
		},
	},
	ask_sample: {
		key: 'sample',
		request: {
			method: 'sampling/createMessage',
			params: {
				messages: [{
					role: 'user',
					content: { type: 'text', text: 'Say hello' },
				}],
				maxTokens: 50,
			},
		},
		need(caps) {
			return isObject(caps.sampling) ? null : { sampling: {} };
		},
		finish(r) {
			const blocks = Array.isArray(r?.content) ? r.content : [r?.content];
			const texts = blocks.filter((b) => b?.type === 'text' &&
				typeof b.text === 'string').map((b) => b.text);
			if (!isObject(r) || typeof r.role !== 'string' || !texts.length) {
				return {
					error: 'inputResponses.sample is not a CreateMessageResult ' +
						'with text',
				};
			}
			return `sampled: ${texts.join('')}`;
		},
	},
	ask_roots: {
		key: 'roots',
		request: { method: 'roots/list' },
		need(caps) {
			return isObject(caps.roots) ? null : { roots: {} };
		},
		finish(r) {
			if (!isObject(r) || !Array.isArray(r.roots) ||
			    !r.roots.every((x) => typeof x?.uri === 'string')) {
				return { error: 'inputResponses.roots is not a ListRootsResult' };
			}
			return `roots: ${r.roots.map((x) => x.uri).join(',')}`;
		},
	},
};

// ---- listens ----

// key (typeof id + id) -> {id, filter, ctx, timer}
const listens = new Map();
let stdioLegacy = false; // stdio: initialize was seen (--eras both)

function idKey(id) {
	return `${typeof id}:${id}`;
}

function notifyListChanged() {
	let n = 0;
	for (const l of listens.values()) {
		if (l.filter.toolsListChanged === true) {
			l.ctx.notify({
				jsonrpc: '2.0',
				method: 'notifications/tools/list_changed',
				params: { _meta: { [SUB_ID]: l.id } },
			});
			n++;
		}
	}
	let legacy = 0;
	if (mode === 'stdio' && stdioLegacy) {
		writeLine({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
		legacy = 1;
	}
	return { listens: n, legacy };
}

function forgetListen(l) {
	if (listens.get(idKey(l.id)) === l) {
		listens.delete(idKey(l.id));
		clearInterval(l.timer);
		counters.listens = listens.size;
	}
}

function closeListens(how) {
	const all = [...listens.values()];
	for (const l of all) {
		forgetListen(l);
		if (how === 'drop') {
			l.ctx.breakStream();
		} else if (how === 'cancelled') {
			l.ctx.finish({
				jsonrpc: '2.0',
				method: 'notifications/cancelled',
				params: {
					requestId: l.id,
					reason: 'server closed the subscription',
				},
			});
		} else {
			l.ctx.respond(200, result(l.id, {
				resultType: 'complete',
				_meta: { [SUB_ID]: l.id, [SERVER_INFO]: serverInfo },
			}));
		}
	}
	return all.length;
}

function listen(msg, ctx) {
	const filter = msg.params.notifications;
	if (!isObject(filter)) {
		ctx.respond(200, rpcError(msg.id, -32602,
			'subscriptions/listen needs params.notifications'));
		return;
	}
	if (listens.has(idKey(msg.id))) {
		ctx.respond(200, rpcError(msg.id, -32602,
			`a subscription with id ${JSON.stringify(msg.id)} is live`));
		return;
	}
	// Only tools exist here: the rest of a filter is not honoured.
	const honoured = {};
	if (filter.toolsListChanged === true) {
		honoured.toolsListChanged = true;
	}
	const l = { id: msg.id, filter: honoured, ctx, timer: null };
	listens.set(idKey(msg.id), l);
	counters.listens = listens.size;
	ctx.onCancel(() => forgetListen(l));
	ctx.notify({
		jsonrpc: '2.0',
		method: 'notifications/subscriptions/acknowledged',
		params: { _meta: { [SUB_ID]: msg.id }, notifications: honoured },
	});
	if (ctx.transport === 'http' && keepaliveMs > 0) {
		l.timer = setInterval(() => ctx.comment(), keepaliveMs);
	}
}

// ---- tools/list and tools/call ----

function listTools(msg, ctx, modern) {
	const all = tools();
	let offset = 0;
	const cursor = msg.params?.cursor;
	if (cursor !== undefined) {
		let o;
		try {
			o = JSON.parse(Buffer.from(String(cursor), 'base64url').toString()).o;
		} catch {
			o = undefined;
		}
		if (!Number.isInteger(o) || o < 0 || o > all.length) {
			ctx.respond(200, rpcError(msg.id, -32602, 'Invalid cursor'));
			return;
		}
		offset = o;
	}
	const n = pageSize > 0 ? pageSize : all.length;
	const r = { tools: all.slice(offset, offset + n) };
	if (offset + n < all.length) {
		r.nextCursor = b64url(JSON.stringify({ o: offset + n }));
	}
	if (modern) {
		r.ttlMs = ttlMs;
		r.cacheScope = 'private';
	}
	complete(ctx, msg.id, r, modern);
}

// A complete result, dressed for the era.
function complete(ctx, id, r, modern) {
	if (modern) {
		r = {
			resultType: 'complete',
			...r,
			_meta: { ...r._meta, [SERVER_INFO]: serverInfo },
		};
	}
	ctx.respond(200, result(id, r));
}

function headerValueOk(v) {
	return /^[\t\x20-\x7e]*$/.test(v);
}

// "=?base64?...?=" decoded; {error} when it is not valid base64.
function decodeHeader(v) {
	const m = /^=\?base64\?(.*)\?=$/s.exec(v);
	if (m === null) {
		return { value: v };
	}
	if (!/^[A-Za-z0-9+/]*={0,2}$/.test(m[1]) || m[1].length % 4 !== 0) {
		return { error: 'is not valid base64' };
	}
	return { value: Buffer.from(m[1], 'base64').toString('utf8') };
}

// The Mcp-Param-* check of a tools/call (streamable-http "Server Behavior
// for Custom Headers"): an error message or null.
function checkParamHeaders(tool, args, headers) {
	const anns = headerAnnotations(tool.inputSchema);
	if (anns === null) {
		return null; // an invalid tool: its annotations mean nothing
	}
	for (const a of anns) {
		const hname = `Mcp-Param-${a.name}`;
		const raw = headers[hname.toLowerCase()];
		let v = args;
		for (const p of a.path) {
			v = isObject(v) ? v[p] : undefined;
		}
		if (v === undefined || v === null) {
			if (raw !== undefined) {
				return `Header mismatch: ${hname} header present but argument ` +
					`${a.path.join('.')} is absent`;
			}
			continue;
		}
		if (raw === undefined) {
			return `Header mismatch: ${hname} header missing for argument ` +
				a.path.join('.');
		}
		if (!headerValueOk(raw)) {
			return `Header mismatch: ${hname} header value contains invalid ` +
				'characters';
		}
		const d = decodeHeader(raw);
		if (d.error) {
			return `Header mismatch: ${hname} header value ${d.error}`;
		}
		let same;
		if (typeof v === 'number') {
			same = d.value.trim() !== '' && Number(d.value) === v;
		} else if (typeof v === 'boolean') {
			same = d.value === String(v);
		} else {
			same = d.value === String(v);
		}
		if (!same) {
			return `Header mismatch: ${hname} header value '${d.value}' does ` +
				`not match body value '${v}'`;
		}
	}
	return null;
}

function callTool(msg, ctx, modern) {
	const params = msg.params ?? {};
	const name = params.name;
	const tool = tools().find((t) => t.name === name);
	if (typeof name !== 'string' || tool === undefined) {
		ctx.respond(200, rpcError(msg.id, -32602, `Unknown tool: ${name}`));
		return;
	}
	const args = params.arguments ?? {};
	if (!isObject(args)) {
		ctx.respond(200, rpcError(msg.id, -32602, 'arguments must be an object'));
		return;
	}
	if (modern && ctx.transport === 'http') {
		const bad = checkParamHeaders(tool, args, ctx.headers);
		if (bad !== null) {
			ctx.respond(400, rpcError(msg.id, HEADER_MISMATCH, bad));
			return;
		}
	}
	const meta = params._meta ?? {};
	const done = (r) => complete(ctx, msg.id, r, modern);

	switch (name) {
	case 'echo':
		done(typeof args.message === 'string' ? text(args.message) :
			text('message must be a string', true));
		return;
	case 'with_header':
		done(typeof args.region === 'string' ? text(args.region) :
			text('region must be a string', true));
		return;
	case 'bad_header':
		done(text('bad_header called'));
		return;
	case 'trace': {
		const found = {};
		for (const k of ['traceparent', 'tracestate', 'baggage']) {
			if (meta[k] !== undefined) {
				found[k] = meta[k];
			}
		}
		done(text(JSON.stringify(found)));
		return;
	}
	case 'counted':
		counters.counted++;
		done(text(String(counters.counted)));
		return;
	case 'slow':
		slow(msg, ctx, args, meta, done);
		return;
	case 'break_once':
	case 'break_unsafe':
		breakOnce(msg, ctx, args, meta, done);
		return;
	default:
		if (!modern) {
			done(text(`${name} needs ${MODERN} (MRTR)`, true));
			return;
		}
		mrtr(msg, ctx, mrtrTools[name]);
	}
}

function mrtr(msg, ctx, spec) {
	const params = msg.params;
	const name = params.name;
	const state = params.requestState;
	const responses = params.inputResponses;
	if (responses !== undefined && !isObject(responses)) {
		ctx.respond(200, rpcError(msg.id, -32602,
			'inputResponses must be an object'));
		return;
	}
	if (state === undefined && responses !== undefined) {
		ctx.respond(200, rpcError(msg.id, -32602,
			'inputResponses without the requestState they answer'));
		return;
	}
	if (state !== undefined) {
		const p = checkState(state, msg.method, name);
		if (typeof p === 'string') {
			ctx.respond(200, rpcError(msg.id, -32602, p));
			return;
		}
		const r = responses?.[spec.key];
		if (r !== undefined) {
			const t = spec.finish(r);
			if (typeof t !== 'string') {
				ctx.respond(200, rpcError(msg.id, -32602, t.error));
				return;
			}
			complete(ctx, msg.id, text(t), true);
			return;
		}
		// No answer to our request: ask again (mrtr "Error Handling").
	}
	const missing = spec.need(params._meta[CAPS]);
	if (missing !== null) {
		ctx.respond(400, rpcError(msg.id, MISSING_CAPABILITY,
			`${name} needs the ${Object.keys(missing)[0]} capability`,
			{ requiredCapabilities: missing }));
		return;
	}
	ctx.respond(200, result(msg.id, {
		resultType: 'input_required',
		inputRequests: { [spec.key]: spec.request },
		requestState: mintState(msg.method, name),
		_meta: { [SERVER_INFO]: serverInfo },
	}));
}

function slow(msg, ctx, args, meta, done) {
	const ms = Number.isInteger(args.ms) && args.ms >= 0 ?
		Math.min(args.ms, 600000) : 500;
	const token = meta.progressToken;
	const timers = [];
	ctx.pending(true);
	ctx.onCancel(() => timers.forEach(clearTimeout));
	if (token !== undefined) {
		ctx.startStream();
		for (let k = 0; k < 4; k++) {
			timers.push(setTimeout(() => ctx.notify({
				jsonrpc: '2.0',
				method: 'notifications/progress',
				params: {
					progressToken: token,
					progress: k,
					total: 4,
					message: `slow ${k}/4`,
				},
			}), (ms * k) / 4));
		}
	}
	timers.push(setTimeout(() => {
		done(text('done'));
		ctx.pending(false);
	}, ms));
}

const brokenKeys = new Set();

function breakOnce(msg, ctx, args, meta, done) {
	counters.break_ids.push(msg.id);
	const key = typeof args.key === 'string' ? args.key : '';
	if (ctx.transport !== 'http') {
		done(text('ok (stdio: no stream to break)'));
		return;
	}
	if (brokenKeys.has(key)) {
		done(text('ok after break'));
		return;
	}
	brokenKeys.add(key);
	ctx.startStream();
	if (meta.progressToken !== undefined) {
		ctx.notify({
			jsonrpc: '2.0',
			method: 'notifications/progress',
			params: {
				progressToken: meta.progressToken,
				progress: 1,
				total: 2,
				message: 'about to break',
			},
		});
	} else {
		ctx.comment();
	}
	log(`break_once ${JSON.stringify(key)}: breaking the stream of request ` +
		`${JSON.stringify(msg.id)}`);
	setTimeout(() => ctx.breakStream(), 50);
}

// ---- the two eras ----

// The modern era's checks; null or {status, body}.
function validateModern(msg, ctx) {
	const params = msg.params;
	const meta = isObject(params) ? params._meta : undefined;
	const ver = isObject(meta) ? meta[PV] : undefined;
	const names = supported.join(', ');
	if (typeof ver !== 'string') {
		const hver = ctx.headers['mcp-protocol-version'];
		if (msg.method === 'initialize') {
			const asked = params?.protocolVersion;
			return {
				status: 400,
				body: rpcError(msg.id, UNSUPPORTED_VERSION,
					`Unsupported protocol version: this server speaks ${names} ` +
					'(per-request _meta, no initialize)',
					{
						supported,
						requested: typeof asked === 'string' ? asked : '',
					}),
			};
		}
		if (hver !== undefined && !supported.includes(hver)) {
			return {
				status: 400,
				body: rpcError(msg.id, UNSUPPORTED_VERSION,
					'Unsupported protocol version',
					{ supported, requested: hver }),
			};
		}
		return {
			status: 400,
			body: rpcError(msg.id, -32602,
				`Invalid params: missing _meta ${PV} ` +
				`(supported protocol versions: ${names})`),
		};
	}
	if (!isObject(meta[CAPS])) {
		return {
			status: 400,
			body: rpcError(msg.id, -32602,
				`Invalid params: missing _meta ${CAPS}`),
		};
	}
	if (ctx.transport === 'http') {
		const bad = checkStandardHeaders(msg, ctx.headers, ver);
		if (bad !== null) {
			return { status: 400, body: rpcError(msg.id, HEADER_MISMATCH, bad) };
		}
	}
	if (ver !== MODERN) {
		return {
			status: 400,
			body: rpcError(msg.id, UNSUPPORTED_VERSION,
				'Unsupported protocol version', { supported, requested: ver }),
		};
	}
	return null;
}

const NAME_SOURCE = {
	'tools/call': 'name',
	'prompts/get': 'name',
	'resources/read': 'uri',
};

function checkStandardHeaders(msg, headers, ver) {
	const pairs = [
		['MCP-Protocol-Version', ver],
		['Mcp-Method', msg.method],
	];
	const src = NAME_SOURCE[msg.method];
	if (src !== undefined && typeof msg.params[src] === 'string') {
		pairs.push(['Mcp-Name', msg.params[src]]);
	}
	for (const [h, body] of pairs) {
		const raw = headers[h.toLowerCase()];
		if (raw === undefined) {
			return `Header mismatch: required header ${h} is missing`;
		}
		if (!headerValueOk(raw)) {
			return `Header mismatch: ${h} header value contains invalid ` +
				'characters';
		}
		let v = raw;
		if (h === 'Mcp-Name') {
			const d = decodeHeader(raw);
			if (d.error) {
				return `Header mismatch: Mcp-Name header value ${d.error}`;
			}
			v = d.value;
		}
		if (v !== body) {
			return `Header mismatch: ${h} header value '${v}' does not match ` +
				`body value '${body}'`;
		}
	}
	return null;
}

function modern(msg, ctx) {
	const bad = validateModern(msg, ctx);
	if (bad !== null) {
		ctx.respond(bad.status, bad.body);
		return;
	}
	switch (msg.method) {
	case 'server/discover':
		counters.discover++;
		complete(ctx, msg.id, {
			supportedVersions: supported,
			capabilities: { tools: { listChanged: true } },
			instructions: 'A test peer for mcpkeep.',
			ttlMs,
			cacheScope: 'public',
		}, true);
		return;
	case 'tools/list':
		counters.lists++;
		listTools(msg, ctx, true);
		return;
	case 'tools/call':
		callTool(msg, ctx, true);
		return;
	case 'subscriptions/listen':
		listen(msg, ctx);
		return;
	default:
		ctx.respond(404, rpcError(msg.id, -32601,
			`Method not found: ${msg.method}`));
	}
}

function initializeResult() {
	return {
		protocolVersion: LEGACY,
		capabilities: { tools: { listChanged: true } },
		serverInfo,
	};
}

// A legacy request that passed its transport's session checks.
function legacy(msg, ctx) {
	switch (msg.method) {
	case 'ping':
		ctx.respond(200, result(msg.id, {}));
		return;
	case 'tools/list':
		listTools(msg, ctx, false);
		return;
	case 'tools/call':
		callTool(msg, ctx, false);
		return;
	default:
		ctx.respond(200, rpcError(msg.id, -32601,
			`Method not found: ${msg.method}`));
	}
}

// Whether a request (not a notification) is of the legacy era.
function isLegacy(msg) {
	if (eras !== 'both') {
		return false;
	}
	if (msg.method === 'initialize') {
		return true;
	}
	const meta = isObject(msg.params) ? msg.params._meta : undefined;
	const ver = isObject(meta) ? meta[PV] : undefined;
	return typeof ver !== 'string' || ver === LEGACY;
}

// A notification from the client (either era).
function onNotification(msg) {
	if (msg.method === 'notifications/cancelled') {
		counters.cancelled++;
		const id = msg.params?.requestId;
		log(`cancelled ${JSON.stringify(id)}: ${msg.params?.reason ?? ''}`);
		if (mode === 'stdio' && id !== undefined) {
			stdioPending.get(idKey(id))?.cancel();
		}
	}
}

// A parsed message: null if it is a single JSON-RPC request or
// notification, else an error body.
function invalid(msg) {
	if (!isObject(msg) || msg.jsonrpc !== '2.0') {
		return rpcError(undefined, -32600,
			'Invalid Request: one JSON-RPC 2.0 message expected');
	}
	if (typeof msg.method !== 'string') {
		return rpcError(msg.id, -32600,
			'Invalid Request: clients must not send responses');
	}
	if ('id' in msg && typeof msg.id !== 'string' &&
	    !(typeof msg.id === 'number' && Number.isInteger(msg.id))) {
		return rpcError(undefined, -32600,
			'Invalid Request: id must be a string or an integer');
	}
	if (msg.params !== undefined && !isObject(msg.params)) {
		return rpcError(msg.id, -32600,
			'Invalid Request: params must be an object');
	}
	return null;
}

function recordMessage(entry, msg) {
	entry.rpc = typeof msg?.method === 'string' ? msg.method : null;
	entry.rpc_id = msg?.id ?? null;
	const p = isObject(msg?.params) ? msg.params : {};
	entry.meta = p._meta ?? null;
	entry.input_responses = p.inputResponses ?? null;
	entry.request_state = p.requestState ?? null;
}

// ---- stdio ----

function writeLine(obj) {
	process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// idKey -> ctx of requests still running (slow, listens)
const stdioPending = new Map();
let stdinEnded = false;
let stdioBusy = 0; // tool calls still running (listens excluded)

function maybeExit() {
	if (stdinEnded && stdioBusy === 0) {
		process.exit(0);
	}
}

function stdioCtx(msg) {
	let done = false;
	const cancels = [];
	const key = idKey(msg.id);
	const end = () => {
		done = true;
		if (stdioPending.get(key) === ctx) {
			stdioPending.delete(key);
		}
	};
	const ctx = {
		transport: 'stdio',
		headers: {},
		startStream() {},
		comment() {},
		notify(obj) {
			if (!done) {
				writeLine(obj);
			}
		},
		respond(status, obj) {
			if (!done) {
				end();
				writeLine(obj);
			}
		},
		finish(obj) {
			ctx.respond(0, obj);
		},
		breakStream() {
			end();
		},
		onCancel(fn) {
			cancels.push(fn);
		},
		cancel() {
			if (!done) {
				end();
				cancels.forEach((fn) => fn());
				ctx.pending(false);
			}
		},
		busy: false,
		pending(on) {
			if (on !== ctx.busy) {
				ctx.busy = on;
				stdioBusy += on ? 1 : -1;
				maybeExit();
			}
		},
	};
	stdioPending.set(key, ctx);
	return ctx;
}

function onStdioLine(line) {
	if (line.trim() === '') {
		return;
	}
	const entry = { status: null, rpc: null, rpc_id: null, headers: {},
		meta: null, input_responses: null, request_state: null };
	requestsLog.push(entry);
	let msg;
	try {
		msg = JSON.parse(line);
	} catch {
		writeLine(rpcError(undefined, -32700, 'Parse error'));
		return;
	}
	recordMessage(entry, msg);
	const bad = invalid(msg);
	if (bad !== null) {
		writeLine(bad);
		return;
	}
	if (!('id' in msg)) {
		onNotification(msg);
		return;
	}
	const ctx = stdioCtx(msg);
	if (!isLegacy(msg)) {
		modern(msg, ctx);
	} else if (msg.method === 'initialize') {
		counters.initialize++;
		stdioLegacy = true;
		ctx.respond(200, result(msg.id, initializeResult()));
	} else if (!stdioLegacy) {
		ctx.respond(200, rpcError(msg.id, -32600,
			`Invalid Request: send initialize first (${LEGACY}), or put ` +
			`${PV} (${MODERN}) in _meta`));
	} else {
		legacy(msg, ctx);
	}
}

function runStdio() {
	// The client closed our stdout: nobody can hear us any more.
	process.stdout.on('error', (e) => {
		log(`stdout: ${e.message}`);
		process.exit(0);
	});
	const rl = readline.createInterface({ input: process.stdin });
	rl.on('line', onStdioLine);
	rl.on('close', () => {
		stdinEnded = true;
		maybeExit();
	});
	if (adminPort !== null) {
		const srv = http.createServer((req, res) => {
			onAdmin(req, res, new URL(req.url, 'http://127.0.0.1').pathname)
				.catch((e) => {
					log(`admin ${req.url}: ${e?.stack ?? e}`);
					sendJson(res, 500, { error: String(e) });
				});
		});
		srv.listen(adminPort, '127.0.0.1', () => {
			process.stderr.write(`admin on port ${srv.address().port}\n`);
		});
		srv.unref();
	}
}

// ---- http ----

// legacy session id -> {created}
const sessions = new Map();

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

async function readBody(req) {
	const chunks = [];
	let n = 0;
	for await (const c of req) {
		n += c.length;
		if (n > 8 * 1024 * 1024) {
			throw new Error('body too large');
		}
		chunks.push(c);
	}
	return Buffer.concat(chunks).toString();
}

async function readJson(req) {
	const s = await readBody(req);
	return s.trim() ? JSON.parse(s) : {};
}

function httpCtx(req, res, entry) {
	let streaming = false;
	let done = false;
	const cancels = [];
	const sse = (obj) => {
		res.write(`event: message\ndata: ${JSON.stringify(obj)}\n\n`);
	};
	const ctx = {
		transport: 'http',
		headers: req.headers,
		startStream() {
			if (!streaming && !done) {
				streaming = true;
				entry.status = 200;
				res.writeHead(200, {
					'Content-Type': 'text/event-stream',
					'Cache-Control': 'no-cache, no-transform',
					'X-Accel-Buffering': 'no',
				});
				res.flushHeaders();
			}
		},
		comment() {
			if (!done) {
				ctx.startStream();
				res.write(':\n\n');
			}
		},
		notify(obj) {
			if (!done) {
				ctx.startStream();
				sse(obj);
			}
		},
		respond(status, obj, headers) {
			if (done) {
				return;
			}
			done = true;
			if (streaming) {
				sse(obj);
				res.end();
			} else {
				entry.status = status;
				sendJson(res, status, obj, headers);
			}
		},
		// The last message of a stream that is not a response.
		finish(obj) {
			if (!done) {
				ctx.notify(obj);
				done = true;
				res.end();
			}
		},
		accepted() {
			done = true;
			entry.status = 202;
			res.writeHead(202);
			res.end();
		},
		breakStream() {
			done = true;
			res.socket?.destroy();
		},
		onCancel(fn) {
			cancels.push(fn);
		},
		pending() {},
	};
	res.on('close', () => {
		if (!done) {
			done = true;
			counters.aborted++;
			cancels.forEach((fn) => fn());
		}
	});
	return ctx;
}

function pickHeaders(h) {
	const out = {};
	for (const k of ['mcp-method', 'mcp-name', 'mcp-protocol-version',
		'mcp-session-id', 'traceparent', 'tracestate', 'accept']) {
		out[k] = h[k] ?? null;
	}
	for (const [k, v] of Object.entries(h)) {
		if (k.startsWith('x-mcp-') || k.startsWith('mcp-param-')) {
			out[k] = v;
		}
	}
	return out;
}

function originOk(origin) {
	if (origin === undefined) {
		return true;
	}
	try {
		const host = new URL(origin).hostname;
		return ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host);
	} catch {
		return false;
	}
}

async function onMcpPost(req, res) {
	const entry = {
		status: null,
		rpc: null,
		rpc_id: null,
		headers: pickHeaders(req.headers),
		meta: null,
		input_responses: null,
		request_state: null,
	};
	requestsLog.push(entry);
	const reply = (status, body, headers) => {
		entry.status = status;
		sendJson(res, status, body, headers);
	};
	if (!originOk(req.headers.origin)) {
		req.resume();
		reply(403, rpcError(undefined, -32600, 'Forbidden: invalid Origin'));
		return;
	}
	let msg;
	try {
		msg = JSON.parse(await readBody(req));
	} catch {
		reply(400, rpcError(undefined, -32700, 'Parse error'));
		return;
	}
	recordMessage(entry, msg);
	const bad = invalid(msg);
	if (bad !== null) {
		reply(400, bad);
		return;
	}
	const sid = req.headers['mcp-session-id'];
	if (!('id' in msg)) {
		if (eras === 'both' && sid !== undefined && !sessions.has(sid)) {
			reply(404, rpcError(undefined, -32001, 'Session not found'));
			return;
		}
		onNotification(msg);
		entry.status = 202;
		res.writeHead(202);
		res.end();
		return;
	}
	const ctx = httpCtx(req, res, entry);
	if (!isLegacy(msg)) {
		modern(msg, ctx);
		return;
	}
	if (msg.method === 'initialize') {
		const id = randomUUID();
		sessions.set(id, { created: Date.now() });
		counters.sessions = sessions.size;
		counters.initialize++;
		ctx.respond(200, result(msg.id, initializeResult()),
			{ 'Mcp-Session-Id': id });
		return;
	}
	if (sid === undefined) {
		ctx.respond(400, rpcError(msg.id, -32000,
			'Bad Request: Mcp-Session-Id header is required'));
		return;
	}
	if (!sessions.has(sid)) {
		ctx.respond(404, rpcError(msg.id, -32001, 'Session not found'));
		return;
	}
	const hver = req.headers['mcp-protocol-version'];
	if (hver !== undefined && hver !== LEGACY) {
		ctx.respond(400, rpcError(msg.id, -32000,
			`Bad Request: Unsupported protocol version: ${hver} ` +
			`(supported versions: ${supported.join(', ')})`));
		return;
	}
	legacy(msg, ctx);
}

async function onAdmin(req, res, path) {
	const post = req.method === 'POST';
	const body = post ? await readJson(req) : (req.resume(), {});
	if (path === '/admin/counters' && !post) {
		sendJson(res, 200, counters);
	} else if (path === '/admin/requests' && !post) {
		sendJson(res, 200, { requests: requestsLog });
	} else if (path === '/admin/requests/clear' && post) {
		requestsLog = [];
		sendJson(res, 200, { requests: 0 });
	} else if (path === '/admin/list-changed' && post) {
		sendJson(res, 200, notifyListChanged());
	} else if (path === '/admin/ttl' && post) {
		if (!Number.isInteger(body?.ttl_ms) || body.ttl_ms < 0) {
			sendJson(res, 400, { error: 'ttl_ms: an integer >= 0' });
			return;
		}
		ttlMs = body.ttl_ms;
		sendJson(res, 200, { ttl_ms: ttlMs });
	} else if (path === '/admin/tools' && post) {
		if (typeof body?.description === 'string') {
			echoDescription = body.description;
		}
		const out = { description: echoDescription };
		if (body?.notify) {
			Object.assign(out, notifyListChanged());
		}
		sendJson(res, 200, out);
	} else if (path === '/admin/close-listens' && post) {
		const how = body?.how ?? 'result';
		if (!['result', 'cancelled', 'drop'].includes(how)) {
			sendJson(res, 400, { error: 'how: result, cancelled or drop' });
			return;
		}
		sendJson(res, 200, { closed: closeListens(how) });
	} else if (path === '/admin/drop-sessions' && post) {
		const n = sessions.size;
		sessions.clear();
		counters.sessions = 0;
		sendJson(res, 200, { dropped: n });
	} else {
		sendJson(res, 404, { error: 'not found' });
	}
}

async function onRequest(req, res) {
	const path = new URL(req.url, 'http://127.0.0.1').pathname;
	try {
		if (path === '/mcp') {
			if (req.method === 'POST') {
				await onMcpPost(req, res);
			} else {
				if (req.method === 'GET') {
					counters.gets++;
				} else if (req.method === 'DELETE') {
					counters.deletes++;
				}
				req.resume();
				sendJson(res, 405, rpcError(undefined, -32600,
					'Method Not Allowed: POST only'), { Allow: 'POST' });
			}
		} else if (path.startsWith('/admin/')) {
			await onAdmin(req, res, path);
		} else {
			req.resume();
			sendJson(res, 404, { error: 'not found' });
		}
	} catch (e) {
		log(`${req.method} ${req.url}: ${e?.stack ?? e}`);
		sendJson(res, 500, rpcError(undefined, -32603, 'Internal error'));
	}
}

function runHttp() {
	const srv = http.createServer((req, res) => {
		onRequest(req, res);
	});
	srv.on('error', (e) => {
		log(e.message);
		process.exit(1);
	});
	srv.listen(port, '127.0.0.1', () => {
		// stdout to a pipe or file is synchronous in Node on Linux: the
		// line is out when write() returns.
		process.stdout.write(`listening on port ${srv.address().port}\n`);
	});
}

// Shutdown: every listen gets its graceful result (subscriptions
// "Graceful Closure") before the process goes.
for (const sig of ['SIGTERM', 'SIGINT']) {
	process.on(sig, () => {
		closeListens('result');
		setTimeout(() => process.exit(0), 50);
	});
}

if (mode === 'stdio') {
	runStdio();
} else {
	runHttp();
}
