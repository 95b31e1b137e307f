/* SPDX-License-Identifier: MIT */
/*
 * JSON: the only user of jansson. Loads sluice.json and renders the JSON
 * files the mount shows.
 */
#ifndef SLUICE_CORE_JSON_H
#define SLUICE_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "land.h"

/*
 * Loads and validates DATA_DIR/sluice.json; a missing file is an empty
 * config. Returns 0 with *out new (free it with sl_config_free), SL_ECONFIG
 * with one line in err starting with the field path (e.g.
 * "queries.dev.source.schema: unknown type 'NOTATYPE'"; a syntax error reads
 * "PATH:LINE:COLUMN: message"), or ENOMEM. Nothing is logged. Thread-safe.
 */
int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen);

/*
 * The same from the text of a sluice.json in memory (len bytes, no NUL
 * needed); origin names the document in syntax errors. For fuzzers, and for
 * re-reading the config a checkpoint was written with.
 */
int sl_config_parse(const char *text, size_t len, const char *origin, struct sl_config **out,
		    char *err, size_t errlen);

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
	bool has_start;             /* startOffset is {"logOffset":start}, else null */
	uint64_t start, end;        /* source log offsets */
	const char *source_desc;    /* FileStreamSource[in/<path>] */
	const char *sink_desc;      /* FileSink[out/<query>] */
	uint64_t num_output_rows;
	uint64_t malformed;
	const char *const *null_names; /* NOT NULL columns ... */
	const uint64_t *null_counts;   /* ... and their null counts */
	size_t n_nulls;
	uint64_t backlog_files, backlog_bytes;
	uint64_t skipped_age, skipped_seen; /* skippedByMaxFileAge, skippedAlreadySeen */
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
int sl_json_with_error(const char *report, size_t len, const char *error, size_t elen,
		       char **out, size_t *outlen);

/* Renders a progress report as one JSON line (new: free()). */
int sl_json_progress(const struct sl_progress *p, char **out, size_t *len);

/* Renders status/landing.json into a new malloc'd string (*out, *len). */
int sl_json_landing(const struct sl_land_counters *c, char **out, size_t *len);

#endif
