/* SPDX-License-Identifier: MIT */
/* Internals shared by the files of core/land/; never included outside it. */
#ifndef SLUICE_CORE_LAND_INT_H
#define SLUICE_CORE_LAND_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "catalog.h"
#include "land.h"

#define LAND_NBUCKET 16384 /* hash chains of the node tables */

struct sl_blobs;
struct sl_temp;
struct sl_txn;
struct bundle;
struct dirtime;

struct sl_land {
	struct sl_catalog *cat;
	struct sl_blobs *blobs;
	struct sl_temp *temp;
	bool strict;
	pthread_rwlock_t op;        /* see the lock order in land_node.c */
	pthread_mutex_t mu;
	unsigned records_queued;    /* records a FLUSH queued under op shared (mu) */
	pthread_cond_t records_cv;  /* records_queued fell to 0 */
	struct node **by_id;        /* in-flight files by id (NBUCKET chains) */
	struct node **by_name;      /* named in-flight files by (parent, name) */
	atomic_ulong *in_flight;    /* in the shared page of DATA_DIR/lock */
	atomic_ulong in_flight_local; /* when that page cannot be mapped */
	void *shared;               /* the mapped page, or NULL */
	char *datadir;              /* absolute (realpath), for commands' working folder */
	atomic_ulong *latency;      /* SL_LAND_LAT_NBUCKET counts, then the sum (ns): shared page */
	atomic_ulong latency_local[SL_LAND_LAT_NBUCKET + 1]; /* when that page cannot be mapped */
	atomic_ulong publishing;    /* publishes queued, not yet done */
	uint64_t refused[SL_ERRNO_MAX]; /* guarded by mu */
	bool counters_dirty;        /* guarded by mu */
	void (*on_land)(void *ctx); /* a file landed (engine wake-up) */
	struct sl_qindex *sources; /* the queries' indexes, filled at landing */
	void (*on_change)(void *ctx, uint64_t parent, const char *name); /* a name left */
	void *on_change_ctx;
	uint64_t pins[64];          /* ids the engine uses, uncommitted (guarded by mu) */
	void *on_land_ctx;
	struct dirtime **dirtimes;  /* folders' times changed since their last commit (mu) */
	size_t ndirtimes;           /* entries in dirtimes (mu) */
	uint64_t temp_abandoned;    /* guarded by mu; committed with the counters */
	uint64_t temp_abandoned_new; /* counted, not yet added in the catalog (mu) */
	int64_t abandon_ns;         /* SL_TEMP_ABANDON_NS, or SLUICE_TEMP_ABANDON_MS */
	pthread_t sweeper;          /* looks for abandoned temp files */
	bool sweeper_running;
	bool sweeper_stop;          /* guarded by mu */
	pthread_cond_t sweeper_cv;
};

/* One file's record: what FLUSH, rename, publish and `sluice land` write. */
struct rec {
	struct sl_land *l;     /* whose queries index what lands */
	struct node *n;        /* the in-flight file: its attributes are taken at the apply */
	struct sl_inode ino;   /* the record to write; state set by the apply */
	void *data;            /* inline bytes (ino.storage == SL_STORE_INLINE) */
	bool land;             /* write it landed, else recorded */
	bool excl;             /* EEXIST when the name is taken (sluice land) */
	bool del_old;          /* remove the dirent old_parent/old_name */
	uint64_t old_parent;
	char old_name[SL_NAME_MAX + 1];
	uint64_t cancel_id;    /* a replaced file whose record goes, or 0 */
};


/* An in-flight file: created through the mount, not landed (land_node.c). */
struct node {
	uint64_t id;
	/* guarded by l->mu */
	uint64_t parent;
	char name[SL_NAME_MAX + 1];
	/* written under l->mu; atomic because a stat reads them without it */
	atomic_bool named;  /* its name is in in/ (false once unlinked, replaced, poisoned) */
	atomic_bool landed; /* published: the catalog holds it now */
	bool publishing;    /* sealed: released at a final name, as good as landed */
	bool in_id_table;
	bool abandoned;     /* counted in tempAbandoned */
	int writers;        /* open writable handles */
	int refs;           /* handles + named + publishing + bundle */
	bool bundle_pending; /* a bundle member not yet released */
	int64_t released_ns; /* when writers last fell to 0 (for tempAbandoned) */
	struct bundle *bundle; /* the folder landing it waits with, or NULL */
	struct node *id_next, *name_next;

