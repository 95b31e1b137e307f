/* SPDX-License-Identifier: MIT */
/*
 * A map from byte-string keys to dense indexes 0..n-1, by open addressing
 * with linear probing: the per-batch table of dedup keys and aggregation
 * groups. Keys are copied into one arena; callers keep per-key values in
 * their own arrays, indexed by the dense index. Not thread-safe.
 */
#ifndef SLUICE_CORE_KMAP_H
#define SLUICE_CORE_KMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_kmap_slot;

/* Embed it; sl_kmap_init() makes it empty without allocating. */
struct sl_kmap {
	struct sl_kmap_slot *slots; /* mask + 1 slots, a power of two; NULL when empty */
	size_t mask;
	uint64_t *keys;  /* n entries: arena offset << 24 | length */
	size_t n, cap;   /* keys in use / allocated */
	unsigned char *arena;
	size_t arena_len, arena_cap;
	size_t want;     /* keys sl_kmap_reserve() expects: keys[] and the arena grow to it */
};

/* Keys longer than this are refused (EOVERFLOW). */
#define SL_KMAP_KEY_MAX ((1u << 24) - 1)

/* A 64-bit hash of len bytes (also used for state keys too long for LMDB). */
uint64_t sl_kmap_hash(const void *key, size_t len, uint64_t seed);

void sl_kmap_init(struct sl_kmap *m);
void sl_kmap_release(struct sl_kmap *m);
/* Empties the map, keeping its memory for the next batch. */
void sl_kmap_clear(struct sl_kmap *m);

/*
 * Finds key (len bytes); when absent, adds a copy of it. *idx gets its
 * index and *added whether it was new. Returns 0, ENOMEM or EOVERFLOW
 * (key too long, or 2^32 keys); the map is unchanged on failure.
 */
int sl_kmap_upsert(struct sl_kmap *m, const void *key, size_t len, uint32_t *idx, bool *added);

/*
 * Makes room for n keys in all without growing again; call it on an empty
 * map: one sized for many more keys gives its memory back first, so that
 * small batches after a big one do not clear a big table. ENOMEM: the map
 * is valid, maybe smaller.
 */
int sl_kmap_reserve(struct sl_kmap *m, size_t n);

/*
 * For a loop over many keys: sl_kmap_hash_key() hashes a key as the map
 * does, sl_kmap_prefetch() asks the CPU for the slot it will probe first,
 * and sl_kmap_upsert_hashed() is sl_kmap_upsert() with that hash. Hashing
 * and prefetching a few keys ahead hides the cache misses of a big table.
 */
static inline uint64_t sl_kmap_hash_key(const void *key, size_t len)
{
	return sl_kmap_hash(key, len, 0);
}
static inline void sl_kmap_prefetch(const struct sl_kmap *m, uint64_t h)
{
	if (m->slots)
		__builtin_prefetch((const char *)m->slots + (h & m->mask) * 16);
}
int sl_kmap_upsert_hashed(struct sl_kmap *m, const void *key, size_t len, uint64_t h,
			  uint32_t *idx, bool *added);

/*
 * A key made ahead of its lookup: row's key at buf[off, end) of the
 * caller's key buffer (kept by offset: the buffer may move as more keys are
 * added), hashed and its slot prefetched by sl_kmap_ahead_key().
 */
struct sl_kmap_ahead {
	size_t row, off, len;
	uint64_t h;
};
static inline struct sl_kmap_ahead sl_kmap_ahead_key(const struct sl_kmap *m, size_t row,
						     const unsigned char *buf, size_t off,
						     size_t end)
{
	struct sl_kmap_ahead a = {row, off, end - off, sl_kmap_hash_key(buf + off, end - off)};
	sl_kmap_prefetch(m, a.h);
	return a;
}
/*
 * The second step of that: once the slot is in cache, prefetches the key's
 * bytes of the first slot whose tag matches h, and returns its index + 1
 * (0 when none: the key is probably new), so that the caller can prefetch
 * its own value too. A hint only.
 */
uint32_t sl_kmap_peek(const struct sl_kmap *m, uint64_t h);

/* Finds key: true with *idx set, or false. */
bool sl_kmap_find(const struct sl_kmap *m, const void *key, size_t len, uint32_t *idx);

/*
 * Gives the slot table back, keeping the keys (sl_kmap_key() and
 * sl_kmap_count() still answer): for when a batch's lookups are over and
 * its keys are only read in order, so that a sort or the state's writes
 * that follow do not add their memory to the table's. An upsert builds
 * the table again from the keys; sl_kmap_find() stays right meanwhile but
 * reads every key, and sl_kmap_peek() finds nothing (it is a hint).
 */
void sl_kmap_drop_slots(struct sl_kmap *m);

/* Number of keys. */
static inline size_t sl_kmap_count(const struct sl_kmap *m) { return m->n; }

/* Key idx (< count): borrowed until the map next grows, clears or is released. */
static inline const unsigned char *sl_kmap_key(const struct sl_kmap *m, uint32_t idx, size_t *len)
{
	*len = (size_t)(m->keys[idx] & SL_KMAP_KEY_MAX);
	return m->arena + (m->keys[idx] >> 24);
}

/*
 * For step i of a walk over n keys in an order of their own (order[], sorted
 * as the state's puts are), where each key is a cache miss in keys[] and
 * another in the arena: asks for the entry in keys[] of the key
 * 2 * SL_KMAP_AHEAD steps on, and for the bytes of the one SL_KMAP_AHEAD
 * steps on (whose entry came by then). A caller with values of its own
 * asks for order[i + SL_KMAP_AHEAD]'s itself.
 */
#define SL_KMAP_AHEAD 8

static inline void sl_kmap_prefetch_walk(const struct sl_kmap *m, const uint32_t *order, size_t i,
					 size_t n)
{
	if (i + 2 * SL_KMAP_AHEAD < n)
		__builtin_prefetch(&m->keys[order[i + 2 * SL_KMAP_AHEAD]]);
	if (i + SL_KMAP_AHEAD < n)
		__builtin_prefetch(m->arena + (m->keys[order[i + SL_KMAP_AHEAD]] >> 24));
}

/* Bytes the map holds (slots, key index and arena), for memoryUsedBytes. */
size_t sl_kmap_bytes(const struct sl_kmap *m);


#endif
