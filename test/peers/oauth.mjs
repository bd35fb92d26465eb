#!/usr/bin/env node
// oauth.mjs - an OAuth 2.1 authorization server and an OAuth-protected MCP
// server in one process, for the tests of the runtime's OAuth paths.
//
// Usage: node oauth.mjs [--port N]                 (port 0 = any free port)
//
// One node:http server on 127.0.0.1.  Prints exactly one stdout line,
// "listening on port <N>", once listening; logs go to stderr.  BASE below
// is http://127.0.0.1:<N>.  Access tokens are JWTs signed (RS256) by an
// oauth2-mock-server OAuth2Issuer; the MCP side checks them against the
// table of issued tokens (no signature check).  Refresh tokens, codes and
// client ids/secrets are random opaque strings.  Request bodies are
// limited to 1 MiB (413); bad JSON or forms answer 400.
//
// Authorization server:
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//                         (issuer BASE; /authorize, /token, /register;
//                         PKCE S256 only; auth methods none,
//                         client_secret_basic, client_secret_post)
//   GET  /.well-known/openid-configuration         404
//   POST /register       RFC 7591 (JSON): 201 {client_id, client_id_issued_at,
//                         redirect_uris, token_endpoint_auth_method (default
//                         "none"), grant_types, response_types} plus
//                         client_secret (+ client_secret_expires_at 0) when
//                         the method is not "none".  redirect_uris must be
//                         a non-empty array of strings.
//   GET  /authorize      response_type=code, client_id, redirect_uri,
//                         code_challenge, code_challenge_method=S256
//                         [, state, scope, resource, login_hint]: 302 at
//                         once to redirect_uri?code=..&state=.. (no login
//                         page); errors are 400 {"error":"invalid_request"}.
//                         The code is single-use, lives 60 s, and carries
//                         the subject login_hint (default "admin").
//   POST /token          application/x-www-form-urlencoded; client auth by
//                         HTTP Basic, client_id+client_secret in the body,
//                         or client_id alone (public clients only: a client
//                         with a secret must present it, else 401
//                         invalid_client).  Grants:
//     authorization_code  code, redirect_uri, code_verifier: PKCE S256
//                         checked; 400 invalid_grant on any mismatch.
//                         {access_token, token_type, expires_in,
//                         refresh_token, scope (default "mcp:tools")}
//     refresh_token       rotating: each refresh token works once and is
//                         replaced by a new one; a used one is 400
//                         invalid_grant and counts refresh_reused.
//                         Same subject and scope.
//     urn:ietf:params:oauth:grant-type:token-exchange
//                         RFC 8693; needs an authenticated client (e.g.
//                         static-client / static-secret) else 401
//                         invalid_client; subject_token_type must be
//                         ...:token-type:access_token (else 400
//                         invalid_request); subject_token "bad..." is 400
//                         invalid_grant "subject token rejected"; else the
//                         subject is subject_token minus a leading "user-".
//                         No refresh token.
//     other grant types   400 unsupported_grant_type (missing: 400
//                         invalid_request)
//   Clients: those from /register, and static-client (secret
//   static-secret, any redirect_uri), always known.
//
// Protected MCP server:
//   GET  /.well-known/oauth-protected-resource/mcp  RFC 9728 metadata
//   GET  /.well-known/oauth-protected-resource       the same
//   POST/GET/DELETE /mcp Streamable HTTP, one McpServer +
//                         StreamableHTTPServerTransport per session.  Every
//                         request needs "Authorization: Bearer <issued,
//                         unexpired, unrevoked access token>" (subject = its
//                         sub) or, without an Authorization header,
//                         "x-api-key: key-<name>" (subject = name).  Else
//                         401 {"error":"invalid_token"} with
//                         WWW-Authenticate: Bearer resource_metadata="BASE/
//                         .well-known/oauth-protected-resource/mcp",
//                         scope="mcp:tools" (+ error="invalid_token" when a
//                         credential was presented).  Token scope and aud
//                         are not checked.  A session belongs to the
//                         subject that created it: another subject gets 403
//                         {"error":"forbidden"}; an unknown session id 404.
//
// Admin endpoints (plain JSON, no auth):
//   POST /admin/fail-next   {"status": s, "error": e, "count": n (1),
//                           "grant": optional grant_type}: the next n
//                           matching /token requests answer s {"error": e}
//                           (no error: a plain-text body) and change
//                           nothing (a refresh token or code stays usable).
//                           Rules queue up; {} clears them.
//   POST /admin/delay       {"ms": n}: every later /token request waits n
//                           ms first (0 = off)
//   POST /admin/expires-in  {"seconds": n}: lifetime of access tokens
//                           issued from now on (default 3600)
//   POST /admin/revoke-all  every access token issued so far stops working
//                           at /mcp (refresh tokens stay valid)
//   GET  /admin/counters    {"token_requests", "by_grant": {grant: n},
//                           "by_auth": {"basic", "post", "none"},
//                           "refresh_reused", "registrations" (successful),
//                           "authorize" (requests), "mcp_unauthorized",
//                           "mcp_by_sub": {subject: n} (every /mcp request
//                           with a valid credential), "last_exchange":
//                           {"audience", "scope"}, "resource_seen" (last
//                           resource at /authorize or /token), "tools":
//                           {counted_*: n}, "refresh_at": [ms, ...] (when
//                           each refresh_token request came, Date.now();
//                           absent until the first)}
//   POST /admin/reset       zero the counters (tokens and clients stay)
//   POST /admin/reject-all  {"on": bool}: every bearer token refused (also
//                           new ones) while on
//   POST /admin/mcp-fail-next {"status": s, "count": n (1)}: the next n
//                           /mcp requests answer s
//   POST /admin/drop-sessions  every MCP session forgotten (as after a
//                           server restart: their ids get 404)
//   POST /admin/hold        {"mcp": method, "grant": grant_type}: from
//                           now on, /mcp POSTs whose JSON-RPC method is
//                           `mcp` ("initialize", "tools/list", ...) and
//                           /token requests of that grant wait,
//                           unanswered, until
//                           the hold is lifted (POST /admin/hold {}), then
//                           go on as usual; counter "held" counts them
//   POST /admin/metadata    {"prm": {...}, "as": {...}, "www": url,
//                           "fail": {"doc": "prm"|"as", "status": s,
//                           "body": text}}: fields merged over the
//                           protected-resource / authorization-server
//                           metadata served (a null value removes one);
//                           "www" is the resource_metadata of the 401
//                           challenge; "fail" makes that document answer
//                           s with body as text/html.  Each call replaces
//                           the last; {} serves the defaults.  Counter
//                           "metadata": {"prm": n, "as": n} requests of
//                           each document (also reset by /admin/reset)
//   GET  /admin/issued      {"access": [...], "refresh": [...], "codes":
//                           [...]}: every secret handed out so far, for
//                           tests that look for leaks
//
// Tools:
//   whoami {}             text = the request's subject
//   echo {message}        text = message
//   slow {ms}             "done" after ms milliseconds (read-only)
//   counted_destructive, counted_idempotent, counted_readonly,
//   counted_none {}       bump their own counter, answer its new value
//                         (annotations as in inject.mjs; per process)
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import process from 'node:process';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { OAuth2Issuer } from 'oauth2-mock-server';
import { z } from 'zod';

