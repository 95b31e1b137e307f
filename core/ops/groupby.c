/* SPDX-License-Identifier: MIT */
/*
 * groupBy + aggregate, as Spark's streaming aggregation
 * (StateStoreRestoreExec/StateStoreSaveExec) in its three output modes.
 *
 * State (core/state.h), op 'A': key = the window (when groupBy has one)
 * then the group columns, as row keys; value = the aggregates' states
 * (core/agg.h) back to back. Window-first keys sort by window start, and
 * with one window length also by end, so the windows a watermark closes
 * are the first entries of a walk.
 *
 * Per batch: the batch's rows are aggregated in a hash table (core/kmap.h),
 * each group is then merged with its stored state, and the output is
 *   append:   the windows the batch's watermark closes, once, from the state;
 *   update:   the groups the batch changed;
 *   complete: every group (a merge of the state walk with the batch's groups).
 * Closed windows leave the state in append and update modes, when the
 * window is on the watermark column; complete mode keeps everything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "catalog.h"
#include "config.h"
#include "err.h"
#include "fault.h"
#include "kmap.h"
#include "ksort.h"
#include "mem.h"
#include "groupby.h"
#include "ops.h"
#include "rowkey.h"
#include "state.h"
#include "window.h"

struct sl_groupby {
	const struct sl_query_config *q;
	struct sl_state_space sp;
	size_t ssz;               /* bytes of one group's states */
	size_t offs[64];          /* each aggregate's offset in them */
	bool evicts;              /* closed windows leave the state */
	enum sl_type types[65];   /* the key's value types: window?, groups */
	size_t dest[65];          /* and their output columns */
	size_t ntypes;
	struct sl_kmap groups;    /* this batch's groups */
	unsigned char *states;    /* ssz bytes per group */
	uint8_t *stored;          /* per group: it was in the state */
	size_t cap;
	uint32_t *order;          /* groups sorted by storage key */
	struct sl_keybuf kb;
	struct sl_window *wins;
	size_t maxwins;
	struct sl_state_evict ev; /* evicted storage keys */
	uint64_t rows_after, bytes_after;
	size_t last_rows;         /* rows of the previous batch */
	size_t last_groups;       /* and the groups they made */
};

int sl_groupby_new(const struct sl_query_config *q, uint32_t qid, struct sl_groupby **out,
		   char *err, size_t errlen)
{
	if (q->naggs > 64 || q->ngroup > 63)
		return EINVAL;
	for (size_t i = 0; i < q->naggs; i++) {
		if (sl_agg_supported(&q->aggs[i]))
			continue;
		snprintf(err, errlen,
			 "queries.%s.aggregate.%s: min and max of a STRING column are not supported "
			 "by this version",
			 q->name, q->aggs[i].name);
		return ENOTSUP;
	}
	struct sl_groupby *g = calloc(1, sizeof(*g));
	if (!g)
		return ENOMEM;
	g->q = q;
	g->sp = (struct sl_state_space){.qid = qid, .op = SL_STATE_AGG,
					.lead_payload = q->has_window ? 16 : 0};
	for (size_t i = 0; i < q->naggs; i++) {
		g->offs[i] = g->ssz;
		g->ssz += sl_agg_state_size(&q->aggs[i]);
	}
	g->evicts = q->has_watermark && q->has_window && q->win_col == q->wm_col &&
		    q->output_mode != SL_OUTPUT_COMPLETE;
	size_t c = 0;
	if (q->has_window) {
		g->types[g->ntypes] = SL_TYPE_WINDOW;
		g->dest[g->ntypes++] = c++;
		g->maxwins = sl_window_max_count(q->win_duration_us, q->win_slide_us);
		g->wins = calloc(g->maxwins, sizeof(*g->wins));
		if (!g->wins) {
			free(g);
			return ENOMEM;
		}
	}
	for (size_t i = 0; i < q->ngroup; i++) {
		g->types[g->ntypes] = q->source.schema.cols[q->group[i]].type;
		g->dest[g->ntypes++] = c++;
	}
	sl_kmap_init(&g->groups);
	sl_keybuf_init(&g->kb);
	*out = g;
	return 0;
}

