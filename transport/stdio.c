/*
 * stdio.c - the stdio transport: an MCP server as a child process speaking
 * newline-delimited JSON-RPC on its stdin and stdout.
 *
 * DESIGN: the child runs in its own process group (so `npx` and what it
 * starts go together), with only fds 0-2: stdin is one end of a unix
 * socketpair (so a write to a dead child is EPIPE from send(MSG_NOSIGNAL),
 * never SIGPIPE), stdout and stderr are pipes.  Its environment is only a
 * small inherited base (PATH, HOME, USER, LANG, LC_ALL, TMPDIR) plus the
 * config's envs ("NAME" inherits NAME, "NAME=value" sets it).  A pidfd
 * tells the loop when it exits.  stdout lines are parsed as JSON and
 * handed to the session; a line that is not JSON is skipped and counted.
 * stderr goes into a ring whose tail ends up in error messages.
 *
 * Close states (after close(), driven by a ticker):
 *   CLOSE_EOF   stdin closed; wait up to CLOSE_GRACE_MS for the exit
 *   CLOSE_TERM  SIGTERM to the group; wait up to CLOSE_GRACE_MS
 *   CLOSE_KILL  SIGKILL to the group; wait for the pidfd
 * On exit the child is reaped (no zombie) and the conn frees itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec/jsonrpc.h"
#include "codec/text.h"
#include "mcpkeep.h"
#include "transport/conn.h"

#define CLOSE_GRACE_MS 2000
#define ERR_RING       4096 /* bytes of stderr kept */
#define ERR_TAIL       300  /* bytes of it quoted in an error */
#define ERR_FIRST      200  /* bytes of its first error line kept */
#define READ_CHUNK     65536

extern char **environ;

enum { CLOSE_NONE, CLOSE_EOF, CLOSE_TERM, CLOSE_KILL };

typedef struct stdio_conn {
	tp_conn base;               /* ops, loop, upcalls */
	pid_t   pid;                /* the child, also its process group */
	int     pidfd;              /* readable when it exited */
	int     in_fd;              /* our end of its stdin (socket) */
	int     out_fd;             /* its stdout */
	int     err_fd;             /* its stderr */
	char   *wbuf;               /* bytes waiting to go to stdin */
	size_t  wlen;               /* bytes in wbuf */
	size_t  wcap;               /* allocated wbuf */
	char   *line;               /* stdout line being assembled */
	size_t  line_len;           /* bytes in line */
	size_t  line_cap;           /* allocated line */
	size_t  max;                /* bytes per line */
	char    ring[ERR_RING];     /* stderr tail */
	size_t  ring_pos;           /* next write position */
	bool    ring_full;          /* ring wrapped */
	char    first[ERR_FIRST];   /* the first stderr line that reads
	                             * as an error (else the first line) */
	bool      first_err;        /* first is an error line */
	char      eline[ERR_FIRST]; /* the stderr line being read */
	size_t    eline_len;        /* its bytes (cut at ERR_FIRST - 1) */
	uint64_t  garbage;          /* stdout lines that were not JSON */
	mcp_error spawn_err;        /* why the spawn failed, if it did */
	bool      spawn_failed;     /* report spawn_err on open */
	bool      exited;           /* reaped */
	int       status;           /* waitpid status */
	int       close_state;      /* see the diagram */
	int64_t   close_deadline;   /* for the close state */
	tp_defer  defer;            /* announces opened */
	tp_ticker ticker;           /* close escalation */
	tp_owned  owned;            /* while closing */
	int       busy;             /* upcalls on the stack */
	bool      closed;           /* close() was called */
} stdio_conn;

static void conn_destroy(stdio_conn *c);
static void on_pidfd(void *arg, short revents);

