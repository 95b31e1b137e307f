/* SPDX-License-Identifier: MIT */
/*
 * Prometheus metrics: status/metrics in the mount and `sluice status
 * --prometheus`, in the text exposition format (node_exporter's textfile
 * collector reads it). Each query's cumulative figures are kept in its
 * batches' commits, so that its counters survive restarts.
 */
#ifndef SLUICE_CORE_METRICS_H
#define SLUICE_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct sl_config;
struct sl_land_counters;
struct sl_land_latency;
struct sl_txn;

/* What one committed batch adds to its query's figures. */
struct sl_metrics_batch {
	uint64_t input_rows;     /* numInputRows */
	uint64_t output_rows;    /* sink.numOutputRows */
	uint64_t malformed_rows; /* numMalformedRows */
	uint64_t late_rows;      /* stateOperators' numRowsDroppedByWatermark, summed */
	uint64_t state_rows;     /* state rows after the batch (numRowsTotal, summed) */
	uint64_t state_bytes;    /* their bytes (memoryUsedBytes, summed) */
	int64_t duration_ms;     /* durationMs.triggerExecution */
};

/*
 * Adds batch b to query qid's cumulative figures, in t: the transaction
 * that commits the batch (so that a batch counts exactly once). 0 or the
 * catalog's error; SL_ECORRUPT for an unreadable record.
 */
int sl_metrics_add_batch(struct sl_txn *t, uint32_t qid, const struct sl_metrics_batch *b);

/*
 * Records rc, the error that stopped or delays query qid, in t: the
 * transaction that writes its lastError. Only its class is ever shown
 * (none, malformed, config, no_space, io, other), never the text.
 */
int sl_metrics_set_error(struct sl_txn *t, uint32_t qid, int rc);

/* What the metrics are rendered from, besides the catalog. */
struct sl_reload_state;

struct sl_metrics_input {
	const struct sl_config *cfg;             /* the queries shown, in its order */
	const struct sl_land_counters *landing;  /* committed counters, live in_flight */
	const struct sl_land_latency *latency;   /* landing commit latencies */
	int64_t now_ms;                          /* wall clock, for ages and lags */
	const struct sl_reload_state *reload;    /* the last config load; NULL: not shown */
};

/*
 * Renders every metric as Prometheus text into *out (new: free()), reading
 * the queries' figures in t (a read txn; NULL for a data dir with no catalog
 * yet: every query shows zeros). 0, ENOMEM or a catalog error.
 */
int sl_metrics_render(struct sl_txn *t, const struct sl_metrics_input *in, char **out,
		      size_t *len);

#endif
