/*
 * settings.c - a config.json read as a whole, checked as an operator
 * wants it (mk_config_check), and its runtime settings parsed once into
 * a handle the daemon reads (mk_settings_*).  The settings are one
 * table: each one's path, how it is shown, where cfg_file keeps it and
 * whether a running daemon reads it only at start.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "mcpkeep.h"
#include "model/config.h"

/* Whether a stdio client's command can be started: a path that is an
 * executable file, or a name found on PATH. */
static bool
command_found(const char *cmd)
{
	const char *path = getenv("PATH");
	char        full[PATH_MAX];

	if (strchr(cmd, '/') != NULL) {
		return (access(cmd, X_OK) == 0);
	}
	for (const char *p = path; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, ":");
		if (n > 0 &&
		    (size_t)snprintf(full, sizeof(full), "%.*s/%s", (int)n, p,
		                     cmd) < sizeof(full) &&
		    access(full, X_OK) == 0) {
			return (true);
		}
		p += n + (p[n] == ':');
	}
	return (false);
}

int
mk_config_check(const char *config_json, char **report)
{
	json_t   *problems = NULL;
	cfg_file *f        = NULL;
	char      msg[300];
	int       rv;

	if (report == NULL) {
		return (MK_EINVAL);
	}
	*report = NULL;
	if (config_json == NULL) {
		return (MK_EINVAL);
	}
	rv = cfg_file_check(config_json, strlen(config_json), &problems, &f);
	if (f != NULL) { /* (valid: parsed once, by the check) */
		for (size_t i = 0; i < f->nclients; i++) {
			const cfg_client *c = f->clients[i];
			char              path[80];
			if (c->conn != CFG_STDIO || c->disabled ||
			    command_found(c->command)) {
				continue;
			}
			snprintf(msg, sizeof(msg),
			         "client %s: its command \"%.100s\" is not %s",
			         c->name, c->command,
			         strchr(c->command, '/') != NULL
			                 ? "an executable file"
			                 : "on PATH");
			snprintf(
			        path, sizeof(path),
			        "mcp.client_configs[%zu].stdio_config.command",
			        i);
			json_array_append_new(problems,
			                      json_pack("{s:s, s:s, s:s}",
			                                "level", "warning",
			                                "path", path,
			                                "message", msg));
		}
		cfg_file_free(&f);
	}
	if (problems != NULL &&
	    (*report = json_dumps(problems, JSON_COMPACT)) == NULL) {
		rv = MK_ENOMEM;
	}
	json_decref(problems);
	return (problems == NULL ? MK_ENOMEM : rv);
}

/* ---- settings ------------------------------------------------------------
 */

struct mk_settings {
	cfg_file *f; /* the parsed file (secrets resolved) */
};

typedef enum set_type {
	SET_TEXT,   /* char *: as it is */
	SET_MS,     /* int64_t ms: as a number, 0 unset */
	SET_LIST,   /* char **, NULL-terminated: a JSON array of strings */
	SET_FLAG,   /* bool: "true", or unset */
	SET_JSON,   /* json_t *: as JSON text */
	SET_INPUTS, /* unsigned MK_INPUT_* bits: a JSON array of names */
} set_type;

#define SET(name, type, field, flags)                                         \
	{                                                                     \
		name, type, offsetof(cfg_file, field), flags                  \
	}
/* clang-format off */
static const struct setting {
	const char *name;  /* its path in config.json */
	set_type    type;  /* how it is kept, and shown */
	size_t      off;   /* where cfg_file keeps it */
	int         flags; /* MK_SETTING_* */
} settings[] = {
	SET("store.path",                 SET_TEXT,   store_path,          MK_SETTING_AT_START),
	SET("store.url",                  SET_TEXT,   store_url,           MK_SETTING_AT_START),
	SET("cluster.node_id",            SET_TEXT,   node_id,             MK_SETTING_AT_START),
	SET("cluster.heartbeat_interval", SET_MS,     heartbeat_ms,        MK_SETTING_AT_START),
	SET("server.listen",              SET_TEXT,   listen,              MK_SETTING_AT_START),
	SET("server.stream",              SET_LIST,   streams,             MK_SETTING_AT_START),
	SET("server.stream_public",       SET_FLAG,   stream_public,       MK_SETTING_AT_START),
	SET("server.allowed_origins",     SET_LIST,   origins,             MK_SETTING_AT_START),
	SET("server.client_metadata_url", SET_TEXT,   client_metadata_url, MK_SETTING_AT_START),
	SET("server.inputs",              SET_INPUTS, inputs,              MK_SETTING_AT_START),
	SET("server.roots",               SET_JSON,   roots,               MK_SETTING_AT_START),
	SET("telemetry.otlp_endpoint",    SET_TEXT,   otlp_endpoint,       MK_SETTING_AT_START),
	SET("server.admin_token",         SET_TEXT,   admin_token,         MK_SETTING_SECRET),
	SET("server.metrics_token",       SET_TEXT,   metrics_token,       MK_SETTING_SECRET),
	SET("server.virtual_keys",        SET_JSON,   vkeys,               MK_SETTING_SECRET),
	SET("server.tool_groups",         SET_JSON,   groups,              0),
};
/* clang-format on */
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

