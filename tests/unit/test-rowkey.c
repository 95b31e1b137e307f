/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/rowkey.c: memcmp order of encodings equals the values'
 * order, decode(encode(x)) == x, prefix-freedom, corrupt keys refused.
 */
#include <math.h>
#include <stdint.h>

#include "batch.h"
#include "check.h"
#include "rowkey.h"

static struct sl_column cols[] = {
    {.name = (char *)"s", .type = SL_TYPE_STRING},
    {.name = (char *)"l", .type = SL_TYPE_BIGINT},
    {.name = (char *)"i", .type = SL_TYPE_INT},
    {.name = (char *)"d", .type = SL_TYPE_DOUBLE},
    {.name = (char *)"b", .type = SL_TYPE_BOOLEAN},
    {.name = (char *)"t", .type = SL_TYPE_TIMESTAMP},
    {.name = (char *)"dt", .type = SL_TYPE_DATE},
    {.name = (char *)"w", .type = SL_TYPE_WINDOW},
};
#define NCOLS (sizeof(cols) / sizeof(cols[0]))
static struct sl_schema schema = {.cols = cols, .n = NCOLS};

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static const int64_t edge_ints[] = {INT64_MIN, INT64_MIN + 1, -256, -1, 0, 1, 255, 256, INT64_MAX};
static const double edge_doubles[] = {-INFINITY, -1e308, -1.5,	-0.0,	  0.0,
				      4.9e-324,	 1.5,	 1e308, INFINITY, NAN};

/* Fills row of b with random values from small domains, so that ties happen. */
static int fill_row(struct sl_batch *b, size_t row)
{
	for (size_t c = 0; c < NCOLS; c++) {
		uint64_t r = rnd();
		if (r % 7 == 0) {
			sl_batch_set_null(b, row, c);
			continue;
		}
		r >>= 3;
		switch (cols[c].type) {
		case SL_TYPE_STRING: {
			char s[4];
			size_t n = r % 4;
			for (size_t k = 0; k < n; k++)
				s[k] = "\0\1a\377"[(r >> (2 + 2 * k)) % 4];
			int rc = sl_batch_set_str(b, row, c, s, n);
			if (rc)
				return rc;
			break;
		}
		case SL_TYPE_DOUBLE: {
			double d = r % 2 ? edge_doubles[(r >> 1) % 10]
					 : (double)((int64_t)(r >> 1) % 5) / 2;
			if (r % 13 == 0)
				d = -NAN; /* a NaN with the sign bit set */
			sl_batch_set_double(b, row, c, d);
			break;
		}
		case SL_TYPE_BOOLEAN:
			sl_batch_set_int(b, row, c, r % 2);
			break;
		case SL_TYPE_WINDOW: {
			int64_t s = (int64_t)((r >> 1) % 5) - 2;
			sl_batch_set_window(b, row, c, s * 10, s * 10 + 5 + (int64_t)(r % 2) * 5);
			break;
		}
		case SL_TYPE_INT:
		case SL_TYPE_DATE:
			sl_batch_set_int(b, row, c,
					 r % 2 ? (int32_t)(r >> 1) : (int64_t)((r >> 1) % 5) - 2);
			break;
		default:
			sl_batch_set_int(b, row, c,
					 r % 2 ? edge_ints[(r >> 1) % 9]
					       : (int64_t)((r >> 1) % 5) - 2);
			break;
		}
	}
	return 0;
}

static int sign(long v) { return (v > 0) - (v < 0); }

static int cmp_double(double x, double y)
{
	if (isnan(x) || isnan(y))
		return isnan(x) - isnan(y);
	return (x > y) - (x < y); /* -0.0 == 0.0 */
}

/* The value order: nulls first, then by type. */
static int cmp_cell(const struct sl_batch *a, size_t ra, const struct sl_batch *b, size_t rb,
		    size_t c)
{
	bool na = sl_batch_is_null(a, ra, c), nb = sl_batch_is_null(b, rb, c);
	const union sl_cell *x = &a->cols[c].cells[ra], *y = &b->cols[c].cells[rb];

	if (na || nb)
		return nb - na;
	switch (cols[c].type) {
	case SL_TYPE_STRING: {
		size_t lx, ly;
		const char *sx = sl_batch_str(a, ra, c, &lx), *sy = sl_batch_str(b, rb, c, &ly);
		int m = memcmp(sx, sy, lx < ly ? lx : ly);
		return m ? sign(m) : (lx > ly) - (lx < ly);
	}
	case SL_TYPE_DOUBLE:
		return cmp_double(x->d, y->d);
	case SL_TYPE_WINDOW:
		if (x->w.start != y->w.start)
			return x->w.start < y->w.start ? -1 : 1;
		return (x->w.end > y->w.end) - (x->w.end < y->w.end);
	default:
		return (x->i > y->i) - (x->i < y->i);
	}
}

