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
// limited to 1 MiB (413); bad JSON or forms answer 400.  Everything
// marked (variant) below is off until POST /admin/variant turns it on.
//
// Authorization server:
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//                         (issuer BASE; /authorize, /token, /register;
//                         PKCE S256 only; auth methods none,
//                         client_secret_basic, client_secret_post; with
//                         variant jwt_clients also private_key_jwt and
//                         token_endpoint_auth_signing_alg_values_supported
//                         ["RS256", "ES256"]; with client_credentials that
//                         grant; with cimd
//                         client_id_metadata_document_supported true)
//   GET  /.well-known/openid-configuration         404
//                         (variant as_at: where the document is served;
//                         any other GET path beginning with
//                         /.well-known/oauth-authorization-server or
//                         /.well-known/openid-configuration, or ending with
//                         /.well-known/openid-configuration, is 404)
//   POST /register       RFC 7591 (JSON): 201 {client_id, client_id_issued_at,
//                         redirect_uris, token_endpoint_auth_method (default
//                         "none"), grant_types, response_types} plus
//                         client_secret (+ client_secret_expires_at 0) when
//                         the method is not "none".  redirect_uris must be
//                         a non-empty array of strings.  (variant
//                         register_method: that method whatever was asked,
//                         with a client_secret unless it is "none".)
//   GET  /authorize      response_type=code, client_id, redirect_uri,
//                         code_challenge, code_challenge_method=S256
//                         [, state, scope, resource, login_hint]: 302 at
//                         once to redirect_uri?code=..&state=.. (no login
//                         page); errors are 400 {"error":"invalid_request"}.
//                         The code is single-use, lives 60 s, and carries
//                         the subject login_hint (default "admin") and the
//                         scope asked for (default "mcp:tools").  (variant
//                         iss: the redirect also carries iss=<iss> after
//                         code and state, RFC 9207.)
//   POST /token          application/x-www-form-urlencoded; client auth by
//                         HTTP Basic, client_id+client_secret in the body,
//                         or client_id alone (public clients only: a client
//                         with a secret must present it, else 401
//                         invalid_client), or (variant jwt_clients) an
//                         RFC 7523 client assertion: client_assertion_type
//                         urn:ietf:params:oauth:client-assertion-type:
//                         jwt-bearer, client_assertion a JWS (RS256 or
//                         ES256) by the client's key, iss = sub = the
//                         client id (= client_id, if given), aud the token
//                         endpoint or the issuer (BASE, BASE/token, or the
//                         served metadata's; variant jwt_aud_issuer: only
//                         the served metadata's issuer, as RFC 7523bis
//                         has it), exp in the future, jti never
//                         seen before (else "jti reused"); any failure is
//                         401 invalid_client.  A jwt_clients id is a known
//                         client (any redirect_uri) that must use its key.
//                         (variant auth_methods: a method not listed is 401
//                         invalid_client "client authentication method X
//                         is not accepted".)  Grants:
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
//     client_credentials  (variant client_credentials only) needs an
//                         authenticated client (basic, post or jwt) else
//                         401 invalid_client; {access_token, token_type,
//                         expires_in, scope (default "mcp:tools")}, sub =
//                         the client id, aud = resource.  No refresh token.
//     other grant types   400 unsupported_grant_type (missing: 400
//                         invalid_request)
//   Clients: those from /register (until POST /admin/forget-clients), and
//   static-client (secret static-secret, any redirect_uri), always known.
//   (variant cimd) An http(s) URL client_id is a Client ID Metadata
//   Document client: /authorize and /token GET the URL (Accept:
//   application/json, 5 s, at most 64 KiB; counter cimd_fetches; logged as
//   {"method": "FETCH", "path": url, "status": s or 0}), which must be a
//   JSON object with client_id = the URL, client_name, a non-empty
//   redirect_uris array of strings (the authorize redirect_uri among them)
//   and token_endpoint_auth_method absent or "none"; else /authorize is
//   400 and /token 401 invalid_client.  A good document is kept for the
//   process's life; the client is public.
//
// Protected MCP server:
//   GET  /.well-known/oauth-protected-resource/mcp  RFC 9728 metadata
//   GET  /.well-known/oauth-protected-resource       the same
//                         (variant prm_at: where the document is served;
//                         any other GET path beginning with
//                         /.well-known/oauth-protected-resource is 404)
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
//                         credential was presented; variant www_rm false
//                         drops resource_metadata, www_scope sets scope,
//                         null drops it: "Bearer" alone when nothing is
//                         left).  Token scope and aud are not checked,
//                         except (variant scopes_required) a tools/call of
//                         a listed tool with a bearer token lacking one of
//                         its scopes: 403 {"error":"insufficient_scope"},
//                         WWW-Authenticate: Bearer error=
//                         "insufficient_scope", scope="<listed>",
//                         resource_metadata="<as the 401's>",
//                         error_description="additional scope required";
//                         the tool does not run; counter
//                         insufficient_scope.  A session belongs to the
//                         subject that created it: another subject gets 403
//                         {"error":"forbidden"}; an unknown session id 404.
//                         (variant get_405: every GET is 405, Allow: POST,
//                         DELETE, before any credential is looked at - a
//                         server that offers no SSE stream, as the
//                         transport allows; only a POST gets the 401.)
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
//                           absent until the first), "insufficient_scope"
//                           (403s at /mcp), "cimd_fetches" (client metadata
//                           documents fetched)}; by_auth also has "jwt"
//                           once a client assertion came
//   POST /admin/reset       zero the counters and empty the request log
//                           (tokens, clients and the variant stay)
//   GET  /admin/requests    {"requests": [{"method", "path", "status",
//                           "query": {k: v} (first values; absent without
//                           one), "form": {k: v} (/token), "json": {...}
//                           (/register), "auth": "basic"|"post"|"jwt"|
//                           "none" (/token), "basic_id" (/token with Basic
//                           credentials), "aud" (/token with a client
//                           assertion: its aud claim)}, ...]}: every request but /admin
//                           and /mcp ones, in arrival order (the last
//                           10000), with client metadata document fetches;
//                           status null while unanswered, 0 if the client
//                           left first.  Secrets (client_secret, code,
//                           code_verifier, refresh_token, subject_token,
//                           assertion, client_assertion; client_secret in
//                           json) are "*".
//   POST /admin/variant     {"prm_at": [path, ...], "as_at": [path, ...],
//                           "www_scope": s|null, "www_rm": bool, "iss": s,
//                           "scopes_required": {tool: "scope ..."},
//                           "scopes_always": bool (a server that refuses
//                           those tools even with the scopes granted),
//                           "id_jag": bool (also the enterprise IdP: a
//                           token exchange with requested_token_type
//                           ...:id-jag and an id_token subject "user-X"
//                           gives an ID-JAG for audience/resource; the
//                           jwt-bearer grant redeems one, once, for an
//                           access token of X),
//                           "client_credentials": bool, "jwt_clients":
//                           {client_id: public JWK (RSA or EC P-256), or
//                           its PEM text},
//                           "auth_methods": ["none", "client_secret_basic",
//                           "client_secret_post", "private_key_jwt"],
//                           "register_method": s, "cimd": bool,
//                           "get_405": bool, "jwt_aud_issuer": bool}, all
//                           optional: the behaviours marked (variant).
//                           Each call replaces the last; {} (or an absent
//                           field) is the default: prm_at
//                           [".../oauth-protected-resource/mcp",
//                           ".../oauth-protected-resource"], as_at
//                           [".../oauth-authorization-server"], www_scope
//                           "mcp:tools", www_rm true, iss null,
//                           scopes_required {}, scopes_always false,
//                           client_credentials false,
//                           jwt_clients {}, auth_methods all four,
//                           register_method null, cimd false, get_405
//                           false, jwt_aud_issuer false.  Answers the
//                           whole variant; an unknown field or bad value
//                           is 400.
//   POST /admin/forget-clients  every client from /register forgotten
//                           (401 invalid_client "unknown client" from then
//                           on; their codes and refresh tokens stay, of no
//                           use): {"forgotten": n}
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
//                           go on as usual; counter "held" counts them,
//                           and "gone" the held /token requests whose
//                           client went away meanwhile (dropped unseen:
//                           a refresh token they carried stays unspent)
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
//                           [...], "id_jags": [...]}: every secret handed
//                           out so far, for
//                           tests that look for leaks
//
// Tools:
//   whoami {}             text = the request's subject (read-only)
//   echo {message}        text = message
//   slow {ms}             "done" after ms milliseconds (read-only)
//   counted_destructive, counted_idempotent, counted_readonly,
//   counted_none {}       bump their own counter, answer its new value
//                         (annotations as in inject.mjs; per process)
import {
	createHash, createPublicKey, randomBytes, randomUUID, verify,
} from 'node:crypto';
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
const GRANT_CLIENT = 'client_credentials';
const GRANT_JWT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const TYPE_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const TYPE_ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';
const PROFILE_ID_JAG = 'urn:ietf:params:oauth:grant-profile:id-jag';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const LOG_MAX = 10000;
const CIMD_MAX = 64 * 1024;
const CIMD_TIMEOUT_MS = 5000;
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
		insufficient_scope: 0,
		cimd_fetches: 0,
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

