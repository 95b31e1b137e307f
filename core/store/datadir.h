/* SPDX-License-Identifier: MIT */
/*
 * The data dir: recognizing it, creating it, and its exclusive lock.
 * Layout: catalog/ (LMDB), blobs/, sluice.json, lock, reserve.
 */
#ifndef SLUICE_CORE_DATADIR_H
#define SLUICE_CORE_DATADIR_H

struct sl_datadir;

enum sl_datadir_flags {
	SL_DATADIR_LOCK = 1 << 0,   /* take the exclusive flock (mount, run, land) */
	SL_DATADIR_CREATE = 1 << 1, /* create a missing or new data dir */
};

/*
 * Opens the data dir at path. A missing folder, or one holding nothing or
 * only sluice.json, is new: its folder (and lock) made with
 * SL_DATADIR_CREATE, the rest by sl_datadir_create(). Returns 0,
 * SL_ENOTSLUICE (a folder holding what sluice did not make; *what names
 * it), SL_ELOCKED, SL_NOTFOUND (new, and no SL_DATADIR_CREATE), or an errno.
 * *what, when set, is static or borrowed until the next call.
 */
int sl_datadir_open(const char *path, unsigned flags, struct sl_datadir **out,
		    const char **what);
/*
 * Completes the layout of a data dir opened with SL_DATADIR_CREATE (catalog,
 * blobs, reserve): called once the config is known to be valid, so that a
 * refused start leaves nothing behind. Idempotent.
 */
int sl_datadir_create(struct sl_datadir *d);

/* Releases the lock (if taken). NULL ok. */
void sl_datadir_close(struct sl_datadir *d);
/* The path given to open; borrowed until close. */
const char *sl_datadir_path(const struct sl_datadir *d);
/* The lock's fd, or -1: a daemon keeps it across fork. */
int sl_datadir_lock_fd(const struct sl_datadir *d);

#endif
