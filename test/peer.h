/*
 * peer.h - run a real peer server (node, npx, mcp-proxy, ...) for an
 * integration test: start it in its own process group, wait for the line
 * that says it listens, learn its port, and kill the whole group at the end.
 *
 * DESIGN: the child's stdout AND stderr go into one pipe (server-everything
 * prints its "listening" line on stderr, inject.mjs on stdout); stdin is
 * /dev/null.  peer_start reads that pipe itself, with poll() and a
 * deadline, until a line matches.  From then on a small drain thread owns
 * the pipe: it keeps reading until EOF or peer_stop, so a chatty peer (one
 * log line per request) can never fill the pipe and block in write(2).  The
 * thread keeps the last bytes of output for error messages, and echoes all
 * output to stderr when MK_PEER_ECHO=1.  A thread rather than "read it in
 * peer_stop": between start and stop the test thread is busy being the
 * client, and nobody else would empty the pipe.
 *
 * Teardown kills the process group, not just the child: npx and mcp-proxy
 * leave children behind.  peer_start makes the calling process a child
 * subreaper (PR_SET_CHILD_SUBREAPER), so the peer's orphaned descendants
 * become our children and peer_stop can reap every member of the group
 * (waitpid(-pgid)) instead of hoping that PID 1 does (here it reaps
 * orphans late).  So other code in the test must reap its children by pid,
 * never with waitpid(-1) (it could take a peer's status), and orphans of
 * its own children come to the test process too.
 *
 * A test that exits without peer_stop (a failed CHECK calls exit()) still
 * leaves nothing running: an atexit handler SIGKILLs the process group of
 * every peer not yet stopped.  A crash (abort, ASan) skips it.
 *
 * Threads: a peer belongs to the thread that started it; peer_start and
 * peer_stop block (up to timeout_ms, and up to ~5 s) and must not run
 * concurrently on the same peer.  Distinct peers may be used from distinct
 * threads.  The drain thread holds a pointer to the peer: it must stay at
 * the same address from peer_start to peer_stop (a local in the test
 * function is fine).
 */
#ifndef TEST_PEER_H
#define TEST_PEER_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#define PEER_TAIL 16384 /* bytes of recent output kept for messages */

typedef struct peer {
	pid_t pid;          /* the child = its process group id; kept after
	                     * peer_stop so a test can check the group is gone */
	int port;           /* from the pattern's first capture group */
	int out_fd;         /* read end of the output pipe; the drain thread
	                     * owns it after peer_start: do not read it */
	int       status;   /* the child's wait status, after peer_stop */
	int       started;  /* 1 between a successful start and the stop */
	int       pidfd;    /* pidfd of the child, or -1 (kernel too old) */
	int       wake[2];  /* pipe: peer_stop -> drain thread "stop" */
	pthread_t drain;    /* the drain thread */
	char      name[64]; /* argv[0], for messages */
	char      tail[PEER_TAIL]; /* ring of the latest output */
	size_t    tail_pos;        /* next write position in tail */
	size_t    tail_len;        /* valid bytes in tail (<= PEER_TAIL) */
	int       echo;            /* MK_PEER_ECHO=1: copy output to stderr */
} peer;

/* peer_start starts argv (argv[0] looked up in PATH; NULL-terminated) in
 * its own process group with stdin /dev/null and stdout+stderr piped.  env
 * holds extra "NAME=value" entries (NULL-terminated, may be NULL) that are
 * added to the inherited environment, replacing a variable of the same
 * name.  No descriptor but 0, 1 and 2 reaches the child.  Then it waits up
 * to timeout_ms for an output line matching the POSIX extended regular
 * expression pattern, whose first capture group must be the port (e.g.
 * "listening on port ([0-9]+)").
 *
 * Blocks up to timeout_ms.  Returns 0 with p filled and the peer running;
 * or -1 after printing why on stderr (with the peer's last output) and
 * killing and reaping whatever was started, p then being stopped. */
int peer_start(peer *p, const char *const *argv, const char *const *env,
               const char *pattern, int timeout_ms);

/* peer_stop sends SIGTERM to the peer's process group, waits up to 5 s for
 * the child to exit, then sends SIGKILL to the group and reaps the child
 * and every orphaned member of the group; it stops the drain thread and
 * closes the pipe.  p->status gets the child's wait status.  If the child
 * had already exited on its own, says so on stderr with its last output.
 * Safe twice, after a failed peer_start, and on a zeroed peer.  A peer
 * still started when the process exits (a failed CHECK) is stopped by an
 * exit handler that prints its last output, so p must stay valid until
 * peer_stop. */
void peer_stop(peer *p);

/* peer_wait_exit waits up to timeout_ms for the peer's child to exit by
 * itself (say after inject.mjs's `exit` tool), without reaping it: call
 * peer_stop after it, which then reports the status in p->status.  Blocks.
 * Returns 1 if it has exited (or the peer is not running), 0 if not. */
int peer_wait_exit(peer *p, int timeout_ms);

/* peer_said tells whether the peer's latest output (the last PEER_TAIL
 * bytes) contains text.  Call it after peer_stop (the drain thread writes
 * the tail until then).  Returns 1 or 0. */
int peer_said(const peer *p, const char *text);

/* peer_dir gives the source folder test/peers (which holds inject.mjs and
 * node_modules/), from the environment variable MK_PEERS_DIR that meson
 * sets for the tests; NULL if it is unset or empty.  The string belongs
 * to the environment. */
const char *peer_dir(void);

/* peer_free_port gives a TCP port of 127.0.0.1 that was free a moment ago
 * (bind to port 0, read it, close), for a server that cannot listen on
 * port 0 and report it.  Another process may take it before the server
 * does; such a server may still print its "listening" line (as
 * server-everything does), so check that it answers.  Returns the port,
 * or -1. */
int peer_free_port(void);

/* peer_open_fds counts this process's open file descriptors. */
int peer_open_fds(void);

/* peer_everything starts the reference server-everything in mode ("sse"
 * or "streamableHttp") on port (0: a free one) and waits for its
 * listening line.  Returns 0 or -1 as peer_start. */
int peer_everything(peer *p, const char *mode, int port, int timeout_ms);

/* peer_everything_js gives the path of server-everything's entry point
 * (a static buffer), or NULL without MK_PEERS_DIR. */
const char *peer_everything_js(void);

/* peer_start_inject starts test/peers/inject.mjs over Streamable HTTP on
 * a free port (p->port); as peer_start. */
int peer_start_inject(peer *p, int timeout_ms);

/* peer_start_otlp starts test/peers/otlp.mjs (an OTLP/HTTP trace
 * collector) on a free port (p->port); as peer_start. */
int peer_start_otlp(peer *p, int timeout_ms);

#endif /* TEST_PEER_H */
