/* SPDX-License-Identifier: MIT */
/* Accumulators of the aggregate functions, over byte states (layouts in agg.h). */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "agg.h"

#define FLAG_SEEN 0x01
#define FLAG_OVERFLOW 0x02
#define OFF_FLAGS 8
#define OFF_COUNT 8 /* avg */

/* Unaligned loads and stores: a state may sit anywhere in an LMDB value. */
static int64_t get_i(const void *p)
{
	int64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static double get_d(const void *p)
{
	double v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static void put_i(void *p, int64_t v) { memcpy(p, &v, sizeof(v)); }
static void put_d(void *p, double v) { memcpy(p, &v, sizeof(v)); }

static unsigned char *flags(void *state) { return (unsigned char *)state + OFF_FLAGS; }
static unsigned char get_flags(const void *state)
{
	return ((const unsigned char *)state)[OFF_FLAGS];
}

bool sl_agg_supported(const struct sl_aggregate *a)
{
	switch (a->fn) {
	case SL_AGG_COUNT_STAR:
	case SL_AGG_COUNT:
	case SL_AGG_SUM:
	case SL_AGG_AVG:
		return true;
	case SL_AGG_MIN:
	case SL_AGG_MAX:
		return a->type != SL_TYPE_STRING && a->type != SL_TYPE_WINDOW;
	}
	return false;
}

size_t sl_agg_state_size(const struct sl_aggregate *a)
{
	if (!sl_agg_supported(a))
		return 0;
	return a->fn == SL_AGG_COUNT_STAR || a->fn == SL_AGG_COUNT ? 8 : 16;
}

void sl_agg_init(const struct sl_aggregate *a, void *state)
{
	assert(sl_agg_supported(a));
	memset(state, 0, sl_agg_state_size(a));
}

/*
 * Spark's order of doubles (SQLOrderingUtil.compareDoubles): NaN equals NaN
 * and is above everything, -0.0 equals 0.0.
 */
static int cmp_double(double x, double y)
{
	if (isnan(x))
		return isnan(y) ? 0 : 1;
	if (isnan(y))
		return -1;
	return x < y ? -1 : x > y;
}

/* Folds value v (int64 bits, or a double's in *d) into a min/max state. */
static void fold_extreme(const struct sl_aggregate *a, void *state, int64_t i, double d)
{
	bool seen = get_flags(state) & FLAG_SEEN, better;

	if (a->type == SL_TYPE_DOUBLE) {
		int c = seen ? cmp_double(d, get_d(state)) : 0;
		better = !seen || (a->fn == SL_AGG_MIN ? c < 0 : c > 0);
		if (better)
			put_d(state, d);
	} else {
		int64_t cur = get_i(state);
		better = !seen || (a->fn == SL_AGG_MIN ? i < cur : i > cur);
		if (better)
			put_i(state, i);
	}
	*flags(state) |= FLAG_SEEN;
}

/* Adds v to an integer sum state; ERANGE (sticky) on overflow. */
static int add_sum(void *state, int64_t v, unsigned char more_flags)
{
	int64_t sum;
	bool over = __builtin_add_overflow(get_i(state), v, &sum);

	put_i(state, sum);
	*flags(state) |= FLAG_SEEN | more_flags | (over ? FLAG_OVERFLOW : 0);
	return get_flags(state) & FLAG_OVERFLOW ? ERANGE : 0;
}

int sl_agg_update(const struct sl_aggregate *a, void *state, const struct sl_batch *b, size_t row)
{
	const struct sl_batch_col *col;
	const union sl_cell *c;

	if (a->fn == SL_AGG_COUNT_STAR) {
		put_i(state, get_i(state) + 1);
		return 0;
	}
	col = &b->cols[a->col];
	if (col->nulls[row])
		return 0;
	c = &col->cells[row];
	switch (a->fn) {
	case SL_AGG_COUNT:
		put_i(state, get_i(state) + 1);
		return 0;
	case SL_AGG_SUM:
		if (a->type == SL_TYPE_DOUBLE) {
			put_d(state, get_d(state) + c->d);
			*flags(state) |= FLAG_SEEN;
			return 0;
		}
		return add_sum(state, c->i, 0);
	case SL_AGG_AVG:
		put_d(state, get_d(state) + (col->type == SL_TYPE_DOUBLE ? c->d : (double)c->i));
		put_i((char *)state + OFF_COUNT, get_i((char *)state + OFF_COUNT) + 1);
		return 0;
	case SL_AGG_MIN:
	case SL_AGG_MAX:
		fold_extreme(a, state, c->i, c->d);
		return 0;
	case SL_AGG_COUNT_STAR:
		break;
	}
	return 0;
}

int sl_agg_merge(const struct sl_aggregate *a, void *dst, const void *src)
{
	unsigned char sf;

	switch (a->fn) {
	case SL_AGG_COUNT_STAR:
	case SL_AGG_COUNT:
		put_i(dst, get_i(dst) + get_i(src));
		return 0;
	case SL_AGG_AVG:
		put_d(dst, get_d(dst) + get_d(src));
		put_i((char *)dst + OFF_COUNT,
		      get_i((char *)dst + OFF_COUNT) + get_i((const char *)src + OFF_COUNT));
		return 0;
	case SL_AGG_SUM:
		sf = get_flags(src);
		if (!(sf & FLAG_SEEN))
			return get_flags(dst) & FLAG_OVERFLOW ? ERANGE : 0;
		if (a->type == SL_TYPE_DOUBLE) {
			put_d(dst, get_d(dst) + get_d(src));
			*flags(dst) |= FLAG_SEEN;
			return 0;
		}
		return add_sum(dst, get_i(src), sf & FLAG_OVERFLOW);
	case SL_AGG_MIN:
	case SL_AGG_MAX:
		if (get_flags(src) & FLAG_SEEN)
			fold_extreme(a, dst, get_i(src), get_d(src));
		return 0;
	}
	return 0;
}

int sl_agg_result(const struct sl_aggregate *a, const void *state, struct sl_batch *out, size_t row,
		  size_t col)
{
	int64_t n;

	switch (a->fn) {
	case SL_AGG_COUNT_STAR:
	case SL_AGG_COUNT:
		sl_batch_set_int(out, row, col, get_i(state));
		return 0;
	case SL_AGG_AVG:
		n = get_i((const char *)state + OFF_COUNT);
		if (n == 0)
			sl_batch_set_null(out, row, col);
		else
			sl_batch_set_double(out, row, col, get_d(state) / (double)n);
		return 0;
	case SL_AGG_SUM:
	case SL_AGG_MIN:
	case SL_AGG_MAX:
		if (get_flags(state) & FLAG_OVERFLOW) {
			sl_batch_set_null(out, row, col);
			return ERANGE;
		}
		if (!(get_flags(state) & FLAG_SEEN))
			sl_batch_set_null(out, row, col);
		else if (a->type == SL_TYPE_DOUBLE)
			sl_batch_set_double(out, row, col, get_d(state));
		else
			sl_batch_set_int(out, row, col, get_i(state));
		return 0;
	}
	return 0;
}
