/* SPDX-License-Identifier: MIT */
/* Byte-string keys to dense indexes: open addressing, linear probing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kmap.h"
#include "mem.h"

/*
 * A slot: the high half of the key's hash, its index + 1 (0 marks an empty
 * slot) and where its bytes are, so that a probe reads no other array
 * before comparing the key itself.
 */
struct sl_kmap_slot { /* 16 bytes: sl_kmap_prefetch() knows */
	uint32_t tag;
	uint32_t idx;
	uint64_t ref; /* arena offset << 24 | length, as keys[] */
};

/*
 * Slot arrays ask for transparent huge pages (mem.h): a big table is
 * probed at random, and 4 KiB pages would cost a TLB miss (and a page fault
 * to zero) per probe.
 */
static struct sl_kmap_slot *slots_alloc(size_t n)
{
	struct sl_kmap_slot *slots = calloc(n, sizeof(*slots));
	sl_mem_huge(slots, n * sizeof(*slots));
	return slots;
}

static inline uint64_t read64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t mix(uint64_t a, uint64_t b)
{
	/* 64x64 -> 128 multiply, folded (the core of wyhash) */
	__uint128_t r = (__uint128_t)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

uint64_t sl_kmap_hash(const void *key, size_t len, uint64_t seed)
{
	const unsigned char *p = key;
	uint64_t h = seed ^ 0xa0761d6478bd642full ^ (len * 0xe7037ed1a0b428dbull);
	size_t i = 0;

	for (; i + 16 <= len; i += 16)
		h = mix(read64(p + i) ^ 0xe7037ed1a0b428dbull ^ h,
			read64(p + i + 8) ^ 0x8ebc6af09c88c6e3ull);
	uint64_t a = 0, b = 0;
	size_t rest = len - i;
	if (rest >= 8) {
		a = read64(p + i);
		memcpy(&b, p + i + 8, rest - 8);
	} else if (rest) { /* an empty key may come as NULL */
		memcpy(&a, p + i, rest);
	}
	h = mix(a ^ 0xe7037ed1a0b428dbull ^ h, b ^ 0x8ebc6af09c88c6e3ull ^ len);
	return mix(h, 0x589965cc75374cc3ull);
}

void sl_kmap_init(struct sl_kmap *m)
{
	memset(m, 0, sizeof(*m));
}

void sl_kmap_release(struct sl_kmap *m)
{
	free(m->slots);
	free(m->keys);
	free(m->arena);
	sl_kmap_init(m);
}

void sl_kmap_clear(struct sl_kmap *m)
{
	if (m->slots)
		memset(m->slots, 0, (m->mask + 1) * sizeof(*m->slots));
	m->n = 0;
	m->arena_len = 0;
	m->want = 0;
}

static inline bool same(const struct sl_kmap *m, uint64_t ref, const void *key, size_t len)
{
	return (ref & SL_KMAP_KEY_MAX) == len && (len == 0 || !memcmp(m->arena + (ref >> 24), key, len));
}

bool sl_kmap_find(const struct sl_kmap *m, const void *key, size_t len, uint32_t *idx)
{
	if (!m->slots) {
		/* after sl_kmap_drop_slots(): right, if slow */
		for (size_t i = 0; i < m->n; i++)
			if (same(m, m->keys[i], key, len)) {
				*idx = (uint32_t)i;
				return true;
			}
		return false;
	}
	uint64_t h = sl_kmap_hash(key, len, 0);
	uint32_t tag = (uint32_t)(h >> 32);
	for (size_t s = h & m->mask;; s = (s + 1) & m->mask) {
		const struct sl_kmap_slot *sl = &m->slots[s];
		if (!sl->idx)
			return false;
		if (sl->tag == tag && same(m, sl->ref, key, len)) {
			*idx = sl->idx - 1;
			return true;
		}
	}
}

/*
 * Doubles the slots (or makes the first 1024), or more, until `keys` keys
 * fit under the load limit, and inserts every key again, from keys[]. One
 * call for a reserve: each table made on the way would be zeroed (page
 * faults) and filled for nothing.
 */
static int rehash(struct sl_kmap *m, size_t keys)
{
	size_t nslots = m->slots ? (m->mask + 1) * 2 : 1024;
	if (keys < m->n)
		keys = m->n;
	while ((keys + 1) * 4 > nslots * 3)
		nslots *= 2;
	struct sl_kmap_slot *slots = slots_alloc(nslots);
	if (!slots)
		return ENOMEM;
	size_t mask = nslots - 1;
	for (size_t i = 0; i < m->n; i++) {
		uint64_t ref = m->keys[i];
		/* the low half of the hash was not kept: hash the key again */
		uint64_t h = sl_kmap_hash(m->arena + (ref >> 24), ref & SL_KMAP_KEY_MAX, 0);
		size_t s = h & mask;
		while (slots[s].idx)
			s = (s + 1) & mask;
		slots[s] = (struct sl_kmap_slot){(uint32_t)(h >> 32), (uint32_t)i + 1, ref};
	}
	free(m->slots);
	m->slots = slots;
	m->mask = mask;
	return 0;
}

void sl_kmap_drop_slots(struct sl_kmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->mask = 0;
}

int sl_kmap_upsert(struct sl_kmap *m, const void *key, size_t len, uint32_t *idx, bool *added)
{
	return sl_kmap_upsert_hashed(m, key, len, sl_kmap_hash(key, len, 0), idx, added);
}

int sl_kmap_upsert_hashed(struct sl_kmap *m, const void *key, size_t len, uint64_t h,
			  uint32_t *idx, bool *added)
{
	int rc;

	if (len > SL_KMAP_KEY_MAX || m->n >= UINT32_MAX - 1)
		return EOVERFLOW;
	/* keep the load under 3/4: linear probing stays short, and 16-byte slots small */
	if (!m->slots || (m->n + 1) * 4 > (m->mask + 1) * 3)
		if ((rc = rehash(m, m->n + 1)))
			return rc;
	uint32_t tag = (uint32_t)(h >> 32);
	size_t s = h & m->mask;
	for (;; s = (s + 1) & m->mask) {
		struct sl_kmap_slot *sl = &m->slots[s];
		if (!sl->idx)
			break;
		if (sl->tag == tag && same(m, sl->ref, key, len)) {
			*idx = sl->idx - 1;
			*added = false;
			return 0;
		}
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		if (cap < m->want)
			cap = m->want; /* once, not doubled (and copied) a dozen times */
		uint64_t *keys = realloc(m->keys, cap * sizeof(*keys));
		if (!keys)
			return ENOMEM;
		sl_mem_huge(keys, cap * sizeof(*keys));
		m->keys = keys;
		m->cap = cap;
	}
	if (m->arena_len + len > m->arena_cap) {
		size_t cap = m->arena_cap ? m->arena_cap : 65536;
		while (cap < m->arena_len + len)
			cap *= 2;
		/* past a thousand keys, their mean length tells what the rest need */
		size_t est = sl_mem_estimate(m->arena_len, m->n, m->want);
		if (cap < est)
			cap = est;
		if (cap >> 40)
			return EOVERFLOW; /* offsets have 40 bits */
		unsigned char *a = realloc(m->arena, cap);
		if (!a)
			return ENOMEM;
		sl_mem_huge(a, cap);
		m->arena = a;
		m->arena_cap = cap;
	}
	if (len)
		memcpy(m->arena + m->arena_len, key, len);
	m->keys[m->n] = (uint64_t)m->arena_len << 24 | len;
	m->arena_len += len;
	m->slots[s].tag = tag;
	m->slots[s].ref = m->keys[m->n];
	m->slots[s].idx = (uint32_t)m->n + 1;
	*idx = (uint32_t)m->n++;
	*added = true;
	return 0;
}

uint32_t sl_kmap_peek(const struct sl_kmap *m, uint64_t h)
{
	if (!m->slots)
		return 0;
	uint32_t tag = (uint32_t)(h >> 32);
	for (size_t s = h & m->mask, n = 0; n < 4; s = (s + 1) & m->mask, n++) {
		const struct sl_kmap_slot *sl = &m->slots[s];
		if (!sl->idx)
			return 0;
		if (sl->tag == tag) {
			__builtin_prefetch(m->arena + (sl->ref >> 24));
			return sl->idx;
		}
	}
	return 0;
}

int sl_kmap_reserve(struct sl_kmap *m, size_t n)
{
	/* a table sized for a much bigger batch is given back, not cleared */
	if (m->slots && m->mask + 1 > 65536 && (m->mask + 1) / 8 > n)
		sl_kmap_release(m);
	if ((n + 1) * 4 > (m->slots ? m->mask + 1 : 0) * 3) {
		int rc = rehash(m, n);
		if (rc)
			return rc;
	}
	m->want = n;
	return 0;
}

size_t sl_kmap_bytes(const struct sl_kmap *m)
{
	return (m->slots ? (m->mask + 1) * sizeof(*m->slots) : 0) + m->cap * sizeof(*m->keys) +
	       m->arena_cap;
}
