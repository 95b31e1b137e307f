/* SPDX-License-Identifier: MIT */
/*
 * The exec sink (CONNECTORS.md §8, Spark's foreachBatch as a command): per
 * batch with rows, the query's command runs with the rows on its stdin (as
 * the JSON sink writes them, or CSV with a header) and SLUICE_QUERY,
 * SLUICE_BATCH_ID and SLUICE_OUTPUT_MODE in its environment; exit 0 lets
 * the batch commit. At-least-once: after a failure or a crash the same
 * batch id runs again, and idempotence by batch id is the command's job.
 *
 * Children (CONNECTORS "Commands and secrets"): every other descriptor
 * closed, their own process group, SIGKILL when sluice dies
 * (PR_SET_PDEATHSIG), DATA_DIR as working folder, no NOTIFY_SOCKET or
 * WATCHDOG_*; stdout and stderr go to the log a line at a time, and the last
 * stderr line into lastError. A timeout, or an unmount, sends SIGTERM to the
 * group and SIGKILL 2 s later.
 */
#ifndef SLUICE_CORE_SINK_EXEC_H
#define SLUICE_CORE_SINK_EXEC_H

#include "sink_ops.h"

/* The exec sink's vtable (at-least-once). */
extern const struct sl_sink_ops sl_sink_exec;

#endif
