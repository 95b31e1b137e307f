/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint compatibility: renders the fields of a query whose change its
 * checkpoint cannot survive as line-based text (the format is in compat.h),
 * and compares a stored text with a config, field by field.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "err.h"
#include "kafka_conf.h"
#include "strbuf.h"

#define VERSION_PREFIX "sluice-compat "
#define VERSION 1
#define REFUSED ": the checkpoint cannot survive it; rename the query to start afresh"

enum field {
	F_SOURCE_FORMAT,
	F_SOURCE_PATH,
	F_WM_COLUMN,
	F_DEDUP,
	F_DEDUP_WITHIN_WM,
	F_GROUPBY,
	F_AGGREGATE,
	F_OUTPUT_MODE,
	F_SINK_FORMAT,
	F_PARTITION_BY,
	F_SINK_COMMAND,  /* exec only: its line is left out for other sinks */
	F_SOURCE_QUERY,  /* query sources only: left out for other sources */
	F_SOURCE_COMMAND, /* process only: its line is left out for other sources */
	F_PROCESS_SCHEMA, /* process only: the whole schema, which its program answers in */
	F_SOURCE_HOST,   /* socket only: its line is left out for other sources */
	F_SOURCE_PORT,   /* socket only, likewise */
	F_SINK_TOPIC,    /* kafka sink only: its topic option; left out for other sinks */
	F_KAFKA_ASSIGN,  /* kafka only: its strategy's line; the others are left out */
	F_KAFKA_SUBSCRIBE,
	F_KAFKA_PATTERN,
	F_SOURCE_SCHEMA, /* checked apart: only the types of columns in state */
	NFIELDS,
};

/* In description order, which is also the order fields are checked in. */
static const struct {
	const char *key;  /* the line's field; the message's path after queries.<name>. */
	const char *dflt; /* what a config without the option describes */
	const char *path; /* the message's path when not key */
} fields[NFIELDS] = {
    [F_SOURCE_FORMAT] = {"source.format", ""},
    [F_SOURCE_PATH] = {"source.path", ""},
    [F_WM_COLUMN] = {"watermark.column", ""},
    [F_DEDUP] = {"dropDuplicates", ""},
    [F_DEDUP_WITHIN_WM] = {"dropDuplicatesWithinWatermark", ""},
    [F_GROUPBY] = {"groupBy", ""},
    [F_AGGREGATE] = {"aggregate", ""},
    [F_OUTPUT_MODE] = {"outputMode", "append"},
    [F_SINK_FORMAT] = {"sink.format", "json"},
    [F_PARTITION_BY] = {"sink.partitionBy", ""},
    [F_SOURCE_SCHEMA] = {"source.schema", ""},
    [F_SINK_COMMAND] = {"sink.command", ""},
    [F_SOURCE_QUERY] = {"source.query", ""},
    [F_SOURCE_COMMAND] = {"source.command", ""},
    [F_PROCESS_SCHEMA] = {"source.processSchema", "", "source.schema"},
    [F_SOURCE_HOST] = {"source.host", ""},
    [F_SOURCE_PORT] = {"source.port", ""},
    [F_SINK_TOPIC] = {"sink.topic", ""},
    [F_KAFKA_ASSIGN] = {"source.assign", ""},
    [F_KAFKA_SUBSCRIBE] = {"source.subscribe", ""},
    [F_KAFKA_PATTERN] = {"source.subscribePattern", ""},
};

static bool is_plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

/* Describing */

/* A column or output name: bare when [A-Za-z0-9_]+, else backquoted with a backquote doubled. */
static void put_name(struct sl_strbuf *b, const char *name)
{
	const char *p;

	for (p = name; is_plain(*p); p++)
		;
	if (p != name && *p == 0) {
		sl_strbuf_adds(b, name);
		return;
	}
	sl_strbuf_addc(b, '`');
	for (p = name; *p; p++) {
		if (*p == '`')
			sl_strbuf_addc(b, '`');
		sl_strbuf_addc(b, *p);
	}
	sl_strbuf_addc(b, '`');
}

