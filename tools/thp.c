/* SPDX-License-Identifier: MIT */
/*
 * Transparent huge pages for malloc's memory. A batch's columns, hash
 * tables and sort buffers are hundreds of MB touched once each; with 4 KiB
 * pages the kernel takes a fault (and a VM exit here) per page: 15-17% of
 * B3's samples, 63k faults a run (15k with huge pages). glibc (2.35+) puts its heap and its big
 * chunks on huge pages when the tunable glibc.malloc.hugetlb=1 is set, but
 * tunables are read only at a process's start: so the data commands
 * (mount, run) start themselves again, once, with it set. The user's
 * GLIBC_TUNABLES is given back to the environment afterwards, so the
 * programs sluice starts (exec sinks, process sources) see it unchanged.
 * SLUICE_THP=0 turns this off; it is skipped where the kernel's THP is
 * "never" or absent, and where GLIBC_TUNABLES already says hugetlb.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sluice.h"

#define TUNABLES "GLIBC_TUNABLES"
#define HUGETLB "glibc.malloc.hugetlb"
/* set across the exec: the user's GLIBC_TUNABLES ("-" + value), or "" if unset */
#define SAVED "SLUICE_THP_SAVED_TUNABLES"

/* Whether the kernel can give this process huge pages when it asks. */
static bool thp_available(void)
{
	char buf[128];
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return !strstr(buf, "[never]");
}

/* After the exec: the user's environment back, the process's name as before. */
static void restore(const char *saved, const char *argv0)
{
	if (saved[0] == '-')
		setenv(TUNABLES, saved + 1, 1);
	else
		unsetenv(TUNABLES);
	unsetenv(SAVED);
	/* exec named the process after the file; ps and pgrep knew it by argv[0] */
	const char *base = strrchr(argv0, '/');
	prctl(PR_SET_NAME, base ? base + 1 : argv0, 0, 0, 0);
}

void sl_thp_reexec(char **argv)
{
	const char *saved = getenv(SAVED);
	if (saved) {
		restore(saved, argv[0]);
		return;
	}
	const char *off = getenv("SLUICE_THP");
	if (off && !strcmp(off, "0"))
		return;
	const char *cur = getenv(TUNABLES);
	if (cur && strstr(cur, HUGETLB))
		return; /* the user chose */
	if (!thp_available())
		return;

	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(exe) - 1)
		return;
	exe[n] = 0;

	size_t len = (cur ? strlen(cur) : 0) + sizeof(HUGETLB "=1:");
	char *val = malloc(len), *keep = malloc(len + 1);
	if (!val || !keep) {
		free(val);
		free(keep);
		return;
	}
	/* ours first: glibc cuts the string of /proc/PID/environ at the first ':' */
	snprintf(val, len, HUGETLB "=1%s%s", cur && *cur ? ":" : "", cur ? cur : "");
	snprintf(keep, len + 1, "%s%s", cur ? "-" : "", cur ? cur : "");
	if (!setenv(SAVED, keep, 1) && !setenv(TUNABLES, val, 1))
		execv(exe, argv);
	/* no exec: on as before, in this process's environment as it was (and name) */
	restore(keep, argv[0]);
	free(val);
	free(keep);
}
