/*
 * log.c - leveled, line-atomic logging (see log.h).
 */
#include "actors/kernel/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "actors/kernel/clock.h"

#define LOG_MSG_MAX  2048
#define LOG_LINE_MAX 8192

static atomic_int           log_level = MK_LOG_INFO;
static atomic_int           log_json  = 0;
static atomic_int           log_fd    = 2;
static _Atomic(kn_log_hook) log_hook;
static _Atomic(void *)      log_hook_arg;

static const char *level_names[] = {
        [MK_LOG_DEBUG] = "DEBUG",
        [MK_LOG_INFO]  = "INFO",
        [MK_LOG_WARN]  = "WARN",
        [MK_LOG_ERROR] = "ERROR",
};

char *
kn_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm       tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	return (buf);
}

int
kn_log_level_parse(const char *s)
{
	for (int i = MK_LOG_DEBUG; i <= MK_LOG_ERROR; i++) {
		if (strcasecmp(s, level_names[i]) == 0) {
			return (i);
		}
	}
	if (strcasecmp(s, "warning") == 0) {
		return (MK_LOG_WARN);
	}
	return (-1);
}

void
kn_log_configure(mk_log_level level, int json, int fd)
{
	const char *env = getenv("MCPKEEP_LOG");
	int         lv;

	if (env != NULL && (lv = kn_log_level_parse(env)) >= 0) {
		level = (mk_log_level)lv;
	}
	atomic_store(&log_level, (int)level);
	atomic_store(&log_json, json != 0);
	atomic_store(&log_fd, fd >= 0 ? fd : 2);
}

void
kn_log_set_hook(kn_log_hook hook, void *arg)
{
	atomic_store(&log_hook_arg, arg);
	atomic_store(&log_hook, hook);
}

int
kn_log_enabled(mk_log_level level)
{
	return ((int)level >=
	        atomic_load_explicit(&log_level, memory_order_relaxed));
}

static void
emit(mk_log_level level, char *line, size_t len)
{
	kn_log_hook hook = atomic_load(&log_hook);
	int         fd   = atomic_load(&log_fd);
	size_t      off  = 0;

	if (hook != NULL) {
		hook(atomic_load(&log_hook_arg), level, line);
		return;
	}
	line[len++] = '\n';
	while (off < len) {
		ssize_t n = write(fd, line + off, len - off);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return; /* nowhere left to report a logging failure */
		}
		off += (size_t)n;
	}
}

/* Packs a JSON line; bytes that are not UTF-8 become '?' rather than
 * losing the line. */
static json_t *
json_pack_msg(const char *ts, mk_log_level level, const char *component,
              char *msg)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level",
	                      level_names[level], "component", component,
	                      "msg", msg);

	if (o == NULL) {
		for (unsigned char *p = (unsigned char *)msg; *p; p++) {
			if (*p >= 0x80) {
				*p = '?';
			}
		}
		o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level",
		              level_names[level], "component", component,
		              "msg", msg);
	}
	return (o);
}

/* The formatting half of kn_log: its 10 KiB of buffers live only in this
 * frame, which a disabled level never enters (a thread that does not log
 * never touches those stack pages). */
static void __attribute__((noinline))
log_emit(mk_log_level level, const char *component, const char *fmt,
         va_list ap)
{
	char msg[LOG_MSG_MAX];
	char line[LOG_LINE_MAX + 1];
	char ts[32];
	int  n;

	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0) {
		return;
	}
	for (unsigned char *p = (unsigned char *)msg; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = ' '; /* one event, one line */
		}
	}
	kn_rfc3339(ts, sizeof(ts));
	if (atomic_load(&log_json)) {
		json_t *o = json_pack_msg(ts, level, component, msg);
		char   *s = NULL;

		if (o != NULL) {
			s = json_dumps(o,
			               JSON_COMPACT | JSON_PRESERVE_ORDER |
			                       JSON_ENSURE_ASCII);
			json_decref(o);
		}
		if (s == NULL) {
			return;
		}
		n = snprintf(line, LOG_LINE_MAX, "%s", s);
		free(s);
	} else {
		n = snprintf(line, LOG_LINE_MAX, "%s %-5s %s: %s", ts,
		             level_names[level], component, msg);
	}
	if (n < 0) {
		return;
	}
	if (n >= LOG_LINE_MAX) {
		n = LOG_LINE_MAX - 1;
	}
	line[n] = '\0';
	emit(level, line, (size_t)n);
}

void
kn_logv(mk_log_level level, const char *component, const char *fmt, va_list ap)
{
	if ((unsigned)level <= MK_LOG_ERROR && kn_log_enabled(level)) {
		log_emit(level, component, fmt, ap);
	}
}

void
kn_log(mk_log_level level, const char *component, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kn_logv(level, component, fmt, ap);
	va_end(ap);
}
