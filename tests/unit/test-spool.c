/* SPDX-License-Identifier: MIT */
/*
 * The socket source's spool (core/sources/spool.c): the chunk format
 * (lengths, receive times going back and forth, empty and binary lines,
 * malformed chunks refused), appends counting lines, batch ends on chunk
 * boundaries, reads of a range, and trimming below the committed end.
 */
#include <stdint.h>

#include "catalog.h"
#include "check.h"
#include "spool.h"

struct got {
	uint64_t idx[64];
	char line[64][32];
	size_t len[64];
	int64_t ts[64];
	size_t n;
};

static int collect(void *ctx, uint64_t idx, const char *line, size_t len, int64_t ts_ms)
{
	struct got *g = ctx;
	if (g->n == 64 || len >= 32)
		return -1;
	g->idx[g->n] = idx;
	memcpy(g->line[g->n], line, len);
	g->len[g->n] = len;
	g->ts[g->n++] = ts_ms;
	return 0;
}

static void test_chunk_format(void)
{
	struct sl_spool_chunk c = {0};
	struct got g = {0};

	CHECK_OK(sl_spool_chunk_add(&c, "one", 3, 1700000000123));
	CHECK_OK(sl_spool_chunk_add(&c, "", 0, 1700000000123));
	CHECK_OK(sl_spool_chunk_add(&c, "a\0b", 3, 1700000000100)); /* a clock step back */
	CHECK_OK(sl_spool_chunk_add(&c, "four", 4, 1700000999999));
	CHECK(c.nlines == 4);
	/* head, then per line: length, zigzag time delta, bytes */
	CHECK(c.p[0] == 1 && c.p[1] == 0 && c.p[4] == 4);
	CHECK(c.len == SL_SPOOL_CHUNK_HEAD + (2 + 3) + 2 + (2 + 3) + (1 + 3 + 4));
	CHECK_OK(sl_spool_chunk_each(c.p, c.len, 10, 0, UINT64_MAX, collect, &g));
	CHECK(g.n == 4 && g.idx[0] == 10 && g.idx[3] == 13);
	CHECK(g.len[0] == 3 && !memcmp(g.line[0], "one", 3) && g.len[1] == 0);
	CHECK(g.len[2] == 3 && !memcmp(g.line[2], "a\0b", 3));
	CHECK(g.ts[0] == 1700000000123 && g.ts[1] == 1700000000123 && g.ts[2] == 1700000000100 &&
	      g.ts[3] == 1700000999999);
	/* a window of the chunk */
	memset(&g, 0, sizeof(g));
	CHECK_OK(sl_spool_chunk_each(c.p, c.len, 10, 11, 13, collect, &g));
	CHECK(g.n == 2 && g.idx[0] == 11 && g.idx[1] == 12 && g.ts[1] == 1700000000100);
	/* cut short anywhere, or another version */
	for (size_t cut = 0; cut < c.len; cut++)
		CHECK(sl_spool_chunk_each(c.p, cut, 0, 0, UINT64_MAX, collect, &(struct got){0}) ==
		      SL_ECORRUPT);
	c.p[0] = 2;
	CHECK(sl_spool_chunk_each(c.p, c.len, 0, 0, UINT64_MAX, collect, &g) == SL_ECORRUPT);
	sl_spool_chunk_clear(&c);
	CHECK(c.len == 0 && c.nlines == 0);
	sl_spool_chunk_release(&c);
}

struct done_arg {
	uint32_t qid;
	uint64_t done;
};

static int done_apply(struct sl_txn *t, void *arg)
{
	struct done_arg *d = arg;
	return sl_spool_set_done(t, d->qid, d->done);
}

