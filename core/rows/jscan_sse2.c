/* SPDX-License-Identifier: MIT */
/* The JSON scanner's string scanning, 16 bytes at a time (SSE2: x86-64's baseline). */
#include <emmintrin.h>

#include "jscan_simd.h"

const char *sl_jscan_run_sse2(const char *p, const char *end)
{
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i space = _mm_set1_epi8(0x20);

	while (end - p >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* signed: bytes >= 0x80 are negative, so one compare finds < 0x20 and >= 0x80 */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote),
						      _mm_cmpeq_epi8(x, bslash)),
					 _mm_cmplt_epi8(x, space));
		unsigned mask = (unsigned)_mm_movemask_epi8(m);
		if (mask)
			return p + __builtin_ctz(mask);
		p += 16;
	}
	for (; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
			return p;
	}
	return p;
}
