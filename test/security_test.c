/*
 * security_test.c - `mcpkeep serve` attacked: each finding of the
 * security review reproduced against the built daemon over real HTTP,
 * and seen refused or bounded:
 *   browser     a web page on another origin (real Chromium) posts a
 *               stdio client by form, by text/plain fetch, by CORS fetch
 *               and through DNS rebinding: nothing is created or run;
 *   xss         a javascript: authorization_endpoint from metadata is
 *               refused at discovery; the page opens nothing, runs no
 *               injected script (Chromium);
 *   keys        tool calls need a virtual key where keys are configured
 *               (or the address is not loopback); a key reaches its
 *               clients and tools only, its name is the identity unless
 *               it trusts the identity headers, it never opens the admin
 *               API, and no key value reaches the log;
 *   flow_binding  a header session is its caller's: another key's path
 *               or another identity is 404, and the session stays;
 *   stream_rotation  a SIGHUP that rotates the admin token or drops a
 *               key ends the event streams they opened;
 *   stream_lanes  one key's event streams are bounded: the admin and
 *               other keys still open theirs;
 *   callback_lane  hung anonymous OAuth callbacks hold their own lane,
 *               not the admin API's;
 *   env         env. in an API body is literal: no variable is sent or
 *               told apart;
 *   bodies      40 bodies of 16 MiB (sized and chunked) are refused
 *               with 413 and the daemon's memory stays bounded;
 *   idle        10,000 idle connections from one address hold at most
 *               its cap of descriptors and the API still answers; an
 *               idle connection is closed after --idle-timeout;
 *   hanging     64 tool calls that never end leave the admin API
 *               answering;
 *   framing     a chunked body is read as the body, never as the next
 *               request; Content-Length with Transfer-Encoding, two
 *               Content-Lengths, a transfer coding but chunked are
 *               refused and the connection closed, so that nothing
 *               hidden in the body runs; headers past the memory cap are
 *               431;
 *   stdio_lookup  without an admin token no stdio client is changed
 *               through the API, found by name or id among 101 clients;
 *   small       a public state-stream address needs stream_public,
 *               /metrics its token, and "127.x" that is a host name is
 *               not loopback.
 * The MCP server is test/peers/inject.mjs.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "svutil.h"
#include "testutil.h"

#define KEY_A "vk-alpha-0123456789abcdef"
#define KEY_B "vk-beta-fedcba9876543210"

static peer mcp; /* inject.mjs */

/* The daemon's resident memory (field "VmRSS:" or "VmHWM:"), in KiB. */
static long
proc_kib(pid_t pid, const char *field)
{
	char  path[64], line[256];
	long  kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	CHECK((f = fopen(path, "r")) != NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, field, strlen(field)) == 0) {
			kib = strtol(line + strlen(field), NULL, 10);
		}
	}
	fclose(f);
	return (kib);
}

/* The daemon's open descriptors. */
static int
proc_fds(pid_t pid)
{
	char           path[64];
	DIR           *d;
	struct dirent *e;
	int            n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	CHECK((d = opendir(path)) != NULL);
	while ((e = readdir(d)) != NULL) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return (n);
}

/* A TCP port free on every address a moment ago (the stream's wildcard
 * listener needs one: peer_free_port checks 127.0.0.1 only). */
static int
wildcard_port(void)
{
	struct sockaddr_in a   = {.sin_family = AF_INET};
	socklen_t          len = sizeof(a);
	int                s   = socket(AF_INET, SOCK_STREAM, 0), port;

	CHECK(s >= 0);
	CHECK_EQ(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(getsockname(s, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(s);
	return (port);
}

/* The daemon refuses to start on config (listen addr), saying want. */
static void
refuses(const char *name, const char *config, const char *listen,
        const char *want)
{
	char path[128], cmd[1024];

	write_config(name, config);
	snprintf(path, sizeof(path), "%s/%s", sv_dir, name);
	snprintf(
	        cmd, sizeof(cmd),
	        "env -u MCPKEEP_ADMIN_TOKEN timeout 30 %s serve -c %s --listen %s > %s/%s.out 2>&1; test $? -eq 1 && grep -qF '%s' %s/%s.out",
	        getenv("MK_MCPKEEP"), path, listen, sv_dir, name, want, sv_dir,
	        name);
	if (system(cmd) != 0) {
		snprintf(cmd, sizeof(cmd), "cat %s/%s.out >&2", sv_dir, name);
		(void)system(cmd);
		CHECK(0);
	}
}

/* ---- a web page attacks ------------------------------------------------- */

static void
browser(void)
{
	peer        d = {0}, b = {0};
	char        js[512], marker[256];
	const char *env[] = {"MCPKEEP_LOG=debug", NULL};

	snprintf(marker, sizeof(marker), "%s/pwned", sv_dir);
	/* the default: loopback, no admin token, no keys */
	serve(&d, "browser.json", "{\"mcp\": {\"client_configs\": []}}", env);
	snprintf(js, sizeof(js), "%s/attack.mjs", peer_dir());
	const char *argv[] = {"node", js, sv_base, marker, NULL};
	CHECK_EQ(peer_start(&b, argv, NULL, "attack done ([0-9]+)", 120000),
	         0);
	CHECK(peer_wait_exit(&b, 30000));
	peer_stop(&b);
	CHECK(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0);
	/* what the page saw: the rebound POST refused by Host, the CORS
	 * one blocked at its preflight */
	CHECK(peer_said(&b, "result form 403"));
	CHECK(peer_said(&b, "result rebind 421 "));
	CHECK(peer_said(&b, "result cors blocked TypeError"));
	CHECK(peer_said(&b, "result nocors "));
	/* nothing was made, nothing ran */
	const char *names[] = {"pwn_form", "pwn_nocors", "pwn_cors",
	                       "pwn_rebind"};
	for (size_t i = 0; i < 4; i++) {
		CHECK(!listed(names[i]));
	}
	CHECK(access(marker, F_OK) != 0);
	peer_stop(&d);
	/* each refused before its body was read: the form, the no-cors
	 * fetch and the preflight by Origin, the rebound by Host */
	CHECK(peer_said(&d, "http: POST /api/mcp/client 403 "));
	CHECK(peer_said(&d, "http: OPTIONS /api/mcp/client 403 "));
	CHECK(peer_said(&d, "http: POST /api/mcp/client 421 "));
	CHECK(!peer_said(&d, "POST /api/mcp/client 201"));

	/* the same requests without a browser: no Origin, a form type */
	serve(&d, "browser2.json", "{\"mcp\": {\"client_configs\": []}}",
	      NULL);
	const char *form[] = {"Content-Type: text/plain", NULL};
	char        body[512];
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"pwn_plain\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"echo pwned > %s\"]}}",
	        marker);
	long  st;
	char *out = http_req("POST", "/api/mcp/client", body, form, &st);
	CHECK_EQ(st, 415);
	CHECK(strstr(out, "needs Content-Type: application/json") != NULL);
	free(out);
	/* JSON, but no admin token: a stdio client only from config.json */
	expect("POST", "/api/mcp/client", body, NULL, 403,
	       "stdio clients are made and changed only in config.json while the daemon has no admin token");
	const char *host[] = {"Host: rebind.test:80", NULL};
	out = http_req("GET", "/api/mcp/clients", NULL, host, &st);
	CHECK_EQ(st, 421);
	free(out);
	const char *origin[] = {"Origin: http://attacker.test", NULL};
	out = http_req("GET", "/api/mcp/clients", NULL, origin, &st);
	CHECK_EQ(st, 403);
	free(out);
	CHECK(!listed("pwn_plain"));
	CHECK(access(marker, F_OK) != 0);
	peer_stop(&d);
}

/* An allowed origin (a name in front of the daemon) passes Origin and
 * Host; the page's own origin passes; its CSP allows no inline code but
 * its own. */
static void
origins(void)
{
	peer d = {0};
	char config[256];
	long st;

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": []}, \"server\": {\"allowed_origins\": [\"https://gw.example:8443\"]}}");
	serve(&d, "origins.json", config, NULL);
	const char *ok[] = {"Origin: https://gw.example:8443",
	                    "Host: gw.example:8443", NULL};
	free(http_req("GET", "/api/mcp/clients", NULL, ok, &st));
	CHECK_EQ(st, 200);
	char own[128], host[128];
	snprintf(own, sizeof(own), "Origin: %s", sv_base);
	snprintf(host, sizeof(host), "Host: %s", sv_base + 7);
	const char *self[] = {own, host, NULL};
	free(http_req("POST", "/api/mcp/client/nope/reconnect", "{}", self,
	              &st));
	CHECK_EQ(st, 404); /* (passed: no such client) */
	const char *other[] = {"Origin: https://gw.example:9999", NULL};
	free(http_req("GET", "/api/mcp/clients", NULL, other, &st));
	CHECK_EQ(st, 403);
	/* the page: a strict policy, its script by hash */
	CURL  *e   = curl_easy_init();
	char  *hdr = NULL, url[128];
	size_t len = 0;
	FILE  *mem = open_memstream(&hdr, &len);
	snprintf(url, sizeof(url), "%s/", sv_base);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, mem);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, fopen("/dev/null", "w"));
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_cleanup(e);
	fclose(mem);
	CHECK(strstr(hdr,
	             "Content-Security-Policy: default-src 'none'; script-src 'sha256-") !=
	      NULL);
	CHECK(strstr(hdr, "unsafe-inline") == NULL);
	CHECK(strstr(hdr, "X-Frame-Options: DENY") != NULL);
	free(hdr);
	peer_stop(&d);
}

