/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (core/base/siphash.h) against the reference implementation's
 * vectors: key 00..0f, message 00..len-1.
 */
#include <stdint.h>

#include "check.h"
#include "siphash.h"

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void test_vectors_64(void)
{
	/* vectors.h of the reference: lengths 0, 1, 7, 8, 15, 63 */
	static const struct {
		size_t len;
		uint64_t want;
	} v[] = {{0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},
		 {7, 0xab0200f58b01d137ull},  {8, 0x93f5f5799a932462ull},
		 {15, 0xa129ca6149be45e5ull}, {63, 0x958a324ceb064572ull}};
	uint8_t key[16], msg[64], out[8];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		sl_siphash(key, msg, v[i].len, out, 8);
		CHECK(le64(out) == v[i].want);
	}
}

static void test_vector_128(void)
{
	static const uint8_t want[16] = {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
					 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93};
	uint8_t key[16], out[16];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	sl_siphash(key, "", 0, out, 16);
	CHECK(!memcmp(out, want, 16));
	/* another key gives another digest */
	key[0] ^= 1;
	sl_siphash(key, "", 0, out, 16);
	CHECK(memcmp(out, want, 16));
}

int main(void)
{
	test(test_vectors_64);
	test(test_vector_128);
	return test_exit();
}
