/*
 * peer.c - run a real peer server for an integration test (see peer.h).
 */
#include "peer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PEER_STOP_MS 5000 /* SIGTERM -> SIGKILL grace */
#define PEER_LINE    4096 /* longest line matched; longer ones are cut */

/* The peers running now, stopped at exit() so that a failed CHECK (which
 * exits without peer_stop) leaves nothing behind and shows what each peer
 * printed last: a daemon's own report of why it died is often the only
 * clue.  A started peer lives until peer_stop, which every test calls
 * before the peer's storage goes (exit() runs while the frames that hold
 * them are still there). */
#define PEER_MAX_LIVE 64
static pthread_mutex_t live_mtx = PTHREAD_MUTEX_INITIALIZER;
static peer           *live[PEER_MAX_LIVE];
static pthread_once_t  live_once = PTHREAD_ONCE_INIT;

static void stop(peer *p, int tell);

static void
live_stop_all(void)
{
	peer *left[PEER_MAX_LIVE];

	pthread_mutex_lock(&live_mtx);
	memcpy(left, live, sizeof(left));
	pthread_mutex_unlock(&live_mtx);
	for (int i = 0; i < PEER_MAX_LIVE; i++) {
		if (left[i] != NULL) {
			stop(left[i], 1);
		}
	}
}

static void
live_init(void)
{
	atexit(live_stop_all);
}

/* Replaces the entry from by to (NULL = a free slot). */
static void
live_swap(const peer *from, peer *to)
{
	pthread_once(&live_once, live_init);
	pthread_mutex_lock(&live_mtx);
	for (int i = 0; i < PEER_MAX_LIVE; i++) {
		if (live[i] == from) {
			live[i] = to;
			break;
		}
	}
	pthread_mutex_unlock(&live_mtx);
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Milliseconds left until deadline, for poll(): 0 when past. */
static int
left_ms(long long deadline)
{
	long long left = deadline - now_ms();

	return (left <= 0 ? 0 : left > 1000000 ? 1000000 : (int)left);
}

static void
tail_add(peer *p, const char *buf, size_t n)
{
	if (p->echo) {
		fwrite(buf, 1, n, stderr);
	}
	for (size_t i = 0; i < n; i++) {
		p->tail[p->tail_pos] = buf[i];
		p->tail_pos          = (p->tail_pos + 1) % PEER_TAIL;
	}
	p->tail_len =
	        p->tail_len + n > PEER_TAIL ? PEER_TAIL : p->tail_len + n;
}

/* Prints the latest output (call only while no drain thread runs). */
static void
tail_print(const peer *p)
{
	size_t start = (p->tail_pos + PEER_TAIL - p->tail_len) % PEER_TAIL;

	if (p->tail_len == 0) {
		fprintf(stderr, "(%s printed nothing)\n", p->name);
		return;
	}
	fprintf(stderr, "---- last output of %s ----\n", p->name);
	for (size_t i = 0; i < p->tail_len; i++) {
		fputc(p->tail[(start + i) % PEER_TAIL], stderr);
	}
	if (p->tail[(p->tail_pos + PEER_TAIL - 1) % PEER_TAIL] != '\n') {
		fputc('\n', stderr);
	}
	fprintf(stderr, "---- end of output ----\n");
}

int
peer_said(const peer *p, const char *text)
{
	char  *flat  = malloc(PEER_TAIL + 1);
	size_t start = (p->tail_pos + PEER_TAIL - p->tail_len) % PEER_TAIL;
	int    yes;

	if (flat == NULL) {
		return (0);
	}
	for (size_t i = 0; i < p->tail_len; i++) {
		flat[i] = p->tail[(start + i) % PEER_TAIL];
	}
	flat[p->tail_len] = '\0';
	yes               = strstr(flat, text) != NULL;
	free(flat);
	return (yes);
}

static void *
drain_main(void *arg)
{
	peer         *p = arg;
	struct pollfd fds[2];
	char          buf[4096];
	int           budget = -1; /* reads left once told to stop */

	fds[0] = (struct pollfd) {.fd = p->out_fd, .events = POLLIN};
	fds[1] = (struct pollfd) {.fd = p->wake[0], .events = POLLIN};
	while (budget != 0) {
		ssize_t got;

		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR) {
				continue;
			}
			break;
		}
		/* Told to stop: take only what is in the pipe already, and
		 * not forever (an escaped writer could keep it full). */
		if (fds[1].revents != 0 && budget < 0) {
			budget = 256;
		}
		if (fds[0].revents == 0) {
			if (budget > 0) {
				break;
			}
			continue;
		}
		got = read(p->out_fd, buf, sizeof(buf));
		if (got > 0) {
			tail_add(p, buf, (size_t)got);
		} else if (got == 0 || errno != EINTR) {
			break; /* EOF: every writer is gone */
		}
		if (budget > 0) {
			budget--;
		}
	}
	return (NULL);
}