/* POST body to path of the OAuth peer's admin API. */
static void
oauth_admin(int port, const char *path, const char *body)
{
	char  url[128];
	CURL *e    = curl_easy_init();
	FILE *null = fopen("/dev/null", "w");
	long  st   = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, null);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	CHECK_EQ(st, 200);
	curl_easy_cleanup(e);
	fclose(null);
}

/* Stored XSS through discovery: metadata names a javascript:
 * authorization_endpoint; it is refused at discovery, never stored or
 * shown, and the page (Chromium) opens nothing. */
static void
xss(void)
{
	peer        as = {0}, d = {0}, b = {0};
	char        js[512], config[1024];
	const char *argv_as[] = {"node", js, "--port", "0", NULL};
	long        st;

	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	CHECK_EQ(peer_start(&as, argv_as, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	oauth_admin(
	        as.port, "/admin/metadata",
	        "{\"as\": {\"authorization_endpoint\": \"javascript:fetch('/api/mcp/clients')//\"}}");
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"sso\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {}, \"tools_to_execute\": [\"*\"]}]}}",
	        as.port);
	serve(&d, "xss.json", config, NULL);
	expect("POST", "/api/mcp/client/sso/initiate-verification", NULL, NULL,
	       502,
	       "authorization_endpoint from the authorization server metadata is not an http(s) URL");
	snprintf(js, sizeof(js), "%s/xss.mjs", peer_dir());
	const char *argv[] = {"node", js, sv_base, "sso", NULL};
	CHECK_EQ(peer_start(&b, argv, NULL, "xss ok ([0-9]+)", 120000), 0);
	CHECK(peer_wait_exit(&b, 30000));
	peer_stop(&b);
	CHECK(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0);
	char *out = http("GET", "/api/mcp/clients?limit=100", NULL, NULL, &st);
	CHECK(strstr(out, "javascript:") == NULL);
	free(out);
	peer_stop(&d);
	peer_stop(&as);
}

/* A client ID metadata document: the daemon serves its own (public, no
 * secret in it); an authorization server that takes them fetches it from
 * the daemon, and the client needs no registration. */
static void
cimd(void)
{
	peer        as = {0}, d = {0};
	char        js[512], config[1536], doc[128], listen[64], *out;
	const char *argv_as[] = {"node", js, "--port", "0", NULL};
	int         port      = peer_free_port();
	long        st;
	json_t     *j;

	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	CHECK_EQ(peer_start(&as, argv_as, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	oauth_admin(as.port, "/admin/variant", "{\"cimd\": true}");
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(doc, sizeof(doc),
	         "http://127.0.0.1:%d/oauth/client-metadata.json", port);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"doc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {\"client_metadata_url\": \"%s\"}, \"tools_to_execute\": [\"*\"]}, {\"name\": \"any\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {}, \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"cimd-admin-token\", \"client_metadata_url\": \"%s\"}}",
	        as.port, doc, as.port, doc);
	serve_opt(&d, "cimd.json", config, NULL, "--listen", listen);
	/* open (an authorization server fetches it), while the API is not */
	const char *none[] = {NULL};
	free(http_req("GET", "/api/mcp/clients", NULL, none, &st));
	CHECK_EQ(st, 401);
	out = http_req("GET", "/oauth/client-metadata.json", NULL, none, &st);
	CHECK_EQ(st, 200);
	CHECK((j = json_loads(out, 0, NULL)) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(j, "client_id")),
	             doc) == 0);
	CHECK(strcmp(json_string_value(json_array_get(
	                     json_object_get(j, "redirect_uris"), 0)),
	             strcat(strcpy(js, sv_base), "/api/oauth/callback")) == 0);
	CHECK(strcmp(json_string_value(
	                     json_object_get(j, "token_endpoint_auth_method")),
	             "none") == 0);
	json_decref(j);
	free(out);

	/* the authorization server fetches it; the callback completes */
	out = http("POST", "/api/mcp/client/doc/initiate-verification", NULL,
	           "cimd-admin-token", &st);
	CHECK_EQ(st, 200);
	CHECK((j = json_loads(out, 0, NULL)) != NULL);
	free(out);
	const char *url =
	        json_string_value(json_object_get(j, "authorize_url"));
	CHECK(strstr(url, "client_id=http%3A%2F%2F127.0.0.1%3A") != NULL);
	CURL *e   = curl_easy_init();
	char *loc = NULL;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fwrite);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, stderr);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	CHECK_EQ(st, 302);
	curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc);
	CHECK(loc != NULL && strncmp(loc, sv_base, strlen(sv_base)) == 0);
	out = http_req("GET", loc + strlen(sv_base), NULL, none, &st);
	CHECK_EQ(st, 200);
	free(out);
	curl_easy_cleanup(e);
	json_decref(j);
	sv_admin = "cimd-admin-token";
	CHECK(state_within("doc", "healthy", WAIT_MS));
	sv_admin = NULL;
	CHECK_EQ(admin(as.port, "/admin/counters", NULL, "cimd_fetches"), 1);
	CHECK_EQ(admin(as.port, "/admin/counters", NULL, "registrations"), 0);

	/* a client that names none uses the server's document too */
	out = http("POST", "/api/mcp/client/any/initiate-verification", NULL,
	           "cimd-admin-token", &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "client_id=http%3A%2F%2F127.0.0.1%3A") != NULL);
	free(out);
	CHECK_EQ(admin(as.port, "/admin/counters", NULL, "registrations"), 0);
	peer_stop(&d);
	peer_stop(&as);
}

