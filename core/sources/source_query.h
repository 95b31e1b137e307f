/* SPDX-License-Identifier: MIT */
/*
 * The `query` source (CONNECTORS.md §6): another query's committed output
 * rows, as Spark's table source reads a table's commits. The upstream
 * writes with the json sink (append, or update: a changelog); a downstream
 * batch reads the parts of the upstream's batches after the last one it
 * read, up to the upstream's newest commit (fixed at the run's first
 * planning, so availableNow drains what was committed at start), one
 * partition per part, decoded with the upstream's output columns (a
 * partition column from its `name=value` folder, as the file source does).
 *
 * Offset: {"query":"<upstream checkpoint id>","batchId":N}, N the last
 * upstream batch read; the id is the upstream's checkpoint/<q>/metadata id,
 * so that a downstream notices an upstream that is not the one it read
 * (removed and made again under the same name) and stops rather than
 * misread its batch numbers.
 *
 * Checkpoint entries (core/sources/qlog.h): 'b' batch N's range
 * ("<ts_ms> <start> <end> <uuid>", start -1 before the first batch),
 * deleted 100 batches later; meta "q.<qid>.qend" the last logged end plus
 * one (0: none yet).
 *
 * Parts a downstream has not committed stay in out/: the upstream's
 * retention (core/sinks/retain.h) keeps the upstream batches after the
 * range of the downstream's last committed batch (complete mode, which
 * replaces parts, is refused at load).
 */
#ifndef SLUICE_CORE_SOURCE_QUERY_H
#define SLUICE_CORE_SOURCE_QUERY_H

#include "source.h"

extern const struct sl_source_ops sl_source_query;

#endif