void sl_groupby_free(struct sl_groupby *g)
{
	if (!g)
		return;
	sl_kmap_release(&g->groups);
	sl_keybuf_release(&g->kb);
	free(g->states);
	free(g->stored);
	free(g->order);
	free(g->wins);
	sl_state_evict_release(&g->ev);
	free(g);
}

static int grow(struct sl_groupby *g, size_t n)
{
	if (n <= g->cap)
		return 0;
	size_t cap = g->cap ? g->cap * 2 : 1024;
	while (cap < n)
		cap *= 2;
	unsigned char *s = realloc(g->states, cap * (g->ssz ? g->ssz : 1));
	if (!s)
		return ENOMEM;
	sl_mem_huge(s, cap * (g->ssz ? g->ssz : 1));
	g->states = s;
	uint8_t *st = realloc(g->stored, cap);
	if (!st)
		return ENOMEM;
	g->stored = st;
	g->cap = cap;
	return 0;
}

/* Adds row r of b to the group whose row key is key (hashed h). */
static int add_row(struct sl_groupby *g, const struct sl_batch *b, size_t r, const void *key,
		   size_t len, uint64_t h, char *err, size_t errlen)
{
	const struct sl_query_config *q = g->q;
	uint32_t idx;
	bool added;
	int rc;

	if ((rc = sl_kmap_upsert_hashed(&g->groups, key, len, h, &idx, &added)))
		return rc;
	if ((rc = grow(g, (size_t)idx + 1)))
		return rc;
	unsigned char *st = g->states + (size_t)idx * g->ssz;
	if (added)
		for (size_t i = 0; i < q->naggs; i++)
			sl_agg_init(&q->aggs[i], st + g->offs[i]);
	for (size_t i = 0; i < q->naggs; i++) {
		if (sl_agg_update(&q->aggs[i], st + g->offs[i], b, r) == ERANGE) {
			snprintf(err, errlen, "aggregate %s: %s(%s) overflows BIGINT", q->aggs[i].name,
				 q->aggs[i].fn == SL_AGG_AVG ? "avg" : "sum",
				 q->source.schema.cols[q->aggs[i].col].name);
			return SL_EMALFORMED;
		}
	}
	return 0;
}

/* The storage key of group idx, for sorting and merging with the state walk. */
static void group_skey(const struct sl_groupby *g, uint32_t idx, struct sl_state_skey *sk)
{
	size_t len;
	const unsigned char *k = sl_kmap_key(&g->groups, idx, &len);
	sl_state_skey(&g->sp, k, len, sk);
}

static int cmp_groups(const void *a, const void *b, void *ctx)
{
	const struct sl_groupby *sort_g = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	size_t xl, yl;
	const unsigned char *xk = sl_kmap_key(&sort_g->groups, x, &xl);
	const unsigned char *yk = sl_kmap_key(&sort_g->groups, y, &yl);
	if (xl <= SL_STATE_KEY_INLINE && yl <= SL_STATE_KEY_INLINE)
		return sl_state_skey_cmp(xk, xl, yk, yl);
	struct sl_state_skey sx, sy;
	group_skey(sort_g, x, &sx);
	group_skey(sort_g, y, &sy);
	return sl_state_skey_cmp(sx.k, sx.len, sy.k, sy.len);
}

/* Appends the output row of key rk with states st. */
static int emit(struct sl_groupby *g, struct sl_batch *out, const void *rk, size_t rklen,
		const unsigned char *st, char *err, size_t errlen)
{
	const struct sl_query_config *q = g->q;
	size_t row;
	int rc;

	if ((rc = sl_batch_add_row(out, &row)))
		return rc;
	if ((rc = sl_rowkey_decode(rk, rklen, g->types, g->ntypes, out, row, g->dest)))
		return rc;
	for (size_t i = 0; i < q->naggs; i++) {
		if (sl_agg_result(&q->aggs[i], st + g->offs[i], out, row, g->ntypes + i) == ERANGE) {
			snprintf(err, errlen, "aggregate %s overflows BIGINT", q->aggs[i].name);
			return SL_EMALFORMED;
		}
	}
	return 0;
}

/* The output rows of groups order[from, to), in that order. */
struct emit_job {
	struct sl_groupby *g;
	struct sl_batch *out;
	const uint32_t *order;
	size_t from, to;
	char err[256];
	int rc;
};