/* The last stderr bytes as one line. */
static void
err_tail(const stdio_conn *c, char *out, size_t cap)
{
	size_t have = c->ring_full ? ERR_RING : c->ring_pos;
	size_t n    = have < ERR_TAIL ? have : ERR_TAIL;
	size_t j    = 0;

	for (size_t i = 0; i < n && j + 1 < cap; i++) {
		unsigned char ch =
		        (unsigned char)
		                c->ring[(c->ring_pos + ERR_RING - n + i) %
		                        ERR_RING];
		out[j++] = ch < 0x20 ? ' ' : (char)ch;
	}
	out[j] = '\0';
	/* collapse runs of spaces so the quote stays readable */
	size_t k = 0;
	for (size_t i = 0; out[i] != '\0'; i++) {
		if (!(out[i] == ' ' && (k == 0 || out[k - 1] == ' '))) {
			out[k++] = out[i];
		}
	}
	while (k > 0 && out[k - 1] == ' ') {
		k--;
	}
	out[k] = '\0';
}

static bool
error_line(const char *line)
{
	static const char *const words[] = {"error",   "fatal",     "cannot",
	                                    "can't",   "failed",    "denied",
	                                    "no such", "not found", "invalid",
	                                    "panic",   "exception", NULL};

	for (int i = 0; words[i] != NULL; i++) {
		if (strcasestr(line, words[i]) != NULL) {
			return (true);
		}
	}
	return (false);
}

/* A stderr line ended: the first error line is kept (else the first
 * line), since what a failing server says first is usually why. */
static void
err_line_end(stdio_conn *c)
{
	c->eline[c->eline_len] = '\0';
	c->eline_len           = 0;
	if (c->first_err || c->eline[strspn(c->eline, " \t\r")] == '\0') {
		return;
	}
	if (c->first[0] == '\0' || error_line(c->eline)) {
		snprintf(c->first, sizeof(c->first), "%s", c->eline);
		c->first_err = error_line(c->eline);
	}
}

static void
err_byte(stdio_conn *c, char ch)
{
	c->ring[c->ring_pos] = ch;
	c->ring_pos          = (c->ring_pos + 1) % ERR_RING;
	c->ring_full |= c->ring_pos == 0;
	if (ch == '\n') {
		err_line_end(c);
	} else if (c->eline_len + 1 < ERR_FIRST) {
		c->eline[c->eline_len++] = (unsigned char)ch < 0x20 ? ' ' : ch;
	}
}

/* "; stderr: <first error line> ... <tail>", or "" when it said nothing */
static void
err_quote(stdio_conn *c, char *out, size_t cap)
{
	char tail[ERR_TAIL + 1];

	if (c->eline_len > 0) {
		err_line_end(c); /* a last line without its newline */
	}
	err_tail(c, tail, sizeof(tail));
	if (tail[0] == '\0') {
		out[0] = '\0';
	} else if (c->first[0] != '\0' && strstr(tail, c->first) == NULL) {
		snprintf(out, cap, "; stderr: %s ... %s", c->first, tail);
	} else {
		snprintf(out, cap, "; stderr: %s", tail);
	}
}

static void
exit_error(stdio_conn *c, mcp_error *e)
{
	char quote[ERR_FIRST + ERR_TAIL + 32];

	err_quote(c, quote, sizeof(quote));
	if (WIFSIGNALED(c->status)) {
		mcp_error_set(e, MCP_E_LOST,
		              "server process was killed by signal %d%s",
		              WTERMSIG(c->status), quote);
	} else {
		mcp_error_set(e, MCP_E_LOST,
		              "server process exited with status %d%s",
		              WEXITSTATUS(c->status), quote);
	}
}

static void
unwatch_close(stdio_conn *c, int *fdp)
{
	if (*fdp >= 0) {
		tp_loop_unwatch(c->base.loop, *fdp);
		close(*fdp);
		*fdp = -1;
	}
}

/* Delivers one complete stdout line. */
static void
on_line(stdio_conn *c, char *s, size_t len)
{
	json_error_t je;
	json_t      *msg;

	while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == ' ')) {
		len--;
	}
	if (len == 0) {
		return;
	}
	if ((msg = json_loadb(s, len, 0, &je)) == NULL) {
		c->garbage++; /* a log line on stdout: skip it */
		return;
	}
	if (!c->closed) {
		c->busy++;
		c->base.up.message(c->base.up.arg, msg, 0);
		c->busy--;
	}
	json_decref(msg);
}

static void
kill_group(stdio_conn *c, int sig)
{
	if (c->pid > 0) {
		(void)kill(-c->pid, sig);
	}
}

