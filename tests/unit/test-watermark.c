/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/watermark.c: Spark's watermark sequences (it starts at
 * 0, is max - delay in ms, never moves back), lateness, window finality,
 * dedupe expiry and the eventTime statistics of the progress report.
 */
#include <stdint.h>

#include "batch.h"
#include "check.h"
#include "timestamp.h"
#include "watermark.h"

#define SEC INT64_C(1000000)
#define END INT64_MIN /* ends a batch's event times */
#define NUL (INT64_MIN + 1)

/* Batches of event times (µs) and the watermark (ms) after each. */
static const struct {
	const char *what;
	int64_t delay_us;
	int64_t batches[4][7];
	int64_t wm_after[4];
} seqs[] = {
    {"Spark 'append mode': 10 s delay",
     10 * SEC,
     {{10 * SEC, 11 * SEC, 12 * SEC, 13 * SEC, 14 * SEC, 15 * SEC, END},
      {25 * SEC, END},
      {END}, /* the no-data batch */
      {10 * SEC, END}},
     {5000, 15000, 15000, 15000}},
    {"first batch before 1970 + delay stays 0",
     10 * SEC,
     {{5 * SEC, END}, {-100 * SEC, END}, {11 * SEC, END}, {END}},
     {0, 0, 1000, 1000}},
    {"never moves back",
     0,
     {{100 * SEC, END}, {50 * SEC, END}, {100 * SEC, END}, {101 * SEC, END}},
     {100000, 100000, 100000, 101000}},
    {"nulls do not move it",
     1 * SEC,
     {{NUL, END}, {NUL, 3 * SEC, NUL, END}, {END}, {END}},
     {0, 2000, 2000, 2000}},
    {"max is truncated to ms; sub-ms delay too",
     1500,
     {{15999999, END}, {16000999, END}, {END}, {END}},
     {15998, 15999, 15999, 15999}},
    {"Spark 'deduplicate with watermark'",
     10 * SEC,
     {{10 * SEC, 10 * SEC, 15 * SEC, 11 * SEC, END},
      {25 * SEC, END},
      {10 * SEC, END},
      {45 * SEC, END}},
     {5000, 15000, 15000, 35000}},
};

static void test_sequences(void)
{
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		struct sl_watermark w;
		sl_watermark_init(&w, seqs[i].delay_us, 0);
		CHECK(w.wm_ms == 0);
		for (size_t k = 0; k < 4; k++) {
			struct sl_watermark_stats s;
			int64_t before = w.wm_ms;
			sl_watermark_stats_init(&s);
			for (size_t r = 0; seqs[i].batches[k][r] != END; r++)
				if (seqs[i].batches[k][r] != NUL)
					sl_watermark_stats_add(&s, seqs[i].batches[k][r]);
			bool moved = sl_watermark_advance(&w, &s);
			if (w.wm_ms != seqs[i].wm_after[k])
				fprintf(stderr, "case '%s' batch %zu: watermark %lld\n",
					seqs[i].what, k, (long long)w.wm_ms);
			CHECK(w.wm_ms == seqs[i].wm_after[k]);
			CHECK(moved == (w.wm_ms != before) && w.wm_ms >= before);
		}
	}
}

