/* SPDX-License-Identifier: MIT */
/*
 * Aggregate accumulators: count(*), count(col), sum, min, max and avg over
 * the rows of a group, as a fixed-size byte state per aggregate that can be
 * stored in LMDB, merged with a stored state and turned into a result cell.
 * Pure functions, thread-safe.
 */
#ifndef SLUICE_CORE_AGG_H
#define SLUICE_CORE_AGG_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "config.h"

/*
 * State layouts, in host byte order (states are not portable across
 * architectures, like the LMDB file that holds them). A state need not be
 * aligned. FLAGS: bit 0 = a non-null value was seen, bit 1 = the sum
 * overflowed int64; the other bits and PAD are 0.
 *
 * count(*), count(col) (8 bytes)
 *   OFFSET SIZE MEANING
 *   0      8    int64: rows counted
 *
 * sum(col) of INT/BIGINT, result BIGINT (16 bytes)
 *   0      8    int64: the sum of the non-null values (meaningless once overflowed)
 *   8      1    FLAGS
 *   9      7    PAD
 *
 * sum(col) of DOUBLE, result DOUBLE (16 bytes)
 *   0      8    double: the sum of the non-null values
 *   8      1    FLAGS
 *   9      7    PAD
 *
 * min(col), max(col) of INT, BIGINT, TIMESTAMP, DATE, BOOLEAN, DOUBLE (16 bytes)
 *   0      8    int64 (BOOLEAN 0/1) or double: the least/greatest value so far
 *   8      1    FLAGS
 *   9      7    PAD
 *
 * avg(col) of INT/BIGINT/DOUBLE, result DOUBLE (16 bytes)
 *   0      8    double: the sum of the non-null values (as Spark, a double sum
 *               even for integer input)
 *   8      8    int64: the number of non-null values
 *
 * Semantics, as Spark: nulls are ignored (count(*) counts every row); sum,
 * min, max and avg of no non-null value are null; count of none is 0. min
 * and max order doubles with NaN above every number and -0.0 equal to 0.0
 * (the first one seen is kept). An integer sum that leaves int64 is an
 * error, as in Spark 4.0's default ANSI mode (Spark 3.5 wraps silently).
 * min/max of a STRING column has no fixed-size state: see sl_agg_supported().
 */

/* The largest value sl_agg_state_size() returns. */
#define SL_AGG_STATE_MAX 16

/*
 * True when a has a fixed-size state here: every aggregate the config
 * accepts except min and max of a STRING column.
 */
bool sl_agg_supported(const struct sl_aggregate *a);

/* The bytes of a's state (8 or 16), or 0 when !sl_agg_supported(a). */
size_t sl_agg_state_size(const struct sl_aggregate *a);

/* Writes the empty state of a (no row seen) into state. */
void sl_agg_init(const struct sl_aggregate *a, void *state);

/*
 * Adds the value of column a->col of row of b (the source batch; unused for
 * count(*)) to state. Returns 0, or ERANGE when an integer sum overflowed:
 * the state then stays marked overflowed, and the caller should stop the
 * batch naming the aggregate ("sum(col) overflows BIGINT").
 */
int sl_agg_update(const struct sl_aggregate *a, void *state, const struct sl_batch *b, size_t row);

/*
 * Combines src into dst, as if dst had also seen src's rows (src is e.g. a
 * state read back from LMDB; both must be states of a). Returns 0 or ERANGE,
 * as sl_agg_update().
 */
int sl_agg_merge(const struct sl_aggregate *a, void *dst, const void *src);

/*
 * Writes a's result for state into column col of row of out (a column of
 * type a->type): null where Spark gives null. Returns 0, or ERANGE for an
 * overflowed sum (the cell is then null).
 */
int sl_agg_result(const struct sl_aggregate *a, const void *state, struct sl_batch *out, size_t row,
		  size_t col);

#endif
