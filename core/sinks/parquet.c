/* SPDX-License-Identifier: MIT */
/*
 * The Parquet encoder (parquet.h): one leaf per column (two for a window),
 * each buffering its column chunk as finished pages until the row group is
 * written; a dictionary per string chunk; statistics per chunk; the footer
 * at close. The byte-level pieces are in parquet_thrift.c.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "parquet.h"
#include "parquet_int.h"
#include "sluice-build.h"

#define STATS_MAX 4096 /* longest string min/max written (Arrow's limit) */

/* One leaf column: its current page, its buffered chunk, its statistics. */
struct leaf {
	enum sl_type type;  /* the file column's type (WINDOW for both children) */
	int ptype;          /* PQ_INT32 ... */
	int max_def;        /* 1, or 2 under a window */
	size_t col;         /* file column */
	int part;           /* 0, or 1 = window start, 2 = window end */
	/* the current page */
	uint32_t *levels;   /* definition level per row of the page */
	size_t nlev, levcap;
	uint32_t *idx;      /* dictionary index per value (dictionary mode) */
	size_t nidx, idxcap;
	struct sl_strbuf vals; /* PLAIN values (plain mode) */
	size_t nvals;       /* non-null values in the page */
	/* the chunk */
	struct sl_strbuf pages; /* finished data pages: header + body each */
	int64_t usize;      /* sum of header + uncompressed body of those pages */
	int64_t nrows;      /* rows (= levels) in the chunk */
	bool fallback;      /* strings: the dictionary is full, pages are PLAIN */
	bool dict_pages;    /* a dictionary-encoded page was written */
	bool plain_pages;   /* a PLAIN page was written */
	struct sl_strbuf dict; /* PLAIN dictionary: u32 length + bytes each */
	size_t *dict_off;   /* entry -> offset of its length in dict */
	size_t ndict, dictcap;
	uint32_t *slots;    /* hash table: entry + 1, 0 empty */
	size_t nslots;      /* a power of two, or 0 */
	/* statistics */
	int64_t nulls;
	bool has_minmax;
	int64_t imin, imax;
	double dmin, dmax;
	int64_t nans;
	struct sl_strbuf smin, smax;
};

struct sl_pq_writer {
	size_t ncols;
	struct sl_column *cols; /* owned copies, names included */
	size_t *src;            /* batch column per file column */
	struct leaf *leaves;
	size_t nleaves;
	struct sl_pq_opts o;    /* defaults filled in */
	sl_pq_write_fn fn;
	void *ctx;
	uint64_t off;           /* bytes written through fn */
	int64_t rg_rows;        /* rows in the current row group */
	int64_t rows;           /* rows in finished row groups */
	struct sl_strbuf rgmeta; /* RowGroup structs written so far, serialized */
	size_t nrg;
	struct sl_strbuf body, hdr; /* page scratch */
	int err;                /* sticky */
};

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static int bits_for(uint32_t v)
{
	int n = 0;
	while (v) {
		n++;
		v >>= 1;
	}
	return n;
}

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *p = realloc(*(void **)pp, n * elem);
	if (!p)
		return ENOMEM;
	*(void **)pp = p;
	*cap = n;
	return 0;
}

static void leaf_release(struct leaf *l)
{
	free(l->levels);
	free(l->idx);
	sl_strbuf_release(&l->vals);
	sl_strbuf_release(&l->pages);
	sl_strbuf_release(&l->dict);
	free(l->dict_off);
	free(l->slots);
	sl_strbuf_release(&l->smin);
	sl_strbuf_release(&l->smax);
}

/* Empties the chunk of l for the next row group, keeping its buffers. */
static void leaf_reset_chunk(struct leaf *l)
{
	l->pages.len = 0;
	l->usize = 0;
	l->nrows = 0;
	l->fallback = l->dict_pages = l->plain_pages = false;
	l->dict.len = 0;
	l->ndict = 0;
	if (l->slots)
		memset(l->slots, 0, l->nslots * sizeof(*l->slots));
	l->nulls = 0;
	l->has_minmax = false;
	l->nans = 0;
}

