/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: sl_config_parse() on an arbitrary sluice.json. It must not
 * crash or leak; it accepts, or refuses with SL_ECONFIG and exactly one
 * non-empty line in err, leaving *out untouched. A second parse into a
 * short error buffer (exact-size allocation, so ASan sees an overrun) must
 * give the same result.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"

#define ORIGIN "sluice.json"

static void fail(const char *why, const char *err, const uint8_t *data, size_t size)
{
	fprintf(stderr, "fuzz-config: %s\n  err: '%s'\n  input (%zu bytes): '", why,
		err ? err : "(null)", size);
	fwrite(data, 1, size, stderr);
	fprintf(stderr, "'\n");
	abort();
}

/* One line: non-empty, NUL-terminated within len, no control byte (so no LF or CR). */
static bool one_line(const char *s, size_t len)
{
	size_t n = strnlen(s, len);

	if (n == len)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* Parses data with an err buffer of errlen bytes; returns the code, checks the contract. */
static int parse(const uint8_t *data, size_t size, size_t errlen, char **errout)
{
	static struct sl_config untouched; /* a sentinel that *out must keep on failure */
	struct sl_config *c = &untouched;
	char *err = malloc(errlen);
	char *text = malloc(size ? size : 1);
	int rc;

	if (!err || !text)
		abort();
	memcpy(text, data, size); /* exact size: no NUL after the document */
	memset(err, 0x5A, errlen);
	rc = sl_config_parse(text, size, ORIGIN, &c, err, errlen);
	if (rc == 0) {
		if (c == &untouched || c == NULL)
			fail("accepted without a config", NULL, data, size);
		for (size_t i = 0; i < sl_config_nqueries(c); i++)
			if (!sl_config_query(c, i) || !sl_config_query_name(c, i) ||
			    !sl_config_name_valid(sl_config_query_name(c, i)) ||
			    sl_config_find(c, sl_config_query_name(c, i)) != sl_config_query(c, i))
				fail("accepted config with a bad query name", NULL, data, size);
		sl_config_free(c);
	} else if (rc == SL_ECONFIG) {
		if (c != &untouched)
			fail("refused but wrote *out", NULL, data, size);
		if (errlen > 1 && !one_line(err, errlen))
			fail("error is not one line", NULL, data, size);
		if (errlen > 1 && !err[0])
			fail("empty error", err, data, size);
	} else if (rc != ENOMEM) {
		fail("unexpected return code", NULL, data, size);
	}
	if (errout)
		*errout = err;
	else
		free(err);
	free(text);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err;
	int rc = parse(data, size, 256, &err);

	/* a short buffer (1 to 24 bytes) truncates the same message */
	if (rc == SL_ECONFIG) {
		size_t small = 1 + size % 24;
		if (parse(data, size, small, NULL) != rc)
			fail("result depends on the error buffer's size", err, data, size);
	}
	free(err);
	return 0;
}
