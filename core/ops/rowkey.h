/* SPDX-License-Identifier: MIT */
/*
 * Row keys: the values of some columns of one batch row as a byte string
 * whose memcmp order is the values' order (column by column), for the
 * state of deduplication and aggregation kept in LMDB. Pure functions.
 */
#ifndef SLUICE_CORE_ROWKEY_H
#define SLUICE_CORE_ROWKEY_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "config.h"

/*
 * Encoding of one value: a tag byte, then the value.
 *
 *   OFFSET SIZE MEANING
 *   0      1    0x00 null (nothing follows; sorts before any value), 0x01 a value
 *   1      ...  by the column's type:
 *     BIGINT, INT, TIMESTAMP, DATE: 8 bytes, the int64 with its sign bit
 *       flipped, big-endian (every integer type takes 8 bytes);
 *     DOUBLE: 8 bytes, big-endian IEEE bits, all bits flipped when negative
 *       and only the sign bit otherwise; -0.0 is stored as 0.0 and every NaN
 *       as the one quiet NaN, which sorts after +Infinity (Spark normalises
 *       grouping keys the same way, so -0.0 and 0.0 are one group);
 *     BOOLEAN: 1 byte, 0x00 false, 0x01 true;
 *     STRING: the bytes with each 0x00 written 0x00 0xFF, then 0x00 0x01
 *       (sorts by unsigned bytes, a prefix first, as Spark's binary order);
 *     WINDOW: start then end, 8 bytes each as BIGINT.
 *
 * No encoding is a proper prefix of another of the same type, so a
 * concatenation of encodings decodes one way and memcmp of two keys (then
 * the shorter first) orders them by the first differing column.
 */

/* A growable byte buffer. Zero-initialise it, or use sl_keybuf_init(). */
struct sl_keybuf {
	unsigned char *data; /* len bytes in use, cap allocated; NULL when cap is 0 */
	size_t len;
	size_t cap;
};

/* Makes an empty buffer (no allocation). */
void sl_keybuf_init(struct sl_keybuf *k);
/* Frees the bytes. The struct is the caller's and is left empty. */
void sl_keybuf_release(struct sl_keybuf *k);
/* Empties the buffer, keeping its memory. */
static inline void sl_keybuf_clear(struct sl_keybuf *k) { k->len = 0; }

/*
 * Appends to out the encodings of the values of b's columns cols[0..ncols)
 * in row, in that order. Returns 0 or ENOMEM (out keeps its old length).
 * WINDOW columns are allowed. Thread rules: b is only read.
 */
int sl_rowkey_encode(const struct sl_batch *b, size_t row, const size_t *cols, size_t ncols,
		     struct sl_keybuf *out);

/*
 * Appends the encoding of the non-null window [start, end): the leading
 * part of an aggregation key (window, then the group columns). Keys built
 * this way sort by start first, so with one window length they also sort
 * by end: a scan from the first key finds every window with end <= the
 * watermark before any other. Returns 0 or ENOMEM (out unchanged).
 */
int sl_rowkey_encode_window(struct sl_keybuf *out, int64_t start, int64_t end);

/*
 * Reads the leading window of a key made by sl_rowkey_encode_window()
 * (without decoding the rest). Returns 0, or SL_ECORRUPT when the key does
 * not start with a non-null window.
 */
int sl_rowkey_decode_window(const void *key, size_t len, int64_t *start, int64_t *end);

/*
 * Decodes key (len bytes: exactly n values, of types[0..n)) into row of b,
 * value i going to column dest_cols[i], whose type must be types[i]; nulls
 * become nulls, strings are copied into b's arena. Returns 0; SL_ECORRUPT
 * when the bytes are not n values of those types with nothing after them
 * (nothing is written then); ENOMEM or EFBIG from sl_batch_set_str(), the
 * dest cells then being null. The key is only read.
 */
int sl_rowkey_decode(const void *key, size_t len, const enum sl_type *types, size_t n,
		     struct sl_batch *b, size_t row, const size_t *dest_cols);

#endif
