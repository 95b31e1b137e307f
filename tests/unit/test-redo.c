/* SPDX-License-Identifier: MIT */
/*
 * Redo records (core/store/redo.h): what is sealed reads back operation by
 * operation, and a torn, cut or foreign record is refused, since the
 * catalog applies a record after a power loss only when it opens.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "redo.h"

struct seen {
	int n;
	char log[512];
};

static int collect(void *ctx, enum sl_redo_kind kind, unsigned table, const void *key, size_t klen,
		   const void *val, size_t vlen)
{
	struct seen *s = ctx;
	size_t at = strlen(s->log);
	snprintf(s->log + at, sizeof(s->log) - at, "%s %u %.*s=%.*s;",
		 kind == SL_REDO_PUT ? "put" : "del", table, (int)klen, (const char *)key,
		 val ? (int)vlen : 0, val ? (const char *)val : "");
	s->n++;
	return 0;
}

static void sealed(struct sl_redo *r)
{
	sl_redo_reset(r, 1 << 20);
	sl_redo_add(r, SL_REDO_PUT, 1, "k1", 2, "value one", 9);
	sl_redo_add(r, SL_REDO_DEL, 12, "gone", 4, NULL, 0);
	sl_redo_add(r, SL_REDO_PUT, 0, "empty", 5, "", 0);
	CHECK(sl_redo_usable(r));
	sl_redo_seal(r, 7, 4242);
}

static void test_round_trip(void)
{
	struct sl_redo r = {0};
	struct sl_redo_rec rec;
	struct seen s = {0};

	sealed(&r);
	CHECK(sl_redo_open(((unsigned char *)r.b.p), r.b.len, &rec));
	CHECK(rec.seq == 7 && rec.txnid == 4242);
	CHECK(sl_redo_each(&rec, collect, &s) == 0);
	CHECK(s.n == 3);
	CHECK(!strcmp(s.log, "put 1 k1=value one;del 12 gone=;put 0 empty=;"));
	/* a slot holds the record and whatever followed it */
	unsigned char *slot = calloc(1, r.b.len + 4096);
	memcpy(slot, ((unsigned char *)r.b.p), r.b.len);
	memset(slot + r.b.len, 0xab, 4096);
	CHECK(sl_redo_open(slot, r.b.len + 4096, &rec) && rec.len == r.b.len - SL_REDO_HDR);
	free(slot);
	sl_redo_free(&r);
}

static void test_torn_records_are_refused(void)
{
	struct sl_redo r = {0};
	struct sl_redo_rec rec;

	sealed(&r);
	/* any flipped bit, header or payload */
	for (size_t i = 0; i < r.b.len; i++) {
		((unsigned char *)r.b.p)[i] ^= 0x10;
		CHECK(!sl_redo_open(((unsigned char *)r.b.p), r.b.len, &rec));
		((unsigned char *)r.b.p)[i] ^= 0x10;
	}
	/* cut short: a write that stopped midway */
	for (size_t n = 0; n < r.b.len; n++)
		CHECK(!sl_redo_open(((unsigned char *)r.b.p), n, &rec));
	/* zeros (a new ring, a cancelled record) */
	unsigned char zeros[256] = {0};
	CHECK(!sl_redo_open(zeros, sizeof(zeros), &rec));
	CHECK(sl_redo_open(((unsigned char *)r.b.p), r.b.len, &rec));
	sl_redo_free(&r);
}

static void test_limits(void)
{
	struct sl_redo r = {0};
	char big[600];
	memset(big, 'x', sizeof(big));

	sl_redo_reset(&r, 1024);
	CHECK(!sl_redo_usable(&r)); /* nothing recorded: no record */
	sl_redo_add(&r, SL_REDO_PUT, 1, "a", 1, big, 500);
	CHECK(sl_redo_usable(&r));
	sl_redo_add(&r, SL_REDO_PUT, 1, "b", 1, big, 500); /* past the limit */
	CHECK(r.over && !sl_redo_usable(&r));
	sl_redo_add(&r, SL_REDO_PUT, 1, "c", 1, "small", 5); /* stays over */
	CHECK(!sl_redo_usable(&r));
	/* a reset makes it usable again, buffer kept */
	sl_redo_reset(&r, 1024);
	sl_redo_add(&r, SL_REDO_PUT, 300, "a", 1, "v", 1); /* no such table number */
	CHECK(r.over);
	sl_redo_free(&r);
}

static int stop_at_second(void *ctx, enum sl_redo_kind kind, unsigned table, const void *key,
			  size_t klen, const void *val, size_t vlen)
{
	(void)kind, (void)table, (void)key, (void)klen, (void)val, (void)vlen;
	return ++*(int *)ctx == 2 ? 99 : 0;
}

static void test_each_stops_and_checks(void)
{
	struct sl_redo r = {0};
	struct sl_redo_rec rec;
	int n = 0;

	sealed(&r);
	CHECK(sl_redo_open(((unsigned char *)r.b.p), r.b.len, &rec));
	CHECK(sl_redo_each(&rec, stop_at_second, &n) == 99 && n == 2);
	/* a payload whose lengths run past its end is malformed, not a crash */
	rec.len -= 3;
	CHECK(sl_redo_each(&rec, collect, &(struct seen){0}) == EINVAL);
	sl_redo_free(&r);
}

int main(void)
{
	test(test_round_trip);
	test(test_torn_records_are_refused);
	test(test_limits);
	test(test_each_stops_and_checks);
	return test_exit();
}
