/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the Parquet encoder (core/sinks/parquet.c). The input picks
 * the columns (1 to 8, every type, the window struct included), the codec,
 * small page, dictionary and row group limits (so that pages, dictionary
 * fallback and row groups are cut often), then the rows: nulls, strings of
 * any bytes (repeats drawn from a few earlier values, to fill dictionaries),
 * integers and doubles from raw bytes (NaN, -0.0, infinities, extremes).
 * The rows are written in one or several calls, in order or as a list of
 * row indexes with repeats, and the file is read back by the independent
 * reader of tests/unit/pq_read.h and checked value by value and statistic
 * by statistic (pq_check.h). abort() on any mismatch.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parquet.h"
#include "pq_check.h"

#define MAX_COLS 8
#define MAX_ROWS 600

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t take_n(struct in *in, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | take(in);
	return v;
}

static const char *const names[] = {"s", "n", "i", "d", "ok", "ts", "day", "window"};

/* A string value: fresh bytes, or a repeat of one of the last few. */
static void set_string(struct sl_batch *b, size_t row, size_t col, struct in *in)
{
	unsigned c = take(in);
	if ((c & 3) != 0 && row > 0) {
		size_t from = row - 1 - (c >> 2) % (row < 8 ? row : 8);
		if (!sl_batch_is_null(b, from, col)) {
			size_t len;
			const char *s = sl_batch_str(b, from, col, &len);
			char *copy = malloc(len + 1);
			if (!copy)
				abort();
			memcpy(copy, s, len);
			if (sl_batch_set_str(b, row, col, copy, len))
				abort();
			free(copy);
			return;
		}
	}
	size_t len = (c >> 2) % 40;
	char buf[40];
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)take(in);
	if (sl_batch_set_str(b, row, col, buf, len))
		abort();
}

static void set_value(struct sl_batch *b, size_t row, size_t col, enum sl_type t, struct in *in)
{
	unsigned sel = take(in);
	if (sel % 7 == 0) {
		sl_batch_set_null(b, row, col);
		return;
	}
	switch (t) {
	case SL_TYPE_STRING:
		set_string(b, row, col, in);
		break;
	case SL_TYPE_BIGINT:
	case SL_TYPE_TIMESTAMP:
		/* small values often, so that runs and equal stats occur */
		sl_batch_set_int(b, row, col,
				 sel & 8 ? (int64_t)take_n(in, 8) : (int64_t)(int8_t)take(in));
		break;
	case SL_TYPE_INT:
	case SL_TYPE_DATE:
		sl_batch_set_int(b, row, col,
				 sel & 8 ? (int32_t)take_n(in, 4) : (int64_t)(int8_t)take(in));
		break;
	case SL_TYPE_DOUBLE: {
		uint64_t u = take_n(in, 8);
		double d;
		memcpy(&d, &u, 8);
		if (!(sel & 8))
			d = (double)(int8_t)(u & 0xff) * 0.5; /* -0.0 comes from 0 * -0.5 */
		if ((sel & 0x70) == 0x10)
			d = -0.0;
		sl_batch_set_double(b, row, col, d);
		break;
	}
	case SL_TYPE_BOOLEAN:
		sl_batch_set_int(b, row, col, sel >> 7);
		break;
	case SL_TYPE_WINDOW: {
		int64_t start = (int64_t)(int16_t)take_n(in, 2) * 60000000;
		sl_batch_set_window(b, row, col, start, start + (int64_t)(take(in) + 1) * 1000000);
		break;
	}
	default:
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};
	struct sl_column cols[MAX_COLS];
	size_t src[MAX_COLS];
	size_t ncols = 0;

	/* columns: one byte of presence bits, each column's batch index reversed
	 * when the byte's bit 0 of the next is set (src need not be 0..n-1) */
	unsigned mask = take(&in);
	if (mask == 0)
		mask = 1;
	for (int k = 0; k < MAX_COLS; k++) {
		if (mask & (1u << k)) {
			cols[ncols].name = (char *)names[k];
			cols[ncols].type = (enum sl_type)k;
			ncols++;
		}
	}
	unsigned opts = take(&in);
	struct sl_pq_opts o = {
		.codec = opts & 1 ? SL_COMPRESSION_ZSTD : SL_COMPRESSION_NONE,
		.zstd_level = 1,
		.page_bytes = 64 + (size_t)take(&in) * 8,
		.dict_bytes = 32 + (size_t)take(&in) * 4,
		.row_group_bytes = 256 + (size_t)take(&in) * 64,
	};
	bool reversed = opts & 2;
	for (size_t k = 0; k < ncols; k++)
		src[k] = reversed ? ncols - 1 - k : k;

	/* the batch's schema: columns in src order */
	struct sl_column bcols[MAX_COLS];
	for (size_t k = 0; k < ncols; k++)
		bcols[src[k]] = cols[k];
	struct sl_schema schema = {.cols = bcols, .n = ncols};
	struct sl_batch b;
	if (sl_batch_init(&b, &schema))
		abort();
	size_t nrows = take(&in) | (size_t)(take(&in) & 1) << 8;
	for (size_t r = 0; r < nrows && r < MAX_ROWS && in.n > 0; r++) {
		size_t row;
		if (sl_batch_add_row(&b, &row))
			abort();
		for (size_t k = 0; k < ncols; k++)
			set_value(&b, row, src[k], cols[k].type, &in);
	}
	nrows = b.nrows;

	/* which rows to write: all in order, or an index list with repeats */
	size_t *idx = NULL, nidx = nrows;
	if ((opts & 4) && nrows > 0) {
		idx = malloc(sizeof(*idx) * nrows * 2);
		if (!idx)
			abort();
		nidx = 0;
		for (size_t i = 0; i < nrows * 2; i++) {
			unsigned c = (unsigned)(i * 2654435761u ^ opts << 3);
			if (c & 16)
				idx[nidx++] = c % nrows;
		}
	}

	struct memfile m = {0};
	struct sl_pq_writer *w;
	int rc = sl_pq_open(cols, src, ncols, &o, memfile_write, &m, &w);
	if (rc) {
		fprintf(stderr, "sl_pq_open: %d\n", rc);
		abort();
	}
	/* in three calls, cut where the option byte says (a call may be empty) */
	size_t cut[4] = {0, nidx ? (opts >> 3) % (nidx + 1) : 0, 0, nidx};
	cut[2] = cut[1] + (nidx - cut[1]) / 2;
	for (int c = 0; c < 3 && rc == 0; c++)
		rc = idx ? sl_pq_add_rows(w, &b, idx + cut[c], cut[c + 1] - cut[c])
			 : sl_pq_add(w, &b, cut[c], cut[c + 1]);
	if (rc) {
		fprintf(stderr, "sl_pq_add: %d\n", rc);
		abort();
	}
	rc = sl_pq_close(w);
	if (rc) {
		fprintf(stderr, "sl_pq_close: %d\n", rc);
		abort();
	}

	struct pqr_file f;
	memset(&f, 0, sizeof(f));
	if (pqr_read(m.p, m.len, &f) || pq_check(&f, &b, cols, src, ncols, idx, nidx)) {
		fprintf(stderr, "read back (%zu columns, %zu rows, %zu bytes): %s\n", ncols, nidx,
			m.len, pqr_err);
		abort();
	}
	pqr_free(&f);
	free(m.p);
	free(idx);
	sl_batch_release(&b);
	return 0;
}