/* "[a, b]" for the columns idx[0..n) of s; nothing when n is 0. */
static void put_list(struct sl_strbuf *b, const struct sl_schema *s, const size_t *idx, size_t n)
{
	if (n == 0)
		return;
	sl_strbuf_addc(b, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			sl_strbuf_adds(b, ", ");
		put_name(b, s->cols[idx[i]].name);
	}
	sl_strbuf_addc(b, ']');
}

/* A duration in the largest unit that holds it exactly: "10 minutes", "90 seconds". */
static void put_duration(struct sl_strbuf *b, int64_t us)
{
	static const struct {
		const char *unit;
		int64_t us;
	} units[] = {
	    {"day", 86400000000ll}, {"hour", 3600000000ll},  {"minute", 60000000ll},
	    {"second", 1000000ll},  {"millisecond", 1000ll}, {"microsecond", 1ll},
	};
	size_t i = 0;
	char text[64];

	while (i + 1 < sizeof(units) / sizeof(units[0]) && us % units[i].us)
		i++;
	snprintf(text, sizeof(text), "%lld %s%s", (long long)(us / units[i].us), units[i].unit,
		 us == units[i].us ? "" : "s");
	sl_strbuf_adds(b, text);
}

static void put_groupby(struct sl_strbuf *b, const struct sl_query_config *q)
{
	const struct sl_schema *s = &q->source.schema;

	if (!q->has_groupby)
		return;
	if (q->has_window) {
		sl_strbuf_adds(b, "window(");
		put_name(b, s->cols[q->win_col].name);
		sl_strbuf_adds(b, ", ");
		put_duration(b, q->win_duration_us);
		/* the slide defaults to the duration: an explicit equal one is the same window */
		if (q->win_slide_us != q->win_duration_us) {
			sl_strbuf_adds(b, ", ");
			put_duration(b, q->win_slide_us);
		}
		sl_strbuf_addc(b, ')');
	}
	if (q->ngroup == 0)
		return;
	sl_strbuf_adds(b, q->has_window ? " by " : "by ");
	for (size_t i = 0; i < q->ngroup; i++) {
		if (i)
			sl_strbuf_adds(b, ", ");
		put_name(b, s->cols[q->group[i]].name);
	}
}

static void put_aggregates(struct sl_strbuf *b, const struct sl_query_config *q)
{
	static const char *const fns[] = {
	    [SL_AGG_COUNT_STAR] = "count", [SL_AGG_COUNT] = "count", [SL_AGG_SUM] = "sum",
	    [SL_AGG_MIN] = "min",	   [SL_AGG_MAX] = "max",     [SL_AGG_AVG] = "avg",
	};

	for (size_t i = 0; i < q->naggs; i++) {
		const struct sl_aggregate *a = &q->aggs[i];
		if (i)
			sl_strbuf_adds(b, ", ");
		sl_strbuf_adds(b, fns[a->fn]);
		sl_strbuf_addc(b, '(');
		if (a->fn == SL_AGG_COUNT_STAR)
			sl_strbuf_addc(b, '*');
		else
			put_name(b, q->source.schema.cols[a->col].name);
		sl_strbuf_adds(b, ") AS ");
		put_name(b, a->name);
	}
}

/* True when source column col is part of q's state: a key, group, window or argument. */
static bool held_in_state(const struct sl_query_config *q, size_t col)
{
	for (size_t i = 0; i < q->ndedup; i++)
		if (q->dedup[i] == col)
			return true;
	if (q->has_window && q->win_col == col)
		return true;
	for (size_t i = 0; i < q->ngroup; i++)
		if (q->group[i] == col)
			return true;
	for (size_t i = 0; i < q->naggs; i++)
		if (q->aggs[i].fn != SL_AGG_COUNT_STAR && q->aggs[i].col == col)
			return true;
	return false;
}

