/* SPDX-License-Identifier: MIT */
/*
 * dropDuplicates and dropDuplicatesWithinWatermark, as Spark
 * (StreamingDeduplicateExec, StreamingDeduplicateWithinWatermarkExec): the
 * first row per key is kept, across batches and restarts.
 *
 * State (core/state.h), op 'D': the row key of the dedup columns. With the
 * watermark column among them, that column comes first, so a walk from the
 * first non-null event time finds every entry the watermark has passed;
 * without it the state is kept forever. Within the watermark, the value is
 * expiresAt (event time + delay, us) and op 'E' indexes the entries by it:
 *   'E' key: expiresAt u64 (biased by 2^63, big-endian) | 'D' storage key,
 *       value: the row key's length u32 (to count the 'D' entry's bytes)
 * An entry evicts once the watermark >= expiresAt. Lookups see the state
 * as of the batch's start (eviction runs after the batch's rows, as Spark).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "config.h"
#include "err.h"
#include "kmap.h"
#include "ksort.h"
#include "dedup.h"
#include "ops.h"
#include "rowkey.h"
#include "state.h"

struct sl_dedup {
	const struct sl_query_config *q;
	struct sl_state_space sp, ex;
	size_t cols[64];
	size_t ncols;
	bool ts_lead;          /* the watermark column leads the key: evict by it */
	bool within;           /* dropDuplicatesWithinWatermark */
	struct sl_kmap seen;   /* this batch's keys */
	uint8_t *fresh;        /* per key: 1 when not in the state before */
	int64_t *expires;      /* per key, within the watermark */
	size_t cap;
	uint32_t *order;       /* the fresh keys, sorted: LMDB takes sorted puts fastest */
	size_t nfresh;
	struct sl_keybuf kb;
	struct sl_state_evict ev; /* storage keys to delete ('D' and 'E') */
	uint64_t rows_after, bytes_after;
	bool empty;            /* no state before this batch: no key to look up */
};

int sl_dedup_new(const struct sl_query_config *q, uint32_t qid, struct sl_dedup **out)
{
	struct sl_dedup *d = calloc(1, sizeof(*d));
	if (!d)
		return ENOMEM;
	if (q->ndedup > 63) {
		free(d);
		return EINVAL;
	}
	d->q = q;
	d->within = q->dedup_within_wm;
	d->sp = (struct sl_state_space){.qid = qid, .op = SL_STATE_DEDUP};
	d->ex = (struct sl_state_space){.qid = qid, .op = SL_STATE_EXPIRY, .raw = true};
	for (size_t i = 0; q->has_watermark && !d->within && i < q->ndedup; i++)
		if (q->dedup[i] == q->wm_col)
			d->ts_lead = true;
	if (d->ts_lead)
		d->cols[d->ncols++] = q->wm_col;
	for (size_t i = 0; i < q->ndedup; i++)
		if (!d->ts_lead || q->dedup[i] != q->wm_col)
			d->cols[d->ncols++] = q->dedup[i];
	if (d->ts_lead)
		d->sp.lead_payload = 8;
	sl_kmap_init(&d->seen);
	sl_keybuf_init(&d->kb);
	*out = d;
	return 0;
}

void sl_dedup_free(struct sl_dedup *d)
{
	if (!d)
		return;
	sl_kmap_release(&d->seen);
	sl_keybuf_release(&d->kb);
	free(d->fresh);
	free(d->expires);
	free(d->order);
	sl_state_evict_release(&d->ev);
	free(d);
}

static int grow(struct sl_dedup *d, size_t n)
{
	if (n <= d->cap)
		return 0;
	size_t cap = d->cap ? d->cap * 2 : 1024;
	while (cap < n)
		cap *= 2;
	uint8_t *f = realloc(d->fresh, cap);
	if (!f)
		return ENOMEM;
	d->fresh = f;
	int64_t *e = realloc(d->expires, cap * sizeof(*e));
	if (!e)
		return ENOMEM;
	d->expires = e;
	d->cap = cap;
	return 0;
}

