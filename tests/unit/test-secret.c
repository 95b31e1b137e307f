/* SPDX-License-Identifier: MIT */
/* Secret references and masking (core/base/secret.h). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "secret.h"

static void test_refs(void)
{
	char why[256], *v = NULL, path[128];

	CHECK(sl_secret_is_ref("@env:X") && sl_secret_is_ref("@file:/x"));
	CHECK(!sl_secret_is_ref("env:X") && !sl_secret_is_ref("plain"));
	setenv("SLUICE_TEST_SECRET", "pa55", 1);
	CHECK_OK(sl_secret_read("@env:SLUICE_TEST_SECRET", &v, why, sizeof(why)));
	CHECK(!strcmp(v, "pa55"));
	sl_secret_free(v);
	unsetenv("SLUICE_TEST_SECRET");
	CHECK(sl_secret_read("@env:SLUICE_TEST_SECRET", &v, why, sizeof(why)) == ENOENT);
	CHECK(strstr(why, "@env:SLUICE_TEST_SECRET is not set"));
	/* a file's trailing line breaks are not part of the secret */
	snprintf(path, sizeof(path), "%s/pw", test_dir());
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs("line one\r\n\n", f);
	fclose(f);
	char ref[160];
	snprintf(ref, sizeof(ref), "@file:%s", path);
	CHECK_OK(sl_secret_read(ref, &v, why, sizeof(why)));
	CHECK(!strcmp(v, "line one"));
	sl_secret_free(v);
	snprintf(ref, sizeof(ref), "@file:%s.missing", path);
	CHECK(sl_secret_read(ref, &v, why, sizeof(why)) == ENOENT);
	CHECK(strstr(why, "cannot read @file:"));
}

static void test_mask(void)
{
	char buf[64];
	char s1[] = "hunter2", s2[] = "", s3[] = "ab";
	char *secrets[] = {s1, s2, NULL, s3};

	snprintf(buf, sizeof(buf), "pw hunter2, again hunter2; ab!");
	sl_secret_mask(buf, sizeof(buf), secrets, 4);
	CHECK(!strcmp(buf, "pw ***, again ***; ***!"));
	/* a secret shorter than *** grows the text, within the buffer */
	char small[8] = "ab ab";
	sl_secret_mask(small, sizeof(small), secrets + 3, 1);
	CHECK(strlen(small) < sizeof(small) && !strstr(small, "ab"));
}

int main(void)
{
	test(test_refs);
	test(test_mask);
	return test_exit();
}
