/* SPDX-License-Identifier: MIT */
/* Blob files by id: create, open, unlink, and the folder fsyncs. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "fault.h"

#define FANOUT 256

struct sl_blobs {
	int dirfd[FANOUT]; /* blobs/XX, O_RDONLY|O_DIRECTORY */
};

static void blob_name(char *buf, uint64_t id)
{
	snprintf(buf, 17, "%016" PRIx64, id);
}

int sl_blobs_open(const char *datadir, int create, struct sl_blobs **out)
{
	struct sl_blobs *b;
	char path[4096];
	int top, rc = 0;

	b = malloc(sizeof(*b));
	if (!b)
		return ENOMEM;
	for (int i = 0; i < FANOUT; i++)
		b->dirfd[i] = -1;
	snprintf(path, sizeof(path), "%s/blobs", datadir);
	if (create && mkdir(path, 0700) && errno != EEXIST) {
		rc = errno;
		goto free_b;
	}
	top = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0) {
		rc = errno;
		goto free_b;
	}
	for (int i = 0; i < FANOUT; i++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", i);
		if (create && mkdirat(top, sub, 0700) && errno != EEXIST) {
			rc = errno;
			break;
		}
		b->dirfd[i] = openat(top, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (b->dirfd[i] < 0) {
			rc = errno;
			break;
		}
	}
	if (rc == 0 && create && fsync(top))
		rc = errno;
	close(top);
	if (rc)
		goto close_dirs;
	*out = b;
	return 0;

close_dirs:
	for (int i = 0; i < FANOUT; i++)
		if (b->dirfd[i] >= 0)
			close(b->dirfd[i]);
free_b:
	free(b);
	return rc;
}

void sl_blobs_close(struct sl_blobs *b)
{
	if (!b)
		return;
	for (int i = 0; i < FANOUT; i++)
		close(b->dirfd[i]);
	free(b);
}

int sl_blob_create(struct sl_blobs *b, uint64_t id, int *fd)
{
	char name[17];
	blob_name(name, id);
	int f = openat(b->dirfd[id % FANOUT], name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (f < 0)
		return errno;
	*fd = f;
	return 0;
}

int sl_blob_open(struct sl_blobs *b, uint64_t id, int flags, int *fd)
{
	char name[17];
	blob_name(name, id);
	int f = openat(b->dirfd[id % FANOUT], name, flags | O_CLOEXEC);
	if (f < 0)
		return errno;
	*fd = f;
	return 0;
}

int sl_blob_unlink(struct sl_blobs *b, uint64_t id)
{
	char name[17];
	blob_name(name, id);
	if (unlinkat(b->dirfd[id % FANOUT], name, 0) && errno != ENOENT)
		return errno;
	return 0;
}

int sl_blob_sync_name(struct sl_blobs *b, uint64_t id)
{
	SL_FAULT("blob.before_dir_fsync");
	return fsync(b->dirfd[id % FANOUT]) ? errno : 0;
}

int sl_blob_exists(struct sl_blobs *b, uint64_t id)
{
	char name[17];
	struct stat st;
	blob_name(name, id);
	if (fstatat(b->dirfd[id % FANOUT], name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

int sl_blobs_syncfs(struct sl_blobs *b)
{
	int rc;

	if ((rc = SL_FAULT_ERR("blob.fsync")))
		return rc;
	return syncfs(b->dirfd[0]) ? errno : 0;
}
