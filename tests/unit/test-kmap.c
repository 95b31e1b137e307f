/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/kmap.c: many keys (the empty key, keys that are
 * prefixes of each other), dense and stable indexes across growth, the
 * stored bytes, clear and reuse, the key length limit, the seeded hash.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "kmap.h"

#define NKEYS 1000000
#define MAXTAIL 60
#define PREFIX_MAX 300

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/*
 * Key i of the random set: i (4 bytes, so every key is distinct) then a
 * tail of 0..MAXTAIL pseudo-random bytes derived from i. Returns the length.
 */
static size_t rkey(uint32_t i, unsigned char *buf)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)i * 0xbf58476d1ce4e5b9ull);
	size_t len;

	xs(&x);
	memcpy(buf, &i, 4);
	len = 4 + (size_t)(xs(&x) % (MAXTAIL + 1));
	for (size_t k = 4; k < len; k++)
		buf[k] = (unsigned char)xs(&x);
	return len;
}

/*
 * The prefix set: every prefix (lengths 0..PREFIX_MAX, so the empty key
 * too) of one buffer starting with 0xFF x 4, which no random key starts with.
 */
static unsigned char pbuf[PREFIX_MAX];

static void make_pbuf(void)
{
	uint64_t x = 42;
	memset(pbuf, 0xFF, 4);
	for (size_t k = 4; k < PREFIX_MAX; k++)
		pbuf[k] = (unsigned char)xs(&x);
	pbuf[10] = 0; /* a NUL inside keys */
}

static void test_many_keys(void)
{
	static uint32_t pidx[PREFIX_MAX + 1];
	struct sl_kmap m;
	unsigned char buf[4 + MAXTAIL];
	uint32_t idx;
	bool added;
	size_t len;

	make_pbuf();
	sl_kmap_init(&m);
	CHECK(sl_kmap_count(&m) == 0);
	CHECK(!sl_kmap_find(&m, "", 0, &idx));
	CHECK(sl_kmap_bytes(&m) == 0);

	/* interleave the prefix keys with the random ones */
	size_t n = 0;
	for (uint32_t i = 0; i < NKEYS; i++) {
		if (i % 3000 == 0 && i / 3000 <= PREFIX_MAX) {
			size_t pl = i / 3000;
			CHECK_OK(sl_kmap_upsert(&m, pbuf, pl, &idx, &added));
			CHECK(added && idx == n);
			pidx[pl] = idx;
			n++;
		}
		len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
		if (!added || idx != n)
			fprintf(stderr, "key %u: added %d idx %u, want %zu\n", i, added, idx, n);
		CHECK(added && idx == n);
		n++;
	}
	CHECK(sl_kmap_count(&m) == n && n == NKEYS + PREFIX_MAX + 1);
	CHECK(sl_kmap_bytes(&m) > 0);

	/* indexes are stable: upsert finds, find agrees, key() gives the bytes back */
	size_t want = 0;
	for (uint32_t i = 0; i < NKEYS; i++) {
		if (i % 3000 == 0 && i / 3000 <= PREFIX_MAX) {
			size_t pl = i / 3000;
			CHECK(pidx[pl] == want);
			want++;
		}
		len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
		CHECK(!added && idx == want);
		CHECK(sl_kmap_find(&m, buf, len, &idx) && idx == want);
		size_t klen;
		const unsigned char *k = sl_kmap_key(&m, idx, &klen);
		CHECK(klen == len && !memcmp(k, buf, len));
		want++;
	}
	for (size_t pl = 0; pl <= PREFIX_MAX; pl++) {
		size_t klen;
		CHECK(sl_kmap_find(&m, pbuf, pl, &idx) && idx == pidx[pl]);
		CHECK_OK(sl_kmap_upsert(&m, pbuf, pl, &idx, &added));
		CHECK(!added && idx == pidx[pl]);
		const unsigned char *k = sl_kmap_key(&m, idx, &klen);
		CHECK(klen == pl && (pl == 0 || !memcmp(k, pbuf, pl)));
	}
	CHECK(sl_kmap_count(&m) == n);

	/* absent keys: other heads, a random key one byte short or long */
	for (uint32_t i = NKEYS; i < NKEYS + 10000; i++) {
		len = rkey(i, buf);
		CHECK(!sl_kmap_find(&m, buf, len, &idx));
	}
	for (uint32_t i = 0; i < 10000; i++) {
		len = rkey(i, buf);
		CHECK(!sl_kmap_find(&m, buf, len - 1, &idx));
		if (len < sizeof(buf)) {
			buf[len] = 0;
			CHECK(!sl_kmap_find(&m, buf, len + 1, &idx));
		}
	}
	unsigned char other[PREFIX_MAX + 1];
	memcpy(other, pbuf, PREFIX_MAX);
	other[PREFIX_MAX] = 1;
	CHECK(!sl_kmap_find(&m, other, PREFIX_MAX + 1, &idx));
	other[5] ^= 1;
	CHECK(!sl_kmap_find(&m, other, 6, &idx));
	sl_kmap_release(&m);
	CHECK(sl_kmap_count(&m) == 0 && !sl_kmap_find(&m, "", 0, &idx));
}

