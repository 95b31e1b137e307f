/* SPDX-License-Identifier: MIT */
/*
 * What the engine's files share of one query's run: the batch being run
 * (struct plan), planning (plan.c), the commit and its progress report
 * (commit.c). Never included outside core/engine/.
 */
#ifndef SLUICE_CORE_ENGINE_INT_H
#define SLUICE_CORE_ENGINE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink_ops.h"
#include "source.h"

struct sl_catalog;
struct sl_decode_stats;
struct sl_ops;
struct sl_ops_result;
struct sl_query_config;
struct sl_txn;

/* One query's run and its current batch N. */
struct plan {
	const atomic_bool *stop; /* set by an unmount: abandon the batch */
	const struct sl_query_config *q;
	uint32_t qid;
	const struct sl_source_ops *sops; /* the query's source ... */
	struct sl_source *src;            /* ... open for the run */
	const struct sl_sink_ops *kops;   /* the query's sink ... */
	struct sl_sink *sink;             /* ... open for the run */
	char run_id[40];         /* this run's id, for progress reports */
	int64_t prev_t0_ns;      /* the previous trigger's start (monotonic), 0 before the first */
	int64_t apply_ns;        /* time the plan's apply took (latestOffset) */
	int64_t ts_ms;           /* batchTimestampMs of a new batch */
	char uuid[40];           /* metadata id, for a query's first batch */
	const char *desc;        /* the config's compat description ('d') */
	size_t desc_len;
	/* out, reset by each run of the apply */
	uint64_t batch;
	bool recovered;          /* batch N had offsets and no commit */
	bool nodata;             /* a no-data batch: state to emit or evict */
	int64_t wm_ms;           /* the batch's watermark (batchWatermarkMs) */
	struct sl_source_range range; /* the batch's range: (start, end], its partitions */
};

/*
 * What a progress report is made of, besides the batch's plan and outcome.
 * Borrowed pointers, valid until the batch's commit ends.
 */
struct report {
	const struct plan *p;
	const struct sl_decode_stats *st;
	const struct sl_ops_result *ops; /* NULL for a stateless query */
	int64_t t0, t1;                  /* monotonic: trigger start, end of planning and offsets */
	char id[40];                     /* checkpoint/<q>/metadata's query id */
	struct sl_source_metrics m;      /* backlog read before the commit */
};

/* The batch's commit (sl_engine_commit_apply's argument). */
struct commit {
	const struct plan *p;
	struct sl_ops *ops;   /* the batch's state changes, or NULL */
	int64_t next_wm;      /* the watermark after the batch */
	uint64_t rows;        /* the batch's input rows, for `sluice status` */
	const struct report *report; /* what the progress report is made of */
	char *progress;       /* out: the batch's progress report (JSON, one line), or NULL; free() */
	size_t progress_len;
};

/* Clocks: CLOCK_MONOTONIC for durations, CLOCK_REALTIME for times of day (ns). */
int64_t sl_engine_mono_ns(void);
int64_t sl_engine_wall_ns(void);

/* A random (version 4) UUID's text into out. */
void sl_engine_make_uuid(char out[40]);

/*
 * Plans batch N of p in t (a catalog write): its replay when logged without
 * a commit, else the source's latest offset, logged in offsets/N before
 * anything is read, or a no-data batch, or nothing (p->range.nparts 0 and
 * p->nodata false).
 */
int sl_engine_plan_apply(struct sl_txn *t, void *arg);

/* Reads what a report needs of the catalog, before the commit. Best effort. */
void sl_engine_report_read(struct sl_catalog *cat, struct report *r);

/* Commits the batch of c (a struct commit) in t: the sink's output, commits/N, the report. */
int sl_engine_commit_apply(struct sl_txn *t, void *arg);

#endif