/* ---- virtual keys ------------------------------------------------------- */

static void
keys(void)
{
	peer        d = {0};
	char        config[2048];
	const char *env[] = {"MK_VK_ALPHA=" KEY_A, "MCPKEEP_LOG=debug", NULL};
	long        st;
	char       *out;

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"svc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}, {\"name\": \"other\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}, {\"name\": \"puh\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"keys-admin-token\", \"virtual_keys\": [{\"name\": \"alpha\", \"value\": \"env.MK_VK_ALPHA\", \"clients\": {\"svc\": [\"echo\"], \"puh\": [\"*\"]}}, {\"name\": \"beta\", \"value\": \"" KEY_B
	        "\", \"clients\": {\"*\": [\"*\"]}, \"trust_identity_headers\": true}]}}",
	        mcp.port, mcp.port, mcp.port);
	serve(&d, "keys.json", config, env);
	const char *echo =
	        "{\"client\": \"svc\", \"tool\": \"echo\", \"arguments\": {\"message\": \"hi\"}}";
	const char *none[] = {NULL};
	const char *bad[] = {"X-MCP-Virtual-Key: vk-guessed-0000000000", NULL};
	const char *a[]   = {"X-MCP-Virtual-Key: " KEY_A, NULL};
	const char *b[]   = {"X-MCP-Virtual-Key: " KEY_B, NULL};
	/* anonymous and forged: refused */
	out = http_req("POST", "/api/mcp/tool/execute", echo, none, &st);
	CHECK_EQ(st, 401);
	CHECK(strstr(out, "a tool call needs a virtual key") != NULL);
	free(out);
	out = http_req("POST", "/api/mcp/tool/execute", echo, bad, &st);
	CHECK_EQ(st, 401);
	CHECK(strstr(out, "the virtual key is not valid") != NULL);
	free(out);
	/* alpha: its client and tool only */
	out = http_req("POST", "/api/mcp/tool/execute", echo, a, &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "\"hi\"") != NULL);
	free(out);
	out = http_req("POST", "/api/mcp/tool/execute",
	               "{\"client\": \"other\", \"tool\": \"echo\"}", a, &st);
	CHECK_EQ(st, 403);
	CHECK(strstr(out,
	             "virtual key \\\"alpha\\\" may not use client \\\"other\\\"") !=
	      NULL);
	free(out);
	out = http_req("POST", "/api/mcp/tool/execute",
	               "{\"client\": \"svc\", \"tool\": \"pid\"}", a, &st);
	CHECK_EQ(st, 403);
	CHECK(strstr(out,
	             "virtual key \\\"alpha\\\" may not call tool \\\"pid\\\" of client \\\"svc\\\"") !=
	      NULL);
	free(out);
	/* by the client's id too */
	out       = http("GET", "/api/mcp/clients?search=svc", NULL,
	                 "keys-admin-token", &st);
	char *idp = strstr(out, "\"client_id\":\"");
	CHECK(idp != NULL);
	char id[64];
	snprintf(id, sizeof(id), "%.32s", idp + 13);
	free(out);
	char byid[256];
	snprintf(
	        byid, sizeof(byid),
	        "{\"client\": \"%s\", \"tool\": \"echo\", \"arguments\": {\"message\": \"by id\"}}",
	        id);
	out = http_req("POST", "/api/mcp/tool/execute", byid, a, &st);
	CHECK_EQ(st, 200);
	free(out);
	/* never the admin API; its list is its clients and tools */
	out = http_req("POST", "/api/mcp/client/svc/reconnect", "{}", a, &st);
	CHECK_EQ(st, 403);
	CHECK(strstr(out, "a virtual key may not use the admin API") != NULL);
	free(out);
	out = http_req("GET", "/api/mcp/clients?limit=100", NULL, a, &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "\"name\":\"svc\"") != NULL);
	CHECK(strstr(out, "\"name\":\"puh\"") != NULL);
	CHECK(strstr(out, "\"name\":\"other\"") == NULL);
	CHECK(strstr(out, "\"total_count\":2") != NULL);
	CHECK(strstr(out, "\"name\":\"echo\"") != NULL);
	CHECK(strstr(out, "\"name\":\"pid\"") == NULL ||
	      strstr(out, "\"name\":\"puh\"") != NULL);
	free(out);
	/* the admin token calls tools too */
	expect("POST", "/api/mcp/tool/execute", echo, "keys-admin-token", 200,
	       "\"hi\"");

	/* identity: alpha's calls are alpha's, whatever it claims (puh
	 * verified by the admin first) */
	expect("POST", "/api/mcp/client/puh/verify-headers",
	       "{\"headers\": {\"x-api-key\": \"the-admins\"}}",
	       "keys-admin-token", 200, NULL);
	const char *a_alice[] = {"X-MCP-Virtual-Key: " KEY_A,
	                         "X-MCP-User-Id: alice", NULL};
	const char *puh =
	        "{\"client\": \"puh\", \"tool\": \"echo\", \"arguments\": {\"message\": \"as me\"}}";
	out = http_req("POST", "/api/mcp/tool/execute", puh, a_alice, &st);
	CHECK_EQ(st, 401);
	char *su = strstr(out, "\"submit_url\":\"");
	CHECK(su != NULL);
	char submit[256];
	snprintf(submit, sizeof(submit), "%.*s", (int)strcspn(su + 14, "\""),
	         su + 14);
	free(out);
	/* its submit_url works with alpha's key (not only the admin's) */
	out = http_req("POST", submit,
	               "{\"headers\": {\"x-api-key\": \"alphas-own\"}}", a,
	               &st);
	CHECK_EQ(st, 200);
	free(out);
	out = http_req("POST", "/api/mcp/tool/execute", puh, a_alice, &st);
	CHECK_EQ(st, 200);
	free(out);
	/* beta trusts the gateway's headers: alice is alice, who has
	 * submitted nothing */
	const char *b_alice[] = {"X-MCP-Virtual-Key: " KEY_B,
	                         "X-MCP-User-Id: alice", NULL};
	out = http_req("POST", "/api/mcp/tool/execute", puh, b_alice, &st);
	CHECK_EQ(st, 401);
	CHECK(strstr(out, "mcp_auth_required") != NULL);
	free(out);
	/* and beta itself is not alpha */
	out = http_req("POST", "/api/mcp/tool/execute", puh, b, &st);
	CHECK_EQ(st, 401);
	free(out);
	peer_stop(&d);
	CHECK(peer_said(&d, "POST /api/mcp/tool/execute 200"));
	CHECK(!peer_said(&d, KEY_A) && !peer_said(&d, KEY_B) &&
	      !peer_said(&d, "alphas-own"));

	/* beyond loopback, with no keys, a call needs the admin token */
	char pub[64];
	snprintf(pub, sizeof(pub), "0.0.0.0:%d", wildcard_port());
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"svc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"pub-admin-token\"}}",
	        mcp.port);
	serve_opt(&d, "pubkeys.json", config, NULL, "--listen", pub);
	out = http_req("POST", "/api/mcp/tool/execute", echo, none, &st);
	CHECK_EQ(st, 401);
	free(out);
	const char *forged[] = {"X-MCP-User-Id: alice", NULL};
	out = http_req("POST", "/api/mcp/tool/execute", echo, forged, &st);
	CHECK_EQ(st, 401);
	free(out);
	expect("POST", "/api/mcp/tool/execute", echo, "pub-admin-token", 200,
	       "\"hi\"");
	peer_stop(&d);

	/* a weak or repeated key is refused at start, naming no value */
	refuses("weak.json",
	        "{\"server\": {\"virtual_keys\": [{\"name\": \"w\", \"value\": \"short\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        "127.0.0.1:1",
	        "the value of key \"w\" is shorter than 16 characters");
}

