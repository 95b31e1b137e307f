/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/batch.c: rows start null, strings survive growth, clear
 * reuses; projected-out columns read null through growth, append, keep, trim;
 * a side filled by another thread at once joins with its strings.
 */
#include <errno.h>
#include <pthread.h>

#include "batch.h"
#include "check.h"

static void test_rows_strings_and_reuse(void)
{
	struct sl_column cols[3] = {{.name = (char *)"s", .type = SL_TYPE_STRING},
				    {.name = (char *)"n", .type = SL_TYPE_BIGINT},
				    {.name = (char *)"w", .type = SL_TYPE_WINDOW}};
	struct sl_schema schema = {.cols = cols, .n = 3};
	struct sl_batch b;
	char text[32];
	size_t row, len;

	CHECK_OK(sl_batch_init(&b, &schema));
	for (int i = 0; i < 5000; i++) {
		CHECK_OK(sl_batch_add_row(&b, &row));
		CHECK(row == (size_t)i);
		CHECK(sl_batch_is_null(&b, row, 0) && sl_batch_is_null(&b, row, 1));
		int n = snprintf(text, sizeof(text), "value-%d", i);
		CHECK_OK(sl_batch_set_str(&b, row, 0, text, (size_t)n));
		if (i % 2)
			sl_batch_set_int(&b, row, 1, i);
		sl_batch_set_window(&b, row, 2, i, i + 10);
	}
	/* strings written before the arena grew still read back */
	const char *s = sl_batch_str(&b, 7, 0, &len);
	CHECK(len == 7 && !memcmp(s, "value-7", 7));
	CHECK(sl_batch_is_null(&b, 8, 1) && !sl_batch_is_null(&b, 9, 1));
	CHECK(b.cols[1].cells[9].i == 9 && b.cols[2].cells[9].w.end == 19);
	sl_batch_drop_last(&b);
	CHECK(b.nrows == 4999);
	size_t cap = b.cap;
	sl_batch_clear(&b);
	CHECK(b.nrows == 0 && b.cap == cap && b.arena_len == 0);
	CHECK_OK(sl_batch_add_row(&b, &row));
	CHECK(row == 0 && sl_batch_is_null(&b, 0, 0));
	sl_batch_release(&b);
}

static void test_projected_columns(void)
{
	struct sl_column cols[4] = {{.name = (char *)"a", .type = SL_TYPE_STRING},
				    {.name = (char *)"b", .type = SL_TYPE_STRING},
				    {.name = (char *)"n", .type = SL_TYPE_BIGINT},
				    {.name = (char *)"m", .type = SL_TYPE_BIGINT}};
	struct sl_schema schema = {.cols = cols, .n = 4};
	const uint8_t used[4] = {1, 0, 1, 0};
	struct sl_batch b, h;
	size_t row, len;
	uint8_t keep[3000];

	CHECK_OK(sl_batch_init(&b, &schema));
	CHECK_OK(sl_batch_init(&h, &schema));
	sl_batch_project(&b, used);
	sl_batch_project(&h, used);
	for (int i = 0; i < 3000; i++) {
		struct sl_batch *t = i < 2000 ? &b : &h;
		CHECK_OK(sl_batch_add_row(t, &row));
		CHECK_OK(sl_batch_set_str(t, row, 0, "xy", 1 + (size_t)(i % 2)));
		sl_batch_set_int(t, row, 2, i);
	}
	CHECK(b.cols[1].dead && b.cols[3].dead && !b.cols[0].dead);
	CHECK_OK(sl_batch_append(&b, &h));
	CHECK(b.nrows == 3000);
	for (size_t r = 0; r < 3000; r++) {
		CHECK(sl_batch_is_null(&b, r, 1) && sl_batch_is_null(&b, r, 3));
		CHECK(!sl_batch_is_null(&b, r, 0) && b.cols[2].cells[r].i == (int64_t)r);
		keep[r] = r % 3 == 0;
	}
	sl_batch_keep(&b, keep);
	CHECK(b.nrows == 1000 && b.cols[2].cells[999].i == 2997);
	const char *s = sl_batch_str(&b, 999, 0, &len);
	CHECK(len == 2 && !memcmp(s, "xy", 2));
	CHECK(sl_batch_is_null(&b, 999, 1) && sl_batch_is_null(&b, 999, 3));
	sl_batch_trim(&b, 10);
	CHECK(b.cap == 0 && b.cols[1].dead);
	CHECK_OK(sl_batch_add_row(&b, &row));
	CHECK(sl_batch_is_null(&b, row, 1) && sl_batch_is_null(&b, row, 0));
	sl_batch_release(&h);
	sl_batch_release(&b);
}

