/* SPDX-License-Identifier: MIT */
/*
 * groupBy with windows and aggregates: each batch's groups merged into
 * their state, and the output rows of the mode.
 * The pipeline in ops.c drives it; its state lives in the catalog's qstate
 * table (state.c). Handles are new (free with the _free function); batches
 * and keep masks are borrowed for the call.
 */
#ifndef SLUICE_CORE_GROUPBY_H
#define SLUICE_CORE_GROUPBY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "ops.h"

struct sl_query_config;
struct sl_txn;
struct sl_groupby;

int sl_groupby_new(const struct sl_query_config *q, uint32_t qid, struct sl_groupby **out,
		   char *err, size_t errlen);
void sl_groupby_free(struct sl_groupby *g);
/* Aggregates the kept rows of b and writes the mode's output rows to out (cleared first). */
int sl_groupby_process(struct sl_groupby *g, struct sl_txn *t, const struct sl_batch *b,
		       const uint8_t *keep, int64_t wm_ms, struct sl_batch *out,
		       struct sl_op_metrics *m, char *err, size_t errlen);
int sl_groupby_apply(struct sl_groupby *g, struct sl_txn *t);
/* sl_groupby_process() in steps: begin (t used), rows (no catalog), end (t used). */
int sl_groupby_begin(struct sl_groupby *g, struct sl_txn *t, const struct sl_batch *b,
		     struct sl_batch *out);
int sl_groupby_rows(struct sl_groupby *g, const struct sl_batch *b, const uint8_t *keep,
		    size_t from, size_t to, char *err, size_t errlen);
int sl_groupby_end(struct sl_groupby *g, struct sl_txn *t, int64_t wm_ms, struct sl_batch *out,
		   struct sl_op_metrics *m, char *err, size_t errlen);
int sl_groupby_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t,
		   int64_t wm_ms, bool *due);

#endif
