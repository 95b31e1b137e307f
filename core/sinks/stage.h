/* SPDX-License-Identifier: MIT */
/*
 * The sink's half of a batch: formats the output rows into parts (core/sink.h)
 * and makes each durable before the commit names it, inline (its bytes go
 * into the commit) or in a new blob (written, fsynced, its name fsynced).
 *
 * A query without partitionBy has one part at most. Its stage needs nothing
 * from the catalog once its id is taken, so sl_stage_start() runs it on a
 * thread of its own while the commit writes the batch's state, and writes
 * the part a slice of rows at a time (zstd streamed), never holding the
 * whole part in memory. The commit calls sl_stage_wait() before it names the
 * part. With partitionBy, the parts and their folders need ids as they are
 * found: sl_stage_start() formats and writes them itself, before the commit.
 */
#ifndef SLUICE_CORE_STAGE_H
#define SLUICE_CORE_STAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "config.h"

struct sl_blobs;
struct sl_catalog;

/* One part, ready to be named by the commit. */
struct sl_out_part {
	char dir[4096];       /* "" or "k=v/k2=v2" */
	char name[64];        /* part-NNNNN-NNNNN.ext */
	uint64_t id;          /* the part's id */
	uint64_t dir_ids[32]; /* ids for folders to create, one per dir component */
	size_t ndirs;
	void *data;           /* inline bytes (<= SL_INLINE_MAX, owned), or NULL: a blob */
	size_t len;           /* the part's size */
	size_t rows;
};

struct sl_stage {
	/* set by the caller */
	struct sl_catalog *cat;  /* ids for parts and folders; borrowed */
	struct sl_blobs *blobs;   /* where big parts are written; borrowed */
	const struct sl_query_config *q;
	uint64_t batch;
	const struct sl_batch *rows; /* the output rows, read until formatted */
	void (*spent)(void *ctx);    /* NULL, or called once the rows are formatted */
	void *spent_ctx;
	/* the result, once sl_stage_wait() returned */
	struct sl_out_part *out;
	size_t nparts;
	bool format_failed; /* the error was the sink's (formatting), not the disk's */
	int64_t done_ns;    /* CLOCK_MONOTONIC when it finished */
	/* private */
	int rc;
	bool threaded, done;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/*
 * Starts the stage of s (the caller's fields set, the rest zero): on a thread
 * when the query has no partitionBy, else here and now. The caller holds no
 * catalog transaction. Returns 0, or the error of what could not start (the
 * stage then counts as done with that error; sl_stage_end() is still due).
 */
int sl_stage_start(struct sl_stage *s);

/* Waits until the stage is done and returns its result (any thread, any number of times). */
int sl_stage_wait(struct sl_stage *s);

/*
 * Ends the stage: joins its thread; when committed is false, removes the
 * blobs it wrote (nothing names them). Frees its parts.
 */
void sl_stage_end(struct sl_stage *s, bool committed);

#endif
