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

#endif