/* Builds environ plus extra ("NAME=value", replacing NAME).  The array is
 * malloc'd, its strings are borrowed.  NULL when out of memory. */
static char **
make_env(const char *const *extra)
{
	size_t n = 0, m = 0, k = 0;
	char **envp;

	while (environ[n] != NULL) {
		n++;
	}
	while (extra != NULL && extra[m] != NULL) {
		m++;
	}
	if ((envp = calloc(n + m + 1, sizeof(*envp))) == NULL) {
		return (NULL);
	}
	for (size_t i = 0; i < n; i++) {
		const char *eq  = strchr(environ[i], '=');
		size_t      len = eq ? (size_t)(eq - environ[i] + 1) : 0;
		int         dup = 0;

		for (size_t j = 0; len != 0 && j < m; j++) {
			dup |= strncmp(environ[i], extra[j], len) == 0;
		}
		if (!dup) {
			envp[k++] = environ[i];
		}
	}
	for (size_t j = 0; j < m; j++) {
		envp[k++] = (char *)extra[j];
	}
	envp[k] = NULL;
	return (envp);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Waits up to ms for the child to exit (without reaping it): 1 if it has
 * exited, 0 if not. */
static int
wait_exit(const peer *p, int ms)
{
	long long deadline = now_ms() + ms;
	siginfo_t si;

	if (p->pidfd >= 0) {
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		int           rv;

		while ((rv = poll(&pf, 1, left_ms(deadline))) < 0 &&
		       errno == EINTR) {
		}
		return (rv > 0);
	}
	/* No pidfd (kernel < 5.3, valgrind): check every 10 ms. */
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)p->pid, &si,
		           WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == p->pid) {
			return (1);
		}
		if (left_ms(deadline) == 0) {
			return (0);
		}
		poll(NULL, 0, 10);
	}
}

int
peer_wait_exit(peer *p, int timeout_ms)
{
	return (p != NULL && p->started ? wait_exit(p, timeout_ms) : 1);
}

/* Stops p (see peer_stop); tell: show its last output even when it was
 * still running (a test that failed with the peer up). */
static void
stop(peer *p, int tell)
{
	int already, graceful = 1;

	if (p == NULL || !p->started) {
		return;
	}
	already = wait_exit(p, 0);
	if (!already) {
		kill(-p->pid, SIGTERM);
		graceful = wait_exit(p, PEER_STOP_MS);
	}
	/* The child is a zombie (or stuck): its pid, the group id, cannot be
	 * reused yet, so this reaches only the peer's group.  Forget it for
	 * exit() before reaping, for the same reason. */
	kill(-p->pid, SIGKILL);
	live_swap(p, NULL);
	while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
	}
	/* Orphaned members of the group are our children (subreaper). */
	while (waitpid(-p->pid, NULL, 0) > 0 || errno == EINTR) {
	}

	if (write(p->wake[1], "x", 1) < 0) {
		/* the thread also stops at EOF; nothing else to do */
	}
	pthread_join(p->drain, NULL);
	close_fd(&p->wake[0]);
	close_fd(&p->wake[1]);
	close_fd(&p->out_fd);
	close_fd(&p->pidfd);
	p->started = 0;

	if (already) {
		if (WIFEXITED(p->status)) {
			fprintf(stderr,
			        "peer %s exited by itself, status %d\n",
			        p->name, WEXITSTATUS(p->status));
		} else {
			fprintf(stderr, "peer %s died by itself, signal %d\n",
			        p->name, WTERMSIG(p->status));
		}
		tail_print(p);
	} else if (tell) {
		fprintf(stderr, "peer %s was still running at exit\n",
		        p->name);
		tail_print(p);
	} else if (!graceful) {
		fprintf(stderr,
		        "peer %s did not exit within %d ms of SIGTERM\n",
		        p->name, PEER_STOP_MS);
		tail_print(p);
	} else if (WIFEXITED(p->status) ? WEXITSTATUS(p->status) != 0
	                                : WTERMSIG(p->status) != SIGTERM) {
		/* a test may check the status; this shows why */
		fprintf(stderr, "peer %s stopped with status %#x\n", p->name,
		        (unsigned)p->status);
		tail_print(p);
	}
}