/* Reads what stdout has; returns false on EOF or a fatal problem. */
static bool
read_out(stdio_conn *c)
{
	char buf[READ_CHUNK];

	for (;;) {
		ssize_t n = read(c->out_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return (errno == EAGAIN);
		}
		if (n == 0) {
			return (false);
		}
		for (ssize_t i = 0; i < n && !c->closed; i++) {
			if (buf[i] == '\n') {
				on_line(c, c->line, c->line_len);
				c->line_len = 0;
				continue;
			}
			if (c->line_len == c->max) {
				mcp_error e;
				mcp_error_set(
				        &e, MCP_E_PROTOCOL,
				        "server wrote a stdout line over %zu bytes",
				        c->max);
				kill_group(c, SIGKILL);
				c->busy++;
				c->base.up.lost(c->base.up.arg, &e);
				c->busy--;
				return (false);
			}
			if (c->line_len == c->line_cap) {
				size_t ncap =
				        c->line_cap ? 2 * c->line_cap : 4096;
				char *nl;
				ncap = ncap > c->max ? c->max : ncap;
				if ((nl = realloc(c->line, ncap)) == NULL) {
					return (false);
				}
				c->line     = nl;
				c->line_cap = ncap;
			}
			c->line[c->line_len++] = buf[i];
		}
		if (c->closed) {
			return (false);
		}
	}
}

static void
on_out(void *arg, short revents)
{
	stdio_conn *c = arg;

	c->busy++;
	if (!read_out(c)) {
		unwatch_close(c, &c->out_fd);
	}
	c->busy--;
	if (c->closed && c->busy == 0 && c->exited) {
		conn_destroy(c);
	}
}

static void
on_err(void *arg, short revents)
{
	stdio_conn *c = arg;
	char        buf[1024];
	ssize_t     n;

	while ((n = read(c->err_fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			err_byte(c, buf[i]);
		}
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		unwatch_close(c, &c->err_fd);
	}
}

static bool
flush_in(stdio_conn *c)
{
	while (c->wlen > 0) {
		ssize_t n = send(c->in_fd, c->wbuf, c->wlen, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return (errno == EAGAIN); /* EPIPE: the pidfd tells */
		}
		memmove(c->wbuf, c->wbuf + n, c->wlen - (size_t)n);
		c->wlen -= (size_t)n;
	}
	return (true);
}

static void
on_in(void *arg, short revents)
{
	stdio_conn *c = arg;

	if (!flush_in(c) || c->wlen == 0) {
		tp_loop_unwatch(c->base.loop, c->in_fd);
	}
}

static int
stdio_send(tp_conn *base, int64_t id, const char *json, size_t len,
           int timeout_ms, const char *const *headers)
{
	stdio_conn *c    = (stdio_conn *)base;
	bool        idle = c->wlen == 0;

	if (c->closed || c->in_fd < 0 || c->exited) {
		return (MK_ECLOSED);
	}
	if (c->wlen + len + 1 > c->wcap) {
		size_t ncap = (c->wlen + len + 1) * 2;
		char  *nb   = realloc(c->wbuf, ncap);
		if (nb == NULL) {
			return (MK_ENOMEM);
		}
		c->wbuf = nb;
		c->wcap = ncap;
	}
	memcpy(c->wbuf + c->wlen, json, len);
	c->wlen += len;
	c->wbuf[c->wlen++] = '\n';
	if (idle && flush_in(c) && c->wlen > 0) {
		tp_loop_watch(c->base.loop, c->in_fd, POLLOUT, on_in, c);
	}
	return (0);
}

static void
stdio_abort(tp_conn *base, int64_t id)
{
	(void)base; /* one stream: nothing per request to stop */
	(void)id;
}

static void
stdio_set_version(tp_conn *base, const char *version)
{
	(void)base;
	(void)version;
}

static void
reap(stdio_conn *c)
{
	if (!c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid) {
		c->exited = true;
		kill_group(c, SIGTERM); /* stragglers it left behind */
		unwatch_close(c, &c->pidfd);
	}
}

static void
on_pidfd(void *arg, short revents)
{
	stdio_conn *c = arg;
	mcp_error   e;

	reap(c);
	if (!c->exited) {
		return;
	}
	c->busy++;
	if (c->out_fd >= 0 && !read_out(c)) {
		unwatch_close(c, &c->out_fd); /* its last words first */
	}
	if (c->err_fd >= 0) {
		on_err(c, POLLIN);
	}
	if (!c->closed) {
		exit_error(c, &e);
		c->base.up.lost(c->base.up.arg, &e);
	}
	c->busy--;
	if (c->closed && c->busy == 0) {
		conn_destroy(c);
	}
}

static int64_t
close_next(void *arg)
{
	stdio_conn *c = arg;

	return (c->close_state == CLOSE_EOF || c->close_state == CLOSE_TERM
	                ? c->close_deadline
	                : -1);
}

static void
close_expire(void *arg, int64_t now)
{
	stdio_conn *c = arg;

	c->close_state++;
	c->close_deadline = now + (int64_t)CLOSE_GRACE_MS * 1000000;
	kill_group(c, c->close_state == CLOSE_TERM ? SIGTERM : SIGKILL);
}

static void
conn_destroy(stdio_conn *c)
{
	if (c->pid > 0 && !c->exited) {
		kill_group(c, SIGKILL);
		while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
		}
	}
	if (c->in_fd >= 0) {
		tp_loop_unwatch(c->base.loop, c->in_fd);
		close(c->in_fd);
	}
	unwatch_close(c, &c->out_fd);
	unwatch_close(c, &c->err_fd);
	unwatch_close(c, &c->pidfd);
	tp_loop_ticker_del(c->base.loop, &c->ticker);
	tp_loop_undefer(c->base.loop, &c->defer);
	tp_loop_disown(c->base.loop, &c->owned);
	free(c->wbuf);
	free(c->line);
	free(c);
}

