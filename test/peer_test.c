/*
 * peer_test.c - the peer runner: start real servers (server-everything in
 * its streamableHttp and sse modes, inject.mjs over HTTP), wait for their
 * "listening" line, check that the port answers HTTP, stop them and check
 * that their whole process group is gone.  Also: a peer that exits before
 * it listens, a peer that never prints the line, and a grandchild that
 * would outlive its parent without the group kill, a test that exits
 * without peer_stop, and descriptor leaks.
 *
 * Needs MK_PEERS_DIR = the source folder test/peers, installed by
 * tools/peers.sh.  No sleeps: peer_start waits on the pipe with a deadline.
 */
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer.h"
#include "testutil.h"

#define START_MS 30000

/* test_exit_kills leaves a drain thread running on purpose, in a child. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PEER_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(PEER_TEST_TSAN)
const char *__tsan_default_options(void);
const char *
__tsan_default_options(void)
{
	return ("report_thread_leaks=0");
}
#endif

static char everything_js[1024];
static char inject_mjs[1024];

/* Takes the first body bytes and stops the transfer: an SSE stream never
 * ends by itself. */
static size_t
sink(char *ptr, size_t size, size_t nmemb, void *arg)
{
	return (0);
}

/* The HTTP status of a bodyless request to 127.0.0.1:port/path, or -1
 * when the server does not answer.  The transfer stops at the first body
 * bytes (CURLE_WRITE_ERROR), as a GET of an SSE path stays open. */
static long
http_status(int port, const char *method, const char *path)
{
	CURL    *c = curl_easy_init();
	char     url[256];
	long     code = -1;
	CURLcode rv;

	CHECK(c != NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	rv = curl_easy_perform(c);
	if (rv == CURLE_OK || rv == CURLE_WRITE_ERROR) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	}
	curl_easy_cleanup(c);
	return (code);
}

/* Stops p and checks that nothing of its process group is left. */
static void
stop_and_check(peer *p)
{
	pid_t pgid = p->pid;

	CHECK(pgid > 0);
	CHECK_EQ(kill(-pgid, 0), 0); /* alive before */
	peer_stop(p);
	errno = 0;
	CHECK_EQ(kill(-pgid, 0), -1);
	CHECK_EQ(errno, ESRCH);
	CHECK_EQ(p->started, 0);
	CHECK_EQ(p->out_fd, -1);
	peer_stop(p); /* safe twice */
}

static void
test_everything_streamable(void)
{
	peer        p;
	char        envport[32];
	int         port   = peer_free_port();
	const char *argv[] = {"node", everything_js, "streamableHttp", NULL};
	const char *env[]  = {envport, NULL};

	CHECK(port > 0);
	snprintf(envport, sizeof(envport), "PORT=%d", port);
	CHECK_EQ(
	        peer_start(
	                &p, argv, env,
	                "MCP Streamable HTTP Server listening on port ([0-9]+)",
	                START_MS),
	        0);
	CHECK_EQ(p.port, port);
	/* No session id: the server's own 400. */
	CHECK_EQ(http_status(p.port, "DELETE", "/mcp"), 400);
	stop_and_check(&p);
	/* Nothing answers any more. */
	CHECK_EQ(http_status(port, "DELETE", "/mcp"), -1);
}

static void
test_everything_sse(void)
{
	peer        p;
	char        envport[32];
	int         port   = peer_free_port();
	const char *argv[] = {"node", everything_js, "sse", NULL};
	const char *env[]  = {envport, NULL};

	CHECK(port > 0);
	snprintf(envport, sizeof(envport), "PORT=%d", port);
	CHECK_EQ(peer_start(&p, argv, env,
	                    "Server is running on port ([0-9]+)", START_MS),
	         0);
	CHECK_EQ(p.port, port);
	CHECK_EQ(http_status(p.port, "GET", "/sse"), 200);
	stop_and_check(&p);
}

static void
test_inject_http(void)
{
	peer        p;
	const char *argv[] = {"node", inject_mjs, "http", "--port", "0", NULL};

	CHECK_EQ(peer_start(&p, argv, NULL, "^listening on port ([0-9]+)$",
	                    START_MS),
	         0);
	CHECK(p.port > 0);
	CHECK_EQ(http_status(p.port, "GET", "/admin/counters"), 200);
	CHECK_EQ(http_status(p.port, "GET", "/nowhere"), 404);
	stop_and_check(&p);
	CHECK_EQ(WIFSIGNALED(p.status), 1);
	CHECK_EQ(WTERMSIG(p.status), SIGTERM);
}

/* Output after the match keeps flowing (100k lines >> a 64 KiB pipe): the
 * drain thread reads it, so the child runs to its end.  The extra env
 * entry replaces an inherited variable of the same name. */
static void
test_drain_and_env(void)
{
	peer        p;
	const char *argv[] = {
	        "sh", "-c",
	        "echo \"port $MK_PEER_T\"; i=0; while [ $i -lt 100000 ]; do echo xxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done; echo finished; exit 7",
	        NULL};
	const char *env[] = {"MK_PEER_T=4242", NULL};

	CHECK_EQ(setenv("MK_PEER_T", "1", 1), 0);
	CHECK_EQ(peer_start(&p, argv, env, "^port ([0-9]+)$", START_MS), 0);
	CHECK_EQ(p.port, 4242);
	/* The child can only finish writing if the pipe is being drained. */
	CHECK_EQ(peer_wait_exit(&p, START_MS), 1);
	peer_stop(&p);
	CHECK(WIFEXITED(p.status));
	CHECK_EQ(WEXITSTATUS(p.status), 7);
	/* everything was read, up to the last line */
	CHECK_EQ(p.tail_len, PEER_TAIL);
	for (size_t i = 0; i < 9; i++) {
		CHECK(p.tail[(p.tail_pos + PEER_TAIL - 9 + i) % PEER_TAIL] ==
		      "finished\n"[i]);
	}
	unsetenv("MK_PEER_T");
}

