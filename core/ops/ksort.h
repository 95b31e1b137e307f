/* SPDX-License-Identifier: MIT */
/*
 * Sorting indexes by byte-string keys, for the state's sorted puts (dedup
 * keys, group keys): memcmp order, a key that is a prefix of another first.
 *
 * The keys of one batch tend to share a long prefix (the same leading
 * digits of an id, the same high bytes of a window start), which makes
 * every memcmp of a comparison sort walk it again, behind a pointer. This
 * sort skips the prefix all keys share, sorts (8 bytes after it, index)
 * pairs with an integer comparison, and reads the keys again only where
 * two of those 8 bytes are equal.
 */
#ifndef SLUICE_CORE_KSORT_H
#define SLUICE_CORE_KSORT_H

#include <stddef.h>
#include <stdint.h>

/* Key idx of ctx: *len bytes at the result. */
typedef const unsigned char *(*sl_ksort_key_fn)(const void *ctx, uint32_t idx, size_t *len);

/*
 * Sorts idx[0..n) by their keys, ascending (equal keys in any order).
 * Returns 0, or ENOMEM with idx unchanged.
 */
int sl_ksort(uint32_t *idx, size_t n, sl_ksort_key_fn key, const void *ctx);

#endif