static void *emit_main(void *arg)
{
	struct emit_job *j = arg;
	j->rc = 0;
	for (size_t i = j->from; i < j->to && j->rc == 0; i++) {
		size_t len;
		uint32_t idx = j->order[i];
		/* the keys and states are read out of order (as sl_groupby_apply()) */
		sl_kmap_prefetch_walk(&j->g->groups, j->order, i, j->to);
		if (i + SL_KMAP_AHEAD < j->to)
			__builtin_prefetch(j->g->states + (size_t)j->order[i + SL_KMAP_AHEAD] * j->g->ssz);
		const unsigned char *k = sl_kmap_key(&j->g->groups, idx, &len);
		j->rc = emit(j->g, j->out, k, len, j->g->states + (size_t)idx * j->g->ssz, j->err,
			     sizeof(j->err));
	}
	return NULL;
}

/*
 * Appends the output rows of groups order[from, n) to out. Many are
 * emitted on two threads (the second half into rows reserved for it,
 * sl_batch_side_begin), the other core being idle here: B3's 725,464
 * groups took about 150 ms on one.
 */
static int emit_groups(struct sl_groupby *g, struct sl_batch *out, const uint32_t *order,
		       size_t from, size_t n, char *err, size_t errlen)
{
	size_t half = from + (n - from) / 2, row = out->nrows;
	struct emit_job a = {.g = g, .out = out, .order = order, .from = from, .to = half};
	struct emit_job b = {.g = g, .order = order, .from = half, .to = n};
	struct sl_batch side;
	pthread_t th;

	bool two = n - from >= SL_FAULT_SIZE("groupby.emit_split", 1u << 16) &&
		   sl_batch_reserve(out, row + (n - from)) == 0 &&
		   sl_batch_side_begin(out, row + (half - from), row + (n - from), &side) == 0;
	if (two) {
		b.out = &side;
		if (pthread_create(&th, NULL, emit_main, &b)) {
			sl_batch_side_drop(&side);
			two = false;
		}
	}
	if (!two)
		a.to = n;
	emit_main(&a);
	if (two)
		pthread_join(th, NULL);
	/* the first error in group order, as one thread would have stopped at it */
	const struct emit_job *bad = a.rc ? &a : two && b.rc ? &b : NULL;
	if (bad) {
		if (two)
			sl_batch_side_drop(&side);
		snprintf(err, errlen, "%s", bad->err);
		return bad->rc;
	}
	return two ? sl_batch_side_join(out, &side) : 0;
}

struct walk {
	struct sl_groupby *g;
	struct sl_batch *out;
	int64_t wm_ms;
	bool emit_closed;      /* append: closed windows are written */
	size_t next;           /* complete: next batch group (in order) to merge */
	uint64_t removed, bytes;
	char *err;
	size_t errlen;
	int rc;
};

/* append and update: closed windows leave the state (append writes them first). */
static int walk_closed(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		       const void *val, size_t vlen)
{
	struct walk *w = ctx;
	struct sl_groupby *g = w->g;
	int64_t start, end;

	if ((w->rc = sl_rowkey_decode_window(rk, rklen, &start, &end)))
		return 1;
	if (!sl_watermark_window_final(w->wm_ms, end))
		return 1;
	if (vlen != g->ssz)
		return (w->rc = SL_ECORRUPT), 1;
	/* a group of this batch in a closed window (not possible with late rows dropped) */
	uint32_t idx;
	const unsigned char *st = val;
	if (sl_kmap_find(&g->groups, rk, rklen, &idx)) {
		st = g->states + (size_t)idx * g->ssz;
		g->stored[idx] = 2; /* merged and closed: not stored again */
	}
	if (w->emit_closed && (w->rc = emit(g, w->out, rk, rklen, st, w->err, w->errlen)))
		return 1;
	if ((w->rc = sl_state_evict_add(&g->ev, skey, sklen)))
		return 1;
	w->removed++;
	w->bytes += sl_state_entry_bytes(rklen, vlen);
	return 0;
}