/* A grandchild in the group that ignores SIGTERM is killed and reaped. */
static void
test_group_kill(void)
{
	peer        p;
	pid_t       pgid;
	const char *argv[] = {
	        "sh", "-c",
	        "(trap '' TERM; exec sleep 1000) & echo 'up 1'; wait", NULL};

	CHECK_EQ(peer_start(&p, argv, NULL, "^up ([0-9]+)$", START_MS), 0);
	pgid = p.pid;
	stop_and_check(&p);
	CHECK_EQ(kill(-pgid, 0), -1);
}

static void
test_failures(void)
{
	peer        p;
	const char *dies[] = {"sh", "-c", "echo 'about to fail'; exit 2",
	                      NULL};
	const char *mute[] = {"sh", "-c", "echo quiet; exec sleep 1000", NULL};
	const char *absent[] = {"mk-no-such-program-xyz", NULL};

	CHECK_EQ(peer_start(&p, dies, NULL, "port ([0-9]+)", START_MS), -1);
	CHECK_EQ(p.started, 0);
	CHECK(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 2);
	peer_stop(&p); /* safe after a failed start */

	CHECK_EQ(peer_start(&p, mute, NULL, "port ([0-9]+)", 300), -1);
	errno = 0;
	CHECK_EQ(kill(-p.pid, 0), -1);
	CHECK_EQ(errno, ESRCH);

	CHECK_EQ(peer_start(&p, absent, NULL, "port ([0-9]+)", 300), -1);
	CHECK_EQ(peer_start(&p, mute, NULL, "no group", 300), -1);
	CHECK_EQ(peer_start(&p, mute, NULL, "bad (", 300), -1);

	{
		peer z;
		memset(&z, 0, sizeof(z));
		peer_stop(&z); /* safe on a zeroed peer */
	}
}

/* A test that fails a CHECK exits without peer_stop: exit() still stops
 * the peer's group, and shows what the peer printed last.  Run in a
 * forked child whose stderr comes to us through a pipe. */
static void
test_exit_kills(void)
{
	peer        p;
	int         fds[2], out[2], st;
	pid_t       child, pgid = 0;
	char        said[8192];
	size_t      len = 0;
	ssize_t     n;
	const char *argv[] = {"sh", "-c", "echo 'up 1'; exec sleep 1000",
	                      NULL};

	CHECK_EQ(pipe(fds), 0);
	CHECK_EQ(pipe(out), 0);
	CHECK((child = fork()) >= 0);
	if (child == 0) {
		close(fds[0]);
		close(out[0]);
		dup2(out[1], 2);
		if (peer_start(&p, argv, NULL, "^up ([0-9]+)$", START_MS) !=
		    0) {
			_exit(2);
		}
		CHECK_EQ(write(fds[1], &p.pid, sizeof(p.pid)), sizeof(p.pid));
		exit(1); /* like a failed CHECK */
	}
	close(fds[1]);
	close(out[1]);
	CHECK_EQ(read(fds[0], &pgid, sizeof(pgid)), sizeof(pgid));
	close(fds[0]);
	while ((n = read(out[0], said + len, sizeof(said) - 1 - len)) > 0) {
		len += (size_t)
		        n; /* EOF once the child and its peer are gone */
	}
	close(out[0]);
	said[len] = '\0';
	CHECK_EQ(waitpid(child, &st, 0), child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	errno = 0;
	CHECK_EQ(kill(-pgid, 0), -1); /* stopped and reaped by the exit */
	CHECK_EQ(errno, ESRCH);
	CHECK(strstr(said, "peer sh was still running at exit\n") != NULL);
	CHECK(strstr(said, "---- last output of sh ----\nup 1\n") != NULL);
}

/* No descriptor of ours but 0-2 reaches the child. */
static void
test_no_fd_leak(void)
{
	peer        p;
	int         leak[2];
	const char *argv[] = {
	        "sh", "-c",
	        "n=$(ls /proc/self/fd | wc -l); echo \"fds $n\"; exec sleep 1000",
	        NULL};

	CHECK_EQ(pipe(leak), 0); /* no O_CLOEXEC on purpose */
	CHECK_EQ(peer_start(&p, argv, NULL, "^fds ([0-9]+)$", START_MS), 0);
	/* 0, 1, 2 and the fd ls opens on /proc/self/fd */
	CHECK_EQ(p.port, 4);
	stop_and_check(&p);
	close(leak[0]);
	close(leak[1]);
}

int
main(void)
{
	const char *dir = peer_dir();
	struct stat st;

	if (dir == NULL) {
		fprintf(stderr, "MK_PEERS_DIR is not set\n");
		return (1);
	}
	snprintf(
	        everything_js, sizeof(everything_js),
	        "%s/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
	        dir);
	snprintf(inject_mjs, sizeof(inject_mjs), "%s/inject.mjs", dir);
	if (stat(everything_js, &st) != 0) {
		fprintf(stderr, "%s missing: run tools/peers.sh\n",
		        everything_js);
		return (1);
	}
	CHECK_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);

	RUN(test_failures);
	RUN(test_exit_kills);
	RUN(test_no_fd_leak);
	RUN(test_drain_and_env);
	RUN(test_group_kill);
	RUN(test_inject_http);
	RUN(test_everything_streamable);
	RUN(test_everything_sse);

	curl_global_cleanup();
	return (0);
}