// ---- request log (GET /admin/requests) ----

// Every request but /admin and /mcp ones, in arrival order, and every
// client metadata document fetch; the oldest dropped past LOG_MAX.
let requestLog = [];
const logOf = new WeakMap(); // req -> its entry
const SECRET_KEYS = ['client_secret', 'code', 'code_verifier', 'refresh_token',
	'subject_token', 'assertion', 'client_assertion'];

function logPush(entry) {
	requestLog.push(entry);
	if (requestLog.length > LOG_MAX) {
		requestLog.splice(0, requestLog.length - LOG_MAX);
	}
	return entry;
}

// A copy of params with the values of the keys (secrets) replaced by "*".
function redacted(params, keys = SECRET_KEYS) {
	const o = {};
	for (const [k, v] of Object.entries(params)) {
		o[k] = keys.includes(k) ? '*' : v;
	}
	return o;
}

// Starts the entry of a request: status null until it is answered (0 when
// the connection closed first).
function logRequest(req, res, url) {
	const entry = { method: req.method, path: url.pathname, status: null };
	const query = {};
	for (const [k, v] of url.searchParams) {
		if (!Object.hasOwn(query, k)) {
			query[k] = v;
		}
	}
	if (Object.keys(query).length > 0) {
		entry.query = redacted(query);
	}
	logOf.set(req, logPush(entry));
	res.on('finish', () => {
		entry.status = res.statusCode;
	});
	res.on('close', () => {
		if (entry.status === null) {
			entry.status = 0;
		}
	});
}

