/* SPDX-License-Identifier: MIT */
/* core/base/secret.c: @env:/@file: references resolved, and masked in text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "secret.h"

static void test_refs(void)
{
	CHECK(sl_secret_is_ref("@env:X"));
	CHECK(sl_secret_is_ref("@file:/x"));
	CHECK(!sl_secret_is_ref("@envX"));
	CHECK(!sl_secret_is_ref("plain"));
	CHECK(!sl_secret_is_ref(NULL));
}

static void test_env(void)
{
	char err[128], *v = NULL;

	setenv("SLUICE_TEST_SECRET", "p@ss", 1);
	CHECK_OK(sl_secret_resolve("@env:SLUICE_TEST_SECRET", &v, err, sizeof(err)));
	CHECK(v && !strcmp(v, "p@ss"));
	sl_secret_free(v);
	unsetenv("SLUICE_TEST_SECRET");
	v = NULL;
	CHECK(sl_secret_resolve("@env:SLUICE_TEST_SECRET", &v, err, sizeof(err)) == ENOENT);
	CHECK(!v);
	CHECK(!strcmp(err, "@env:SLUICE_TEST_SECRET is not set in sluice's environment"));
}

static void test_file(void)
{
	const char *dir = test_dir();
	char path[256], ref[300], err[400], *v = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pw", dir);
	snprintf(ref, sizeof(ref), "@file:%s", path);
	CHECK((f = fopen(path, "w")) != NULL);
	fputs("line one\nsecret\r\n\n", f);
	fclose(f);
	CHECK_OK(sl_secret_resolve(ref, &v, err, sizeof(err)));
	CHECK(v && !strcmp(v, "line one\nsecret")); /* only the last line endings go */
	sl_secret_free(v);
	v = NULL;
	snprintf(ref, sizeof(ref), "@file:%s/none", dir);
	CHECK(sl_secret_resolve(ref, &v, err, sizeof(err)) == ENOENT);
	CHECK(!v && strstr(err, "cannot read @file:") && strstr(err, "No such file"));
}

static void test_mask(void)
{
	const char *const secrets[] = {"hunter2", "", "pw"};
	char out[64];

	sl_secret_mask("login hunter2 with pw, hunter2!", secrets, 3, out, sizeof(out));
	CHECK(!strcmp(out, "login *** with ***, ***!"));
	sl_secret_mask("nothing here", secrets, 3, out, sizeof(out));
	CHECK(!strcmp(out, "nothing here"));
	sl_secret_mask("hunter2hunter2", secrets, 3, out, 6); /* cut short, still ended */
	CHECK(!strcmp(out, "*****"));
}

int main(void)
{
	test(test_refs);
	test(test_env);
	test(test_file);
	test(test_mask);
	return test_exit();
}
