// SPDX-License-Identifier: MIT
/*
 * slowflush: an LD_PRELOAD library for contrib/bench/commit-ab that makes
 * every flush cost SLOWFLUSH_US microseconds (default 2000) of sleep:
 * fsync, fdatasync, and a pwrite through an O_DSYNC descriptor (LMDB's
 * meta page). With the data dir on tmpfs, where the real flushes cost
 * nothing, a run is bound by its flushes as on a disk whose flush takes
 * that long, and not by the noise of a shared disk.
 * Build: cc -O2 -shared -fPIC -o slowflush.so slowflush.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void nap(void)
{
	static long us = -1;
	if (us < 0) {
		const char *e = getenv("SLOWFLUSH_US");
		us = e ? atol(e) : 2000;
	}
	struct timespec t = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&t, NULL);
}

int fdatasync(int fd)
{
	static int (*real)(int);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "fdatasync");
	nap();
	return real(fd);
}

int fsync(int fd)
{
	static int (*real)(int);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "fsync");
	nap();
	return real(fd);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pwrite");
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_DSYNC))
		nap();
	return real(fd, b, n, off);
}
