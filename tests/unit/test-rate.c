/* SPDX-License-Identifier: MIT */
/* The rate source's arithmetic against the vectors of SPARK-NOTES §5.1. */
#include <stdint.h>

#include "check.h"
#include "source_rate.h"

static void test_value_at(void)
{
	/* rate 10, rampUp 4: 0, 2, 6, 12, 20, 30, 40 */
	static const int64_t a[] = {0, 2, 6, 12, 20, 30, 40};
	for (int64_t t = 0; t < 7; t++)
		CHECK(sl_rate_value_at(t, 10, 4) == a[t]);
	/* rate 5, rampUp 2: 0, 1, 3, 8 */
	static const int64_t b[] = {0, 1, 3, 8};
	for (int64_t t = 0; t < 4; t++)
		CHECK(sl_rate_value_at(t, 5, 2) == b[t]);
	/* no ramp-up: t * rate */
	CHECK(sl_rate_value_at(0, 7, 0) == 0);
	CHECK(sl_rate_value_at(3, 7, 0) == 21);
	/* a ramp-up slower than one row a second makes no rows until it ends */
	CHECK(sl_rate_value_at(3, 2, 5) == 0);
	CHECK(sl_rate_value_at(6, 2, 5) == 2);
	/* the halving keeps big values exact */
	CHECK(sl_rate_value_at(3037000499, 1, 3037000499) == 0);
	CHECK(sl_rate_value_at(INT64_MAX / 1000, 1000, 0) == INT64_MAX / 1000 * 1000);
}

static void test_timestamps(void)
{
	/* 10/s, after 1 s: (0 ms, 0) ... (900 ms, 9) */
	for (int64_t v = 0; v < 10; v++)
		CHECK(sl_rate_ts_ms(0, 0, 1, 0, 10, v) == v * 100);
	/* 1500/s: row v at round(v * 1000 / 1500) */
	for (int64_t v = 0; v < 1500; v++) {
		int64_t want = (v * 1000 * 2 + 1500) / 3000; /* round half up */
		CHECK(sl_rate_ts_ms(0, 0, 1, 0, 1500, v) == want);
	}
	/* rampUp 4 s at 10/s: second 2 is values 6..11 at 2000, 2167, 2333, 2500, 2667, 2833 */
	static const int64_t ms[] = {2000, 2167, 2333, 2500, 2667, 2833};
	for (int64_t v = 6; v < 12; v++)
		CHECK(sl_rate_ts_ms(0, 2, 3, 6, 12, v) == ms[v - 6]);
	/* from the creation time, over several seconds */
	CHECK(sl_rate_ts_ms(1700000000000, 5, 7, 50, 70, 60) == 1700000006000);
}

int main(void)
{
	test(test_value_at);
	test(test_timestamps);
	return test_exit();
}
