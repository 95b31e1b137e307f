/* SPDX-License-Identifier: MIT */
/*
 * The console sink: each batch as Spark's console sink prints it (a
 * "Batch: N" block, then Dataset.show's table), at-least-once, through
 * sl_console_write() (core/base/log.h).
 */
#ifndef SLUICE_CORE_SINK_CONSOLE_H
#define SLUICE_CORE_SINK_CONSOLE_H

#include <stdint.h>

#include "batch.h"
#include "config.h"
#include "sink_ops.h"
#include "strbuf.h"

/* The console sink's vtable (at-least-once). */
extern const struct sl_sink_ops sl_sink_console;

/*
 * Appends batch `batch`'s block for rows (q->out's columns) to out: three
 * lines of Spark's header, then the table of at most q->console_rows rows,
 * cells cut to 20 characters when q->console_truncate, "only showing top N
 * rows" when some were left out, and an empty line. 0 or ENOMEM.
 */
int sl_console_format(const struct sl_query_config *q, uint64_t batch,
		      const struct sl_batch *rows, struct sl_strbuf *out);

#endif
