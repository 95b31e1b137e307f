/* SPDX-License-Identifier: MIT */
/*
 * Checks a Parquet file read back by pq_read.h against the batch rows it
 * was written from: schema (types, annotations, column orders), every value
 * and null, and each chunk's statistics recomputed from the rows of its row
 * group. Shared by tests/unit/test-parquet.c and tests/fuzz/fuzz-parquet.c.
 */
#ifndef SLUICE_TESTS_PQ_CHECK_H
#define SLUICE_TESTS_PQ_CHECK_H

#include <math.h>

#include "batch.h"
#include "config.h"
#include "pq_read.h"

/* A growing in-memory file: the sl_pq_write_fn context. */
struct memfile {
	uint8_t *p;
	size_t len, cap;
	int fail_at; /* > 0: the fail_at-th write fails with EIO */
	int writes;
};

static int memfile_write(void *ctx, const void *buf, size_t len)
{
	struct memfile *m = ctx;
	if (m->fail_at && ++m->writes == m->fail_at)
		return 5; /* EIO */
	if (m->len + len > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap < m->len + len)
			cap *= 2;
		uint8_t *p = realloc(m->p, cap);
		if (!p)
			return 12; /* ENOMEM */
		m->p = p;
		m->cap = cap;
	}
	memcpy(m->p + m->len, buf, len);
	m->len += len;
	return 0;
}

static int pqc_ptype(enum sl_type t)
{
	static const int pt[] = { 6, 2, 1, 5, 0, 2, 1, 2 };
	return pt[t];
}

/* The value of leaf part (0, 1 start, 2 end) of batch column c at row r, as a reader sees it. */
static void pqc_expect(const struct sl_batch *b, size_t r, size_t c, int part, int64_t *i,
		       double *d, const char **s, size_t *n)
{
	const union sl_cell *v = &b->cols[c].cells[r];
	switch (b->cols[c].type) {
	case SL_TYPE_STRING:
		*s = sl_batch_str(b, r, c, n);
		break;
	case SL_TYPE_INT:
	case SL_TYPE_DATE:
		*i = (int32_t)v->i;
		break;
	case SL_TYPE_BOOLEAN:
		*i = v->i != 0;
		break;
	case SL_TYPE_DOUBLE:
		*d = v->d;
		break;
	case SL_TYPE_WINDOW:
		*i = part == 1 ? v->w.start : v->w.end;
		break;
	default:
		*i = v->i;
	}
}

static void pqc_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t k = 0; k < n; k++, v >>= 8)
		p[k] = (uint8_t)v;
}

/*
 * Checks f against rows rows[0..nrows) of b (rows NULL: rows 0..nrows) for
 * the file columns cols[k] reading batch column src[k]. 0, or -1 with
 * pqr_err set.
 */
