/* SPDX-License-Identifier: MIT */
/*
 * The file sink: the parts of each batch under out/<query>/ (JSON Lines or
 * CSV, zstd on request, partitionBy folders; complete mode replaces the
 * snapshot), exactly once. Formatting is sink.h, the parts' staging
 * stage.h; this names them in the commit.
 */
#ifndef SLUICE_CORE_SINK_FILE_H
#define SLUICE_CORE_SINK_FILE_H

#include "sink_ops.h"

/* The file sink's vtable (exactly-once). */
extern const struct sl_sink_ops sl_sink_file;

#endif
