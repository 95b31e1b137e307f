/* SPDX-License-Identifier: MIT */
/*
 * Decoding: the bytes of one landed file (json, csv or text) into typed rows
 * of a batch, with the query's `mode` (PERMISSIVE, DROPMALFORMED, FAILFAST),
 * partition columns from `key=value` folders, and the counters a batch
 * reports. The rules are DESIGN §1 "Decoding"; the choices where DESIGN and
 * Spark leave room are listed above sl_decode_file().
 */
#ifndef SLUICE_CORE_DECODE_H
#define SLUICE_CORE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "config.h"

struct sl_decoder;

/* Counters, summed over the files of a batch by successive sl_decode_file() calls. */
struct sl_decode_stats {
	uint64_t lines;	       /* non-blank records read, csv header lines excluded */
	uint64_t rows;	       /* rows appended to the batch */
	uint64_t malformed;    /* numMalformedRows: malformed records, kept or dropped */
	uint64_t dropped;      /* malformed records left out (DROPMALFORMED) */
	uint64_t read_lines;   /* lines of the calls that succeeded, blank ones and headers too */
	uint64_t *null_counts; /* per schema column: null values in NOT NULL columns (others 0) */
	size_t ncols;	       /* entries in null_counts */
};

/* Why FAILFAST stopped. */
struct sl_decode_error {
	uint64_t line;	  /* 1-based line number in the file (blank lines count) */
	char reason[160]; /* e.g. "field 'amount': expected an integer"; NUL-terminated */
};

/*
 * Zeroes st and allocates its null counts for ncols columns (the schema's
 * n). Returns 0 or ENOMEM. Release with sl_decode_stats_release().
 */
int sl_decode_stats_init(struct sl_decode_stats *st, size_t ncols);
/* Zeroes the counters, keeping the allocation. */
void sl_decode_stats_reset(struct sl_decode_stats *st);
void sl_decode_stats_release(struct sl_decode_stats *st);

/*
 * Makes a decoder for q's source (format, schema, mode, csv options); q is
 * borrowed until sl_decoder_free(). Returns 0 with *out new, or ENOMEM.
 * A decoder holds scratch buffers: one thread at a time.
 */
int sl_decoder_new(const struct sl_query_config *q, struct sl_decoder **out);
void sl_decoder_free(struct sl_decoder *d);

/*
 * Decodes one file's bytes (data, len: already decompressed) and appends its
 * rows to b, whose schema must be q->source.schema. path is the file's
 * in/-relative path ("events/date=2026-10-04/x.json"): a schema column
 * named like the key of a `key=value` folder component is filled from it in
 * every row (Hive-unescaped, %XX; `__HIVE_DEFAULT_PARTITION__` or an empty
 * value is null; converted as a csv field; a failed conversion is null and
 * not malformed; the deepest folder wins), and that column is then not read
 * from the records. path may be NULL (no partition columns).
 *
 * Lines end with LF; a CR before it is dropped; a last line without LF
 * counts; a UTF-8 BOM at the start of the file is skipped. Blank lines are
 * skipped (json: only JSON whitespace; csv and text: empty) but counted in
 * line numbers. A record is malformed when:
 * - json: the line is not one valid UTF-8 JSON object (RFC 8259, nesting up
 *   to SL_JSCAN_MAX_DEPTH), or a field the schema names fails to convert;
 * - csv: the line is not valid UTF-8, a quoted field is unterminated or is
 *   followed by anything but the separator, the number of fields differs
 *   from the expected count (Spark 3: too few or too many; the fields
 *   present are still used), or a field fails to convert;
 * - text: the line is not valid UTF-8.
 * PERMISSIVE keeps a malformed record as a row whose failed fields (all of
 * them when the record could not be split) are null and, when the schema
 * has a `_corrupt_record` STRING column, puts the raw line there (invalid
 * UTF-8 replaced by U+FFFD; null in good rows); DROPMALFORMED leaves it out
 * (counted in dropped); FAILFAST returns SL_EMALFORMED with err filled.
 *
 * JSON conversions (JSON null or an absent key is null for every type):
 * - STRING: a string, decoded; a number, true or false as its JSON text; an
 *   object or array as its JSON text without insignificant whitespace
 *   (Spark re-serialises these too);
 * - BIGINT, INT: an integer literal (no fraction or exponent) within range;
 * - DOUBLE: any number whose value is finite (1e400 fails, as in jansson);
 * - BOOLEAN: true or false;
 * - TIMESTAMP: a string in sl_timestamp_parse()'s grammar, or an integer
 *   literal as epoch seconds (not overflowing microseconds);
 * - DATE: a string `YYYY-MM-DD`.
 * Strings are never parsed as numbers or booleans (Spark's JSON reader
 * does not either). The data's own `_corrupt_record` key is ignored.
 *
 * CSV: fields split on the one-byte sep with RFC 4180 quoting (a quote in
 * a quoted field is doubled; a quote inside an unquoted field is literal),
 * no multi-line fields. An empty unquoted field is null; a quoted empty
 * field is "" for STRING and null for other types. Conversions are strict,
 * no trimming: `[+-]?digits` for BIGINT/INT, a decimal number (finite) for
 * DOUBLE, true/false in any case for BOOLEAN, the grammars for TIMESTAMP
 * and DATE. Columns: the schema's columns minus `_corrupt_record` minus the
 * file's partition columns, by position. With header, the first non-blank
 * line of each file is the header: when it names at least one of those
 * columns (exact name, else ignoring ASCII case) columns map by name (one
 * the header lacks is null, not malformed; the expected count is the
 * header's field count); otherwise by position, as Spark does.
 *
 * Text: the line is `value`.
 *
 * Projection: a column the query does not use (sl_config_used_columns():
 * an aggregating query reads only its watermark, dedup, window, group and
 * aggregate columns) is never stored and stays null; b should be projected
 * alike (sl_batch_project). An unused STRING column is not even decoded
 * (the scanner skips it as it skips keys the schema does not name); an
 * unused column of another type is still converted, so a record is
 * malformed exactly when it would be without projection.
 *
 * NOT NULL columns keep nulls; each is counted in st->null_counts. st is
 * added to (st may be NULL); err may be NULL.
 *
 * Returns 0; SL_EMALFORMED (FAILFAST only); EFBIG when b's string arena
 * would pass 4 GiB; ENOMEM. On any error b is left as it was on entry (its
 * rows and arena are truncated back) but st may have been added to; the
 * caller discards the batch and its counters.
 */
int sl_decode_file(struct sl_decoder *d, const char *path, const char *data, size_t len,
		   struct sl_batch *b, struct sl_decode_stats *st, struct sl_decode_error *err);

#endif
