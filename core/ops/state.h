/* SPDX-License-Identifier: MIT */
/*
 * Operator state in the catalog's qstate table: the dedup keys and
 * aggregation groups of a query, keyed by row keys (core/rowkey.h) so that
 * a walk in key order meets the entries with the oldest event time first.
 *
 * Layout (integers big-endian in keys):
 *   key:   qid u32 | op u8 | row key                     (row key <= SL_STATE_KEY_INLINE)
 *          qid u32 | op u8 | lead | 0x02 | hash 16 bytes (longer row keys)
 *   value: the operator's bytes                          (inline key)
 *          the operator's bytes | row key | u32 length of the operator's bytes
 * where lead is the row key's first column (its eviction order: a window or
 * an event time) kept in clear. A row key's first byte is a tag (0x00 or
 * 0x01), so 0x02 after the lead marks a hashed key; the full row key in
 * the value is compared on every lookup.
 */
#ifndef SLUICE_CORE_STATE_H
#define SLUICE_CORE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

struct sl_txn;

#define SL_STATE_KEY_INLINE 400

enum sl_state_op {
	SL_STATE_DEDUP = 'D',  /* dedup key -> "" or expiresAt i64 (within the watermark) */
	SL_STATE_EXPIRY = 'E', /* expiresAt u64 biased | dedup storage key -> "" */
	SL_STATE_AGG = 'A',    /* window and group key -> aggregate states */
};

/*
 * How long the clear lead of a row key is: lead_payload bytes after a
 * non-null first tag (16 for a window, 8 for an event time), or 0 for no
 * lead.
 */
struct sl_state_space {
	uint32_t qid;
	char op;
	size_t lead_payload;
	bool raw; /* keys are never hashed (at most SL_STATE_KEY_INLINE + 16 bytes) */
};

/* A storage key: what follows qid | op in the table. */
struct sl_state_skey {
	unsigned char k[5 + SL_STATE_KEY_INLINE + 16];
	size_t len; /* including the 5-byte prefix */
	bool hashed;
};

/* Whether row keys of rklen bytes are stored as a hash (else as themselves, after qid | op). */
static inline bool sl_state_key_hashed(const struct sl_state_space *sp, size_t rklen)
{
	return rklen > SL_STATE_KEY_INLINE && !(sp->raw && rklen <= SL_STATE_KEY_INLINE + 16);
}

/* Builds the storage key of row key rk. */
void sl_state_skey(const struct sl_state_space *sp, const void *rk, size_t rklen,
		   struct sl_state_skey *out);

/*
 * Looks up row key rk: 0 with *val and *vlen the operator's bytes (borrowed
 * until the txn ends), SL_NOTFOUND, or SL_ECORRUPT (including a hash
 * collision of two long keys, which 128 bits make theoretical).
 */
int sl_state_get(struct sl_txn *t, const struct sl_state_space *sp, const void *rk, size_t rklen,
		 const void **val, size_t *vlen);

/* Stores val (vlen bytes) for row key rk. */
int sl_state_put(struct sl_txn *t, const struct sl_state_space *sp, const void *rk, size_t rklen,
		 const void *val, size_t vlen);

/* Bytes an entry takes (key + value) in the table, for memoryUsedBytes. */
size_t sl_state_entry_bytes(size_t rklen, size_t vlen);

/*
 * Walks the entries of sp whose row key starts with the (clear, at most
 * lead-long) prefix rkp, in storage-key order. fn gets the storage key
 * (all of it, for sl_txn_del), the full row key and the operator's bytes;
 * it returns non-zero to stop, and that value is returned.
 */
int sl_state_each(struct sl_txn *t, const struct sl_state_space *sp, const void *rkp,
		  size_t plen,
		  int (*fn)(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
			    const void *val, size_t vlen),
		  void *ctx);

/* Deletes the entry with this storage key (as sl_state_each() gave it). */
int sl_state_del_raw(struct sl_txn *t, const void *skey, size_t sklen);

/*
 * Storage keys an eviction walk found, deleted with the batch's commit.
 * Zero-initialise; sl_state_evict_clear() empties it keeping its memory.
 */
struct sl_state_evict {
	struct sl_strbuf keys; /* each a u32 length (host order), then its bytes */
};
/* 0 or ENOMEM. */
int sl_state_evict_add(struct sl_state_evict *ev, const void *skey, size_t sklen);
static inline void sl_state_evict_clear(struct sl_state_evict *ev)
{
	ev->keys.len = 0;
	ev->keys.oom = false;
}
static inline void sl_state_evict_release(struct sl_state_evict *ev)
{
	sl_strbuf_release(&ev->keys);
}
/* Deletes every key of ev in t. */
int sl_state_evict_apply(const struct sl_state_evict *ev, struct sl_txn *t);

/* Counters of an operator's state: rows and bytes, in the meta table. */
int sl_state_counters(struct sl_txn *t, const struct sl_state_space *sp, uint64_t *rows,
		      uint64_t *bytes);
int sl_state_set_counters(struct sl_txn *t, const struct sl_state_space *sp, uint64_t rows,
			  uint64_t bytes);

/* Storage keys compare like memcmp, the shorter first. */
int sl_state_skey_cmp(const void *a, size_t alen, const void *b, size_t blen);

#endif
