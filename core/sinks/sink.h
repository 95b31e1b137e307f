/* SPDX-License-Identifier: MIT */
/*
 * The file sink's formatting: turns the output rows of one micro-batch into
 * the bytes of its part files (JSON Lines or CSV, one part per partition
 * folder, zstd-compressed on request) and names them. Writing the parts
 * and committing them is the engine's business, not this module's.
 */
#ifndef SLUICE_CORE_SINK_H
#define SLUICE_CORE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "config.h"
#include "strbuf.h"

#define SL_SINK_ZSTD_LEVEL 3 /* zstd level of compressed parts */

/* One part file of a batch. */
struct sl_part {
	char *dir;   /* "" or "k=v/k2=v2" (no trailing slash), Hive-escaped; NUL-terminated */
	void *data;  /* the part's bytes: one zstd frame when the query compresses */
	size_t len;  /* bytes at data */
	size_t rows; /* rows in the part, >= 1 (0 only for an empty parquet snapshot) */
};

/*
 * Formats the rows of b, whose columns are q->out's (same count and types,
 * b usually being typed by &q->out), into parts:
 * - rows are grouped by their partition folder, in the order in which each
 *   folder first appears; without partitionBy there is one group, dir "";
 * - each group becomes one part holding its rows in batch order, without
 *   the partition columns, as JSON Lines or as CSV with a header line
 *   (q->sink_format), then one zstd frame when q->compression says zstd;
 * - a batch without rows gives no part (*parts NULL, *nparts 0), except
 *   for a parquet complete-mode query: one zero-row part, dir "", so that
 *   readers of the empty snapshot still find its schema.
 * Part i is meant to be written as out/<query>/<dir>/<sl_sink_part_name(i)>.
 *
 * Formats (Spark's writers where DESIGN.md is silent):
 * - JSON: {"col":value,...} and "\n" per row, columns in q->out order, no
 *   spaces, null fields omitted (an all-null row is {}). Strings are
 *   escaped as Spark's Jackson writer does: `"` and `\` escaped; \b \t \n
 *   \f \r as such; other controls below 0x20 as \u00XX (upper-case hex);
 *   everything else, `/` and DEL included, as is. BIGINT/INT are integers,
 *   BOOLEAN true/false, DOUBLE as Java's Double.toString (shortest digits
 *   that read back to the same double; 0.001 <= |x| < 1e7 as 45.0 or 0.5,
 *   else 1.0E10, 1.5E-4; -0.0 kept) with NaN, Infinity and -Infinity as the
 *   strings "NaN", "Infinity", "-Infinity" (Jackson's default), TIMESTAMP
 *   as "2026-10-04T12:00:00.000Z" (UTC, milliseconds truncated toward the
 *   past), DATE as "2026-10-04", WINDOW as {"start":TS,"end":TS}. Years
 *   outside 0000-9999 are written ISO 8601 style: "+10000", "-0001".
 * - Parquet: one Parquet file per part (sl_sink_pq_part), its pages
 *   compressed as q->compression says (no outer zstd frame); a WINDOW
 *   column is a group of the TIMESTAMPs start and end.
 * - CSV: a header of the column names, then one line per row, "\n" ending
 *   every line, separator ','. A field is quoted, RFC 4180 style (a quote
 *   doubled), when it holds ',', '"', CR or LF, starts or ends with a space
 *   or a tab (so that no reader trims it), or is the empty string (Spark's
 *   "" for empty strings); a null is an empty field. Values print as in
 *   JSON, unquoted: DOUBLE NaN, Infinity, -Infinity; TIMESTAMP
 *   2026-10-04T12:00:00.000Z. A WINDOW column is refused (EINVAL; the
 *   config refuses it at load).
 * - Bytes that are not valid UTF-8, in strings and column names, become
 *   U+FFFD, one per maximal invalid subsequence (Unicode's recommended
 *   practice, as Java's decoder), so every part is valid UTF-8.
 * - Partition folders: `name=value` per partition column, in partitionBy
 *   order, joined by '/'. Name and value are escaped as Spark's
 *   ExternalCatalogUtils.escapePathName: bytes 0x00-0x1F, `"#%'*\/:=?\`,
 *   0x7F, `{[]^` become %XX (upper-case hex; 0x00 is our addition, Linux
 *   names cannot hold it); non-ASCII passes through. A null or empty-string
 *   value is __HIVE_DEFAULT_PARTITION__ (Spark: both read back as null).
 *   Values print as Spark casts them to strings: integers, true/false,
 *   doubles as above, DATE 2026-10-04, TIMESTAMP `2026-10-04 12:00:00` with
 *   a fraction only when non-zero (`12:00:00.5`), UTC, so escaped as
 *   `2026-10-04 12%3A00%3A00` (what Spark's partition discovery reads back
 *   as a timestamp).
 *
 * Returns 0 with *parts new (free with sl_sink_parts_free) and *nparts set;
 * EINVAL when b does not match q->out or a CSV query has a WINDOW column;
 * ENAMETOOLONG when a `name=value` folder would exceed 255 bytes (NAME_MAX);
 * ENOMEM; or a codec error. On failure the outputs are untouched and
 * nothing needs freeing. Thread-safe; b and q are only read.
 */
