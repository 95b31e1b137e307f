/* SPDX-License-Identifier: MIT */
/* The socket source's durable spool of received lines, in the catalog (spool.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "err.h"
#include "fault.h"
#include "qlog.h"
#include "spool.h"

#define qkey sl_qlog_meta_key
#define VERSION 1
#define TRIM_STEP 256 /* chunks deleted per transaction */

static int reserve(struct sl_spool_chunk *c, size_t more)
{
	if (c->len + more <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < c->len + more)
		cap *= 2;
	unsigned char *p = realloc(c->p, cap);
	if (!p)
		return ENOMEM;
	c->p = p;
	c->cap = cap;
	return 0;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

/* A varint at *p (before end) into *v; false when cut short or too long. */
static bool get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		unsigned char b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

int sl_spool_chunk_add(struct sl_spool_chunk *c, const char *line, size_t len, int64_t ts_ms)
{
	if (reserve(c, SL_SPOOL_CHUNK_HEAD + 20 + len))
		return ENOMEM;
	if (c->nlines == 0) {
		c->p[0] = VERSION;
		put_be64(c->p + 5, (uint64_t)ts_ms);
		c->len = SL_SPOOL_CHUNK_HEAD;
		c->prev_ms = ts_ms;
	}
	int64_t d = ts_ms - c->prev_ms;
	uint64_t zz = d < 0 ? ((uint64_t)(-(d + 1)) << 1) | 1 : (uint64_t)d << 1;
	c->len += put_varint(c->p + c->len, len);
	c->len += put_varint(c->p + c->len, zz);
	memcpy(c->p + c->len, line, len);
	c->len += len;
	c->prev_ms = ts_ms;
	put_be32(c->p + 1, ++c->nlines);
	return 0;
}

void sl_spool_chunk_clear(struct sl_spool_chunk *c)
{
	c->len = 0;
	c->nlines = 0;
}

void sl_spool_chunk_release(struct sl_spool_chunk *c)
{
	free(c->p);
	memset(c, 0, sizeof(*c));
}

/* The line count of an encoded chunk, or 0 when it is malformed. */
static uint32_t chunk_lines(const void *v, size_t vlen)
{
	const unsigned char *p = v;
	if (vlen < SL_SPOOL_CHUNK_HEAD || p[0] != VERSION)
		return 0;
	return get_be32(p + 1);
}

int sl_spool_chunk_each(const void *v, size_t vlen, uint64_t first, uint64_t lo, uint64_t hi,
			int (*fn)(void *ctx, uint64_t idx, const char *line, size_t len,
				  int64_t ts_ms),
			void *ctx)
{
	const unsigned char *p = v, *end = p + vlen;
	uint32_t n = chunk_lines(v, vlen);
	int64_t ts;
	int rc;

	if (n == 0)
		return SL_ECORRUPT;
	ts = (int64_t)get_be64(p + 5);
	p += SL_SPOOL_CHUNK_HEAD;
	for (uint64_t idx = first; idx < first + n; idx++) {
		uint64_t len, zz;
		if (!get_varint(&p, end, &len) || !get_varint(&p, end, &zz) ||
		    len > (uint64_t)(end - p))
			return SL_ECORRUPT;
		ts += zz & 1 ? -(int64_t)(zz >> 1) - 1 : (int64_t)(zz >> 1);
		if (idx >= hi)
			return 0;
		if (idx >= lo && (rc = fn(ctx, idx, (const char *)p, (size_t)len, ts)))
			return rc;
		p += len;
	}
	return p == end ? 0 : SL_ECORRUPT;
}

struct append {
	uint32_t qid;
	const struct sl_spool_chunk *c;
	uint64_t spooled; /* out */
};

static int append_apply(struct sl_txn *t, void *arg)
{
	struct append *a = arg;
	char key[48];
	uint64_t n;
	int rc;

	qkey(key, sizeof(key), a->qid, "spool_n");
	if ((rc = sl_txn_meta_get(t, key, &n)) ||
	    (rc = sl_qlog_put(t, a->qid, 'l', n, a->c->p, a->c->len)) ||
	    (rc = sl_txn_meta_put(t, key, n + a->c->nlines)))
		return rc;
	a->spooled = n + a->c->nlines;
	qkey(key, sizeof(key), a->qid, "spool_bytes");
	return sl_txn_meta_add(t, key, (int64_t)a->c->len);
}

int sl_spool_append(struct sl_catalog *cat, uint32_t qid, const struct sl_spool_chunk *c,
		    uint64_t *spooled)
{
	struct append a = {.qid = qid, .c = c};
	int rc;

	if (c->nlines == 0)
		return 0;
	if ((rc = SL_FAULT_ERR("spool.append")))
		return rc;
	SL_FAULT("spool.before_append");
	rc = sl_catalog_write(cat, append_apply, &a);
	if (rc == 0)
		SL_FAULT("spool.after_append");
	if (rc == 0 && spooled)
		*spooled = a.spooled;
	return rc;
}

int sl_spool_stats(struct sl_txn *t, uint32_t qid, struct sl_spool_stats *out)
{
	char key[48];
	int rc;

	qkey(key, sizeof(key), qid, "spool_n");
	if ((rc = sl_txn_meta_get(t, key, &out->spooled)))
		return rc;
	qkey(key, sizeof(key), qid, "spool_done");
	if ((rc = sl_txn_meta_get(t, key, &out->done)))
		return rc;
	qkey(key, sizeof(key), qid, "spool_bytes");
	return sl_txn_meta_get(t, key, &out->bytes);
}

static void chunk_prefix(unsigned char p[5], uint32_t qid)
{
	put_be32(p, qid);
	p[4] = 'l';
}

struct walk {
	uint64_t start, max_bytes, bytes, end; /* batch_end */
	uint64_t lo, hi, next;		       /* read */
	int (*fn)(void *ctx, uint64_t idx, const char *line, size_t len, int64_t ts_ms);
	void *ctx;
};

static int end_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct walk *w = ctx;
	uint32_t n = chunk_lines(val, vlen);
	if (klen != 13 || n == 0)
		return SL_ECORRUPT;
	uint64_t first = get_be64((const unsigned char *)key + 5);
	if (first + n <= w->start)
		return 0; /* committed, not trimmed yet */
	if (w->end > w->start && w->bytes + vlen > w->max_bytes)
		return 1; /* the batch is full */
	w->bytes += vlen;
	w->end = first + n;
	return 0;
}

