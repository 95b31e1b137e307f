/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by parquet.c (pages, chunks, row groups) and
 * parquet_thrift.c (the Thrift compact protocol and the footer structs).
 * Never included from outside core/sinks.
 */
#ifndef SLUICE_CORE_PARQUET_INT_H
#define SLUICE_CORE_PARQUET_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "strbuf.h"

/* parquet.thrift enums (PARQUET-NOTES §3) */
enum { PQ_BOOLEAN = 0, PQ_INT32 = 1, PQ_INT64 = 2, PQ_DOUBLE = 5, PQ_BYTE_ARRAY = 6 };
enum { PQ_PLAIN = 0, PQ_RLE = 3, PQ_RLE_DICTIONARY = 8 };
enum { PQ_DATA_PAGE = 0, PQ_DICTIONARY_PAGE = 2 };
enum { PQ_UNCOMPRESSED = 0, PQ_ZSTD = 6 };

/* A Thrift compact writer over a strbuf: the last field id of each open struct. */
struct pq_tw {
	struct sl_strbuf *b;
	int16_t last[16]; /* last field id written, per nesting depth */
	int depth;        /* 0: outside any struct of this writer */
};

/* Compact-protocol type nibbles */
enum { TW_I32 = 5, TW_I64 = 6, TW_BINARY = 8, TW_LIST = 9, TW_STRUCT = 12 };

void pq_tw_varint(struct sl_strbuf *b, uint64_t v);
void pq_tw_field(struct pq_tw *t, int id, int type);
void pq_tw_i32(struct pq_tw *t, int id, int32_t v);
void pq_tw_i64(struct pq_tw *t, int id, int64_t v);
void pq_tw_bool(struct pq_tw *t, int id, bool v);
void pq_tw_bin(struct pq_tw *t, int id, const void *p, size_t n);
void pq_tw_struct(struct pq_tw *t, int id); /* opens a struct field */
void pq_tw_elem(struct pq_tw *t);            /* opens a struct list element */
void pq_tw_end(struct pq_tw *t);             /* closes the innermost struct */
void pq_tw_list(struct pq_tw *t, int id, int elem_type, size_t n);
void pq_tw_list_i32(struct sl_strbuf *b, int32_t v); /* a list element */
void pq_tw_list_bin(struct sl_strbuf *b, const void *p, size_t n);

/* Appends PageHeader{type, sizes, data or dictionary header} to b. */
void pq_page_header(struct sl_strbuf *b, int type, size_t usize, size_t csize, size_t nvalues,
		    int encoding);

/* Appends the RLE/bit-packed hybrid encoding of v[0..n) at width bits (1..32). */
void pq_rle_encode(struct sl_strbuf *b, const uint32_t *v, size_t n, int width);

#endif
