/*
 * log.h - one line per event, to a file descriptor, as text or JSON.
 *
 * DESIGN: process-wide settings (level, format, fd, optional capture hook)
 * are atomics written by kn_log_configure() and read by every thread.  A
 * line is formatted on the caller's stack and written with one write(2),
 * so lines from different threads never interleave.  Never blocks except
 * in write(2) itself.
 */
#ifndef KN_LOG_H
#define KN_LOG_H

#include <stdarg.h>

#include "mcpkeep.h"

/*
 * kn_log_hook, when set, receives every emitted line (without the trailing
 * newline) instead of the fd.  Called from the logging thread; must be
 * thread-safe.  Used by tests to capture logs.
 */
typedef void (*kn_log_hook)(void *arg, mk_log_level level, const char *line);

/*
 * kn_log_configure sets the level, the format and the fd.  If MCPKEEP_LOG
 * is set to debug|info|warn|error it overrides level.  Any thread.
 */
void kn_log_configure(mk_log_level level, int json, int fd);

/* kn_log_set_hook installs (or with NULL removes) the capture hook. */
void kn_log_set_hook(kn_log_hook hook, void *arg);

/* kn_log_enabled tells whether a line at level would be emitted. */
int kn_log_enabled(mk_log_level level);

/* kn_log_level_parse maps "debug".."error" to a level; -1 if unknown. */
int kn_log_level_parse(const char *s);

/*
 * kn_log emits one line: time, level, component, message.  The message is
 * printf-formatted and cut at 2 KiB.  Newlines in it become spaces.
 */
void kn_log(mk_log_level level, const char *component, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* kn_logv is kn_log with a va_list. */
void kn_logv(mk_log_level level, const char *component, const char *fmt,
             va_list ap) __attribute__((format(printf, 3, 0)));

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
