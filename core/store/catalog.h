/* SPDX-License-Identifier: MIT */
/*
 * The catalog: sluice's LMDB environment. It owns every LMDB call, the group
 * commit thread, map growth, and the table layouts (documented in catalog.c).
 *
 * Two prefixes, by first argument: sl_catalog_*() act on the environment
 * (open, start, read, write, ids); sl_txn_*() on a transaction, read or
 * write, that sl_catalog_read() or a write's apply function was given.
 * Values a sl_txn_*_get() returns point into the map: valid until that
 * transaction ends. sl_apply_fn runs on the commit thread: it must not wait
 * for another commit.
 */
#ifndef SLUICE_CORE_CATALOG_H
#define SLUICE_CORE_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_catalog;
struct sl_txn;

enum sl_catalog_flags {
	SL_CATALOG_RDONLY = 1 << 0, /* read-only env: `sluice status` */
	SL_CATALOG_CREATE = 1 << 1, /* create the environment when missing */
	/*
	 * Point lookups only (a start-up check, `sluice status`): no readahead
	 * on the map, so that a cold start reads the pages it needs and not
	 * the megabytes around each of them.
	 */
	SL_CATALOG_RANDOM = 1 << 2,
};

enum sl_kind { SL_KIND_DIR = 1, SL_KIND_FILE = 2 };

enum sl_state {
	SL_STATE_NONE = 0,     /* folders */
	SL_STATE_RECORDED = 1, /* durable (path, length); lands at release or recovery */
	SL_STATE_LANDED = 2,   /* immutable, offered to queries */
};

enum sl_storage { SL_STORE_INLINE = 0, SL_STORE_BLOB = 1 };

#define SL_NAME_MAX 255

/*
 * The catalog's format (meta "format"), the newest this sluice writes; it
 * reads every older one and refuses a newer one (SL_EVERSION, logged with
 * both versions). 1: the first; 2: the file source's seen set keyed by a
 * keyed hash and its per-file history in compressed segments
 * (core/sources/file_hist.c migrates a format 1 catalog at a query's start).
 */
#define SL_CATALOG_FORMAT 2

/* Fixed ids: inode numbers of the mount's fixed nodes. */
enum {
	SL_ID_ROOT = 1,     /* the mount root (FUSE_ROOT_ID) */
	SL_ID_IN = 2,       /* in/: root of the landing namespace */
	SL_ID_OUT = 3,      /* out/ */
	SL_ID_CHECKPOINT = 4,
	SL_ID_STATUS = 5,
	SL_ID_ARCHIVE = 6,  /* archive/: a second namespace root */
	SL_ID_LANDING_JSON = 7,
	SL_ID_METRICS = 8,  /* status/metrics */
	SL_ID_FIRST = 4096, /* first id the allocator hands out */
};

/* A file or folder of the namespace, as stored in the inode table. */
struct sl_inode {
	uint64_t id;
	uint64_t parent;     /* folder id (SL_ID_IN for top-level names) */
	uint8_t kind;        /* enum sl_kind */
	uint8_t state;       /* enum sl_state */
	uint8_t storage;     /* enum sl_storage */
	uint32_t mode;       /* st_mode including the type bits */
	uint32_t uid, gid;
	int64_t mtime_ns;    /* the producer's mtime */
	int64_t ctime_ns;    /* last change of the record */
	int64_t atime_ns;    /* as given by utimensat; mtime for older records */
	uint64_t size;       /* bytes (recorded length for SL_STATE_RECORDED) */
	int64_t landed_ns;   /* landing time, CLOCK_REALTIME; 0 until landed */
	uint64_t seq;        /* landing sequence number, from 1; 0 until landed */
	char name[SL_NAME_MAX + 1];
};

/*
 * Opens (and with SL_CATALOG_CREATE creates) the environment in folder dir.
 * Returns 0, an errno, SL_ECORRUPT or SL_EVERSION.
 */
int sl_catalog_open(const char *dir, unsigned flags, struct sl_catalog **out);

/* Stops the commit thread (after draining its queue) and closes. NULL ok. */
void sl_catalog_close(struct sl_catalog *cat);

/*
 * Starts the group commit thread. Before it, and in processes that never
 * start it, sl_catalog_write() commits on the caller's thread.
 */
int sl_catalog_start(struct sl_catalog *cat);

/* Begins a read transaction; end it with sl_txn_end(). Any thread. */
int sl_catalog_read(struct sl_catalog *cat, struct sl_txn **out);
void sl_txn_end(struct sl_txn *txn);

