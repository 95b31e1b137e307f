/* SPDX-License-Identifier: MIT */
/* Internals shared by land.c and land_open.c; never included outside core/. */
#ifndef SLUICE_CORE_LAND_INT_H
#define SLUICE_CORE_LAND_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "catalog.h"
#include "land.h"

struct node;
struct sl_blobs;
struct sl_temp;

struct sl_land {
	struct sl_catalog *cat;
	struct sl_blobs *blobs;
	struct sl_temp *temp;
	bool strict;
	pthread_rwlock_t op;        /* see the lock order in land.c */
	pthread_mutex_t mu;
	struct node **by_id;        /* in-flight files by id (NBUCKET chains) */
	struct node **by_name;      /* named in-flight files by (parent, name) */
	atomic_ulong *in_flight;    /* in the shared page of DATA_DIR/lock */
	atomic_ulong in_flight_local; /* when that page cannot be mapped */
	void *shared;               /* the mapped page, or NULL */
	atomic_ulong publishing;    /* publishes queued, not yet done */
	uint64_t refused[SL_ERRNO_MAX]; /* guarded by mu */
	bool counters_dirty;        /* guarded by mu */
	void (*on_land)(void *ctx); /* a file landed (engine wake-up) */
	void *on_land_ctx;
};

/* One file's record: what FLUSH, rename, publish and `sluice land` write. */
struct rec {
	struct sl_inode ino;   /* the record to write; state set by the apply */
	void *data;            /* inline bytes (ino.storage == SL_STORE_INLINE) */
	bool land;             /* write it landed, else recorded */
	bool excl;             /* EEXIST when the name is taken (sluice land) */
	bool del_old;          /* remove the dirent old_parent/old_name */
	uint64_t old_parent;
	char old_name[SL_NAME_MAX + 1];
	uint64_t cancel_id;    /* a replaced file whose record goes, or 0 */
};

/* Removes every trace of id from the catalog; a missing id is fine. */
int land_cancel(struct sl_txn *t, uint64_t id);
int land_rec_apply(struct sl_txn *t, void *arg);
int land_in_txn(struct sl_txn *t, struct sl_inode *i);
int land_counters_apply(struct sl_txn *t, void *arg);
uint64_t land_lowest_live(void *ctx);
int land_load_refused(void *ctx, const char *key, uint64_t val);
/* Discards in-flight files at close: recorded ones land, the rest go. */
void land_drop_nodes(struct sl_land *l);
#define LAND_NBUCKET 16384

#endif