static int cmp_key(const struct sl_keybuf *x, const struct sl_keybuf *y)
{
	int m = memcmp(x->data, y->data, x->len < y->len ? x->len : y->len);
	return m ? sign(m) : (x->len > y->len) - (x->len < y->len);
}

#define NROWS 600

static void test_order_and_roundtrip(void)
{
	static struct sl_keybuf keys[NROWS];
	struct sl_batch b, back;
	size_t all[NCOLS], row;
	enum sl_type types[NCOLS];

	for (size_t c = 0; c < NCOLS; c++)
		all[c] = c, types[c] = cols[c].type;
	CHECK_OK(sl_batch_init(&b, &schema));
	CHECK_OK(sl_batch_init(&back, &schema));
	for (size_t r = 0; r < NROWS; r++) {
		CHECK_OK(sl_batch_add_row(&b, &row));
		CHECK_OK(fill_row(&b, row));
		sl_keybuf_init(&keys[r]);
		CHECK_OK(sl_rowkey_encode(&b, row, all, NCOLS, &keys[r]));
	}
	/* order: every pair, as tuples compared column by column, and single columns */
	for (size_t x = 0; x < NROWS; x++) {
		for (size_t y = 0; y < NROWS; y++) {
			int want = 0;
			for (size_t c = 0; c < NCOLS && !want; c++)
				want = cmp_cell(&b, x, &b, y, c);
			CHECK(cmp_key(&keys[x], &keys[y]) == want);
		}
	}
	for (size_t c = 0; c < NCOLS; c++) {
		struct sl_keybuf kx = {0}, ky = {0};
		for (size_t x = 0; x < 200; x++) {
			for (size_t y = 0; y < 200; y++) {
				sl_keybuf_clear(&kx);
				sl_keybuf_clear(&ky);
				CHECK_OK(sl_rowkey_encode(&b, x, &c, 1, &kx));
				CHECK_OK(sl_rowkey_encode(&b, y, &c, 1, &ky));
				CHECK(cmp_key(&kx, &ky) == cmp_cell(&b, x, &b, y, c));
			}
		}
		sl_keybuf_release(&kx);
		sl_keybuf_release(&ky);
	}
	/* decode(encode(x)) == x, as values; decoded again, the same bytes */
	for (size_t r = 0; r < NROWS; r++) {
		struct sl_keybuf again = {0};
		CHECK_OK(sl_batch_add_row(&back, &row));
		CHECK_OK(
		    sl_rowkey_decode(keys[r].data, keys[r].len, types, NCOLS, &back, row, all));
		for (size_t c = 0; c < NCOLS; c++) {
			CHECK(cmp_cell(&b, r, &back, row, c) == 0);
			CHECK(sl_batch_is_null(&b, r, c) == sl_batch_is_null(&back, row, c));
		}
		CHECK_OK(sl_rowkey_encode(&back, row, all, NCOLS, &again));
		CHECK(cmp_key(&again, &keys[r]) == 0);
		sl_keybuf_release(&again);
	}
	/* -0.0 decodes as 0.0 (normalised, as Spark's grouping keys) */
	for (size_t r = 0; r < NROWS; r++)
		if (!sl_batch_is_null(&b, r, 3) && b.cols[3].cells[r].d == 0)
			CHECK(!signbit(back.cols[3].cells[r].d));
	for (size_t r = 0; r < NROWS; r++)
		sl_keybuf_release(&keys[r]);
	sl_batch_release(&b);
	sl_batch_release(&back);
}

