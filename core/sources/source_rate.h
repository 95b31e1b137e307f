/* SPDX-License-Identifier: MIT */
/*
 * The test sources `rate` and `rate-micro-batch` (CONNECTORS.md §3,
 * SPARK-NOTES §5): rows (timestamp, value) made up from the offsets alone,
 * so that a replay of a range gives the same rows.
 *
 * rate: the offset is whole seconds since the query's creationTimeMs (kept
 * in sources/0/0 as Spark writes it, "v1\n<ms>"), the latest offset the
 * seconds elapsed now; second t ends at value v(t) (below), and a row's
 * timestamp spreads the range's values evenly over its seconds.
 * rate-micro-batch: the offset is {"offset":rows,"timestamp":ms}; each batch
 * adds rowsPerBatch rows, all at the range's start timestamp, and moves the
 * timestamp by advanceMillisPerBatch. Neither reads the wall clock for rows.
 *
 * Checkpoint entries (core/sources/qlog.h): 's' 0 creationTimeMs (rate);
 * 'b' batch N's range ("<ts_ms> <start> <end>", start "-" before the first
 * batch), deleted when N commits; meta "q.<qid>.rend" the last logged end
 * plus one (0: none yet), "q.<qid>.rts" rate-micro-batch's end timestamp.
 */
#ifndef SLUICE_CORE_SOURCE_RATE_H
#define SLUICE_CORE_SOURCE_RATE_H

#include <stdint.h>

#include "source.h"

/* Both formats' vtable: open() reads which one from source.format. */
extern const struct sl_source_ops sl_source_rate;

/*
 * rate's v(t): the first value of second t at rate rows per second with a
 * ramp-up of ramp seconds (Spark's valueAtSecond): delta * t(t+1)/2 during
 * the ramp-up, delta = rate / (ramp + 1) in integers, then rate per second.
 */
int64_t sl_rate_value_at(int64_t t, int64_t rate, int64_t ramp);

/*
 * The timestamp (ms) of value v in the range of seconds (s, e], created at
 * creation_ms: the range's values spread evenly over its seconds, rounded
 * as Java's Math.round.
 */
int64_t sl_rate_ts_ms(int64_t creation_ms, int64_t s, int64_t e, int64_t vs, int64_t ve,
		      int64_t v);

#endif
