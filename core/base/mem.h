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

#endif
