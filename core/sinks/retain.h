/* SPDX-License-Identifier: MIT */
/*
 * Retention of out/ (sink.retention, the file sinks): which committed
 * parts of out/<query>/ leave, decided in a catalog transaction. A part
 * leaves when either limit expires it: `batches` N keeps the parts of the
 * last N batch ids, `age` those committed (their mtime) within that age.
 * Never a part of a batch a downstream query source (a query whose source
 * reads this one, sl_query_config.downstreams) has not committed yet. The
 * partition folders the removed parts leave empty go too.
 */
#ifndef SLUICE_CORE_RETAIN_H
#define SLUICE_CORE_RETAIN_H

#include <stdbool.h>
#include <stdint.h>

struct sl_query_config;
struct sl_txn;

struct sl_retain {
	const struct sl_query_config *q; /* its retention and downstreams */
	uint32_t qid;			 /* the query's checkpoint id */
	uint64_t outdir;		 /* out/<query> */
	uint64_t batch;			 /* the newest batch: its parts never go */
	int64_t now;			 /* CLOCK_REALTIME ns: the age's reference, and the
					    mtime of the folders that change */
	/* called for each entry removed (a part, or a folder); non-zero stops */
	int (*gone)(void *ctx, uint64_t parent, uint64_t id, const char *name, bool dir, bool blob);
	void *ctx;
};

/*
 * Removes in t what retention expires as of r->batch; the blob ids of the
 * removed parts are recorded in the checkpoint log as 'g' entry r->batch
 * (unlinked once the commit is durable: sl_qlog_each_intent), and meta
 * "q.<qid>.expired" counts the parts. 0 or the catalog's error.
 */
int sl_retain(struct sl_txn *t, const struct sl_retain *r);

/*
 * The first upstream batch the downstream query `name` still needs: the end
 * of the range its last committed batch read, plus one (0 when it has
 * committed none or has never started: it reads from the first batch).
 */
int sl_retain_hold(struct sl_txn *t, const char *name, uint64_t *hold);

#endif
