/* SPDX-License-Identifier: MIT */
/*
 * The Parquet encoder of the parquet sink (CONNECTORS §9, PARQUET-NOTES):
 * rows of batches in, the bytes of one Parquet file out through a callback.
 * Data pages v1, OPTIONAL leaves, dictionary-encoded strings falling back to
 * PLAIN, ZSTD or no compression per page, chunk statistics and a Thrift
 * compact footer. At most one row group is buffered at a time.
 */
#ifndef SLUICE_CORE_PARQUET_H
#define SLUICE_CORE_PARQUET_H

#include <stddef.h>

#include "batch.h"
#include "config.h"

#define SL_PQ_ROW_GROUP_BYTES_DEFAULT ((size_t)64 << 20) /* buffered encoded bytes */
#define SL_PQ_PAGE_BYTES_DEFAULT ((size_t)1 << 20)       /* uncompressed page body */
#define SL_PQ_DICT_BYTES_DEFAULT ((size_t)1 << 20)       /* dictionary page body */
#define SL_PQ_DICT_ENTRIES_MAX 65536                     /* entries of one dictionary */
#define SL_PQ_PAGE_ROWS_MAX 20000                        /* rows of one data page */

/* Writer options; zero-initialise it, then set what differs from the defaults. */
struct sl_pq_opts {
	enum sl_compression codec; /* SL_COMPRESSION_ZSTD or SL_COMPRESSION_NONE */
	size_t row_group_bytes;    /* cut a row group past this; 0 = 64 MiB */
	int zstd_level;            /* 0 = 3 */
	size_t page_bytes;         /* cut a data page past this; 0 = 1 MiB (tests set less) */
	size_t dict_bytes;         /* fall back to PLAIN past this; 0 = 1 MiB (tests set less) */
};

/*
 * Receives the file's bytes, in order, each byte exactly once. buf is
 * borrowed for the call. Returns 0, or an errno that fails the writer.
 */
typedef int (*sl_pq_write_fn)(void *ctx, const void *buf, size_t len);

struct sl_pq_writer;

/*
 * A new writer for a file of ncols columns: cols[k] gives column k's name
 * (written as given, UTF-8) and type (SL_TYPE_WINDOW allowed: a group of the
 * TIMESTAMPs `start` and `end`), src[k] the index of the batch column it
 * reads. cols (names included) and src are copied: borrowed for the call.
 * o may be NULL for the defaults. fn/ctx are kept until close or abort.
 * Nothing is written yet. Returns 0 with *out new (sl_pq_close or
 * sl_pq_abort frees it), EINVAL (ncols 0, a type unknown, a codec other than
 * NONE/ZSTD), or ENOMEM; *out is untouched on failure.
 */
int sl_pq_open(const struct sl_column *cols, const size_t *src, size_t ncols,
	       const struct sl_pq_opts *o, sl_pq_write_fn fn, void *ctx, struct sl_pq_writer **out);

/*
 * Appends rows [from, to) of b (borrowed for the call; its columns src[k]
 * must have the types of cols[k]) to the current row group, and writes the
 * row group through fn each time it passes row_group_bytes. Returns 0,
 * ENOMEM, EFBIG (a value too large for a page), EINVAL (a column type
 * differs), or fn's error. After an error the writer only returns that
 * error: sl_pq_abort() it.
 */
int sl_pq_add(struct sl_pq_writer *w, const struct sl_batch *b, size_t from, size_t to);

/* As sl_pq_add, for the rows idx[0..n) of b, in that order (idx borrowed). */
int sl_pq_add_rows(struct sl_pq_writer *w, const struct sl_batch *b, const size_t *idx, size_t n);

/*
 * Writes the last row group and the footer through fn, then frees w (also
 * on error). A writer given no rows writes a valid file of zero row groups
 * that carries the schema. Returns 0, ENOMEM, or the writer's or fn's error.
 */
int sl_pq_close(struct sl_pq_writer *w);

/* Frees w without writing more. Accepts NULL. */
void sl_pq_abort(struct sl_pq_writer *w);

#endif
