/*
 * log.c - leveled, line-atomic logging (see log.h).
 */
#include "actors/kernel/log.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
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

/* A settings word: bit 63 set, level in bits 32-33, json in bit 34, the
 * fd in bits 0-31. */
#define W_SET      (1ull << 63)
#define W_JSON     (1ull << 34)
#define W_LEVEL(w) ((int)(((w) >> 32) & 3))
#define W_FD(w)    ((int)(uint32_t)(w))
#define W_PACK(l, j, f)                                                       \
	(W_SET | ((uint64_t)(l) << 32) | ((j) ? W_JSON : 0) | (uint32_t)(f))

/* reg_mtx guards newest and process_word; default_word is the word of
 * newest, else process_word. */
static pthread_mutex_t                reg_mtx = PTHREAD_MUTEX_INITIALIZER;
static kn_logger                     *newest  = NULL; /* open loggers' head */
static uint64_t                       process_word = W_PACK(MK_LOG_INFO, 0, 2);
static _Atomic uint64_t               default_word = W_PACK(MK_LOG_INFO, 0, 2);
static _Thread_local const kn_logger *bound; /* this thread's logger */
static _Thread_local char             log_client[128]; /* kn_log_client */
static _Atomic(kn_log_hook)           log_hook;
static _Atomic(void *)                log_hook_arg;

static const char *level_names[] = {
        [MK_LOG_DEBUG] = "DEBUG",
        [MK_LOG_INFO]  = "INFO",
        [MK_LOG_WARN]  = "WARN",
        [MK_LOG_ERROR] = "ERROR",
};

char *
kn_rfc3339(char *buf, size_t len)
{
	return (kn_rfc3339_in(buf, len, 0));
}