static int pq_check(const struct pqr_file *f, const struct sl_batch *b, const struct sl_column *cols,
		    const size_t *src, size_t ncols, const size_t *rows, size_t nrows)
{
	size_t leaf = 0;

	if (f->num_rows != (int64_t)nrows)
		return pqr_fail("num_rows %lld, want %zu", (long long)f->num_rows, nrows);
	if (f->ntop != ncols)
		return pqr_fail("%zu top-level columns, want %zu", f->ntop, ncols);
	if (strncmp(f->created_by, "sluice version ", 15) != 0)
		return pqr_fail("created_by '%s'", f->created_by);
	for (size_t k = 0; k < ncols; k++) {
		if (strcmp(f->top_name[k], cols[k].name) != 0)
			return pqr_fail("column %zu named '%s', want '%s'", k, f->top_name[k], cols[k].name);
		bool win = cols[k].type == SL_TYPE_WINDOW;
		if (f->top_group[k] != win)
			return pqr_fail("column %zu: group %d", k, f->top_group[k]);
		for (int part = win ? 1 : 0; part <= (win ? 2 : 0); part++, leaf++) {
			if (leaf >= f->nleaves)
				return pqr_fail("too few leaves");
			const struct pqr_leaf *l = &f->leaves[leaf];
			size_t c = src[k];
			if (l->ptype != pqc_ptype(cols[k].type) || l->max_def != (win ? 2 : 1))
				return pqr_fail("leaf %zu: type %d max_def %d", leaf, l->ptype, l->max_def);
			if (win && strcmp(l->path[1], part == 1 ? "start" : "end"))
				return pqr_fail("window child '%s'", l->path[1]);
			switch (cols[k].type) {
			case SL_TYPE_STRING:
				if (l->converted != 0 || !l->logical_string)
					return pqr_fail("STRING annotations");
				break;
			case SL_TYPE_TIMESTAMP:
			case SL_TYPE_WINDOW:
				if (l->converted != 10 || !l->logical_ts || !l->ts_utc)
					return pqr_fail("TIMESTAMP annotations");
				break;
			case SL_TYPE_DATE:
				if (l->converted != 6 || !l->logical_date)
					return pqr_fail("DATE annotations");
				break;
			default:
				if (l->has_converted)
					return pqr_fail("unexpected converted type");
			}
			if (l->nvals != nrows)
				return pqr_fail("leaf %zu has %zu values, want %zu", leaf, l->nvals, nrows);
			size_t at = 0;
			for (size_t g = 0; g < f->nrg; g++) {
				const struct pqr_chunk *ch = &l->chunks[g];
				int64_t nulls = 0, nans = 0;
				bool have = false;
				int64_t imin = 0, imax = 0;
				double dmin = 0, dmax = 0;
				const char *smin = NULL, *smax = NULL;
				size_t nsmin = 0, nsmax = 0;
				for (int64_t q = 0; q < f->rg_rows[g]; q++, at++) {
					size_t r = rows ? rows[at] : at;
					const struct pqr_val *v = &l->vals[at];
					if (sl_batch_is_null(b, r, c)) {
						nulls++;
						if (v->def != 0)
							return pqr_fail("leaf %zu row %zu: def %d for null", leaf, at, v->def);
						continue;
					}
					if (v->def != l->max_def)
						return pqr_fail("leaf %zu row %zu: def %d, want %d", leaf, at, v->def, l->max_def);
					int64_t i = 0;
					double d = 0;
					const char *s = NULL;
					size_t n = 0;
					pqc_expect(b, r, c, part, &i, &d, &s, &n);
					if (cols[k].type == SL_TYPE_STRING) {
						if (v->n != n || memcmp(v->s, s, n))
							return pqr_fail("leaf %zu row %zu: string differs", leaf, at);
						if (!have || memcmp(s, smin, n < nsmin ? n : nsmin) < 0 ||
						    (memcmp(s, smin, n < nsmin ? n : nsmin) == 0 && n < nsmin))
							smin = s, nsmin = n;
						if (!have || memcmp(s, smax, n < nsmax ? n : nsmax) > 0 ||
						    (memcmp(s, smax, n < nsmax ? n : nsmax) == 0 && n > nsmax))
							smax = s, nsmax = n;
						have = true;
					} else if (cols[k].type == SL_TYPE_DOUBLE) {
						if (memcmp(&v->d, &d, 8) != 0 && !(isnan(v->d) && isnan(d)))
							return pqr_fail("leaf %zu row %zu: %g, want %g", leaf, at, v->d, d);
						if (isnan(d)) {
							nans++;
							continue;
						}
						if (!have || d < dmin || (d == 0 && dmin == 0 && signbit(d)))
							dmin = d;
						if (!have || d > dmax || (d == 0 && dmax == 0 && !signbit(d)))
							dmax = d;
						have = true;
					} else {
						if (v->i != i)
							return pqr_fail("leaf %zu row %zu: %lld, want %lld", leaf, at,
									(long long)v->i, (long long)i);
						if (!have || i < imin)
							imin = i;
						if (!have || i > imax)
							imax = i;
						have = true;
					}
				}
				/* the chunk's statistics */
				if (!ch->has_null_count || ch->null_count != nulls)
					return pqr_fail("leaf %zu rg %zu: null_count %lld, want %lld", leaf, g,
							(long long)ch->null_count, (long long)nulls);
				if (cols[k].type == SL_TYPE_DOUBLE && (!ch->has_nan_count || ch->nan_count != nans))
					return pqr_fail("leaf %zu rg %zu: nan_count", leaf, g);
				uint8_t emin[8], emax[8];
				size_t w = 0;
				switch (l->ptype) {
				case 0:
					w = 1;
					break;
				case 1:
					w = 4;
					break;
				default:
					w = 8;
				}
				if (cols[k].type == SL_TYPE_DOUBLE) {
					/* zeros: -0.0 is the min and +0.0 the max */
					if (dmin == 0)
						dmin = -0.0;
					if (dmax == 0)
						dmax = 0.0;
					uint64_t u;
					memcpy(&u, &dmin, 8);
					pqc_le(emin, u, 8);
					memcpy(&u, &dmax, 8);
					pqc_le(emax, u, 8);
				} else {
					pqc_le(emin, (uint64_t)imin, w);
					pqc_le(emax, (uint64_t)imax, w);
				}
				if (cols[k].type == SL_TYPE_STRING) {
					if (have && nsmin <= 4096 && nsmax <= 4096) {
						if (!ch->has_minmax || ch->nmin != nsmin || ch->nmax != nsmax ||
						    memcmp(ch->min, smin, nsmin) || memcmp(ch->max, smax, nsmax))
							return pqr_fail("leaf %zu rg %zu: string min/max", leaf, g);
					} else if (ch->has_minmax) {
						return pqr_fail("leaf %zu rg %zu: min/max written but none expected", leaf, g);
					}
				} else if (have) {
					if (!ch->has_minmax || ch->nmin != w || ch->nmax != w ||
					    memcmp(ch->min, emin, w) || memcmp(ch->max, emax, w))
						return pqr_fail("leaf %zu rg %zu: min/max", leaf, g);
				} else if (ch->has_minmax) {
					return pqr_fail("leaf %zu rg %zu: min/max on an all-null/NaN chunk", leaf, g);
				}
			}
			if (at != nrows)
				return pqr_fail("row groups hold %zu rows, want %zu", at, nrows);
		}
	}
	if (leaf != f->nleaves)
		return pqr_fail("%zu leaves, want %zu", f->nleaves, leaf);
	if (f->ncolumn_orders != f->nleaves)
		return pqr_fail("%zu column orders for %zu leaves", f->ncolumn_orders, f->nleaves);
	return 0;
}

#endif