/* complete: every stored group, merged in order with the batch's groups. */
static int walk_all(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		    const void *val, size_t vlen)
{
	struct walk *w = ctx;
	struct sl_groupby *g = w->g;
	size_t n = sl_kmap_count(&g->groups);

	if (vlen != g->ssz)
		return (w->rc = SL_ECORRUPT), 1;
	for (; w->next < n; w->next++) {
		uint32_t idx = g->order[w->next];
		struct sl_state_skey sk;
		group_skey(g, idx, &sk);
		int c = sl_state_skey_cmp(sk.k, sk.len, skey, sklen);
		if (c > 0)
			break;
		size_t len;
		const unsigned char *k = sl_kmap_key(&g->groups, idx, &len);
		if ((w->rc = emit(g, w->out, k, len, g->states + (size_t)idx * g->ssz, w->err,
				  w->errlen)))
			return 1;
		if (c == 0) {
			w->next++;
			return 0; /* this stored group was merged: written above */
		}
	}
	return (w->rc = emit(g, w->out, rk, rklen, val, w->err, w->errlen)) ? 1 : 0;
}

/*
 * The groups a batch of nrows rows is expected to make, to size the batch's
 * table and states: a table sized for rows is mostly empty when rows share
 * groups, and every byte of it is zeroed (page faults) and scanned. No
 * group column and no window: one group. Otherwise the previous batch's
 * groups per row, with a quarter to spare; for the first batch, rows. Both
 * grow on demand when the estimate falls short.
 */
static size_t estimate(const struct sl_groupby *g, size_t nrows)
{
	if (g->q->ngroup == 0 && !g->q->has_window)
		return 1;
	if (!g->last_rows)
		return nrows;
	double per_row = (double)g->last_groups / (double)g->last_rows;
	size_t est = (size_t)(per_row * 1.25 * (double)nrows) + 1024;
	return est < nrows ? est : nrows;
}

int sl_groupby_begin(struct sl_groupby *g, struct sl_txn *t, const struct sl_batch *b,
		     struct sl_batch *out)
{
	int rc;

	g->last_groups = sl_kmap_count(&g->groups);
	sl_kmap_clear(&g->groups);
	sl_state_evict_clear(&g->ev);
	sl_batch_clear(out);
	if ((rc = sl_state_counters(t, &g->sp, &g->rows_after, &g->bytes_after)))
		return rc;
	size_t est = estimate(g, b->nrows);
	g->last_rows = b->nrows;
	if ((rc = sl_kmap_reserve(&g->groups, est)) || (rc = grow(g, est)))
		return rc;
	return 0;
}

/*
 * The keys of a few rows are made and their slots prefetched before any of
 * them is added, so that the table's cache misses overlap (rows stay in
 * order: min and max keep the first of equal values).
 */
#define AHEAD 16

static int add_pending(struct sl_groupby *g, const struct sl_batch *b, struct sl_kmap_ahead *p,
		       size_t n, char *err, size_t errlen)
{
	/* the slots are in cache by now: fetch the keys and states they point at */
	for (size_t i = 0; i < n; i++) {
		uint32_t hint = sl_kmap_peek(&g->groups, p[i].h);
		if (hint && hint <= g->cap)
			__builtin_prefetch(g->states + (size_t)(hint - 1) * g->ssz);
	}
	for (size_t i = 0; i < n; i++) {
		int rc = add_row(g, b, p[i].row, g->kb.data + p[i].off, p[i].len, p[i].h, err,
				 errlen);
		if (rc)
			return rc;
	}
	sl_keybuf_clear(&g->kb);
	return 0;
}

static const unsigned char *group_key(const void *ctx, uint32_t idx, size_t *len)
{
	return sl_kmap_key(&((const struct sl_groupby *)ctx)->groups, idx, len);
}

struct sort_job {
	const struct sl_groupby *g;
	uint32_t *v;
	size_t n;
	bool plain; /* no key is hashed: storage keys sort as the row keys */
};

static void *sort_main(void *arg)
{
	struct sort_job *j = arg;
	if (!j->plain || sl_ksort(j->v, j->n, group_key, j->g))
		qsort_r(j->v, j->n, sizeof(*j->v), cmp_groups, (void *)j->g); /* glibc's, with a context */
	return NULL;
}