static void
conn_kill(void *arg)
{
	conn_destroy(arg); /* SIGKILL and reap */
}

static void
stdio_close(tp_conn *base)
{
	stdio_conn *c = (stdio_conn *)base;

	c->closed = true;
	if (c->in_fd >= 0) {
		tp_loop_unwatch(c->base.loop, c->in_fd);
		close(c->in_fd); /* EOF: a polite server exits now */
		c->in_fd = -1;
	}
	if (c->exited || c->pid <= 0) {
		if (c->busy == 0) {
			conn_destroy(c);
		}
		return;
	}
	c->close_state    = CLOSE_EOF;
	c->close_deadline = tp_now_ns() + (int64_t)CLOSE_GRACE_MS * 1000000;
	tp_loop_ticker_add(c->base.loop, &c->ticker);
	tp_loop_own(c->base.loop, &c->owned);
}

static const tp_conn_ops stdio_ops = {
        .send        = stdio_send,
        .abort       = stdio_abort,
        .set_version = stdio_set_version,
        .close       = stdio_close,
};

static void
announce(void *arg)
{
	stdio_conn *c = arg;

	c->busy++;
	c->base.up.opened(c->base.up.arg,
	                  c->spawn_failed ? &c->spawn_err : NULL);
	c->busy--;
	if (c->closed && c->busy == 0 && (c->exited || c->pid <= 0)) {
		conn_destroy(c);
	}
}

/* The child's environment: the inherited base, then the config's. */
static char **
child_env(const char *const *envs)
{
	static const char *base[] = {"PATH", "HOME",   "USER",
	                             "LANG", "LC_ALL", "TMPDIR"};
	size_t             nb = sizeof(base) / sizeof(base[0]), ne = 0, n = 0;
	char             **env;

	while (envs != NULL && envs[ne] != NULL) {
		ne++;
	}
	if ((env = calloc(nb + ne + 1, sizeof(*env))) == NULL) {
		return (NULL);
	}
	for (size_t i = 0; i < nb + ne; i++) {
		const char *e = i < nb ? base[i] : envs[i - nb];
		const char *v;
		char       *kv;

		if (strchr(e, '=') != NULL) {
			kv = strdup(e);
		} else if ((v = getenv(e)) != NULL &&
		           asprintf(&kv, "%s=%s", e, v) < 0) {
			kv = NULL;
		} else if (v == NULL) {
			continue; /* not set here: nothing to inherit */
		}
		if (kv == NULL) {
			goto fail;
		}
		env[n++] = kv;
	}
	return (env);
fail:
	for (size_t i = 0; i < n; i++) {
		free(env[i]);
	}
	free(env);
	return (NULL);
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return (fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK));
}

