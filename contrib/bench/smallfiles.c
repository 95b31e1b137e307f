// SPDX-License-Identifier: MIT
/*
 * smallfiles: the small-file landing driver of contrib/bench/run.
 * Writes COUNT files of SIZE bytes into DIR, the same way on both sides:
 * through the mount (create the final name, write, close: landing is durable
 * at close) or natively (temp name, write, fsync, close, rename to final).
 * Build: cc -O2 -o smallfiles smallfiles.c -lpthread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PRODUCERS 256

struct producer {
	pthread_t thread;
	char dir[4096];       /* folder this producer writes into */
	long first;           /* index of its first file (names are global) */
	long count;           /* files it writes */
};

static int native_mode;            /* set once before any thread starts */
static const char *buf;            /* SIZE bytes, read-only once threads run */
static size_t size;
static pthread_barrier_t start_line;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: smallfiles [--native] [-p PRODUCERS] [-c FILE] DIR COUNT SIZE\n"
		"\n"
		"Write COUNT files of SIZE bytes (suffix k or m allowed) into DIR.\n"
		"  -c FILE      every file holds FILE's bytes instead of a-z letters\n"
		"               (SIZE must then be '-')\n"
		"  default      open(final, O_CREAT|O_EXCL|O_WRONLY), write, close\n"
		"               (through a sluice mount: landing is durable at close)\n"
		"  --native     open(temp), write, fsync, close, rename(temp, final)\n"
		"  -p N         N concurrent producers (threads), files split among\n"
		"               them, each in its own subfolder DIR/pK (default 1:\n"
		"               files go straight into DIR)\n"
		"DIR and the subfolders are created before the clock starts.\n"
		"Prints one line: mode, producers, files, bytes, elapsed_s, files_per_s,\n"
		"and the mean time of each call (open_ms, write_ms, close_ms; through a\n"
		"mount, close is the landing's FLUSH).\n"
		"Stops at the first error (exit 1), naming the call, file and errno.\n");
}

static void die(const char *what, const char *path, int err)
{
	static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER;

	/* only the first failing producer speaks; the others wait for exit() */
	pthread_mutex_lock(&first);
	fprintf(stderr, "smallfiles: %s '%s': %s (errno %d)\n", what, path,
		strerror(err), err);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_all(int fd, const char *path)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = write(fd, buf + done, size - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("cannot write", path, errno);
		}
		if (n == 0)
			die("cannot write (wrote 0 bytes)", path, EIO);
		done += (size_t)n;
	}
}

/* the time each kind of call took, summed over every producer (ns) */
static _Atomic long long t_open, t_write, t_close;

