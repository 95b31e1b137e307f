/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint compatibility: whether a query's checkpoint survives a change of
 * its configuration between starts (DESIGN "Changes between starts"). The
 * engine stores a query's description with its checkpoint and checks the
 * configuration against it at each start. Pure functions, thread-safe.
 */
#ifndef SLUICE_CORE_COMPAT_H
#define SLUICE_CORE_COMPAT_H

#include <stddef.h>

#include "config.h"

/*
 * The description is text: a version line, then one `field=value` line per
 * field, each line ending in '\n', fields in this order:
 *
 *   sluice-compat 1
 *   source.format=json
 *   source.path=events
 *   watermark.column=event_time
 *   dropDuplicates=
 *   dropDuplicatesWithinWatermark=
 *   groupBy=window(event_time, 10 minutes) by user_id
 *   aggregate=count(*) AS n, sum(amount) AS total
 *   outputMode=append
 *   sink.format=json
 *   sink.partitionBy=[day]
 *   source.schema=user_id STRING, amount BIGINT, event_time TIMESTAMP
 *
 * FIELD                          VALUE
 * source.format                  json, csv or text
 * source.path                    the path as written in the config
 * watermark.column               the column, empty without a watermark
 * dropDuplicates                 [col, ...], empty when absent or within-watermark
 * dropDuplicatesWithinWatermark  [col, ...], empty when absent
 * groupBy                        [window(col, duration[, slide])][ by col, ...], the
 *                                slide only when it differs from the duration;
 *                                empty without groupBy
 * aggregate                      fn(col) AS name, ... in file order; empty without
 * outputMode                     append, update or complete
 * sink.format                    json or csv
 * sink.partitionBy               [col, ...], empty when absent
 * sink.command                   exec only: the command's words (no line otherwise)
 * source.host, source.port       socket only: where its lines come from (no lines
 *                                otherwise)
 * source.assign, source.subscribe, source.subscribePattern
 *                                kafka only: its one strategy as written (assign
 *                                as {"t":[0,1]}); no line for the other two
 * source.schema                  `name TYPE` for each source column held in state (a
 *                                deduplication key, group column, window column or
 *                                aggregate argument), in schema order
 *
 * Columns are named, never numbered, as in Spark DDL: bare when they match
 * [A-Za-z0-9_]+, else backquoted with a backquote doubled. Durations use
 * the largest exact unit ("10 minutes", "90 seconds"). In every value a
 * backslash is written `\\` and a control byte `\xHH`, so a value is one line.
 *
 * Compatibility rules. The version changes only when an existing field's
 * meaning does; new fields may be added without one. A reader ignores a
 * well-formed line whose field it does not know (a newer sluice's), and a
 * field missing from a stored description compares as what a config without
 * that option describes: empty, or `append` and `json` for outputMode and
 * sink.format.
 */

/*
 * Describes the fields of q whose change q's checkpoint cannot survive.
 * Returns 0 with *out new (free()), NUL-terminated, and *len its length
 * without the NUL; or ENOMEM, leaving *out and *len untouched.
 */
int sl_compat_describe(const struct sl_query_config *q, char **out, size_t *len);

/*
 * Compares stored (len bytes, no NUL needed), a description made by
 * sl_compat_describe() when q's checkpoint was made, with q. Fields are
 * compared in the order source.format, source.path, watermark.column,
 * dropDuplicates, dropDuplicatesWithinWatermark, groupBy, aggregate,
 * outputMode, sink.format, sink.partitionBy, source.schema, and the first
 * that differs is reported. Returns:
 * - 0 when q may run on that checkpoint;
 * - SL_ECONFIG when it may not: err (may be NULL) holds one line naming the
 *   field, e.g. "queries.events.groupBy: changed since the checkpoint was
 *   made (was window(event_time, 10 minutes) by user_id, now
 *   window(event_time, 5 minutes) by user_id): the checkpoint cannot survive
 *   it; rename the query to start afresh", or for a column held in state
 *   "queries.events.source.schema: column 'amount' held in state changed
 *   type from BIGINT to DOUBLE: ...";
 * - SL_ECORRUPT when stored is not a description;
 * - SL_EVERSION when stored is a description of another version;
 * - ENOMEM.
 * err is written only on SL_ECONFIG.
 */
int sl_compat_check(const struct sl_query_config *q, const char *stored, size_t len, char *err,
		    size_t errlen);

#endif