/*
 * With rows reserved ahead, the arena grows to what they will need at the
 * bytes per row so far (one realloc past the first thousand rows, not a
 * doubling each time), and every string still reads back; past the
 * reservation it doubles as before.
 */
static void test_arena_grows_to_the_reserved_rows(void)
{
	struct sl_column cols[1] = {{.name = (char *)"s", .type = SL_TYPE_STRING}};
	struct sl_schema schema = {.cols = cols, .n = 1};
	struct sl_batch b;
	char text[64];
	size_t row, len, grew = 0, cap = 0;

	CHECK_OK(sl_batch_init(&b, &schema));
	CHECK_OK(sl_batch_reserve(&b, 100000));
	for (int i = 0; i < 100000; i++) {
		CHECK_OK(sl_batch_add_row(&b, &row));
		int n = snprintf(text, sizeof(text), "%032d", i); /* 32 bytes a row */
		CHECK_OK(sl_batch_set_str(&b, row, 0, text, (size_t)n));
		if (b.arena_cap != cap)
			grew++, cap = b.arena_cap;
	}
	CHECK(grew <= 3); /* 64 KiB, then about 100000 x 32 bytes; doubling alone: 7 */
	CHECK(b.arena_cap >= 100000 * 32 && b.arena_cap < 2 * 100000 * 32);
	for (int i = 0; i < 100000; i += 997) {
		const char *s = sl_batch_str(&b, (size_t)i, 0, &len);
		int n = snprintf(text, sizeof(text), "%032d", i);
		CHECK(len == (size_t)n && !memcmp(s, text, len));
	}
	/* past the reserved rows: rows and arena double, strings intact */
	for (int i = 0; i < 50000; i++) {
		CHECK_OK(sl_batch_add_row(&b, &row));
		CHECK_OK(sl_batch_set_str(&b, row, 0, "0123456789abcdef0123456789abcdef", 32));
	}
	const char *s = sl_batch_str(&b, 99999, 0, &len);
	CHECK(len == 32 && !memcmp(s, "00000000000000000000000000099999", 32));
	sl_batch_release(&b);
}

struct fill {
	struct sl_batch *b;
	int from, to, rc;
};

/* Rows from..to-1: "v<i>" (odd i null), i, a window; rc the first error. */
static void *fill_main(void *arg)
{
	struct fill *f = arg;
	char text[32];
	size_t row;

	f->rc = 0;
	for (int i = f->from; i < f->to && f->rc == 0; i++) {
		if ((f->rc = sl_batch_add_row(f->b, &row)))
			break;
		if (row != (size_t)i)
			f->rc = -1;
		int n = snprintf(text, sizeof(text), "v%d", i);
		if (i % 2 == 0 && !f->rc)
			f->rc = sl_batch_set_str(f->b, row, 0, text, (size_t)n);
		sl_batch_set_int(f->b, row, 1, i);
	}
	return NULL;
}

/*
 * Rows filled on two threads at once, the second half through a side with
 * an arena of its own: after the join every row and string reads back as
 * one thread would have written them, after rows that were there before;
 * a side stops at its last row (no growth of arrays it does not own); a
 * dropped side leaves the batch as it was.
 */
