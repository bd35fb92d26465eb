#!/usr/bin/env node
// gwclient.mjs - a real downstream MCP client of mcpkeep's gateway: the
// TS SDK's Client over StreamableHTTPClientTransport, as an agent runs it.
//
// Usage: node gwclient.mjs URL KEY CALLS OUT [MCPKEEP]
//   URL    the gateway, e.g. http://127.0.0.1:8080/mcp
//   KEY    a virtual key sent as Authorization: Bearer, or "-": none
//   CALLS  a JSON array of {"name", "arguments"}, run in order
//   OUT    a file that gets one JSON object: {"protocol", "server",
//          "session", "tools": [every tool name, all pages], "meta":
//          {tool name: its _meta, for the tools that have one}, "calls":
//          [each call's result, or {"error": message, "code": n}],
//          "ended": the session's DELETE succeeded}, or {"fatal":
//          message} when connecting or listing failed
//   MCPKEEP  given: the client runs `MCPKEEP connect URL --key KEY` and
//          speaks to it over stdio (the SDK's StdioClientTransport), as
//          a desktop client does; "ended" is then whether it exited 0
// With GWCLIENT_REMOTE=<mcp-remote's proxy.js> it runs mcp-remote
// (http-only, the key as an Authorization header) the same way instead.
// With GWCLIENT_WATCH=1 in the environment, after the first listing it
// prints "gwclient listed 1" and waits (30 s at most) for the server's
// notifications/tools/list_changed, listing again at each: "changes" gets
// each listing that followed one, "spurious" counts those that listed
// what the one before did; it stops at the first listing without
// "alpha-echo" (with GWCLIENT_WATCH_FOR=NAME: the first that has NAME).
// With GWCLIENT_ELICIT=1 the client declares URL-mode elicitation
// (capabilities.elicitation.url; it declines any elicitation/create).  A
// call's error keeps its data; a step {"submit": VALUES} of CALLS POSTs
// VALUES (with KEY as X-MCP-Virtual-Key) to the URL the last call named
// (its -32042 error's elicitation, or the URL in its result's text) and
// records {"submitted": status}.
// A call {"cancel_on_progress": true, ...} is aborted at its first
// progress notification (the SDK sends notifications/cancelled); its
// entry is the error.
// With GWCLIENT_LISTS=1 it lists the prompts, resources and resource
// templates too (all pages: "prompts" names, "resources" URIs,
// "templates" URI templates), and CALLS may hold {"prompt": NAME,
// "arguments": {...}} (prompts/get), {"read": URI} (resources/read) and
// {"await_resources_changed": true}: waits (20 s at most) for
// notifications/resources/list_changed, then lists the resources again
// ("resources_after").
// With GWCLIENT_ANSWER=1 the client declares form elicitation, sampling
// and roots and answers them: an elicitation accepted with {"name": "Ada
// Lovelace", "check": true}, a sampling with the text "relayed by
// gwclient" from model "gwclient-model", roots [file:///gwclient]; "asked"
// counts each method it was asked.
// Then prints "gwclient done 1" (a line a test waits for) and exits, 0
// or (fatal) 1.
import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateMessageRequestSchema, ElicitRequestSchema,
	ListRootsRequestSchema, ResourceListChangedNotificationSchema,
	ToolListChangedNotificationSchema } from
	'@modelcontextprotocol/sdk/types.js';
import { StdioClientTransport } from
	'@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from
	'@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key, calls, file, mcpkeep] = process.argv.slice(2);
const headers = key && key !== '-' ? { Authorization: `Bearer ${key}` } : {};
const remote = process.env.GWCLIENT_REMOTE;
const transport = remote
	? new StdioClientTransport({
		command: process.execPath,
		args: [remote, url, '--header', `Authorization: Bearer ${key}`,
			'--transport', 'http-only'],
		stderr: 'ignore',
	})
	: mcpkeep
	? new StdioClientTransport({
		command: mcpkeep,
		args: ['connect', url, ...(key !== '-' ? ['--key', key] : [])],
		stderr: 'inherit',
	})
	: new StreamableHTTPClientTransport(new URL(url), {
		requestInit: { headers },
	});
const elicit = process.env.GWCLIENT_ELICIT === '1';
const answers = process.env.GWCLIENT_ANSWER === '1';
const client = new Client({ name: 'mk-gwclient', version: '1.0.0' },
	elicit ? { capabilities: { elicitation: { url: {} } } }
	: answers ? { capabilities: { elicitation: { form: {} }, sampling: {},
		roots: {} } }
	: {});
const out = { tools: [], meta: {}, calls: [], asked: {} };
const asked = (m) => { out.asked[m] = (out.asked[m] ?? 0) + 1; };
if (elicit) {
	client.setRequestHandler(ElicitRequestSchema,
		async () => ({ action: 'decline' }));
}
if (answers) {
	client.setRequestHandler(ElicitRequestSchema, async () => {
		asked('elicitation/create');
		return { action: 'accept',
			content: { name: 'Ada Lovelace', check: true } };
	});
	client.setRequestHandler(CreateMessageRequestSchema, async () => {
		asked('sampling/createMessage');
		return { role: 'assistant', model: 'gwclient-model',
			content: { type: 'text', text: 'relayed by gwclient' } };
	});
	client.setRequestHandler(ListRootsRequestSchema, async () => {
		asked('roots/list');
		return { roots: [{ uri: 'file:///gwclient', name: 'gw' }] };
	});
}