static void put_state_schema(struct sl_strbuf *b, const struct sl_query_config *q)
{
	const struct sl_schema *s = &q->source.schema;
	bool first = true;

	for (size_t i = 0; i < s->n; i++) {
		if (!held_in_state(q, i))
			continue;
		if (!first)
			sl_strbuf_adds(b, ", ");
		first = false;
		put_name(b, s->cols[i].name);
		sl_strbuf_addc(b, ' ');
		sl_strbuf_adds(b, sl_config_type_name(s->cols[i].type));
	}
}

/* Field f of q, unescaped. */
static void put_field(struct sl_strbuf *b, const struct sl_query_config *q, enum field f)
{
	static const char *const output_modes[] = {[SL_OUTPUT_APPEND] = "append",
						   [SL_OUTPUT_UPDATE] = "update",
						   [SL_OUTPUT_COMPLETE] = "complete"};
	const struct sl_schema *s = &q->source.schema;

	switch (f) {
	case F_SOURCE_FORMAT:
		sl_strbuf_adds(b, sl_config_source_name(q->source.format));
		break;
	case F_SOURCE_PATH:
		sl_strbuf_adds(b, q->source.path.text);
		break;
	case F_WM_COLUMN:
		if (q->has_watermark)
			put_name(b, s->cols[q->wm_col].name);
		break;
	case F_DEDUP:
		if (!q->dedup_within_wm)
			put_list(b, s, q->dedup, q->ndedup);
		break;
	case F_DEDUP_WITHIN_WM:
		if (q->dedup_within_wm)
			put_list(b, s, q->dedup, q->ndedup);
		break;
	case F_GROUPBY:
		put_groupby(b, q);
		break;
	case F_AGGREGATE:
		put_aggregates(b, q);
		break;
	case F_OUTPUT_MODE:
		sl_strbuf_adds(b, output_modes[q->output_mode]);
		break;
	case F_SINK_FORMAT:
		sl_strbuf_adds(b, sl_config_sink_name(q->sink_format));
		break;
	case F_PARTITION_BY:
		put_list(b, &q->out, q->partition_by, q->npartition_by);
		break;
	case F_SOURCE_SCHEMA:
		put_state_schema(b, q);
		break;
	case F_SINK_COMMAND: /* exec: the words, each quoted as a name when it must be */
		for (size_t i = 0; i < q->exec_argc; i++) {
			if (i)
				sl_strbuf_addc(b, ' ');
			put_name(b, q->exec_argv[i]);
		}
		break;
	case F_SOURCE_QUERY:
		if (q->source.upstream)
			sl_strbuf_adds(b, q->source.upstream);
		break;
	case F_SOURCE_COMMAND: /* process: as sink.command */
		for (size_t i = 0; i < q->source.argc; i++) {
			if (i)
				sl_strbuf_addc(b, ' ');
			put_name(b, q->source.argv[i]);
		}
		break;
	case F_PROCESS_SCHEMA: /* process: every column, `name TYPE` */
		if (q->source.format != SL_SOURCE_PROCESS)
			break;
		for (size_t i = 0; i < s->n; i++) {
			if (i)
				sl_strbuf_adds(b, ", ");
			put_name(b, s->cols[i].name);
			sl_strbuf_addc(b, ' ');
			sl_strbuf_adds(b, sl_config_type_name(s->cols[i].type));
		}
		break;
	case F_SOURCE_HOST: /* socket: where the spooled lines came from */
		if (q->source.format == SL_SOURCE_SOCKET)
			sl_strbuf_adds(b, q->source.host);
		break;
	case F_SOURCE_PORT:
		if (q->source.format == SL_SOURCE_SOCKET) {
			char port[16];
			snprintf(port, sizeof(port), "%lld", (long long)q->source.port);
			sl_strbuf_adds(b, port);
		}
		break;
	case F_SINK_TOPIC: /* kafka: where batches went; recovery reads its partitions */
		if (q->sink_format == SL_SINK_KAFKA && q->kafka_topic)
			sl_strbuf_adds(b, q->kafka_topic);
		break;
	case F_KAFKA_ASSIGN: /* kafka: the strategy as written (assign canonical) */
	case F_KAFKA_SUBSCRIBE:
	case F_KAFKA_PATTERN:
		if (q->source.kafka &&
		    (int)q->source.kafka->strategy == (int)(f - F_KAFKA_ASSIGN))
			sl_strbuf_adds(b, q->source.kafka->strategy_text);
		break;
	case NFIELDS:
		break;
	}
}

