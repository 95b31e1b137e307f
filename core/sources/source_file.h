/* SPDX-License-Identifier: MIT */
/*
 * The file source: the files landed under in/<path>, planned from the
 * query's index (core/land/qindex.h) in landing order, Spark's
 * FileStreamSource options (maxFilesPerTrigger, maxBytesPerTrigger,
 * latestFirst, maxFileAge, fileNameOnly, cleanSource). Its offset is
 * {"logOffset":K}, K indexing its log sources/0/K.
 */
#ifndef SLUICE_CORE_SOURCE_FILE_H
#define SLUICE_CORE_SOURCE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "source.h"

/* The file source's vtable (replayable). */
extern const struct sl_source_ops sl_source_file;

/*
 * What planning decided about one landed file, for one query (`sluice
 * files`): kept in the checkpoint log under (qid, 'f', file id) from the
 * transaction that planned or skipped it, so that a skip made while no
 * batch runs is recorded too. The layout is file.c's.
 */
enum sl_file_fate {
	SL_FATE_PLANNED = 'p',    /* planned in batch (committed once batch is) */
	SL_FATE_CLEANED = 'c',    /* committed in batch, with a cleanSource intent */
	SL_FATE_SKIP_AGE = 'a',   /* skipped: older than threshold_us (maxFileAge) */
	SL_FATE_SKIP_SEEN = 's',  /* skipped: its seen-set key was seen already */
};

struct sl_file_record {
	char fate;                /* enum sl_file_fate */
	char clean;               /* SL_FATE_CLEANED: 'a' archive, 'd' delete */
	bool by_name;             /* SL_FATE_SKIP_SEEN: the key was the name (fileNameOnly) */
	uint64_t batch;           /* planned and cleaned: the batch id */
	uint64_t seq, size;       /* the file's landing sequence number and bytes */
	int64_t landed_ns;        /* its landing time (CLOCK_REALTIME) */
	int64_t clock_us;         /* its age clock when planned or skipped */
	int64_t threshold_us;     /* SL_FATE_SKIP_AGE: newest planned minus maxFileAge */
	char path[4096];          /* in/-relative path when planned or skipped */
};

/*
 * The record of file id for query qid into *out. 0, SL_NOTFOUND (never
 * planned nor skipped, or by a version before these records), SL_ECORRUPT.
 */
int sl_file_record_get(struct sl_txn *t, uint32_t qid, uint64_t id, struct sl_file_record *out);

/*
 * Calls fn for each record of query qid, in file id order; r is borrowed
 * for the call. fn returns non-zero to stop; that value is returned.
 */
int sl_file_record_each(struct sl_txn *t, uint32_t qid,
			int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r),
			void *ctx);

#endif