/* Decoding into other columns, in another order, and partial column lists. */
static void test_dest_cols_and_window_prefix(void)
{
	struct sl_column ocols[] = {{.name = (char *)"window", .type = SL_TYPE_WINDOW},
				    {.name = (char *)"dev", .type = SL_TYPE_STRING},
				    {.name = (char *)"n", .type = SL_TYPE_BIGINT}};
	struct sl_schema os = {.cols = ocols, .n = 3};
	struct sl_batch src, out;
	struct sl_keybuf k;
	size_t row, src_cols[] = {1, 0}, dest[] = {0, 2, 1};
	enum sl_type types[] = {SL_TYPE_WINDOW, SL_TYPE_BIGINT, SL_TYPE_STRING};
	int64_t s, e;
	size_t len;

	sl_keybuf_init(&k);
	CHECK_OK(sl_batch_init(&src, &schema));
	CHECK_OK(sl_batch_init(&out, &os));
	CHECK_OK(sl_batch_add_row(&src, &row));
	CHECK_OK(sl_batch_set_str(&src, row, 0, "d\0\0x", 4));
	sl_batch_set_int(&src, row, 1, -42);
	CHECK_OK(sl_rowkey_encode_window(&k, -600000000, 0));
	CHECK_OK(sl_rowkey_encode(&src, row, src_cols, 2, &k));
	CHECK_OK(sl_rowkey_decode_window(k.data, k.len, &s, &e));
	CHECK(s == -600000000 && e == 0);
	CHECK_OK(sl_batch_add_row(&out, &row));
	CHECK_OK(sl_rowkey_decode(k.data, k.len, types, 3, &out, row, dest));
	CHECK(out.cols[0].cells[0].w.start == -600000000 && out.cols[0].cells[0].w.end == 0);
	CHECK(out.cols[2].cells[0].i == -42);
	const char *str = sl_batch_str(&out, 0, 1, &len);
	CHECK(len == 4 && !memcmp(str, "d\0\0x", 4));

	/* window keys sort by start, then end */
	struct sl_keybuf a = {0}, b = {0};
	CHECK_OK(sl_rowkey_encode_window(&a, -10, 0));
	CHECK_OK(sl_rowkey_encode_window(&b, 0, 10));
	CHECK(cmp_key(&a, &b) < 0);
	sl_keybuf_clear(&a);
	CHECK_OK(sl_rowkey_encode_window(&a, 0, 5));
	CHECK(cmp_key(&a, &b) < 0);
	sl_keybuf_release(&a);
	sl_keybuf_release(&b);
	sl_keybuf_release(&k);
	sl_batch_release(&src);
	sl_batch_release(&out);
}

static const struct {
	const char *what;
	const char *bytes;
	size_t len;
	enum sl_type type;
} bad[] = {
    {"empty", "", 0, SL_TYPE_BIGINT},
    {"bad tag", "\x02", 1, SL_TYPE_BIGINT},
    {"short bigint", "\x01\x80\0\0\0\0\0\0", 8, SL_TYPE_BIGINT},
    {"trailing byte", "\x01\x80\0\0\0\0\0\0\0\0", 10, SL_TYPE_BIGINT},
    {"trailing after null", "\x00\x00", 2, SL_TYPE_STRING},
    {"unterminated string",
     "\x01"
     "abc",
     4, SL_TYPE_STRING},
    {"string ending in 00",
     "\x01"
     "abc\0",
     5, SL_TYPE_STRING},
    {"bad string escape",
     "\x01"
     "a\0\x02\0\x01",
     6, SL_TYPE_STRING},
    {"boolean 2", "\x01\x02", 2, SL_TYPE_BOOLEAN},
    {"short window", "\x01\x80\0\0\0\0\0\0\0\x80\0\0\0\0\0\0", 16, SL_TYPE_WINDOW},
};

static void test_corrupt_keys(void)
{
	struct sl_batch b;
	size_t row, col;
	int64_t s, e;

	CHECK_OK(sl_batch_init(&b, &schema));
	CHECK_OK(sl_batch_add_row(&b, &row));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		col = bad[i].type == SL_TYPE_STRING    ? 0
		      : bad[i].type == SL_TYPE_BOOLEAN ? 4
		      : bad[i].type == SL_TYPE_WINDOW  ? 7
						       : 1;
		sl_batch_set_int(&b, row, 1, 7);
		int rc = sl_rowkey_decode(bad[i].bytes, bad[i].len, &bad[i].type, 1, &b, row, &col);
		if (rc != SL_ECORRUPT)
			fprintf(stderr, "case '%s': %s\n", bad[i].what, sl_strerror(rc));
		CHECK(rc == SL_ECORRUPT);
		CHECK(!sl_batch_is_null(&b, row, 1) && b.cols[1].cells[row].i == 7); /* untouched */
	}
	CHECK(sl_rowkey_decode_window("\x00", 1, &s, &e) == SL_ECORRUPT);
	/* the string escapes decode: "a\0" */
	CHECK_OK(sl_rowkey_decode("\x01"
				  "a\0\xff\0\x01",
				  6, (enum sl_type[]){SL_TYPE_STRING}, 1, &b, row, (size_t[]){0}));
	CHECK(b.cols[0].cells[row].s.len == 2);
	/* zero values in zero bytes */
	CHECK_OK(sl_rowkey_decode("", 0, NULL, 0, &b, row, NULL));
	sl_batch_release(&b);
}

int main(void)
{
	test(test_order_and_roundtrip);
	test(test_dest_cols_and_window_prefix);
	test(test_corrupt_keys);
	return test_exit();
}
