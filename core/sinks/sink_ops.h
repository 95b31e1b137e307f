/* SPDX-License-Identifier: MIT */
/*
 * The sink contract (CONNECTORS.md §2): one vtable per kind of sink, the
 * file sink its first implementation (sink_file.h). The engine calls a sink
 * only through struct sl_sink_ops. Per batch: write() stages the output
 * rows, commit() makes them visible in the batch's catalog transaction,
 * end() releases the staging (dropping it when the batch did not commit).
 * sink.h is the file sink's formatter, stage.h its staging thread.
 *
 * Errors: 0, a positive errno, or a negative SL_E* code (core/base/err.h).
 * Threads: a sink is used by one thread at a time (its query's); what
 * write() starts may run on a thread of its own until commit() waits for it.
 */
#ifndef SLUICE_CORE_SINK_OPS_H
#define SLUICE_CORE_SINK_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_batch;
struct sl_land;
struct sl_query_config;
struct sl_txn;

/* An open sink: each implementation defines it (opaque to the engine). */
struct sl_sink;

enum sl_sink_guarantee {
	SL_SINK_EXACTLY_ONCE,  /* a replay of a batch id is harmless */
	SL_SINK_AT_LEAST_ONCE, /* a replay repeats the batch's output */
};

/* What open() needs. */
struct sl_sink_args {
	struct sl_land *l;               /* the namespace out/ is part of; borrowed */
	const struct sl_query_config *q; /* borrowed until close() */
	uint32_t qid;                    /* the query's checkpoint id */
	const atomic_bool *stop;         /* set when the run must end (unmount); NULL: never */
};

/* What a committed batch wrote, for the progress report. */
struct sl_sink_result {
	uint64_t rows;   /* numOutputRows */
	int64_t done_ns; /* CLOCK_MONOTONIC when the output was written */
};

struct sl_sink_ops {
	const char *name;                 /* the format: "file" */
	enum sl_sink_guarantee guarantee; /* declared, shown in status */

	/* Opens a sink for a query. 0 with *out new (free with close()), or an error. */
	int (*open)(const struct sl_sink_args *a, struct sl_sink **out);

	/*
	 * write (batch id, rows): stages the batch's output; a replay of the same
	 * batch id must be harmless. rows is borrowed until spent(spent_ctx) is
	 * called (once, when they are formatted; spent may be NULL) or end().
	 * The caller holds no catalog transaction. end() is due even when this
	 * fails.
	 */
	int (*write)(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows,
		     void (*spent)(void *ctx), void *spent_ctx);

	/*
	 * commit (batch id): waits for what write() staged and makes it visible
	 * in t, the batch's catalog transaction; res says what it wrote. May run
	 * more than once for one batch (the transaction retried): each run
	 * starts over.
	 */
	int (*commit)(struct sl_sink *s, struct sl_txn *t, struct sl_sink_result *res);

	/*
	 * Ends the batch: committed false aborts (what was staged is dropped);
	 * committed true, once the commit is durable, does what follows it (for
	 * the file sink: the kernel told of replaced names, their blobs
	 * unlinked), whose error it returns. *format_failed (may be NULL): the
	 * batch's failure was the sink's formatting of the rows, not the disk's.
	 */
	int (*end)(struct sl_sink *s, bool committed, bool *format_failed);

	/*
	 * Carries out what committed batches left to do (at start: what a crash
	 * cut short). Opens its own transactions. Idempotent.
	 */
	int (*settle)(struct sl_sink *s);

	/*
	 * Why the last write() or commit() failed, in words that name the
	 * cause ("exec: 'cmd' exited with status 3: <its last stderr line>"),
	 * or "" to let the caller say it. NULL ok.
	 */
	const char *(*error)(const struct sl_sink *s);

	/* Progress's description ("FileSink[out/<query>]") into buf. */
	void (*describe)(const struct sl_sink *s, char *buf, size_t len);

	/* Releases the sink. NULL ok. */
	void (*close)(struct sl_sink *s);
};

#endif
