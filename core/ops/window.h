/* SPDX-License-Identifier: MIT */
/*
 * Event-time windows: which [start, end) windows of a groupBy.window contain
 * a timestamp, with Spark's alignment (ResolveTimeWindows, startTime 0).
 * Pure functions, thread-safe.
 */
#ifndef SLUICE_CORE_WINDOW_H
#define SLUICE_CORE_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* One window: [start, end) in microseconds since the epoch. */
struct sl_window {
	int64_t start; /* inclusive, a multiple of the slide */
	int64_t end;   /* exclusive, start + duration */
};

/*
 * The most windows one timestamp can fall into: ceil(duration / slide).
 * duration > 0, 0 < slide <= duration (as config guarantees).
 */
size_t sl_window_max_count(int64_t duration_us, int64_t slide_us);

/*
 * Writes into out[0..max) the windows of length duration_us, starting every
 * slide_us from the epoch, that contain ts_us, in ascending start order, and
 * returns how many it wrote. As Spark: rem = (ts - 0) mod slide taken
 * non-negative, lastStart = ts - rem, candidates lastStart - i*slide for
 * i = 0 .. ceil(duration/slide)-1, kept when start <= ts < end. So a tumbling
 * window (slide == duration) gives exactly one, and a sliding one gives
 * floor or ceil of duration/slide. Negative timestamps work the same way
 * (-1 us with 10 min tumbling windows is in [-10 min, 0)). A window whose
 * bounds would overflow int64 is skipped. At most max are written: pass
 * max >= sl_window_max_count() to get all. A null timestamp has no window:
 * the caller skips it.
 */
size_t sl_window_assign(int64_t ts_us, int64_t duration_us, int64_t slide_us, struct sl_window *out,
			size_t max);

#endif
