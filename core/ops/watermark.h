/* SPDX-License-Identifier: MIT */
/*
 * The event-time watermark of one query, with Spark's rules
 * (WatermarkTracker, EventTimeWatermarkExec, EventTimeStats): per batch, the
 * max/min/avg of the watermark column's non-null values in milliseconds;
 * after the batch, watermark = max - delay when that is higher, starting at
 * 0 and never moving back; lateness and window finality against it. Pure
 * functions on caller-owned structs, thread-safe.
 *
 * Units follow Spark: the watermark is kept in milliseconds (the value of
 * batchWatermarkMs and nextBatchWatermarkMs), event times come in
 * microseconds and are compared with watermark * 1000.
 */
#ifndef SLUICE_CORE_WATERMARK_H
#define SLUICE_CORE_WATERMARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"

/* The watermark of a query. */
struct sl_watermark {
	int64_t delay_ms; /* the delay in ms (the configured microseconds / 1000), >= 0 */
	int64_t wm_ms;	  /* ms since the epoch; 0 before any row, never decreases */
};

/*
 * Event-time statistics of one batch, as Spark's EventTimeStats: each
 * event time is truncated to ms toward zero (Java's us / 1000) first.
 */
struct sl_watermark_stats {
	int64_t count;	/* non-null event times seen */
	int64_t min_ms; /* least, when count > 0 */
	int64_t max_ms; /* greatest, when count > 0 */
	double avg_ms;	/* running mean, updated as Spark does: avg += (t - avg) / count */
};

/*
 * Sets up w for a delay of delay_us (>= 0) and the current watermark wm_ms:
 * 0 for a new query, or the last commits/N nextBatchWatermarkMs on restart.
 */
void sl_watermark_init(struct sl_watermark *w, int64_t delay_us, int64_t wm_ms);

/* Empties s for a new batch. */
void sl_watermark_stats_init(struct sl_watermark_stats *s);

/* Adds one non-null event time (microseconds) to s. */
void sl_watermark_stats_add(struct sl_watermark_stats *s, int64_t ts_us);

/* Adds the non-null values of TIMESTAMP column col of every row of b to s. */
void sl_watermark_stats_add_column(struct sl_watermark_stats *s, const struct sl_batch *b,
				   size_t col);

/*
 * Spark's progress "avg": the mean truncated to ms (Scala's Double.toLong:
 * toward zero). Only meaningful when s->count > 0; the progress report
 * then shows min, max and this, formatted with sl_timestamp_format(ms *
 * 1000); with count == 0 (a no-data batch) it shows only the watermark.
 */
int64_t sl_watermark_stats_avg_ms(const struct sl_watermark_stats *s);

/*
 * Runs at the end of a batch: when s saw a row and max - delay is above the
 * watermark, raises it. Returns true when it moved (a no-data batch may then
 * be due). Rows before 1970 + delay never move it off 0.
 */
bool sl_watermark_advance(struct sl_watermark *w, const struct sl_watermark_stats *s);

/* wm_ms in microseconds, saturated at the int64 range. */
int64_t sl_watermark_us(int64_t wm_ms);

/*
 * True when a row with event time ts_us is late for watermark wm_ms
 * (ts <= watermark): a stateful operator drops it, and a dropDuplicates
 * state entry keyed by that event time can be evicted. A null event time is
 * never late: the caller does not ask.
 */
bool sl_watermark_is_late(int64_t wm_ms, int64_t ts_us);

/* True when the window ending at end_us (exclusive) is final: end <= watermark. */
bool sl_watermark_window_final(int64_t wm_ms, int64_t end_us);

/*
 * dropDuplicatesWithinWatermark: a key first seen at ts_us expires at
 * ts + delay (us, saturated), and leaves the state once watermark >= that.
 */
int64_t sl_watermark_expires_at(const struct sl_watermark *w, int64_t ts_us);
bool sl_watermark_expired(int64_t wm_ms, int64_t expires_us);

#endif