/* Appends s[0..n) with a backslash as \\ and a control byte as \xHH (lowercase hex). */
static void put_escaped(struct sl_strbuf *b, const char *s, size_t n)
{
	char hex[8];

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\') {
			sl_strbuf_adds(b, "\\\\");
		} else if (is_control(c)) {
			snprintf(hex, sizeof(hex), "\\x%02x", c);
			sl_strbuf_adds(b, hex);
		} else {
			sl_strbuf_addc(b, (char)c);
		}
	}
}

int sl_compat_describe(const struct sl_query_config *q, char **out, size_t *len)
{
	struct sl_strbuf b = {0}, raw = {0};
	char version[32];

	snprintf(version, sizeof(version), "%s%d\n", VERSION_PREFIX, VERSION);
	sl_strbuf_adds(&b, version);
	for (int f = 0; f < NFIELDS; f++) {
		raw.len = 0;
		put_field(&raw, q, (enum field)f);
		if ((f == F_SINK_COMMAND || f == F_SOURCE_COMMAND || f == F_PROCESS_SCHEMA ||
		     f == F_SOURCE_QUERY || f == F_SOURCE_HOST || f == F_SOURCE_PORT ||
		     f == F_SINK_TOPIC || f == F_KAFKA_ASSIGN || f == F_KAFKA_SUBSCRIBE ||
		     f == F_KAFKA_PATTERN) &&
		    raw.len == 0)
			continue; /* only some sinks and sources have these lines */
		sl_strbuf_adds(&b, fields[f].key);
		sl_strbuf_addc(&b, '=');
		put_escaped(&b, raw.p, raw.len);
		sl_strbuf_addc(&b, '\n');
	}
	sl_strbuf_addc(&b, 0);
	free(raw.p);
	if (b.oom || raw.oom) {
		free(b.p);
		return ENOMEM;
	}
	*out = b.p;
	*len = b.len - 1;
	return 0;
}

/* Reading a description */

/* The known fields of a description: each value as it stands in the text, escaped. */
struct desc {
	const char *val[NFIELDS];
	size_t len[NFIELDS];
};

static bool is_key_char(char c) { return is_plain(c) || c == '.' || c == '-'; }

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The byte that the escape \xHH at s (4 bytes available) stands for, or -1. */
static int hex_escape(const char *s)
{
	int hi = hex_digit(s[2]), lo = hex_digit(s[3]);

	if (s[1] != 'x' || hi < 0 || lo < 0 || !is_control((unsigned char)(hi * 16 + lo)))
		return -1;
	return hi * 16 + lo;
}

/* True when s[0..n) is a value as put_escaped() writes them. */
static bool value_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (is_control((unsigned char)s[i]))
			return false;
		if (s[i] != '\\')
			continue;
		if (i + 1 < n && s[i + 1] == '\\')
			i++;
		else if (i + 3 < n && hex_escape(s + i) >= 0)
			i += 3;
		else
			return false;
	}
	return true;
}

