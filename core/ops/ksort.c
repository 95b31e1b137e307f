/* SPDX-License-Identifier: MIT */
/*
 * Sorting indexes by byte-string keys, 8 bytes at a time: the pairs (8 key
 * bytes from an offset, index) are sorted by those bytes as one integer;
 * each run of equal bytes is then sorted again 8 bytes further on, its
 * keys that end within the run's bytes first (they are prefixes of the
 * others), shortest first. The first offset is the prefix all keys share.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ksort.h"

struct pair {
	uint64_t word; /* key bytes [at, at + 8), big-endian, zero-padded past the key's end */
	uint32_t idx;
	uint32_t len;  /* the key's length */
};

static int cmp_word(const void *a, const void *b)
{
	uint64_t x = ((const struct pair *)a)->word, y = ((const struct pair *)b)->word;
	return (x > y) - (x < y);
}

static void insertion(struct pair *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct pair x = v[i];
		size_t j = i;
		for (; j > 0 && v[j - 1].word > x.word; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/* Sorts v by word: quicksort (median of three), qsort past a depth bound. */
static void quick(struct pair *v, size_t n, int depth)
{
	while (n > 16) {
		if (depth-- == 0) {
			qsort(v, n, sizeof(*v), cmp_word);
			return;
		}
		struct pair *a = &v[0], *m = &v[n / 2], *z = &v[n - 1], t;
		if (m->word < a->word)
			t = *m, *m = *a, *a = t;
		if (z->word < m->word) {
			t = *z, *z = *m, *m = t;
			if (m->word < a->word)
				t = *m, *m = *a, *a = t;
		}
		uint64_t p = m->word;
		size_t i = 0, j = n - 1;
		for (;;) {
			while (v[i].word < p)
				i++;
			while (v[j].word > p)
				j--;
			if (i >= j)
				break;
			t = v[i], v[i] = v[j], v[j] = t;
			i++;
			j--;
		}
		/* [0, j] <= p <= [j + 1, n): recurse into the smaller side */
		size_t left = j + 1;
		if (left < n - left) {
			quick(v, left, depth);
			v += left;
			n -= left;
		} else {
			quick(v + left, n - left, depth);
			n = left;
		}
	}
	insertion(v, n);
}

/*
 * Sorts v by word, least significant byte first, through tmp (as many
 * pairs): one pass counts every byte position, then each position whose
 * bytes are not all equal moves the pairs once. Keys of one batch share
 * many of their 8 bytes (ids of the same width, the windows of a few
 * hours), so most sorts take a few passes over memory read in order,
 * where a comparison sort's partitions read it log2(n) times.
 */
static void radix(struct pair *v, size_t n, struct pair *tmp)
{
	size_t count[8][256];
	struct pair *from = v, *to = tmp;

	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++) {
		uint64_t w = v[i].word;
		for (int b = 0; b < 8; b++)
			count[b][(w >> (8 * b)) & 0xff]++;
	}
	for (int b = 0; b < 8; b++) {
		size_t *c = count[b], sum = 0;
		if (c[(v[0].word >> (8 * b)) & 0xff] == n)
			continue; /* one value at this position: the order stays */
		for (int x = 0; x < 256; x++) {
			size_t k = c[x];
			c[x] = sum;
			sum += k;
		}
		for (size_t i = 0; i < n; i++)
			to[c[(from[i].word >> (8 * b)) & 0xff]++] = from[i];
		struct pair *t = from;
		from = to;
		to = t;
	}
	if (from != v)
		memcpy(v, from, n * sizeof(*v));
}

/* sl_ksort()'s copy of each key's first bytes: as big as a pair, in radix()'s room */
#define HEAD 16
_Static_assert(sizeof(struct pair) == HEAD, "head[] fills radix()'s room exactly");

/* Below this many pairs, radix()'s counting costs more than it saves. */
#define RADIX_MIN 512

static int depth_for(size_t n)
{
	int depth = 2;
	for (; n > 1; n >>= 1)
		depth += 2;
	return depth;
}

static int cmp_len(const void *a, const void *b)
{
	uint32_t x = ((const struct pair *)a)->len, y = ((const struct pair *)b)->len;
	return (x > y) - (x < y);
}

/* Sorts v (keys equal before offset at) by their bytes from at on; tmp: n pairs. */
static void sort_from(struct pair *v, size_t n, size_t at, sl_ksort_key_fn key, const void *ctx,
		      struct pair *tmp, bool have_words)
{
	for (size_t i = 0; i < n && !have_words; i++) {
		size_t len;
		const unsigned char *k = key(ctx, v[i].idx, &len);
		uint64_t w = 0;
		for (size_t b = 0; b < 8; b++)
			w = w << 8 | (at + b < len ? k[at + b] : 0);
		v[i].word = w;
	}
	if (n >= RADIX_MIN)
		radix(v, n, tmp);
	else
		quick(v, n, depth_for(n));
	for (size_t a = 0, b; a < n; a = b) {
		for (b = a + 1; b < n && v[b].word == v[a].word; b++)
			;
		if (b - a < 2)
			continue;
		/* the run's keys that end within these bytes first, shortest first */
		size_t ended = 0;
		for (size_t i = a; i < b; i++)
			if (v[i].len <= at + 8) {
				struct pair t = v[a + ended];
				v[a + ended++] = v[i];
				v[i] = t;
			}
		if (ended > 1)
			qsort(v + a, ended, sizeof(*v), cmp_len);
		if (b - a - ended > 1)
			sort_from(v + a + ended, b - a - ended, at + 8, key, ctx, tmp + a + ended,
				  false);
	}
}

int sl_ksort(uint32_t *idx, size_t n, sl_ksort_key_fn key, const void *ctx)
{
	struct pair *v;
	size_t len0, skip;
	const unsigned char *k0;

	if (n < 2)
		return 0;
	v = malloc(2 * n * sizeof(*v)); /* the pairs, then radix()'s room */
	if (!v)
		return ENOMEM;
	/*
	 * One pass over the keys (in idx's order: a cache miss each) finds
	 * the shared prefix and keeps each key's first HEAD bytes in radix()'s
	 * room, so that when the bytes after the prefix lie within them the
	 * first words come from there, not from a second pass of misses.
	 */
	unsigned char (*head)[HEAD] = (void *)(v + n);
	k0 = key(ctx, idx[0], &len0);
	skip = len0;
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const unsigned char *k = key(ctx, idx[i], &len);
		size_t lim = len < skip ? len : skip, s = 0;
		while (s < lim && k[s] == k0[s])
			s++;
		skip = s;
		v[i].idx = idx[i];
		v[i].len = (uint32_t)len;
		memset(head[i], 0, HEAD);
		memcpy(head[i], k, len < HEAD ? len : HEAD);
	}
	bool have_words = skip + 8 <= HEAD;
	for (size_t i = 0; i < n && have_words; i++) {
		uint64_t w = 0;
		for (size_t b = 0; b < 8; b++)
			w = w << 8 | head[i][skip + b]; /* zero past the key's end, as sort_from() */
		v[i].word = w;
	}
	sort_from(v, n, skip, key, ctx, v + n, have_words);
	for (size_t i = 0; i < n; i++)
		idx[i] = v[i].idx;
	free(v);
	return 0;
}