/* ---- the data plane's bindings ------------------------------------------ */

/* The submit_url of a tool call answered 401 mcp_auth_required (kind
 * headers) into submit (len). */
static void
submit_url_of(const char *body, const char *const *hdrs, char *submit,
              size_t len)
{
	long  st;
	char *out = http_req("POST", "/api/mcp/tool/execute", body, hdrs, &st);
	char *su  = out != NULL ? strstr(out, "\"submit_url\":\"") : NULL;

	CHECK_EQ(st, 401);
	CHECK(su != NULL);
	snprintf(submit, len, "%.*s", (int)strcspn(su + 14, "\""), su + 14);
	free(out);
}

/* A header session is its caller's: the client and identity that were
 * told it.  A key allowed only client pub, naming frank, cannot set
 * frank's values of client team through pub's path; nor can another
 * identity of frank's own key; and the session stays frank's. */
static void
flow_binding(void)
{
	peer d = {0};
	char config[2048], submit[256], other[300];
	long st;

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"team\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}, {\"name\": \"pub\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"bind-admin-token\", \"virtual_keys\": [{\"name\": \"gw\", \"value\": \"" KEY_A
	        "\", \"clients\": {\"team\": [\"*\"]}, \"trust_identity_headers\": true}, {\"name\": \"pub\", \"value\": \"" KEY_B
	        "\", \"clients\": {\"pub\": [\"*\"]}, \"trust_identity_headers\": true}]}}",
	        mcp.port, mcp.port);
	serve(&d, "bind.json", config, NULL);
	expect("POST", "/api/mcp/client/team/verify-headers",
	       "{\"headers\": {\"x-api-key\": \"the-admins\"}}",
	       "bind-admin-token", 200, NULL);
	expect("POST", "/api/mcp/client/pub/verify-headers",
	       "{\"headers\": {\"x-api-key\": \"the-admins\"}}",
	       "bind-admin-token", 200, NULL);
	const char *frank[]  = {"X-MCP-Virtual-Key: " KEY_A,
	                        "X-MCP-User-Id: frank", NULL};
	const char *mallry[] = {"X-MCP-Virtual-Key: " KEY_A,
	                        "X-MCP-User-Id: mallory", NULL};
	const char *pubf[]   = {"X-MCP-Virtual-Key: " KEY_B,
	                        "X-MCP-User-Id: frank", NULL};
	const char *call =
	        "{\"client\": \"team\", \"tool\": \"echo\", \"arguments\": {\"message\": \"as frank\"}}";
	const char *vals = "{\"headers\": {\"x-api-key\": \"attackers\"}}";
	submit_url_of(call, frank, submit, sizeof(submit));
	/* pub's key, through pub's path, naming frank: no such session */
	const char *q = strchr(submit, '?');
	CHECK(q != NULL);
	snprintf(other, sizeof(other), "/api/mcp/client/pub/submit-headers%s",
	         q);
	char *out = http_req("POST", other, vals, pubf, &st);
	CHECK_EQ(st, 404);
	CHECK(strstr(out, "no such header session for this caller") != NULL);
	free(out);
	/* through team's path pub's key is refused as before */
	out = http_req("POST", submit, vals, pubf, &st);
	CHECK_EQ(st, 403);
	free(out);
	/* frank's own key, another identity: no such session either */
	out = http_req("POST", submit, vals, mallry, &st);
	CHECK_EQ(st, 404);
	free(out);
	/* frank still has none: his call is still told to submit */
	submit_url_of(call, frank, other, sizeof(other));
	/* and his first session is still his */
	out = http_req("POST", submit,
	               "{\"headers\": {\"x-api-key\": \"franks-own\"}}", frank,
	               &st);
	CHECK_EQ(st, 200);
	free(out);
	out = http_req("POST", "/api/mcp/tool/execute", call, frank, &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "as frank") != NULL);
	free(out);
	peer_stop(&d);
	CHECK(!peer_said(&d, "attackers") && !peer_said(&d, "franks-own"));
}

/* One key naming callers in trusted headers holds at most 100 pending
 * sign-ins (each client at most 1,000): random X-MCP-User-Ids through it
 * are refused past that, with 409, while another key's and the admin's
 * new callers are still told how to sign in. */
static void
key_flow_bound(void)
{
	peer d = {0};
	char config[2048], user[64];
	long st;

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"many\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"bound-admin-token\", \"virtual_keys\": [{\"name\": \"gw\", \"value\": \"" KEY_A
	        "\", \"clients\": {\"*\": [\"*\"]}, \"trust_identity_headers\": true}, {\"name\": \"other\", \"value\": \"" KEY_B
	        "\", \"clients\": {\"*\": [\"*\"]}, \"trust_identity_headers\": true}]}}",
	        mcp.port);
	serve(&d, "kbound.json", config, NULL);
	expect("POST", "/api/mcp/client/many/verify-headers",
	       "{\"headers\": {\"x-api-key\": \"the-admins\"}}",
	       "bound-admin-token", 200, NULL);
	const char *call   = "{\"client\": \"many\", \"tool\": \"echo\"}";
	const char *hdrs[] = {"X-MCP-Virtual-Key: " KEY_A, user, NULL};
	for (int i = 0; i <= 100; i++) {
		snprintf(user, sizeof(user), "X-MCP-User-Id: random-%d", i);
		char *out = http_req("POST", "/api/mcp/tool/execute", call,
		                     hdrs, &st);
		CHECK_EQ(st, i < 100 ? 401 : 409);
		if (i == 100) {
			CHECK(strstr(out,
			             "too many pending authorizations started by \\\"gw\\\" (100); try again later") !=
			      NULL);
		}
		free(out);
	}
	const char *other[] = {"X-MCP-Virtual-Key: " KEY_B,
	                       "X-MCP-User-Id: random-100", NULL};
	submit_url_of(call, other, user, sizeof(user));
	const char *admin[] = {"Authorization: Bearer bound-admin-token",
	                       "X-MCP-User-Id: random-101", NULL};
	submit_url_of(call, admin, user, sizeof(user));
	peer_stop(&d);
}

/* ---- event streams and the callback: lanes, budgets, rotation --------- */

#define ROT_CONFIG                                                              \
	"{\"mcp\": {\"client_configs\": []}, \"server\": {\"admin_token\": "    \
	"\"%s\", \"virtual_keys\": [%s{\"name\": \"beta\", \"value\": \"" KEY_B \
	"\", \"clients\": {\"*\": [\"*\"]}}]}}"

/* A SIGHUP that rotates the admin token and drops key alpha ends the
 * streams they opened; beta's stays and still hears events. */