void
peer_stop(peer *p)
{
	stop(p, 0);
}

/* Kills and reaps a peer that never got its drain thread. */
static void
abort_start(peer *p)
{
	if (p->pid > 0) {
		kill(-p->pid, SIGKILL);
		while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
		}
		while (waitpid(-p->pid, NULL, 0) > 0 || errno == EINTR) {
		}
	}
	close_fd(&p->wake[0]);
	close_fd(&p->wake[1]);
	close_fd(&p->out_fd);
	close_fd(&p->pidfd);
	tail_print(p);
}

/* Tries one complete line against re: 1 and p->port set on a match. */
static int
match_line(peer *p, const regex_t *re, const char *line)
{
	regmatch_t m[2];
	char       num[16];
	size_t     len;
	long       port;

	if (regexec(re, line, 2, m, 0) != 0 || m[1].rm_so < 0) {
		return (0);
	}
	len = (size_t)(m[1].rm_eo - m[1].rm_so);
	if (len == 0 || len >= sizeof(num)) {
		return (0);
	}
	memcpy(num, line + m[1].rm_so, len);
	num[len] = '\0';
	port     = strtol(num, NULL, 10);
	if (port < 1 || port > 65535) {
		return (0);
	}
	p->port = (int)port;
	return (1);
}

/* Reads the pipe until a line matches, EOF, the child's exit or the
 * deadline.  Returns 0 on a match, else -1 after saying why. */
static int
wait_line(peer *p, const regex_t *re, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	char      line[PEER_LINE];
	size_t    len = 0;
	char      buf[4096];

	for (;;) {
		struct pollfd fds[2] = {
		        {.fd = p->out_fd, .events = POLLIN},
		        {.fd = p->pidfd, .events = POLLIN},
		};
		int rv = poll(fds, p->pidfd >= 0 ? 2 : 1, left_ms(deadline));

		if (rv < 0 && errno == EINTR) {
			continue;
		}
		if (rv < 0) {
			fprintf(stderr, "peer %s: poll: %s\n", p->name,
			        strerror(errno));
			return (-1);
		}
		if (rv == 0) {
			fprintf(stderr,
			        "peer %s: no line matching the pattern in %d ms\n",
			        p->name, timeout_ms);
			return (-1);
		}
		if (fds[0].revents != 0) {
			ssize_t n = read(p->out_fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR) {
				continue;
			}
			if (n <= 0) {
				fprintf(stderr,
				        "peer %s: output closed before a line matched\n",
				        p->name);
				return (-1);
			}
			tail_add(p, buf, (size_t)n);
			for (ssize_t i = 0; i < n; i++) {
				if (buf[i] != '\n' && len < sizeof(line) - 1) {
					line[len++] = buf[i];
				}
				if (buf[i] != '\n') {
					continue;
				}
				line[len] = '\0';
				len       = 0;
				if (match_line(p, re, line)) {
					return (0);
				}
			}
			continue; /* drain the pipe before trusting pidfd */
		}
		if (p->pidfd >= 0 && fds[1].revents != 0) {
			fprintf(stderr,
			        "peer %s: exited before a line matched\n",
			        p->name);
			return (-1);
		}
	}
}

