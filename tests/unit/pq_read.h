/* SPDX-License-Identifier: MIT */
/*
 * A minimal Parquet reader for the tests of core/sinks/parquet.c (unit test
 * and fuzz target): parses the Thrift compact footer into a generic tree,
 * walks the schema, reads every page of every chunk back (PLAIN, dictionary,
 * both codecs) and checks the invariants readers rely on (PARQUET-NOTES
 * §9-10). Written independently of the encoder: it shares no code with it.
 */
#ifndef SLUICE_TESTS_PQ_READ_H
#define SLUICE_TESTS_PQ_READ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* A Thrift value: a struct's fields or a list's elements are its kids. */
struct tv {
	int type;        /* compact nibble: 1/2 bool, 3 i8, 4 i16, 5 i32, 6 i64, 7 double, 8 binary, 9 list, 12 struct */
	int id;          /* field id, or element index */
	int64_t i;       /* ints, bools (0/1) */
	const uint8_t *p; /* binary */
	size_t n;        /* binary length */
	struct tv *kids;
	size_t nkids;
};

struct pqr_rd {
	const uint8_t *p, *end;
	int depth;
	bool bad;
};

static char pqr_err[512];

static int pqr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int pqr_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pqr_err, sizeof(pqr_err), fmt, ap);
	va_end(ap);
	return -1;
}

