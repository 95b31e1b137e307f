/* SPDX-License-Identifier: MIT */
/*
 * The socket source's spool (CONNECTORS §4): received lines, kept durably in
 * the catalog until the batch that read them has committed.
 *
 * Why the catalog and not a file of our own: a chunk of lines and the count
 * that makes them visible (the offset) are written in one LMDB transaction,
 * so a kill -9 at any point leaves either both or neither; trimming is one
 * transaction too, keyed by the end the last committed batch recorded in its
 * own commit. No torn tail to repair, no count to rebuild by a scan, and the
 * reader's commits join the group commits of landings (one fsync for both).
 *
 * Layout, in the checkpoint log (qlog.h), kind 'l', n = the index (from 0)
 * of the chunk's first line; one chunk per durable spool commit:
 *   OFFSET SIZE MEANING
 *   0      1    version: 1
 *   1      4    lines in the chunk (big-endian), >= 1
 *   5      8    base receive time, ms since the epoch (big-endian, signed)
 *   13     ...  per line: varint length, zigzag varint of its receive time
 *               minus the previous line's (the first: minus the base), then
 *               the line's bytes (no terminator)
 * meta "q.<qid>.spool_n": lines ever spooled (the latest offset);
 *      "q.<qid>.spool_bytes": bytes of the chunks still in the spool;
 *      "q.<qid>.spool_done": the end of the last committed batch: lines
 *      below it may leave the spool.
 * Thread rules: any thread; the functions taking a catalog open their own
 * transactions (the caller holds none).
 */
#ifndef SLUICE_CORE_SPOOL_H
#define SLUICE_CORE_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_catalog;
struct sl_txn;

#define SL_SPOOL_CHUNK_HEAD 13

/* A chunk being built: a caller-embedded struct (init with {0}, release). */
struct sl_spool_chunk {
	unsigned char *p; /* the encoded chunk, head included */
	size_t len, cap;  /* bytes used, allocated */
	uint32_t nlines;  /* lines added */
	int64_t prev_ms;  /* receive time of the last line added */
};

/* Appends one line (len bytes) received at ts_ms. 0 or ENOMEM (chunk unchanged). */
int sl_spool_chunk_add(struct sl_spool_chunk *c, const char *line, size_t len, int64_t ts_ms);
/* Empties the chunk, keeping its buffer. */
void sl_spool_chunk_clear(struct sl_spool_chunk *c);
void sl_spool_chunk_release(struct sl_spool_chunk *c);

/*
 * Calls fn(ctx, index, line, len, ts_ms) for each line of the encoded chunk
 * v (vlen bytes) whose first line has index first, skipping lines below lo
 * and stopping at hi. line is borrowed for the call. fn's non-zero result
 * stops the walk and is returned; SL_ECORRUPT for a malformed chunk.
 */
int sl_spool_chunk_each(const void *v, size_t vlen, uint64_t first, uint64_t lo, uint64_t hi,
			int (*fn)(void *ctx, uint64_t idx, const char *line, size_t len,
				  int64_t ts_ms),
			void *ctx);

/*
 * Spools chunk c of query qid in one durable commit: the chunk at the next
 * line index, spool_n and spool_bytes grown. *spooled (may be NULL) gets
 * spool_n after it. 0 or the catalog's error (ENOSPC, EIO...): then nothing
 * was spooled.
 */
int sl_spool_append(struct sl_catalog *cat, uint32_t qid, const struct sl_spool_chunk *c,
		    uint64_t *spooled);

/* What the spool of a query holds, read in t. */
struct sl_spool_stats {
	uint64_t spooled; /* lines ever spooled: the latest offset */
	uint64_t done;	  /* the end of the last committed batch */
	uint64_t bytes;	  /* bytes of the chunks still in the spool */
};
int sl_spool_stats(struct sl_txn *t, uint32_t qid, struct sl_spool_stats *out);

/*
 * The largest end in (start, spooled] that falls on a chunk boundary and
 * keeps the lines of (start, end] within about max_bytes of chunks (always
 * at least one chunk), into *end; start itself when nothing was spooled
 * after it. Read in t.
 */
int sl_spool_batch_end(struct sl_txn *t, uint32_t qid, uint64_t start, uint64_t max_bytes,
		       uint64_t *end);

/*
 * Calls fn for each spooled line with index in [lo, hi), in order, in t
 * (lines are borrowed until t ends). SL_ECORRUPT when a line of the range
 * is missing from the spool.
 */
int sl_spool_read(struct sl_txn *t, uint32_t qid, uint64_t lo, uint64_t hi,
		  int (*fn)(void *ctx, uint64_t idx, const char *line, size_t len, int64_t ts_ms),
		  void *ctx);

/* Records in t (a batch's commit) that lines below done may leave the spool. */
int sl_spool_set_done(struct sl_txn *t, uint32_t qid, uint64_t done);

/*
 * Deletes the chunks whose every line is below spool_done, in transactions
 * of their own. Idempotent: a start redoes what a crash cut. *freed (may be
 * NULL) gets the bytes that left. 0 or the catalog's error.
 */
int sl_spool_trim(struct sl_catalog *cat, uint32_t qid, uint64_t *freed);

#endif
