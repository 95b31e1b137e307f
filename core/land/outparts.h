/* SPDX-License-Identifier: MIT */
/*
 * A query's committed output, as the catalog names it: the parts
 * part-B-P.* of out/<query>/ and its partition folders (what
 * out/<q>/_spark_metadata lists and what a `query` source reads), and the
 * bytes of a file of the namespace (a landed file or an out/ part).
 */
#ifndef SLUICE_CORE_OUTPARTS_H
#define SLUICE_CORE_OUTPARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_land;
struct sl_txn;

/* One part of a query's output. */
struct sl_out_part {
	uint64_t batch;   /* B of part-B-P */
	uint64_t num;     /* P */
	uint64_t id;      /* its inode */
	char *rel;        /* "dir/.../part-B-P.ext" under out/<q>/ (owned) */
	uint64_t size;
	int64_t mtime_ns;
};

/*
 * The parts of batches lo..hi under folder outdir (out/<q>), breadth first
 * (no cursor stays open across folders), sorted by batch, part number,
 * then path. *v is new (sl_out_parts_free), *n its length. 0, ENOMEM,
 * SL_ECORRUPT or the catalog's error.
 */
int sl_out_parts(struct sl_txn *t, uint64_t outdir, uint64_t lo, uint64_t hi,
		 struct sl_out_part **v, size_t *n);
void sl_out_parts_free(struct sl_out_part *v, size_t n);

/* "part-B-P.ext" (B and P decimal): true with *batch and *num set. */
bool sl_out_part_name(const char *name, uint64_t *batch, uint64_t *num);

/*
 * The bytes of file id of the namespace: inline ones copied (*mapped false,
 * free()), a blob mapped read-only (*mapped true, munmap()): such files never
 * change, and a mapping costs no copy. Not advised: a caller that reads the
 * mapping through asks for read-ahead (MADV_WILLNEED). 0, SL_NOTFOUND, SL_ECORRUPT (a blob
 * shorter than its record) or an errno.
 */
int sl_land_file_bytes(struct sl_land *l, uint64_t id, char **data, size_t *len, bool *mapped);

#endif