int sl_sink_format(const struct sl_query_config *q, const struct sl_batch *b,
		   struct sl_part **parts, size_t *nparts);

/*
 * For a query without partitionBy, whose output is one part: appends to out
 * the lines of rows [from, to) of b as sl_sink_format() writes them, after
 * the CSV header when header is true, never compressed. Slices formatted in
 * order and joined are the part's bytes, so a big part can be written a
 * slice at a time. Returns 0, EINVAL (as sl_sink_format(), or partitionBy,
 * or a range beyond b) or ENOMEM (out then holds a prefix).
 */
int sl_sink_format_rows(const struct sl_query_config *q, const struct sl_batch *b, size_t from,
			size_t to, bool header, struct sl_strbuf *out);

/* Whether output column c of q is a partitionBy column (written as a folder, not in rows). */
bool sl_sink_partition_col(const struct sl_query_config *q, size_t c);

/* Frees n parts returned by sl_sink_format. Accepts NULL. */
void sl_sink_parts_free(struct sl_part *parts, size_t n);

/*
 * Writes the file name of part `part` of batch `batch` into buf (len bytes):
 * `part-%05d-%05d` then `.jsonl`, `.csv` or `.parquet` by q->sink_format,
 * then `.zst` when q->compression is zstd and the format is not parquet
 * (whose pages are compressed inside), e.g. "part-00003-00000.jsonl.zst" (wider
 * numbers widen). Returns 0, or ERANGE when buf is too small (then buf is
 * untouched); 64 bytes always suffice.
 */
int sl_sink_part_name(char *buf, size_t len, const struct sl_query_config *q, uint64_t batch,
		      uint32_t part);

/* ---- parquet (sink_parquet.c) ---- */

#include "parquet.h"

/*
 * A Parquet writer for q's parts: q->out's columns but the partition ones,
 * q->compression for the pages, q->row_group_bytes per row group. Returns
 * as sl_pq_open().
 */
int sl_sink_pq_open(const struct sl_query_config *q, sl_pq_write_fn fn, void *ctx,
		    struct sl_pq_writer **w);

/*
 * The Parquet file of rows idx[0..n) of b (n may be 0: a file of no rows),
 * in *data (new, free()) and *len. Returns 0 or the writer's error.
 */
int sl_sink_pq_part(const struct sl_query_config *q, const struct sl_batch *b, const size_t *idx,
		    size_t n, void **data, size_t *len);

/*
 * A non-null BIGINT, INT, DOUBLE, BOOLEAN, TIMESTAMP or DATE value as
 * Spark casts it to a string ("2026-10-04 12:00:00", Java's
 * Double.toString) into out (>= 48 bytes); "" for STRING and WINDOW.
 */
void sl_sink_fmt_scalar(char *out, enum sl_type t, const union sl_cell *v);

#endif