const char *
mk_setting_name(unsigned i)
{
	return (i < NSETTINGS ? settings[i].name : NULL);
}

int
mk_setting_flags(unsigned i)
{
	return (i < NSETTINGS ? settings[i].flags : -1);
}

int
mk_settings_parse(const char *config_json, mk_settings **out, char **err)
{
	char      e[CFG_ERR_MAX];
	cfg_file *f;
	int       rv;

	if (err != NULL) {
		*err = NULL;
	}
	if (out == NULL || config_json == NULL) {
		return (MK_EINVAL);
	}
	*out = NULL;
	if ((rv = cfg_file_parse(config_json, strlen(config_json), &f, e,
	                         sizeof(e))) != 0) {
		if (err != NULL) {
			*err = strdup(e);
		}
		return (rv);
	}
	if ((*out = malloc(sizeof(**out))) == NULL) {
		cfg_file_free(&f);
		return (MK_ENOMEM);
	}
	(*out)->f = f;
	return (MK_OK);
}

void
mk_settings_free(mk_settings **sp)
{
	if (sp != NULL && *sp != NULL) {
		cfg_file_free(&(*sp)->f);
		free(*sp);
		*sp = NULL;
	}
}

/* A setting kept as JSON (those that are not text), or NULL: unset. */
static json_t *
as_json(const struct setting *d, const void *at)
{
	static const char *const kinds[] = {"elicitation", "sampling",
	                                    "roots"};
	json_t                  *j       = NULL;

	switch (d->type) {
	case SET_MS:
		j = *(const int64_t *)at != 0
		        ? json_integer(*(const int64_t *)at)
		        : NULL;
		break;
	case SET_LIST:
		j = json_array();
		for (char *const *v = *(char **const *)at; v != NULL && *v;
		     v++) {
			json_array_append_new(j, json_string(*v));
		}
		break;
	case SET_JSON:
		j = json_incref(*(json_t *const *)at);
		break;
	case SET_INPUTS:
		j = json_array();
		for (unsigned k = 0; k < 3; k++) {
			if (*(const unsigned *)at & (1u << k)) {
				json_array_append_new(j,
				                      json_string(kinds[k]));
			}
		}
		break;
	default:
		break;
	}
	/* an empty list: unset, as an absent one */
	if (json_is_array(j) && json_array_size(j) == 0) {
		json_decref(j);
		j = NULL;
	}
	return (j);
}

int
mk_settings_get(const mk_settings *s, const char *path, char **value)
{
	const struct setting *d = NULL;
	const void           *at;
	const char           *text = NULL;
	json_t               *j;

	if (value != NULL) {
		*value = NULL;
	}
	if (s == NULL || path == NULL || value == NULL) {
		return (MK_EINVAL);
	}
	for (size_t i = 0; i < NSETTINGS && d == NULL; i++) {
		d = strcmp(settings[i].name, path) == 0 ? &settings[i] : NULL;
	}
	if (d == NULL) {
		return (MK_ENOENT);
	}
	at = (const char *)s->f + d->off;
	if (d->type == SET_TEXT) {
		text = *(char *const *)at;
	} else if (d->type == SET_FLAG) {
		text = *(const bool *)at ? "true" : NULL;
	} else if ((j = as_json(d, at)) != NULL) {
		*value = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
		json_decref(j);
		return (*value != NULL ? MK_OK : MK_ENOMEM);
	}
	return (text != NULL && (*value = strdup(text)) == NULL ? MK_ENOMEM
	                                                        : MK_OK);
}

int
mk_config_get(const char *config_json, const char *path, char **value,
              char **err)
{
	mk_settings *s;
	int          rv;

	if (value != NULL) {
		*value = NULL;
	}
	if (value == NULL || path == NULL) {
		if (err != NULL) {
			*err = NULL;
		}
		return (MK_EINVAL);
	}
	if ((rv = mk_settings_parse(config_json, &s, err)) != 0) {
		return (rv);
	}
	if ((rv = mk_settings_get(s, path, value)) == MK_ENOENT) {
		char e[200];
		snprintf(e, sizeof(e), "no setting %s in config.json", path);
		if (err != NULL) {
			*err = strdup(e);
		}
		rv = MK_EINVAL;
	}
	mk_settings_free(&s);
	return (rv);
}