/* One end of the merge of two sorted runs a and b into out (a's first on ties). */
struct merge_job {
	struct sl_groupby *g; /* cmp_groups()'s context (qsort_r's, not const) */
	const uint32_t *a, *b;
	size_t na, nb;
	uint32_t *out;
	size_t take; /* elements this end writes */
	bool back;   /* the largest ones, from out's end down */
};

static void *merge_main(void *arg)
{
	struct merge_job *j = arg;
	void *g = j->g;

	if (!j->back) {
		size_t i = 0, k = 0;
		for (size_t o = 0; o < j->take; o++)
			j->out[o] = k == j->nb || (i < j->na && cmp_groups(&j->a[i], &j->b[k], g) <= 0)
					    ? j->a[i++]
					    : j->b[k++];
	} else {
		size_t i = j->na, k = j->nb, o = j->na + j->nb;
		for (size_t t = 0; t < j->take; t++)
			j->out[--o] = i == 0 || (k > 0 && cmp_groups(&j->a[i - 1], &j->b[k - 1], g) <= 0)
					      ? j->b[--k]
					      : j->a[--i];
	}
	return NULL;
}

/*
 * Sorts the group indexes by storage key; a big table is sorted in two
 * halves on two threads, then merged on two threads, one from each end
 * (the front takes a's element on ties and the back b's, so that the two
 * ends meet exactly where one merge would have put them).
 */
static int sort_groups(struct sl_groupby *g, uint32_t *order, size_t n)
{
	bool plain = true;
	for (size_t i = 0; i < n && plain; i++) {
		size_t len;
		sl_kmap_key(&g->groups, order[i], &len);
		plain = !sl_state_key_hashed(&g->sp, len);
	}
	struct sort_job a = {g, order, n / 2, plain}, b = {g, order + n / 2, n - n / 2, plain};
	pthread_t th;

	if (n < SL_FAULT_SIZE("groupby.sort_split", 1u << 16) ||
	    pthread_create(&th, NULL, sort_main, &a)) {
		struct sort_job all = {g, order, n, plain};
		sort_main(&all);
		return 0;
	}
	sort_main(&b);
	pthread_join(th, NULL);
	uint32_t *out = malloc(n * sizeof(*out));
	if (!out)
		return ENOMEM;
	struct merge_job front = {g, a.v, b.v, a.n, b.n, out, n / 2, false};
	struct merge_job back = {g, a.v, b.v, a.n, b.n, out, n - n / 2, true};
	if (pthread_create(&th, NULL, merge_main, &back)) {
		front.take = n;
		merge_main(&front);
	} else {
		merge_main(&front);
		pthread_join(th, NULL);
	}
	memcpy(order, out, n * sizeof(*out));
	free(out);
	return 0;
}

int sl_groupby_rows(struct sl_groupby *g, const struct sl_batch *b, const uint8_t *keep,
		    size_t from, size_t to, char *err, size_t errlen)
{
	const struct sl_query_config *q = g->q;
	struct sl_kmap_ahead p[AHEAD + 64];
	size_t n = 0;
	int rc;

	sl_keybuf_clear(&g->kb);
	for (size_t r = from; r < to; r++) {
		if (!keep[r])
			continue;
		if (!q->has_window) {
			size_t off = g->kb.len;
			if ((rc = sl_rowkey_encode(b, r, q->group, q->ngroup, &g->kb)))
				return rc;
			p[n++] = sl_kmap_ahead_key(&g->groups, r, g->kb.data, off, g->kb.len);
		} else if (!sl_batch_is_null(b, r, q->win_col)) { /* a null joins no window */
			size_t nw = sl_window_assign(b->cols[q->win_col].cells[r].i,
						     q->win_duration_us, q->win_slide_us, g->wins,
						     g->maxwins);
			for (size_t k = 0; k < nw; k++) {
				size_t off = g->kb.len;
				if ((rc = sl_rowkey_encode_window(&g->kb, g->wins[k].start,
								  g->wins[k].end)) ||
				    (rc = sl_rowkey_encode(b, r, q->group, q->ngroup, &g->kb)))
					return rc;
				p[n++] = sl_kmap_ahead_key(&g->groups, r, g->kb.data, off, g->kb.len);
				if (n == sizeof(p) / sizeof(p[0])) {
					if ((rc = add_pending(g, b, p, n, err, errlen)))
						return rc;
					n = 0;
				}
			}
		}
		if (n >= AHEAD) {
			if ((rc = add_pending(g, b, p, n, err, errlen)))
				return rc;
			n = 0;
		}
	}
	return add_pending(g, b, p, n, err, errlen);
}