/* Undoes put_escaped() on a value that passed value_valid(). */
static void put_unescaped(struct sl_strbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\\') {
			sl_strbuf_addc(b, s[i]);
		} else if (s[i + 1] == '\\') {
			sl_strbuf_addc(b, '\\');
			i++;
		} else {
			sl_strbuf_addc(b, (char)hex_escape(s + i));
			i += 3;
		}
	}
}

/*
 * Splits a stored description into d, pointing into s. Returns 0,
 * SL_ECORRUPT, or SL_EVERSION for a well-formed version line of another
 * version (whose lines are not read: their format may differ).
 */
static int parse(const char *s, size_t len, struct desc *d)
{
	const size_t plen = strlen(VERSION_PREFIX);
	const char *p, *end, *nl, *eq;
	bool seen[NFIELDS] = {false};
	long version = 0;

	for (int f = 0; f < NFIELDS; f++) {
		d->val[f] = fields[f].dflt;
		d->len[f] = strlen(fields[f].dflt);
	}
	if (len < plen || memcmp(s, VERSION_PREFIX, plen))
		return SL_ECORRUPT;
	end = s + len; /* s is not NULL from here on */
	p = s + plen;
	nl = memchr(p, '\n', (size_t)(end - p));
	/* 1 to 9 digits, no leading zero */
	if (!nl || nl == p || nl - p > 9 || *p == '0')
		return SL_ECORRUPT;
	for (; p < nl; p++) {
		if (*p < '0' || *p > '9')
			return SL_ECORRUPT;
		version = version * 10 + (*p - '0');
	}
	if (version != VERSION)
		return SL_EVERSION;
	for (p = nl + 1; p < end; p = nl + 1) {
		int f;

		/* every line ends in '\n', so a line cut short is corrupt */
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return SL_ECORRUPT;
		eq = memchr(p, '=', (size_t)(nl - p));
		if (!eq || eq == p)
			return SL_ECORRUPT;
		for (const char *k = p; k < eq; k++)
			if (!is_key_char(*k))
				return SL_ECORRUPT;
		if (!value_valid(eq + 1, (size_t)(nl - eq - 1)))
			return SL_ECORRUPT;
		for (f = 0; f < NFIELDS; f++)
			if (strlen(fields[f].key) == (size_t)(eq - p) &&
			    !memcmp(fields[f].key, p, (size_t)(eq - p)))
				break;
		if (f == NFIELDS)
			continue; /* a newer sluice's field */
		if (seen[f])
			return SL_ECORRUPT;
		seen[f] = true;
		d->val[f] = eq + 1;
		d->len[f] = (size_t)(nl - eq - 1);
	}
	return 0;
}

/*
 * Reads one `name TYPE` of an unescaped source.schema value at *p: the name
 * into nm (NUL-terminated), the type's span into *type and *tlen. Returns 0,
 * SL_ECORRUPT or ENOMEM.
 */
static int read_column(const char **p, const char *end, struct sl_strbuf *nm, const char **type,
		       size_t *tlen)
{
	const char *s = *p, *t;
	size_t n = 0;

	nm->len = 0;
	if (*s == '`') {
		for (s++;; s++, n++) {
			if (s == end || is_control((unsigned char)*s))
				return SL_ECORRUPT;
			if (*s == '`') {
				if (s + 1 == end || s[1] != '`')
					break;
				s++; /* a doubled backquote is one */
			}
			sl_strbuf_addc(nm, *s);
		}
		s++;
	} else {
		for (; s < end && is_plain(*s); s++, n++)
			sl_strbuf_addc(nm, *s);
	}
	if (n == 0 || s == end || *s != ' ')
		return SL_ECORRUPT; /* no name, or no type after it */
	for (t = ++s; s < end && is_plain(*s); s++)
		;
	if (s == t)
		return SL_ECORRUPT;
	*tlen = (size_t)(s - t);
	if (s < end) {
		/* ", " and another column */
		if (end - s < 3 || s[0] != ',' || s[1] != ' ')
			return SL_ECORRUPT;
		s += 2;
	}
	sl_strbuf_addc(nm, 0);
	if (nm->oom)
		return ENOMEM;
	*type = t;
	*p = s;
	return 0;
}

