// SPDX-License-Identifier: MIT
/*
 * probe: timing helpers of contrib/bench/run (B5, B6, B8).
 *
 *   probe latency IN_DIR OUT_DIR COUNT FIRST_BATCH CONTENT_FILE
 *       B5. COUNT times: write IN_DIR/lat-<i>.json (open O_CREAT|O_EXCL,
 *       one write of CONTENT_FILE's bytes, close: through a sluice mount the
 *       file has landed, durably, when close returns), then poll
 *       stat(OUT_DIR/part-<FIRST_BATCH+i>-00000.jsonl) every 200 us until it
 *       exists. Prints the latencies from close's return to the part's
 *       appearance, and of open..close, as
 *         files=N p50_ms=.. p99_ms=.. min_ms=.. max_ms=.. write_p50_ms=..
 *       Fails after 30 s without the part.
 *
 *   probe mountwait MOUNTPOINT [TIMEOUT_S]
 *       B6. Polls stat(MOUNTPOINT) every 100 us until it answers from
 *       another filesystem than its parent folder (the FUSE root: the stat
 *       returns once the daemon answered the kernel's INIT and GETATTR).
 *       Prints the wall-clock time (CLOCK_REALTIME) at that moment, in
 *       seconds with microseconds, comparable with bash's $EPOCHREALTIME.
 *
 *   probe read FILE...
 *       B8. Reads each FILE to its end with 1 MiB read(2)s. Prints
 *         files=N bytes=N elapsed_s=S
 *
 * Build: cc -O2 -o probe probe.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *path, int err)
{
	fprintf(stderr, "probe: %s '%s': %s\n", what, path, strerror(err));
	exit(1);
}

static void nap(long us)
{
	struct timespec ts = {0, us * 1000};
	nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* nearest-rank percentile of a sorted array */
static double pct(const double *v, long n, double p)
{
	long k = (long)(p / 100.0 * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static int latency(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr,
			"usage: probe latency IN_DIR OUT_DIR COUNT FIRST_BATCH CONTENT_FILE\n");
		return 2;
	}
	const char *in = argv[2], *out = argv[3];
	long count = atol(argv[4]), first = atol(argv[5]);
	char path[4096], part[4096], content[65536];
	int fd = open(argv[6], O_RDONLY);
	ssize_t clen;

	if (fd < 0)
		die("cannot open", argv[6], errno);
	clen = read(fd, content, sizeof(content));
	if (clen <= 0)
		die("cannot read", argv[6], clen < 0 ? errno : EIO);
	close(fd);
	if (count <= 0)
		return 2;
	double *lat = calloc((size_t)count, sizeof(double));
	double *wr = calloc((size_t)count, sizeof(double));
	if (!lat || !wr)
		return 1;
	for (long i = 0; i < count; i++) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/lat-%06ld.json", in, i);
		snprintf(part, sizeof(part), "%s/part-%05ld-00000.jsonl", out, first + i);
		double t0 = mono();
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			die("cannot create", path, errno);
		if (write(fd, content, (size_t)clen) != clen)
			die("cannot write", path, errno);
		if (close(fd))
			die("cannot close", path, errno);
		double t1 = mono();
		for (;;) {
			if (stat(part, &st) == 0)
				break;
			if (errno != ENOENT)
				die("cannot stat", part, errno);
			if (mono() - t1 > 30) {
				fprintf(stderr, "probe: '%s' did not appear within 30 s of landing '%s'\n",
					part, path);
				return 1;
			}
			nap(200);
		}
		lat[i] = (mono() - t1) * 1000;
		wr[i] = (t1 - t0) * 1000;
	}
	qsort(lat, (size_t)count, sizeof(double), cmp_double);
	qsort(wr, (size_t)count, sizeof(double), cmp_double);
	printf("files=%ld p50_ms=%.3f p99_ms=%.3f min_ms=%.3f max_ms=%.3f write_p50_ms=%.3f\n",
	       count, pct(lat, count, 50), pct(lat, count, 99), lat[0], lat[count - 1],
	       pct(wr, count, 50));
	return 0;
}

static int mountwait(int argc, char **argv)
{
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: probe mountwait MOUNTPOINT [TIMEOUT_S]\n");
		return 2;
	}
	double timeout = argc == 4 ? atof(argv[3]) : 120;
	char parent[4096];
	struct stat pst, st;
	snprintf(parent, sizeof(parent), "%s", argv[2]);
	if (stat(dirname(parent), &pst))
		die("cannot stat", parent, errno);
	double t0 = mono();
	for (;;) {
		if (stat(argv[2], &st) == 0 && st.st_dev != pst.st_dev)
			break;
		if (mono() - t0 > timeout) {
			fprintf(stderr, "probe: %s not mounted after %.0f s\n", argv[2], timeout);
			return 1;
		}
		nap(100);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("%ld.%06ld\n", (long)ts.tv_sec, ts.tv_nsec / 1000);
	return 0;
}

static int readfiles(int argc, char **argv)
{
	static char buf[1 << 20];
	long long bytes = 0;
	double t0 = mono();
	for (int i = 2; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("cannot open", argv[i], errno);
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0) {
				if (errno == EINTR)
					continue;
				die("cannot read", argv[i], errno);
			}
			if (n == 0)
				break;
			bytes += n;
		}
		close(fd);
	}
	printf("files=%d bytes=%lld elapsed_s=%.6f\n", argc - 2, bytes, mono() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "latency"))
		return latency(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "mountwait"))
		return mountwait(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "read"))
		return readfiles(argc, argv);
	fprintf(stderr, "usage: probe latency|mountwait|read ... (see probe.c)\n");
	return 2;
}