/* posix_spawn attributes: own process group, no blocked signals, usual
 * dispositions for the signals a test process may ignore. */
static int
make_attr(posix_spawnattr_t *attr)
{
	sigset_t none, deflt;
	int      rv;

	sigemptyset(&none);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGPIPE);
	sigaddset(&deflt, SIGINT);
	sigaddset(&deflt, SIGQUIT);
	sigaddset(&deflt, SIGTERM);
	sigaddset(&deflt, SIGHUP);
	sigaddset(&deflt, SIGCHLD);
	sigaddset(&deflt, SIGUSR1);
	sigaddset(&deflt, SIGUSR2);
	if ((rv = posix_spawnattr_init(attr)) != 0) {
		return (rv);
	}
	if ((rv = posix_spawnattr_setflags(
	             attr,
	             POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                     POSIX_SPAWN_SETSIGDEF)) != 0 ||
	    (rv = posix_spawnattr_setpgroup(attr, 0)) != 0 ||
	    (rv = posix_spawnattr_setsigmask(attr, &none)) != 0 ||
	    (rv = posix_spawnattr_setsigdefault(attr, &deflt)) != 0) {
		posix_spawnattr_destroy(attr);
	}
	return (rv);
}

/* Spawns argv with stdin /dev/null and stdout+stderr into wfd; fills
 * p->pid.  Returns 0 or an errno value. */
static int
spawn(peer *p, const char *const *argv, const char *const *env, int wfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t          attr;
	char                     **envp;
	int                        rv;

	if ((envp = make_env(env)) == NULL) {
		return (ENOMEM);
	}
	if ((rv = make_attr(&attr)) != 0) {
		free(envp);
		return (rv);
	}
	if ((rv = posix_spawn_file_actions_init(&fa)) != 0) {
		posix_spawnattr_destroy(&attr);
		free(envp);
		return (rv);
	}
	/* dup2 clears FD_CLOEXEC on 1 and 2; closefrom(3) makes sure that no
	 * descriptor opened elsewhere without O_CLOEXEC leaks either. */
	if ((rv = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
	                                           O_RDONLY, 0)) == 0 &&
	    (rv = posix_spawn_file_actions_adddup2(&fa, wfd, 1)) == 0 &&
	    (rv = posix_spawn_file_actions_adddup2(&fa, wfd, 2)) == 0 &&
	    (rv = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0) {
		rv = posix_spawnp(&p->pid, argv[0], &fa, &attr,
		                  (char *const *)argv, envp);
	}
	if (rv != 0) {
		p->pid = 0;
	}
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(envp);
	return (rv);
}