char *
kn_rfc3339_in(char *buf, size_t len, int64_t ms)
{
	struct timespec ts;
	struct tm       tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
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

/* The settings word of level, json and fd, MCPKEEP_LOG applied. */
static uint64_t
word_of(mk_log_level level, int json, int fd)
{
	const char *env = getenv("MCPKEEP_LOG");
	int         lv;

	if (env != NULL && (lv = kn_log_level_parse(env)) >= 0) {
		level = (mk_log_level)lv;
	}
	return (W_PACK((unsigned)level & 3, json != 0, fd >= 0 ? fd : 2));
}

/* Recomputes the default; reg_mtx held. */
static void
default_update(void)
{
	atomic_store(&default_word,
	             newest != NULL ? atomic_load(&newest->word)
	                            : process_word);
}

void
kn_logger_init(kn_logger *lg, mk_log_level level, int json, int fd)
{
	atomic_store(&lg->word, word_of(level, json, fd));
}

void
kn_log_open(kn_logger *lg)
{
	pthread_mutex_lock(&reg_mtx);
	lg->older = newest;
	newest    = lg;
	default_update();
	pthread_mutex_unlock(&reg_mtx);
}

void
kn_log_close(kn_logger *lg)
{
	pthread_mutex_lock(&reg_mtx);
	for (kn_logger **p = &newest; *p != NULL; p = &(*p)->older) {
		if (*p == lg) {
			*p = lg->older;
			break;
		}
	}
	lg->older = NULL;
	default_update();
	pthread_mutex_unlock(&reg_mtx);
}

const kn_logger *
kn_log_bind(const kn_logger *lg)
{
	const kn_logger *was = bound;

	bound = lg;
	return (was);
}

void
kn_log_configure(mk_log_level level, int json, int fd)
{
	pthread_mutex_lock(&reg_mtx);
	process_word = word_of(level, json, fd);
	default_update();
	pthread_mutex_unlock(&reg_mtx);
}

/* The calling thread's settings word. */
static uint64_t
current_word(void)
{
	const kn_logger *lg = bound;
	uint64_t         w;

	if (lg != NULL &&
	    (w = atomic_load_explicit(&lg->word, memory_order_relaxed)) != 0) {
		return (w);
	}
	return (atomic_load_explicit(&default_word, memory_order_relaxed));
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
	return ((int)level >= W_LEVEL(current_word()));
}

static void
emit(mk_log_level level, int fd, char *line, size_t len)
{
	kn_log_hook hook = atomic_load(&log_hook);
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

/* What a line says beside its sentence. */
typedef struct log_fields {
	const kn_field *f;
	size_t          n;
} log_fields;

/* A string as JSON takes it: bytes that are not UTF-8 become '?' rather
 * than losing the line. */
static json_t *
json_text(char *s)
{
	json_t *v = json_string(s);

	if (v == NULL) {
		for (unsigned char *p = (unsigned char *)s; *p; p++) {
			if (*p >= 0x80) {
				*p = '?';
			}
		}
		v = json_string(s);
	}
	return (v);
}

/* A field's value; its string copied (json_text may rewrite it). */
static json_t *
field_value(const kn_field *f)
{
	char    buf[LOG_MSG_MAX];
	json_t *v;

	if (f->str == NULL) {
		return (json_integer(f->num));
	}
	snprintf(buf, sizeof(buf), "%s", f->str);
	for (unsigned char *p = (unsigned char *)buf; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = ' ';
		}
	}
	v = json_text(buf);
	return (v);
}

/* The line's own keys, which no field may take. */
static bool
own_key(const char *k)
{
	return (strcmp(k, "ts") == 0 || strcmp(k, "level") == 0 ||
	        strcmp(k, "component") == 0 || strcmp(k, "msg") == 0);
}

/* Packs a JSON line: ts, level, component, msg, the thread's client, then
 * the fields (a later one of the same key wins). */
static json_t *
json_line(const char *ts, mk_log_level level, const char *component, char *msg,
          log_fields lf)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:o*}", "ts", ts, "level",
	                      level_names[level], "component", component,
	                      "msg", json_text(msg));

	if (o == NULL) {
		return (NULL);
	}
	if (log_client[0] != '\0') {
		(void)json_object_set_new(o, "client", json_text(log_client));
	}
	for (size_t i = 0; i < lf.n; i++) {
		if (lf.f[i].key != NULL && !own_key(lf.f[i].key)) {
			(void)json_object_set_new(o, lf.f[i].key,
			                          field_value(&lf.f[i]));
		}
	}
	return (o);
}

/* The formatting half of kn_log: its 10 KiB of buffers live only in this
 * frame, which a disabled level never enters (a thread that does not log
 * never touches those stack pages). */
static void __attribute__((noinline))
log_emit(uint64_t w, mk_log_level level, const char *component, log_fields lf,
         const char *fmt, va_list ap)
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
	if (w & W_JSON) {
		json_t *o = json_line(ts, level, component, msg, lf);
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
	emit(level, W_FD(w), line, (size_t)n);
}

/* kn_logv with fields. */
static void
log_fields_v(mk_log_level level, const char *component, log_fields lf,
             const char *fmt, va_list ap)
{
	uint64_t w = current_word();

	if ((unsigned)level <= MK_LOG_ERROR && (int)level >= W_LEVEL(w)) {
		log_emit(w, level, component, lf, fmt, ap);
	}
}

void
kn_logv(mk_log_level level, const char *component, const char *fmt, va_list ap)
{
	log_fields_v(level, component, (log_fields) {NULL, 0}, fmt, ap);
}

void
kn_logf(mk_log_level level, const char *component, const kn_field *f, size_t n,
        const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_fields_v(level, component, (log_fields) {f, n}, fmt, ap);
	va_end(ap);
}

void
kn_log_client(const char *name)
{
	snprintf(log_client, sizeof(log_client), "%s",
	         name != NULL ? name : "");
}

void
kn_log(mk_log_level level, const char *component, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kn_logv(level, component, fmt, ap);
	va_end(ap);
}
