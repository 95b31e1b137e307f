/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/agg.c: each function over a table of inputs (nulls,
 * no rows, NaN, overflow), update versus merge of split inputs, state sizes.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "agg.h"
#include "batch.h"
#include "check.h"

static struct sl_column cols[] = {
    {.name = (char *)"l", .type = SL_TYPE_BIGINT},
    {.name = (char *)"i", .type = SL_TYPE_INT},
    {.name = (char *)"d", .type = SL_TYPE_DOUBLE},
    {.name = (char *)"b", .type = SL_TYPE_BOOLEAN},
    {.name = (char *)"t", .type = SL_TYPE_TIMESTAMP},
};
static struct sl_schema schema = {.cols = cols, .n = 5};

#define N 0x7FF0DEAD /* marks a null input or a null result */
#define NONE INT64_MIN
#define BIG INT64_MAX

/* Integer inputs (N = null) for columns l, i, b, t; doubles separately. */
static const struct {
	const char *what;
	enum sl_agg_fn fn;
	size_t col;
	enum sl_type type; /* the result type, as config sets it */
	int64_t in[6];	   /* up to 6 rows; NONE ends the list */
	int rc;		   /* of the last update and of result */
	bool null;	   /* the result is null */
	int64_t want;
} icases[] = {
    {"count(*) of nothing", SL_AGG_COUNT_STAR, 0, SL_TYPE_BIGINT, {NONE}, 0, false, 0},
    {"count(*) counts nulls", SL_AGG_COUNT_STAR, 0, SL_TYPE_BIGINT, {1, N, N, NONE}, 0, false, 3},
    {"count(l) skips nulls", SL_AGG_COUNT, 0, SL_TYPE_BIGINT, {1, N, 2, NONE}, 0, false, 2},
    {"count(l) of nulls is 0", SL_AGG_COUNT, 0, SL_TYPE_BIGINT, {N, N, NONE}, 0, false, 0},
    {"sum(l)", SL_AGG_SUM, 0, SL_TYPE_BIGINT, {5, N, -7, 100, NONE}, 0, false, 98},
    {"sum(l) of nothing is null", SL_AGG_SUM, 0, SL_TYPE_BIGINT, {NONE}, 0, true, 0},
    {"sum(l) of nulls is null", SL_AGG_SUM, 0, SL_TYPE_BIGINT, {N, N, NONE}, 0, true, 0},
    {"sum(l) reaching INT64_MAX", SL_AGG_SUM, 0, SL_TYPE_BIGINT, {BIG - 1, 1, NONE}, 0, false, BIG},
    {"sum(l) overflows", SL_AGG_SUM, 0, SL_TYPE_BIGINT, {BIG, 1, NONE}, ERANGE, true, 0},
    {"sum(l) overflow is sticky",
     SL_AGG_SUM,
     0,
     SL_TYPE_BIGINT,
     {BIG, 1, -5, NONE},
     ERANGE,
     true,
     0},
    {"sum(l) underflows",
     SL_AGG_SUM,
     0,
     SL_TYPE_BIGINT,
     {INT64_MIN + 1, -2, NONE},
     ERANGE,
     true,
     0},
    {"sum(i) is BIGINT",
     SL_AGG_SUM,
     1,
     SL_TYPE_BIGINT,
     {INT32_MAX, INT32_MAX, NONE},
     0,
     false,
     2 * (int64_t)INT32_MAX},
    {"min(l)", SL_AGG_MIN, 0, SL_TYPE_BIGINT, {3, N, -9, 4, NONE}, 0, false, -9},
    {"max(l)", SL_AGG_MAX, 0, SL_TYPE_BIGINT, {3, N, -9, 4, NONE}, 0, false, 4},
    {"max(l) of nulls is null", SL_AGG_MAX, 0, SL_TYPE_BIGINT, {N, NONE}, 0, true, 0},
    {"min(l) extremes",
     SL_AGG_MIN,
     0,
     SL_TYPE_BIGINT,
     {BIG, INT64_MIN + 1, NONE},
     0,
     false,
     INT64_MIN + 1},
    {"min(i)", SL_AGG_MIN, 1, SL_TYPE_INT, {7, -3, NONE}, 0, false, -3},
    {"min(b)", SL_AGG_MIN, 3, SL_TYPE_BOOLEAN, {1, N, 0, 1, NONE}, 0, false, 0},
    {"max(b)", SL_AGG_MAX, 3, SL_TYPE_BOOLEAN, {0, N, 1, 0, NONE}, 0, false, 1},
    {"max(t)", SL_AGG_MAX, 4, SL_TYPE_TIMESTAMP, {-5000000, 12000000, N, NONE}, 0, false, 12000000},
};