static void
stream_rotation(void)
{
	peer d = {0};
	char config[1024];
	long st;
	int  fa, fk, fb;

	snprintf(config, sizeof(config), ROT_CONFIG, "rot-admin-one",
	         "{\"name\": \"alpha\", \"value\": \"" KEY_A
	         "\", \"clients\": {\"*\": [\"*\"]}}, ");
	const char *env[] = {"MCPKEEP_LOG=info", NULL};
	serve(&d, "rot.json", config, env);
	fa = sv_events("Authorization: Bearer rot-admin-one", &st, NULL);
	CHECK_EQ(st, 200);
	fk = sv_events("X-MCP-Virtual-Key: " KEY_A, &st, NULL);
	CHECK_EQ(st, 200);
	fb = sv_events("X-MCP-Virtual-Key: " KEY_B, &st, NULL);
	CHECK_EQ(st, 200);
	snprintf(config, sizeof(config), ROT_CONFIG, "rot-admin-two", "");
	write_config("rot.json", config);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	/* ended at the rotation (a keepalive would come after 15 s) */
	CHECK(sv_closed(fa, 10000));
	CHECK(sv_closed(fk, 10000));
	close(fa);
	close(fk);
	/* the old credentials open nothing; beta's stream goes on */
	fa = sv_events("Authorization: Bearer rot-admin-one", &st, NULL);
	CHECK_EQ(st, 401);
	close(fa);
	expect("POST", "/api/mcp/client",
	       "{\"name\": \"after\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}",
	       "rot-admin-two", 201, NULL);
	CHECK(sv_until(fb, "\"name\":\"after\"", WAIT_MS, NULL));
	close(fb);
	peer_stop(&d);
	CHECK(peer_said(&d, "event streams ended"));
}

#define LANES_CONFIG                                                          \
	"{\"mcp\": {\"client_configs\": []}, \"server\": {\"admin_token\": "  \
	"\"lanes-admin\", \"virtual_keys\": [{\"name\": \"alpha\", "          \
	"\"value\": \"" KEY_A                                                 \
	"\", \"clients\": {\"*\": [\"*\"]}}, {\"name\": "                     \
	"\"beta\", \"value\": \"" KEY_B                                       \
	"\", \"clients\": {\"*\": [\"*\"]}}]}}"

/* One key opens event streams until refused: the admin's page and
 * another key still open theirs. */
static void
stream_lanes(void)
{
	peer d = {0};
	int  fds[300], n = 0, f;
	long st = 200;

	serve_opt(&d, "slanes.json", LANES_CONFIG, NULL,
	          "--max-connections-per-ip", "1024");
	char *head = NULL;
	while (n < 300) {
		free(head);
		fds[n] = sv_events("X-MCP-Virtual-Key: " KEY_A, &st, &head);
		if (st != 200) {
			break;
		}
		n++;
	}
	fprintf(stderr, "stream_lanes: key alpha opened %d streams\n", n);
	CHECK_EQ(st, 503);
	CHECK(strstr(head,
	             "too many event streams are open for virtual key \\\"alpha\\\" (64)") !=
	      NULL);
	free(head);
	close(fds[n]);
	f = sv_events("Authorization: Bearer lanes-admin", &st, NULL);
	CHECK_EQ(st, 200);
	close(f);
	f = sv_events("X-MCP-Virtual-Key: " KEY_B, &st, NULL);
	CHECK_EQ(st, 200);
	close(f);
	for (int i = 0; i < n; i++) {
		close(fds[i]);
	}
	peer_stop(&d);
}

/* Sums in_flight and busy_total of /metrics until they are want (true),
 * or WAIT_MS passed (polled: no event says that a request was taken). */
static bool
admitted_or_busy(double want, double *busy)
{
	int64_t end = now_ms() + WAIT_MS;

	do {
		long   st;
		char  *m = http_try("GET", "/metrics", NULL, NULL, &st);
		double f = m != NULL
		        ? metric(m, "mcpkeep_http_requests_in_flight")
		        : -1;
		*busy    = m != NULL
		           ? metric(m, "mcpkeep_http_requests_busy_total")
		           : -1;
		free(m);
		if (f + *busy == want) {
			return (true);
		}
		struct pollfd none = {.fd = -1};
		(void)poll(&none, 1, 50);
	} while (now_ms() < end);
	return (false);
}

/* Anonymous OAuth callbacks that never send their bodies hold their own
 * lane's budget, not the admin API's. */
static void
callback_lane(void)
{
	peer   d = {0};
	int    fds[320];
	char   req[256];
	double busy;
	long   st;

	serve_opt(
	        &d, "cblane.json",
	        "{\"mcp\": {\"client_configs\": []}, \"server\": {\"admin_token\": \"cb-admin\"}}",
	        NULL, "--max-connections-per-ip", "1024");
	sv_admin = "cb-admin";
	snprintf(
	        req, sizeof(req),
	        "GET /api/oauth/callback?state=s&code=c HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\n",
	        sv_base + 7);
	for (int i = 0; i < 320; i++) {
		CHECK((fds[i] = sv_raw(req)) >= 0);
	}
	CHECK(admitted_or_busy(320, &busy));
	fprintf(stderr, "callback_lane: %.0f of 320 callbacks refused\n",
	        busy);
	char *out = http_try("GET", "/api/mcp/clients", NULL, NULL, &st);
	CHECK_EQ(st, 200);
	free(out);
	CHECK_EQ(busy, 320 - 64);
	for (int i = 0; i < 320; i++) {
		close(fds[i]);
	}
	sv_admin = NULL;
	peer_stop(&d);
}

/* env. in an API body is the literal text: the daemon's variables are
 * neither sent to a server nor told apart by the errors. */
static void
env_literal(void)
{
	peer d = {0};
	char env0[128], body[512];
	long st;

	snprintf(env0, sizeof(env0), "MK_SEC_URL=http://127.0.0.1:%d/mcp",
	         mcp.port);
	const char *env[] = {env0, "MK_SEC_SECRET=daemon-secret-value", NULL};
	serve(&d, "envlit.json", "{\"mcp\": {\"client_configs\": []}}", env);
	/* a header naming the daemon's secret: sent as the text it is */
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"envy\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"headers\", \"headers\": {\"X-Leak\": \"env.MK_SEC_SECRET\"}, \"tools_to_execute\": [\"*\"]}",
	        mcp.port);
	expect("POST", "/api/mcp/client", body, NULL, 201, NULL);
	char *out = http("POST", "/api/mcp/tool/execute",
	                 "{\"client\": \"envy\", \"tool\": \"headers\"}", NULL,
	                 &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "env.MK_SEC_SECRET") != NULL);
	CHECK(strstr(out, "daemon-secret-value") == NULL);
	free(out);
	/* a URL from a variable: literal, so not a URL; an unset one the
	 * same, with no word of which exist */
	out = http(
	        "POST", "/api/mcp/client",
	        "{\"name\": \"envu\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_SEC_URL\"}",
	        NULL, &st);
	CHECK_EQ(st, 400);
	CHECK(strstr(out, "not set") == NULL);
	char *set = out;
	out       = http(
	              "POST", "/api/mcp/client",
	              "{\"name\": \"envu\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_SEC_NOPE\"}",
	              NULL, &st);
	CHECK_EQ(st, 400);
	/* one answer for both: no variable is told apart */
	CHECK(strcmp(out, set) == 0);
	CHECK(strstr(out, "must be an http:// or https:// URL") != NULL);
	free(set);
	free(out);
	CHECK(!listed("envu"));
	peer_stop(&d);
	CHECK(!peer_said(&d, "daemon-secret-value"));
}

