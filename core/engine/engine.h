/* SPDX-License-Identifier: MIT */
/*
 * The engine: Spark Structured Streaming's micro-batch protocol, over a
 * query's source and sink contracts (core/sources/source.h,
 * core/sinks/sink_ops.h). Per batch N of a query:
 *   1. plan (plan.c): the source's latest offset under its admission limit
 *      and, in one durable transaction, the source's log of the range and
 *      offsets/N;
 *   2. read the range's partitions (the source), run the operators, let
 *      the sink stage its output (engine.c);
 *   3. one transaction (commit.c): the sink's output made visible, the
 *      range released by the source, commits/N, the progress report, the
 *      next batch id.
 * A batch with offsets and no commit re-runs over exactly its logged range.
 * Defined in engine.c (running queries) and ckpt.c (reading the checkpoint
 * log); the mount's threads are trigger.h's. Pointers passed in are
 * borrowed for the call; nothing returned needs freeing except as stated.
 */
#ifndef SLUICE_CORE_ENGINE_H
#define SLUICE_CORE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


struct sl_config;
struct sl_land;
struct sl_query_config;
struct sl_socket_reader;
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
	const atomic_bool *stop; /* checked between batches; NULL: never */
	/*
	 * When the source had nothing new: NULL returns; else called, it waits
	 * (pollInterval) and returns true to ask the source again with it still
	 * open (a process source keeps its child), false to return.
	 */
	bool (*idle)(void *ctx);
	void *idle_ctx;
	/* NULL, or called after each batch's commit (a mount wakes query sources) */
	void (*committed)(void *ctx);
	void *committed_ctx;
	struct sl_socket_reader *reader; /* a mount's socket query: its reader; NULL otherwise */
};

/*
 * Runs batches of query q: its uncommitted batch first, then new ones
 * while files are left (within lim). 0 when it ran out of work; an error
 * otherwise (r->error names it; the query's lastError is kept too).
 */
int sl_engine_run_query(struct sl_land *l, const struct sl_query_config *q,
			const struct sl_engine_limits *lim, struct sl_engine_report *r);

/*
 * Rendered checkpoint files, as Spark lays them out (no trailing newline).
 * kind: 'o' offsets/N, 'c' commits/N, 's' sources/0/N, 'm' metadata (n 0),
 * 'p' progress report N, 'e' lastError (n 0); keys in core/sources/qlog.h.
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

/*
 * A query's backlog in its source's own units, from the catalog alone:
 * the file source {"files","bytes"}, query {"batches"}, rate {"rows"}.
 * known false: only the source's program could tell. A query never started
 * has an empty one.
 */
struct sl_engine_backlog {
	bool known;
	const char *unit[2]; /* static; unit[1] NULL when there is one */
	uint64_t v[2];
	const char *metric[2]; /* the source's own figures (static names), or NULL */
	uint64_t mv[2];
};
int sl_engine_backlog(struct sl_txn *t, const struct sl_query_config *q,
		      struct sl_engine_backlog *out);

/* The guarantee q's sink declares: "exactly-once" or "at-least-once" (static). */
const char *sl_engine_guarantee(const struct sl_query_config *q);

/* Calls fn for every query ever started (name, id), in name order. */
int sl_engine_queries(struct sl_txn *t, int (*fn)(void *ctx, const char *name, uint32_t qid),
		      void *ctx);
/* Calls fn for each rendered entry of kind for query qid, in order of n. */
int sl_engine_checkpoint_each(struct sl_txn *t, uint32_t qid, char kind,
			      int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx);

#endif
