/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint log's keys (table SL_TABLE_QLOG) and the per-query meta
 * keys, shared by the engine and the sources and sinks that keep their own
 * entries in it (the file source's sources/0/K, its batch records and
 * cleanSource intents; the file sink's replaced parts). Layout of a key:
 *   OFFSET SIZE MEANING
 *   0      4    query id (big-endian)
 *   4      1    kind: 'b' batch record, 'o' offsets/N, 'c' commits/N,
 *               's' sources/0/K, 'm' metadata, 'd' compat record,
 *               'p' progress, 'e' lastError, 'x' cleanSource intents,
 *               'g' replaced parts to unlink, 'h' cumulative metrics,
 *               'r' lastError's code (core/engine/metrics.c), 'k' the
 *               kafka sink's recorded end offsets of batch n (sink_kafka.h)
 *   5      8    n: the batch id, source log index, or 0 (big-endian)
 * Values are the kind's (see core/engine/ckpt.h and the writers).
 */
#ifndef SLUICE_CORE_QLOG_H
#define SLUICE_CORE_QLOG_H

#include <stddef.h>
#include <stdint.h>

struct sl_catalog;
struct sl_txn;

/* Writes entry (qid, kind, n) in t. 0 or the catalog's error. */
int sl_qlog_put(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void *v,
		size_t len);

/*
 * Reads entry (qid, kind, n): *data is borrowed until t ends. SL_NOTFOUND
 * when there is none.
 */
int sl_qlog_get(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void **data,
		size_t *len);

/*
 * Entry (qid, kind, n) as text: copied into buf (len bytes) and NUL-ended.
 * SL_NOTFOUND when there is none, SL_ECORRUPT when it does not fit.
 */
int sl_qlog_get_text(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, char *buf,
		     size_t len);

/* Deletes entry (qid, kind, n); an absent one is no error (as sl_txn_del). */
int sl_qlog_del(struct sl_txn *t, uint32_t qid, char kind, uint64_t n);

/*
 * Calls fn(ctx, n, value length) for each entry of kind of query qid, in
 * order of n. fn returns 0 to go on, anything else stops the walk and is
 * returned. SL_ECORRUPT for a malformed key.
 */
int sl_qlog_each(struct sl_txn *t, uint32_t qid, char kind,
		 int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx);

/* The meta key "q.<qid>.<what>" into buf (len bytes; 48 suffice). */
void sl_qlog_meta_key(char *buf, size_t len, uint32_t qid, const char *what);

/*
 * Carries out the intents of kind ('x' cleanSource, 'g' replaced parts) of
 * query qid, oldest first: act(ctx, ids, n) on each entry's file ids (ids
 * borrowed for the call), then the entry is deleted in a transaction of its
 * own. Idempotent, so that a start redoes what a crash cut. Opens its own
 * transactions: the caller holds none. 0, or the first error.
 */
int sl_qlog_each_intent(struct sl_catalog *cat, uint32_t qid, char kind,
			int (*act)(void *ctx, const uint64_t *ids, size_t n), void *ctx);

/*
 * Packed entries: a long text (the file source's sources/0/K, a path per
 * file) is stored zstd-compressed as "\0Z" | its length u64 (big-endian) |
 * a zstd frame; text never starts with a NUL. sl_qlog_put_packed() packs
 * values of SL_QLOG_PACK_MIN bytes or more; readers of such a kind unpack
 * with sl_qlog_unpack() and size it with sl_qlog_unpacked_size().
 */
#define SL_QLOG_PACK_MIN 4096
int sl_qlog_put_packed(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void *v,
		       size_t len);
/* The length of stored value v (len bytes) once unpacked. */
size_t sl_qlog_unpacked_size(const void *v, size_t len);
/* v unpacked into a new buffer *out (free() it) of *outlen bytes. */
int sl_qlog_unpack(const void *v, size_t len, char **out, size_t *outlen);

#endif