/* ---- memory and connections --------------------------------------------- */

#define BIG (16 * 1024 * 1024)

/* The thread sanitizer's shadow memory counts in the daemon's RSS: its
 * build (the same flags as this test's) gets 4 times the room, still a
 * tenth of what the whole bodies would take. */
#if defined(__SANITIZE_THREAD__)
#define SHADOW 4
#else
#define SHADOW 1
#endif

typedef struct big {
	pthread_t   th;
	const char *data; /* BIG bytes */
	bool        chunked;
	size_t      sent;
	long        status;
} big;

static size_t
big_read(char *buf, size_t size, size_t n, void *arg)
{
	big   *b    = arg;
	size_t want = size * n, left = BIG - b->sent;

	want = want < left ? want : left;
	memcpy(buf, b->data + b->sent, want);
	b->sent += want;
	return (want);
}

static void *
big_main(void *arg)
{
	big               *b = arg;
	CURL              *e = curl_easy_init();
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	char url[128];

	snprintf(url, sizeof(url), "%s/api/mcp/client", sv_base);
	curl_easy_setopt(e, CURLOPT_URL, url);
	if (b->chunked) {
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, big_read);
		curl_easy_setopt(e, CURLOPT_READDATA, b);
	} else {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, b->data);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)BIG);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fwrite);
	FILE *null = fopen("/dev/null", "w");
	curl_easy_setopt(e, CURLOPT_WRITEDATA, null);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 120000L);
	if (curl_easy_perform(e) == CURLE_OK) {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &b->status);
	}
	fclose(null);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return (NULL);
}

static void
bodies(void)
{
	peer  d = {0};
	big   b[40];
	char *data = malloc(BIG);

	CHECK(data != NULL);
	memset(data, 'x', BIG);
	serve(&d, "bodies.json", "{\"mcp\": {\"client_configs\": []}}", NULL);
	long before = proc_kib(d.pid, "VmRSS:");
	for (int i = 0; i < 40; i++) {
		b[i] = (big) {.data = data, .chunked = i % 2 == 1};
		CHECK_EQ(pthread_create(&b[i].th, NULL, big_main, &b[i]), 0);
	}
	for (int i = 0; i < 40; i++) {
		pthread_join(b[i].th, NULL);
		CHECK_EQ(b[i].status, 413);
	}
	long peak = proc_kib(d.pid, "VmHWM:");
	fprintf(stderr, "bodies: RSS %ld KiB before, peak %ld KiB\n", before,
	        peak);
	CHECK(peak - before < 64 * 1024 * SHADOW);
	expect("GET", "/healthz", NULL, NULL, 200, "ok");
	peer_stop(&d);
	free(data);
}