// ---- POST /admin/variant ----

const DEFAULT_PRM_AT = ['/.well-known/oauth-protected-resource/mcp',
	'/.well-known/oauth-protected-resource'];
const DEFAULT_AS_AT = ['/.well-known/oauth-authorization-server'];
// authMethodOf() -> the RFC 7591 name of the method
const METHOD_NAME = {
	none: 'none',
	basic: 'client_secret_basic',
	post: 'client_secret_post',
	jwt: 'private_key_jwt',
};

function defaultVariant() {
	return {
		prm_at: DEFAULT_PRM_AT,
		as_at: DEFAULT_AS_AT,
		www_scope: DEFAULT_SCOPE,
		www_rm: true,
		iss: null,
		scopes_required: {},
		scopes_always: false,
		client_credentials: false,
		id_jag: false,
		jwt_clients: {},
		auth_methods: Object.values(METHOD_NAME),
		register_method: null,
		cimd: false,
		get_405: false,
		jwt_aud_issuer: false,
	};
}

let variant = defaultVariant();
let jwtKeys = new Map(); // client id -> public KeyObject, from jwt_clients

// The variant a POST /admin/variant body asks for (fields absent: their
// defaults) and the keys of its jwt_clients; 400 on a bad field.
function parseVariant(b) {
	const v = defaultVariant();
	const keys = new Map();
	const bad = (d) => oauthError(400, 'invalid_request', d);
	const isObject = (o) => o !== null && typeof o === 'object' &&
		!Array.isArray(o);
	const strings = (k) => {
		if (!Array.isArray(b[k]) || !b[k].every((s) => typeof s === 'string')) {
			throw bad(`${k} must be an array of strings`);
		}
		return b[k];
	};
	const bool = (k) => {
		if (typeof b[k] !== 'boolean') {
			throw bad(`${k} must be a boolean`);
		}
		return b[k];
	};
	const stringOrNull = (k) => {
		if (b[k] !== null && typeof b[k] !== 'string') {
			throw bad(`${k} must be a string or null`);
		}
		return b[k];
	};
	for (const k of Object.keys(b)) {
		if (!Object.hasOwn(v, k)) {
			throw bad(`unknown variant field ${k}`);
		}
	}
	if (b.prm_at !== undefined) {
		v.prm_at = strings('prm_at');
	}
	if (b.as_at !== undefined) {
		v.as_at = strings('as_at');
	}
	if (b.www_scope !== undefined) {
		v.www_scope = stringOrNull('www_scope');
	}
	if (b.www_rm !== undefined) {
		v.www_rm = bool('www_rm');
	}
	if (b.iss !== undefined) {
		v.iss = stringOrNull('iss');
	}
	if (b.scopes_required !== undefined) {
		if (!isObject(b.scopes_required) || !Object.values(b.scopes_required)
			.every((s) => typeof s === 'string')) {
			throw bad('scopes_required must be an object of strings');
		}
		v.scopes_required = b.scopes_required;
	}
	if (b.scopes_always !== undefined) {
		v.scopes_always = bool('scopes_always');
	}
	if (b.id_jag !== undefined) {
		v.id_jag = bool('id_jag');
	}
	if (b.client_credentials !== undefined) {
		v.client_credentials = bool('client_credentials');
	}
	if (b.jwt_clients !== undefined) {
		if (!isObject(b.jwt_clients)) {
			throw bad('jwt_clients must be an object');
		}
		for (const [id, jwk] of Object.entries(b.jwt_clients)) {
			let key;
			try {
				key = typeof jwk === 'string' ? createPublicKey(jwk) :
					createPublicKey({ key: jwk, format: 'jwk' });
			} catch (e) {
				throw bad(`jwt_clients.${id}: not a usable JWK (${e.message})`);
			}
			if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') {
				throw bad(`jwt_clients.${id}: not an RSA or EC key`);
			}
			keys.set(id, key);
		}
		v.jwt_clients = b.jwt_clients;
	}
	if (b.auth_methods !== undefined) {
		v.auth_methods = strings('auth_methods');
		const unknown = v.auth_methods.find((m) =>
			!Object.values(METHOD_NAME).includes(m));
		if (unknown !== undefined) {
			throw bad(`unknown auth method ${unknown}`);
		}
	}
	if (b.register_method !== undefined) {
		v.register_method = stringOrNull('register_method');
	}
	if (b.cimd !== undefined) {
		v.cimd = bool('cimd');
	}
	if (b.get_405 !== undefined) {
		v.get_405 = bool('get_405');
	}
	if (b.jwt_aud_issuer !== undefined) {
		v.jwt_aud_issuer = bool('jwt_aud_issuer');
	}
	return { v, keys };
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
	const doc = {
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
	if (variant.client_credentials) {
		doc.grant_types_supported.push(GRANT_CLIENT);
	}
	if (jwtKeys.size > 0) {
		doc.token_endpoint_auth_methods_supported.push('private_key_jwt');
		doc.token_endpoint_auth_signing_alg_values_supported = ['RS256', 'ES256'];
	}
	if (variant.cimd) {
		doc.client_id_metadata_document_supported = true;
	}
	if (variant.id_jag) {
		doc.grant_types_supported.push(GRANT_JWT);
		doc.authorization_grant_profiles_supported = [PROFILE_ID_JAG];
	}
	return doc;
}

