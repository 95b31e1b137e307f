/* SPDX-License-Identifier: MIT */
/*
 * The source `process` (CONNECTORS.md §5): custom sources in any language.
 * sluice runs the query's command once per run (core/base/child.c's rules)
 * and speaks one JSON object per line on its stdin/stdout: init,
 * initialOffset, latestOffset, partitions, read, commit, stop. Offsets are
 * the program's JSON, kept in canonical form (keys sorted, no spaces), so
 * that the text logged in offsets/N is also what tells "no new data".
 *
 * The conversation for a batch happens in prepare(), before the planning
 * transaction (a slow child never holds the catalog's writer); read() asks
 * for one partition at a time. Every answer has a deadline (`timeout`, per
 * line for the rows of a read). A child that exits, answers garbage or is
 * past its deadline is ended and the batch fails with SL_ECOMMAND, naming
 * the command, how it ended and its last stderr line.
 *
 * Checkpoint entries (core/sources/qlog.h):
 *   'b' N  batch N's request: "v1\n<ts_ms>\n<first>\n<start>\n<end>", first 1
 *          when start is the program's initialOffset (startOffset null); the
 *          last 100 are kept
 *   's' 0  the last logged end (canonical JSON)
 *   's' 1  the last committed end, sent in commit() once durable and again at
 *          every start
 */
#ifndef SLUICE_CORE_SOURCE_PROCESS_H
#define SLUICE_CORE_SOURCE_PROCESS_H

#include <stddef.h>

#include "source.h"

extern const struct sl_source_ops sl_source_process;

/*
 * The canonical form of JSON text (len bytes): keys sorted, no spaces,
 * integers exactly as written. 0 with out (outlen bytes) NUL-terminated;
 * SL_EMALFORMED for text that is not one JSON value; ENAMETOOLONG when the
 * canonical text does not fit in outlen.
 */
int sl_process_canonical(const char *text, size_t len, char *out, size_t outlen);

#endif