static int cmp_keys(const void *a, const void *b, void *ctx)
{
	const struct sl_kmap *m = ctx;
	size_t al, bl;
	const unsigned char *ak = sl_kmap_key(m, *(const uint32_t *)a, &al);
	const unsigned char *bk = sl_kmap_key(m, *(const uint32_t *)b, &bl);
	size_t n = al < bl ? al : bl;
	int c = memcmp(ak, bk, n);
	return c ? c : (al > bl) - (al < bl);
}

/* The event time of a row key led by it (a non-null TIMESTAMP first). */
static int64_t lead_ts(const unsigned char *rk)
{
	return (int64_t)(get_be64(rk + 1) ^ (1ull << 63));
}

struct evict_walk {
	struct sl_dedup *d;
	int64_t wm_us;
	int64_t wm_ms;
	uint64_t removed, bytes;
	int err;
};

/* dropDuplicates with the event time in the key: entries with ts <= watermark go. */
static int evict_ts(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		    const void *val, size_t vlen)
{
	struct evict_walk *w = ctx;
	(void)val;
	if (rklen < 9)
		return (w->err = SL_ECORRUPT);
	if (!sl_watermark_is_late(w->wm_ms, lead_ts(rk)))
		return 1;
	if ((w->err = sl_state_evict_add(&w->d->ev, skey, sklen)))
		return 1;
	w->removed++;
	w->bytes += sl_state_entry_bytes(rklen, vlen);
	return 0;
}

/* Within the watermark: 'E' entries whose expiresAt the watermark reached go. */
static int evict_exp(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		     const void *val, size_t vlen)
{
	struct evict_walk *w = ctx;
	(void)val, (void)vlen;
	/* rk here is expiresAt(8) | the 'D' storage key without its prefix */
	if (rklen < 8)
		return (w->err = SL_ECORRUPT);
	int64_t exp = (int64_t)(get_be64(rk) ^ (1ull << 63));
	if (!sl_watermark_expired(w->wm_ms, exp))
		return 1;
	unsigned char dkey[5 + SL_STATE_KEY_INLINE + 32];
	size_t dlen = 5 + rklen - 8;
	uint32_t full;
	if (dlen > sizeof(dkey) || vlen != 4)
		return (w->err = SL_ECORRUPT);
	memcpy(&full, val, 4);
	memcpy(dkey, skey, 4);
	dkey[4] = SL_STATE_DEDUP;
	memcpy(dkey + 5, (const unsigned char *)rk + 8, rklen - 8);
	if ((w->err = sl_state_evict_add(&w->d->ev, skey, sklen)) ||
	    (w->err = sl_state_evict_add(&w->d->ev, dkey, dlen)))
		return 1;
	w->removed++;
	w->bytes += sl_state_entry_bytes(full, 8) + sklen + 4; /* the 'D' and 'E' entries */
	return 0;
}

int sl_dedup_begin(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b)
{
	int rc;

	sl_kmap_clear(&d->seen);
	sl_state_evict_clear(&d->ev);
	d->nfresh = 0;
	if ((rc = sl_state_counters(t, &d->sp, &d->rows_after, &d->bytes_after)))
		return rc;
	d->empty = d->rows_after == 0;
	if ((rc = sl_kmap_reserve(&d->seen, b->nrows)) || (rc = grow(d, b->nrows)))
		return rc;
	return 0;
}

#define AHEAD 16 /* keys hashed and prefetched before the first of them is looked up */

