#!/usr/bin/env node
// otlp.mjs - a small OpenTelemetry collector: the OTLP/HTTP (JSON) trace
// receiver the tests export spans to.
//
// Usage: node otlp.mjs [--port N]     (port 0 = any free port)
//
// Prints exactly one stdout line, "listening on port <N>", once listening
// on 127.0.0.1.  Endpoints (plain JSON, no auth):
//   POST /v1/traces   an ExportTraceServiceRequest, as the OTLP
//                     specification's JSON encoding has it: Content-Type
//                     application/json; traceId 32 and spanId (and
//                     parentSpanId) 16 lowercase hex digits, never all
//                     zeros; name a string; kind an integer 0-5;
//                     start/endTimeUnixNano decimal strings, end >= start;
//                     attributes [{key, value: {stringValue | intValue
//                     (a decimal string) | boolValue | doubleValue}}];
//                     status {code 0-2, message?}.  A request that breaks
//                     any of it is answered 400 with what is wrong and
//                     counted as rejected; else 200 {"partialSuccess": {}}
//   GET  /spans       {"spans": [span + {"resource": {key: value}}],
//                     "posts": n, "rejected": n, "errors": [why...]}
//                     every span taken so far, oldest first; attributes
//                     flattened to {key: value}
//   POST /admin/mode  {"status": code}: later posts are answered with
//                     that status (the collector refuses); {} normal
import http from 'node:http';

const args = process.argv.slice(2);
const port = Number(args[args.indexOf('--port') + 1] ?? 0) || 0;
const spans = [];
const errors = [];
let posts = 0;
let rejected = 0;
let failWith = 0;

const HEX = (n) => new RegExp(`^[0-9a-f]{${n}}$`);
const DEC = /^[0-9]+$/;

function valueOf(v) {
	if (v === null || typeof v !== 'object') throw new Error('an attribute value is not an AnyValue object');
	if ('stringValue' in v) return String(v.stringValue);
	if ('intValue' in v) {
		if (!DEC.test(String(v.intValue)) && !/^-[0-9]+$/.test(String(v.intValue))) throw new Error(`intValue ${v.intValue} is not an integer`);
		return Number(v.intValue);
	}
	if ('boolValue' in v) return Boolean(v.boolValue);
	if ('doubleValue' in v) return Number(v.doubleValue);
	throw new Error(`unknown AnyValue ${JSON.stringify(v)}`);
}

function attrs(list, where) {
	if (list === undefined) return {};
	if (!Array.isArray(list)) throw new Error(`${where}.attributes is not an array`);
	const out = {};
	for (const a of list) {
		if (typeof a?.key !== 'string') throw new Error(`${where}: an attribute without a key`);
		out[a.key] = valueOf(a.value);
	}
	return out;
}

function id(v, n, what) {
	if (typeof v !== 'string' || !HEX(n).test(v) || /^0+$/.test(v)) throw new Error(`${what} ${JSON.stringify(v)} is not ${n} lowercase hex digits (not all zeros)`);
}

function check(req) {
	const taken = [];
	if (!Array.isArray(req?.resourceSpans)) throw new Error('no resourceSpans array');
	for (const rs of req.resourceSpans) {
		const resource = attrs(rs.resource?.attributes, 'resource');
		if (!Array.isArray(rs.scopeSpans)) throw new Error('no scopeSpans array');
		for (const ss of rs.scopeSpans) {
			if (!Array.isArray(ss.spans)) throw new Error('no spans array');
			for (const s of ss.spans) {
				id(s.traceId, 32, 'traceId');
				id(s.spanId, 16, 'spanId');
				if (s.parentSpanId !== undefined && s.parentSpanId !== '') id(s.parentSpanId, 16, 'parentSpanId');
				if (typeof s.name !== 'string' || s.name === '') throw new Error('a span without a name');
				if (!Number.isInteger(s.kind) || s.kind < 0 || s.kind > 5) throw new Error(`kind ${s.kind}`);
				for (const k of ['startTimeUnixNano', 'endTimeUnixNano']) {
					if (typeof s[k] !== 'string' || !DEC.test(s[k])) throw new Error(`${k} ${JSON.stringify(s[k])} is not a decimal string`);
				}
				if (BigInt(s.endTimeUnixNano) < BigInt(s.startTimeUnixNano)) throw new Error(`${s.name} ends before it starts`);
				if (s.status !== undefined && (!Number.isInteger(s.status.code) || s.status.code < 0 || s.status.code > 2)) throw new Error(`status ${JSON.stringify(s.status)}`);
				taken.push({ ...s, attributes: attrs(s.attributes, s.name), resource, scope: ss.scope });
			}
		}
	}
	return taken;
}

function send(res, status, body) {
	const text = JSON.stringify(body);
	res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
	res.end(text);
}

const server = http.createServer((req, res) => {
	const chunks = [];
	let size = 0;
	req.on('data', (c) => {
		size += c.length;
		if (size <= 16 << 20) chunks.push(c);
	});
	req.on('end', () => {
		const text = Buffer.concat(chunks).toString('utf8');
		if (req.method === 'POST' && req.url === '/v1/traces') {
			posts++;
			if (failWith) return send(res, failWith, { error: 'refused by /admin/mode' });
			try {
				if (!String(req.headers['content-type']).startsWith('application/json')) throw new Error(`Content-Type ${req.headers['content-type']}`);
				spans.push(...check(JSON.parse(text)));
				return send(res, 200, { partialSuccess: {} });
			} catch (e) {
				rejected++;
				errors.push(String(e.message));
				return send(res, 400, { error: String(e.message) });
			}
		}
		if (req.method === 'GET' && req.url === '/spans') return send(res, 200, { spans, posts, rejected, errors });
		if (req.method === 'POST' && req.url === '/admin/mode') {
			failWith = Number(JSON.parse(text || '{}').status ?? 0) || 0;
			return send(res, 200, { status: failWith });
		}
		send(res, 404, { error: 'no such endpoint' });
	});
});

server.listen(port, '127.0.0.1', () => {
	console.log(`listening on port ${server.address().port}`);
});
process.on('SIGTERM', () => process.exit(0));