/*
 * A write applied inside a group commit. It may run more than once (when the
 * map grows, or another request of its group fails), so it must depend only
 * on the transaction's content and its arg, and change nothing else. A
 * non-zero return drops this request's writes only.
 */
typedef int (*sl_apply_fn)(struct sl_txn *txn, void *arg);
typedef void (*sl_done_fn)(void *arg, int rc);

/*
 * Runs fn in the next group commit and waits until that commit is durable.
 * Returns fn's result, or the commit's error (ENOSPC, EIO, ...).
 */
int sl_catalog_write(struct sl_catalog *cat, sl_apply_fn fn, void *arg);

/*
 * Grows the map, before a big write, until bytes more fit in it. A commit
 * that fills the map is otherwise run twice (LMDB reports MAP_FULL at the
 * put that does not fit, and the group re-runs in the grown map). Best
 * effort: a map that cannot grow is the commit's error to report. The
 * caller holds no transaction.
 */
void sl_catalog_make_room(struct sl_catalog *cat, size_t bytes);

/*
 * sl_catalog_write() for a deletion: when the disk is full, the reserve
 * file is released to let it commit (DESIGN §2). Other writes fail with
 * ENOSPC, so that the reserve is there for deletions.
 */
int sl_catalog_write_freeing(struct sl_catalog *cat, sl_apply_fn fn, void *arg);

/*
 * Queues fn for the next group commit and returns at once; done(arg, rc) runs
 * on the commit thread after the commit (or inline without a thread). done
 * must not wait for another commit.
 */
int sl_catalog_write_async(struct sl_catalog *cat, sl_apply_fn fn, void *arg, sl_done_fn done);

/*
 * Like sl_catalog_write_async(), but fn joins the next group commit instead
 * of starting one; alone, it commits after a few milliseconds. For writes
 * recovery could redo (publishing a recorded file), so that they cost no
 * durable commit of their own.
 */
int sl_catalog_write_lazy(struct sl_catalog *cat, sl_apply_fn fn, void *arg, sl_done_fn done);

/* Number of commits so far (for tests of group commit). */
uint64_t sl_catalog_commits(struct sl_catalog *cat);

/*
 * Whether the commit thread writes each group's redo record (the journal,
 * catalog.c), so that a group is durable after one flush (for tests).
 */
bool sl_catalog_journaled(struct sl_catalog *cat);

/*
 * Ids. sl_catalog_next_id() hands out ids from a range reserved durably in
 * advance (one commit per range). *lo..*hi is the span of ids handed out by
 * earlier processes whose fate is unknown (a crash): blobs there that no
 * record names are leaks, see sl_blob_probe().
 */
int sl_catalog_next_id(struct sl_catalog *cat, uint64_t *id);
void sl_catalog_unsettled(struct sl_catalog *cat, uint64_t *lo, uint64_t *hi);
/* Marks every id below lo settled (durably at the next range reservation). */
void sl_catalog_settle(struct sl_catalog *cat, uint64_t lo);

/*
 * Hooks the owner of the catalog installs before sl_catalog_start():
 * live(ctx) returns the lowest id still in use by an unsettled object
 * (UINT64_MAX for none), asked before each range reservation; group(txn,
 * ctx) runs at the end of every group commit (counters ride along).
 */
void sl_catalog_set_hooks(struct sl_catalog *cat, uint64_t (*live)(void *ctx),
			  sl_apply_fn group, void *ctx);

/* Tables. Each returns 0, SL_NOTFOUND, or an error. */
int sl_txn_inode_get(struct sl_txn *txn, uint64_t id, struct sl_inode *out);
int sl_txn_inode_put(struct sl_txn *txn, const struct sl_inode *ino);
int sl_txn_inode_del(struct sl_txn *txn, uint64_t id);

int sl_txn_dirent_get(struct sl_txn *txn, uint64_t parent, const char *name, uint64_t *id);
int sl_txn_dirent_put(struct sl_txn *txn, uint64_t parent, const char *name, uint64_t id);
int sl_txn_dirent_del(struct sl_txn *txn, uint64_t parent, const char *name);
/*
 * Calls fn for each child of parent in name order, starting after `after`
 * (NULL: from the first). fn returns non-zero to stop; that value is returned.
 * name is borrowed until fn returns.
 */
int sl_txn_dirent_each(struct sl_txn *txn, uint64_t parent, const char *after,
		       int (*fn)(void *ctx, const char *name, uint64_t id), void *ctx);