static bool dict_mode(const struct leaf *l)
{
	return l->ptype == PQ_BYTE_ARRAY && !l->fallback;
}

/* The bytes the leaf buffers, for the row group's size. */
static size_t leaf_bytes(const struct leaf *l)
{
	return l->pages.len + l->vals.len + l->nidx * 4 + l->nlev / 4 + l->dict.len;
}

/* Compresses body into a page of l's chunk (or into out for a dictionary page). */
static int emit_page(struct sl_pq_writer *w, struct sl_strbuf *out, int type, size_t nvalues,
		     int encoding, int64_t *usize)
{
	const void *data = w->body.p ? w->body.p : "";
	size_t clen = w->body.len;
	void *z = NULL;
	int rc;

	if (w->body.oom)
		return ENOMEM;
	if (w->body.len > INT32_MAX)
		return EFBIG;
	if (w->o.codec == SL_COMPRESSION_ZSTD) {
		rc = sl_codec_compress(w->body.p ? w->body.p : "", w->body.len, w->o.zstd_level, &z,
				       &clen);
		if (rc)
			return rc;
		data = z;
	}
	w->hdr.len = 0;
	pq_page_header(&w->hdr, type, w->body.len, clen, nvalues, encoding);
	sl_strbuf_add(out, w->hdr.p, w->hdr.len);
	sl_strbuf_add(out, data, clen);
	free(z);
	if (w->hdr.oom || out->oom)
		return ENOMEM;
	*usize += (int64_t)(w->hdr.len + w->body.len);
	return 0;
}

