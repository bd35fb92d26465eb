#!/usr/bin/env node
// flood.mjs - a legacy HTTP+SSE MCP server (MCP 2024-11-05) whose stream
// carries as many events as a test asks for.
//
// Usage: node flood.mjs [--port N]     (port 0 = any free port)
//
// GET /sse opens a session's event stream (the SDK's SSEServerTransport:
// an `endpoint` event naming POST /message?sessionId=...); POSTs to it
// are answered 202 and their answers come back on the stream.  Prints
// exactly one stdout line, "listening on port <N>", once listening; logs
// go to stderr.
//
// Tools:
//   echo {message}   text = message
//   flood {events}   writes `events` JSON-RPC notifications
//                    (notifications/message, level debug) on the
//                    session's stream as fast as it can, then answers
//                    "flooded <events>" (after them, on the same stream)
import http from 'node:http';
import process from 'node:process';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { z } from 'zod';

function usage() {
	process.stderr.write('usage: node flood.mjs [--port N]\n');
	process.exit(2);
}

let port = 0;
for (let i = 2; i < process.argv.length; i++) {
	if (process.argv[i] === '--port' && i + 1 < process.argv.length) {
		port = Number(process.argv[++i]);
		if (!Number.isInteger(port) || port < 0 || port > 65535) {
			usage();
		}
	} else {
		usage();
	}
}

function text(s) {
	return { content: [{ type: 'text', text: s }] };
}

// session id -> SSEServerTransport
const sessions = new Map();

function makeServer(transport) {
	const s = new McpServer({ name: 'mk-flood', version: '1.0.0' });

	s.registerTool('echo', {
		description: 'Answers the message',
		inputSchema: { message: z.string() },
	}, async ({ message }) => text(message));

	s.registerTool('flood', {
		description: 'Writes `events` notifications on the stream, then ' +
			'answers',
		inputSchema: { events: z.number().int().nonnegative() },
	}, async ({ events }) => {
		// Straight to the transport: one `event: message` per call, in
		// order, ahead of the tool's answer.
		for (let i = 0; i < events; i++) {
			await transport.send({
				jsonrpc: '2.0',
				method: 'notifications/message',
				params: { level: 'debug', data: `flood ${i}` },
			});
		}
		return text(`flooded ${events}`);
	});
	return s;
}

async function onSse(req, res) {
	const transport = new SSEServerTransport('/message', res);
	const server = makeServer(transport);

	sessions.set(transport.sessionId, transport);
	transport.onclose = () => sessions.delete(transport.sessionId);
	await server.connect(transport);
}

async function onMessage(req, res, url) {
	const transport = sessions.get(url.searchParams.get('sessionId'));

	if (transport === undefined) {
		res.writeHead(404).end('unknown session');
		return;
	}
	await transport.handlePostMessage(req, res);
}

async function onRequest(req, res) {
	const url = new URL(req.url, 'http://127.0.0.1');

	try {
		if (url.pathname === '/sse' && req.method === 'GET') {
			await onSse(req, res);
		} else if (url.pathname === '/message' && req.method === 'POST') {
			await onMessage(req, res, url);
		} else {
			res.writeHead(404).end('not found');
		}
	} catch (e) {
		process.stderr.write(`${req.method} ${req.url}: ${e?.stack ?? e}\n`);
		if (!res.headersSent) {
			res.writeHead(500).end('internal error');
		}
	}
}

const srv = http.createServer((req, res) => {
	onRequest(req, res);
});
srv.on('error', (e) => {
	process.stderr.write(`flood: ${e.message}\n`);
	process.exit(1);
});
srv.listen(port, '127.0.0.1', () => {
	process.stdout.write(`listening on port ${srv.address().port}\n`);
});
