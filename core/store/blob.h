/* SPDX-License-Identifier: MIT */
/*
 * Blobs: file bytes by id under DATA_DIR/blobs/XX/<id as 16 hex digits>,
 * XX being the id's low byte. Larger landed inputs, staged uploads and
 * output parts. A blob becomes visible only through the catalog record that
 * names it; its fanout folder is fsynced before that commit. The blobs
 * handle owns the folder descriptors; an fd a function returns is the
 * caller's to close.
 */
#ifndef SLUICE_CORE_BLOB_H
#define SLUICE_CORE_BLOB_H

#include <stdint.h>

struct sl_blobs;

/* Opens DATA_DIR/blobs (creating it and its 256 folders when create). */
int sl_blobs_open(const char *datadir, int create, struct sl_blobs **out);
void sl_blobs_close(struct sl_blobs *b);

/* Creates blob id for reading and writing; *fd is new (caller closes). */
int sl_blob_create(struct sl_blobs *b, uint64_t id, int *fd);
/* Opens an existing blob with open(2) flags. */
int sl_blob_open(struct sl_blobs *b, uint64_t id, int flags, int *fd);
/* Removes blob id; a missing blob is not an error. */
int sl_blob_unlink(struct sl_blobs *b, uint64_t id);
/* Makes the name of blob id durable (fsync of its folder). */
int sl_blob_sync_name(struct sl_blobs *b, uint64_t id);
/*
 * Makes every blob written so far durable, with their names: one syncfs(2)
 * of the file system under blobs/, cheaper than an fsync per file for many.
 */
int sl_blobs_syncfs(struct sl_blobs *b);
/* 1 when blob id exists, 0 when not, or a negative -errno. */
int sl_blob_exists(struct sl_blobs *b, uint64_t id);

#endif
