/*
 * svutil.c - the daemon's tests' helpers: requests to it over real HTTP,
 * its /metrics read until a series holds, and the built daemon started
 * on a config (serve_test.c, security_test.c).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "svutil.h"
#include "testutil.h"

char        sv_dir[] = "/tmp/mk-serve-XXXXXX";
char        sv_base[64];
const char *sv_admin;
long        sv_timeout_ms = 30000;

/* A request; the answer's body (malloc'd) and *status, or NULL when no
 * answer came (named on stderr). */
char *
http_req(const char *method, const char *path, const char *body,
         const char *const *headers, long *status)
{
	CURL              *e = curl_easy_init();
	struct curl_slist *h = NULL;
	char               url[256], *buf = NULL;
	size_t             len = 0;
	FILE              *mem = open_memstream(&buf, &len);
	bool               ct  = false;

	snprintf(url, sizeof(url), "%s%s", sv_base, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
		h  = curl_slist_append(h, headers[i]);
		ct = ct || strncasecmp(headers[i], "Content-Type:", 13) == 0;
	}
	if (!ct && strcmp(method, "GET") != 0) {
		/* (the daemon refuses a state change of another type) */
		h = curl_slist_append(h, "Content-Type: application/json");
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, sv_timeout_ms);
	CURLcode rc = curl_easy_perform(e);
	if (rc != CURLE_OK) {
		fprintf(stderr, "%s %s: %s\n", method, path,
		        curl_easy_strerror(rc));
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	fclose(mem);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	if (rc != CURLE_OK) {
		free(buf);
		return (NULL);
	}
	return (buf);
}

char *
http_try(const char *method, const char *path, const char *body,
         const char *token, long *status)
{
	char        auth[256];
	const char *h[2] = {NULL, NULL};

	token = token != NULL ? token : sv_admin;
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
		         token);
		h[0] = auth;
	}
	return (http_req(method, path, body, h, status));
}

/* A request that must be answered. */
char *
http(const char *method, const char *path, const char *body, const char *token,
     long *status)
{
	char *out = http_try(method, path, body, token, status);

	CHECK(out != NULL);
	return (out);
}

/* The request answers want_status, and its body contains want. */
void
expect(const char *method, const char *path, const char *body,
       const char *token, long want_status, const char *want)
{
	long  st;
	char *out = http(method, path, body, token, &st);

	if (st != want_status || (want != NULL && strstr(out, want) == NULL)) {
		fprintf(stderr, "%s %s: %ld %s (wanted %ld, \"%s\")\n", method,
		        path, st, out, want_status, want ? want : "");
		CHECK(0);
	}
	free(out);
}

/* The value of one series in /metrics text, or -1 when absent. */
double
metric(const char *text, const char *series)
{
	size_t      n = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ') {
			return (strtod(p + n + 1, NULL));
		}
		p += n;
	}
	return (-1);
}

/* Reads /metrics until series is within [lo, hi] (true), or WAIT_MS
 * passed: each read is a round trip to the daemon, what it waits on. */
bool
metric_within(const char *series, double lo, double hi)
{
	nng_time until = nng_clock() + WAIT_MS;
	double   v;

	do {
		long  st;
		char *out = http("GET", "/metrics", NULL, NULL, &st);
		v         = st == 200 ? metric(out, series) : -1;
		free(out);
		if (v >= lo && v <= hi) {
			return (true);
		}
	} while (nng_clock() < until);
	fprintf(stderr, "%s is %g (wanted %g..%g)\n", series, v, lo, hi);
	return (false);
}

/* Writes config text to sv_dir/name. */
void
write_config(const char *name, const char *text)
{
	char  path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sv_dir, name);
	CHECK((f = fopen(path, "w")) != NULL);
	fputs(text, f);
	fclose(f);
}

/* Starts the daemon on config text (written to sv_dir/name), env extra, and
 * one more option (opt, value; or NULL), and waits up to banner_ms for
 * the line that says it listens (not for its boot). */
void
serve_start(peer *d, const char *name, const char *config,
            const char *const *env, const char *opt, const char *value,
            int banner_ms)
{
	write_config(name, config);
	serve_spawn(d, name, env, opt, value, banner_ms);
	snprintf(sv_base, sizeof(sv_base), "http://127.0.0.1:%d", d->port);
}

