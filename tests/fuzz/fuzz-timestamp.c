/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: core/timestamp.c. Arbitrary bytes through sl_timestamp_parse
 * and sl_date_parse must not crash; an accepted value formats and parses
 * back (truncated to milliseconds for a TIMESTAMP); any int64 formats
 * within SL_TIMESTAMP_BUFSZ. abort() on a violation.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "timestamp.h"

static void fail(const char *why, const uint8_t *data, size_t size)
{
	fprintf(stderr, "fuzz-timestamp: %s\n  input (%zu bytes): '", why, size);
	fwrite(data, 1, size, stderr);
	fprintf(stderr, "'\n");
	abort();
}

static int64_t floor_ms(int64_t us)
{
	int64_t r = us % 1000;
	return r < 0 ? us - r - 1000 : us - r;
}

/* Formats us and checks the text's shape; returns its length. */
static size_t format(int64_t us, char buf[SL_TIMESTAMP_BUFSZ], const uint8_t *data, size_t size)
{
	memset(buf, 'x', SL_TIMESTAMP_BUFSZ);
	size_t n = sl_timestamp_format(us, buf);
	/* 2026-10-04T12:00:00.000Z is 24 bytes; a signed year adds a sign and digits */
	if (n >= SL_TIMESTAMP_BUFSZ || buf[n] != 0 || strlen(buf) != n || n < 24 ||
	    buf[n - 1] != 'Z' || buf[n - 5] != '.' || buf[n - 14] != 'T')
		fail("sl_timestamp_format wrote a malformed text", data, size);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exact-size copy: ASan catches a read past len (the parsers need no NUL) */
	char *s = malloc(size ? size : 1);
	char buf[SL_TIMESTAMP_BUFSZ], msg[160];
	int64_t us = INT64_C(0x5A5A5A5A5A5A5A5A), back;
	int32_t days = 0x5A5A5A5A, dback;

	if (!s)
		abort();
	memcpy(s, data, size);

	int rc = sl_timestamp_parse(s, size, &us);
	if (rc != 0 && rc != SL_EMALFORMED)
		fail("sl_timestamp_parse returned an unexpected code", data, size);
	if (rc != 0 && us != INT64_C(0x5A5A5A5A5A5A5A5A))
		fail("sl_timestamp_parse failed but wrote *us", data, size);
	if (rc == 0) {
		size_t n = format(us, buf, data, size);
		/*
		 * The grammar reads four-digit years; an offset can push a value
		 * into year -1 or 10000, which formats with a sign (ISO 8601) and
		 * does not read back. Anything else must.
		 */
		bool signed_year = buf[0] == '+' || buf[0] == '-';
		back = INT64_C(0x5A5A5A5A5A5A5A5A);
		int rc2 = sl_timestamp_parse(buf, n, &back);
		if (signed_year ? rc2 == 0 : rc2 != 0 || back != floor_ms(us)) {
			snprintf(msg, sizeof(msg),
				 "round trip: parsed %" PRId64
				 ", formatted '%s', read back %s %" PRId64,
				 us, buf, rc2 ? "error" : "as", back);
			fail(msg, data, size);
		}
		if (signed_year && us > -62167219200000000 + 86400 * INT64_C(1000000) &&
		    us < 253402300800000000 - 86400 * INT64_C(1000000))
			fail("a signed year far inside 0000-9999", data, size);
	}

	rc = sl_date_parse(s, size, &days);
	if (rc != 0 && rc != SL_EMALFORMED)
		fail("sl_date_parse returned an unexpected code", data, size);
	if (rc == 0) {
		size_t n = sl_date_format(days, buf);
		dback = 0;
		if (n != 10 || n != size || memcmp(buf, s, n) || sl_date_parse(buf, n, &dback) ||
		    dback != days) {
			snprintf(msg, sizeof(msg), "date round trip: %" PRId32 " formatted '%s'",
				 days, buf);
			fail(msg, data, size);
		}
	}

	/* any int64 formats within the buffer (the first 8 bytes as a value) */
	if (size >= 8) {
		int64_t v;
		memcpy(&v, data, 8);
		format(v, buf, data, size);
	}
	free(s);
	return 0;
}
