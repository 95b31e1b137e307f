/* SPDX-License-Identifier: MIT */
/*
 * The JSON scanner's string scanning, 32 bytes at a time (AVX2; chosen at
 * run time when the CPU has it), the rest with SSE2's 16.
 */
#include <immintrin.h>

#include "jscan_simd.h"

const char *sl_jscan_run_avx2(const char *p, const char *end)
{
	const __m256i quote = _mm256_set1_epi8('"'), bslash = _mm256_set1_epi8('\\');
	const __m256i space = _mm256_set1_epi8(0x20);

	while (end - p >= 32) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(const void *)p);
		/* signed: bytes >= 0x80 are negative, so 0x20 > x finds < 0x20 and >= 0x80 */
		__m256i m = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(x, quote),
							    _mm256_cmpeq_epi8(x, bslash)),
					    _mm256_cmpgt_epi8(space, x));
		unsigned mask = (unsigned)_mm256_movemask_epi8(m);
		if (mask)
			return p + __builtin_ctz(mask);
		p += 32;
	}
	return sl_jscan_run_sse2(p, end);
}
