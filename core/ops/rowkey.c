/* SPDX-License-Identifier: MIT */
/* Order-preserving, prefix-free encoding of row values (layout in rowkey.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rowkey.h"

#define TAG_NULL 0x00
#define TAG_VALUE 0x01
#define STR_ESC 0xFF /* after 0x00: a 0x00 byte of the string */
#define STR_END 0x01 /* after 0x00: the end of the string */
#define SIGN_BIT UINT64_C(0x8000000000000000)
#define QUIET_NAN UINT64_C(0x7FF8000000000000)

void sl_keybuf_init(struct sl_keybuf *k) { memset(k, 0, sizeof(*k)); }

void sl_keybuf_release(struct sl_keybuf *k)
{
	free(k->data);
	memset(k, 0, sizeof(*k));
}

static int reserve(struct sl_keybuf *k, size_t more)
{
	if (k->cap - k->len >= more)
		return 0;
	size_t cap = k->cap ? k->cap : 64;
	while (cap - k->len < more) {
		if (cap > SIZE_MAX / 2)
			return ENOMEM;
		cap *= 2;
	}
	unsigned char *p = realloc(k->data, cap);
	if (!p)
		return ENOMEM;
	k->data = p;
	k->cap = cap;
	return 0;
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t int_bits(int64_t v) { return (uint64_t)v ^ SIGN_BIT; }
static int64_t int_value(uint64_t u) { return (int64_t)(u ^ SIGN_BIT); }

static uint64_t double_bits(double d)
{
	uint64_t u;
	if (isnan(d))
		u = QUIET_NAN;
	else {
		if (d == 0)
			d = 0.0; /* -0.0 joins 0.0 */
		memcpy(&u, &d, sizeof(u));
	}
	return u & SIGN_BIT ? ~u : u | SIGN_BIT;
}

static double double_value(uint64_t u)
{
	double d;
	u = u & SIGN_BIT ? u & ~SIGN_BIT : ~u;
	memcpy(&d, &u, sizeof(d));
	return d;
}

/* Bytes one non-null value takes after its tag (a string: at least). */
static size_t value_size(enum sl_type t, size_t slen, const char *s)
{
	switch (t) {
	case SL_TYPE_BOOLEAN:
		return 1;
	case SL_TYPE_WINDOW:
		return 16;
	case SL_TYPE_STRING: {
		size_t zeros = 0;
		for (size_t i = 0; i < slen; i++)
			zeros += s[i] == 0;
		return slen + zeros + 2;
	}
	default:
		return 8;
	}
}

static void put_value(unsigned char *p, enum sl_type t, const union sl_cell *c, const char *s,
		      size_t slen)
{
	switch (t) {
	case SL_TYPE_BOOLEAN:
		*p = c->i != 0;
		break;
	case SL_TYPE_WINDOW:
		put_u64(p, int_bits(c->w.start));
		put_u64(p + 8, int_bits(c->w.end));
		break;
	case SL_TYPE_DOUBLE:
		put_u64(p, double_bits(c->d));
		break;
	case SL_TYPE_STRING:
		for (size_t i = 0; i < slen; i++) {
			*p++ = (unsigned char)s[i];
			if (s[i] == 0)
				*p++ = STR_ESC;
		}
		*p++ = 0x00;
		*p = STR_END;
		break;
	default:
		put_u64(p, int_bits(c->i));
		break;
	}
}

int sl_rowkey_encode(const struct sl_batch *b, size_t row, const size_t *cols, size_t ncols,
		     struct sl_keybuf *out)
{
	size_t old = out->len;

	for (size_t i = 0; i < ncols; i++) {
		const struct sl_batch_col *col = &b->cols[cols[i]];
		const char *s = NULL;
		size_t slen = 0, size;
		int rc;

		if (col->nulls[row]) {
			if ((rc = reserve(out, 1))) {
				out->len = old;
				return rc;
			}
			out->data[out->len++] = TAG_NULL;
			continue;
		}
		if (col->type == SL_TYPE_STRING)
			s = sl_batch_str(b, row, cols[i], &slen);
		size = value_size(col->type, slen, s);
		if ((rc = reserve(out, 1 + size))) {
			out->len = old;
			return rc;
		}
		out->data[out->len] = TAG_VALUE;
		put_value(out->data + out->len + 1, col->type, &col->cells[row], s, slen);
		out->len += 1 + size;
	}
	return 0;
}

int sl_rowkey_encode_window(struct sl_keybuf *out, int64_t start, int64_t end)
{
	union sl_cell c = {.w = {start, end}};
	int rc = reserve(out, 17);

	if (rc)
		return rc;
	out->data[out->len] = TAG_VALUE;
	put_value(out->data + out->len + 1, SL_TYPE_WINDOW, &c, NULL, 0);
	out->len += 17;
	return 0;
}

int sl_rowkey_decode_window(const void *key, size_t len, int64_t *start, int64_t *end)
{
	const unsigned char *p = key;

	if (len < 17 || p[0] != TAG_VALUE)
		return SL_ECORRUPT;
	*start = int_value(get_u64(p + 1));
	*end = int_value(get_u64(p + 9));
	return 0;
}

/*
 * Measures the value of type t at p (end at e): *size gets its bytes after
 * the tag, *slen a string's decoded length and *escaped whether it holds
 * a 0x00. Returns false when it runs past e or is malformed.
 */
static bool measure(const unsigned char *p, const unsigned char *e, enum sl_type t, size_t *size,
		    size_t *slen, bool *escaped)
{
	const unsigned char *q = p;

	*slen = 0;
	*escaped = false;
	switch (t) {
	case SL_TYPE_BOOLEAN:
		*size = 1;
		return e - p >= 1 && *p <= 1;
	case SL_TYPE_WINDOW:
		*size = 16;
		return e - p >= 16;
	case SL_TYPE_STRING:
		for (;;) {
			const unsigned char *z = memchr(q, 0, (size_t)(e - q));
			if (!z || e - z < 2)
				return false;
			*slen += (size_t)(z - q);
			if (z[1] == STR_END) {
				*size = (size_t)(z + 2 - p);
				return true;
			}
			if (z[1] != STR_ESC)
				return false;
			*escaped = true;
			(*slen)++;
			q = z + 2;
		}
	case SL_TYPE_BIGINT:
	case SL_TYPE_INT:
	case SL_TYPE_TIMESTAMP:
	case SL_TYPE_DATE:
	case SL_TYPE_DOUBLE:
		*size = 8;
		return e - p >= 8;
	}
	return false;
}

static void set_nulls(struct sl_batch *b, size_t row, const size_t *dest_cols, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sl_batch_set_null(b, row, dest_cols[i]);
}

int sl_rowkey_decode(const void *key, size_t len, const enum sl_type *types, size_t n,
		     struct sl_batch *b, size_t row, const size_t *dest_cols)
{
	const unsigned char *start = key, *e = start + len, *p;
	size_t size, slen;
	bool escaped;

	/* check everything before writing anything */
	p = start;
	for (size_t i = 0; i < n; i++) {
		if (p == e || *p > TAG_VALUE)
			return SL_ECORRUPT;
		if (*p++ == TAG_NULL)
			continue;
		if (!measure(p, e, types[i], &size, &slen, &escaped))
			return SL_ECORRUPT;
		p += size;
	}
	if (p != e)
		return SL_ECORRUPT;

	p = start;
	for (size_t i = 0; i < n; i++) {
		size_t col = dest_cols[i];
		if (*p++ == TAG_NULL) {
			sl_batch_set_null(b, row, col);
			continue;
		}
		measure(p, e, types[i], &size, &slen, &escaped);
		switch (types[i]) {
		case SL_TYPE_BOOLEAN:
			sl_batch_set_int(b, row, col, *p);
			break;
		case SL_TYPE_WINDOW:
			sl_batch_set_window(b, row, col, int_value(get_u64(p)),
					    int_value(get_u64(p + 8)));
			break;
		case SL_TYPE_DOUBLE:
			sl_batch_set_double(b, row, col, double_value(get_u64(p)));
			break;
		case SL_TYPE_STRING: {
			char *tmp = NULL;
			const char *s = (const char *)p;
			int rc;
			if (escaped) {
				tmp = malloc(slen ? slen : 1);
				if (!tmp) {
					set_nulls(b, row, dest_cols, n);
					return ENOMEM;
				}
				for (size_t j = 0, k = 0; j < slen; k++) {
					tmp[j++] = (char)p[k];
					if (p[k] == 0)
						k++; /* skip the 0xFF escape */
				}
				s = tmp;
			}
			rc = sl_batch_set_str(b, row, col, s, slen);
			free(tmp);
			if (rc) {
				set_nulls(b, row, dest_cols, n);
				return rc;
			}
			break;
		}
		default:
			sl_batch_set_int(b, row, col, int_value(get_u64(p)));
			break;
		}
		p += size;
	}
	return 0;
}