function resourceMetadata() {
	return {
		resource: `${BASE}/mcp`,
		authorization_servers: [BASE],
		scopes_supported: ['mcp:tools'],
		bearer_methods_supported: ['header'],
	};
}

// A path some metadata document could be looked for at (RFC 8414 and
// 9728 well-known paths, with or without a suffix, and OpenID ones).
function isMetadataPath(path) {
	return path.startsWith('/.well-known/oauth-protected-resource') ||
		path.startsWith('/.well-known/oauth-authorization-server') ||
		path.startsWith('/.well-known/openid-configuration') ||
		path.endsWith('/.well-known/openid-configuration');
}

// A GET of a path in variant.prm_at or as_at serves that document; of
// another metadata path, 404.  False (nothing answered) for other paths.
function wellKnown(req, res, path) {
	let doc = null;
	if (variant.prm_at.includes(path)) {
		doc = 'prm';
	} else if (variant.as_at.includes(path)) {
		doc = 'as';
	} else if (!isMetadataPath(path)) {
		return false;
	}
	req.resume();
	if (doc === null) {
		sendJson(res, 404, { error: 'not found' });
	} else {
		sendMetadata(res, doc,
			doc === 'prm' ? resourceMetadata() : authServerMetadata());
	}
	return true;
}

function findClient(id) {
	if (id === STATIC_CLIENT.client_id) {
		return STATIC_CLIENT;
	}
	return clients.get(id);
}

function isUrlClientId(id) {
	try {
		const u = new URL(id);
		return u.protocol === 'http:' || u.protocol === 'https:';
	} catch {
		return false;
	}
}

// The client named id, or undefined: the static client, a registered one,
// one of variant.jwt_clients (any redirect_uri, no secret), or, with
// variant.cimd, the Client ID Metadata Document client of a URL id (a bad
// document throws invalid_client with status).
async function resolveClient(id, status) {
	const c = findClient(id);
	if (c !== undefined) {
		return c;
	}
	if (jwtKeys.has(id)) {
		return { client_id: id, redirect_uris: null,
			token_endpoint_auth_method: 'private_key_jwt' };
	}
	if (variant.cimd && isUrlClientId(id)) {
		return cimdClient(id, status);
	}
	return undefined;
}

// Client ID Metadata Document clients, by URL, once fetched and valid.
const cimdCache = new Map();

// The body of a fetch response as text; throws past max bytes.
async function readLimited(body, max, fail) {
	const chunks = [];
	let size = 0;
	if (body === null) {
		return '';
	}
	for await (const c of body) {
		size += c.length;
		if (size > max) {
			throw fail(`larger than ${max} bytes`);
		}
		chunks.push(c);
	}
	return Buffer.concat(chunks).toString();
}

