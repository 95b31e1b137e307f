/* SPDX-License-Identifier: MIT */
/*
 * Rendering the JSON files the mount shows: status/landing.json and each
 * batch's progress report. Every function returns a new string the caller
 * frees with free(); 0 or ENOMEM.
 */
#ifndef SLUICE_CORE_RENDER_H
#define SLUICE_CORE_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "land.h"

/*
 * One batch's progress report: Spark's StreamingQueryProgress keys in
 * Spark's order, plus sluice's own (numMalformedRows, nullCounts, backlog,
 * skippedByMaxFileAge, skippedAlreadySeen, lastError).
 */
struct sl_op_metrics;

struct sl_progress {
	const char *id, *run_id, *name;
	int64_t timestamp_ms;       /* trigger start */
	uint64_t batch_id;
	uint64_t num_input_rows;
	double input_rows_per_s, processed_rows_per_s;
	/* durationMs: each phase >= 0, and together at most ms_trigger */
	int64_t ms_latest_offset, ms_wal_commit, ms_add_batch, ms_commit_offsets, ms_trigger;
	const char *start_offset;   /* startOffset: the source's JSON text; NULL or "": null */
	const char *end_offset;     /* endOffset: the source's JSON text (offsets/N's) */
	const char *latest_offset;  /* latestOffset: the source's JSON text; NULL: null */
	const char *source_desc;    /* FileStreamSource[in/<path>] */
	const char *sink_desc;      /* FileSink[out/<query>] */
	uint64_t num_output_rows;
	uint64_t malformed;
	const char *const *null_names; /* NOT NULL columns ... */
	const uint64_t *null_counts;   /* ... and their null counts */
	size_t n_nulls;
	const struct sl_source_backlog *backlog; /* in the source's units; NULL: none */
	const char *sink_guarantee;  /* "exactly-once" or "at-least-once" */
	uint64_t skipped_age, skipped_seen; /* skippedByMaxFileAge, skippedAlreadySeen */
	const char *const *source_metric_names; /* sources[0].metrics: names ... */
	const uint64_t *source_metric_values;   /* ... and values (shown as strings, as Spark) */
	const double *source_metric_reals;      /* ... a real in place of a value, or NaN */
	size_t n_source_metrics;
	const char *last_error;     /* or NULL */
	/* eventTime, when the query has a watermark */
	bool has_event_time;
	bool et_rows;               /* the batch had event times: min, max, avg shown */
	int64_t et_min_ms, et_max_ms, et_avg_ms, et_wm_ms;
	/* stateOperators */
	const struct sl_op_metrics *ops;
	size_t nops;
};

/*
 * A progress report (one JSON line, or NULL/0 for none) with `lastError`
 * added: a new line in *out (free()).
 */
int sl_render_with_error(const char *report, size_t len, const char *error, size_t elen,
		       char **out, size_t *outlen);

/* Renders a progress report as one JSON line (new: free()). */
int sl_render_progress(const struct sl_progress *p, char **out, size_t *len);

/* Renders status/landing.json into a new malloc'd string (*out, *len). */
int sl_render_landing(const struct sl_land_counters *c, char **out, size_t *len);

#endif
