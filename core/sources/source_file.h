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

#include "source.h"

/* The file source's vtable (replayable). */
extern const struct sl_source_ops sl_source_file;

#endif
