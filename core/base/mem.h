/* SPDX-License-Identifier: MIT */
/*
 * Memory hints for the big arrays of a batch (columns, string arenas, hash
 * tables): transparent huge pages where the system offers them on request
 * (THP "madvise" mode, Debian's default), so that random access into a
 * table of many MiB costs fewer TLB misses and page faults.
 */
#ifndef SLUICE_CORE_MEM_H
#define SLUICE_CORE_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* Asks for huge pages over the whole pages of [p, p + n) when n >= 2 MiB. A hint. */
static inline void sl_mem_huge(void *p, size_t n)
{
	if (!p || n < (2u << 20))
		return;
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	if (e > a)
		madvise((void *)a, e - a, MADV_HUGEPAGE);
}

/*
 * A growing array's next size from its fill so far: bytes used by n items,
 * want items expected in all (a reservation), with a sixteenth to spare.
 * 0 when there is nothing to go by yet (under a thousand items, or none
 * expected past n).
 */
static inline size_t sl_mem_estimate(size_t bytes, size_t n, size_t want)
{
	if (n < 1024 || want <= n)
		return 0;
	size_t est = bytes / n * want;
	return est + est / 16;
}

#endif