/*
 * Reads the stored source.schema value (escaped) and finds the first column
 * held in state both then and now whose type changed: its name goes to
 * name, its stored type to was (both NUL-terminated), its type now to *now.
 * The whole value is read, so that corruption is found before any change.
 * Returns 0 (name->len is 0 when no type changed), SL_ECORRUPT or ENOMEM.
 */
static int scan_schema(const struct sl_query_config *q, const char *val, size_t vlen,
		       struct sl_strbuf *name, struct sl_strbuf *was, const char **now)
{
	const struct sl_schema *s = &q->source.schema;
	struct sl_strbuf u = {0}, nm = {0};
	const char *p, *type, *t;
	size_t tlen;
	int rc = 0;

	if (vlen == 0)
		return 0;
	put_unescaped(&u, val, vlen);
	if (u.oom) {
		rc = ENOMEM;
		goto bufs_free;
	}
	for (p = u.p; p < u.p + u.len;) {
		long i;

		rc = read_column(&p, u.p + u.len, &nm, &type, &tlen);
		if (rc)
			goto bufs_free;
		i = sl_config_schema_find(s, nm.p);
		if (name->len || i < 0 || !held_in_state(q, (size_t)i))
			continue;
		t = sl_config_type_name(s->cols[i].type);
		if (strlen(t) == tlen && !memcmp(t, type, tlen))
			continue;
		sl_strbuf_add(name, nm.p, nm.len); /* with its NUL */
		sl_strbuf_add(was, type, tlen);
		sl_strbuf_addc(was, 0);
		*now = t;
	}
	if (name->oom || was->oom)
		rc = ENOMEM;
bufs_free:
	free(nm.p);
	free(u.p);
	return rc;
}

/* printf precision for a value of n bytes; "none" stands for an empty one. */
static int prec(size_t n) { return n == 0 ? 4 : n > INT_MAX ? INT_MAX : (int)n; }

static const char *shown(const char *val, size_t n) { return n == 0 ? "none" : val; }

int sl_compat_check(const struct sl_query_config *q, const char *stored, size_t len, char *err,
		    size_t errlen)
{
	struct sl_strbuf name = {0}, was_type = {0};
	const char *now_type = NULL;
	struct desc was, now;
	char *text = NULL;
	size_t tlen;
	int rc;

	rc = parse(stored, len, &was);
	if (!rc)
		rc = scan_schema(q, was.val[F_SOURCE_SCHEMA], was.len[F_SOURCE_SCHEMA], &name,
				 &was_type, &now_type);
	if (!rc)
		rc = sl_compat_describe(q, &text, &tlen);
	if (rc)
		goto bufs_free;
	rc = parse(text, tlen, &now);
	if (rc)
		goto bufs_free; /* cannot happen: describe writes what parse reads */
	for (int f = 0; f < F_SOURCE_SCHEMA; f++) {
		if (was.len[f] == now.len[f] && !memcmp(was.val[f], now.val[f], was.len[f]))
			continue;
		rc = sl_config_fail(err, errlen,
			    "queries.%s.%s: changed since the checkpoint was made (was %.*s, now "
			    "%.*s)" REFUSED,
			    q->name, fields[f].path ? fields[f].path : fields[f].key, prec(was.len[f]), shown(was.val[f], was.len[f]),
			    prec(now.len[f]), shown(now.val[f], now.len[f]));
		goto bufs_free;
	}
	if (name.len)
		rc = sl_config_fail(err, errlen,
			    "queries.%s.source.schema: column '%s' held in state changed type from "
			    "%s to %s" REFUSED,
			    q->name, name.p, was_type.p, now_type);
bufs_free:
	free(text);
	free(was_type.p);
	free(name.p);
	return rc;
}