int sl_spool_batch_end(struct sl_txn *t, uint32_t qid, uint64_t start, uint64_t max_bytes,
		       uint64_t *end)
{
	struct walk w = {.start = start, .max_bytes = max_bytes, .end = start};
	unsigned char prefix[5];
	int rc;

	chunk_prefix(prefix, qid);
	rc = sl_txn_each(t, SL_TABLE_QLOG, prefix, sizeof(prefix), end_cb, &w);
	if (rc < 0 || rc > 1)
		return rc;
	*end = w.end;
	return 0;
}

static int read_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct walk *w = ctx;
	uint32_t n = chunk_lines(val, vlen);
	int rc;
	if (klen != 13 || n == 0)
		return SL_ECORRUPT;
	uint64_t first = get_be64((const unsigned char *)key + 5);
	if (first + n <= w->lo)
		return 0;
	if (first >= w->hi)
		return 1;
	if (first > w->next)
		return SL_ECORRUPT; /* a gap: lines of the range left the spool */
	if ((rc = sl_spool_chunk_each(val, vlen, first, w->lo, w->hi, w->fn, w->ctx)))
		return rc;
	w->next = first + n;
	return 0;
}

int sl_spool_read(struct sl_txn *t, uint32_t qid, uint64_t lo, uint64_t hi,
		  int (*fn)(void *ctx, uint64_t idx, const char *line, size_t len, int64_t ts_ms),
		  void *ctx)
{
	struct walk w = {.lo = lo, .hi = hi, .next = lo, .fn = fn, .ctx = ctx};
	unsigned char prefix[5];
	int rc;

	if (lo >= hi)
		return 0;
	chunk_prefix(prefix, qid);
	rc = sl_txn_each(t, SL_TABLE_QLOG, prefix, sizeof(prefix), read_cb, &w);
	if (rc == 1)
		rc = 0;
	if (rc == 0 && w.next < hi)
		rc = SL_ECORRUPT; /* the spool ends before the range does */
	return rc;
}

int sl_spool_set_done(struct sl_txn *t, uint32_t qid, uint64_t done)
{
	char key[48];
	qkey(key, sizeof(key), qid, "spool_done");
	return sl_txn_meta_put(t, key, done);
}

struct trim {
	uint32_t qid;
	uint64_t done;
	uint64_t firsts[TRIM_STEP];
	size_t n;
	uint64_t freed; /* out: bytes deleted by the apply */
};

static int trim_collect(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct trim *tr = ctx;
	uint32_t n = chunk_lines(val, vlen);
	if (klen != 13 || n == 0)
		return SL_ECORRUPT;
	uint64_t first = get_be64((const unsigned char *)key + 5);
	if (first + n > tr->done)
		return 1; /* chunks are in line order: the rest are needed too */
	tr->firsts[tr->n++] = first;
	return tr->n == TRIM_STEP ? 1 : 0;
}

/* Deletes the collected chunks that are still there (the apply may run twice). */
static int trim_apply(struct sl_txn *t, void *arg)
{
	struct trim *tr = arg;
	char key[48];
	int rc;

	tr->freed = 0;
	for (size_t k = 0; k < tr->n; k++) {
		const void *v;
		size_t len;
		rc = sl_qlog_get(t, tr->qid, 'l', tr->firsts[k], &v, &len);
		if (rc == SL_NOTFOUND)
			continue;
		if (rc || (rc = sl_qlog_del(t, tr->qid, 'l', tr->firsts[k])))
			return rc;
		tr->freed += len;
	}
	qkey(key, sizeof(key), tr->qid, "spool_bytes");
	return tr->freed ? sl_txn_meta_add(t, key, -(int64_t)tr->freed) : 0;
}

int sl_spool_trim(struct sl_catalog *cat, uint32_t qid, uint64_t *freed)
{
	unsigned char prefix[5];
	uint64_t total = 0;
	struct trim *tr = malloc(sizeof(*tr));
	int rc;

	if (!tr)
		return ENOMEM;
	chunk_prefix(prefix, qid);
	do {
		struct sl_txn *t;
		char key[48];
		tr->qid = qid;
		tr->n = 0;
		if ((rc = sl_catalog_read(cat, &t)))
			break;
		qkey(key, sizeof(key), qid, "spool_done");
		rc = sl_txn_meta_get(t, key, &tr->done);
		if (rc == 0)
			rc =
			    sl_txn_each(t, SL_TABLE_QLOG, prefix, sizeof(prefix), trim_collect, tr);
		sl_txn_end(t);
		if (rc < 0 || rc > 1)
			break;
		rc = 0;
		if (tr->n == 0)
			break;
		SL_FAULT("spool.before_trim");
		if ((rc = sl_catalog_write_freeing(cat, trim_apply, tr)))
			break;
		SL_FAULT("spool.after_trim");
		total += tr->freed;
	} while (tr->n == TRIM_STEP);
	free(tr);
	if (freed)
		*freed = total;
	return rc;
}
