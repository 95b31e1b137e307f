/* SPDX-License-Identifier: MIT */
/* Batches of rows, column by column, with one string arena. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "mem.h"

int sl_batch_init(struct sl_batch *b, const struct sl_schema *schema)
{
	memset(b, 0, sizeof(*b));
	b->schema = schema;
	b->cols = calloc(schema->n ? schema->n : 1, sizeof(*b->cols));
	if (!b->cols)
		return ENOMEM;
	for (size_t c = 0; c < schema->n; c++)
		b->cols[c].type = schema->cols[c].type;
	return 0;
}

void sl_batch_project(struct sl_batch *b, const uint8_t *used)
{
	assert(b->cap == 0);
	for (size_t c = 0; c < b->schema->n; c++)
		b->cols[c].dead = !used[c];
}

/* Frees the row arrays (a dead column's are the shared ones). */
static void free_rows(struct sl_batch *b)
{
	for (size_t c = 0; c < b->schema->n; c++) {
		if (!b->cols[c].dead) {
			free(b->cols[c].cells);
			free(b->cols[c].nulls);
		}
		b->cols[c].cells = NULL;
		b->cols[c].nulls = NULL;
	}
	free(b->dead_cells);
	free(b->dead_nulls);
	b->dead_cells = NULL;
	b->dead_nulls = NULL;
}

void sl_batch_release(struct sl_batch *b)
{
	if (!b->cols)
		return;
	free_rows(b);
	free(b->cols);
	free(b->arena);
	memset(b, 0, sizeof(*b));
}

void sl_batch_clear(struct sl_batch *b)
{
	b->nrows = 0;
	b->arena_len = 0;
}

static int grow_rows_to(struct sl_batch *b, size_t cap);

static int grow_rows(struct sl_batch *b)
{
	return grow_rows_to(b, b->cap ? b->cap * 2 : 1024);
}

int sl_batch_reserve(struct sl_batch *b, size_t rows)
{
	return rows > b->cap ? grow_rows_to(b, rows) : 0;
}

static int grow_rows_to(struct sl_batch *b, size_t cap)
{
	bool dead = false;

	if (b->side) {
		b->full = true;
		return ENOSPC; /* the arrays are another batch's, or lent to one */
	}

	for (size_t c = 0; c < b->schema->n; c++)
		dead |= b->cols[c].dead;
	if (dead) {
		union sl_cell *cells = realloc(b->dead_cells, cap * sizeof(*cells));
		if (!cells)
			return ENOMEM;
		b->dead_cells = cells;
		uint8_t *nulls = realloc(b->dead_nulls, cap);
		if (!nulls)
			return ENOMEM;
		memset(nulls + b->cap, 1, cap - b->cap);
		b->dead_nulls = nulls;
	}
	for (size_t c = 0; c < b->schema->n; c++) {
		if (b->cols[c].dead) {
			b->cols[c].cells = b->dead_cells;
			b->cols[c].nulls = b->dead_nulls;
			continue;
		}
		union sl_cell *cells = realloc(b->cols[c].cells, cap * sizeof(*cells));
		if (!cells)
			return ENOMEM;
		sl_mem_huge(cells, cap * sizeof(*cells));
		b->cols[c].cells = cells;
		uint8_t *nulls = realloc(b->cols[c].nulls, cap);
		if (!nulls)
			return ENOMEM;
		b->cols[c].nulls = nulls;
	}
	b->cap = cap;
	return 0;
}

int sl_batch_add_row(struct sl_batch *b, size_t *row)
{
	int rc;

	if (b->nrows == b->cap && (rc = grow_rows(b)))
		return rc;
	for (size_t c = 0; c < b->schema->n; c++)
		if (!b->cols[c].dead)
			b->cols[c].nulls[b->nrows] = 1;
	*row = b->nrows++;
	return 0;
}

void sl_batch_drop_last(struct sl_batch *b)
{
	if (b->nrows)
		b->nrows--;
}

/*
 * The arena's next size for need bytes: doubled, or, past a thousand rows
 * when rows were reserved ahead (sl_batch_reserve), what the reserved rows
 * will need at the bytes per row so far, so that a big batch's strings are
 * copied by realloc once or twice instead of a dozen times.
 */
static size_t arena_next(const struct sl_batch *b, size_t need)
{
	size_t cap = b->arena_cap ? b->arena_cap : 65536;
	while (cap < need)
		cap *= 2;
	size_t est = sl_mem_estimate(b->arena_len, b->nrows - b->row0, b->cap - b->row0);
	if (cap < est)
		cap = est < UINT32_MAX ? est : UINT32_MAX;
	return cap;
}

/* Room for more bytes of strings in b's arena: 0, EFBIG (past 4 GiB) or ENOMEM. */
static int arena_room(struct sl_batch *b, size_t more)
{
	if (more > UINT32_MAX || b->arena_len + more > UINT32_MAX)
		return EFBIG; /* one batch holds at most 4 GiB of strings */
	if (b->arena_len + more <= b->arena_cap)
		return 0;
	size_t cap = arena_next(b, b->arena_len + more);
	char *a = realloc(b->arena, cap);
	if (!a)
		return ENOMEM;
	sl_mem_huge(a, cap);
	b->arena = a;
	b->arena_cap = cap;
	return 0;
}