/* Encodes the current page of l into its chunk and empties it. */
static int flush_page(struct sl_pq_writer *w, struct leaf *l)
{
	unsigned char len4[4];
	bool dict = dict_mode(l) && l->nidx > 0;

	if (l->nlev == 0)
		return 0;
	w->body.len = 0;
	sl_strbuf_add(&w->body, "\0\0\0\0", 4);
	pq_rle_encode(&w->body, l->levels, l->nlev, bits_for((uint32_t)l->max_def));
	if (w->body.oom)
		return ENOMEM;
	put_le32(len4, (uint32_t)(w->body.len - 4));
	memcpy(w->body.p, len4, 4);
	if (dict) {
		int width = bits_for((uint32_t)(l->ndict - 1));
		if (width < 1)
			width = 1; /* width 0 is legal but has crashed readers */
		sl_strbuf_addc(&w->body, (char)width);
		pq_rle_encode(&w->body, l->idx, l->nidx, width);
	} else {
		sl_strbuf_add(&w->body, l->vals.p, l->vals.len);
	}
	int rc = emit_page(w, &l->pages, PQ_DATA_PAGE, l->nlev,
			   dict ? PQ_RLE_DICTIONARY : PQ_PLAIN, &l->usize);
	if (rc)
		return rc;
	if (dict)
		l->dict_pages = true;
	else
		l->plain_pages = true;
	l->nlev = l->nidx = l->nvals = 0;
	l->vals.len = 0;
	return 0;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static int dict_rehash(struct leaf *l, size_t nslots)
{
	uint32_t *slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return ENOMEM;
	for (size_t e = 0; e < l->ndict; e++) {
		const unsigned char *p = (const unsigned char *)l->dict.p + l->dict_off[e];
		uint32_t n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;
		size_t h = hash_bytes((const char *)p + 4, n) & (nslots - 1);
		while (slots[h])
			h = (h + 1) & (nslots - 1);
		slots[h] = (uint32_t)e + 1;
	}
	free(l->slots);
	l->slots = slots;
	l->nslots = nslots;
	return 0;
}

/*
 * The dictionary index of s in l, added when new: 0 with *e set, 0 with
 * *e = UINT32_MAX when the dictionary is full, or ENOMEM.
 */
static int dict_find(struct sl_pq_writer *w, struct leaf *l, const char *s, size_t n, uint32_t *e)
{
	uint32_t h = hash_bytes(s, n);
	size_t i;
	int rc;

	if (l->nslots) {
		for (i = h & (l->nslots - 1); l->slots[i]; i = (i + 1) & (l->nslots - 1)) {
			size_t off = l->dict_off[l->slots[i] - 1];
			const unsigned char *p = (const unsigned char *)l->dict.p + off;
			uint32_t m = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24;
			if (m == n && memcmp(p + 4, s, n) == 0) {
				*e = l->slots[i] - 1;
				return 0;
			}
		}
	}
	if (l->ndict >= SL_PQ_DICT_ENTRIES_MAX || n + 4 > w->o.dict_bytes ||
	    l->dict.len + 4 + n > w->o.dict_bytes) {
		*e = UINT32_MAX;
		return 0;
	}
	if ((l->ndict + 1) * 2 > l->nslots) {
		rc = dict_rehash(l, l->nslots ? l->nslots * 2 : 1024);
		if (rc)
			return rc;
	}
	rc = grow(&l->dict_off, &l->dictcap, l->ndict + 1, sizeof(*l->dict_off));
	if (rc)
		return rc;
	unsigned char len4[4];
	put_le32(len4, (uint32_t)n);
	size_t off = l->dict.len;
	sl_strbuf_add(&l->dict, len4, 4);
	sl_strbuf_add(&l->dict, s, n);
	if (l->dict.oom)
		return ENOMEM;
	for (i = h & (l->nslots - 1); l->slots[i]; i = (i + 1) & (l->nslots - 1))
		;
	l->dict_off[l->ndict] = off;
	l->slots[i] = (uint32_t)l->ndict + 1;
	*e = (uint32_t)l->ndict++;
	return 0;
}

static int set_bytes(struct sl_strbuf *b, const char *s, size_t n)
{
	b->len = 0;
	sl_strbuf_add(b, s, n);
	return b->oom ? ENOMEM : 0;
}

static int stats_str(struct leaf *l, const char *s, size_t n)
{
	int rc = 0;
	if (!l->has_minmax) {
		l->has_minmax = true;
		rc = set_bytes(&l->smin, s, n);
		return rc ? rc : set_bytes(&l->smax, s, n);
	}
	size_t m = n < l->smin.len ? n : l->smin.len;
	int c = memcmp(s, l->smin.p ? l->smin.p : "", m);
	if (c < 0 || (c == 0 && n < l->smin.len))
		rc = set_bytes(&l->smin, s, n);
	m = n < l->smax.len ? n : l->smax.len;
	c = memcmp(s, l->smax.p ? l->smax.p : "", m);
	if (!rc && (c > 0 || (c == 0 && n > l->smax.len)))
		rc = set_bytes(&l->smax, s, n);
	return rc;
}

static void stats_int(struct leaf *l, int64_t v)
{
	if (!l->has_minmax) {
		l->has_minmax = true;
		l->imin = l->imax = v;
	} else if (v < l->imin) {
		l->imin = v;
	} else if (v > l->imax) {
		l->imax = v;
	}
}

static void stats_double(struct leaf *l, double v)
{
	if (isnan(v)) {
		l->nans++;
		return;
	}
	if (!l->has_minmax) {
		l->has_minmax = true;
		l->dmin = l->dmax = v;
	} else if (v < l->dmin) {
		l->dmin = v;
	} else if (v > l->dmax) {
		l->dmax = v;
	}
}

/* Appends one string value to l's page, dictionary or plain. */
static int add_string(struct sl_pq_writer *w, struct leaf *l, const char *s, size_t n)
{
	unsigned char len4[4];
	uint32_t e;
	int rc;

	if (n > INT32_MAX)
		return EFBIG;
	if (dict_mode(l)) {
		rc = dict_find(w, l, s, n, &e);
		if (rc)
			return rc;
		if (e != UINT32_MAX) {
			rc = grow(&l->idx, &l->idxcap, l->nidx + 1, sizeof(*l->idx));
			if (rc)
				return rc;
			l->idx[l->nidx++] = e;
			return 0;
		}
		/* the dictionary is full: the rest of the chunk is PLAIN */
		rc = flush_page(w, l);
		if (rc)
			return rc;
		l->fallback = true;
	}
	put_le32(len4, (uint32_t)n);
	sl_strbuf_add(&l->vals, len4, 4);
	sl_strbuf_add(&l->vals, s, n);
	return l->vals.oom ? ENOMEM : 0;
}

/* Appends row r of b to leaf l's page. */
static int add_value(struct sl_pq_writer *w, struct leaf *l, const struct sl_batch *b, size_t r)
{
	size_t c = w->src[l->col];
	unsigned char buf[8];
	int rc;

	rc = grow(&l->levels, &l->levcap, l->nlev + 1, sizeof(*l->levels));
	if (rc)
		return rc;
	if (sl_batch_is_null(b, r, c)) {
		/* a null window makes both children null at level 0 */
		l->levels[l->nlev++] = 0;
		l->nrows++;
		l->nulls++;
		return 0;
	}
	const union sl_cell *v = &b->cols[c].cells[r];
	switch (l->type) {
	case SL_TYPE_STRING: {
		size_t n;
		const char *s = sl_batch_str(b, r, c, &n);
		rc = add_string(w, l, s, n);
		if (!rc)
			rc = stats_str(l, s, n);
		break;
	}
	case SL_TYPE_BIGINT:
	case SL_TYPE_TIMESTAMP:
		put_le64(buf, (uint64_t)v->i);
		sl_strbuf_add(&l->vals, buf, 8);
		stats_int(l, v->i);
		break;
	case SL_TYPE_INT:
	case SL_TYPE_DATE:
		put_le32(buf, (uint32_t)(int32_t)v->i);
		sl_strbuf_add(&l->vals, buf, 4);
		stats_int(l, (int32_t)v->i);
		break;
	case SL_TYPE_DOUBLE: {
		uint64_t u;
		memcpy(&u, &v->d, 8);
		put_le64(buf, u);
		sl_strbuf_add(&l->vals, buf, 8);
		stats_double(l, v->d);
		break;
	}
	case SL_TYPE_BOOLEAN:
		if (l->nvals % 8 == 0)
			sl_strbuf_addc(&l->vals, 0);
		if (!l->vals.oom && v->i)
			l->vals.p[l->vals.len - 1] |= (char)(1u << (l->nvals % 8));
		stats_int(l, v->i != 0);
		break;
	case SL_TYPE_WINDOW: {
		int64_t t = l->part == 1 ? v->w.start : v->w.end;
		put_le64(buf, (uint64_t)t);
		sl_strbuf_add(&l->vals, buf, 8);
		stats_int(l, t);
		break;
	}
	}
	if (rc)
		return rc;
	if (l->vals.oom)
		return ENOMEM;
	l->levels[l->nlev++] = (uint32_t)l->max_def;
	l->nrows++;
	l->nvals++;
	return 0;
}

/* Appends min/max (PLAIN, no length prefix) and the counts as Statistics. */
static void write_stats(struct pq_tw *t, const struct leaf *l)
{
	unsigned char mn[8], mx[8];
	const void *pmin = mn, *pmax = mx;
	size_t n = 0, nmin = 0, nmax = 0;

	pq_tw_struct(t, 12);
	pq_tw_i64(t, 3, l->nulls);
	if (l->has_minmax) {
		switch (l->ptype) {
		case PQ_BOOLEAN:
			mn[0] = (unsigned char)l->imin;
			mx[0] = (unsigned char)l->imax;
			n = 1;
			break;
		case PQ_INT32:
			put_le32(mn, (uint32_t)l->imin);
			put_le32(mx, (uint32_t)l->imax);
			n = 4;
			break;
		case PQ_INT64:
			put_le64(mn, (uint64_t)l->imin);
			put_le64(mx, (uint64_t)l->imax);
			n = 8;
			break;
		case PQ_DOUBLE: {
			/* zeros: -0.0 is the min and +0.0 the max, whichever was seen */
			double a = l->dmin == 0 ? -0.0 : l->dmin, z = l->dmax == 0 ? 0.0 : l->dmax;
			uint64_t u;
			memcpy(&u, &a, 8);
			put_le64(mn, u);
			memcpy(&u, &z, 8);
			put_le64(mx, u);
			n = 8;
			break;
		}
		case PQ_BYTE_ARRAY:
			pmin = l->smin.p ? l->smin.p : "";
			pmax = l->smax.p ? l->smax.p : "";
			nmin = l->smin.len;
			nmax = l->smax.len;
			break;
		}
		if (l->ptype != PQ_BYTE_ARRAY)
			nmin = nmax = n;
		if (nmin <= STATS_MAX && nmax <= STATS_MAX) {
			pq_tw_bin(t, 5, pmax, nmax);
			pq_tw_bin(t, 6, pmin, nmin);
		}
	}
	if (l->ptype == PQ_DOUBLE)
		pq_tw_i64(t, 9, l->nans);
	pq_tw_end(t);
}

static int out(struct sl_pq_writer *w, const void *p, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	if (w->off == 0) {
		rc = w->fn(w->ctx, "PAR1", 4);
		if (rc)
			return rc;
		w->off = 4;
	}
	rc = w->fn(w->ctx, p, n);
	if (rc)
		return rc;
	w->off += n;
	return 0;
}

/* Writes one column chunk and appends its ColumnChunk to t. */
static int write_chunk(struct sl_pq_writer *w, struct leaf *l, struct pq_tw *t, int64_t *usize,
		       int64_t *csize)
{
	int64_t start, dict_usize = 0;
	size_t dict_hdr_len = 0;
	int rc;

	rc = flush_page(w, l);
	if (rc)
		return rc;
	start = (int64_t)w->off; /* flush_row_group() wrote the magic */
	if (l->dict_pages) {
		struct sl_strbuf dp = { 0 };
		w->body.len = 0;
		sl_strbuf_add(&w->body, l->dict.p, l->dict.len);
		rc = emit_page(w, &dp, PQ_DICTIONARY_PAGE, l->ndict, PQ_PLAIN, &dict_usize);
		if (!rc)
			rc = out(w, dp.p, dp.len);
		dict_hdr_len = dp.len;
		sl_strbuf_release(&dp);
		if (rc)
			return rc;
	}
	rc = out(w, l->pages.p, l->pages.len);
	if (rc)
		return rc;
	int64_t total_c = (int64_t)(dict_hdr_len + l->pages.len);
	int64_t total_u = dict_usize + l->usize;

	const struct sl_column *col = &w->cols[l->col];
	pq_tw_elem(t); /* ColumnChunk */
	pq_tw_i64(t, 2, 0);
	pq_tw_struct(t, 3); /* ColumnMetaData */
	pq_tw_i32(t, 1, l->ptype);
	size_t nenc = 1 + (l->dict_pages || l->plain_pages ? 1 : 0) + (l->dict_pages ? 1 : 0);
	pq_tw_list(t, 2, TW_I32, nenc);
	pq_tw_list_i32(t->b, PQ_PLAIN);
	pq_tw_list_i32(t->b, PQ_RLE);
	if (l->dict_pages)
		pq_tw_list_i32(t->b, PQ_RLE_DICTIONARY);
	if (l->part) {
		const char *child = l->part == 1 ? "start" : "end";
		pq_tw_list(t, 3, TW_BINARY, 2);
		pq_tw_list_bin(t->b, col->name, strlen(col->name));
		pq_tw_list_bin(t->b, child, strlen(child));
	} else {
		pq_tw_list(t, 3, TW_BINARY, 1);
		pq_tw_list_bin(t->b, col->name, strlen(col->name));
	}
	pq_tw_i32(t, 4, w->o.codec == SL_COMPRESSION_ZSTD ? PQ_ZSTD : PQ_UNCOMPRESSED);
	pq_tw_i64(t, 5, l->nrows);
	pq_tw_i64(t, 6, total_u);
	pq_tw_i64(t, 7, total_c);
	pq_tw_i64(t, 9, start + (int64_t)dict_hdr_len);
	if (l->dict_pages)
		pq_tw_i64(t, 11, start);
	write_stats(t, l);
	pq_tw_end(t); /* ColumnMetaData */
	pq_tw_end(t); /* ColumnChunk */
	*usize += total_u;
	*csize += total_c;
	leaf_reset_chunk(l);
	return 0;
}

/* Writes the current row group (if it has rows) and records its RowGroup. */
static int flush_row_group(struct sl_pq_writer *w)
{
	struct pq_tw t = { .b = &w->rgmeta };
	int64_t usize = 0, csize = 0;
	int rc;

	if (w->rg_rows == 0)
		return 0;
	if (w->off == 0) {
		rc = w->fn(w->ctx, "PAR1", 4);
		if (rc)
			return rc;
		w->off = 4;
	}
	int64_t first = (int64_t)w->off;
	pq_tw_elem(&t); /* RowGroup */
	pq_tw_list(&t, 1, TW_STRUCT, w->nleaves);
	for (size_t i = 0; i < w->nleaves; i++) {
		rc = write_chunk(w, &w->leaves[i], &t, &usize, &csize);
		if (rc)
			return rc;
	}
	pq_tw_i64(&t, 2, usize);
	pq_tw_i64(&t, 3, w->rg_rows);
	pq_tw_i64(&t, 5, first);
	pq_tw_i64(&t, 6, csize);
	if (w->nrg <= INT16_MAX) {
		pq_tw_field(&t, 7, 4); /* ordinal, an i16 */
		pq_tw_varint(t.b, (uint64_t)w->nrg << 1);
	}
	pq_tw_end(&t);
	if (w->rgmeta.oom)
		return ENOMEM;
	w->nrg++;
	w->rows += w->rg_rows;
	w->rg_rows = 0;
	return 0;
}

static int add_row(struct sl_pq_writer *w, const struct sl_batch *b, size_t r)
{
	size_t bytes = 0;
	int rc;

	for (size_t i = 0; i < w->nleaves; i++) {
		struct leaf *l = &w->leaves[i];
		rc = add_value(w, l, b, r);
		if (rc)
			return rc;
		if (l->nlev >= SL_PQ_PAGE_ROWS_MAX ||
		    l->vals.len + l->nidx * 4 + l->nlev / 4 >= w->o.page_bytes) {
			rc = flush_page(w, l);
			if (rc)
				return rc;
		}
		bytes += leaf_bytes(l);
	}
	w->rg_rows++;
	if (bytes >= w->o.row_group_bytes)
		return flush_row_group(w);
	return 0;
}

static int check_batch(const struct sl_pq_writer *w, const struct sl_batch *b)
{
	for (size_t k = 0; k < w->ncols; k++)
		if (w->src[k] >= b->schema->n || b->cols[w->src[k]].type != w->cols[k].type)
			return EINVAL;
	return 0;
}

int sl_pq_add(struct sl_pq_writer *w, const struct sl_batch *b, size_t from, size_t to)
{
	if (w->err)
		return w->err;
	w->err = check_batch(w, b);
	for (size_t r = from; r < to && !w->err; r++)
		w->err = add_row(w, b, r);
	return w->err;
}

int sl_pq_add_rows(struct sl_pq_writer *w, const struct sl_batch *b, const size_t *idx, size_t n)
{
	if (w->err)
		return w->err;
	w->err = check_batch(w, b);
	for (size_t i = 0; i < n && !w->err; i++)
		w->err = add_row(w, b, idx[i]);
	return w->err;
}

/* Appends the SchemaElement of a leaf of type type, named name. */
static void schema_leaf(struct pq_tw *t, enum sl_type type, const char *name)
{
	static const int ptype[] = {
		[SL_TYPE_STRING] = PQ_BYTE_ARRAY, [SL_TYPE_BIGINT] = PQ_INT64,
		[SL_TYPE_INT] = PQ_INT32,	   [SL_TYPE_DOUBLE] = PQ_DOUBLE,
		[SL_TYPE_BOOLEAN] = PQ_BOOLEAN,	   [SL_TYPE_TIMESTAMP] = PQ_INT64,
		[SL_TYPE_DATE] = PQ_INT32,
	};

	pq_tw_elem(t);
	pq_tw_i32(t, 1, ptype[type]);
	pq_tw_i32(t, 3, 1); /* OPTIONAL */
	pq_tw_bin(t, 4, name, strlen(name));
	switch (type) {
	case SL_TYPE_STRING:
		pq_tw_i32(t, 6, 0); /* UTF8 */
		pq_tw_struct(t, 10);
		pq_tw_struct(t, 1); /* STRING */
		pq_tw_end(t);
		pq_tw_end(t);
		break;
	case SL_TYPE_TIMESTAMP:
		pq_tw_i32(t, 6, 10); /* TIMESTAMP_MICROS */
		pq_tw_struct(t, 10);
		pq_tw_struct(t, 8); /* TIMESTAMP */
		pq_tw_bool(t, 1, true); /* isAdjustedToUTC */
		pq_tw_struct(t, 2);     /* unit */
		pq_tw_struct(t, 2);     /* MICROS */
		pq_tw_end(t);
		pq_tw_end(t);
		pq_tw_end(t);
		pq_tw_end(t);
		break;
	case SL_TYPE_DATE:
		pq_tw_i32(t, 6, 6); /* DATE */
		pq_tw_struct(t, 10);
		pq_tw_struct(t, 6); /* DATE */
		pq_tw_end(t);
		pq_tw_end(t);
		break;
	default:
		break;
	}
	pq_tw_end(t);
}

static int write_footer(struct sl_pq_writer *w)
{
	struct sl_strbuf f = { 0 };
	struct pq_tw t = { .b = &f };
	unsigned char len4[4];
	size_t nschema = 1 + w->ncols;
	int rc;

	for (size_t k = 0; k < w->ncols; k++)
		nschema += w->cols[k].type == SL_TYPE_WINDOW ? 2 : 0;
	pq_tw_elem(&t); /* FileMetaData */
	pq_tw_i32(&t, 1, 1);
	pq_tw_list(&t, 2, TW_STRUCT, nschema);
	pq_tw_elem(&t); /* the root */
	pq_tw_bin(&t, 4, "schema", 6);
	pq_tw_i32(&t, 5, (int32_t)w->ncols);
	pq_tw_end(&t);
	for (size_t k = 0; k < w->ncols; k++) {
		const struct sl_column *c = &w->cols[k];
		if (c->type != SL_TYPE_WINDOW) {
			schema_leaf(&t, c->type, c->name);
			continue;
		}
		pq_tw_elem(&t);
		pq_tw_i32(&t, 3, 1); /* OPTIONAL */
		pq_tw_bin(&t, 4, c->name, strlen(c->name));
		pq_tw_i32(&t, 5, 2);
		pq_tw_end(&t);
		schema_leaf(&t, SL_TYPE_TIMESTAMP, "start");
		schema_leaf(&t, SL_TYPE_TIMESTAMP, "end");
	}
	pq_tw_i64(&t, 3, w->rows);
	pq_tw_list(&t, 4, TW_STRUCT, w->nrg);
	sl_strbuf_add(&f, w->rgmeta.p, w->rgmeta.len);
	char created[64];
	int n = snprintf(created, sizeof(created), "sluice version %s", SLUICE_VERSION);
	pq_tw_bin(&t, 6, created, (size_t)n);
	pq_tw_list(&t, 7, TW_STRUCT, w->nleaves);
	for (size_t i = 0; i < w->nleaves; i++) {
		pq_tw_elem(&t); /* ColumnOrder */
		pq_tw_struct(&t, 1); /* TYPE_ORDER */
		pq_tw_end(&t);
		pq_tw_end(&t);
	}
	pq_tw_end(&t);
	if (f.oom) {
		sl_strbuf_release(&f);
		return ENOMEM;
	}
	put_le32(len4, (uint32_t)f.len);
	if (w->off == 0) {
		rc = w->fn(w->ctx, "PAR1", 4);
		if (rc)
			goto f_release;
		w->off = 4;
	}
	rc = out(w, f.p, f.len);
	if (!rc)
		rc = out(w, len4, 4);
	if (!rc)
		rc = out(w, "PAR1", 4);
f_release:
	sl_strbuf_release(&f);
	return rc;
}

int sl_pq_close(struct sl_pq_writer *w)
{
	int rc = w->err;

	if (!rc)
		rc = flush_row_group(w);
	if (!rc)
		rc = write_footer(w);
	sl_pq_abort(w);
	return rc;
}

void sl_pq_abort(struct sl_pq_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nleaves; i++)
		leaf_release(&w->leaves[i]);
	free(w->leaves);
	for (size_t k = 0; k < w->ncols; k++)
		free(w->cols[k].name);
	free(w->cols);
	free(w->src);
	sl_strbuf_release(&w->rgmeta);
	sl_strbuf_release(&w->body);
	sl_strbuf_release(&w->hdr);
	free(w);
}