// Every tool name, all pages.
async function listAll() {
	const names = [];
	let cursor;
	do {
		const page = await client.listTools(cursor ? { cursor } : {});
		names.push(...page.tools.map((t) => t.name));
		for (const t of page.tools.filter((x) => x._meta)) {
			out.meta[t.name] = t._meta;
		}
		cursor = page.nextCursor;
	} while (cursor);
	return names;
}

// Every item of a list, all pages: what field names them.
async function listEvery(method, items, field) {
	const all = [];
	let cursor;
	do {
		const page = await client[method](cursor ? { cursor } : {});
		all.push(...page[items].map((t) => t[field]));
		cursor = page.nextCursor;
	} while (cursor);
	return all;
}

// GWCLIENT_LISTS: resources/list_changed, as they come.
let resourcesChanged = 0;
let onResourcesChanged = () => {};
if (process.env.GWCLIENT_LISTS === '1') {
	client.setNotificationHandler(ResourceListChangedNotificationSchema,
		() => { resourcesChanged++; onResourcesChanged(); });
}

// GWCLIENT_WATCH: the listings that follow list_changed notifications.
async function watch() {
	out.changes = [];
	out.spurious = 0;
	let last = out.tools;
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(
			new Error('no list change within 30 s')), 30000);
		let busy = Promise.resolve();
		client.setNotificationHandler(ToolListChangedNotificationSchema,
			() => {
				busy = busy.then(async () => {
					const now = await listAll();
					out.changes.push(now);
					if (JSON.stringify(now) === JSON.stringify(last)) {
						out.spurious++;
					}
					last = now;
					const want = process.env.GWCLIENT_WATCH_FOR;
					if (want ? now.includes(want)
						: !now.includes('alpha-echo')) {
						clearTimeout(timer);
						resolve();
					}
				});
			});
		console.log('gwclient listed 1');
	});
}

try {
	await client.connect(transport);
	out.protocol = client.getNegotiatedProtocolVersion?.() ??
		transport.protocolVersion;
	out.server = client.getServerVersion();
	out.session = transport.sessionId;
	out.tools = await listAll();
	if (process.env.GWCLIENT_LISTS === '1') {
		out.prompts = await listEvery('listPrompts', 'prompts', 'name');
		out.resources = await listEvery('listResources', 'resources',
			'uri');
		out.templates = await listEvery('listResourceTemplates',
			'resourceTemplates', 'uriTemplate');
	}
	if (process.env.GWCLIENT_WATCH === '1') {
		await watch();
	}
	let lastUrl;
	for (const c of JSON.parse(calls || '[]')) {
		if (c.submit) {
			const r = await fetch(lastUrl, {
				method: 'POST',
				headers: {
					'Content-Type': 'application/json',
					'X-MCP-Virtual-Key': key,
				},
				body: JSON.stringify(c.submit),
			});
			out.calls.push({ submitted: r.status });
			continue;
		}
		if (c.await_resources_changed) {
			await new Promise((resolve, reject) => {
				const timer = setTimeout(() => reject(new Error(
					'no resources/list_changed within 20 s')), 20000);
				onResourcesChanged = () => {
					clearTimeout(timer);
					resolve();
				};
				if (resourcesChanged > 0) {
					onResourcesChanged();
				}
			});
			out.resources_after = await listEvery('listResources',
				'resources', 'uri');
			continue;
		}
		if (c.prompt || c.read) {
			try {
				out.calls.push(c.prompt
					? await client.getPrompt({ name: c.prompt,
						arguments: c.arguments })
					: await client.readResource({ uri: c.read }));
			} catch (e) {
				out.calls.push({ error: e.message, code: e.code });
			}
			continue;
		}
		try {
			// {"progress": true}: the call asks for progress (the SDK
			// sends a progressToken); the result gets "_progress", the
			// notifications counted
			// {"cancel_on_progress": true}: the call is given up (the SDK
			// sends notifications/cancelled) at its first progress
			let seen = 0;
			const { progress, cancel_on_progress: cop, ...params } = c;
			const ac = new AbortController();
			const res = await client.callTool(params, undefined,
				cop ? {
					signal: ac.signal,
					onprogress: () => ac.abort('the user gave up'),
				}
				: progress ? { onprogress: () => { seen++; } } : {});
			out.calls.push(progress ? { ...res, _progress: seen } : res);
			lastUrl = res.content?.[0]?.text?.match(/https?:\/\/\S+/)?.[0];
		} catch (e) {
			out.calls.push({ error: e.message, code: e.code, data: e.data });
			lastUrl = e.data?.elicitations?.[0]?.url;
		}
	}
	if (mcpkeep || remote) {
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
