/* SPDX-License-Identifier: MIT */
/*
 * The source contract (CONNECTORS.md §1, Spark's DataSource V2 micro-batch
 * shape): one vtable per kind of source, the file source its first
 * implementation (source_file.h). The engine calls a source only
 * through struct sl_source_ops.
 *
 * An offset is JSON text. The engine logs the end offset of batch N
 * verbatim as the source line of offsets/N, in the transaction that plans
 * the batch, before anything is read, so that a replay reads the same range.
 *
 * Errors: 0, a positive errno, or a negative SL_E* code (core/base/err.h).
 * Threads: a source is used by one thread at a time (its query's).
 */
#ifndef SLUICE_CORE_SOURCE_H
#define SLUICE_CORE_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_batch;
struct sl_decode_stats;
struct sl_land;
struct sl_query_config;
struct sl_socket_reader;
struct sl_txn;

/* An open source: each implementation defines it (opaque to the engine). */
struct sl_source;

/* What open() needs: the query, and how far one run may go. */
struct sl_source_args {
	struct sl_land *l;               /* the landing namespace (catalog, blobs); borrowed */
	const struct sl_query_config *q; /* borrowed until stop() */
	uint32_t qid;                    /* the query's checkpoint id */
	uint64_t seq_limit;              /* admission: only what landed up to this sequence */
	bool ignore_caps;                /* trigger once: one batch takes everything */
	const atomic_bool *stop;         /* set by an unmount: a source that waits gives up; or NULL */
	struct sl_socket_reader *reader; /* socket in a mount: its reader, or NULL; borrowed */
};

/*
 * The longest offset text, with its NUL. A process source's offsets are
 * its program's JSON (canonical); a longer one is refused, naming the limit.
 */
#define SL_SOURCE_OFFSET_MAX 4096

/*
 * One batch's range (start, end], filled by latest_offset() or replay().
 * Offsets are NUL-terminated JSON text; "" is none (null).
 */
struct sl_source_range {
	bool replay;          /* the range was logged by an earlier run (batch N had no commit) */
	int64_t ts_ms;        /* on a replay: the batchTimestampMs logged with it */
	size_t nparts;        /* partitions of the range; 0: no new data */
	char start[SL_SOURCE_OFFSET_MAX]; /* startOffset: the previous batch's end, or "" */
	char end[SL_SOURCE_OFFSET_MAX];   /* endOffset: logged verbatim in offsets/N */
	char why[256];        /* when latest_offset() or replay() fail: why, or "" */
};

/*
 * A query's backlog in its source's own units, read from the catalog alone
 * (so that `sluice status` needs no running source): the file source
 * {"files","bytes"}, query {"batches"}, rate {"rows"}, a spool
 * {"lines","bytes"}.
 */
struct sl_source_backlog {
	bool known;          /* false: only the source's program could tell */
	const char *unit[2]; /* static names; unit[1] NULL when there is one */
	uint64_t v[2];       /* not yet planned, in those units */
	/* the source's own figures (a socket's spooledLines, spoolBytes), or NULL names */
	const char *metric[2];
	uint64_t mv[2];
};

/* Source metrics for the progress report. */
struct sl_source_metrics {
	struct sl_source_backlog backlog;   /* not yet planned */
	uint64_t skipped_age, skipped_seen; /* skippedByMaxFileAge, skippedAlreadySeen */
	/*
	 * latestOffset (Spark's reportLatestOffset): the source's JSON text,
	 * borrowed until its next prepare(); NULL: null
	 */
	const char *latest_offset;
	/* the source's own metrics: Spark's SourceProgress.metrics (shown as strings) */
	size_t nmetrics;
	struct {
		const char *name; /* static */
		uint64_t value;
		bool is_real;	  /* shown as real (Spark's Double, "1.0"), not value */
		double real;
	} metrics[4];
};

struct sl_source_ops {
	const char *name;  /* the format: "json", "csv" (the file source) */
	bool replayable;   /* the same range always reads the same rows */

	/*
	 * Opens a source for a query: validates what load could not, and sets up
	 * reading. 0 with *out new (free with stop()), or an error (nothing to free).
	 */
	int (*open)(const struct sl_source_args *a, struct sl_source **out);

	/*
	 * Optional (NULL for sources that answer from the catalog alone): called
	 * before each planning, outside any transaction, so that a source whose
	 * answers take time (a child process) asks them without holding the
	 * catalog's writer; replay() and latest_offset() then answer from what
	 * it found. On failure err (errlen bytes) says why.
	 */
	int (*prepare)(struct sl_source *s, char *err, size_t errlen);

	/*
	 * Replay: when batch N's range was logged and the batch has no commit,
	 * fills r (replay true) from the log, in t. SL_NOTFOUND when batch N
	 * was never planned.
	 */
	int (*replay)(struct sl_source *s, struct sl_txn *t, uint64_t batch,
		      struct sl_source_range *r);

	/*
	 * latest offset: the end of the next batch under the admission limit
	 * (the initial offset when the query has none yet), in t, the batch's
	 * planning transaction. r->nparts 0: nothing new (r->start is the last
	 * logged end, or "" before the first batch). Bookkeeping it may do in t
	 * (skip counts) stays even when no batch is logged.
	 */
	int (*latest_offset)(struct sl_source *s, struct sl_txn *t, struct sl_source_range *r);

	/*
	 * Logs batch `batch` with range r (from latest_offset() of the same t)
	 * in t: the source's own records, and what it must remember of having
	 * planned it. With r->nparts 0 it logs a batch of no data at the last end
	 * (a no-data batch: only when r->start is not ""), and r->start/end are
	 * set to it. ts_ms: batchTimestampMs, kept for a replay.
	 */
	int (*log)(struct sl_source *s, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		   struct sl_source_range *r);

	/*
	 * read (partition): part's rows appended to b, its counters added to st.
	 * The same range gives the same rows. On failure err (errlen bytes)
	 * names the input; SL_EMALFORMED is bad input (no retry).
	 */
	int (*read)(struct sl_source *s, size_t part, struct sl_batch *b,
		    struct sl_decode_stats *st, char *err, size_t errlen);

	/*
	 * The backlog of query q (id qid) in t, without an open source: for the
	 * progress report, `sluice status` and the metrics. 0, or the catalog's
	 * error (a query never started has none: out is then zero and known).
	 */
	int (*pending)(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
		       struct sl_source_backlog *out);

	/*
	 * The batch's catalog commit, in its transaction t: the source records
	 * that the range is done (and the skips it reports in m, taken). NULL:
	 * nothing to record.
	 */
	int (*commit_txn)(struct sl_source *s, struct sl_txn *t, uint64_t batch,
			  struct sl_source_metrics *m);

	/*
	 * commit (end): the batch's commit is durable; the source may release
	 * what it read. Also called once at start, before the first batch, for
	 * what a crash cut short. Opens its own transactions. Idempotent. NULL:
	 * nothing to release (rate, query).
	 */
	int (*commit)(struct sl_source *s);

	/* Progress's description ("FileStreamSource[in/<path>]") into buf. */
	void (*describe)(const struct sl_source *s, char *buf, size_t len);

	/* stop: releases everything. NULL ok. */
	void (*stop)(struct sl_source *s);
};

#endif