static void test_late_final_expired(void)
{
	struct sl_watermark w;

	/* Spark 'append mode': after 25 the watermark is 15 s */
	CHECK(sl_watermark_window_final(15000, 15 * SEC));  /* [10,15) is emitted */
	CHECK(!sl_watermark_window_final(15000, 20 * SEC)); /* [15,20) waits */
	CHECK(sl_watermark_is_late(15000, 10 * SEC));	    /* then 10 is dropped */
	CHECK(sl_watermark_is_late(15000, 15 * SEC));	    /* ts == watermark is late */
	CHECK(!sl_watermark_is_late(15000, 15 * SEC + 1));
	/* 'writing with aggregation': 5 s windows, 5 s delay; 123 -> wm 118 s */
	CHECK(sl_watermark_window_final(118000, 105 * SEC));
	CHECK(!sl_watermark_window_final(118000, 125 * SEC));
	/* the first batch's watermark 0 finalises windows ending by the epoch */
	CHECK(sl_watermark_window_final(0, 0) && !sl_watermark_window_final(0, 1));
	CHECK(sl_watermark_is_late(0, -1) && !sl_watermark_is_late(0, 1));
	/* saturation instead of overflow */
	CHECK(sl_watermark_us(INT64_MAX / 10) == INT64_MAX);
	CHECK(sl_watermark_us(INT64_MIN / 10) == INT64_MIN);
	CHECK(sl_watermark_is_late(INT64_MAX, INT64_MAX));
	/* dropDuplicatesWithinWatermark: expires at ts + delay, evicted once wm >= it */
	sl_watermark_init(&w, 5 * SEC, 0);
	CHECK(sl_watermark_expires_at(&w, 17 * SEC) == 22 * SEC);
	CHECK(!sl_watermark_expired(21999, 22 * SEC) && sl_watermark_expired(22000, 22 * SEC));
	CHECK(sl_watermark_expires_at(&w, INT64_MAX - 1) == INT64_MAX);
	/* restart: the watermark comes back from the commit log */
	sl_watermark_init(&w, 10 * SEC, 185000);
	struct sl_watermark_stats s;
	sl_watermark_stats_init(&s);
	sl_watermark_stats_add(&s, 190 * SEC);
	CHECK(!sl_watermark_advance(&w, &s) && w.wm_ms == 185000);
	sl_watermark_stats_add(&s, 200 * SEC);
	CHECK(sl_watermark_advance(&w, &s) && w.wm_ms == 190000);
}

static void test_stats(void)
{
	struct sl_column cols[] = {{.name = (char *)"ts", .type = SL_TYPE_TIMESTAMP}};
	struct sl_schema schema = {.cols = cols, .n = 1};
	struct sl_watermark_stats s;
	struct sl_batch b;
	char buf[SL_TIMESTAMP_BUFSZ];
	size_t row;

	sl_watermark_stats_init(&s);
	CHECK(s.count == 0);
	CHECK_OK(sl_batch_init(&b, &schema));
	int64_t in[] = {1000 * SEC + 999, NUL, 1001 * SEC, 1002 * SEC + 1500};
	for (size_t i = 0; i < 4; i++) {
		CHECK_OK(sl_batch_add_row(&b, &row));
		if (in[i] != NUL)
			sl_batch_set_int(&b, row, 0, in[i]);
	}
	sl_watermark_stats_add_column(&s, &b, 0);
	CHECK(s.count == 3 && s.min_ms == 1000000 && s.max_ms == 1002001);
	/* (1000000 + 1001000 + 1002001) / 3 = 1001000.33 -> 1001000 */
	CHECK(sl_watermark_stats_avg_ms(&s) == 1001000);
	sl_timestamp_format(sl_watermark_stats_avg_ms(&s) * 1000, buf);
	CHECK(!strcmp(buf, "1970-01-01T00:16:41.000Z"));
	sl_timestamp_format(0, buf); /* the first batch's reported watermark */
	CHECK(!strcmp(buf, "1970-01-01T00:00:00.000Z"));

	/* negative times truncate toward zero, as Java's long division and toLong */
	sl_watermark_stats_init(&s);
	sl_watermark_stats_add(&s, -1500);
	sl_watermark_stats_add(&s, -2);
	CHECK(s.min_ms == -1 && s.max_ms == 0);
	CHECK(sl_watermark_stats_avg_ms(&s) == 0); /* -0.5 -> 0 */
	sl_watermark_stats_add(&s, -4000);
	CHECK(sl_watermark_stats_avg_ms(&s) == -1); /* -5/3 -> -1 */

	/* Spark's running mean, step by step */
	sl_watermark_stats_init(&s);
	double avg = 0;
	for (int64_t i = 1; i <= 1000; i++) {
		int64_t ms = 1700000000000 + i * 7919 % 1000;
		sl_watermark_stats_add(&s, ms * 1000);
		avg += ((double)ms - avg) / (double)i;
	}
	CHECK(s.avg_ms == avg);
	sl_batch_release(&b);
}

int main(void)
{
	test(test_sequences);
	test(test_late_final_expired);
	test(test_stats);
	return test_exit();
}