/* A connection from 127.0.0.2 that sends half a request. */
static int
half_open(int port)
{
	struct sockaddr_in src = {.sin_family = AF_INET};
	struct sockaddr_in dst = {.sin_family = AF_INET,
	                          .sin_port   = htons((uint16_t)port)};
	int                s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (s < 0) {
		return (-1);
	}
	inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	if (bind(s, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    (connect(s, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
	     errno != EINPROGRESS)) {
		close(s);
		return (-1);
	}
	return (s);
}

static void
idle(void)
{
	peer          d = {0};
	struct rlimit rl;
	int          *s = calloc(10000, sizeof(int)), n = 0;
	const char    half[] = "GET /healthz HTTP/1.1\r\nHost: x";

	CHECK(s != NULL);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	CHECK(rl.rlim_cur > 10100);
	serve(&d, "idle.json", "{\"mcp\": {\"client_configs\": []}}", NULL);
	int base = proc_fds(d.pid), most = base;
	for (int i = 0; i < 10000; i++) {
		if ((s[n] = half_open(d.port)) >= 0) {
			(void)send(s[n], half, sizeof(half) - 1, MSG_NOSIGNAL);
			n++;
		}
		if (i % 1000 == 999) {
			int f = proc_fds(d.pid);
			most  = f > most ? f : most;
		}
	}
	fprintf(stderr, "idle: %d connections opened; daemon fds %d -> %d\n",
	        n, base, most);
	CHECK(n > 5000);
	/* the API still answers, from another address */
	expect("GET", "/healthz", NULL, NULL, 200, "ok");
	expect("GET", "/api/mcp/clients", NULL, NULL, 200, "\"clients\"");
	int f = proc_fds(d.pid);
	most  = f > most ? f : most;
	/* 256 per address (the default cap), its 8 spare ones, and a few
	 * in passing */
	CHECK(most <= base + 256 + 8 + 8);
	for (int i = 0; i < n; i++) {
		close(s[i]);
	}
	peer_stop(&d);
	free(s);

	/* --idle-timeout: a half-sent request is closed after it */
	serve_opt(&d, "idle2.json", "{\"mcp\": {\"client_configs\": []}}",
	          NULL, "--idle-timeout", "1");
	int c = half_open(d.port);
	CHECK(c >= 0);
	struct pollfd p = {.fd = c, .events = POLLOUT};
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(send(c, half, sizeof(half) - 1, MSG_NOSIGNAL),
	         (ssize_t)sizeof(half) - 1);
	/* the daemon closes it: readable, then EOF (or reset) */
	p = (struct pollfd) {.fd = c, .events = POLLIN};
	CHECK_EQ(poll(&p, 1, 10000), 1);
	char buf[512];
	CHECK(recv(c, buf, sizeof(buf), 0) <= 0);
	close(c);
	peer_stop(&d);
}

/* A connection from 127.0.0.1 (the caller's own address) that sends a
 * request line and then, whenever trickle() is called, one header line
 * more. */
static int
trickler(int port)
{
	struct sockaddr_in dst = {.sin_family = AF_INET,
	                          .sin_port   = htons((uint16_t)port)};
	int                s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pollfd      p = {.fd = s, .events = POLLOUT};
	const char         line[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";

	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	if (s < 0 ||
	    (connect(s, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
	     errno != EINPROGRESS) ||
	    poll(&p, 1, 5000) != 1 ||
	    send(s, line, sizeof(line) - 1, MSG_NOSIGNAL) < 0) {
		if (s >= 0) {
			close(s);
		}
		return (-1);
	}
	return (s);
}

/* Whether the daemon ended s: readable, then EOF or an error. */
static bool
ended(int s)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	char          buf[256];

	return (poll(&p, 1, 0) == 1 && recv(s, buf, sizeof(buf), 0) <= 0);
}

/* 300 connections from the caller's own address that send a header line
 * every 200 ms (each byte resets an idle timeout) hold no slot past the
 * header deadline, and meanwhile the admin's list and /healthz answer
 * within 2 s: past the address's share, a spare slot serves them. */
static void
slow_headers(void)
{
	peer    d = {0};
	int     s[300], n = 0, open;
	int64_t t0, t;
	long    st;
	char   *out;

	serve_opt(&d, "slow.json",
	          "{\"mcp\": {\"client_configs\": []}, \"server\": "
	          "{\"admin_token\": \"slow-admin-token\"}}",
	          NULL, "--header-timeout", "3");
	t0 = now_ms();
	for (int i = 0; i < 300; i++) {
		if ((s[n] = trickler(d.port)) >= 0) {
			n++;
		}
	}
	CHECK(n >= 256);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < n; i++) {
			(void)send(s[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
		}
		usleep(200 * 1000); /* the attacker's pace: a header line */
	}
	t   = now_ms();
	out = http_try("GET", "/healthz", NULL, NULL, &st);
	CHECK(st == 200 && now_ms() - t < 2000);
	free(out);
	t   = now_ms();
	out = http_try("GET", "/api/mcp/clients", NULL, "slow-admin-token",
	               &st);
	CHECK(st == 200 && now_ms() - t < 2000);
	CHECK(strstr(out, "\"clients\"") != NULL);
	free(out);
	/* keeps trickling: every one of them ended within the deadline (3
	 * s from its start; the sweeper's pace and a loaded machine on top) */
	do {
		open = 0;
		for (int i = 0; i < n; i++) {
			if (s[i] >= 0 && ended(s[i])) {
				close(s[i]);
				s[i] = -1;
			}
			if (s[i] >= 0) {
				(void)send(s[i], "X-Slow: 1\r\n", 11,
				           MSG_NOSIGNAL);
				open++;
			}
		}
		if (open > 0) {
			CHECK(now_ms() - t0 < 3000 + 5000);
			usleep(200 * 1000); /* the attacker's pace */
		}
	} while (open > 0);
	fprintf(stderr,
	        "slow_headers: %d trickling connections, all ended "
	        "after %lld ms\n",
	        n, (long long)(now_ms() - t0));
	peer_stop(&d);
}

typedef struct hang {
	pthread_t th;
	long      status;
} hang;

static void *
hang_main(void *arg)
{
	hang *h = arg;

	free(http_try(
	        "POST", "/api/mcp/tool/execute",
	        "{\"client\": \"hot\", \"tool\": \"hang\", \"timeout\": 300000}",
	        NULL, &h->status));
	return (NULL);
}

static void
hanging(void)
{
	peer d = {0}, up = {0};
	hang h[64];
	char config[512];

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"hot\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"], \"tool_execution_timeout\": \"300s\"}]}}",
	        up.port);
	serve(&d, "hang.json", config, NULL);
	/* the calls must outlive what comes before the upstream stops (a
	 * slow sanitizer build on a busy machine took over 30 s there), and
	 * end when it does: the tool's deadline (300 s, not the client's
	 * default 30 s, which ended some with 504) and the test's own */
	sv_timeout_ms = 330000;
	for (int i = 0; i < 64; i++) {
		h[i].status = 0;
		CHECK_EQ(pthread_create(&h[i].th, NULL, hang_main, &h[i]), 0);
	}
	CHECK(metric_within("mcpkeep_http_requests_in_flight", 64, 64));
	/* the admin API answers beside them */
	expect("GET", "/api/mcp/clients", NULL, NULL, 200, "\"hot\"");
	expect("POST", "/api/mcp/client/hot/disable", NULL, NULL, 200, NULL);
	/* the enable connects beside the 64 calls: they hold at most 60 of
	 * the 64 connections to the server (before, they held all of them
	 * and the connect timed out after 30 s, now and then) */
	expect("POST", "/api/mcp/client/hot/enable", NULL, NULL, 200, NULL);
	expect("GET", "/readyz", NULL, NULL, 200, "ready");
	peer_stop(&up); /* the calls end: 502 */
	/* (the 4 past the 60 waited for a slot: the disable refused them,
	 * 400 as any call to a disabled client) */
	int waited = 0;
	for (int i = 0; i < 64; i++) {
		pthread_join(h[i].th, NULL);
		if (h[i].status != 502 && h[i].status != 503 &&
		    h[i].status != 400) {
			fprintf(stderr, "call %d: HTTP %ld\n", i, h[i].status);
		}
		waited += h[i].status == 400;
		CHECK(h[i].status == 502 || h[i].status == 503 ||
		      h[i].status == 400);
	}
	CHECK(waited <= 4);
	sv_timeout_ms = 30000;
	peer_stop(&d);
}

/* ---- framing ------------------------------------------------------------ */

/* Sends text and gives everything the daemon answered (malloc'd) until
 * it closed (*closed true) or 10 s passed without a byte (false). */
static char *
raw_exchange(int port, const char *text, bool *closed)
{
	struct sockaddr_in a   = {.sin_family = AF_INET,
	                          .sin_port   = htons((uint16_t)port)};
	int                s   = socket(AF_INET, SOCK_STREAM, 0);
	char              *out = calloc(1, 65536);
	size_t             len = 0;
	ssize_t            n;
	struct timeval     tv = {.tv_sec = 10};

	CHECK(s >= 0 && out != NULL);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	CHECK_EQ(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK_EQ(send(s, text, strlen(text), MSG_NOSIGNAL),
	         (ssize_t)strlen(text));
	while (len < 65535 && (n = recv(s, out + len, 65535 - len, 0)) > 0) {
		len += (size_t)n;
	}
	*closed = n == 0 || (n < 0 && errno == ECONNRESET);
	close(s);
	return (out);
}

/* Sends raw (a whole HTTP exchange with Connection: close) and gives
 * everything the daemon answered until it closed (malloc'd). */
static char *
raw(int port, const char *text)
{
	bool closed;

	return (raw_exchange(port, text, &closed));
}

static int
count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p++) {
		n++;
	}
	return (n);
}

