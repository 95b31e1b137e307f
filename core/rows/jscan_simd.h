/* SPDX-License-Identifier: MIT */
/*
 * The JSON scanner's per-ISA string scanning (jscan_sse2.c, jscan_avx2.c,
 * each compiled with its -m flag; core/meson.build). Internal to core/rows.
 */
#ifndef SLUICE_CORE_JSCAN_SIMD_H
#define SLUICE_CORE_JSCAN_SIMD_H

/*
 * Each returns the first byte of [p, end) that a JSON string cannot hold
 * as is, that is < 0x20, '"', '\\' or >= 0x80 (the last only to be
 * validated as UTF-8), or end. They never read outside [p, end).
 */
typedef const char *(*sl_jscan_run_fn)(const char *p, const char *end);

#if defined(__x86_64__) || defined(__i386__)
#define SL_JSCAN_X86 1
const char *sl_jscan_run_sse2(const char *p, const char *end);
const char *sl_jscan_run_avx2(const char *p, const char *end);
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
/*
 * The special bytes (as above) among the 16 at p, one bit each, for the
 * inline first look at a string: SSE2 is part of x86-64 itself, so this
 * needs no -m flag and no run-time check.
 */
#define SL_JSCAN_SSE2_INLINE 1
static inline unsigned sl_jscan_special16(const char *p)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i m = _mm_or_si128(
		_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
		_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
	return (unsigned)_mm_movemask_epi8(m);
}
#endif

#endif
