/* SPDX-License-Identifier: MIT */
/*
 * A batch: the rows of one micro-batch, column by column, typed by a schema
 * (source rows after decoding, or output rows before the sink). Buffers are
 * kept across sl_batch_clear() so that batches reuse their memory. A batch
 * is a struct the caller embeds (sl_batch_init/sl_batch_release); the
 * strings a cell points at live in the batch's arena until it is cleared.
 */
#ifndef SLUICE_CORE_BATCH_H
#define SLUICE_CORE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* A string value: bytes in the batch's arena (offsets survive growth). */
struct sl_str {
	uint32_t off; /* into arena */
	uint32_t len; /* bytes, not NUL-terminated */
};

/* One value; which member holds it follows the column's type. */
union sl_cell {
	int64_t i;                  /* BIGINT, INT, TIMESTAMP (us), DATE (days), BOOLEAN (0/1) */
	double d;                   /* DOUBLE */
	struct sl_str s;            /* STRING */
	struct {
		int64_t start, end; /* WINDOW: [start, end) in microseconds */
	} w;
};

struct sl_batch_col {
	enum sl_type type;
	union sl_cell *cells; /* nrows values; undefined where null */
	uint8_t *nulls;       /* nrows flags: 1 = null */
	bool dead;            /* projected out: cells and nulls are the batch's shared
				 dead arrays, every row null, never set */
};

struct sl_batch {
	const struct sl_schema *schema; /* borrowed: the column types and names */
	struct sl_batch_col *cols;      /* schema->n columns */
	size_t nrows;                   /* rows in use */
	size_t cap;                     /* rows allocated */
	char *arena;                    /* string bytes of every STRING cell */
	size_t arena_len, arena_cap;
	union sl_cell *dead_cells;      /* cap cells shared by the dead columns, never read */
	uint8_t *dead_nulls;            /* cap flags shared by the dead columns, all 1 */
	size_t row0;                    /* a side (sl_batch_side_begin): its first row, else 0 */
	bool side;                      /* borrows another batch's rows, or lends them
					   (sl_batch_cap): never grows them */
	bool full;                      /* such a batch was refused a row (ENOSPC) */
};

/* Makes an empty batch for schema (borrowed until release). 0 or ENOMEM. */
int sl_batch_init(struct sl_batch *b, const struct sl_schema *schema);
/*
 * Projects columns out of an empty batch: a column c with used[c] == 0
 * becomes dead, null in every row at the cost of no memory of its own (the
 * dead columns share one array of flags). Setting a dead column is a
 * programmer error; reading one sees null. Call it before the first row.
 */
void sl_batch_project(struct sl_batch *b, const uint8_t *used);
/* Frees what the batch holds. The struct itself is the caller's. */
void sl_batch_release(struct sl_batch *b);
/* Empties the batch, keeping its buffers for the next use. */
void sl_batch_clear(struct sl_batch *b);

/*
 * Empties the batch and frees its buffers when they hold more than
 * keep_rows rows: a huge batch's memory is not kept for the next one.
 */
void sl_batch_trim(struct sl_batch *b, size_t keep_rows);
/* Makes room for rows rows in all (no growth until then). 0 or ENOMEM. */
int sl_batch_reserve(struct sl_batch *b, size_t rows);
/* Appends a row whose every value is null; *row gets its index. 0 or ENOMEM. */
int sl_batch_add_row(struct sl_batch *b, size_t *row);
/* Drops the last row (a row found malformed after it was started). */
void sl_batch_drop_last(struct sl_batch *b);

/*
 * Appends src's rows (same schema) to dst, strings copied. 0, ENOMEM or
 * EFBIG (more than 4 GiB of strings); dst is unchanged on failure.
 */
int sl_batch_append(struct sl_batch *dst, const struct sl_batch *src);
/*
 * Rows [from, to) of b, to be filled by another thread while b's own
 * thread fills rows below from: side shares b's row arrays (b must have
 * room for to rows, sl_batch_reserve) and keeps a string arena of its own.
 * Its sl_batch_add_row() gives from, from + 1, ... and ENOSPC past to;
 * every other writer of b's arrays must keep off those rows until
 * sl_batch_side_join(). 0 or ENOMEM.
 */
int sl_batch_side_begin(struct sl_batch *b, size_t from, size_t to, struct sl_batch *side);
/*
 * Makes side's rows b's, right after b's own (moved down when b has fewer
 * rows than side's first row's index), its strings copied after b's. 0,
 * ENOMEM or EFBIG (b unchanged); side is released either way.
 */
int sl_batch_side_join(struct sl_batch *b, struct sl_batch *side);
/* Releases a side without joining it (b's rows past its own stay unused). */
void sl_batch_side_drop(struct sl_batch *side);
/*
 * While a side fills rows from `rows` on, b's own rows stop there: its
 * sl_batch_add_row() fails with ENOSPC (b->full set) instead of growing
 * the arrays the side writes into. *saved: what sl_batch_uncap() needs,
 * which ends it and says whether b was refused a row meanwhile.
 */
void sl_batch_cap(struct sl_batch *b, size_t rows, size_t *saved);
bool sl_batch_uncap(struct sl_batch *b, size_t saved);
/* Keeps the rows r with keep[r] != 0, in order, dropping the others. */
void sl_batch_keep(struct sl_batch *b, const uint8_t *keep);
/* Setters: the value becomes non-null. Strings are copied into the arena. */
int sl_batch_set_str(struct sl_batch *b, size_t row, size_t col, const char *s, size_t len);
void sl_batch_set_int(struct sl_batch *b, size_t row, size_t col, int64_t v);
void sl_batch_set_double(struct sl_batch *b, size_t row, size_t col, double v);
void sl_batch_set_window(struct sl_batch *b, size_t row, size_t col, int64_t start, int64_t end);
void sl_batch_set_null(struct sl_batch *b, size_t row, size_t col);

static inline bool sl_batch_is_null(const struct sl_batch *b, size_t row, size_t col)
{
	return b->cols[col].nulls[row] != 0;
}

/* A STRING value: *len bytes, borrowed until the batch next grows or clears. */
static inline const char *sl_batch_str(const struct sl_batch *b, size_t row, size_t col,
				       size_t *len)
{
	const struct sl_str *s = &b->cols[col].cells[row].s;
	*len = s->len;
	/* a batch whose strings are all empty never allocated its arena */
	return b->arena ? b->arena + s->off : "";
}

#endif