int
peer_start(peer *p, const char *const *argv, const char *const *env,
           const char *pattern, int timeout_ms)
{
	regex_t     re;
	int         pfd[2] = {-1, -1};
	int         rv;
	const char *echo = getenv("MK_PEER_ECHO");

	memset(p, 0, sizeof(*p));
	p->out_fd  = -1;
	p->pidfd   = -1;
	p->wake[0] = p->wake[1] = -1;
	p->echo                 = echo != NULL && strcmp(echo, "1") == 0;
	snprintf(p->name, sizeof(p->name), "%s",
	         argv != NULL && argv[0] != NULL ? argv[0] : "?");
	if (argv == NULL || argv[0] == NULL || pattern == NULL) {
		fprintf(stderr, "peer_start: no command or pattern\n");
		return (-1);
	}
	if ((rv = regcomp(&re, pattern, REG_EXTENDED)) != 0) {
		char msg[256];
		regerror(rv, &re, msg, sizeof(msg));
		fprintf(stderr, "peer_start: bad pattern '%s': %s\n", pattern,
		        msg);
		return (-1);
	}
	if (re.re_nsub < 1) {
		fprintf(stderr, "peer_start: pattern '%s' has no group\n",
		        pattern);
		regfree(&re);
		return (-1);
	}
	/* Orphans of the peer's group must come to us to be reaped. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		fprintf(stderr, "peer_start: PR_SET_CHILD_SUBREAPER: %s\n",
		        strerror(errno));
	}
	if (pipe2(pfd, O_CLOEXEC) != 0 || pipe2(p->wake, O_CLOEXEC) != 0) {
		fprintf(stderr, "peer_start: pipe: %s\n", strerror(errno));
		close_fd(&pfd[0]);
		close_fd(&pfd[1]);
		close_fd(&p->wake[0]);
		close_fd(&p->wake[1]);
		regfree(&re);
		return (-1);
	}
	p->out_fd = pfd[0];
	rv        = spawn(p, argv, env, pfd[1]);
	close_fd(&pfd[1]); /* the child holds the only write end now */
	if (rv != 0) {
		fprintf(stderr, "peer_start: cannot run %s: %s\n", argv[0],
		        strerror(rv));
		regfree(&re);
		abort_start(p);
		return (-1);
	}
	/* The child is unreaped, so its pid cannot be reused: no race. */
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (p->pidfd < 0) {
		p->pidfd = -1;
	}
	rv = wait_line(p, &re, timeout_ms);
	regfree(&re);
	if (rv != 0) {
		abort_start(p);
		return (-1);
	}
	if ((rv = pthread_create(&p->drain, NULL, drain_main, p)) != 0) {
		fprintf(stderr, "peer_start: pthread_create: %s\n",
		        strerror(rv));
		abort_start(p);
		return (-1);
	}
	p->started = 1;
	live_swap(NULL, p);
	return (0);
}

const char *
peer_dir(void)
{
	const char *d = getenv("MK_PEERS_DIR");

	return (d != NULL && d[0] != '\0' ? d : NULL);
}

int
peer_open_fds(void)
{
	DIR           *d = opendir("/proc/self/fd");
	struct dirent *e;
	int            n = 0;

	if (d == NULL) {
		return (-1);
	}
	while ((e = readdir(d)) != NULL) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return (n - 1); /* the directory's own */
}

int
peer_free_port(void)
{
	struct sockaddr_in sa  = {.sin_family = AF_INET};
	socklen_t          len = sizeof(sa);
	int                fd, port = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		return (-1);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		port = ntohs(sa.sin_port);
	}
	close(fd);
	return (port);
}

const char *
peer_everything_js(void)
{
	static char path[512];

	if (peer_dir() == NULL) {
		return (NULL);
	}
	snprintf(
	        path, sizeof(path),
	        "%s/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
	        peer_dir());
	return (path);
}

int
peer_everything(peer *p, const char *mode, int port, int timeout_ms)
{
	const char *argv[] = {"node", peer_everything_js(), mode, NULL};
	char        env0[32];
	const char *env[] = {env0, NULL};

	if (argv[1] == NULL) {
		fprintf(stderr, "peer_everything: MK_PEERS_DIR is not set\n");
		return (-1);
	}
	snprintf(env0, sizeof(env0), "PORT=%d",
	         port > 0 ? port : peer_free_port());
	return (peer_start(p, argv, env,
	                   strcmp(mode, "sse") == 0
	                           ? "running on port ([0-9]+)"
	                           : "listening on port ([0-9]+)",
	                   timeout_ms));
}

/* Starts node test/peers/<js> [mode] --port 0. */
static int
start_js(peer *p, const char *js, const char *mode, int timeout_ms)
{
	char        path[512];
	const char *argv[6] = {"node", path};
	size_t      n       = 2;

	if (peer_dir() == NULL) {
		return (-1);
	}
	snprintf(path, sizeof(path), "%s/%s", peer_dir(), js);
	if (mode != NULL) {
		argv[n++] = mode;
	}
	argv[n++] = "--port";
	argv[n++] = "0";
	argv[n]   = NULL;
	return (peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                   timeout_ms));
}

int
peer_start_inject(peer *p, int timeout_ms)
{
	return (start_js(p, "inject.mjs", "http", timeout_ms));
}

int
peer_start_otlp(peer *p, int timeout_ms)
{
	return (start_js(p, "otlp.mjs", NULL, timeout_ms));
}