void
serve_spawn(peer *d, const char *name, const char *const *env, const char *opt,
            const char *value, int banner_ms)
{
	char path[128], listen[64];
	int  port = peer_free_port();

	snprintf(path, sizeof(path), "%s/%s", sv_dir, name);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	const char *argv[] = {getenv("MK_MCPKEEP"),
	                      "serve",
	                      "-c",
	                      path,
	                      "--listen",
	                      listen,
	                      "--log",
	                      "warn",
	                      opt,
	                      value,
	                      NULL};
	CHECK(argv[0] != NULL);
	CHECK_EQ(peer_start(d, argv, env, "serving http://[0-9.]+:([0-9]+)",
	                    banner_ms),
	         0);
}

/* Waits up to ms for /readyz to answer 200 (true).  No event tells an
 * HTTP client that the boot's connects ended: /readyz is polled, as an
 * operator's probe does, every 20 ms (the pace only: the deadline is
 * what bounds the wait). */
bool
ready_within(int ms)
{
	nng_time until = nng_clock() + ms;
	long     st    = 0;

	do {
		free(http_try("GET", "/readyz", NULL, NULL, &st));
		if (st == 200) {
			return (true);
		}
		nng_msleep(20);
	} while (nng_clock() < until);
	fprintf(stderr, "/readyz is %ld after %d ms\n", st, ms);
	return (false);
}

bool
state_within(const char *name, const char *state, int ms)
{
	nng_time until     = nng_clock() + ms;
	char     seen[256] = "absent from the list";

	do {
		long  st;
		char *out = http_try("GET", "/api/mcp/clients?limit=100", NULL,
		                     NULL, &st);
		json_t *p = out != NULL ? json_loads(out, 0, NULL) : NULL;
		json_t *c;
		size_t  i;
		bool    ok = false;

		json_array_foreach(json_object_get(p, "clients"), i, c)
		{
			const char *n = json_string_value(json_object_get(
			        json_object_get(c, "config"), "name"));
			const char *s =
			        json_string_value(json_object_get(c, "state"));
			if (n == NULL || s == NULL || strcmp(n, name) != 0) {
				continue;
			}
			char *why =
			        json_dumps(json_object_get(c, "last_failure"),
			                   JSON_ENCODE_ANY | JSON_COMPACT);
			ok = strcmp(s, state) == 0;
			snprintf(seen, sizeof(seen), "%s, last_failure %s", s,
			         why != NULL ? why : "none");
			free(why);
		}
		json_decref(p);
		free(out);
		if (ok) {
			return (true);
		}
		nng_msleep(20);
	} while (nng_clock() < until);
	fprintf(stderr, "%s is not %s after %d ms: last seen %s\n", name,
	        state, ms, seen);
	return (false);
}

/* serve_start, then waits for the boot's end (/readyz 200). */
void
serve_opt(peer *d, const char *name, const char *config,
          const char *const *env, const char *opt, const char *value)
{
	serve_start(d, name, config, env, opt, value, WAIT_MS);
	CHECK(ready_within(WAIT_MS));
}

void
serve(peer *d, const char *name, const char *config, const char *const *env)
{
	serve_opt(d, name, config, env, NULL, NULL);
}

void
sv_begin(peer *mcp)
{
	signal(SIGPIPE, SIG_IGN);
	unsetenv("MCPKEEP_ADMIN_TOKEN"); /* the tests give the daemon theirs */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	CHECK(mkdtemp(sv_dir) != NULL);
	CHECK_EQ(peer_start_inject(mcp, WAIT_MS), 0);
}

void
sv_end(peer *mcp)
{
	char cmd[128];

	peer_stop(mcp);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sv_dir);
	CHECK_EQ(system(cmd), 0);
	curl_global_cleanup();
}

bool
listed(const char *client)
{
	long  st;
	char  want[96];
	char *out = http("GET", "/api/mcp/clients?limit=100", NULL, NULL, &st);
	bool  yes;

	CHECK_EQ(st, 200);
	snprintf(want, sizeof(want), "\"name\":\"%s\"", client);
	yes = strstr(out, want) != NULL;
	free(out);
	return (yes);
}

/* ---- raw connections and event streams -------------------------------- */