static void
framing(void)
{
	peer d = {0};
	char req[1024], host[64], *out;

	serve(&d, "framing.json", "{\"mcp\": {\"client_configs\": []}}", NULL);
	snprintf(host, sizeof(host), "%s", sv_base + 7);
	/* a chunked body is the body: a client made from it */
	const char *cfg =
	        "{\"name\": \"chunky\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}";
	snprintf(req, sizeof(req),
	         "POST /api/mcp/client HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\n"
	         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	         "%zx\r\n%s\r\n0\r\n\r\n",
	         host, strlen(cfg), cfg);
	out = raw(d.port, req);
	CHECK(strncmp(out, "HTTP/1.1 201", 12) == 0);
	free(out);
	CHECK(listed("chunky"));
	/* a request inside a chunked body is never run as the next one */
	char inner[256];
	snprintf(inner, sizeof(inner),
	         "DELETE /api/mcp/client/chunky HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\n\r\n",
	         host);
	snprintf(req, sizeof(req),
	         "POST /api/mcp/client HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\n"
	         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	         "%zx\r\n%s\r\n0\r\n\r\n",
	         host, strlen(inner), inner);
	out = raw(d.port, req);
	CHECK(strncmp(out, "HTTP/1.1 400", 12) == 0);
	CHECK(strstr(out, "the body is not valid JSON") != NULL);
	CHECK_EQ(count(out, "HTTP/1.1 "), 1);
	free(out);
	CHECK(listed("chunky"));
	/* Content-Length and Transfer-Encoding both (a proxy that reads the
	 * one and a server the other disagree on where the next request
	 * starts): refused, the connection closed, and the request the
	 * chunked body's end leaves behind never run */
	char hidden[256];
	bool closed;
	snprintf(hidden, sizeof(hidden),
	         "0\r\n\r\nDELETE /api/mcp/client/chunky HTTP/1.1\r\n"
	         "Host: %s\r\nContent-Type: application/json\r\n\r\n",
	         host);
	snprintf(req, sizeof(req),
	         "POST /api/mcp/client HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	         "Transfer-Encoding: chunked\r\n\r\n%s",
	         host, strlen(hidden), hidden);
	out = raw_exchange(d.port, req, &closed);
	CHECK(strncmp(out, "HTTP/1.1 400", 12) == 0);
	CHECK(strstr(out, "Content-Type: application/json") != NULL);
	CHECK(strstr(out,
	             "{\"error\":\"the request has both Content-Length and Transfer-Encoding\"}") !=
	      NULL);
	CHECK_EQ(count(out, "HTTP/1.1 "), 1);
	CHECK(closed);
	free(out);
	CHECK(listed("chunky"));
	/* two Content-Lengths: the same */
	snprintf(req, sizeof(req),
	         "POST /api/mcp/client HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\nContent-Length: 2\r\n"
	         "Content-Length: %zu\r\n\r\n{}%s",
	         host, 2 + strlen(inner), inner);
	out = raw_exchange(d.port, req, &closed);
	CHECK(strncmp(out, "HTTP/1.1 400", 12) == 0);
	CHECK(strstr(out, "the request has more than one Content-Length") !=
	      NULL);
	CHECK_EQ(count(out, "HTTP/1.1 "), 1);
	CHECK(closed);
	free(out);
	/* a transfer coding but chunked (its body would run to the
	 * connection's end): 501, closed */
	snprintf(req, sizeof(req),
	         "POST /api/mcp/client HTTP/1.1\r\nHost: %s\r\n"
	         "Content-Type: application/json\r\n"
	         "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n%s",
	         host, inner);
	out = raw_exchange(d.port, req, &closed);
	CHECK(strncmp(out, "HTTP/1.1 501", 12) == 0);
	CHECK(strstr(out, "Content-Type: application/json") != NULL);
	CHECK(strstr(out,
	             "a Transfer-Encoding other than chunked is not supported") !=
	      NULL);
	CHECK_EQ(count(out, "HTTP/1.1 "), 1);
	CHECK(closed);
	free(out);
	CHECK(listed("chunky"));
	/* headers past the connection's memory: 431 */
	char *huge = malloc(100 * 1024 + 64);
	CHECK(huge != NULL);
	int n = snprintf(huge, 64, "X-Big: ");
	memset(huge + n, 'a', 100 * 1024);
	huge[n + 100 * 1024] = '\0';
	const char *hh[]     = {huge, NULL};
	long        st;
	free(http_req("GET", "/healthz", NULL, hh, &st));
	CHECK_EQ(st, 431);
	free(huge);
	expect("GET", "/healthz", NULL, NULL, 200, "ok");
	peer_stop(&d);
}

/* ---- stdio clients ------------------------------------------------------ */

/* Without an admin token the API changes no stdio client, however many
 * clients there are: it is found by name or id wherever it sorts (here
 * after 100 clients whose names hold its own, the first page of a
 * search for it). */
static void
stdio_lookup(void)
{
	peer   d      = {0};
	size_t cap    = 32 * 1024, n;
	char  *config = malloc(cap), id[64], *out, *idp, path[128];
	long   st;

	CHECK(config != NULL);
	n = (size_t)snprintf(
	        config, cap,
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"sd\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"sleep 600\"]}, \"disabled\": true}");
	for (int i = 0; i < 100; i++) {
		n += (size_t)snprintf(
		        config + n, cap - n,
		        ", {\"name\": \"a_sd_%03d\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\", \"disabled\": true}",
		        i);
	}
	snprintf(config + n, cap - n, "]}}");
	CHECK(n + 4 < cap);
	serve(&d, "stdio_many.json", config, NULL);
	free(config);
	const char *patch = "{\"tool_execution_timeout\": \"5s\"}";
	const char *refused =
	        "stdio clients are made and changed only in config.json while the daemon has no admin token";
	expect("PUT", "/api/mcp/client/sd", patch, NULL, 403, refused);
	/* by its id too */
	out = http("GET", "/api/mcp/clients?search=sd&limit=1&offset=100",
	           NULL, NULL, &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "\"name\":\"sd\"") != NULL);
	CHECK((idp = strstr(out, "\"client_id\":\"")) != NULL);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(idp + 13, "\""),
	         idp + 13);
	free(out);
	snprintf(path, sizeof(path), "/api/mcp/client/%s", id);
	expect("PUT", path, patch, NULL, 403, refused);
	/* an http client beside it changes */
	expect("PUT", "/api/mcp/client/a_sd_099", patch, NULL, 200, NULL);
	peer_stop(&d);
}

/* ---- smaller items ------------------------------------------------------ */

static void
small(void)
{
	peer d = {0};
	char config[512];
	long st;

	/* a state stream beyond loopback needs stream_public */
	snprintf(config, sizeof(config),
	         "{\"server\": {\"stream\": [\"tcp://0.0.0.0:%d\"]}}",
	         wildcard_port());
	refuses("stream.json", config, "127.0.0.1:1",
	        "is not loopback: set server.stream_public to true");
	snprintf(
	        config, sizeof(config),
	        "{\"server\": {\"stream\": [\"tcp://0.0.0.0:%d\"], \"stream_public\": true}}",
	        wildcard_port());
	serve(&d, "stream2.json", config, NULL);
	peer_stop(&d);
	/* "127.0.0.1.nip.io" is a host name, not loopback: no token, no
	 * daemon */
	refuses("nip.json", "{}", "127.0.0.1.nip.io:8080",
	        "refusing to serve 127.0.0.1.nip.io:8080 without an admin token");
	refuses("lh.json", "{}", "localhost.attacker.test:8080",
	        "refusing to serve localhost.attacker.test:8080 without an admin token");
	/* /metrics behind its token (the admin's opens it too) */
	serve(&d, "metrics.json",
	      "{\"server\": {\"metrics_token\": \"metrics-token-1\", \"admin_token\": \"metrics-admin\"}}",
	      NULL);
	free(http_try("GET", "/metrics", NULL, "wrong", &st));
	CHECK_EQ(st, 401);
	expect("GET", "/metrics", NULL, "metrics-token-1", 200,
	       "mcpkeep_http_requests_total");
	expect("GET", "/metrics", NULL, "metrics-admin", 200,
	       "mcpkeep_http_requests_total");
	/* the metrics token opens nothing else */
	expect("GET", "/api/mcp/clients", NULL, "metrics-token-1", 401,
	       "admin token");
	expect("GET", "/healthz", NULL, NULL, 200, "ok");
	peer_stop(&d);
}

int
main(int argc, char **argv)
{
	sv_begin(&mcp);
	RUN_IF(browser);
	RUN_IF(origins);
	RUN_IF(xss);
	RUN_IF(cimd);
	RUN_IF(keys);
	RUN_IF(flow_binding);
	RUN_IF(key_flow_bound);
	RUN_IF(stream_rotation);
	RUN_IF(stream_lanes);
	RUN_IF(callback_lane);
	RUN_IF(env_literal);
	RUN_IF(bodies);
	RUN_IF(hanging);
	RUN_IF(framing);
	RUN_IF(stdio_lookup);
	RUN_IF(small);
	RUN_IF(slow_headers);
	RUN_IF(idle); /* (last: its 10,000 sockets leave ports behind) */
	sv_end(&mcp);
	return (0);
}
