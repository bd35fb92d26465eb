/*
 * log.h - one line per event, to a file descriptor, as text or JSON.
 *
 * DESIGN: the settings - level, format, fd - live in a kn_logger, one
 * atomic word written before the threads that read it start.  Each kernel
 * has one (kn_kernel_log) and its actor threads are bound to it, so two
 * runtimes in one process log each to its own fd.  A thread bound to no
 * logger (an embedder's, mk_log's caller) uses the default: the newest
 * logger opened with kn_log_open and not yet closed, else the process
 * settings of kn_log_configure (info, text, fd 2 until it is called).  A
 * bound logger never configured follows the default too.  The capture
 * hook is process-wide.  A line is formatted on the caller's stack and
 * written with one write(2), so lines from different threads never
 * interleave.  Never blocks except in write(2) itself and in the
 * registry lock of kn_log_open/close/configure.
 */
#ifndef KN_LOG_H
#define KN_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mcpkeep.h"

/*
 * kn_log_hook, when set, receives every emitted line (without the trailing
 * newline) instead of the fd.  Called from the logging thread; must be
 * thread-safe.  Used by tests to capture logs.
 */
typedef void (*kn_log_hook)(void *arg, mk_log_level level, const char *line);

/* One set of log settings.  Zeroed: not configured (the default's). */
typedef struct kn_logger {
	_Atomic uint64_t  word;  /* level, json and fd packed; 0: unset */
	struct kn_logger *older; /* open loggers, newest first (registry
	                          * lock) */
} kn_logger;

/*
 * kn_logger_init sets lg's level, format and fd (fd < 0: 2).  If
 * MCPKEEP_LOG is set to debug|info|warn|error it overrides level.  Call
 * before the threads that log through lg start.
 */
void kn_logger_init(kn_logger *lg, mk_log_level level, int json, int fd);

/*
 * kn_log_open makes lg the default until kn_log_close(lg); the default
 * then goes back to the newest logger still open, else the process
 * settings.  lg must stay valid until closed.  Any thread.
 */
void kn_log_open(kn_logger *lg);
void kn_log_close(kn_logger *lg);

/*
 * kn_log_bind makes the calling thread log through lg (NULL: the default)
 * and returns its previous binding.  lg must outlive the binding.
 */
const kn_logger *kn_log_bind(const kn_logger *lg);

/*
 * kn_log_configure sets the process settings (the default while no logger
 * is open) as kn_logger_init does.  Any thread.
 */
void kn_log_configure(mk_log_level level, int json, int fd);

/* kn_log_set_hook installs (or with NULL removes) the capture hook. */
void kn_log_set_hook(kn_log_hook hook, void *arg);

/* kn_log_enabled tells whether a line at level would be emitted by the
 * calling thread. */
int kn_log_enabled(mk_log_level level);

/* kn_log_level_parse maps "debug".."error" to a level; -1 if unknown. */
int kn_log_level_parse(const char *s);

/*
 * kn_log emits one line: time, level, component, message, through the
 * calling thread's logger (see DESIGN).  The message is printf-formatted
 * and cut at 2 KiB.  Newlines in it become spaces.
 */
void kn_log(mk_log_level level, const char *component, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* kn_logv is kn_log with a va_list. */
void kn_logv(mk_log_level level, const char *component, const char *fmt,
             va_list ap) __attribute__((format(printf, 3, 0)));

/*
 * A field of a line: what a JSON line carries beside its sentence, so a
 * reader filters on it rather than parsing the sentence ("client",
 * "old_state", "state", "stage", "message", "duration_ms", "trace_id").
 * A text line has the sentence only.  Never a secret.
 */
typedef struct kn_field {
	const char *key;
	const char *str; /* its value, or NULL: num is */
	long long   num;
} kn_field;

#define KN_STR(k, v) ((kn_field) {.key = (k), .str = (v) != NULL ? (v) : ""})
#define KN_NUM(k, v) ((kn_field) {.key = (k), .num = (long long)(v)})

/*
 * kn_logf is kn_log with n fields.  A field named like one of the line's
 * own (ts, level, component, msg) is left out.
 */
void kn_logf(mk_log_level level, const char *component, const kn_field *f,
             size_t n, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* KN_LOGF(level, component, fields, ...): fields is an array of them. */
#define KN_LOGF(level, comp, fields, ...)                                     \
	kn_logf(level, comp, fields, sizeof(fields) / sizeof((fields)[0]),    \
	        __VA_ARGS__)

/*
 * kn_log_client names the client the calling thread works for (a client
 * actor's thread: its server's name), NULL for none: its JSON lines carry
 * it as "client" unless a field says otherwise.  Copied (at most 127
 * bytes).
 */
void kn_log_client(const char *name);

#define KN_DEBUG(comp, ...)                                                   \
	do {                                                                  \
		if (kn_log_enabled(MK_LOG_DEBUG)) {                           \
			kn_log(MK_LOG_DEBUG, comp, __VA_ARGS__);              \
		}                                                             \
	} while (0)
#define KN_INFO(comp, ...)  kn_log(MK_LOG_INFO, comp, __VA_ARGS__)
#define KN_WARN(comp, ...)  kn_log(MK_LOG_WARN, comp, __VA_ARGS__)
#define KN_ERROR(comp, ...) kn_log(MK_LOG_ERROR, comp, __VA_ARGS__)

#endif /* KN_LOG_H */
