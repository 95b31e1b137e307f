/* SPDX-License-Identifier: MIT */
/*
 * The engine: Spark Structured Streaming's micro-batch protocol over each
 * query's index. Per batch N of a query:
 *   1. plan from the index (landing order, caps, age), and in one durable
 *      transaction write batch N's record, offsets/N and sources/0/K;
 *   2. read and decode the planned files, format the output parts, write
 *      the large ones to new blobs and fsync them;
 *   3. one transaction: the parts' names under out/<query>/, commits/N, the
 *      files released from the query's hold, the next batch id.
 * A batch with offsets and no commit re-runs over exactly its logged files.
 */
#ifndef SLUICE_CORE_ENGINE_H
#define SLUICE_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_config;
struct sl_land;
struct sl_query_config;
struct sl_txn;

/* What one query did in a run. */
struct sl_engine_report {
	const char *query;   /* its name; borrowed from the config */
	uint64_t batches;    /* batches committed in this run */
	uint64_t rows;       /* input rows of those batches */
	uint64_t malformed;  /* malformed input rows (kept or dropped) */
	int rc;              /* 0, or why the query stopped */
	char error[512];     /* when rc != 0: one line naming the file and line */
};

typedef void (*sl_engine_report_fn)(const struct sl_engine_report *r, void *ctx);

/*
 * `sluice run --available-now`: each query of cfg runs its uncommitted batch
 * first, then batches over everything landed when it started (caps
 * respected), then stops. fn is called once per query. Returns 0 when every
 * query finished, else the first query's error.
 */
int sl_engine_run_available_now(struct sl_land *l, const struct sl_config *cfg,
				sl_engine_report_fn fn, void *ctx);

/*
 * Refuses a config change a query's checkpoint cannot survive (DESIGN
 * "Changes between starts"): SL_ECONFIG with err naming the field, or
 * SL_ECORRUPT / SL_EVERSION for an unreadable record (err set too). Queries
 * never started pass. Run before starting queries; sl_engine_run_query()
 * checks its own query again.
 */
int sl_engine_check_changes(struct sl_land *l, const struct sl_config *cfg, char *err,
			    size_t errlen);

/* How far one call of sl_engine_run_query() goes. */
struct sl_engine_limits {
	uint64_t seq_limit;     /* plan only files landed up to this sequence number */
	uint64_t max_batches;   /* stop after this many batches; 0: until nothing is left */
	bool ignore_caps;       /* trigger once: the batch takes every file */
	const volatile bool *stop; /* checked between batches; NULL: never */
};

/*
 * Runs batches of query q: its uncommitted batch first, then new ones
 * while files are left (within lim). 0 when it ran out of work; an error
 * otherwise (r->error names it; the query's lastError is kept too).
 */
int sl_engine_run_query(struct sl_land *l, const struct sl_query_config *q,
			const struct sl_engine_limits *lim, struct sl_engine_report *r);

/*
 * The engine inside a mount: one thread per query, woken by landings
 * (sl_engine_wake, installed with sl_land_set_wakeup) or its trigger's
 * timer. cfg is borrowed until sl_engine_stop().
 */
struct sl_engine;
int sl_engine_start(struct sl_land *l, const struct sl_config *cfg, struct sl_engine **out);
/* Stops the threads after their current batch. NULL ok. */
void sl_engine_stop(struct sl_engine *e);
/* Wakes every event-driven query: a file landed. ctx is the engine. */
void sl_engine_wake(void *ctx);

/*
 * Rendered checkpoint files, as Spark lays them out (no trailing newline).
 * kind: 'o' offsets/N, 'c' commits/N, 's' sources/0/N, 'm' metadata (n 0).
 * *data is borrowed until the txn ends.
 */
int sl_engine_checkpoint_get(struct sl_txn *t, uint32_t qid, char kind, uint64_t n,
			     const void **data, size_t *len);

/*
 * True when blob id belongs to an out/ part a complete-mode batch replaced
 * and the next start unlinks (`sluice check` does not count it a leak).
 */
bool sl_engine_blob_pending(struct sl_txn *t, uint64_t id);

/* What `sluice status` shows of a query. */
struct sl_engine_status {
	bool has_batch;       /* a batch committed */
	uint64_t batch;       /* the last committed batch id */
	uint64_t rows;        /* its input rows */
	int64_t wm_ms;        /* the watermark after it (ms; 0 before any event time) */
	char error[512];      /* lastError, or "" */
};
int sl_engine_status(struct sl_txn *t, uint32_t qid, struct sl_engine_status *out);

/* Calls fn for every query ever started (name, id), in name order. */
int sl_engine_queries(struct sl_txn *t, int (*fn)(void *ctx, const char *name, uint32_t qid),
		      void *ctx);
/* Calls fn for each rendered entry of kind for query qid, in order of n. */
int sl_engine_checkpoint_each(struct sl_txn *t, uint32_t qid, char kind,
			      int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx);

#endif