static void one_file(const char *dir, long i)
{
	char final[4200], tmp[4200];
	int fd;

	snprintf(final, sizeof(final), "%s/f%08ld", dir, i);
	if (!native_mode) {
		double a = now();
		fd = open(final, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			die("cannot create", final, errno);
		double b = now();
		write_all(fd, final);
		double c = now();
		/* close() returns the FLUSH reply: the landing's durability */
		if (close(fd) < 0)
			die("cannot close", final, errno);
		double d = now();
		t_open += (long long)((b - a) * 1e9);
		t_write += (long long)((c - b) * 1e9);
		t_close += (long long)((d - c) * 1e9);
		return;
	}
	/* a temp name by the default patterns: .* and *.tmp */
	snprintf(tmp, sizeof(tmp), "%s/.f%08ld.tmp", dir, i);
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create", tmp, errno);
	write_all(fd, tmp);
	if (fsync(fd) < 0)
		die("cannot fsync", tmp, errno);
	if (close(fd) < 0)
		die("cannot close", tmp, errno);
	if (rename(tmp, final) < 0)
		die("cannot rename to final name", tmp, errno);
}

static void *produce(void *arg)
{
	struct producer *p = arg;
	long i;

	pthread_barrier_wait(&start_line);
	for (i = p->first; i < p->first + p->count; i++)
		one_file(p->dir, i);
	return NULL;
}

static long parse_count(const char *s, const char *what, int suffixes)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (suffixes && (*end == 'k' || *end == 'K')) {
		v *= 1024;
		end++;
	} else if (suffixes && (*end == 'm' || *end == 'M')) {
		v *= 1024 * 1024;
		end++;
	}
	if (errno || end == s || *end || v <= 0 || v > 1L << 30) {
		fprintf(stderr, "smallfiles: invalid %s '%s'\n", what, s);
		usage(stderr);
		exit(2);
	}
	return (long)v;
}

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("cannot create folder", path, errno);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"native", no_argument, NULL, 'n'},
		{"content", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct producer *prod;
	long count, nprod = 1, k, next = 0;
	double t0, t1;
	char *data;
	const char *content = NULL;
	size_t j;
	int c, rc;

	while ((c = getopt_long(argc, argv, "np:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			native_mode = 1;
			break;
		case 'c':
			content = optarg;
			break;
		case 'p':
			nprod = parse_count(optarg, "producer count", 0);
			if (nprod > MAX_PRODUCERS) {
				fprintf(stderr, "smallfiles: at most %d producers\n",
					MAX_PRODUCERS);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 3) {
		usage(stderr);
		return 2;
	}
	count = parse_count(argv[optind + 1], "COUNT", 0);
	if (content) {
		FILE *f = fopen(content, "rb");
		long n;

		if (strcmp(argv[optind + 2], "-")) {
			fprintf(stderr, "smallfiles: with -c, SIZE must be '-'\n");
			return 2;
		}
		if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 ||
		    fseek(f, 0, SEEK_SET)) {
			fprintf(stderr, "smallfiles: cannot read '%s' (or it is empty)\n", content);
			return 2;
		}
		size = (size_t)n;
		data = malloc(size);
		if (!data || fread(data, 1, size, f) != size) {
			fprintf(stderr, "smallfiles: cannot read '%s'\n", content);
			return 2;
		}
		fclose(f);
	} else {
		size = (size_t)parse_count(argv[optind + 2], "SIZE", 1);
		data = malloc(size);
		if (data)
			for (j = 0; j < size; j++) /* not zeros: nothing may shortcut them */
				data[j] = (char)('a' + j % 26);
	}
	if (nprod > count)
		nprod = count;

	prod = calloc((size_t)nprod, sizeof(*prod));
	if (!data || !prod) {
		fprintf(stderr, "smallfiles: out of memory\n");
		return 1;
	}
	buf = data;

	make_dir(argv[optind]);
	for (k = 0; k < nprod; k++) {
		struct producer *p = &prod[k];
		int n;

		if (nprod == 1)
			n = snprintf(p->dir, sizeof(p->dir), "%s", argv[optind]);
		else
			n = snprintf(p->dir, sizeof(p->dir), "%s/p%ld",
				     argv[optind], k);
		if (n < 0 || (size_t)n >= sizeof(p->dir) - 32) {
			fprintf(stderr, "smallfiles: folder name too long\n");
			return 2;
		}
		if (nprod > 1)
			make_dir(p->dir);
		p->first = next;
		p->count = count / nprod + (k < count % nprod);
		next += p->count;
	}

	/* every thread waits at the barrier; the clock starts when all can go */
	rc = pthread_barrier_init(&start_line, NULL, (unsigned)nprod + 1);
	if (rc) {
		fprintf(stderr, "smallfiles: pthread_barrier_init: %s\n", strerror(rc));
		return 1;
	}
	for (k = 0; k < nprod; k++) {
		rc = pthread_create(&prod[k].thread, NULL, produce, &prod[k]);
		if (rc) {
			fprintf(stderr, "smallfiles: pthread_create: %s\n", strerror(rc));
			return 1;
		}
	}
	t0 = now();
	pthread_barrier_wait(&start_line);
	for (k = 0; k < nprod; k++)
		pthread_join(prod[k].thread, NULL);
	t1 = now();

	printf("mode=%s producers=%ld files=%ld bytes=%zu elapsed_s=%.6f files_per_s=%.1f",
	       native_mode ? "native" : "mount", nprod, count, size * (size_t)count,
	       t1 - t0, (double)count / (t1 - t0));
	if (!native_mode)
		printf(" open_ms=%.3f write_ms=%.3f close_ms=%.3f", (double)t_open / 1e6 / count,
		       (double)t_write / 1e6 / count, (double)t_close / 1e6 / count);
	printf("\n");
	free(prod);
	free(data);
	return 0;
}