async function cimdClient(url, status) {
	const cached = cimdCache.get(url);
	if (cached !== undefined) {
		return cached;
	}
	const fail = (d) => oauthError(status, 'invalid_client',
		`client metadata document ${url}: ${d}`);
	counters.cimd_fetches++;
	const entry = logPush({ method: 'FETCH', path: url, status: 0 });
	let text;
	try {
		const r = await fetch(url, {
			headers: { Accept: 'application/json' },
			redirect: 'manual',
			signal: AbortSignal.timeout(CIMD_TIMEOUT_MS),
		});
		entry.status = r.status;
		if (r.status < 200 || r.status > 299) {
			await r.body?.cancel();
			throw fail(`status ${r.status}`);
		}
		text = await readLimited(r.body, CIMD_MAX, fail);
	} catch (e) {
		if (e instanceof HttpError) {
			throw e;
		}
		throw fail(e?.name === 'TimeoutError' ? 'timed out' :
			`fetch failed (${e?.cause?.code ?? e?.cause?.errors?.[0]?.code ??
				e?.cause?.message ?? e?.message ?? e})`);
	}
	let doc;
	try {
		doc = JSON.parse(text);
	} catch {
		throw fail('not JSON');
	}
	if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
		throw fail('not a JSON object');
	}
	if (doc.client_id !== url) {
		throw fail('client_id is not the document\'s URL');
	}
	if (typeof doc.client_name !== 'string') {
		throw fail('client_name missing');
	}
	const uris = doc.redirect_uris;
	if (!Array.isArray(uris) || uris.length === 0 ||
	    !uris.every((u) => typeof u === 'string')) {
		throw fail('redirect_uris must be a non-empty array of strings');
	}
	const method = doc.token_endpoint_auth_method ?? 'none';
	if (method !== 'none') {
		throw fail(`token_endpoint_auth_method ${String(method)} not supported`);
	}
	const client = {
		client_id: url,
		client_name: doc.client_name,
		redirect_uris: uris,
		token_endpoint_auth_method: 'none',
		cimd: true,
	};
	cimdCache.set(url, client);
	return client;
}

const AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post'];