	/* guarded by dmu */
	pthread_mutex_t dmu;
	bool rec_busy;      /* the record lock (land_rec_lock): taken */
	pthread_cond_t rec_cv;
	unsigned char *buf; /* staged bytes while fd < 0 */
	size_t cap;
	int fd;             /* staged blob, -1 until spilled */
	bool blob_named;    /* the blob's folder entry is durable */
	bool keep_blob;     /* the blob holds landed bytes: keep it at free */
	uint32_t mode, uid, gid;
	int64_t mtime_ns, ctime_ns, atime_ns;
	uint64_t size;
	uint64_t version;   /* bumps on every change of the bytes */
	uint64_t flushed_version; /* version at the last FLUSH */
	uint64_t rec_version;
	bool recorded;      /* the catalog holds a record (path, length) */
	atomic_int poison;  /* errno that poisoned it, or 0 */
};

struct sl_handle {
	struct sl_land *l;
	struct node *n;     /* in-flight file, or NULL for a landed one */
	uint64_t id;
	bool write;         /* opened for writing */
	bool wrote;         /* wrote, created or truncated */
	int fd;             /* landed blob, -1 otherwise */
	unsigned char *data; /* landed inline bytes */
	size_t len;
};

/* ---- land_node.c ---- */

int64_t land_now_ns(void);
/* CLOCK_MONOTONIC in ns, for latencies. */
int64_t land_mono_ns(void);
/* A landing waited from start (land_mono_ns()) until now for its durable commit. */
void land_latency_observe(struct sl_land *l, int64_t start);
/* Node tables; l->mu held. */
struct node *land_find_id(struct sl_land *l, uint64_t id);
struct node *land_find_name(struct sl_land *l, uint64_t parent, const char *name);
void land_link_name(struct sl_land *l, struct node *n);
void land_unlink_name(struct sl_land *l, struct node *n);
/*
 * Takes n's name out of in/ (l->mu held); returns the node to free with
 * land_free_node() once l->mu is released, or NULL.
 */
struct node *land_unname_locked(struct sl_land *l, struct node *n);
void land_free_node(struct sl_land *l, struct node *n);
/* Drops one reference (takes l->mu), freeing the node at zero. */
void land_unref(struct sl_land *l, struct node *n);

/*
 * Forces a group commit now: the counters and folder times ride it, and so
 * do lazily queued publishes.
 */
int land_commit_now(struct sl_land *l);

/*
 * In a test build, sleeps SLUICE_FAULT_SIZE="land.race_gap_us:N" microseconds
 * where a namespace change has looked a file up and a publish may finish
 * before it acts: races that are rare otherwise become common. Nothing in
 * other builds.
 */
void land_test_gap(void);
/* Counts err as refused (one durable commit) and returns it. */
int land_refuse(struct sl_land *l, int err);
/* Whether err means accepted bytes cannot be made durable (poisons). */
static inline bool land_storage_error(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EIO;
}
/* Poisons n when err is a storage error; returns err either way. */
int land_fail(struct sl_land *l, struct node *n, int err);
/* Copies n's mode, owner and times into i. n->dmu not held. */
void land_attrs_to_inode(struct node *n, struct sl_inode *i);
void land_attr_of_node(struct node *n, struct sl_attr *a);
void land_attr_of_inode(const struct sl_inode *i, struct sl_attr *a);
bool land_valid_name(const char *name);
/* Whether parent/name is temporary: any component matches a temp glob. */
int land_path_is_temp(struct sl_land *l, struct sl_txn *t, uint64_t parent, const char *name,
		      bool *temp);
/* 0 when id is a folder of the catalog, else ENOENT or ENOTDIR. */
int land_check_dir(struct sl_txn *t, uint64_t id);