int sl_batch_set_str(struct sl_batch *b, size_t row, size_t col, const char *s, size_t len)
{
	int rc = arena_room(b, len);
	if (rc)
		return rc;
	if (len)
		memcpy(b->arena + b->arena_len, s, len);
	b->cols[col].cells[row].s.off = (uint32_t)b->arena_len;
	b->cols[col].cells[row].s.len = (uint32_t)len;
	b->cols[col].nulls[row] = 0;
	b->arena_len += len;
	return 0;
}

void sl_batch_set_int(struct sl_batch *b, size_t row, size_t col, int64_t v)
{
	b->cols[col].cells[row].i = v;
	b->cols[col].nulls[row] = 0;
}

void sl_batch_set_double(struct sl_batch *b, size_t row, size_t col, double v)
{
	b->cols[col].cells[row].d = v;
	b->cols[col].nulls[row] = 0;
}

void sl_batch_set_window(struct sl_batch *b, size_t row, size_t col, int64_t start, int64_t end)
{
	b->cols[col].cells[row].w.start = start;
	b->cols[col].cells[row].w.end = end;
	b->cols[col].nulls[row] = 0;
}

void sl_batch_set_null(struct sl_batch *b, size_t row, size_t col)
{
	b->cols[col].nulls[row] = 1;
}

int sl_batch_append(struct sl_batch *dst, const struct sl_batch *src)
{
	int rc;

	if (dst->arena_len + src->arena_len > UINT32_MAX)
		return EFBIG;
	while (dst->cap < dst->nrows + src->nrows)
		if ((rc = grow_rows(dst)))
			return rc;
	if ((rc = arena_room(dst, src->arena_len)))
		return rc;
	if (src->arena_len)
		memcpy(dst->arena + dst->arena_len, src->arena, src->arena_len);
	for (size_t c = 0; c < dst->schema->n && src->nrows; c++) {
		if (dst->cols[c].dead)
			continue; /* src's is dead too: both batches project alike */
		union sl_cell *to = dst->cols[c].cells + dst->nrows;
		memcpy(to, src->cols[c].cells, src->nrows * sizeof(*to));
		memcpy(dst->cols[c].nulls + dst->nrows, src->cols[c].nulls, src->nrows);
		if (dst->cols[c].type != SL_TYPE_STRING)
			continue;
		for (size_t r = 0; r < src->nrows; r++) /* strings now follow dst's */
			to[r].s.off += (uint32_t)dst->arena_len;
	}
	dst->nrows += src->nrows;
	dst->arena_len += src->arena_len;
	return 0;
}

int sl_batch_side_begin(struct sl_batch *b, size_t from, size_t to, struct sl_batch *side)
{
	assert(from >= b->nrows && from <= to && to <= b->cap);
	memset(side, 0, sizeof(*side));
	side->cols = malloc((b->schema->n ? b->schema->n : 1) * sizeof(*side->cols));
	if (!side->cols)
		return ENOMEM;
	memcpy(side->cols, b->cols, b->schema->n * sizeof(*side->cols));
	side->schema = b->schema;
	side->nrows = side->row0 = from;
	side->cap = to;
	side->side = true;
	return 0;
}

void sl_batch_side_drop(struct sl_batch *side)
{
	free(side->cols);
	free(side->arena);
	memset(side, 0, sizeof(*side));
}

void sl_batch_cap(struct sl_batch *b, size_t rows, size_t *saved)
{
	assert(rows >= b->nrows && rows <= b->cap && !b->side);
	*saved = b->cap;
	b->cap = rows;
	b->side = true;
	b->full = false;
}

bool sl_batch_uncap(struct sl_batch *b, size_t saved)
{
	bool refused = b->full;
	b->cap = saved;
	b->side = false;
	b->full = false;
	return refused;
}

int sl_batch_side_join(struct sl_batch *b, struct sl_batch *side)
{
	size_t base = b->arena_len, at = b->nrows, n = side->nrows - side->row0;
	int rc = arena_room(b, side->arena_len);

	assert(side->side && at <= side->row0);
	if (rc == 0) {
		if (side->arena_len)
			memcpy(b->arena + base, side->arena, side->arena_len);
		for (size_t c = 0; c < b->schema->n; c++) {
			if (b->cols[c].dead)
				continue;
			union sl_cell *cells = b->cols[c].cells;
			if (at != side->row0 && n) {
				memmove(cells + at, cells + side->row0, n * sizeof(*cells));
				memmove(b->cols[c].nulls + at, b->cols[c].nulls + side->row0, n);
			}
			if (b->cols[c].type != SL_TYPE_STRING || !base)
				continue;
			for (size_t r = at; r < at + n; r++) /* strings now follow b's */
				cells[r].s.off += (uint32_t)base;
		}
		b->nrows = at + n;
		b->arena_len += side->arena_len;
	}
	sl_batch_side_drop(side);
	return rc;
}

void sl_batch_keep(struct sl_batch *b, const uint8_t *keep)
{
	size_t n = 0;
	for (size_t r = 0; r < b->nrows; r++) {
		if (!keep[r])
			continue;
		if (n != r) {
			for (size_t c = 0; c < b->schema->n; c++) {
				if (b->cols[c].dead)
					continue;
				b->cols[c].cells[n] = b->cols[c].cells[r];
				b->cols[c].nulls[n] = b->cols[c].nulls[r];
			}
		}
		n++;
	}
	b->nrows = n; /* the arena keeps the dropped rows' strings until the next clear */
}

void sl_batch_trim(struct sl_batch *b, size_t keep_rows)
{
	if (b->cap <= keep_rows)
		return;
	free_rows(b);
	free(b->arena);
	b->arena = NULL;
	b->nrows = b->cap = b->arena_len = b->arena_cap = 0;
}
