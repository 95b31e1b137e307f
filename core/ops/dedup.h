/* SPDX-License-Identifier: MIT */
/*
 * dropDuplicates and dropDuplicatesWithinWatermark: the first row per key,
 * across batches, until the watermark passes it.
 * The pipeline in ops.c drives it; its state lives in the catalog's qstate
 * table (state.c). Handles are new (free with the _free function); batches
 * and keep masks are borrowed for the call.
 */
#ifndef SLUICE_CORE_DEDUP_H
#define SLUICE_CORE_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "ops.h"

struct sl_query_config;
struct sl_txn;
struct sl_dedup;

int sl_dedup_new(const struct sl_query_config *q, uint32_t qid, struct sl_dedup **out);
void sl_dedup_free(struct sl_dedup *d);
/* Clears keep[row] for each kept row of b that repeats a key. */
int sl_dedup_process(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b,
		     uint8_t *keep, int64_t wm_ms, struct sl_op_metrics *m);
int sl_dedup_apply(struct sl_dedup *d, struct sl_txn *t);
/*
 * sl_dedup_process() in steps, for a pipeline: begin, rows over [from, to)
 * in order (t used), sort (no catalog), end (t used: the eviction walk).
 */
int sl_dedup_begin(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b);
int sl_dedup_rows(struct sl_dedup *d, struct sl_txn *t, const struct sl_batch *b, uint8_t *keep,
		  size_t from, size_t to, int64_t wm_ms, struct sl_op_metrics *m);
int sl_dedup_sort(struct sl_dedup *d);
int sl_dedup_end(struct sl_dedup *d, struct sl_txn *t, int64_t wm_ms, struct sl_op_metrics *m);
int sl_dedup_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t, int64_t wm_ms,
		 bool *due);

#endif
