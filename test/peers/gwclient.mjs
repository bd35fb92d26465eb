#!/usr/bin/env node
// gwclient.mjs - a real downstream MCP client of mcpkeep's gateway: the
// TS SDK's Client over StreamableHTTPClientTransport, as an agent runs it.
//
// Usage: node gwclient.mjs URL KEY CALLS OUT [MCPKEEP]
//   URL    the gateway, e.g. http://127.0.0.1:8080/mcp
//   KEY    a virtual key sent as Authorization: Bearer, or "-": none
//   CALLS  a JSON array of {"name", "arguments"}, run in order
//   OUT    a file that gets one JSON object: {"protocol", "server",
//          "session", "tools": [every tool name, all pages], "calls":
//          [each call's result, or {"error": message, "code": n}],
//          "ended": the session's DELETE succeeded}, or {"fatal":
//          message} when connecting or listing failed
//   MCPKEEP  given: the client runs `MCPKEEP connect URL --key KEY` and
//          speaks to it over stdio (the SDK's StdioClientTransport), as
//          a desktop client does; "ended" is then whether it exited 0
// Then prints "gwclient done 1" (a line a test waits for) and exits, 0
// or (fatal) 1.
import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from
	'@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from
	'@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key, calls, file, mcpkeep] = process.argv.slice(2);
const headers = key && key !== '-' ? { Authorization: `Bearer ${key}` } : {};
const transport = mcpkeep
	? new StdioClientTransport({
		command: mcpkeep,
		args: ['connect', url, ...(key !== '-' ? ['--key', key] : [])],
		stderr: 'inherit',
	})
	: new StreamableHTTPClientTransport(new URL(url), {
		requestInit: { headers },
	});
const client = new Client({ name: 'mk-gwclient', version: '1.0.0' });
const out = { tools: [], calls: [] };

try {
	await client.connect(transport);
	out.protocol = client.getNegotiatedProtocolVersion?.() ??
		transport.protocolVersion;
	out.server = client.getServerVersion();
	out.session = transport.sessionId;
	let cursor;
	do {
		const page = await client.listTools(cursor ? { cursor } : {});
		out.tools.push(...page.tools.map((t) => t.name));
		cursor = page.nextCursor;
	} while (cursor);
	for (const c of JSON.parse(calls || '[]')) {
		try {
			out.calls.push(await client.callTool(c));
		} catch (e) {
			out.calls.push({ error: e.message, code: e.code });
		}
	}
	if (mcpkeep) {
		const exited = new Promise((resolve) => {
			transport._process?.once('exit', (code) => resolve(code));
		});
		await client.close(); /* stdin ends: the bridge ends the session */
		out.ended = (await exited) === 0;
	} else {
		await transport.terminateSession();
		out.ended = transport.sessionId === undefined;
		await client.close();
	}
} catch (e) {
	writeFileSync(file, JSON.stringify({ fatal: e.message, ...out }));
	console.log('gwclient done 1');
	process.exit(1);
}
writeFileSync(file, JSON.stringify(out));
console.log('gwclient done 1');