static const struct {
	const char *what;
	enum sl_agg_fn fn;
	size_t col;
	enum sl_type type;
	double in[6]; /* N = null, NONE-like end: sentinel 1e300 */
	bool null;
	double want; /* NAN: the result is NaN */
} dcases[] = {
#define END 1e300
    {"sum(d)", SL_AGG_SUM, 2, SL_TYPE_DOUBLE, {1.5, N, 2.25, END}, false, 3.75},
    {"sum(d) of nulls is null", SL_AGG_SUM, 2, SL_TYPE_DOUBLE, {N, END}, true, 0},
    {"sum(d) with NaN", SL_AGG_SUM, 2, SL_TYPE_DOUBLE, {1, NAN, END}, false, NAN},
    {"sum(d) of infinities", SL_AGG_SUM, 2, SL_TYPE_DOUBLE, {INFINITY, -INFINITY, END}, false, NAN},
    {"avg(d)", SL_AGG_AVG, 2, SL_TYPE_DOUBLE, {1, N, 2, END}, false, 1.5},
    {"avg(d) of nothing is null", SL_AGG_AVG, 2, SL_TYPE_DOUBLE, {END}, true, 0},
    {"avg(d) of nulls is null", SL_AGG_AVG, 2, SL_TYPE_DOUBLE, {N, N, END}, true, 0},
    {"min(d): NaN is above numbers",
     SL_AGG_MIN,
     2,
     SL_TYPE_DOUBLE,
     {NAN, 3, -INFINITY, END},
     false,
     -INFINITY},
    {"max(d): NaN is above numbers",
     SL_AGG_MAX,
     2,
     SL_TYPE_DOUBLE,
     {1, NAN, INFINITY, END},
     false,
     NAN},
    {"min(d) of NaNs", SL_AGG_MIN, 2, SL_TYPE_DOUBLE, {NAN, N, NAN, END}, false, NAN},
    {"max(d) of nulls is null", SL_AGG_MAX, 2, SL_TYPE_DOUBLE, {N, END}, true, 0},
    {"avg(l) is DOUBLE", SL_AGG_AVG, 0, SL_TYPE_DOUBLE, {1, 2, N, 2, END}, false, 5.0 / 3},
    {"avg(l) past int64 (a double sum)",
     SL_AGG_AVG,
     0,
     SL_TYPE_DOUBLE,
     {9.2e18, 9.2e18, END},
     false,
     9.2e18},
    {"avg(i)", SL_AGG_AVG, 1, SL_TYPE_DOUBLE, {-3, 4, END}, false, 0.5},
};

static void set_input(struct sl_batch *b, size_t row, size_t col, double dv, int64_t iv, bool isd)
{
	if (isd ? dv == N : iv == N)
		sl_batch_set_null(b, row, col);
	else if (cols[col].type == SL_TYPE_DOUBLE)
		sl_batch_set_double(b, row, col, dv);
	else
		sl_batch_set_int(b, row, col, isd ? (int64_t)dv : iv);
}