function usage() {
	process.stderr.write('usage: node oauth.mjs [--port N]\n');
	process.exit(2);
}

let port = 0;
for (let i = 2; i < process.argv.length; i++) {
	if (process.argv[i] === '--port' && i + 1 < process.argv.length) {
		const v = process.argv[++i];
		port = Number(v);
		if (!/^[0-9]+$/.test(v) || port > 65535) {
			usage();
		}
	} else {
		usage();
	}
}

const MAX_BODY = 1 << 20;
const CODE_TTL_MS = 60 * 1000;
const GRANT_CODE = 'authorization_code';
const GRANT_REFRESH = 'refresh_token';
const GRANT_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TYPE_ACCESS = 'urn:ietf:params:oauth:token-type:access_token';
const DEFAULT_SCOPE = 'mcp:tools';
const STATIC_CLIENT = {
	client_id: 'static-client',
	client_secret: 'static-secret',
	redirect_uris: null, // any
	token_endpoint_auth_method: 'client_secret_basic',
};

let BASE = ''; // set once listening

const issuer = new OAuth2Issuer();
await issuer.keys.generate('RS256');

// ---- state ----

const clients = new Map(); // client_id -> registered client
const codes = new Map(); // code -> {client_id, redirect_uri, ...}
const refreshTokens = new Map(); // token -> {client_id, sub, scope, aud, used}
const accessTokens = new Map(); // token -> {sub, scope, aud, expMs, revoked}

let expiresIn = 3600;
let tokenDelayMs = 0;

// POST /admin/hold: what is held, and the requests waiting for its end.
let hold = { mcp: null, grant: null };
let holdWaiters = [];

function holdHere() {
	counters.held = (counters.held ?? 0) + 1;
	return new Promise((resolve) => holdWaiters.push(resolve));
}

function setHold(h) {
	hold = { mcp: typeof h.mcp === 'string' ? h.mcp : null,
		grant: typeof h.grant === 'string' ? h.grant : null };
	if (hold.mcp === null && hold.grant === null) {
		const w = holdWaiters;
		holdWaiters = [];
		w.forEach((resolve) => resolve());
	}
}
let failRules = []; // [{status, error, count, grant}]