/* Removes every trace of id from the catalog; a missing id is fine. */
int land_cancel(struct sl_txn *t, uint64_t id);
/* sl_apply_fn around land_cancel(); arg is a uint64_t *. */
int land_cancel_apply(struct sl_txn *t, void *arg);
/*
 * Fills r from n's bytes, made durable (fsync of a staged blob) unless
 * !sync, when the caller makes them durable itself (sl_blobs_syncfs).
 * n's record lock held.
 */
int land_make_durable(struct sl_land *l, struct node *n, struct rec *r, uint64_t *version,
		      bool sync);
/* n never lands: its name leaves in/, its bytes go at its last release. */
void land_poison(struct sl_land *l, struct node *n, int err);
/*
 * Records n durably at its current final name unless temporary, unnamed or
 * recorded at this version already. l->op held.
 */
int land_record_locked(struct sl_land *l, struct node *n, bool force);
/*
 * land_record_locked() without waiting (force false): *queued true when the
 * record's commit was queued, and done(ctx, rc) is then called once it is
 * durable or failed, on the commit thread (or before this returns), with
 * n's record lock let go and l->op's exclusive side (land_op_excl) held
 * off until then; *queued false: nothing was queued, the result is
 * returned and done is never called. l->op held shared.
 */
int land_record_queue(struct sl_land *l, struct node *n, void (*done)(void *ctx, int rc),
		      void *ctx, bool *queued);
/* The record lock of n: taken by one thread, it may be let go by another. */
void land_rec_lock(struct node *n);
void land_rec_unlock(struct node *n);
/* l->op exclusive, once every record queued under it shared is finished. */
void land_op_excl(struct sl_land *l);
/*
 * Queues the landing of the sealed files v[0..n) (no writer left, recorded,
 * publishing set) in one group commit, and steals one reference of each.
 */
void land_publish(struct sl_land *l, struct node **v, size_t n);
/* Seals n at its release: see sl_land_release. */

/* ---- land_folder.c: folder renames and the bundles they make ---- */

/*
 * Renames folder id (parent/name -> newparent/newname, replacing the empty
 * folder `replace` when not 0) and re-evaluates the in-flight files under
 * it in the same commit. l->op held exclusive; no read txn open.
 */
int land_rename_dir(struct sl_land *l, uint64_t id, uint64_t parent, const char *name,
		    uint64_t newparent, const char *newname, uint64_t replace);
/*
 * n leaves its bundle (unlinked, renamed, poisoned or become temporary);
 * l->mu held. When the members left are all released, returns them in *v
 * (a new array, *nv entries, each with a reference) for land_publish().
 */
void land_bundle_leave(struct sl_land *l, struct node *n, struct node ***v, size_t *nv);
/* n, a bundle member, was released and sealed; same output. l->mu held. */
void land_bundle_released(struct sl_land *l, struct node *n, struct node ***v, size_t *nv);
/* At close: n leaves its bundle, freed with its last member. No lock. */
void land_bundle_drop(struct node *n);

/* ---- folder times: changed in memory, committed with the next commit ---- */

/* Sets folder dir's mtime and ctime to now. l->mu held. */
void land_touch_dir(struct sl_land *l, uint64_t dir);
/* Overlays a folder's uncommitted times on a; l->mu held. */
void land_dir_times(struct sl_land *l, struct sl_attr *a);
/* Forgets dir's uncommitted times (its record is being set). l->mu held. */
void land_forget_dir(struct sl_land *l, uint64_t dir);
/* Writes the uncommitted folder times in t (rides every group commit). */
int land_dir_times_apply(struct sl_land *l, struct sl_txn *t);
/* Frees the folder times table (at close). */
void land_dir_times_free(struct sl_land *l);

int land_rec_apply(struct sl_txn *t, void *arg);
/* Lands i in txn t: seq, counters, and the index of every query reading it. */
int land_in_txn(struct sl_land *l, struct sl_txn *t, struct sl_inode *i);
int land_counters_apply(struct sl_txn *t, void *arg);
uint64_t land_lowest_live(void *ctx);
int land_load_refused(void *ctx, const char *key, uint64_t val);
/* Discards in-flight files at close: recorded ones land, the rest go. */
void land_drop_nodes(struct sl_land *l);


#endif
