/* SPDX-License-Identifier: MIT */
/* Assigning timestamps to tumbling and sliding event-time windows. */
#include <assert.h>

#include "window.h"

size_t sl_window_max_count(int64_t duration_us, int64_t slide_us)
{
	assert(duration_us > 0 && slide_us > 0);
	return (size_t)(duration_us / slide_us + (duration_us % slide_us != 0));
}

size_t sl_window_assign(int64_t ts_us, int64_t duration_us, int64_t slide_us, struct sl_window *out,
			size_t max)
{
	size_t total = sl_window_max_count(duration_us, slide_us), n = 0;
	int64_t rem = ts_us % slide_us;

	/* C's % truncates toward zero; Spark adds the slide to a negative remainder */
	if (rem < 0)
		rem += slide_us;
	int64_t last_start;
	if (__builtin_sub_overflow(ts_us, rem, &last_start))
		return 0; /* every window would start below INT64_MIN */

	/* i from high to low so that starts come out ascending */
	for (size_t k = total; k-- > 0 && n < max;) {
		int64_t back, start, end;
		if (__builtin_mul_overflow((int64_t)k, slide_us, &back) ||
		    __builtin_sub_overflow(last_start, back, &start) ||
		    __builtin_add_overflow(start, duration_us, &end))
			continue;
		if (start <= ts_us && ts_us < end) {
			out[n].start = start;
			out[n].end = end;
			n++;
		}
	}
	return n;
}
