/* SPDX-License-Identifier: MIT */
/* Unit tests of core/window.c: tumbling and sliding windows as Spark assigns them. */
#include <inttypes.h>
#include <stdint.h>

#include "check.h"
#include "window.h"

#define SEC INT64_C(1000000)
#define MIN (60 * SEC)
#define T1200 ((INT64_C(1759579200)) * SEC) /* 2025-10-04T12:00:00Z */

static const struct {
	const char *what;
	int64_t ts, duration, slide;
	size_t n;
	int64_t starts[4]; /* ascending; each window ends at start + duration */
} cases[] = {
    {"tumbling 10 min, 12:07", T1200 + 7 * MIN, 10 * MIN, 10 * MIN, 1, {T1200}},
    {"tumbling, on a boundary", T1200 + 10 * MIN, 10 * MIN, 10 * MIN, 1, {T1200 + 10 * MIN}},
    {"tumbling, just before a boundary", T1200 + 10 * MIN - 1, 10 * MIN, 10 * MIN, 1, {T1200}},
    {"guide: sliding 10/5, 12:07 in two",
     T1200 + 7 * MIN,
     10 * MIN,
     5 * MIN,
     2,
     {T1200, T1200 + 5 * MIN}},
    {"sliding 10/5, on a boundary",
     T1200 + 5 * MIN,
     10 * MIN,
     5 * MIN,
     2,
     {T1200, T1200 + 5 * MIN}},
    {"epoch, tumbling", 0, 10 * MIN, 10 * MIN, 1, {0}},
    {"-1 us, tumbling", -1, 10 * MIN, 10 * MIN, 1, {-10 * MIN}},
    {"-10 min exactly, tumbling", -10 * MIN, 10 * MIN, 10 * MIN, 1, {-10 * MIN}},
    {"-7 min, sliding 10/5", -7 * MIN, 10 * MIN, 5 * MIN, 2, {-15 * MIN, -10 * MIN}},
    {"-5 min, sliding 10/5", -5 * MIN, 10 * MIN, 5 * MIN, 2, {-10 * MIN, -5 * MIN}},
    /* slide not dividing duration: ceil(10/3) = 4 candidates, 3 or 4 kept */
    {"10/3 at 9: starts 0, 3, 6, 9", 9, 10, 3, 4, {0, 3, 6, 9}},
    {"10/3 at 10: 3, 6, 9 (0 ends at 10)", 10, 10, 3, 3, {3, 6, 9}},
    {"10/3 at -1: starts are multiples of 3", -1, 10, 3, 3, {-9, -6, -3}},
    {"Spark test: 5 s windows, 10 s", 10 * SEC, 5 * SEC, 5 * SEC, 1, {10 * SEC}},
    {"Spark test: 5 s windows, 15 s", 15 * SEC, 5 * SEC, 5 * SEC, 1, {15 * SEC}},
    {"near INT64_MAX: the overflowing window is skipped", INT64_MAX, 10, 10, 0, {0}},
    {"INT64_MIN: its window starts below INT64_MIN", INT64_MIN, 10, 10, 0, {0}},
    {"lowest aligned start", INT64_MIN + 8, 10, 10, 1, {INT64_MIN + 8}},
};

static void test_spark_examples(void)
{
	struct sl_window w[8];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = sl_window_assign(cases[i].ts, cases[i].duration, cases[i].slide, w, 8);
		if (n != cases[i].n)
			fprintf(stderr, "case '%s': %zu windows\n", cases[i].what, n);
		CHECK(n == cases[i].n);
		for (size_t k = 0; k < n; k++) {
			if (w[k].start != cases[i].starts[k])
				fprintf(stderr, "case '%s': window %zu starts %" PRId64 "\n",
					cases[i].what, k, w[k].start);
			CHECK(w[k].start == cases[i].starts[k]);
			CHECK(w[k].end == w[k].start + cases[i].duration);
		}
	}
}

/* Every window returned contains ts, is slide-aligned, and none is missed. */
static void test_property(void)
{
	struct sl_window w[64];
	uint64_t x = 88172645463325252u;

	for (int i = 0; i < 100000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int64_t slide = (int64_t)(x % 50) + 1;
		int64_t duration = slide * (int64_t)((x >> 8) % 5 + 1) +
				   (int64_t)((x >> 16) % 2 ? (x >> 20) % (uint64_t)slide : 0);
		int64_t ts = (int64_t)((x >> 24) % 20001) - 10000;
		size_t n = sl_window_assign(ts, duration, slide, w, 64), want = 0;
		for (int64_t s = ts - duration - slide; s <= ts + slide; s++)
			if (((s % slide) + slide) % slide == 0 && s <= ts && ts < s + duration)
				want++;
		CHECK(n == want && n <= sl_window_max_count(duration, slide));
		for (size_t k = 0; k < n; k++) {
			CHECK(w[k].start <= ts && ts < w[k].end);
			CHECK(w[k].start % slide == 0 && w[k].end - w[k].start == duration);
			CHECK(k == 0 || w[k - 1].start < w[k].start);
		}
	}
}

static void test_max_limits_output(void)
{
	struct sl_window w[2] = {{0, 0}, {-1, -1}};

	CHECK(sl_window_max_count(10 * MIN, 5 * MIN) == 2);
	CHECK(sl_window_max_count(10, 3) == 4);
	CHECK(sl_window_max_count(7, 7) == 1);
	CHECK(sl_window_assign(7 * MIN, 10 * MIN, 5 * MIN, w, 1) == 1);
	CHECK(w[0].start == 0 && w[1].start == -1);
	CHECK(sl_window_assign(7 * MIN, 10 * MIN, 5 * MIN, w, 0) == 0);
}

int main(void)
{
	test(test_spark_examples);
	test(test_property);
	test(test_max_limits_output);
	return test_exit();
}