static void test_side_filled_by_another_thread(void)
{
	struct sl_column cols[3] = {{.name = (char *)"s", .type = SL_TYPE_STRING},
				    {.name = (char *)"n", .type = SL_TYPE_BIGINT},
				    {.name = (char *)"x", .type = SL_TYPE_STRING}};
	struct sl_schema schema = {.cols = cols, .n = 3};
	const uint8_t used[3] = {1, 1, 0};
	struct sl_batch b, side;
	char text[32];
	size_t row, len;
	pthread_t th;

	CHECK_OK(sl_batch_init(&b, &schema));
	sl_batch_project(&b, used);
	struct fill before = {&b, 0, 10, 0};
	fill_main(&before);
	CHECK_OK(before.rc);
	size_t cap0 = b.cap;
	CHECK_OK(sl_batch_reserve(&b, 200010));
	CHECK_OK(sl_batch_side_begin(&b, 100010, 200010, &side));
	struct fill lo = {&b, 10, 100010, 0}, hi = {&side, 100010, 200010, 0};
	CHECK_OK(pthread_create(&th, NULL, fill_main, &hi));
	fill_main(&lo);
	pthread_join(th, NULL);
	CHECK_OK(lo.rc);
	CHECK_OK(hi.rc);
	/* a side's rows end where it was told */
	CHECK(sl_batch_add_row(&side, &row) == ENOSPC);
	CHECK(b.nrows == 100010 && side.nrows == 200010);
	CHECK_OK(sl_batch_side_join(&b, &side));
	CHECK(b.nrows == 200010 && b.cap >= 200010);
	for (int i = 0; i < 200010; i++) {
		int n = snprintf(text, sizeof(text), "v%d", i);
		if (i % 2) {
			CHECK(sl_batch_is_null(&b, (size_t)i, 0));
		} else {
			const char *s = sl_batch_str(&b, (size_t)i, 0, &len);
			CHECK(len == (size_t)n && !memcmp(s, text, len));
		}
		CHECK(b.cols[1].cells[i].i == i);
		CHECK(sl_batch_is_null(&b, (size_t)i, 2));
	}
	/*
	 * A side past room left for b's own rows (b capped there, as the
	 * decoder's halves): b stops at its cap, and the join moves the
	 * side's rows down to meet b's.
	 */
	size_t saved;
	CHECK_OK(sl_batch_reserve(&b, 200010 + 3000));
	CHECK_OK(sl_batch_side_begin(&b, 200010 + 1000, 200010 + 3000, &side));
	sl_batch_cap(&b, 200010 + 1000, &saved);
	struct fill mine = {&b, 200010, 200010 + 1001, 0};
	fill_main(&mine);
	CHECK(mine.rc == ENOSPC && b.full && b.nrows == 200010 + 1000);
	b.nrows = 200010 + 500; /* as a decoder that stopped there */
	sl_batch_uncap(&b, saved);
	b.full = false;
	struct fill theirs = {&side, 200010 + 1000, 200010 + 1100, 0};
	fill_main(&theirs);
	CHECK_OK(theirs.rc);
	CHECK_OK(sl_batch_side_join(&b, &side));
	CHECK(b.nrows == 200010 + 600);
	for (int i = 200010 + 500; i < 200010 + 600; i++) {
		int v = i + 500, n = snprintf(text, sizeof(text), "v%d", v);
		CHECK(b.cols[1].cells[i].i == v);
		if (v % 2) {
			CHECK(sl_batch_is_null(&b, (size_t)i, 0));
		} else {
			const char *s = sl_batch_str(&b, (size_t)i, 0, &len);
			CHECK(len == (size_t)n && !memcmp(s, text, len));
		}
	}
	const char *s = sl_batch_str(&b, 200010 + 498, 0, &len);
	CHECK(len == 7 && !memcmp(s, "v200508", 7));
	b.nrows = 200010;
	b.arena_len = 0;
	for (int i = 0; i < 200010; i++)
		b.arena_len += i % 2 ? 0 : (size_t)snprintf(text, sizeof(text), "v%d", i);

	/* a dropped side: the batch keeps its rows and strings */
	size_t arena = b.arena_len;
	CHECK_OK(sl_batch_reserve(&b, 200020));
	CHECK_OK(sl_batch_side_begin(&b, 200010, 200020, &side));
	struct fill more = {&side, 200010, 200020, 0};
	fill_main(&more);
	CHECK_OK(more.rc);
	sl_batch_side_drop(&side);
	CHECK(b.nrows == 200010 && b.arena_len == arena);
	CHECK(cap0 < b.cap);
	sl_batch_release(&b);
}

int main(void)
{
	test(test_side_filled_by_another_thread);
	test(test_rows_strings_and_reuse);
	test(test_arena_grows_to_the_reserved_rows);
	test(test_projected_columns);
	return test_exit();
}