static void test_integer_cases(void)
{
	struct sl_column rc_col = {.name = (char *)"r", .type = SL_TYPE_BIGINT};
	struct sl_schema rs = {.cols = &rc_col, .n = 1};
	struct sl_batch in, out;
	unsigned char state[SL_AGG_STATE_MAX + 1];
	size_t row;

	CHECK_OK(sl_batch_init(&in, &schema));
	CHECK_OK(sl_batch_init(&out, &rs));
	for (size_t i = 0; i < sizeof(icases) / sizeof(icases[0]); i++) {
		struct sl_aggregate a = {
		    .fn = icases[i].fn, .col = icases[i].col, .type = icases[i].type};
		int rc = 0;
		sl_batch_clear(&in);
		sl_batch_clear(&out);
		CHECK(sl_agg_supported(&a) && sl_agg_state_size(&a) <= SL_AGG_STATE_MAX);
		/* an unaligned state */
		sl_agg_init(&a, state + 1);
		for (size_t r = 0; icases[i].in[r] != NONE; r++) {
			CHECK_OK(sl_batch_add_row(&in, &row));
			set_input(&in, row, icases[i].col, 0, icases[i].in[r], false);
			rc = sl_agg_update(&a, state + 1, &in, row);
		}
		CHECK_OK(sl_batch_add_row(&out, &row));
		rc_col.type = icases[i].type;
		out.cols[0].type = icases[i].type;
		int rrc = sl_agg_result(&a, state + 1, &out, row, 0);
		if (rc != icases[i].rc || rrc != icases[i].rc ||
		    sl_batch_is_null(&out, row, 0) != icases[i].null ||
		    (!icases[i].null && out.cols[0].cells[row].i != icases[i].want))
			fprintf(stderr, "case '%s' failed\n", icases[i].what);
		CHECK(rc == icases[i].rc && rrc == icases[i].rc);
		CHECK(sl_batch_is_null(&out, row, 0) == icases[i].null);
		CHECK(icases[i].null || out.cols[0].cells[row].i == icases[i].want);
	}
	sl_batch_release(&in);
	sl_batch_release(&out);
}

static void test_double_cases(void)
{
	struct sl_column rc_col = {.name = (char *)"r", .type = SL_TYPE_DOUBLE};
	struct sl_schema rs = {.cols = &rc_col, .n = 1};
	struct sl_batch in, out;
	unsigned char state[SL_AGG_STATE_MAX];
	size_t row;

	CHECK_OK(sl_batch_init(&in, &schema));
	CHECK_OK(sl_batch_init(&out, &rs));
	for (size_t i = 0; i < sizeof(dcases) / sizeof(dcases[0]); i++) {
		struct sl_aggregate a = {
		    .fn = dcases[i].fn, .col = dcases[i].col, .type = dcases[i].type};
		sl_batch_clear(&in);
		sl_batch_clear(&out);
		sl_agg_init(&a, state);
		for (size_t r = 0; dcases[i].in[r] != END; r++) {
			CHECK_OK(sl_batch_add_row(&in, &row));
			set_input(&in, row, dcases[i].col, dcases[i].in[r], 0, true);
			CHECK_OK(sl_agg_update(&a, state, &in, row));
		}
		CHECK_OK(sl_batch_add_row(&out, &row));
		CHECK_OK(sl_agg_result(&a, state, &out, row, 0));
		double got = out.cols[0].cells[row].d, want = dcases[i].want;
		bool ok =
		    sl_batch_is_null(&out, row, 0) == dcases[i].null &&
		    (dcases[i].null ||
		     (isnan(want) ? isnan(got)
				  : got == want || fabs(got - want) < 1e-9 * fabs(want) + 1e-12));
		if (!ok)
			fprintf(stderr, "case '%s' failed: got %g\n", dcases[i].what, got);
		CHECK(ok);
	}
	sl_batch_release(&in);
	sl_batch_release(&out);
}

/*
 * Property: splitting the rows into two states and merging gives the
 * result of one state over all rows, for every function and column.
 */
