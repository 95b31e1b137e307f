/* SPDX-License-Identifier: MIT */
/*
 * The console sink (CONNECTORS.md §8, SPARK-CONNECTORS §4): each batch as
 * Spark's ConsoleWrite prints it, a "Batch: N" block then the rows as
 * Dataset.show(numRows, truncate) lays them out, handed to the host with
 * sl_console_write(). Printed when the batch is written, before its commit:
 * a batch that fails to commit is printed again when it is retried
 * (at-least-once, as Spark's).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "config.h"
#include "log.h"
#include "sink.h"
#include "sink_console.h"
#include "strbuf.h"

struct sl_sink {
	const struct sl_query_config *q;
	uint64_t rows; /* the batch's, for numOutputRows */
};

/* The length of the UTF-8 sequence at s (1 for a stray byte), and its code point. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;

	if (len > n)
		len = 1;
	*cp = len == 1 ? s[0] : s[0] & (0x7F >> len);
	for (size_t i = 1; i < len; i++)
		*cp = *cp << 6 | (s[i] & 0x3F);
	return len;
}

/* Java's String.length of one code point: UTF-16 units. */
static int units(uint32_t cp)
{
	return cp >= 0x10000 ? 2 : 1;
}

/* Spark's Utils.stringHalfWidth: UTF-16 units, plus one per full-width character. */
static size_t half_width(const char *s, size_t n)
{
	static const uint32_t full[][2] = {
		{0x1100, 0x115F}, {0x2E80, 0xA4CF}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF},
		{0xFE10, 0xFE19}, {0xFE30, 0xFE6F}, {0xFF00, 0xFF60}, {0xFFE0, 0xFFE6},
	};
	size_t w = 0;
	uint32_t cp;

	for (size_t at = 0; at < n;) {
		at += utf8_next((const unsigned char *)s + at, n - at, &cp);
		w += (size_t)units(cp);
		for (size_t r = 0; r < sizeof(full) / sizeof(full[0]); r++)
			if (cp >= full[r][0] && cp <= full[r][1])
				w++;
	}
	return w;
}

/* A cell's text: SchemaUtils.escapeMetaCharacters, then cut to truncate units. */
static void put_cell(struct sl_strbuf *b, const char *s, size_t n, int64_t truncate)
{
	struct sl_strbuf e = {0};
	size_t len = 0; /* UTF-16 units */
	uint32_t cp;

	for (size_t at = 0; at < n;) {
		size_t k = utf8_next((const unsigned char *)s + at, n - at, &cp);
		const char *esc = cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t"
				: cp == '\f' ? "\\f" : cp == '\b' ? "\\b" : cp == 0x0B ? "\\v"
				: cp == 0x07 ? "\\a" : NULL;
		if (esc) {
			sl_strbuf_adds(&e, esc);
			len += 2;
		} else {
			sl_strbuf_add(&e, s + at, k);
			len += (size_t)units(cp);
		}
		at += k;
	}
	if (truncate > 0 && len > (size_t)truncate) {
		size_t keep = truncate < 4 ? (size_t)truncate : (size_t)truncate - 3, got = 0, at = 0;
		while (at < e.len) {
			size_t k = utf8_next((const unsigned char *)e.p + at, e.len - at, &cp);
			if (got + (size_t)units(cp) > keep)
				break;
			got += (size_t)units(cp);
			at += k;
		}
		sl_strbuf_add(b, e.p, at);
		if (truncate >= 4)
			sl_strbuf_adds(b, "...");
	} else if (e.len) {
		sl_strbuf_add(b, e.p, e.len);
	}
	sl_strbuf_release(&e);
}

/* ToPrettyString of one value: NULL, a window as {start, end}, else Spark's cast. */
static void put_value(struct sl_strbuf *b, const struct sl_batch *rows, size_t r, size_t c,
		      int64_t truncate)
{
	const struct sl_batch_col *col = &rows->cols[c];
	char a[48], z[48], text[100];

	if (sl_batch_is_null(rows, r, c)) {
		put_cell(b, "NULL", 4, truncate);
	} else if (col->type == SL_TYPE_STRING) {
		size_t n;
		const char *s = sl_batch_str(rows, r, c, &n);
		put_cell(b, s, n, truncate);
	} else if (col->type == SL_TYPE_WINDOW) {
		union sl_cell ts = {.i = col->cells[r].w.start};
		sl_sink_fmt_scalar(a, SL_TYPE_TIMESTAMP, &ts);
		ts.i = col->cells[r].w.end;
		sl_sink_fmt_scalar(z, SL_TYPE_TIMESTAMP, &ts);
		int n = snprintf(text, sizeof(text), "{%s, %s}", a, z);
		put_cell(b, text, (size_t)n, truncate);
	} else {
		sl_sink_fmt_scalar(text, col->type, &col->cells[r]);
		put_cell(b, text, strlen(text), truncate);
	}
}