/*
 * Merges each group with its stored state, in storage-key order (order),
 * and counts the new ones into *rows and *bytes. empty: no state before
 * this batch, every group is new (counted in the table's order, no
 * lookups).
 */
static int merge_stored(struct sl_groupby *g, struct sl_txn *t, bool empty, const uint32_t *order,
			size_t n, uint64_t *rows, uint64_t *bytes, char *err, size_t errlen)
{
	const struct sl_query_config *q = g->q;

	if (empty) {
		if (n)
			memset(g->stored, 0, n); /* (stored is NULL before a first group) */
		for (size_t idx = 0; idx < n; idx++) {
			size_t len;
			sl_kmap_key(&g->groups, (uint32_t)idx, &len);
			*bytes += sl_state_entry_bytes(len, g->ssz);
		}
		*rows += n;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t idx = order[i];
		size_t len;
		const unsigned char *k = sl_kmap_key(&g->groups, idx, &len);
		unsigned char *st = g->states + (size_t)idx * g->ssz;
		const void *v;
		size_t vlen;
		int rc = sl_state_get(t, &g->sp, k, len, &v, &vlen);
		if (rc == SL_NOTFOUND) {
			g->stored[idx] = 0;
			(*rows)++;
			*bytes += sl_state_entry_bytes(len, g->ssz);
			continue;
		}
		if (rc)
			return rc;
		if (vlen != g->ssz)
			return SL_ECORRUPT;
		unsigned char merged[64 * SL_AGG_STATE_MAX];
		memcpy(merged, v, g->ssz);
		for (size_t a = 0; a < q->naggs; a++) {
			if (sl_agg_merge(&q->aggs[a], merged + g->offs[a], st + g->offs[a]) == ERANGE) {
				snprintf(err, errlen, "aggregate %s overflows BIGINT", q->aggs[a].name);
				return SL_EMALFORMED;
			}
		}
		memcpy(st, merged, g->ssz);
		g->stored[idx] = 1;
	}
	return 0;
}

int sl_groupby_end(struct sl_groupby *g, struct sl_txn *t, int64_t wm_ms, struct sl_batch *out,
		   struct sl_op_metrics *m, char *err, size_t errlen)
{
	const struct sl_query_config *q = g->q;
	uint64_t rows = g->rows_after, bytes = g->bytes_after;
	bool empty = rows == 0; /* no state before this batch: every group is new */
	int rc;

	/* merge each group with its stored state, in storage-key order */
	size_t n = sl_kmap_count(&g->groups);
	uint32_t *order = realloc(g->order, (n ? n : 1) * sizeof(*order));
	if (!order)
		return ENOMEM;
	g->order = order;
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	if ((rc = sort_groups(g, order, n)))
		return rc;
	if ((rc = merge_stored(g, t, empty, order, n, &rows, &bytes, err, errlen)))
		return rc;
	m->rows_updated = n;

