/* SPDX-License-Identifier: MIT */
/*
 * The stateful part of a batch, between decoding and the sink: event-time
 * statistics and the watermark, the late-row filter, dropDuplicates and
 * groupBy/aggregate, with their state in the catalog (core/state.h).
 *
 * A batch runs in two steps. sl_ops_process() reads the state as of the
 * batch's start (a read transaction), computes the output rows and every
 * state change, and touches nothing durable; sl_ops_apply() then writes
 * those changes inside the batch's commit transaction, next to commits/N.
 * A crash in between leaves the state as it was, and the batch re-runs
 * over the same files with the same watermark, to the same result. Only
 * the query's own engine thread writes its state, so what process() read
 * is still there when apply() runs.
 */
#ifndef SLUICE_CORE_OPS_H
#define SLUICE_CORE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "watermark.h"

struct sl_query_config;
struct sl_txn;

/* One stateful operator's figures for a batch, as Spark's stateOperators[]. */
struct sl_op_metrics {
	const char *name;       /* "dedupe", "dedupeWithinWatermark", "stateStoreSave" */
	uint64_t rows_total;    /* state rows after the batch */
	uint64_t rows_updated;  /* state rows written by the batch */
	uint64_t rows_removed;  /* state rows evicted by the watermark */
	uint64_t bytes;         /* bytes of the state (keys and values) after the batch */
	uint64_t dropped_wm;    /* input rows dropped as late */
	uint64_t dropped_dup;   /* dedup: rows dropped as duplicates */
	bool is_dedup;
};

struct sl_ops_result {
	int64_t wm_ms;                     /* the watermark this batch used */
	int64_t next_wm_ms;                /* the watermark after it (commits/N) */
	struct sl_watermark_stats et;      /* event times of the batch's rows */
	struct sl_op_metrics m[2];         /* dedup first, then aggregation */
	size_t nm;
};

struct sl_ops;

/*
 * Operators of q (qid: its query id). Returns 0, ENOMEM, or ENOTSUP with
 * err naming what this version cannot do (min/max of a STRING column).
 */
int sl_ops_new(const struct sl_query_config *q, uint32_t qid, struct sl_ops **out, char *err,
	       size_t errlen);
void sl_ops_free(struct sl_ops *o);

/* True when q needs sl_ops at all (a watermark or a stateful operator). */
bool sl_ops_needed(const struct sl_query_config *q);

/*
 * Runs the operators over in (the decoded rows; rows may be dropped from it
 * in place) with the batch's watermark wm_ms and the state as of t. *out
 * gets the rows for the sink (q->out's schema): in itself, or a batch of
 * the operators (borrowed until the next process or free); in the latter
 * case in may come back emptied, its rows consumed. Returns 0,
 * ENOMEM, a catalog error, or SL_EMALFORMED with err set (an aggregate
 * that overflows).
 */
int sl_ops_process(struct sl_ops *o, struct sl_txn *t, int64_t wm_ms, struct sl_batch *in,
		   const struct sl_batch **out, struct sl_ops_result *res, char *err,
		   size_t errlen);

/* Frees the output rows of the last process() when many (they were formatted). */
void sl_ops_trim(struct sl_ops *o);

/* Writes the state changes of the last process() in t (may run twice on fresh txns). */
int sl_ops_apply(struct sl_ops *o, struct sl_txn *t);

/*
 * Whether a batch without new data is due at watermark wm_ms: some state
 * of q would be emitted or evicted by it.
 */
int sl_ops_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t, int64_t wm_ms,
	       bool *due);

#endif
