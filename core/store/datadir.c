/* SPDX-License-Identifier: MIT */
/* Recognizing, creating and locking a data dir. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "datadir.h"
#include "err.h"

#define RESERVE_BYTES (1 << 20)

struct sl_datadir {
	char *path;
	int lock_fd;
};

/*
 * exec/, process/: the commands' working folders (core/sinks/exec.c,
 * core/sources/process.c); config-reload: the mount's last config load
 * (core/config/reload.h), and its temp file a crash may leave
 */
static const char *const ours[] = {"catalog", "blobs", "sluice.json", "lock", "reserve", "exec",
				   "process", "config-reload", "config-reload.tmp"};

/*
 * Scans the folder: *fresh when it holds nothing of sluice's but perhaps
 * sluice.json; SL_ENOTSLUICE when it holds anything else.
 */
static int scan(const char *path, bool *fresh, const char **what)
{
	static char bad[256];
	bool catalog = false, other = false;
	struct dirent *e;
	DIR *d = opendir(path);

	if (!d)
		return errno;
	while ((e = readdir(d))) {
		bool known = false;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
			known |= !strcmp(e->d_name, ours[i]);
		if (!known) {
			snprintf(bad, sizeof(bad), "%s", e->d_name);
			*what = bad;
			closedir(d);
			return SL_ENOTSLUICE;
		}
		if (!strcmp(e->d_name, "catalog"))
			catalog = true;
		else if (strcmp(e->d_name, "sluice.json") && strcmp(e->d_name, "lock"))
			other = true;
	}
	closedir(d);
	if (!catalog && other) {
		*what = "catalog";
		return SL_ENOTSLUICE; /* a half-made or foreign folder: touch nothing */
	}
	*fresh = !catalog;
	return 0;
}

static int create_layout(const char *path)
{
	struct sl_catalog *cat;
	struct sl_blobs *b;
	char p[4096];
	int fd, rc;

	snprintf(p, sizeof(p), "%s/catalog", path);
	if ((rc = sl_catalog_open(p, SL_CATALOG_CREATE | SL_CATALOG_RANDOM, &cat)))
		return rc;
	sl_catalog_close(cat);
	if ((rc = sl_blobs_open(path, 1, &b)))
		return rc;
	sl_blobs_close(b);
	/* released on ENOSPC so that deletions can still commit */
	snprintf(p, sizeof(p), "%s/reserve", path);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	rc = posix_fallocate(fd, 0, RESERVE_BYTES);
	close(fd);
	if (rc && rc != ENOSPC)
		return rc;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

int sl_datadir_open(const char *path, unsigned flags, struct sl_datadir **out, const char **what)
{
	struct sl_datadir *d;
	struct stat st;
	bool fresh = true;
	char p[4096];
	int rc;

	*what = NULL;
	if (strlen(path) > 3000)
		return ENAMETOOLONG;
	if (stat(path, &st)) {
		if (errno != ENOENT)
			return errno;
		if (!(flags & SL_DATADIR_CREATE))
			return SL_NOTFOUND;
		if (mkdir(path, 0755))
			return errno;
	} else if (!S_ISDIR(st.st_mode)) {
		*what = path;
		return SL_ENOTSLUICE;
	} else if ((rc = scan(path, &fresh, what))) {
		return rc;
	}
	if (fresh && !(flags & SL_DATADIR_CREATE))
		return SL_NOTFOUND;

	d = calloc(1, sizeof(*d));
	if (!d || !(d->path = strdup(path))) {
		free(d);
		return ENOMEM;
	}
	d->lock_fd = -1;
	if (flags & SL_DATADIR_LOCK) {
		snprintf(p, sizeof(p), "%s/lock", path);
		d->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (d->lock_fd < 0) {
			rc = errno;
			goto free_d;
		}
		if (flock(d->lock_fd, LOCK_EX | LOCK_NB)) {
			rc = errno == EWOULDBLOCK ? SL_ELOCKED : errno;
			goto free_d;
		}
	}
	*out = d;
	return 0;

free_d:
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	free(d->path);
	free(d);
	return rc;
}

int sl_datadir_create(struct sl_datadir *d)
{
	char p[4096];

	/*
	 * The reserve is made last, after the catalog and every blob folder
	 * are durable: with it there, the layout is whole and each start
	 * skips an LMDB open and 768 calls on blobs/ (`sluice run` of a data
	 * dir with one small file: ~21 -> ~17 ms a start, beside a CI run).
	 * Without it whole (new, cut short by a crash, released on ENOSPC, or
	 * short of room when it was made) the layout is made or completed: it
	 * is idempotent.
	 */
	struct stat st;
	snprintf(p, sizeof(p), "%s/reserve", d->path);
	if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= RESERVE_BYTES)
		return 0;
	return create_layout(d->path);
}

void sl_datadir_close(struct sl_datadir *d)
{
	if (!d)
		return;
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	free(d->path);
	free(d);
}

const char *sl_datadir_path(const struct sl_datadir *d)
{
	return d->path;
}

int sl_datadir_lock_fd(const struct sl_datadir *d)
{
	return d->lock_fd;
}