static int leaf_ptype(enum sl_type t)
{
	switch (t) {
	case SL_TYPE_STRING:
		return PQ_BYTE_ARRAY;
	case SL_TYPE_BIGINT:
	case SL_TYPE_TIMESTAMP:
	case SL_TYPE_WINDOW:
		return PQ_INT64;
	case SL_TYPE_INT:
	case SL_TYPE_DATE:
		return PQ_INT32;
	case SL_TYPE_DOUBLE:
		return PQ_DOUBLE;
	case SL_TYPE_BOOLEAN:
		return PQ_BOOLEAN;
	}
	return -1;
}

int sl_pq_open(const struct sl_column *cols, const size_t *src, size_t ncols,
	       const struct sl_pq_opts *o, sl_pq_write_fn fn, void *ctx, struct sl_pq_writer **out)
{
	struct sl_pq_writer *w;
	size_t nleaves = 0;

	if (ncols == 0 || !fn)
		return EINVAL;
	if (o && o->codec != SL_COMPRESSION_NONE && o->codec != SL_COMPRESSION_ZSTD)
		return EINVAL;
	for (size_t k = 0; k < ncols; k++) {
		if (leaf_ptype(cols[k].type) < 0 || !cols[k].name)
			return EINVAL;
		nleaves += cols[k].type == SL_TYPE_WINDOW ? 2 : 1;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return ENOMEM;
	if (o)
		w->o = *o;
	if (!w->o.row_group_bytes)
		w->o.row_group_bytes = SL_PQ_ROW_GROUP_BYTES_DEFAULT;
	if (!w->o.zstd_level)
		w->o.zstd_level = SL_CODEC_LEVEL_DEFAULT;
	if (!w->o.page_bytes)
		w->o.page_bytes = SL_PQ_PAGE_BYTES_DEFAULT;
	if (!w->o.dict_bytes)
		w->o.dict_bytes = SL_PQ_DICT_BYTES_DEFAULT;
	w->fn = fn;
	w->ctx = ctx;
	w->cols = calloc(ncols, sizeof(*w->cols));
	w->src = calloc(ncols, sizeof(*w->src));
	w->leaves = calloc(nleaves, sizeof(*w->leaves));
	if (!w->cols || !w->src || !w->leaves)
		goto w_free;
	for (size_t k = 0; k < ncols; k++, w->ncols++) {
		w->cols[k] = cols[k];
		w->cols[k].name = strdup(cols[k].name);
		if (!w->cols[k].name)
			goto w_free;
		w->src[k] = src[k];
		for (int part = 0; part < (cols[k].type == SL_TYPE_WINDOW ? 2 : 1); part++) {
			struct leaf *l = &w->leaves[w->nleaves++];
			l->type = cols[k].type;
			l->ptype = leaf_ptype(cols[k].type);
			l->col = k;
			l->part = cols[k].type == SL_TYPE_WINDOW ? part + 1 : 0;
			l->max_def = l->part ? 2 : 1;
		}
	}
	*out = w;
	return 0;
w_free:
	sl_pq_abort(w);
	return ENOMEM;
}
