/* SPDX-License-Identifier: MIT */
/* What the table-driven unit tests share: finding tests/data, reading files. */
#ifndef SLUICE_TESTS_TESTDATA_H
#define SLUICE_TESTS_TESTDATA_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char data_dir[PATH_MAX];

/* Finds tests/data/<sub>: $SLUICE_TEST_DATA/<sub>, else next to this source file. */
static inline int find_data_dir(const char *sub)
{
	const char *env = getenv("SLUICE_TEST_DATA");
	char exe[PATH_MAX], cand[3 * PATH_MAX], src[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (env) {
		snprintf(data_dir, sizeof(data_dir), "%s/%s", env, sub);
		return stat(data_dir, &st);
	}
	/* __FILE__ is absolute, or relative to the build root where ninja runs */
	snprintf(src, sizeof(src), "%s", __FILE__);
	*(strrchr(src, '/') ? strrchr(src, '/') : src) = 0;
	snprintf(cand, sizeof(cand), "%s/../data/%s", src, sub);
	if (cand[0] != '/' && stat(cand, &st) != 0) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return -1;
		exe[n] = 0;
		/* BUILD/tests/unit/test-NAME: up three levels */
		for (int i = 0; i < 3; i++) {
			char *slash = strrchr(exe, '/');
			if (!slash)
				return -1;
			*slash = 0;
		}
		snprintf(cand, sizeof(cand), "%s/%s/../data/%s", exe, src, sub);
	}
	if (!realpath(cand, data_dir))
		return -1;
	return stat(data_dir, &st);
}

/* A whole file, NUL-terminated (new: free()); NULL when unreadable. */
static inline char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

#endif