/* Looks up and adds the pending keys, in row order. */
static int settle(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b, uint8_t *keep,
		  const struct sl_kmap_ahead *p, size_t n, int64_t wm_ms, struct sl_op_metrics *m)
{
	const struct sl_query_config *q = d->q;
	int rc;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *key = d->kb.data + p[i].off;
		size_t len = p[i].len, r = p[i].row;
		uint32_t idx;
		bool added;
		if ((rc = sl_kmap_upsert_hashed(&d->seen, key, len, p[i].h, &idx, &added)))
			return rc;
		if (!added) {
			keep[r] = 0;
			m->dropped_dup++;
			continue;
		}
		if ((rc = grow(d, (size_t)idx + 1)))
			return rc;
		const void *v;
		size_t vlen;
		rc = d->empty ? SL_NOTFOUND : sl_state_get(t, &d->sp, key, len, &v, &vlen);
		if (rc == 0) {
			d->fresh[idx] = 0;
			keep[r] = 0;
			m->dropped_dup++;
			continue;
		}
		if (rc != SL_NOTFOUND)
			return rc;
		d->fresh[idx] = 1;
		d->expires[idx] = INT64_MAX;
		if (d->within && !sl_batch_is_null(b, r, q->wm_col)) {
			struct sl_watermark w;
			sl_watermark_init(&w, q->wm_delay_us, wm_ms);
			d->expires[idx] = sl_watermark_expires_at(&w, b->cols[q->wm_col].cells[r].i);
		}
		d->rows_after++;
		m->rows_updated++;
		d->bytes_after += sl_state_entry_bytes(len, d->within ? 8 : 0);
		if (d->within && d->expires[idx] != INT64_MAX) {
			struct sl_state_skey sk; /* the 'E' entry: its key and value */
			sl_state_skey(&d->sp, key, len, &sk);
			d->bytes_after += 5 + 8 + (sk.len - 5) + 4;
		}
	}
	sl_keybuf_clear(&d->kb);
	return 0;
}

int sl_dedup_rows(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b, uint8_t *keep,
		  size_t from, size_t to, int64_t wm_ms, struct sl_op_metrics *m)
{
	struct sl_kmap_ahead p[AHEAD];
	size_t n = 0;
	int rc;

	sl_keybuf_clear(&d->kb);
	for (size_t r = from; r < to; r++) {
		if (!keep[r])
			continue;
		size_t off = d->kb.len;
		if ((rc = sl_rowkey_encode(b, r, d->cols, d->ncols, &d->kb)))
			return rc;
		p[n] = sl_kmap_ahead_key(&d->seen, r, d->kb.data, off, d->kb.len);
		if (++n == AHEAD) {
			if ((rc = settle(d, t, b, keep, p, n, wm_ms, m)))
				return rc;
			n = 0;
		}
	}
	return settle(d, t, b, keep, p, n, wm_ms, m);
}

static const unsigned char *seen_key(const void *ctx, uint32_t idx, size_t *len)
{
	return sl_kmap_key(ctx, idx, len);
}

int sl_dedup_sort(struct sl_dedup *d)
{
	/* every row was looked up: the table's memory goes before the sort's comes */
	sl_kmap_drop_slots(&d->seen);
	uint32_t *order = realloc(d->order, (sl_kmap_count(&d->seen) + 1) * sizeof(*order));
	if (!order)
		return ENOMEM;
	d->order = order;
	d->nfresh = 0;
	for (uint32_t i = 0; i < sl_kmap_count(&d->seen); i++)
		if (d->fresh[i])
			order[d->nfresh++] = i;
	if (sl_ksort(order, d->nfresh, seen_key, &d->seen))
		qsort_r(order, d->nfresh, sizeof(*order), cmp_keys, &d->seen);
	return 0;
}

int sl_dedup_end(struct sl_dedup *d, struct sl_txn *t, int64_t wm_ms, struct sl_op_metrics *m)
{
	uint64_t rows = d->rows_after, bytes = d->bytes_after;
	int rc;

	/* what the batch's watermark evicts, applied with the commit */
	struct evict_walk w = {.d = d, .wm_ms = wm_ms};
	if (d->ts_lead && wm_ms > 0) {
		unsigned char tag = 0x01; /* non-null event times only: a null is never late */
		rc = sl_state_each(t, &d->sp, &tag, 1, evict_ts, &w);
	} else if (d->within && wm_ms > 0) {
		rc = sl_state_each(t, &d->ex, NULL, 0, evict_exp, &w);
	} else {
		rc = 0;
	}
	if (w.err)
		return w.err;
	if (rc < 0 || rc > 1)
		return rc;
	d->rows_after = rows - (w.removed <= rows ? w.removed : rows);
	d->bytes_after = bytes - (w.bytes <= bytes ? w.bytes : bytes);
	m->rows_removed = w.removed;
	m->rows_total = d->rows_after;
	m->bytes = d->bytes_after;
	return 0;
}