static uint64_t tr_varint(struct pqr_rd *r)
{
	uint64_t v = 0;
	for (int s = 0; s < 64; s += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static int64_t tr_zz(struct pqr_rd *r)
{
	uint64_t u = tr_varint(r);
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static void tv_free(struct tv *v)
{
	for (size_t i = 0; i < v->nkids; i++)
		tv_free(&v->kids[i]);
	free(v->kids);
	v->kids = NULL;
	v->nkids = 0;
}

static void tr_value(struct pqr_rd *r, struct tv *v);

static struct tv *tv_add(struct tv *v)
{
	struct tv *k = realloc(v->kids, (v->nkids + 1) * sizeof(*k));
	if (!k) {
		abort();
	}
	v->kids = k;
	memset(&k[v->nkids], 0, sizeof(*k));
	return &k[v->nkids++];
}

static void tr_struct(struct pqr_rd *r, struct tv *v)
{
	int last = 0;
	v->type = 12;
	if (++r->depth > 32) {
		r->bad = true;
		return;
	}
	while (!r->bad) {
		if (r->p >= r->end) {
			r->bad = true;
			break;
		}
		uint8_t h = *r->p++;
		if (h == 0)
			break;
		int type = h & 0x0f, d = h >> 4;
		int id = d ? last + d : (int)tr_zz(r);
		last = id;
		struct tv *k = tv_add(v);
		k->type = type;
		k->id = id;
		tr_value(r, k);
	}
	r->depth--;
}

static void tr_value(struct pqr_rd *r, struct tv *v)
{
	switch (v->type) {
	case 1:
	case 2:
		v->i = v->type == 1;
		break;
	case 3:
		if (r->p >= r->end)
			r->bad = true;
		else
			v->i = (int8_t)*r->p++;
		break;
	case 4:
	case 5:
	case 6:
		v->i = tr_zz(r);
		break;
	case 7:
		if (r->end - r->p < 8)
			r->bad = true;
		else
			r->p += 8;
		break;
	case 8: {
		uint64_t n = tr_varint(r);
		if (n > (uint64_t)(r->end - r->p)) {
			r->bad = true;
			break;
		}
		v->p = r->p;
		v->n = n;
		r->p += n;
		break;
	}
	case 9: {
		if (r->p >= r->end) {
			r->bad = true;
			break;
		}
		uint8_t h = *r->p++;
		uint64_t n = h >> 4;
		int et = h & 0x0f;
		if (n == 15)
			n = tr_varint(r);
		if (n > (uint64_t)(r->end - r->p) + 1) {
			r->bad = true;
			break;
		}
		for (uint64_t i = 0; i < n && !r->bad; i++) {
			struct tv *k = tv_add(v);
			k->type = et;
			k->id = (int)i;
			if (et == 1 || et == 2) { /* list bools: one byte each */
				k->i = r->p < r->end && *r->p++ == 1;
			} else {
				tr_value(r, k);
			}
		}
		break;
	}
	case 12:
		tr_struct(r, v);
		break;
	default:
		r->bad = true;
	}
}

static struct tv *tv_get(const struct tv *v, int id)
{
	if (!v)
		return NULL;
	for (size_t i = 0; i < v->nkids; i++)
		if (v->kids[i].id == id)
			return &v->kids[i];
	return NULL;
}

/* A decoded value of a leaf: def level, and the value at max_def. */
struct pqr_val {
	int def;
	int64_t i;   /* INT32, INT64, BOOLEAN */
	double d;    /* DOUBLE */
	char *s;     /* BYTE_ARRAY, new */
	size_t n;
};

struct pqr_chunk {
	int codec;
	int64_t num_values;
	bool enc_plain, enc_rle, enc_dict;
	bool has_dict_off;
	bool has_null_count, has_minmax;
	int64_t null_count, nan_count;
	bool has_nan_count;
	uint8_t min[4096], max[4096];
	size_t nmin, nmax;
	int dict_pages, plain_pages, rledict_pages;
};

struct pqr_leaf {
	char path[2][256];
	int npath;
	int ptype, converted, max_def;
	bool has_converted, logical_string, logical_ts, logical_date, ts_utc;
	struct pqr_val *vals; /* one per row, all row groups */
	size_t nvals;
	struct pqr_chunk *chunks; /* one per row group */
};

struct pqr_file {
	int64_t num_rows;
	size_t nrg;
	int64_t *rg_rows;
	char created_by[128];
	size_t ncolumn_orders;
	size_t ntop;          /* top-level columns */
	bool top_group[256];  /* top-level column k is a group */
	char top_name[256][256];
	struct pqr_leaf *leaves;
	size_t nleaves;
};

static void pqr_free(struct pqr_file *f)
{
	for (size_t l = 0; l < f->nleaves; l++) {
		for (size_t i = 0; i < f->leaves[l].nvals; i++)
			free(f->leaves[l].vals[i].s);
		free(f->leaves[l].vals);
		free(f->leaves[l].chunks);
	}
	free(f->leaves);
	free(f->rg_rows);
	memset(f, 0, sizeof(*f));
}

static uint32_t pqr_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t pqr_le64(const uint8_t *p)
{
	return (uint64_t)pqr_le32(p) | (uint64_t)pqr_le32(p + 4) << 32;
}

/* Decodes n values of the RLE/bit-packed hybrid at width bits from [p, end). */
static int pqr_hybrid(const uint8_t *p, const uint8_t *end, int width, uint32_t *out, size_t n)
{
	struct pqr_rd r = { p, end, 0, false };
	size_t got = 0;
	if (width < 0 || width > 32)
		return pqr_fail("bad bit width %d", width);
	while (got < n) {
		uint64_t h = tr_varint(&r);
		if (r.bad)
			return pqr_fail("hybrid: truncated header (%zu of %zu)", got, n);
		if (h & 1) {
			uint64_t cnt = (h >> 1) * 8;
			if (cnt == 0)
				return pqr_fail("hybrid: empty bit-packed run");
			size_t bytes = (size_t)((h >> 1) * (uint64_t)width);
			if (bytes > (size_t)(r.end - r.p))
				return pqr_fail("hybrid: bit-packed run past the end");
			for (uint64_t k = 0; k < cnt; k++) {
				uint64_t bit = k * (uint64_t)width, v = 0;
				for (int b = 0; b < width; b++, bit++)
					v |= (uint64_t)((r.p[bit / 8] >> (bit % 8)) & 1) << b;
				if (got < n)
					out[got++] = (uint32_t)v;
			}
			r.p += bytes;
		} else {
			uint64_t cnt = h >> 1;
			int nb = (width + 7) / 8;
			if (cnt == 0)
				return pqr_fail("hybrid: empty RLE run");
			if (nb > r.end - r.p)
				return pqr_fail("hybrid: RLE value past the end");
			uint32_t v = 0;
			for (int b = 0; b < nb; b++)
				v |= (uint32_t)r.p[b] << (8 * b);
			r.p += nb;
			if (width < 32 && v >> width)
				return pqr_fail("hybrid: RLE value %u wider than %d bits", v, width);
			for (uint64_t k = 0; k < cnt && got < n; k++)
				out[got++] = v;
		}
	}
	return 0;
}

static int pqr_bits(uint32_t v)
{
	int n = 0;
	while (v) {
		n++;
		v >>= 1;
	}
	return n;
}

struct pqr_dict {
	uint8_t *buf; /* the dictionary page body, decompressed */
	size_t len;   /* bytes at buf */
	size_t *off;  /* entry offsets (BYTE_ARRAY: at the length) */
	size_t n;
};

/* Decodes one PLAIN value of ptype at *p into v; advances *p. */
static int pqr_plain(int ptype, const uint8_t **p, const uint8_t *end, size_t k, struct pqr_val *v)
{
	switch (ptype) {
	case 0: /* bools are read by bit index k from the page's value start */
		return pqr_fail("internal: bools are decoded elsewhere");
	case 1:
		if (end - *p < 4)
			return pqr_fail("INT32 past the end");
		v->i = (int32_t)pqr_le32(*p);
		*p += 4;
		return 0;
	case 2:
	case 5:
		if (end - *p < 8)
			return pqr_fail("8-byte value past the end");
		if (ptype == 2) {
			v->i = (int64_t)pqr_le64(*p);
		} else {
			uint64_t u = pqr_le64(*p);
			memcpy(&v->d, &u, 8);
		}
		*p += 8;
		return 0;
	case 6: {
		if (end - *p < 4)
			return pqr_fail("BYTE_ARRAY length past the end");
		uint32_t n = pqr_le32(*p);
		if (n > (size_t)(end - *p - 4))
			return pqr_fail("BYTE_ARRAY bytes past the end");
		v->s = malloc(n + 1);
		if (!v->s)
			abort();
		memcpy(v->s, *p + 4, n);
		v->s[n] = 0;
		v->n = n;
		*p += 4 + n;
		return 0;
	}
	}
	(void)k;
	return pqr_fail("unknown physical type %d", ptype);
}

/* Reads the pages of one chunk (meta: ColumnMetaData) into leaf l. */
static int pqr_chunk(const uint8_t *file, size_t flen, const struct tv *meta, struct pqr_leaf *l,
		     struct pqr_chunk *c)
{
	struct tv *t;
	int rc = 0;
	struct pqr_dict dict = { 0 };

	if (!(t = tv_get(meta, 1)) || t->i != l->ptype)
		return pqr_fail("chunk type differs from the schema");
	if (!(t = tv_get(meta, 4)))
		return pqr_fail("no codec");
	c->codec = (int)t->i;
	if (c->codec != 0 && c->codec != 6)
		return pqr_fail("codec %d", c->codec);
	if (!(t = tv_get(meta, 2)))
		return pqr_fail("no encodings");
	for (size_t i = 0; i < t->nkids; i++) {
		int64_t e = t->kids[i].i;
		if (e == 0)
			c->enc_plain = true;
		else if (e == 3)
			c->enc_rle = true;
		else if (e == 8)
			c->enc_dict = true;
		else
			return pqr_fail("encoding %lld", (long long)e);
	}
	if (!(t = tv_get(meta, 3)) || (int)t->nkids != l->npath)
		return pqr_fail("path_in_schema");
	for (size_t i = 0; i < t->nkids; i++)
		if (t->kids[i].n != strlen(l->path[i]) || memcmp(t->kids[i].p, l->path[i], t->kids[i].n))
			return pqr_fail("path_in_schema differs from the schema");
	struct tv *tnv = tv_get(meta, 5), *tu = tv_get(meta, 6), *tc = tv_get(meta, 7),
		  *tdata = tv_get(meta, 9), *tdict = tv_get(meta, 11), *st = tv_get(meta, 12);
	if (!tnv || !tu || !tc || !tdata)
		return pqr_fail("ColumnMetaData misses a required field");
	if (tv_get(meta, 10))
		return pqr_fail("index_page_offset set");
	c->num_values = tnv->i;
	c->has_dict_off = tdict != NULL;
	if (st) {
		struct tv *nc = tv_get(st, 3), *mx = tv_get(st, 5), *mn = tv_get(st, 6), *nan = tv_get(st, 9);
		if (tv_get(st, 1) || tv_get(st, 2))
			return pqr_fail("deprecated min/max written");
		c->has_null_count = nc != NULL;
		c->null_count = nc ? nc->i : 0;
		c->has_nan_count = nan != NULL;
		c->nan_count = nan ? nan->i : 0;
		if (!mx != !mn)
			return pqr_fail("only one of min_value/max_value");
		if (mx) {
			if (mx->n > sizeof(c->max) || mn->n > sizeof(c->min))
				return pqr_fail("stats longer than 4 KiB");
			c->has_minmax = true;
			memcpy(c->max, mx->p, mx->n);
			memcpy(c->min, mn->p, mn->n);
			c->nmax = mx->n;
			c->nmin = mn->n;
		}
	}
	int64_t start = tdict ? tdict->i : tdata->i;
	if (tdict && !(tdict->i >= 4 && tdict->i < tdata->i))
		return pqr_fail("dictionary_page_offset %lld not before data_page_offset %lld",
				(long long)tdict->i, (long long)tdata->i);
	if (start < 4 || tc->i < 0 || (uint64_t)(start + tc->i) > flen - 8)
		return pqr_fail("chunk range [%lld, +%lld) outside the file", (long long)start,
				(long long)tc->i);
	const uint8_t *p = file + start, *end = p + tc->i;
	int64_t nvalues = 0, usum = 0;
	bool first = true;
	while (p < end) {
		struct pqr_rd r = { p, end, 0, false };
		struct tv h = { .type = 12 };
		tr_struct(&r, &h);
		if (r.bad) {
			tv_free(&h);
			return pqr_fail("bad page header at %lld", (long long)(p - file));
		}
		size_t hlen = (size_t)(r.p - p);
		struct tv *ty = tv_get(&h, 1), *us = tv_get(&h, 2), *cs = tv_get(&h, 3),
			  *dph = tv_get(&h, 5), *dich = tv_get(&h, 7);
		if (!ty || !us || !cs || cs->i < 0 || us->i < 0 || cs->i > end - r.p) {
			tv_free(&h);
			return pqr_fail("page header sizes");
		}
		if (first && tdict && (ty->i != 2 || p - file != tdict->i)) {
			tv_free(&h);
			return pqr_fail("dictionary_page_offset not at the dictionary page");
		}
		if (first && !tdict && ty->i == 2) {
			tv_free(&h);
			return pqr_fail("dictionary page without dictionary_page_offset");
		}
		if (!first && ty->i == 2) {
			tv_free(&h);
			return pqr_fail("dictionary page not first");
		}
		if (ty->i == 0 && (p - file) < tdata->i) {
			tv_free(&h);
			return pqr_fail("data page before data_page_offset");
		}
		if (ty->i == 0 && nvalues == 0 && dict.buf == NULL && tdict) {
			tv_free(&h);
			return pqr_fail("no dictionary read");
		}
		if (first && ty->i == 0 && p - file != tdata->i) {
			tv_free(&h);
			return pqr_fail("data_page_offset not at the first data page");
		}
		first = false;
		usum += (int64_t)hlen + us->i;
		/* the body */
		uint8_t *body;
		size_t blen;
		if (c->codec == 6) {
			void *o;
			size_t olen;
			if (sl_codec_decompress(r.p, (size_t)cs->i, (size_t)us->i, &o, &olen) != 0 ||
			    olen != (size_t)us->i) {
				tv_free(&h);
				return pqr_fail("zstd page does not decompress to its size");
			}
			body = o;
			blen = olen;
		} else {
			if (cs->i != us->i) {
				tv_free(&h);
				return pqr_fail("uncompressed page sizes differ");
			}
			body = malloc(us->i ? (size_t)us->i : 1);
			if (!body)
				abort();
			memcpy(body, r.p, (size_t)us->i);
			blen = (size_t)us->i;
		}
		p = r.p + cs->i;
		if (ty->i == 2) {
			struct tv *dn = tv_get(dich, 1), *de = tv_get(dich, 2);
			if (!dich || !dn || !de || de->i != 0 || dn->i < 0) {
				free(body);
				tv_free(&h);
				return pqr_fail("dictionary page header");
			}
			c->dict_pages++;
			if (dict.buf) {
				free(body);
				tv_free(&h);
				rc = pqr_fail("two dictionary pages");
				goto out;
			}
			dict.buf = body;
			dict.len = blen;
			dict.n = (size_t)dn->i;
			dict.off = calloc(dict.n + 1, sizeof(size_t));
			const uint8_t *q = body;
			for (size_t e = 0; e < dict.n; e++) {
				struct pqr_val v = { 0 };
				dict.off[e] = (size_t)(q - body);
				if (pqr_plain(l->ptype, &q, body + blen, 0, &v)) {
					tv_free(&h);
					rc = -1;
					goto out;
				}
				free(v.s);
			}
			if (q != body + blen) {
				tv_free(&h);
				rc = pqr_fail("dictionary page has trailing bytes");
				goto out;
			}
			tv_free(&h);
			continue;
		}
		struct tv *nv = tv_get(dph, 1), *enc = tv_get(dph, 2), *de = tv_get(dph, 3),
			  *re = tv_get(dph, 4);
		if (ty->i != 0 || !dph || !nv || !enc || !de || !re || de->i != 3 || re->i != 3 ||
		    nv->i < 0) {
			free(body);
			tv_free(&h);
			rc = pqr_fail("data page header");
			goto out;
		}
		size_t n = (size_t)nv->i;
		int encoding = (int)enc->i;
		tv_free(&h);
		nvalues += (int64_t)n;
		/* levels: u32 length + hybrid */
		uint32_t *lev = calloc(n + 1, sizeof(*lev)), *ix = NULL;
		if (!lev)
			abort();
		if (blen < 4 || pqr_le32(body) > blen - 4) {
			rc = pqr_fail("definition levels length");
			goto page_free;
		}
		uint32_t llen = pqr_le32(body);
		if (pqr_hybrid(body + 4, body + 4 + llen, pqr_bits((uint32_t)l->max_def), lev, n)) {
			rc = -1;
			goto page_free;
		}
		const uint8_t *q = body + 4 + llen, *qend = body + blen;
		size_t nnull = 0;
		for (size_t k = 0; k < n; k++) {
			if ((int)lev[k] > l->max_def) {
				rc = pqr_fail("level %u > max %d", lev[k], l->max_def);
				goto page_free;
			}
			nnull += (int)lev[k] == l->max_def ? 0 : 1;
		}
		size_t nv_nonnull = n - nnull;
		struct pqr_val *nvp = realloc(l->vals, (l->nvals + n + 1) * sizeof(*nvp));
		if (!nvp)
			abort();
		l->vals = nvp;
		if (encoding == 8 || encoding == 2) {
			c->rledict_pages++;
			if (!dict.buf) {
				rc = pqr_fail("dictionary-encoded page without a dictionary");
				goto page_free;
			}
			if (q >= qend && nv_nonnull) {
				rc = pqr_fail("no bit width");
				goto page_free;
			}
			int width = q < qend ? *q++ : 0;
			ix = calloc(nv_nonnull + 1, sizeof(*ix));
			if (!ix)
				abort();
			if (nv_nonnull && pqr_hybrid(q, qend, width, ix, nv_nonnull)) {
				rc = -1;
				goto page_free;
			}
		} else if (encoding == 0) {
			c->plain_pages++;
		} else {
			rc = pqr_fail("page encoding %d", encoding);
			goto page_free;
		}
		size_t j = 0;
		for (size_t k = 0; k < n; k++) {
			struct pqr_val *v = &l->vals[l->nvals + k];
			memset(v, 0, sizeof(*v));
			v->def = (int)lev[k];
			if ((int)lev[k] != l->max_def)
				continue;
			if (ix) {
				if (ix[j] >= dict.n) {
					l->nvals += k;
					rc = pqr_fail("dictionary index %u >= %zu", ix[j], dict.n);
					goto page_free;
				}
				const uint8_t *dq = dict.buf + dict.off[ix[j]];
				if (pqr_plain(l->ptype, &dq, dict.buf + dict.len, 0, v)) {
					l->nvals += k;
					rc = -1;
					goto page_free;
				}
			} else if (l->ptype == 0) {
				if ((size_t)(qend - q) * 8 <= j) {
					l->nvals += k;
					rc = pqr_fail("BOOLEAN past the end");
					goto page_free;
				}
				v->i = (q[j / 8] >> (j % 8)) & 1;
			} else if (pqr_plain(l->ptype, &q, qend, j, v)) {
				l->nvals += k;
				rc = -1;
				goto page_free;
			}
			j++;
		}
		l->nvals += n;
		if (!ix && l->ptype == 0)
			q += (j + 7) / 8;
		if (!ix && q != qend) {
			rc = pqr_fail("page has %zu trailing bytes", (size_t)(qend - q));
			goto page_free;
		}
page_free:
		free(ix);
		free(lev);
		free(body);
		if (rc)
			goto out;
	}
	if (p != end) {
		rc = pqr_fail("pages overrun total_compressed_size");
		goto out;
	}
	if (nvalues != c->num_values) {
		rc = pqr_fail("chunk num_values %lld != pages' %lld", (long long)c->num_values,
			      (long long)nvalues);
		goto out;
	}
	if (usum != tu->i)
		rc = pqr_fail("total_uncompressed_size %lld != %lld", (long long)tu->i, (long long)usum);
out:
	free(dict.buf);
	free(dict.off);
	return rc;
}

/* Adds the leaves under schema element *k (a child of a node at depth). */
static int pqr_schema(struct pqr_file *f, const struct tv *s, size_t *k, const char *parent,
		      int pdef, bool top)
{
	if (*k >= s->nkids)
		return pqr_fail("schema list too short");
	const struct tv *e = &s->kids[(*k)++];
	struct tv *name = tv_get(e, 4), *rep = tv_get(e, 3), *nch = tv_get(e, 5), *ty = tv_get(e, 1);
	if (!name || !rep)
		return pqr_fail("schema element without name or repetition");
	if (rep->i == 2)
		return pqr_fail("repeated field");
	if (!nch == !ty)
		return pqr_fail("exactly one of num_children and type must be set");
	int def = pdef + (rep->i == 1);
	if (top) {
		if (f->ntop >= 256 || name->n >= 256)
			return pqr_fail("too many columns");
		memcpy(f->top_name[f->ntop], name->p, name->n);
		f->top_name[f->ntop][name->n] = 0;
		f->top_group[f->ntop++] = nch != NULL;
	}
	if (nch) {
		char nm[256];
		if (parent || name->n >= sizeof(nm))
			return pqr_fail("groups nest too deep");
		memcpy(nm, name->p, name->n);
		nm[name->n] = 0;
		for (int64_t i = 0; i < nch->i; i++)
			if (pqr_schema(f, s, k, nm, def, false))
				return -1;
		return 0;
	}
	struct pqr_leaf *nl = realloc(f->leaves, (f->nleaves + 1) * sizeof(*nl));
	if (!nl)
		abort();
	f->leaves = nl;
	struct pqr_leaf *l = &nl[f->nleaves++];
	memset(l, 0, sizeof(*l));
	if (name->n >= 256)
		return pqr_fail("name too long");
	if (parent)
		snprintf(l->path[l->npath++], 256, "%s", parent);
	memcpy(l->path[l->npath], name->p, name->n);
	l->path[l->npath++][name->n] = 0;
	l->ptype = (int)ty->i;
	l->max_def = def;
	struct tv *ct = tv_get(e, 6), *lt = tv_get(e, 10);
	l->has_converted = ct != NULL;
	l->converted = ct ? (int)ct->i : -1;
	if (lt) {
		l->logical_string = tv_get(lt, 1) != NULL;
		l->logical_date = tv_get(lt, 6) != NULL;
		struct tv *ts = tv_get(lt, 8);
		if (ts) {
			struct tv *utc = tv_get(ts, 1), *unit = tv_get(ts, 2);
			l->logical_ts = unit && tv_get(unit, 2);
			l->ts_utc = utc && utc->i;
		}
	}
	return 0;
}

/* Reads the whole file buf[0..len) into f (pqr_free it). 0, or -1 with pqr_err set. */
static int pqr_read(const uint8_t *buf, size_t len, struct pqr_file *f)
{
	struct tv fm = { .type = 12 };
	int rc = -1;

	memset(f, 0, sizeof(*f));
	if (len < 12 || memcmp(buf, "PAR1", 4) || memcmp(buf + len - 4, "PAR1", 4))
		return pqr_fail("no PAR1 magic");
	uint32_t flen = pqr_le32(buf + len - 8);
	if (flen > len - 12)
		return pqr_fail("footer length %u too large", flen);
	struct pqr_rd r = { buf + len - 8 - flen, buf + len - 8, 0, false };
	tr_struct(&r, &fm);
	if (r.bad || r.p != r.end) {
		pqr_fail("footer does not parse to its length");
		goto out;
	}
	struct tv *ver = tv_get(&fm, 1), *schema = tv_get(&fm, 2), *nrows = tv_get(&fm, 3),
		  *rgs = tv_get(&fm, 4), *cb = tv_get(&fm, 6), *co = tv_get(&fm, 7);
	if (!ver || ver->i != 1 || !schema || !nrows || !rgs) {
		pqr_fail("FileMetaData misses a required field");
		goto out;
	}
	if (cb && cb->n < sizeof(f->created_by))
		memcpy(f->created_by, cb->p, cb->n);
	f->num_rows = nrows->i;
	if (schema->nkids < 1) {
		pqr_fail("empty schema");
		goto out;
	}
	struct tv *root = &schema->kids[0], *rn = tv_get(root, 5);
	if (!rn || !tv_get(root, 4) || tv_get(root, 1)) {
		pqr_fail("root schema element");
		goto out;
	}
	size_t k = 1;
	for (int64_t i = 0; i < rn->i; i++)
		if (pqr_schema(f, schema, &k, NULL, 0, true))
			goto out;
	if (k != schema->nkids) {
		pqr_fail("schema list has extra elements");
		goto out;
	}
	if (co) {
		f->ncolumn_orders = co->nkids;
		for (size_t i = 0; i < co->nkids; i++)
			if (!tv_get(&co->kids[i], 1)) {
				pqr_fail("column order not TYPE_ORDER");
				goto out;
			}
	}
	f->nrg = rgs->nkids;
	f->rg_rows = calloc(f->nrg + 1, sizeof(*f->rg_rows));
	for (size_t l = 0; l < f->nleaves; l++)
		f->leaves[l].chunks = calloc(f->nrg + 1, sizeof(struct pqr_chunk));
	int64_t sum = 0;
	for (size_t g = 0; g < f->nrg; g++) {
		struct tv *rg = &rgs->kids[g], *cols = tv_get(rg, 1), *rows = tv_get(rg, 3),
			  *tbs = tv_get(rg, 2);
		if (!cols || !rows || !tbs || cols->nkids != f->nleaves) {
			pqr_fail("row group %zu: required fields or column count", g);
			goto out;
		}
		f->rg_rows[g] = rows->i;
		sum += rows->i;
		for (size_t l = 0; l < f->nleaves; l++) {
			struct tv *cc = &cols->kids[l], *meta = tv_get(cc, 3);
			if (!meta || !tv_get(cc, 2) || tv_get(cc, 1)) {
				pqr_fail("column chunk fields");
				goto out;
			}
			size_t before = f->leaves[l].nvals;
			if (pqr_chunk(buf, len, meta, &f->leaves[l], &f->leaves[l].chunks[g]))
				goto out;
			if ((int64_t)(f->leaves[l].nvals - before) != rows->i) {
				pqr_fail("row group %zu leaf %zu: %zu rows, want %lld", g, l,
					 f->leaves[l].nvals - before, (long long)rows->i);
				goto out;
			}
		}
	}
	if (sum != f->num_rows) {
		pqr_fail("num_rows %lld != sum of row groups %lld", (long long)f->num_rows,
			 (long long)sum);
		goto out;
	}
	rc = 0;
out:
	tv_free(&fm);
	if (rc)
		pqr_free(f);
	return rc;
}

#endif
