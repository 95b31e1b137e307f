/* SPDX-License-Identifier: MIT */
/*
 * The byte-level pieces of the Parquet encoder: the Thrift compact protocol
 * (PARQUET-NOTES §2), page headers, and the RLE/bit-packed hybrid (§4.2).
 */
#include <assert.h>

#include "parquet_int.h"

void pq_tw_varint(struct sl_strbuf *b, uint64_t v)
{
	unsigned char buf[10];
	size_t n = 0;

	while (v >= 0x80) {
		buf[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	buf[n++] = (unsigned char)v;
	sl_strbuf_add(b, buf, n);
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

void pq_tw_field(struct pq_tw *t, int id, int type)
{
	int delta = id - t->last[t->depth];

	if (delta > 0 && delta <= 15) {
		sl_strbuf_addc(t->b, (char)(delta << 4 | type));
	} else {
		sl_strbuf_addc(t->b, (char)type);
		pq_tw_varint(t->b, zigzag(id));
	}
	t->last[t->depth] = (int16_t)id;
}

void pq_tw_i32(struct pq_tw *t, int id, int32_t v)
{
	pq_tw_field(t, id, TW_I32);
	pq_tw_varint(t->b, zigzag(v));
}

void pq_tw_i64(struct pq_tw *t, int id, int64_t v)
{
	pq_tw_field(t, id, TW_I64);
	pq_tw_varint(t->b, zigzag(v));
}

void pq_tw_bool(struct pq_tw *t, int id, bool v)
{
	/* a bool field carries its value in the type nibble: 1 true, 2 false */
	pq_tw_field(t, id, v ? 1 : 2);
}

void pq_tw_bin(struct pq_tw *t, int id, const void *p, size_t n)
{
	pq_tw_field(t, id, TW_BINARY);
	pq_tw_list_bin(t->b, p, n);
}

void pq_tw_struct(struct pq_tw *t, int id)
{
	pq_tw_field(t, id, TW_STRUCT);
	pq_tw_elem(t);
}

void pq_tw_elem(struct pq_tw *t)
{
	assert(t->depth < 15);
	t->last[++t->depth] = 0;
}

void pq_tw_end(struct pq_tw *t)
{
	assert(t->depth > 0);
	sl_strbuf_addc(t->b, 0);
	t->depth--;
}

void pq_tw_list(struct pq_tw *t, int id, int elem_type, size_t n)
{
	pq_tw_field(t, id, TW_LIST);
	if (n < 15) {
		sl_strbuf_addc(t->b, (char)(n << 4 | (size_t)elem_type));
	} else {
		sl_strbuf_addc(t->b, (char)(0xf0 | elem_type));
		pq_tw_varint(t->b, n);
	}
}

void pq_tw_list_i32(struct sl_strbuf *b, int32_t v)
{
	pq_tw_varint(b, zigzag(v));
}

void pq_tw_list_bin(struct sl_strbuf *b, const void *p, size_t n)
{
	pq_tw_varint(b, n);
	sl_strbuf_add(b, p, n);
}

void pq_page_header(struct sl_strbuf *b, int type, size_t usize, size_t csize, size_t nvalues,
		    int encoding)
{
	struct pq_tw t = { .b = b };

	pq_tw_elem(&t); /* PageHeader */
	pq_tw_i32(&t, 1, type);
	pq_tw_i32(&t, 2, (int32_t)usize);
	pq_tw_i32(&t, 3, (int32_t)csize);
	if (type == PQ_DICTIONARY_PAGE) {
		pq_tw_struct(&t, 7); /* DictionaryPageHeader */
		pq_tw_i32(&t, 1, (int32_t)nvalues);
		pq_tw_i32(&t, 2, encoding);
		pq_tw_end(&t);
	} else {
		pq_tw_struct(&t, 5); /* DataPageHeader */
		pq_tw_i32(&t, 1, (int32_t)nvalues);
		pq_tw_i32(&t, 2, encoding);
		pq_tw_i32(&t, 3, PQ_RLE); /* definition levels */
		pq_tw_i32(&t, 4, PQ_RLE); /* repetition levels (none written) */
		pq_tw_end(&t);
	}
	pq_tw_end(&t);
}

/* An RLE run: count values equal to v. */
static void rle_run(struct sl_strbuf *b, uint32_t v, size_t count, int width)
{
	pq_tw_varint(b, (uint64_t)count << 1);
	for (int i = 0; i < (width + 7) / 8; i++)
		sl_strbuf_addc(b, (char)(v >> (8 * i)));
}

/* A bit-packed run of v[0..n), n a multiple of 8 but for the last run (zero padded). */
static void packed_run(struct sl_strbuf *b, const uint32_t *v, size_t n, int width)
{
	size_t groups = (n + 7) / 8;
	uint64_t acc = 0;
	int nacc = 0;

	if (n == 0)
		return;
	pq_tw_varint(b, (uint64_t)groups << 1 | 1);
	for (size_t i = 0; i < groups * 8; i++) {
		uint64_t x = i < n ? v[i] : 0;
		acc |= x << nacc;
		nacc += width;
		while (nacc >= 8) {
			sl_strbuf_addc(b, (char)acc);
			acc >>= 8;
			nacc -= 8;
		}
	}
	/* groups of 8 values of width bits end on a byte boundary */
	assert(nacc == 0);
}

void pq_rle_encode(struct sl_strbuf *b, const uint32_t *v, size_t n, int width)
{
	size_t pend = 0; /* v[pend..i) waits for a bit-packed run */
	size_t i = 0;

	while (i < n) {
		size_t r = 1;
		while (i + r < n && v[i + r] == v[i])
			r++;
		if (r < 8) {
			i += r;
			continue;
		}
		/* a run worth RLE: fill the pending values up to a multiple of 8 first */
		size_t fill = (8 - (i - pend) % 8) % 8;
		i += fill;
		r -= fill;
		if (r < 8) {
			i += r;
			continue;
		}
		packed_run(b, v + pend, i - pend, width);
		rle_run(b, v[i], r, width);
		i += r;
		pend = i;
	}
	packed_run(b, v + pend, n - pend, width);
}