static void test_merge_equals_update(void)
{
	static const struct {
		enum sl_agg_fn fn;
		size_t col;
		enum sl_type type;
	} aggs[] = {
	    {SL_AGG_COUNT_STAR, 0, SL_TYPE_BIGINT}, {SL_AGG_COUNT, 2, SL_TYPE_BIGINT},
	    {SL_AGG_SUM, 0, SL_TYPE_BIGINT},	    {SL_AGG_SUM, 1, SL_TYPE_BIGINT},
	    {SL_AGG_SUM, 2, SL_TYPE_DOUBLE},	    {SL_AGG_MIN, 0, SL_TYPE_BIGINT},
	    {SL_AGG_MAX, 2, SL_TYPE_DOUBLE},	    {SL_AGG_MIN, 2, SL_TYPE_DOUBLE},
	    {SL_AGG_MAX, 3, SL_TYPE_BOOLEAN},	    {SL_AGG_MIN, 4, SL_TYPE_TIMESTAMP},
	    {SL_AGG_AVG, 0, SL_TYPE_DOUBLE},	    {SL_AGG_AVG, 2, SL_TYPE_DOUBLE},
	};
	struct sl_column rc_col = {.name = (char *)"r"};
	struct sl_schema rs = {.cols = &rc_col, .n = 1};
	struct sl_batch in, out;
	uint64_t x = 1234567;
	size_t row;

	CHECK_OK(sl_batch_init(&in, &schema));
	CHECK_OK(sl_batch_init(&out, &rs));
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)(round % 9), split;
		sl_batch_clear(&in);
		for (size_t r = 0; r < n; r++) {
			CHECK_OK(sl_batch_add_row(&in, &row));
			for (size_t c = 0; c < 5; c++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				if (x % 4 == 0)
					continue; /* null */
				if (c == 2)
					sl_batch_set_double(&in, row, c,
							    (double)(int64_t)(x % 200) / 4 - 25);
				else
					sl_batch_set_int(&in, row, c,
							 c == 3 ? (int64_t)(x % 2)
								: (int64_t)(x % 1000) - 500);
			}
		}
		split = n ? (size_t)(x % (n + 1)) : 0;
		for (size_t k = 0; k < sizeof(aggs) / sizeof(aggs[0]); k++) {
			struct sl_aggregate a = {
			    .fn = aggs[k].fn, .col = aggs[k].col, .type = aggs[k].type};
			unsigned char whole[SL_AGG_STATE_MAX], left[SL_AGG_STATE_MAX],
			    right[SL_AGG_STATE_MAX];
			sl_agg_init(&a, whole);
			sl_agg_init(&a, left);
			sl_agg_init(&a, right);
			for (size_t r = 0; r < n; r++) {
				CHECK_OK(sl_agg_update(&a, whole, &in, r));
				CHECK_OK(sl_agg_update(&a, r < split ? left : right, &in, r));
			}
			CHECK_OK(sl_agg_merge(&a, left, right));
			sl_batch_clear(&out);
			out.cols[0].type = a.type;
			CHECK_OK(sl_batch_add_row(&out, &row));
			CHECK_OK(sl_batch_add_row(&out, &row));
			CHECK_OK(sl_agg_result(&a, whole, &out, 0, 0));
			CHECK_OK(sl_agg_result(&a, left, &out, 1, 0));
			CHECK(sl_batch_is_null(&out, 0, 0) == sl_batch_is_null(&out, 1, 0));
			if (sl_batch_is_null(&out, 0, 0))
				continue;
			if (a.type == SL_TYPE_DOUBLE)
				CHECK(fabs(out.cols[0].cells[0].d - out.cols[0].cells[1].d) < 1e-9);
			else
				CHECK(out.cols[0].cells[0].i == out.cols[0].cells[1].i);
		}
	}
	sl_batch_release(&in);
	sl_batch_release(&out);
}

static void test_sizes_and_merge_overflow(void)
{
	struct sl_aggregate cnt = {.fn = SL_AGG_COUNT_STAR, .type = SL_TYPE_BIGINT};
	struct sl_aggregate sum = {.fn = SL_AGG_SUM, .col = 0, .type = SL_TYPE_BIGINT};
	struct sl_aggregate smin = {.fn = SL_AGG_MIN, .col = 0, .type = SL_TYPE_STRING};
	struct sl_batch in;
	unsigned char a[16], b[16], empty[16];
	size_t row;

	CHECK(sl_agg_state_size(&cnt) == 8 && sl_agg_state_size(&sum) == 16);
	CHECK(!sl_agg_supported(&smin) && sl_agg_state_size(&smin) == 0);
	CHECK_OK(sl_batch_init(&in, &schema));
	CHECK_OK(sl_batch_add_row(&in, &row));
	sl_batch_set_int(&in, row, 0, INT64_MAX);
	sl_agg_init(&sum, a);
	sl_agg_init(&sum, b);
	sl_agg_init(&sum, empty);
	CHECK_OK(sl_agg_update(&sum, a, &in, row));
	CHECK_OK(sl_agg_update(&sum, b, &in, row));
	CHECK_OK(sl_agg_merge(&sum, a, empty)); /* merging nothing changes nothing */
	CHECK(sl_agg_merge(&sum, a, b) == ERANGE);
	CHECK(sl_agg_merge(&sum, empty, a) == ERANGE); /* an overflowed state stays one */
	sl_batch_release(&in);
}

int main(void)
{
	test(test_integer_cases);
	test(test_double_cases);
	test(test_merge_equals_update);
	test(test_sizes_and_merge_overflow);
	return test_exit();
}