async function onRegister(req, res) {
	const body = await readJsonObject(req);
	logOf.get(req).json = redacted(body, ['client_secret']);
	const uris = body.redirect_uris;
	if (!Array.isArray(uris) || uris.length === 0 ||
	    !uris.every((u) => typeof u === 'string' && URL.canParse(u))) {
		throw oauthError(400, 'invalid_redirect_uri',
			'redirect_uris must be a non-empty array of URLs');
	}
	const method = variant.register_method ??
		body.token_endpoint_auth_method ?? 'none';
	if (variant.register_method === null && !AUTH_METHODS.includes(method)) {
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

async function onAuthorize(req, res, url) {
	counters.authorize++;
	const q = url.searchParams;
	const get = (k) => q.get(k) ?? undefined;
	const bad = (d) => oauthError(400, 'invalid_request', d);

	if (get('resource') !== undefined) {
		counters.resource_seen = get('resource');
	}
	const clientId = get('client_id');
	const client = clientId === undefined ? undefined :
		await resolveClient(clientId, 400);
	if (client === undefined) {
		throw bad('unknown client_id');
	}
	const redirectUri = get('redirect_uri');
	if (redirectUri === undefined || !URL.canParse(redirectUri)) {
		throw bad('redirect_uri missing or not a URL');
	}
	if (client.redirect_uris !== null &&
	    !client.redirect_uris.includes(redirectUri)) {
		if (client.cimd) {
			throw oauthError(400, 'invalid_client',
				'redirect_uri not in the client metadata document');
		}
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
	if (variant.iss !== null) {
		to.searchParams.append('iss', variant.iss);
	}
	res.writeHead(302, { Location: to.href, 'Content-Length': 0 });
	res.end();
}

// Which client auth the request uses: "basic", "post", "jwt" (RFC 7523
// client assertion) or "none".
function authMethodOf(req, params) {
	if (/^basic /i.test(req.headers.authorization ?? '')) {
		return 'basic';
	}
	if (params.client_secret !== undefined) {
		return 'post';
	}
	if (params.client_assertion_type === JWT_BEARER) {
		return 'jwt';
	}
	return 'none';
}

// The client id of a request's Basic credentials, or undefined.
function basicId(req) {
	const m = /^basic +(\S*)/i.exec(req.headers.authorization ?? '');
	if (m === null) {
		return undefined;
	}
	const raw = Buffer.from(m[1], 'base64').toString();
	const colon = raw.indexOf(':');
	try {
		return colon < 0 ? undefined : formDecode(raw.slice(0, colon));
	} catch {
		return undefined;
	}
}

function formDecode(s) {
	return decodeURIComponent(s.replace(/\+/g, ' '));
}

// jti values of the client assertions accepted so far (replays refused).
const seenJti = new Set();

function b64json(s) {
	return JSON.parse(Buffer.from(s, 'base64url').toString());
}

// Checks a private_key_jwt client assertion (RFC 7523 2.2) against the
// key in variant.jwt_clients; answers the client id or throws invalid().
function verifyAssertion(req, params, invalid) {
	const jwt = params.client_assertion;
	if (typeof jwt !== 'string' || jwt === '') {
		throw invalid('client_assertion missing');
	}
	const parts = jwt.split('.');
	let header;
	let claims;
	try {
		if (parts.length !== 3) {
			throw new Error();
		}
		header = b64json(parts[0]);
		claims = b64json(parts[1]);
		if (header === null || typeof header !== 'object' ||
		    claims === null || typeof claims !== 'object') {
			throw new Error();
		}
	} catch {
		throw invalid('client_assertion is not a JWS');
	}
	const id = params.client_id ?? claims.sub;
	if (typeof id !== 'string') {
		throw invalid('client_assertion has no sub');
	}
	const key = jwtKeys.get(id);
	if (key === undefined) {
		throw invalid(`no public key for client ${id}`);
	}
	const alg = header.alg;
	const fits = (alg === 'RS256' && key.asymmetricKeyType === 'rsa') ||
		(alg === 'ES256' && key.asymmetricKeyType === 'ec' &&
		 key.asymmetricKeyDetails?.namedCurve === 'prime256v1');
	if (!fits) {
		throw invalid(`alg ${String(alg)} does not fit the client's key`);
	}
	let ok = false;
	try {
		ok = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`),
			alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' } : key,
			Buffer.from(parts[2], 'base64url'));
	} catch {
		ok = false;
	}
	if (!ok) {
		throw invalid('client_assertion signature does not verify');
	}
	if (claims.iss !== id || claims.sub !== id) {
		throw invalid('iss and sub must be the client id');
	}
	const as = overridden('as', authServerMetadata());
	const audiences = variant.jwt_aud_issuer ? [as.issuer] :
		[BASE, `${BASE}/token`, as.issuer, as.token_endpoint];
	const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
	if (logOf.has(req)) {
		logOf.get(req).aud = claims.aud;
	}
	if (!aud.some((a) => typeof a === 'string' && audiences.includes(a))) {
		throw invalid(variant.jwt_aud_issuer ? 'aud is not the issuer' :
			'aud is neither the token endpoint nor the issuer');
	}
	if (typeof claims.exp !== 'number') {
		throw invalid('exp missing');
	}
	if (claims.exp * 1000 <= Date.now()) {
		throw invalid('client_assertion expired');
	}
	if (typeof claims.jti !== 'string' || claims.jti === '') {
		throw invalid('jti missing');
	}
	if (seenJti.has(claims.jti)) {
		throw invalid('jti reused');
	}
	seenJti.add(claims.jti);
	return id;
}

// The client behind a /token request: {method, client} (client null when
// the request names none).  Throws 401 invalid_client on a method that
// variant.auth_methods leaves out, a bad secret or client assertion, an
// unknown client, or a client with a secret (or a jwt_clients key) that
// did not present it.
async function authenticateClient(req, params, method) {
	const invalid = (d) => oauthError(401, 'invalid_client', d,
		method === 'basic' ? { 'WWW-Authenticate': 'Basic realm="oauth"' } : {});
	if (!variant.auth_methods.includes(METHOD_NAME[method])) {
		throw invalid(`client authentication method ${METHOD_NAME[method]}` +
			' is not accepted');
	}
	let id;
	let secret;
	if (method !== 'jwt' && method !== 'none' &&
	    params.client_assertion_type === JWT_BEARER) {
		throw oauthError(400, 'invalid_request',
			'more than one client authentication method');
	}
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
	} else if (method === 'jwt') {
		id = verifyAssertion(req, params, invalid);
	} else {
		id = params.client_id;
		if (id === undefined) {
			return { method, client: null };
		}
	}
	const client = await resolveClient(id, 401);
	if (client === undefined) {
		throw invalid('unknown client');
	}
	if (method === 'jwt') {
		return { method, client };
	}
	if (secret === undefined && jwtKeys.has(id)) {
		throw invalid('client authentication required');
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

// ID-JAGs issued (variant id_jag): jti -> claims, each redeemable once.
const idJags = new Map();

// As the enterprise IdP (variant id_jag): an ID token ("user-<name>",
// as for access tokens) exchanged for an ID-JAG (the MCP extension
// "Enterprise-Managed Authorization", section 4): a JWT of type
// oauth-id-jag+jwt for audience (the resource AS's issuer) and resource.
async function grantIdJag(params, client) {
	if (params.subject_token_type !== TYPE_ID_TOKEN) {
		throw oauthError(400, 'invalid_request',
			`subject_token_type must be ${TYPE_ID_TOKEN}`);
	}
	if (!params.subject_token || params.subject_token.startsWith('bad')) {
		throw oauthError(400, 'invalid_grant', 'subject token rejected');
	}
	if (params.audience === undefined) {
		throw oauthError(400, 'invalid_request', 'audience missing');
	}
	const now = Math.floor(Date.now() / 1000);
	const claims = {
		jti: randomUUID(),
		iss: BASE,
		sub: params.subject_token.replace(/^user-/, ''),
		aud: params.audience,
		resource: params.resource,
		client_id: client.client_id,
		scope: params.scope ?? DEFAULT_SCOPE,
		iat: now,
		exp: now + 300,
	};
	const jag = await issuer.buildToken({
		expiresIn: 300,
		scopesOrTransform: (header, payload) => {
			header.typ = 'oauth-id-jag+jwt';
			Object.assign(payload, claims);
		},
	});
	idJags.set(claims.jti, { ...claims, used: false, jag });
	return {
		issued_token_type: TYPE_ID_JAG,
		access_token: jag,
		token_type: 'N_A',
		scope: claims.scope,
		expires_in: 300,
	};
}

// As the MCP server's AS (variant id_jag): the ID-JAG as a JWT
// authorization grant (RFC 7523 section 2.1; the extension's section 5):
// issued here, unexpired, for this issuer, used once.
async function grantJwtBearer(params, client) {
	const found = [...idJags.values()].find((j) => j.jag === params.assertion);
	if (found === undefined) {
		throw oauthError(400, 'invalid_grant', 'unknown assertion');
	}
	if (found.used) {
		throw oauthError(400, 'invalid_grant', 'assertion already used');
	}
	if (found.aud !== BASE || found.exp <= Math.floor(Date.now() / 1000)) {
		throw oauthError(400, 'invalid_grant', 'assertion not for this issuer, or expired');
	}
	if (client !== null && found.client_id !== client.client_id) {
		throw oauthError(400, 'invalid_grant', 'assertion issued to another client');
	}
	found.used = true;
	const { token, lifetime } = await mintAccessToken({
		sub: found.sub,
		scope: found.scope,
		aud: found.resource,
		clientId: found.client_id,
	});
	return {
		access_token: token,
		token_type: 'Bearer',
		expires_in: lifetime,
		scope: found.scope,
	};
}

async function grantExchange(params, client, method) {
	counters.last_exchange = {
		audience: params.audience ?? null,
		scope: params.scope ?? null,
		resource: params.resource ?? null,
		requested_token_type: params.requested_token_type ?? null,
	};
	if (client === null || method === 'none') {
		throw oauthError(401, 'invalid_client',
			'token exchange needs client authentication');
	}
	if (variant.id_jag && params.requested_token_type === TYPE_ID_JAG) {
		return grantIdJag(params, client);
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

async function grantClientCredentials(params, client, method) {
	if (client === null || method === 'none') {
		throw oauthError(401, 'invalid_client',
			'client credentials need client authentication');
	}
	const scope = params.scope ?? DEFAULT_SCOPE;
	const { token, lifetime } = await mintAccessToken({
		sub: client.client_id,
		scope,
		aud: params.resource,
		clientId: client.client_id,
	});
	return {
		access_token: token,
		token_type: 'Bearer',
		expires_in: lifetime,
		scope,
	};
}

async function onToken(req, res) {
	const noStore = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
	counters.token_requests++;
	const params = await readForm(req);
	const grant = params.grant_type;
	const method = authMethodOf(req, params);
	const entry = logOf.get(req);
	entry.form = redacted(params);
	entry.auth = method;
	if (method === 'basic' && basicId(req) !== undefined) {
		entry.basic_id = basicId(req);
	}
	if (grant !== undefined) {
		counters.by_grant[grant] = (counters.by_grant[grant] ?? 0) + 1;
	}
	if (grant === GRANT_REFRESH) {
		// refresh_at: when each refresh came, to measure their spacing
		(counters.refresh_at ??= []).push(Date.now());
	}
	counters.by_auth[method] = (counters.by_auth[method] ?? 0) + 1;
	if (params.resource !== undefined) {
		counters.resource_seen = params.resource;
	}

	if (tokenDelayMs > 0) {
		await sleep(tokenDelayMs);
	}
	if (hold.grant !== null && hold.grant === grant) {
		await holdHere();
		if (req.socket.destroyed) {
			// its client went away meanwhile (a node killed): nothing
			// is spent, nothing issued
			counters.gone = (counters.gone ?? 0) + 1;
			return;
		}
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
	const grants = [GRANT_CODE, GRANT_REFRESH, GRANT_EXCHANGE];
	if (variant.client_credentials) {
		grants.push(GRANT_CLIENT);
	}
	if (variant.id_jag) {
		grants.push(GRANT_JWT);
	}
	if (!grants.includes(grant)) {
		throw oauthError(400, 'unsupported_grant_type', undefined, noStore);
	}
	const { client } = await authenticateClient(req, params, method);
	let body;
	if (grant === GRANT_CODE) {
		body = await grantCode(params, client);
	} else if (grant === GRANT_REFRESH) {
		body = await grantRefresh(params, client);
	} else if (grant === GRANT_CLIENT) {
		body = await grantClientCredentials(params, client, method);
	} else if (grant === GRANT_JWT) {
		body = await grantJwtBearer(params, client);
	} else {
		body = await grantExchange(params, client, method);
	}
	sendJson(res, 200, body, noStore);
}

// ---- protected MCP server ----

// The subject of a request's credential: {sub} (+ scope, the granted
// scope of a bearer token) or {error: "missing" | "invalid"}.  headers: lower-case names (node or Fetch headers alike).
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
		return { sub: t.sub, scope: t.scope };
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

// The resource_metadata URL of the challenges.
function resourceMetadataUrl() {
	return metaOverride.www ??
		`${BASE}/.well-known/oauth-protected-resource/mcp`;
}

function unauthorized(res, presented) {
	counters.mcp_unauthorized++;
	const params = [];
	if (variant.www_rm) {
		params.push(`resource_metadata="${resourceMetadataUrl()}"`);
	}
	if (variant.www_scope !== null) {
		params.push(`scope="${variant.www_scope}"`);
	}
	if (presented) {
		params.push('error="invalid_token"');
	}
	const challenge = params.length === 0 ? 'Bearer' :
		`Bearer ${params.join(', ')}`;
	sendJson(res, 401, { error: 'invalid_token' },
		{ 'WWW-Authenticate': challenge });
}

// The scopes variant.scopes_required lists for the first tools/call in
// body (a JSON-RPC message or batch) that scope (space-separated) lacks
// one of, or null.
function stepUpScope(body, scope) {
	const granted = new Set(scope.split(/\s+/).filter(Boolean));
	for (const m of Array.isArray(body) ? body : [body]) {
		const name = m?.method === 'tools/call' ? m.params?.name : undefined;
		if (typeof name !== 'string' ||
		    !Object.hasOwn(variant.scopes_required, name)) {
			continue;
		}
		const listed = variant.scopes_required[name];
		if (variant.scopes_always ||
		    listed.split(/\s+/).filter(Boolean).some((s) => !granted.has(s))) {
			return listed;
		}
	}
	return null;
}

function insufficientScope(res, scope) {
	counters.insufficient_scope++;
	sendJson(res, 403, { error: 'insufficient_scope' }, {
		'WWW-Authenticate': 'Bearer error="insufficient_scope", ' +
			`scope="${scope}", resource_metadata="${resourceMetadataUrl()}", ` +
			'error_description="additional scope required"',
	});
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
		annotations: { readOnlyHint: true },
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
	if (variant.get_405 && req.method === 'GET') {
		req.resume();
		sendJson(res, 405, { error: 'method not allowed' },
			{ Allow: 'POST, DELETE' });
		return;
	}
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
	// A bearer token's scope is checked against variant.scopes_required
	// before the request reaches the transport (which then gets the body
	// parsed).
	const stepUp = req.method === 'POST' && who.scope !== undefined &&
		Object.keys(variant.scopes_required).length > 0;
	if (req.method === 'POST' && (hold.mcp !== null || stepUp)) {
		const raw = await readBody(req);
		try {
			body = JSON.parse(raw);
		} catch (e) {
			if (hold.mcp !== null) {
				throw e; // 500, as ever
			}
			rpcError(res, 400, -32700, 'Parse error: Invalid JSON');
			return;
		}
		if (stepUp) {
			const need = stepUpScope(body, String(who.scope ?? ''));
			if (need !== null) {
				insufficientScope(res, need);
				return;
			}
		}
		if (hold.mcp !== null && body?.method === hold.mcp) {
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
			id_jags: [...idJags.values()].map((j) => j.jag),
		});
	} else if (route === 'POST /admin/reset') {
		await readBody(req);
		counters = zeroCounters();
		requestLog = [];
		sendJson(res, 200, { reset: true });
	} else if (route === 'GET /admin/requests') {
		sendJson(res, 200, { requests: requestLog });
	} else if (route === 'POST /admin/variant') {
		const { v, keys } = parseVariant(await readJsonObject(req));
		variant = v;
		jwtKeys = keys;
		sendJson(res, 200, variant);
	} else if (route === 'POST /admin/forget-clients') {
		await readBody(req);
		const n = clients.size;
		clients.clear();
		sendJson(res, 200, { forgotten: n });
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

// path -> {method: handler}.  Metadata GETs go by the variant (prm_at,
// as_at: wellKnown()); these entries give other methods their 405.
const metadataGet = (req, res, url) => wellKnown(req, res, url.pathname);
const routes = {
	'/.well-known/oauth-authorization-server': { GET: metadataGet },
	'/.well-known/oauth-protected-resource/mcp': { GET: metadataGet },
	'/.well-known/oauth-protected-resource': { GET: metadataGet },
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
		if (path !== '/mcp') {
			logRequest(req, res, url);
		}
		const methods = routes[path];
		if (methods === undefined) {
			if (req.method === 'GET' && wellKnown(req, res, path)) {
				return;
			}
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