/* Inline bytes of small files. *data is borrowed until the txn ends. */
int sl_txn_data_get(struct sl_txn *txn, uint64_t id, const void **data, size_t *len);
int sl_txn_data_put(struct sl_txn *txn, uint64_t id, const void *data, size_t len);
int sl_txn_data_del(struct sl_txn *txn, uint64_t id);

/* Recorded, not yet landed files (recovery lands them). */
int sl_txn_pending_put(struct sl_txn *txn, uint64_t id);
int sl_txn_pending_del(struct sl_txn *txn, uint64_t id);
int sl_txn_pending_each(struct sl_txn *txn, int (*fn)(void *ctx, uint64_t id), void *ctx);

/* Landing order: seq -> id. */
int sl_txn_landed_put(struct sl_txn *txn, uint64_t seq, uint64_t id);
int sl_txn_landed_del(struct sl_txn *txn, uint64_t seq);

/*
 * Engine tables, generic: keys and values are byte strings whose layouts
 * their owner module documents. Values are borrowed until the txn ends.
 */
/* The order is on disk (the journal's redo records number tables by it): append only. */
enum sl_table {
	SL_TABLE_QUERIES, /* query name -> query id (see source.c) */
	SL_TABLE_QINDEX,  /* a query's unplanned files in landing order */
	SL_TABLE_QHOLD,   /* file id -> the queries that still need it */
	SL_TABLE_QLOG,    /* a query's batch records and rendered checkpoint (engine.c) */
	SL_TABLE_QSEEN,   /* a query's seen set: key -> age clock (engine.c) */
	SL_TABLE_QSEENTS, /* the seen set by age clock, for purging (engine.c) */
	SL_TABLE_QSTATE,  /* a query's operator state: dedup keys, aggregates (state.c) */
	SL_TABLE_COUNT,
};

int sl_txn_get(struct sl_txn *txn, enum sl_table t, const void *key, size_t klen,
	       const void **val, size_t *vlen);
int sl_txn_put(struct sl_txn *txn, enum sl_table t, const void *key, size_t klen,
	       const void *val, size_t vlen);
/*
 * sl_txn_put() for one of a run of puts in ascending key order: a key past
 * the table's last is appended (no search, full pages), any other is put
 * as usual. The result is the same as sl_txn_put()'s.
 */
int sl_txn_put_ascending(struct sl_txn *txn, enum sl_table t, const void *key, size_t klen,
			 const void *val, size_t vlen);
/* A missing key is not an error. */
int sl_txn_del(struct sl_txn *txn, enum sl_table t, const void *key, size_t klen);
/*
 * Calls fn for each entry whose key starts with prefix, in key order; fn
 * returns non-zero to stop, and that value is returned.
 */
int sl_txn_each(struct sl_txn *txn, enum sl_table t, const void *prefix, size_t plen,
		int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen),
		void *ctx);
/*
 * sl_txn_each() starting at key from (flen bytes, itself included when
 * present), which starts with prefix.
 */
int sl_txn_each_from(struct sl_txn *txn, enum sl_table t, const void *prefix, size_t plen,
		     const void *from, size_t flen,
		     int (*fn)(void *ctx, const void *key, size_t klen, const void *val,
			       size_t vlen),
		     void *ctx);
/* The same, last key first. */
int sl_txn_each_rev(struct sl_txn *txn, enum sl_table t, const void *prefix, size_t plen,
		    int (*fn)(void *ctx, const void *key, size_t klen, const void *val,
			      size_t vlen),
		    void *ctx);
/* Every inode, in id order (for `sluice check`). */
int sl_txn_inode_each(struct sl_txn *txn, int (*fn)(void *ctx, const struct sl_inode *i),
		      void *ctx);
/* Every dirent of every folder (for `sluice check`). */
int sl_txn_dirent_all(struct sl_txn *txn,
		      int (*fn)(void *ctx, uint64_t parent, const char *name, uint64_t id),
		      void *ctx);
/* Landing order, for building a new query's index: fn(ctx, seq, id). */
int sl_txn_landed_each(struct sl_txn *txn, int (*fn)(void *ctx, uint64_t seq, uint64_t id),
		       void *ctx);

/* Named counters and settings. A missing key reads as 0. */
int sl_txn_meta_get(struct sl_txn *txn, const char *key, uint64_t *val);
int sl_txn_meta_put(struct sl_txn *txn, const char *key, uint64_t val);
int sl_txn_meta_add(struct sl_txn *txn, const char *key, int64_t delta);
/* Calls fn for each meta key starting with prefix. */
int sl_txn_meta_each(struct sl_txn *txn, const char *prefix,
		     int (*fn)(void *ctx, const char *key, uint64_t val), void *ctx);

#endif
