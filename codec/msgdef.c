/*
 * msgdef.c - typed inbox messages (see msgdef.h).
 */
#include "codec/msgdef.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "codec/text.h"
#include "mcpkeep.h"

const codec_fields codec_no_fields = {"none", NULL, 0, 0};

static void *
field_at(const void *st, const codec_field *f)
{
	return ((char *)st + f->off);
}

void
codec_msg_pack(const codec_fields *fs, const void *st, mp_w *w)
{
	uint32_t n = 0;

	for (size_t i = 0; i < fs->n; i++) {
		const codec_field *f = &fs->f[i];
		n += (f->type != CODEC_F_STR && f->type != CODEC_F_SECRET) ||
		        *(char *const *)field_at(st, f) != NULL;
	}
	mp_map(w, n);
	for (size_t i = 0; i < fs->n; i++) {
		const codec_field *f = &fs->f[i];
		const void        *v = field_at(st, f);
		switch (f->type) {
		case CODEC_F_STR:
		case CODEC_F_SECRET:
			if (*(char *const *)v != NULL) {
				mp_kv_str(w, f->name, *(char *const *)v);
			}
			break;
		case CODEC_F_NSTR:
			mp_key(w, f->name);
			mp_str(w, *(char *const *)v);
			break;
		case CODEC_F_SUB:
			mp_key(w, f->name);
			if (*(void *const *)v != NULL) {
				codec_msg_pack(f->sub, *(void *const *)v, w);
			} else {
				msgpack_pack_nil(&w->pk);
			}
			break;
		case CODEC_F_LIST: {
			const codec_list *l = v;
			mp_key(w, f->name);
			msgpack_pack_array(&w->pk, l->n);
			for (size_t j = 0; j < l->n; j++) {
				codec_msg_pack(f->sub,
				               (char *)l->items +
				                       j * f->sub->size,
				               w);
			}
			break;
		}
		case CODEC_F_INT:
			mp_kv_int(w, f->name, *(const int64_t *)v);
			break;
		case CODEC_F_BOOL:
			mp_kv_bool(w, f->name, *(const bool *)v);
			break;
		}
	}
}

/* set gives the field f of st the value o holds, or its zero when o is
 * NULL or of another type. */
static void set_all(const codec_fields *fs, void *st, const msgpack_object *o);

/* set_list fills l with the maps of the array o (an element that is not
 * a map: its struct zero); none when o is not an array. */
static void
set_list(const codec_fields *fs, codec_list *l, const msgpack_object *o)
{
	const msgpack_object *a;

	l->items = NULL;
	l->n     = 0;
	if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY ||
	    o->via.array.size == 0 ||
	    (l->items = calloc(o->via.array.size, fs->size)) == NULL) {
		return;
	}
	for (l->n = 0; l->n < o->via.array.size; l->n++) {
		a = &o->via.array.ptr[l->n];
		set_all(fs, (char *)l->items + l->n * fs->size,
		        a->type == MSGPACK_OBJECT_MAP ? a : NULL);
	}
}

static void
set(const codec_field *f, void *st, const msgpack_object *o)
{
	void *v = field_at(st, f);

	switch (f->type) {
	case CODEC_F_STR:
	case CODEC_F_NSTR:
	case CODEC_F_SECRET:
		*(char **)v = mp_dup_str(o);
		break;
	case CODEC_F_SUB:
		*(void **)v = NULL;
		if (o != NULL && o->type == MSGPACK_OBJECT_MAP &&
		    (*(void **)v = calloc(1, f->sub->size)) != NULL) {
			set_all(f->sub, *(void **)v, o);
		}
		break;
	case CODEC_F_LIST:
		set_list(f->sub, v, o);
		break;
	case CODEC_F_INT:
		*(int64_t *)v = mp_int(o, 0);
		break;
	case CODEC_F_BOOL:
		*(bool *)v = mp_bool(o, false);
		break;
	}
}

/* set_all gives each field of st its value in the map o (or its zero). */
static void
set_all(const codec_fields *fs, void *st, const msgpack_object *o)
{
	for (size_t i = 0; i < fs->n; i++) {
		set(&fs->f[i], st,
		    o != NULL ? mp_obj_get(o, fs->f[i].name) : NULL);
	}
}

int
codec_msg_unpack(const codec_fields *fs, const void *buf, size_t len, void *st)
{
	mp_r r;
	int  rv = mp_r_open(&r, buf, len);

	set_all(fs, st, rv == 0 ? &r.up.data : NULL);
	mp_r_close(&r);
	return (rv);
}