/* One line of cells: `|` separated, each padded to its column's width. */
static void put_line(struct sl_strbuf *out, char **cells, const size_t *width, size_t ncols,
		     bool right)
{
	for (size_t c = 0; c < ncols; c++) {
		size_t hw = half_width(cells[c], strlen(cells[c]));
		sl_strbuf_addc(out, '|');
		if (!right)
			sl_strbuf_adds(out, cells[c]);
		for (size_t k = hw; k < width[c]; k++)
			sl_strbuf_addc(out, ' ');
		if (right)
			sl_strbuf_adds(out, cells[c]);
	}
	sl_strbuf_adds(out, "|\n");
}

static void put_sep(struct sl_strbuf *out, const size_t *width, size_t ncols)
{
	for (size_t c = 0; c < ncols; c++) {
		sl_strbuf_addc(out, '+');
		for (size_t k = 0; k < width[c]; k++)
			sl_strbuf_addc(out, '-');
	}
	sl_strbuf_adds(out, "+\n");
}

int sl_console_format(const struct sl_query_config *q, uint64_t batch,
		      const struct sl_batch *rows, struct sl_strbuf *out)
{
	int64_t truncate = q->console_truncate ? 20 : 0;
	size_t ncols = q->out.n;
	size_t shown = rows->nrows < (size_t)q->console_rows ? rows->nrows
							    : (size_t)q->console_rows;
	size_t ncells = (shown + 1) * ncols;
	char **cells = calloc(ncells ? ncells : 1, sizeof(*cells));
	size_t *width = calloc(ncols ? ncols : 1, sizeof(*width));
	int rc = 0;

	if (!cells || !width) {
		rc = ENOMEM;
		goto done;
	}
	/* the header (names as they are), then the rows' cells */
	for (size_t c = 0; c < ncols && !rc; c++)
		if (!(cells[c] = strdup(q->out.cols[c].name)))
			rc = ENOMEM;
	for (size_t r = 0; r < shown && !rc; r++) {
		for (size_t c = 0; c < ncols && !rc; c++) {
			struct sl_strbuf cell = {0};
			put_value(&cell, rows, r, c, truncate);
			sl_strbuf_addc(&cell, 0);
			if (cell.oom)
				rc = ENOMEM;
			cells[(r + 1) * ncols + c] = cell.p;
		}
	}
	if (rc)
		goto done;
	for (size_t c = 0; c < ncols; c++) {
		width[c] = 3; /* Spark's minimum */
		for (size_t r = 0; r <= shown; r++) {
			const char *s = cells[r * ncols + c];
			size_t hw = half_width(s, strlen(s));
			if (hw > width[c])
				width[c] = hw;
		}
	}
	sl_strbuf_addf(out,
		       "-------------------------------------------\n"
		       "Batch: %" PRIu64 "\n"
		       "-------------------------------------------\n",
		       batch);
	put_sep(out, width, ncols);
	put_line(out, cells, width, ncols, truncate > 0);
	put_sep(out, width, ncols);
	for (size_t r = 1; r <= shown; r++)
		put_line(out, cells + r * ncols, width, ncols, truncate > 0);
	put_sep(out, width, ncols);
	if (rows->nrows > shown)
		sl_strbuf_addf(out, "only showing top %zu %s\n", shown, shown == 1 ? "row" : "rows");
	sl_strbuf_addc(out, '\n'); /* show's println after the table's last line */
	if (out->oom)
		rc = ENOMEM;
done:
	for (size_t i = 0; cells && i < ncells; i++)
		free(cells[i]);
	free(cells);
	free(width);
	return rc;
}

static int console_open(const struct sl_sink_args *a, struct sl_sink **out)
{
	struct sl_sink *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->q = a->q;
	*out = s;
	return 0;
}

static int console_write(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows,
			 void (*spent)(void *ctx), void *spent_ctx)
{
	struct sl_strbuf text = {0};
	int rc = sl_console_format(s->q, batch, rows, &text);

	if (rc == 0)
		sl_console_write(text.p, text.len);
	s->rows = rows->nrows;
	sl_strbuf_release(&text);
	if (spent)
		spent(spent_ctx);
	return rc;
}

static int console_commit(struct sl_sink *s, struct sl_txn *t, struct sl_sink_result *res)
{
	struct timespec ts;

	(void)t;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	res->rows = s->rows;
	res->done_ns = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	return 0;
}

static int console_end(struct sl_sink *s, bool committed, bool *format_failed)
{
	(void)s;
	(void)committed;
	if (format_failed)
		*format_failed = false;
	return 0;
}

static int console_settle(struct sl_sink *s)
{
	(void)s;
	return 0; /* nothing is left to do after a crash: the batch prints again */
}

static void console_describe(const struct sl_sink *s, char *buf, size_t len)
{
	(void)s;
	snprintf(buf, len, "ConsoleTable");
}

static void console_close(struct sl_sink *s)
{
	free(s);
}

const struct sl_sink_ops sl_sink_console = {
	.name = "console",
	.guarantee = SL_SINK_AT_LEAST_ONCE,
	.open = console_open,
	.write = console_write,
	.commit = console_commit,
	.end = console_end,
	.settle = console_settle,
	.describe = console_describe,
	.close = console_close,
};
