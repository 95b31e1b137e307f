/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (Aumasson and Bernstein), the keyed hash of the file
 * source's seen set: with a random key kept in the catalog, no uploader can
 * choose two paths that collide, so a 128-bit digest stands for the path.
 */
#ifndef SLUICE_CORE_SIPHASH_H
#define SLUICE_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The 64-bit (outlen 8) or 128-bit (outlen 16) SipHash-2-4 of data into out. */
void sl_siphash(const uint8_t key[16], const void *data, size_t len, uint8_t *out, size_t outlen);

#endif