function zeroCounters() {
	return {
		token_requests: 0,
		by_grant: { [GRANT_CODE]: 0, [GRANT_REFRESH]: 0, [GRANT_EXCHANGE]: 0 },
		by_auth: { basic: 0, post: 0, none: 0 },
		refresh_reused: 0,
		registrations: 0,
		authorize: 0,
		mcp_unauthorized: 0,
		mcp_by_sub: {},
		last_exchange: { audience: null, scope: null },
		resource_seen: null,
		metadata: { prm: 0, as: 0 },
		tools: {
			counted_destructive: 0,
			counted_idempotent: 0,
			counted_readonly: 0,
			counted_none: 0,
		},
	};
}

let counters = zeroCounters();

// ---- http helpers ----

class HttpError extends Error {
	constructor(status, body, headers = {}) {
		super(typeof body === 'object' ? JSON.stringify(body) : String(body));
		this.status = status;
		this.body = body;
		this.headers = headers;
	}
}

function oauthError(status, error, description, headers = {}) {
	const body = { error };
	if (description !== undefined) {
		body.error_description = description;
	}
	return new HttpError(status, body, headers);
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

function sendText(res, status, body, headers = {}) {
	if (res.headersSent) {
		res.end();
		return;
	}
	res.writeHead(status, {
		'Content-Type': 'text/plain',
		'Content-Length': Buffer.byteLength(body),
		...headers,
	});
	res.end(body);
}

// The body as a string; 413 past MAX_BODY (the connection then closes).
async function readBody(req) {
	const chunks = [];
	let size = 0;
	for await (const c of req) {
		size += c.length;
		if (size > MAX_BODY) {
			throw new HttpError(413, { error: 'request body too large' },
				{ Connection: 'close' });
		}
		chunks.push(c);
	}
	return Buffer.concat(chunks).toString();
}

// Admin and /register bodies: a JSON object ({} when empty).
async function readJsonObject(req) {
	const text = await readBody(req);
	if (text.trim() === '') {
		return {};
	}
	let v;
	try {
		v = JSON.parse(text);
	} catch {
		throw oauthError(400, 'invalid_request', 'body is not valid JSON');
	}
	if (v === null || typeof v !== 'object' || Array.isArray(v)) {
		throw oauthError(400, 'invalid_request', 'body is not a JSON object');
	}
	return v;
}

// /token bodies: a form with each parameter at most once (RFC 6749 3.2).
async function readForm(req) {
	const ct = (req.headers['content-type'] ?? '').split(';')[0].trim()
		.toLowerCase();
	const text = await readBody(req);
	if (ct !== 'application/x-www-form-urlencoded') {
		throw oauthError(400, 'invalid_request',
			'Content-Type must be application/x-www-form-urlencoded');
	}
	const params = {};
	for (const [k, v] of new URLSearchParams(text)) {
		if (Object.hasOwn(params, k)) {
			throw oauthError(400, 'invalid_request', `repeated parameter ${k}`);
		}
		params[k] = v;
	}
	return params;
}

function randomToken(bytes = 32) {
	return randomBytes(bytes).toString('base64url');
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

// ---- authorization server ----

// POST /admin/metadata: what the metadata documents say instead.
let metaOverride = {};

function overridden(doc, base) {
	const o = { ...base, ...(metaOverride[doc] ?? {}) };
	for (const k of Object.keys(o)) {
		if (o[k] === null) {
			delete o[k];
		}
	}
	return o;
}

// Serves a metadata document (doc "prm" or "as"), counted, or the
// injected failure.
function sendMetadata(res, doc, body) {
	counters.metadata[doc]++;
	const f = metaOverride.fail;
	if (f !== undefined && f.doc === doc) {
		const text = String(f.body ?? '');
		res.writeHead(f.status ?? 500, {
			'Content-Type': 'text/html',
			'Content-Length': Buffer.byteLength(text),
		});
		res.end(text);
		return;
	}
	sendJson(res, 200, overridden(doc, body));
}

function authServerMetadata() {
	return {
		issuer: BASE,
		authorization_endpoint: `${BASE}/authorize`,
		token_endpoint: `${BASE}/token`,
		registration_endpoint: `${BASE}/register`,
		response_types_supported: ['code'],
		grant_types_supported: [GRANT_CODE, GRANT_REFRESH, GRANT_EXCHANGE],
		code_challenge_methods_supported: ['S256'],
		token_endpoint_auth_methods_supported:
			['none', 'client_secret_basic', 'client_secret_post'],
		scopes_supported: ['mcp:tools', 'offline_access'],
	};
}

function resourceMetadata() {
	return {
		resource: `${BASE}/mcp`,
		authorization_servers: [BASE],
		scopes_supported: ['mcp:tools'],
		bearer_methods_supported: ['header'],
	};
}

function findClient(id) {
	if (id === STATIC_CLIENT.client_id) {
		return STATIC_CLIENT;
	}
	return clients.get(id);
}

const AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post'];

async function onRegister(req, res) {
	const body = await readJsonObject(req);
	const uris = body.redirect_uris;
	if (!Array.isArray(uris) || uris.length === 0 ||
	    !uris.every((u) => typeof u === 'string' && URL.canParse(u))) {
		throw oauthError(400, 'invalid_redirect_uri',
			'redirect_uris must be a non-empty array of URLs');
	}
	const method = body.token_endpoint_auth_method ?? 'none';
	if (!AUTH_METHODS.includes(method)) {
		throw oauthError(400, 'invalid_client_metadata',
			`unsupported token_endpoint_auth_method ${String(method)}`);
	}
	const client = {
		client_id: `client-${randomBytes(12).toString('hex')}`,
		client_id_issued_at: Math.floor(Date.now() / 1000),
		redirect_uris: uris,
		token_endpoint_auth_method: method,
		grant_types: Array.isArray(body.grant_types) ?
			body.grant_types : [GRANT_CODE, GRANT_REFRESH],
		response_types: Array.isArray(body.response_types) ?
			body.response_types : ['code'],
	};
	for (const k of ['client_name', 'scope', 'client_uri', 'software_id',
		'software_version']) {
		if (typeof body[k] === 'string') {
			client[k] = body[k];
		}
	}
	if (method !== 'none') {
		client.client_secret = randomToken(24);
		client.client_secret_expires_at = 0;
	}
	clients.set(client.client_id, client);
	counters.registrations++;
	sendJson(res, 201, client, { 'Cache-Control': 'no-store' });
}

function onAuthorize(req, res, url) {
	counters.authorize++;
	const q = url.searchParams;
	const get = (k) => q.get(k) ?? undefined;
	const bad = (d) => oauthError(400, 'invalid_request', d);

	if (get('resource') !== undefined) {
		counters.resource_seen = get('resource');
	}
	const clientId = get('client_id');
	const client = clientId === undefined ? undefined : findClient(clientId);
	if (client === undefined) {
		throw bad('unknown client_id');
	}
	const redirectUri = get('redirect_uri');
	if (redirectUri === undefined || !URL.canParse(redirectUri)) {
		throw bad('redirect_uri missing or not a URL');
	}
	if (client.redirect_uris !== null &&
	    !client.redirect_uris.includes(redirectUri)) {
		throw bad('redirect_uri not registered for this client');
	}
	if (get('response_type') !== 'code') {
		throw bad('response_type must be code');
	}
	if (!get('code_challenge')) {
		throw bad('code_challenge missing');
	}
	if (get('code_challenge_method') !== 'S256') {
		throw bad('code_challenge_method must be S256');
	}
	const code = randomToken();
	codes.set(code, {
		client_id: clientId,
		redirect_uri: redirectUri,
		code_challenge: get('code_challenge'),
		scope: get('scope'),
		resource: get('resource'),
		sub: get('login_hint') ?? 'admin',
		expMs: Date.now() + CODE_TTL_MS,
		used: false,
	});
	const to = new URL(redirectUri);
	to.searchParams.append('code', code);
	if (get('state') !== undefined) {
		to.searchParams.append('state', get('state'));
	}
	res.writeHead(302, { Location: to.href, 'Content-Length': 0 });
	res.end();
}

// Which client auth the request uses: "basic", "post" or "none".
function authMethodOf(req, params) {
	if (/^basic /i.test(req.headers.authorization ?? '')) {
		return 'basic';
	}
	if (params.client_secret !== undefined) {
		return 'post';
	}
	return 'none';
}

function formDecode(s) {
	return decodeURIComponent(s.replace(/\+/g, ' '));
}

// The client behind a /token request: {method, client} (client null when
// the request names none).  Throws 401 invalid_client on a bad secret, an
// unknown client, or a client with a secret that did not present it.
function authenticateClient(req, params, method) {
	const invalid = (d) => oauthError(401, 'invalid_client', d,
		method === 'basic' ? { 'WWW-Authenticate': 'Basic realm="oauth"' } : {});
	let id;
	let secret;
	if (method === 'basic') {
		if (params.client_secret !== undefined) {
			throw oauthError(400, 'invalid_request',
				'more than one client authentication method');
		}
		const raw = Buffer.from(req.headers.authorization.slice(6).trim(),
			'base64').toString();
		const colon = raw.indexOf(':');
		if (colon < 0) {
			throw invalid('malformed Basic credentials');
		}
		try {
			id = formDecode(raw.slice(0, colon));
			secret = formDecode(raw.slice(colon + 1));
		} catch {
			throw invalid('malformed Basic credentials');
		}
		if (params.client_id !== undefined && params.client_id !== id) {
			throw oauthError(400, 'invalid_request',
				'client_id differs from the Basic credentials');
		}
	} else if (method === 'post') {
		id = params.client_id;
		secret = params.client_secret;
		if (id === undefined) {
			throw invalid('client_secret without client_id');
		}
	} else {
		id = params.client_id;
		if (id === undefined) {
			return { method, client: null };
		}
	}
	const client = findClient(id);
	if (client === undefined) {
		throw invalid('unknown client');
	}
	if (secret !== undefined) {
		if (client.client_secret === undefined || client.client_secret !== secret) {
			throw invalid('bad client credentials');
		}
	} else if (client.client_secret !== undefined) {
		throw invalid('client authentication required');
	}
	return { method, client };
}

// Mints an access token and remembers it for /mcp.
async function mintAccessToken({ sub, scope, aud, clientId }) {
	const lifetime = expiresIn;
	const token = await issuer.buildToken({
		expiresIn: lifetime,
		scopesOrTransform: (header, payload) => {
			payload.sub = sub;
			payload.scope = scope;
			if (aud !== undefined && aud !== null) {
				payload.aud = aud;
			}
			if (clientId !== undefined) {
				payload.client_id = clientId;
			}
			// Two tokens minted in the same second with the same claims
			// would otherwise be the same string (RS256 is deterministic).
			payload.jti = randomUUID();
		},
	});
	accessTokens.set(token, {
		sub,
		scope,
		aud,
		expMs: Date.now() + lifetime * 1000,
		revoked: false,
	});
	return { token, lifetime };
}

function mintRefreshToken(info) {
	const rt = randomToken();
	refreshTokens.set(rt, { ...info, used: false });
	return rt;
}

async function grantCode(params, client) {
	if (client === null) {
		throw oauthError(401, 'invalid_client', 'client_id required');
	}
	if (params.code === undefined) {
		throw oauthError(400, 'invalid_request', 'code missing');
	}
	const grant = codes.get(params.code);
	const invalid = (d) => oauthError(400, 'invalid_grant', d);
	if (grant === undefined) {
		throw invalid('unknown code');
	}
	if (grant.used) {
		throw invalid('code already used');
	}
	if (grant.expMs <= Date.now()) {
		throw invalid('code expired');
	}
	if (grant.client_id !== client.client_id) {
		throw invalid('code issued to another client');
	}
	if (params.redirect_uri !== grant.redirect_uri) {
		throw invalid('redirect_uri differs from the authorization request');
	}
	if (params.code_verifier === undefined) {
		throw invalid('code_verifier missing');
	}
	const challenge = createHash('sha256').update(params.code_verifier)
		.digest('base64url');
	if (challenge !== grant.code_challenge) {
		throw invalid('code_verifier does not match code_challenge');
	}
	grant.used = true;
	const info = {
		client_id: client.client_id,
		sub: grant.sub,
		scope: grant.scope ?? DEFAULT_SCOPE,
		aud: params.resource ?? grant.resource,
	};
	const { token, lifetime } = await mintAccessToken({
		...info, clientId: client.client_id,
	});
	return {
		access_token: token,
		token_type: 'Bearer',
		expires_in: lifetime,
		refresh_token: mintRefreshToken(info),
		scope: info.scope,
	};
}

async function grantRefresh(params, client) {
	if (client === null) {
		throw oauthError(401, 'invalid_client', 'client_id required');
	}
	if (params.refresh_token === undefined) {
		throw oauthError(400, 'invalid_request', 'refresh_token missing');
	}
	const old = refreshTokens.get(params.refresh_token);
	if (old === undefined) {
		throw oauthError(400, 'invalid_grant', 'unknown refresh token');
	}
	if (old.used) {
		counters.refresh_reused++;
		throw oauthError(400, 'invalid_grant', 'refresh token already used');
	}
	if (old.client_id !== client.client_id) {
		throw oauthError(400, 'invalid_grant',
			'refresh token issued to another client');
	}
	old.used = true;
	const info = {
		client_id: old.client_id,
		sub: old.sub,
		scope: old.scope,
		aud: params.resource ?? old.aud,
	};
	const { token, lifetime } = await mintAccessToken({
		...info, clientId: client.client_id,
	});
	return {
		access_token: token,
		token_type: 'Bearer',
		expires_in: lifetime,
		refresh_token: mintRefreshToken(info),
		scope: info.scope,
	};
}

async function grantExchange(params, client, method) {
	counters.last_exchange = {
		audience: params.audience ?? null,
		scope: params.scope ?? null,
	};
	if (client === null || method === 'none') {
		throw oauthError(401, 'invalid_client',
			'token exchange needs client authentication');
	}
	if (params.subject_token_type !== TYPE_ACCESS) {
		throw oauthError(400, 'invalid_request',
			`subject_token_type must be ${TYPE_ACCESS}`);
	}
	if (!params.subject_token) {
		throw oauthError(400, 'invalid_request', 'subject_token missing');
	}
	if (params.subject_token.startsWith('bad')) {
		throw oauthError(400, 'invalid_grant', 'subject token rejected');
	}
	const sub = params.subject_token.replace(/^user-/, '');
	const { token, lifetime } = await mintAccessToken({
		sub,
		scope: params.scope ?? DEFAULT_SCOPE,
		aud: params.audience ?? params.resource,
		clientId: client.client_id,
	});
	return {
		access_token: token,
		issued_token_type: TYPE_ACCESS,
		token_type: 'Bearer',
		expires_in: lifetime,
	};
}

async function onToken(req, res) {
	const noStore = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
	counters.token_requests++;
	const params = await readForm(req);
	const grant = params.grant_type;
	const method = authMethodOf(req, params);
	if (grant !== undefined) {
		counters.by_grant[grant] = (counters.by_grant[grant] ?? 0) + 1;
	}
	if (grant === GRANT_REFRESH) {
		// refresh_at: when each refresh came, to measure their spacing
		(counters.refresh_at ??= []).push(Date.now());
	}
	counters.by_auth[method]++;
	if (params.resource !== undefined) {
		counters.resource_seen = params.resource;
	}

	if (tokenDelayMs > 0) {
		await sleep(tokenDelayMs);
	}
	if (hold.grant !== null && hold.grant === grant) {
		await holdHere();
	}
	const rule = failRules.find((r) => r.grant === undefined || r.grant === grant);
	if (rule !== undefined) {
		if (--rule.count <= 0) {
			failRules = failRules.filter((r) => r !== rule);
		}
		const headers = { ...noStore };
		if (rule.status === 401) {
			headers['WWW-Authenticate'] = 'Basic realm="oauth"';
		}
		if (rule.error === undefined) {
			sendText(res, rule.status,
				`${http.STATUS_CODES[rule.status] ?? 'Error'}\n`, headers);
		} else {
			sendJson(res, rule.status, { error: rule.error }, headers);
		}
		return;
	}

	if (grant === undefined) {
		throw oauthError(400, 'invalid_request', 'grant_type missing', noStore);
	}
	if (![GRANT_CODE, GRANT_REFRESH, GRANT_EXCHANGE].includes(grant)) {
		throw oauthError(400, 'unsupported_grant_type', undefined, noStore);
	}
	const { client } = authenticateClient(req, params, method);
	let body;
	if (grant === GRANT_CODE) {
		body = await grantCode(params, client);
	} else if (grant === GRANT_REFRESH) {
		body = await grantRefresh(params, client);
	} else {
		body = await grantExchange(params, client, method);
	}
	sendJson(res, 200, body, noStore);
}

// ---- protected MCP server ----

// The subject of a request's credential: {sub} or {error: "missing" |
// "invalid"}.  headers: lower-case names (node or Fetch headers alike).
// POST /admin/reject-all {"on": bool}: every bearer token is refused
// (new ones too) while on; POST /admin/mcp-fail-next {"status", "count"}:
// the next /mcp requests answer that status.
let rejectAll = false;
let mcpFail = { status: 0, count: 0 };

function subjectOf(headers) {
	const authz = headers.authorization;
	if (authz !== undefined) {
		if (rejectAll) {
			return { error: 'invalid' };
		}
		const m = /^bearer +(\S+) *$/i.exec(authz);
		const t = m === null ? undefined : accessTokens.get(m[1]);
		if (t === undefined || t.revoked || t.expMs <= Date.now()) {
			return { error: 'invalid' };
		}
		return { sub: t.sub };
	}
	const key = headers['x-api-key'];
	if (key !== undefined) {
		if (typeof key === 'string' && /^key-./.test(key)) {
			return { sub: key.slice(4) };
		}
		return { error: 'invalid' };
	}
	return { error: 'missing' };
}

function unauthorized(res, presented) {
	counters.mcp_unauthorized++;
	const rm = metaOverride.www ??
		`${BASE}/.well-known/oauth-protected-resource/mcp`;
	let challenge = `Bearer resource_metadata="${rm}", scope="mcp:tools"`;
	if (presented) {
		challenge += ', error="invalid_token"';
	}
	sendJson(res, 401, { error: 'invalid_token' },
		{ 'WWW-Authenticate': challenge });
}

function text(s) {
	return { content: [{ type: 'text', text: s }] };
}

const counted = {
	counted_destructive: {
		destructiveHint: true,
		idempotentHint: false,
		readOnlyHint: false,
	},
	counted_idempotent: { destructiveHint: true, idempotentHint: true },
	counted_readonly: { readOnlyHint: true },
	counted_none: undefined,
};

// A new McpServer with every tool; one per session.
function makeServer() {
	const s = new McpServer({ name: 'mk-oauth', version: '1.0.0' });

	s.registerTool('whoami', {
		description: 'The subject of the request\'s credential',
		inputSchema: {},
	}, async (args, extra) => {
		const who = subjectOf(extra.requestInfo?.headers ?? {});
		return text(who.sub ?? '');
	});

	s.registerTool('echo', {
		description: 'Answers the message',
		inputSchema: { message: z.string() },
	}, async ({ message }) => text(message));

	s.registerTool('slow', {
		description: 'Answers "done" after ms milliseconds',
		inputSchema: { ms: z.number().int().nonnegative() },
		annotations: { readOnlyHint: true },
	}, async ({ ms }) => {
		await new Promise((r) => setTimeout(r, ms));
		return text('done');
	});

	for (const [name, annotations] of Object.entries(counted)) {
		const config = {
			description: `Counts its executions (${name})`,
			inputSchema: {},
		};
		if (annotations !== undefined) {
			config.annotations = annotations;
		}
		s.registerTool(name, config, async () => {
			counters.tools[name]++;
			return text(String(counters.tools[name]));
		});
	}
	return s;
}

// session id -> { transport, server, sub }
const sessions = new Map();

function rpcError(res, status, code, message) {
	sendJson(res, status, { jsonrpc: '2.0', error: { code, message }, id: null });
}

async function onMcp(req, res) {
	if (mcpFail.count > 0) {
		mcpFail.count--;
		req.resume();
		sendJson(res, mcpFail.status, { error: 'injected failure' });
		return;
	}
	if (req.method === 'POST') {
		counters.mcp_posts = (counters.mcp_posts ?? 0) + 1;
	}
	const who = subjectOf(req.headers);
	if (who.sub === undefined) {
		req.resume();
		unauthorized(res, who.error === 'invalid');
		return;
	}
	const sub = who.sub;
	counters.mcp_by_sub[sub] = (counters.mcp_by_sub[sub] ?? 0) + 1;
	let body;
	if (req.method === 'POST' && hold.mcp !== null) {
		body = JSON.parse(await readBody(req));
		if (body?.method === hold.mcp) {
			await holdHere();
		}
		if (req.socket.destroyed) {
			return; // the client gave up while it was held
		}
	}

	const sid = req.headers['mcp-session-id'];
	if (sid !== undefined) {
		const sess = sessions.get(sid);
		if (sess === undefined) {
			req.resume();
			rpcError(res, 404, -32001, 'Session not found');
			return;
		}
		if (sess.sub !== sub) {
			req.resume();
			sendJson(res, 403, { error: 'forbidden' });
			return;
		}
		await sess.transport.handleRequest(req, res, body);
		return;
	}
	if (req.method !== 'POST') {
		req.resume();
		rpcError(res, 400, -32000,
			'Bad Request: Mcp-Session-Id header is required');
		return;
	}
	// No session: a new transport validates the request itself (initialize
	// or 400 "Server not initialized"); it is kept only if it got an id.
	const server = makeServer();
	const transport = new StreamableHTTPServerTransport({
		sessionIdGenerator: () => randomUUID(),
		maxRequestBodySize: MAX_BODY,
		onsessioninitialized: (id) => {
			sessions.set(id, { transport, server, sub });
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

// ---- admin ----

function intField(body, name, { min = 0, max = Number.MAX_SAFE_INTEGER,
	dflt } = {}) {
	const v = body[name] ?? dflt;
	if (!Number.isInteger(v) || v < min || v > max) {
		throw oauthError(400, 'invalid_request',
			`${name} must be an integer in [${min}, ${max}]`);
	}
	return v;
}

async function onAdmin(req, res, path) {
	const route = `${req.method} ${path}`;
	if (req.method !== 'POST') {
		req.resume();
	}
	if (route === 'GET /admin/counters') {
		sendJson(res, 200, counters);
	} else if (route === 'GET /admin/issued') {
		// every secret handed out, for tests that look for leaks
		sendJson(res, 200, {
			access: [...accessTokens.keys()],
			refresh: [...refreshTokens.keys()],
			codes: [...codes.keys()],
		});
	} else if (route === 'POST /admin/reset') {
		await readBody(req);
		counters = zeroCounters();
		sendJson(res, 200, { reset: true });
	} else if (route === 'POST /admin/fail-next') {
		const body = await readJsonObject(req);
		if (Object.keys(body).length === 0) {
			failRules = [];
			sendJson(res, 200, { rules: failRules });
			return;
		}
		const rule = {
			status: intField(body, 'status', { min: 100, max: 599 }),
			count: intField(body, 'count', { min: 1, dflt: 1 }),
		};
		if (body.error !== undefined) {
			if (typeof body.error !== 'string') {
				throw oauthError(400, 'invalid_request', 'error must be a string');
			}
			rule.error = body.error;
		}
		if (body.grant !== undefined) {
			if (typeof body.grant !== 'string') {
				throw oauthError(400, 'invalid_request', 'grant must be a string');
			}
			rule.grant = body.grant;
		}
		failRules.push(rule);
		sendJson(res, 200, { rules: failRules });
	} else if (route === 'POST /admin/metadata') {
		metaOverride = await readJsonObject(req);
		sendJson(res, 200, metaOverride);
	} else if (route === 'POST /admin/delay') {
		tokenDelayMs = intField(await readJsonObject(req), 'ms', { dflt: 0 });
		sendJson(res, 200, { ms: tokenDelayMs });
	} else if (route === 'POST /admin/expires-in') {
		expiresIn = intField(await readJsonObject(req), 'seconds');
		sendJson(res, 200, { seconds: expiresIn });
	} else if (route === 'POST /admin/hold') {
		setHold(await readJsonObject(req));
		sendJson(res, 200, hold);
	} else if (route === 'POST /admin/reject-all') {
		rejectAll = (await readJsonObject(req)).on === true;
		sendJson(res, 200, { on: rejectAll });
	} else if (route === 'POST /admin/mcp-fail-next') {
		const b = await readJsonObject(req);
		mcpFail = { status: intField(b, 'status'), count: b.count ?? 1 };
		sendJson(res, 200, mcpFail);
	} else if (route === 'POST /admin/drop-sessions') {
		await readBody(req);
		const ids = [...sessions.keys()];
		for (const id of ids) {
			const sess = sessions.get(id);
			sessions.delete(id);
			try {
				await sess.server.close();
			} catch (e) {
				process.stderr.write(`closing session ${id}: ${e}\n`);
			}
		}
		sendJson(res, 200, { dropped: ids.length });
	} else if (route === 'POST /admin/revoke-all') {
		await readBody(req);
		let n = 0;
		for (const t of accessTokens.values()) {
			if (!t.revoked) {
				t.revoked = true;
				n++;
			}
		}
		sendJson(res, 200, { revoked: n });
	} else {
		req.resume();
		sendJson(res, 404, { error: 'not found' });
	}
}

// ---- routing ----

// path -> {method: handler}
const routes = {
	'/.well-known/oauth-authorization-server': {
		GET: (req, res) => sendMetadata(res, 'as', authServerMetadata()),
	},
	'/.well-known/oauth-protected-resource/mcp': {
		GET: (req, res) => sendMetadata(res, 'prm', resourceMetadata()),
	},
	'/.well-known/oauth-protected-resource': {
		GET: (req, res) => sendMetadata(res, 'prm', resourceMetadata()),
	},
	'/register': { POST: onRegister },
	'/authorize': { GET: onAuthorize },
	'/token': { POST: onToken },
	'/mcp': { POST: onMcp, GET: onMcp, DELETE: onMcp },
};

async function onRequest(req, res) {
	try {
		const url = new URL(req.url, 'http://127.0.0.1');
		const path = url.pathname;
		if (path.startsWith('/admin/')) {
			await onAdmin(req, res, path);
			return;
		}
		const methods = routes[path];
		if (methods === undefined) {
			req.resume();
			sendJson(res, 404, { error: 'not found' });
			return;
		}
		const handler = methods[req.method];
		if (handler === undefined) {
			req.resume();
			sendJson(res, 405, { error: 'method not allowed' },
				{ Allow: Object.keys(methods).join(', ') });
			return;
		}
		await handler(req, res, url);
	} catch (e) {
		if (e instanceof HttpError) {
			if (typeof e.body === 'object') {
				sendJson(res, e.status, e.body, e.headers);
			} else {
				sendText(res, e.status, e.body, e.headers);
			}
			return;
		}
		process.stderr.write(`${req.method} ${req.url}: ${e?.stack ?? e}\n`);
		sendJson(res, 500, { error: 'server_error' });
	}
}

const srv = http.createServer((req, res) => {
	onRequest(req, res);
});
srv.on('clientError', (e, socket) => {
	if (socket.writable) {
		socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
	} else {
		socket.destroy();
	}
});
srv.on('error', (e) => {
	process.stderr.write(`oauth: ${e.message}\n`);
	process.exit(1);
});
srv.listen(port, '127.0.0.1', () => {
	BASE = `http://127.0.0.1:${srv.address().port}`;
	issuer.url = BASE;
	// stdout to a pipe or file is synchronous in Node on Linux: the line is
	// out when write() returns.
	process.stdout.write(`listening on port ${srv.address().port}\n`);
});