int sl_dedup_process(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b,
		     uint8_t *keep, int64_t wm_ms, struct sl_op_metrics *m)
{
	int rc;
	if ((rc = sl_dedup_begin(d, t, b)) ||
	    (rc = sl_dedup_rows(d, t, b, keep, 0, b->nrows, wm_ms, m)) || (rc = sl_dedup_sort(d)))
		return rc;
	return sl_dedup_end(d, t, wm_ms, m);
}

int sl_dedup_apply(struct sl_dedup *d, struct sl_txn *t)
{
	int rc;

	for (size_t j = 0; j < d->nfresh; j++) {
		uint32_t i = d->order[j];
		size_t len;
		/* in key order, so the keys' bytes are read out of order: ask ahead */
		sl_kmap_prefetch_walk(&d->seen, d->order, j, d->nfresh);
		if (d->within && j + SL_KMAP_AHEAD < d->nfresh)
			__builtin_prefetch(&d->expires[d->order[j + SL_KMAP_AHEAD]]);
		const unsigned char *k = sl_kmap_key(&d->seen, i, &len);
		if (!d->within) {
			if ((rc = sl_state_put(t, &d->sp, k, len, "", 0)))
				return rc;
			continue;
		}
		int64_t exp = d->expires[i];
		if ((rc = sl_state_put(t, &d->sp, k, len, &exp, 8)))
			return rc;
		if (exp == INT64_MAX)
			continue; /* a null event time never expires */
		struct sl_state_skey sk;
		unsigned char ek[8 + 5 + SL_STATE_KEY_INLINE];
		sl_state_skey(&d->sp, k, len, &sk);
		put_be64(ek, (uint64_t)exp ^ (1ull << 63));
		memcpy(ek + 8, sk.k + 5, sk.len - 5);
		uint32_t full = (uint32_t)len;
		if ((rc = sl_state_put(t, &d->ex, ek, 8 + sk.len - 5, &full, 4)))
			return rc;
	}
	if ((rc = sl_state_evict_apply(&d->ev, t)))
		return rc;
	return sl_state_set_counters(t, &d->sp, d->rows_after, d->bytes_after);
}

static int first_ts(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		    const void *val, size_t vlen)
{
	struct evict_walk *w = ctx;
	(void)skey, (void)sklen, (void)val, (void)vlen;
	if (rklen < 9)
		return (w->err = SL_ECORRUPT);
	w->removed = sl_watermark_is_late(w->wm_ms, lead_ts(rk));
	return 1;
}

static int first_exp(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		     const void *val, size_t vlen)
{
	struct evict_walk *w = ctx;
	(void)skey, (void)sklen, (void)val, (void)vlen;
	if (rklen < 8)
		return (w->err = SL_ECORRUPT);
	w->removed = sl_watermark_expired(w->wm_ms, (int64_t)(get_be64(rk) ^ (1ull << 63)));
	return 1;
}

int sl_dedup_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t, int64_t wm_ms,
		 bool *due)
{
	struct evict_walk w = {.wm_ms = wm_ms};
	bool ts_lead = false;
	int rc = 0;

	*due = false;
	for (size_t i = 0; q->has_watermark && !q->dedup_within_wm && i < q->ndedup; i++)
		ts_lead |= q->dedup[i] == q->wm_col;
	if (ts_lead) {
		struct sl_state_space sp = {.qid = qid, .op = SL_STATE_DEDUP, .lead_payload = 8};
		unsigned char tag = 0x01;
		rc = sl_state_each(t, &sp, &tag, 1, first_ts, &w);
	} else if (q->dedup_within_wm) {
		struct sl_state_space sp = {.qid = qid, .op = SL_STATE_EXPIRY, .raw = true};
		rc = sl_state_each(t, &sp, NULL, 0, first_exp, &w);
	}
	if (w.err)
		return w.err;
	if (rc < 0 || rc > 1)
		return rc;
	*due = w.removed != 0;
	return 0;
}
