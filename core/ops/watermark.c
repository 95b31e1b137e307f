/* SPDX-License-Identifier: MIT */
/* Watermark tracking and event-time statistics, with Spark's arithmetic. */
#include <assert.h>

#include "watermark.h"

void sl_watermark_init(struct sl_watermark *w, int64_t delay_us, int64_t wm_ms)
{
	assert(delay_us >= 0);
	w->delay_ms = delay_us / 1000; /* Spark: TimeUnit.convert, toward zero */
	w->wm_ms = wm_ms;
}

void sl_watermark_stats_init(struct sl_watermark_stats *s)
{
	s->count = 0;
	s->min_ms = INT64_MAX;
	s->max_ms = INT64_MIN;
	s->avg_ms = 0;
}

void sl_watermark_stats_add(struct sl_watermark_stats *s, int64_t ts_us)
{
	int64_t ms = ts_us / 1000; /* as Spark's Long division: toward zero */

	if (ms < s->min_ms)
		s->min_ms = ms;
	if (ms > s->max_ms)
		s->max_ms = ms;
	s->count++;
	s->avg_ms += ((double)ms - s->avg_ms) / (double)s->count;
}

void sl_watermark_stats_add_column(struct sl_watermark_stats *s, const struct sl_batch *b,
				   size_t col)
{
	const struct sl_batch_col *c = &b->cols[col];

	for (size_t r = 0; r < b->nrows; r++)
		if (!c->nulls[r])
			sl_watermark_stats_add(s, c->cells[r].i);
}

int64_t sl_watermark_stats_avg_ms(const struct sl_watermark_stats *s)
{
	/* Scala's toLong saturates where a C cast would be undefined */
	if (s->avg_ms >= 9223372036854775807.0)
		return INT64_MAX;
	if (s->avg_ms <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)s->avg_ms;
}

bool sl_watermark_advance(struct sl_watermark *w, const struct sl_watermark_stats *s)
{
	int64_t candidate;

	if (s->count == 0)
		return false;
	if (__builtin_sub_overflow(s->max_ms, w->delay_ms, &candidate))
		return false; /* only a far-past max can underflow: never above the watermark */
	if (candidate <= w->wm_ms)
		return false;
	w->wm_ms = candidate;
	return true;
}

int64_t sl_watermark_us(int64_t wm_ms)
{
	int64_t us;

	if (__builtin_mul_overflow(wm_ms, 1000, &us))
		return wm_ms < 0 ? INT64_MIN : INT64_MAX;
	return us;
}

bool sl_watermark_is_late(int64_t wm_ms, int64_t ts_us) { return ts_us <= sl_watermark_us(wm_ms); }

bool sl_watermark_window_final(int64_t wm_ms, int64_t end_us)
{
	return end_us <= sl_watermark_us(wm_ms);
}

int64_t sl_watermark_expires_at(const struct sl_watermark *w, int64_t ts_us)
{
	int64_t delay_us = sl_watermark_us(w->delay_ms), at;

	if (__builtin_add_overflow(ts_us, delay_us, &at))
		return INT64_MAX;
	return at;
}

bool sl_watermark_expired(int64_t wm_ms, int64_t expires_us)
{
	return sl_watermark_us(wm_ms) >= expires_us;
}