void
codec_msg_clear(const codec_fields *fs, void *st)
{
	for (size_t i = 0; i < fs->n; i++) {
		const codec_field *f = &fs->f[i];
		char             **s = field_at(st, f);
		if (f->type == CODEC_F_SECRET) {
			text_secret_free(*s);
		} else if (f->type == CODEC_F_STR || f->type == CODEC_F_NSTR) {
			free(*s);
		} else if (f->type == CODEC_F_SUB && *s != NULL) {
			codec_msg_clear(f->sub, *s);
			free(*s);
		} else if (f->type == CODEC_F_LIST) {
			codec_list *l = (codec_list *)s;
			for (size_t j = 0; j < l->n; j++) {
				codec_msg_clear(f->sub,
				                (char *)l->items +
				                        j * f->sub->size);
			}
			free(l->items);
		}
		set(f, st, NULL);
	}
}

void
codec_msg_wipe(const codec_fields *fs, msgpack_sbuffer *sb)
{
	for (size_t i = 0; i < fs->n; i++) {
		if (fs->f[i].type == CODEC_F_SECRET) {
			OPENSSL_cleanse(sb->data, sb->size);
			break;
		}
	}
	msgpack_sbuffer_destroy(sb);
}

msgpack_sbuffer
codec_msg_packed(const codec_fields *fs, const void *st)
{
	mp_w w;

	mp_w_init(&w);
	codec_msg_pack(fs, st, &w);
	return (w.sb);
}

/* Rendering the header table. */

#define DOC_WIDTH 79 /* the column a comment line stays within */

static const char *
type_name(codec_ftype t)
{
	switch (t) {
	case CODEC_F_STR:
	case CODEC_F_NSTR:
		return ("str");
	case CODEC_F_SUB:
		return ("map");
	case CODEC_F_LIST:
		return ("list");
	case CODEC_F_SECRET:
		return ("secret");
	case CODEC_F_INT:
		return ("int");
	case CODEC_F_BOOL:
		return ("bool");
	}
	return ("?");
}

/* put writes " *" + indent spaces + head, then text wrapped at the
 * width, its continuation lines indented to where text began. */
static void
put(FILE *o, int indent, const char *head, const char *text)
{
	int col = fprintf(o, " *%*s%s", indent, "", head);
	int at  = col;

	while (*text != '\0') {
		size_t word = strcspn(text, " ");
		if (col > at && col + 1 + (int)word > DOC_WIDTH) {
			fprintf(o, "\n *%*s", at - 2, "");
			col = at;
		} else if (col > at) {
			col += fprintf(o, " ");
		}
		col += fprintf(o, "%.*s", (int)word, text);
		text += word;
		text += strspn(text, " ");
	}
	fprintf(o, "\n");
}

static void
put_fields(FILE *o, const char *lead, const codec_fields *fs)
{
	int w = 0;

	if (fs->n == 0) {
		put(o, 5, lead, "{}");
		return;
	}
	for (size_t i = 0; i < fs->n; i++) {
		int n = (int)strlen(fs->f[i].name);
		w     = n > w ? n : w;
	}
	for (size_t i = 0; i < fs->n; i++) {
		const codec_field *f = &fs->f[i];
		char               head[96];
		snprintf(head, sizeof(head), "%*s%-*s %-6s ",
		         (int)strlen(lead), i == 0 ? lead : "", w, f->name,
		         type_name(f->type));
		put(o, 5, head, f->doc);
	}
}

char *
codec_msg_doc(const codec_msgdef *defs, size_t n)
{
	char  *text = NULL;
	size_t len  = 0;
	FILE  *o    = open_memstream(&text, &len);

	if (o == NULL) {
		return (NULL);
	}
	for (size_t i = 0; i < n; i++) {
		const codec_msgdef *d = &defs[i];
		char                head[96];
		snprintf(head, sizeof(head), "%s %s: ", d->name, d->kind);
		if (i > 0) {
			fprintf(o, " *\n");
		}
		put(o, 3, head, d->doc);
		put_fields(o, "", d->req);
		if (d->reply != NULL) {
			put_fields(o, "ok:     ", d->reply);
		}
		if (d->fail != NULL) {
			put_fields(o, "failed: ", d->fail);
		}
	}
	if (fclose(o) != 0) {
		free(text);
		return (NULL);
	}
	return (text);
}