	struct walk w = {.g = g, .out = out, .wm_ms = wm_ms, .err = err, .errlen = errlen};
	/* the output rows, known (update) or nearly (complete): no regrowth */
	if (q->output_mode != SL_OUTPUT_APPEND &&
	    (rc = sl_batch_reserve(out, q->output_mode == SL_OUTPUT_COMPLETE ? rows : n)))
		return rc;
	if (q->output_mode == SL_OUTPUT_UPDATE && (rc = emit_groups(g, out, order, 0, n, err, errlen)))
		return rc;
	if (g->evicts && wm_ms > 0) {
		w.emit_closed = q->output_mode == SL_OUTPUT_APPEND;
		rc = sl_state_each(t, &g->sp, NULL, 0, walk_closed, &w);
		if (w.rc)
			return w.rc;
		if (rc < 0 || rc > 1)
			return rc;
	}
	/* the last lookup was walk_closed's: the output and the state's writes get the table's memory */
	sl_kmap_drop_slots(&g->groups);
	if (q->output_mode == SL_OUTPUT_COMPLETE) {
		rc = sl_state_each(t, &g->sp, NULL, 0, walk_all, &w);
		if (w.rc)
			return w.rc;
		if (rc < 0 || rc > 1)
			return rc;
		if ((rc = emit_groups(g, out, order, w.next, n, err, errlen)))
			return rc;
	}
	/* a new group closed at once leaves no state behind (defensive: see walk_closed) */
	for (size_t i = 0; g->evicts && i < n; i++) {
		uint32_t idx = order[i];
		size_t len;
		int64_t start, end;
		const unsigned char *k = sl_kmap_key(&g->groups, idx, &len);
		if (g->stored[idx] || sl_rowkey_decode_window(k, len, &start, &end) ||
		    !sl_watermark_window_final(wm_ms, end))
			continue;
		if (q->output_mode == SL_OUTPUT_APPEND &&
		    (rc = emit(g, out, k, len, g->states + (size_t)idx * g->ssz, err, errlen)))
			return rc;
		g->stored[idx] = 2;
		rows--;
		bytes -= sl_state_entry_bytes(len, g->ssz);
	}
	g->rows_after = rows - (w.removed <= rows ? w.removed : rows);
	g->bytes_after = bytes - (w.bytes <= bytes ? w.bytes : bytes);
	m->rows_removed = w.removed;
	m->rows_total = g->rows_after;
	m->bytes = g->bytes_after;
	return 0;
}

int sl_groupby_process(struct sl_groupby *g, struct sl_txn *t, const struct sl_batch *b,
		       const uint8_t *keep, int64_t wm_ms, struct sl_batch *out,
		       struct sl_op_metrics *m, char *err, size_t errlen)
{
	int rc;
	if ((rc = sl_groupby_begin(g, t, b, out)) ||
	    (rc = sl_groupby_rows(g, b, keep, 0, b->nrows, err, errlen)))
		return rc;
	return sl_groupby_end(g, t, wm_ms, out, m, err, errlen);
}

int sl_groupby_apply(struct sl_groupby *g, struct sl_txn *t)
{
	size_t n = sl_kmap_count(&g->groups);
	int rc;

	/* sorted puts keep LMDB's pages hot; the keys and states are read out of order */
	for (size_t i = 0; i < n; i++) {
		uint32_t idx = g->order[i];
		size_t len;
		sl_kmap_prefetch_walk(&g->groups, g->order, i, n);
		if (i + SL_KMAP_AHEAD < n)
			__builtin_prefetch(g->states + (size_t)g->order[i + SL_KMAP_AHEAD] * g->ssz);
		if (g->stored[idx] == 2)
			continue;
		const unsigned char *k = sl_kmap_key(&g->groups, idx, &len);
		if ((rc = sl_state_put(t, &g->sp, k, len, g->states + (size_t)idx * g->ssz, g->ssz)))
			return rc;
	}
	if ((rc = sl_state_evict_apply(&g->ev, t)))
		return rc;
	return sl_state_set_counters(t, &g->sp, g->rows_after, g->bytes_after);
}

struct first {
	int64_t wm_ms;
	bool due;
	int rc;
};

static int first_closed(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
			const void *val, size_t vlen)
{
	struct first *f = ctx;
	int64_t start, end;
	(void)skey, (void)sklen, (void)val, (void)vlen;
	if ((f->rc = sl_rowkey_decode_window(rk, rklen, &start, &end)))
		return 1;
	f->due = sl_watermark_window_final(f->wm_ms, end);
	return 1;
}

int sl_groupby_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t,
		   int64_t wm_ms, bool *due)
{
	struct sl_state_space sp = {.qid = qid, .op = SL_STATE_AGG, .lead_payload = 16};
	struct first f = {.wm_ms = wm_ms};

	*due = false;
	if (!(q->has_watermark && q->has_window && q->win_col == q->wm_col &&
	      q->output_mode != SL_OUTPUT_COMPLETE))
		return 0;
	int rc = sl_state_each(t, &sp, NULL, 0, first_closed, &f);
	if (f.rc)
		return f.rc;
	if (rc < 0 || rc > 1)
		return rc;
	*due = f.due;
	return 0;
}