static void add_chunk(struct sl_catalog *cat, uint32_t qid, int from, int n, uint64_t *spooled)
{
	struct sl_spool_chunk c = {0};
	char line[16];
	for (int i = from; i < from + n; i++) {
		int len = snprintf(line, sizeof(line), "l%d", i);
		CHECK_OK(sl_spool_chunk_add(&c, line, (size_t)len, 1000 + i));
	}
	CHECK_OK(sl_spool_append(cat, qid, &c, spooled));
	sl_spool_chunk_release(&c);
}

static void test_append_read_trim(void)
{
	struct sl_catalog *cat;
	struct sl_spool_stats st;
	struct sl_txn *t;
	struct got g = {0};
	uint64_t spooled = 0, end = 0, freed = 0;

	CHECK_OK(sl_catalog_open(test_dir(), SL_CATALOG_CREATE, &cat));
	add_chunk(cat, 7, 0, 3, &spooled);
	CHECK(spooled == 3);
	add_chunk(cat, 7, 3, 2, &spooled);
	add_chunk(cat, 7, 5, 4, &spooled);
	CHECK(spooled == 9);
	add_chunk(cat, 8, 0, 1, &spooled); /* another query's spool */
	CHECK(spooled == 1);

	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_spool_stats(t, 7, &st));
	CHECK(st.spooled == 9 && st.done == 0 && st.bytes > 0);
	/* batch ends fall on chunk boundaries, at least one chunk */
	CHECK_OK(sl_spool_batch_end(t, 7, 0, UINT64_MAX, &end));
	CHECK(end == 9);
	CHECK_OK(sl_spool_batch_end(t, 7, 0, 1, &end));
	CHECK(end == 3);
	CHECK_OK(sl_spool_batch_end(t, 7, 3, 1, &end));
	CHECK(end == 5);
	CHECK_OK(sl_spool_batch_end(t, 7, 9, UINT64_MAX, &end));
	CHECK(end == 9);
	/* a range across chunks */
	CHECK_OK(sl_spool_read(t, 7, 2, 7, collect, &g));
	CHECK(g.n == 5 && g.idx[0] == 2 && g.idx[4] == 6);
	CHECK(g.len[0] == 2 && !memcmp(g.line[0], "l2", 2) && g.ts[4] == 1006);
	/* past the end of the spool */
	CHECK(sl_spool_read(t, 7, 8, 12, collect, &(struct got){0}) == SL_ECORRUPT);
	sl_txn_end(t);

	/* lines below done leave the spool with their whole chunks only */
	struct done_arg d = {7, 4};
	CHECK_OK(sl_catalog_write(cat, done_apply, &d));
	CHECK_OK(sl_spool_trim(cat, 7, &freed));
	CHECK(freed > 0);
	CHECK_OK(sl_spool_trim(cat, 7, &freed)); /* idempotent */
	CHECK(freed == 0);
	CHECK_OK(sl_catalog_read(cat, &t));
	uint64_t before = st.bytes;
	CHECK_OK(sl_spool_stats(t, 7, &st));
	CHECK(st.bytes < before && st.spooled == 9 && st.done == 4);
	memset(&g, 0, sizeof(g));
	CHECK_OK(sl_spool_read(t, 7, 4, 9, collect, &g));
	CHECK(g.n == 5);
	CHECK(sl_spool_read(t, 7, 0, 9, collect, &(struct got){0}) == SL_ECORRUPT);
	sl_txn_end(t);
	d.done = 9;
	CHECK_OK(sl_catalog_write(cat, done_apply, &d));
	CHECK_OK(sl_spool_trim(cat, 7, NULL));
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_spool_stats(t, 7, &st));
	CHECK(st.bytes == 0 && st.spooled == 9);
	CHECK_OK(sl_spool_stats(t, 8, &st));
	CHECK(st.spooled == 1 && st.bytes > 0);
	sl_txn_end(t);
	/* appends go on counting from where they were */
	add_chunk(cat, 7, 9, 1, &spooled);
	CHECK(spooled == 10);
	sl_catalog_close(cat);
}

int main(void)
{
	test(test_chunk_format);
	test(test_append_read_trim);
	return test_exit();
}
