/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/ksort.c against qsort with a plain memcmp comparison:
 * keys that share long prefixes, are prefixes of each other, are empty or
 * repeated, differ only past their first 8 bytes after the shared prefix;
 * sorted, reversed and random inputs; sizes around the insertion and radix
 * cuts.
 */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "ksort.h"

struct keys {
	unsigned char *bytes;
	size_t *off, *len;
	size_t n;
};

static const unsigned char *key_of(const void *ctx, uint32_t idx, size_t *len)
{
	const struct keys *k = ctx;
	*len = k->len[idx];
	return k->bytes + k->off[idx];
}

static int ref_cmp(const void *a, const void *b, void *ctx)
{
	size_t al, bl;
	const unsigned char *ak = key_of(ctx, *(const uint32_t *)a, &al);
	const unsigned char *bk = key_of(ctx, *(const uint32_t *)b, &bl);
	int c = memcmp(ak, bk, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/*
 * n keys of one family: 0 ids after a 12-byte shared prefix ("e0000..."
 * style), 1 a shared prefix then a long shared middle so that the first 8
 * bytes after the prefix tie often, 2 short random keys with repeats and
 * empties, 3 keys that are prefixes of each other, 4 a shared prefix longer
 * than the bytes sl_ksort() keeps of each key on its first pass (16), then
 * random bytes, some keys ending inside those bytes.
 */
static void make(struct keys *k, size_t n, int family, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	k->n = n;
	k->bytes = malloc(n * 64 + 1);
	k->off = malloc((n + 1) * sizeof(size_t));
	k->len = malloc((n + 1) * sizeof(size_t));
	CHECK(k->bytes && k->off && k->len);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = k->bytes + at;
		size_t len = 0;
		uint64_t r = xs(&x);
		switch (family) {
		case 0:
			len = (size_t)snprintf((char *)p, 64, "\x01" "e0000%06u-%04x",
					       (unsigned)(r % 1000000), (unsigned)(r >> 40) & 0xffff);
			break;
		case 1:
			len = (size_t)snprintf((char *)p, 64, "\x02ZZZZ%02u-same-middle-%u",
					       (unsigned)(r % 3), (unsigned)(r >> 20) % 50);
			break;
		case 2:
			len = r % 5;
			for (size_t b = 0; b < len; b++)
				p[b] = (unsigned char)(xs(&x) % 3); /* 0x00, 0x01, 0x02 */
			break;
		case 3:
			len = r % 40;
			memset(p, 'a', len);
			break;
		default:
			memcpy(p, "shared-prefix-of-20", 20);
			len = 20 + r % 12;
			for (size_t b = 20; b < len; b++)
				p[b] = (unsigned char)xs(&x);
			break;
		}
		k->off[i] = at;
		k->len[i] = len;
		at += len;
	}
}

static void release(struct keys *k)
{
	free(k->bytes);
	free(k->off);
	free(k->len);
}

static void check_against_qsort(struct keys *k, int order)
{
	uint32_t *a = malloc((k->n + 1) * sizeof(*a)), *b = malloc((k->n + 1) * sizeof(*b));
	CHECK(a && b);
	for (size_t i = 0; i < k->n; i++)
		a[i] = (uint32_t)i;
	if (order) { /* sorted or reversed input */
		qsort_r(a, k->n, sizeof(*a), ref_cmp, k);
		if (order == 2)
			for (size_t i = 0; i < k->n / 2; i++) {
				uint32_t t = a[i];
				a[i] = a[k->n - 1 - i];
				a[k->n - 1 - i] = t;
			}
	}
	memcpy(b, a, k->n * sizeof(*a));
	CHECK_OK(sl_ksort(a, k->n, key_of, k));
	qsort_r(b, k->n, sizeof(*b), ref_cmp, k);
	/* the same keys in the same order (equal keys may swap indexes) */
	size_t bad = 0;
	for (size_t i = 0; i < k->n; i++)
		bad += ref_cmp(&a[i], &b[i], k) != 0;
	/* and a permutation */
	uint8_t *seen = calloc(k->n + 1, 1);
	CHECK(seen);
	for (size_t i = 0; i < k->n; i++)
		bad += seen[a[i]]++ != 0;
	free(seen);
	CHECK(bad == 0);
	free(a);
	free(b);
}

static void test_families(void)
{
	/* around the insertion cut (16) and the radix cut (512) */
	static const size_t sizes[] = {0, 1, 2, 3, 16, 17, 100, 511, 512, 513, 1000, 200000};
	for (int family = 0; family < 5; family++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (int order = 0; order < 3; order++) {
				struct keys k;
				make(&k, sizes[s], family, (uint64_t)(family * 100 + s));
				check_against_qsort(&k, order);
				release(&k);
			}
}

/* Every key equal: the partition must still make progress. */
static void test_all_equal(void)
{
	struct keys k;
	make(&k, 100000, 3, 1);
	for (size_t i = 0; i < k.n; i++)
		k.len[i] = 30;
	check_against_qsort(&k, 0);
	release(&k);
}

int main(void)
{
	test(test_families);
	test(test_all_equal);
	return test_exit();
}
