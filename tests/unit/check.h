/* SPDX-License-Identifier: MIT */
/* A tiny harness for the unit tests: CHECK, CHECK_OK, a temp dir, test(). */
#ifndef SLUICE_TESTS_CHECK_H
#define SLUICE_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

static int check_failures;

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++;                                                  \
			return;                                                            \
		}                                                                          \
	} while (0)

#define CHECK_OK(expr)                                                                     \
	do {                                                                               \
		int rc_ = (expr);                                                          \
		if (rc_ != 0) {                                                            \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,      \
				sl_strerror(rc_));                                         \
			check_failures++;                                                  \
			return;                                                            \
		}                                                                          \
	} while (0)

static char test_dirs[64][64];
static int test_ndirs;

/* A new empty folder for one test, removed by test_exit(). */
static inline const char *test_dir(void)
{
	char *path = test_dirs[test_ndirs++ % 64];
	snprintf(path, 64, "/tmp/sluice-unit-XXXXXX");
	if (!mkdtemp(path)) {
		perror("mkdtemp");
		exit(1);
	}
	return path;
}

static inline void rm_rf(const char *path)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", path);
}

#define test(fn)                                                                           \
	do {                                                                               \
		int before_ = check_failures;                                              \
		fn();                                                                      \
		printf("%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #fn);       \
	} while (0)

static inline int test_exit(void)
{
	for (int i = 0; i < test_ndirs && i < 64; i++)
		rm_rf(test_dirs[i]);
	return check_failures ? 1 : 0;
}

#endif