int
sv_raw(const char *text)
{
	struct sockaddr_in a     = {.sin_family = AF_INET};
	const char        *colon = strrchr(sv_base, ':');
	int                s     = socket(AF_INET, SOCK_STREAM, 0);
	size_t             n = strlen(text), off = 0;

	if (s < 0 || colon == NULL) {
		return (-1);
	}
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(s);
		return (-1);
	}
	while (off < n) {
		ssize_t k = send(s, text + off, n - off, MSG_NOSIGNAL);
		if (k <= 0) {
			close(s);
			return (-1);
		}
		off += (size_t)k;
	}
	return (s);
}

/* Reads fd until what came (true), it closed (*eof) or ms passed. */
static bool
read_until(int fd, const char *what, int ms, char **seen, bool *eof)
{
	int64_t end = now_ms() + ms;
	char   *buf = calloc(1, 1);
	size_t  len = 0;
	bool    hit = false;

	*eof = false;
	CHECK(buf != NULL);
	while (!hit && !*eof) {
		int64_t       left = end - now_ms();
		struct pollfd p    = {.fd = fd, .events = POLLIN};
		char          chunk[4096];
		ssize_t       n;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			break;
		}
		n = recv(fd, chunk, sizeof(chunk), 0);
		if (n <= 0) {
			*eof = n == 0 || errno == ECONNRESET;
			break;
		}
		CHECK((buf = realloc(buf, len + (size_t)n + 1)) != NULL);
		memcpy(buf + len, chunk, (size_t)n);
		len += (size_t)n;
		buf[len] = '\0';
		hit      = what != NULL && strstr(buf, what) != NULL;
	}
	if (seen != NULL) {
		*seen = buf;
	} else {
		free(buf);
	}
	return (hit);
}

int
sv_events(const char *header, long *status, char **head)
{
	char        req[512], *seen = NULL;
	bool        eof;
	int         fd;
	const char *host = strstr(sv_base, "://");

	snprintf(
	        req, sizeof(req),
	        "GET /api/events HTTP/1.1\r\nHost: %s\r\n%s%sConnection: close\r\n\r\n",
	        host != NULL ? host + 3 : sv_base,
	        header != NULL ? header : "", header != NULL ? "\r\n" : "");
	CHECK((fd = sv_raw(req)) >= 0);
	*status = 0;
	if (read_until(fd, "\r\n\r\n", WAIT_MS, &seen, &eof)) {
		*status = strtol(seen + strcspn(seen, " "), NULL, 10);
	}
	if (*status == 200 && strstr(seen, "event: hello") == NULL) {
		free(seen);
		CHECK(read_until(fd, "event: hello", WAIT_MS, &seen, &eof));
	} else if (*status != 200 && !eof) {
		char *rest = NULL;
		(void)read_until(fd, NULL, WAIT_MS, &rest, &eof);
		CHECK((seen = realloc(seen,
		                      strlen(seen) + strlen(rest) + 1)) !=
		      NULL);
		strcat(seen, rest);
		free(rest);
	}
	if (head != NULL) {
		*head = seen;
	} else {
		free(seen);
	}
	return (fd);
}

bool
sv_until(int fd, const char *what, int ms, char **seen)
{
	bool eof;

	return (read_until(fd, what, ms, seen, &eof));
}

bool
sv_closed(int fd, int ms)
{
	bool eof;

	(void)read_until(fd, NULL, ms, NULL, &eof);
	return (eof);
}

/* The exit status of `env mcpkeep args --url <the daemon>` (a shell
 * command line), its output in sv_dir/cli.out. */
int
sv_cli(const char *env, const char *args)
{
	char line[1200];

	snprintf(line, sizeof(line), "%s %s %s --url %s >%s/cli.out 2>&1", env,
	         getenv("MK_MCPKEEP"), args, sv_base, sv_dir);
	int rc = system(line);
	return (WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
}

/* Whether sv_dir/cli.out holds text. */
bool
sv_cli_said(const char *text)
{
	char  path[300], out[8192] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/cli.out", sv_dir);
	if ((f = fopen(path, "r")) != NULL) {
		out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
		fclose(f);
	}
	if (strstr(out, text) == NULL) {
		fprintf(stderr, "cli.out: %s\n", out);
		return (false);
	}
	return (true);
}