static void test_clear_and_reuse(void)
{
	struct sl_kmap m;
	unsigned char buf[4 + MAXTAIL];
	uint32_t idx;
	bool added;
	size_t len;

	sl_kmap_init(&m);
	for (uint32_t i = 0; i < 50000; i++) {
		len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
	}
	size_t bytes = sl_kmap_bytes(&m);
	sl_kmap_clear(&m);
	CHECK(sl_kmap_count(&m) == 0);
	CHECK(sl_kmap_bytes(&m) == bytes); /* memory kept */
	for (uint32_t i = 0; i < 50000; i += 7) {
		len = rkey(i, buf);
		CHECK(!sl_kmap_find(&m, buf, len, &idx));
	}
	CHECK(!sl_kmap_find(&m, "", 0, &idx));
	/* reuse, in another order: indexes start again at 0 */
	for (uint32_t i = 0; i < 20000; i++) {
		len = rkey(40000 - i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
		CHECK(added && idx == i);
	}
	CHECK_OK(sl_kmap_upsert(&m, "", 0, &idx, &added));
	CHECK(added && idx == 20000);
	for (uint32_t i = 0; i < 20000; i++) {
		size_t klen;
		len = rkey(40000 - i, buf);
		CHECK(sl_kmap_find(&m, buf, len, &idx) && idx == i);
		const unsigned char *k = sl_kmap_key(&m, idx, &klen);
		CHECK(klen == len && !memcmp(k, buf, len));
	}
	len = rkey(40001, buf);
	CHECK(!sl_kmap_find(&m, buf, len, &idx));
	CHECK(sl_kmap_count(&m) == 20001);
	CHECK(sl_kmap_bytes(&m) == bytes);
	sl_kmap_release(&m);
}

/*
 * sl_kmap_drop_slots(): the keys stay readable in order; find stays right
 * (by a scan) for present and absent keys; the next upsert builds the table
 * from the keys, so a key added before the drop is found, not added again;
 * clear and reserve make a map for the next batch.
 */
static void test_drop_slots(void)
{
	struct sl_kmap m;
	unsigned char buf[4 + MAXTAIL];
	uint32_t idx;
	bool added;
	size_t len, klen;

	sl_kmap_init(&m);
	sl_kmap_drop_slots(&m); /* on an empty map: nothing to give back */
	CHECK(sl_kmap_bytes(&m) == 0 && !sl_kmap_find(&m, "", 0, &idx));
	for (uint32_t i = 0; i < 30000; i++) {
		len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
	}
	size_t before = sl_kmap_bytes(&m);
	sl_kmap_drop_slots(&m);
	CHECK(sl_kmap_count(&m) == 30000);
	CHECK(sl_kmap_bytes(&m) < before);
	for (uint32_t i = 0; i < 30000; i++) {
		len = rkey(i, buf);
		const unsigned char *k = sl_kmap_key(&m, i, &klen);
		CHECK(klen == len && !memcmp(k, buf, len));
	}
	for (uint32_t i = 0; i < 30000; i += 997) {
		len = rkey(i, buf);
		CHECK(sl_kmap_find(&m, buf, len, &idx) && idx == i);
	}
	len = rkey(30000, buf);
	CHECK(!sl_kmap_find(&m, buf, len, &idx));
	CHECK(sl_kmap_peek(&m, sl_kmap_hash_key(buf, len)) == 0);
	/* upserts after the drop: old keys found again, new ones added after them */
	for (uint32_t i = 0; i < 40000; i++) {
		len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
		CHECK(idx == i && added == (i >= 30000));
	}
	CHECK(sl_kmap_count(&m) == 40000);
	for (uint32_t i = 0; i < 40000; i++) {
		len = rkey(i, buf);
		CHECK(sl_kmap_find(&m, buf, len, &idx) && idx == i);
	}
	/* the next batch: cleared and reserved after a drop */
	sl_kmap_drop_slots(&m);
	sl_kmap_clear(&m);
	CHECK_OK(sl_kmap_reserve(&m, 5000));
	CHECK(sl_kmap_count(&m) == 0);
	len = rkey(3, buf);
	CHECK(!sl_kmap_find(&m, buf, len, &idx));
	CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
	CHECK(added && idx == 0);
	sl_kmap_release(&m);
}

static void test_key_too_long(void)
{
	struct sl_kmap m;
	unsigned char *big = malloc((size_t)SL_KMAP_KEY_MAX + 1);
	uint32_t idx = 77;
	bool added = true;
	size_t klen;

	CHECK(big);
	memset(big, 'k', (size_t)SL_KMAP_KEY_MAX + 1);
	sl_kmap_init(&m);
	/* refused on an empty map: nothing allocated */
	CHECK(sl_kmap_upsert(&m, big, (size_t)SL_KMAP_KEY_MAX + 1, &idx, &added) == EOVERFLOW);
	CHECK(sl_kmap_count(&m) == 0 && sl_kmap_bytes(&m) == 0);
	CHECK(idx == 77 && added);

	CHECK_OK(sl_kmap_upsert(&m, "a", 1, &idx, &added));
	CHECK(added && idx == 0);
	CHECK_OK(sl_kmap_upsert(&m, "ab", 2, &idx, &added));
	CHECK(added && idx == 1);
	size_t bytes = sl_kmap_bytes(&m), arena = m.arena_len;
	idx = 77;
	CHECK(sl_kmap_upsert(&m, big, (size_t)SL_KMAP_KEY_MAX + 1, &idx, &added) == EOVERFLOW);
	CHECK(idx == 77);
	CHECK(sl_kmap_count(&m) == 2 && sl_kmap_bytes(&m) == bytes && m.arena_len == arena);
	CHECK(!sl_kmap_find(&m, big, (size_t)SL_KMAP_KEY_MAX + 1, &idx));
	CHECK(sl_kmap_find(&m, "a", 1, &idx) && idx == 0);
	CHECK(sl_kmap_find(&m, "ab", 2, &idx) && idx == 1);

	/* the longest key is accepted and read back whole */
	big[SL_KMAP_KEY_MAX - 1] = 'z';
	CHECK_OK(sl_kmap_upsert(&m, big, SL_KMAP_KEY_MAX, &idx, &added));
	CHECK(added && idx == 2);
	const unsigned char *k = sl_kmap_key(&m, 2, &klen);
	CHECK(klen == SL_KMAP_KEY_MAX && !memcmp(k, big, SL_KMAP_KEY_MAX));
	CHECK_OK(sl_kmap_upsert(&m, "abc", 3, &idx, &added));
	CHECK(added && idx == 3);
	k = sl_kmap_key(&m, 3, &klen);
	CHECK(klen == 3 && !memcmp(k, "abc", 3));
	CHECK(sl_kmap_find(&m, big, SL_KMAP_KEY_MAX, &idx) && idx == 2);
	CHECK(!sl_kmap_find(&m, big, SL_KMAP_KEY_MAX - 1, &idx));
	sl_kmap_release(&m);
	free(big);
}

static void test_hash_seed(void)
{
	unsigned char buf[4 + MAXTAIL];
	static const unsigned char zeros[64];
	uint64_t seeds[] = {0, 1, 0x51ce, 0xfeed5eed, UINT64_MAX};
	size_t ns = sizeof(seeds) / sizeof(seeds[0]);

	make_pbuf();
	/* the empty key too; deterministic; every seed gives another hash */
	for (uint32_t i = 0; i < 20000; i++) {
		size_t len = i == 0 ? 0 : i <= PREFIX_MAX ? i : rkey(i, buf);
		const unsigned char *key = i == 0	     ? (const unsigned char *)""
					   : i <= PREFIX_MAX ? pbuf
							     : buf;
		uint64_t h[8];
		for (size_t s = 0; s < ns; s++) {
			h[s] = sl_kmap_hash(key, len, seeds[s]);
			CHECK(h[s] == sl_kmap_hash(key, len, seeds[s]));
			for (size_t r = 0; r < s; r++)
				CHECK(h[r] != h[s]);
		}
	}
	/* all-zero keys of different lengths do not collide */
	for (size_t a = 0; a < 64; a++)
		for (size_t b = 0; b < a; b++)
			CHECK(sl_kmap_hash(zeros, a, 0) != sl_kmap_hash(zeros, b, 0));
	/* one bit flipped anywhere changes the hash */
	unsigned char key[40];
	for (size_t k = 0; k < sizeof(key); k++)
		key[k] = (unsigned char)k;
	uint64_t base = sl_kmap_hash(key, sizeof(key), 7);
	for (size_t bit = 0; bit < 8 * sizeof(key); bit++) {
		key[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		CHECK(sl_kmap_hash(key, sizeof(key), 7) != base);
		key[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
}

/*
 * sl_kmap_reserve(n): keys[] is sized for n at its first growth and the
 * arena, past a thousand keys, for n keys of the mean length so far; every
 * key still reads back, and a clear forgets the reservation.
 */
static void test_reserve_sizes_keys_and_arena(void)
{
	struct sl_kmap m;
	unsigned char buf[4 + MAXTAIL];
	size_t grew = 0, acap = 0, bytes = 0;
	uint32_t idx;
	bool added;

	sl_kmap_init(&m);
	CHECK_OK(sl_kmap_reserve(&m, 200000));
	for (uint32_t i = 0; i < 200000; i++) {
		size_t len = rkey(i, buf);
		CHECK_OK(sl_kmap_upsert(&m, buf, len, &idx, &added));
		CHECK(added && idx == i);
		bytes += len;
		if (m.arena_cap != acap)
			grew++, acap = m.arena_cap;
	}
	CHECK(m.cap == 200000); /* doubling: 262144 */
	CHECK(grew <= 3);       /* 64 KiB, then the estimate (doubling: 7) */
	CHECK(m.arena_cap >= bytes && m.arena_cap < 2 * bytes);
	for (uint32_t i = 0; i < 200000; i += 101) {
		size_t len = rkey(i, buf), klen;
		const unsigned char *k = sl_kmap_key(&m, i, &klen);
		CHECK(klen == len && !memcmp(k, buf, len));
		CHECK(sl_kmap_find(&m, buf, len, &idx) && idx == i);
	}
	sl_kmap_clear(&m);
	CHECK(m.want == 0);
	sl_kmap_release(&m);
}

int main(void)
{
	test(test_many_keys);
	test(test_reserve_sizes_keys_and_arena);
	test(test_clear_and_reuse);
	test(test_drop_slots);
	test(test_key_too_long);
	test(test_hash_seed);
	return test_exit();
}