/* Spawns the child; on failure fills c->spawn_err and returns -1. */
static int
spawn(stdio_conn *c, const mcp_config *cfg)
{
	int sv[2] = {-1, -1}, op[2] = {-1, -1}, ep[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t          at;
	sigset_t                   none, dfl;
	size_t                     na   = 0;
	char                     **argv = NULL, **env = NULL;
	int                        rv = -1, err;

	while (cfg->args != NULL && cfg->args[na] != NULL) {
		na++;
	}
	if ((argv = calloc(na + 2, sizeof(*argv))) == NULL ||
	    (env = child_env(cfg->envs)) == NULL) {
		mcp_error_set(&c->spawn_err, MCP_E_LOCAL, "out of memory");
		goto out;
	}
	argv[0] = (char *)cfg->command;
	for (size_t i = 0; i < na; i++) {
		argv[i + 1] = (char *)cfg->args[i];
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
	    pipe2(op, O_CLOEXEC) != 0 || pipe2(ep, O_CLOEXEC) != 0) {
		mcp_error_set(&c->spawn_err, MCP_E_LOCAL,
		              "cannot create pipes: %s", strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&dfl);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at,
	                         POSIX_SPAWN_SETPGROUP |
	                                 POSIX_SPAWN_SETSIGMASK |
	                                 POSIX_SPAWN_SETSIGDEF);
	err = posix_spawnp(&c->pid, cfg->command, &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (err != 0) {
		c->pid = 0;
		mcp_error_set(&c->spawn_err, MCP_E_CONNECT,
		              "cannot start \"%.200s\": %s", cfg->command,
		              strerror(err));
		goto out;
	}
	c->in_fd  = sv[0];
	c->out_fd = op[0];
	c->err_fd = ep[0];
	sv[0] = op[0] = ep[0] = -1;
	if ((c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0)) < 0 ||
	    set_nonblock(c->in_fd) != 0 || set_nonblock(c->out_fd) != 0 ||
	    set_nonblock(c->err_fd) != 0 ||
	    tp_loop_watch(c->base.loop, c->out_fd, POLLIN, on_out, c) != 0 ||
	    tp_loop_watch(c->base.loop, c->err_fd, POLLIN, on_err, c) != 0 ||
	    tp_loop_watch(c->base.loop, c->pidfd, POLLIN, on_pidfd, c) != 0) {
		mcp_error_set(&c->spawn_err, MCP_E_LOCAL,
		              "cannot watch the server process: %s",
		              strerror(errno));
		goto out;
	}
	rv = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (sv[i] >= 0) {
			close(sv[i]);
		}
		if (op[i] >= 0) {
			close(op[i]);
		}
		if (ep[i] >= 0) {
			close(ep[i]);
		}
	}
	free(argv);
	text_strv_free(env);
	return (rv);
}

int
tp_stdio_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
              const tp_conn_up *up)
{
	stdio_conn *c;

	*cp = NULL;
	if (cfg->command == NULL || cfg->command[0] == '\0') {
		return (MK_EINVAL);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		return (MK_ENOMEM);
	}
	c->base.ops  = &stdio_ops;
	c->base.loop = l;
	c->base.up   = *up;
	c->max   = cfg->max_message ? cfg->max_message : CODEC_JR_MAX_DEFAULT;
	c->in_fd = c->out_fd = c->err_fd = c->pidfd = -1;
	c->defer  = (tp_defer) {.fn = announce, .arg = c};
	c->ticker = (tp_ticker) {
	        .next = close_next, .expire = close_expire, .arg = c};
	c->owned = (tp_owned) {.kill = conn_kill, .arg = c};
	if (spawn(c, cfg) != 0) {
		c->spawn_failed = true;
		if (c->pid > 0) {
			kill_group(c, SIGKILL);
		}
	}
	tp_loop_defer(l, &c->defer);
	*cp = &c->base;
	return (0);
}
