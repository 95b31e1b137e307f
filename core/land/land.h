/* SPDX-License-Identifier: MIT */
/*
 * The landing namespace: in/ (and archive/) as the FUSE layer and
 * `sluice land` see it. In-flight files live in memory (staged in a buffer,
 * spilled to a blob past SL_INLINE_MAX); landed files and folders live in the
 * catalog. This module carries out DESIGN's landing rules: when a file lands,
 * what is durable when, and which operations a landed file refuses.
 *
 * Ownership: sl_land_open() returns a new handle (sl_land_close() frees it,
 * landing what is recorded); each create/open returns a new struct
 * sl_handle, freed by sl_land_release(); attributes are copied out.
 *
 * Thread rules: every function may be called from any thread.
 */
#ifndef SLUICE_CORE_LAND_H
#define SLUICE_CORE_LAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SL_ERRNO_MAX 256 /* refusals are counted for errno values below this */
#define SL_INLINE_MAX 65536 /* landed files up to this size live inside LMDB */
#define SL_SHARED_SIZE 4096
#define SL_SHARED_MAGIC 0x01006563696c7573ull /* "sluice\0\1" */
/* a temp-named file released this long without a rename is abandoned */
#define SL_TEMP_ABANDON_NS (3600ll * 1000000000ll)

struct sl_land;
struct sl_handle;

struct sl_config;

struct sl_land_opts {
	bool strict;       /* -o land=rename: only a rename lands */
	const char *temp;  /* -o temp=GLOB:GLOB, NULL for the default list */
	const struct sl_config *config; /* queries whose indexes landings fill; borrowed */
};

struct sl_attr {
	uint64_t id;
	uint32_t mode;     /* st_mode with type bits */
	uint32_t uid, gid;
	uint64_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
	int64_t atime_ns;  /* 0: take mtime_ns */
	bool landed;       /* immutable: long cache timeouts are safe */
	bool unlinked;     /* an open file whose name is gone: st_nlink 0 */
};

struct sl_land_counters {
	uint64_t files_landed, bytes_landed; /* since the data dir was created */
	uint64_t in_flight;                  /* created, not landed nor dropped */
	uint64_t temp_abandoned;             /* temp files released, never renamed */
	uint64_t refused[SL_ERRNO_MAX];       /* by errno */
};

enum sl_setattr_flags {
	SL_SET_MODE = 1 << 0,
	SL_SET_UID = 1 << 1,
	SL_SET_GID = 1 << 2,
	SL_SET_SIZE = 1 << 3,
	SL_SET_MTIME = 1 << 4,
	SL_SET_MTIME_NOW = 1 << 5,
	SL_SET_ATIME = 1 << 6,
	SL_SET_ATIME_NOW = 1 << 7,
};

struct sl_setattr {
	unsigned flags;    /* enum sl_setattr_flags */
	uint32_t mode, uid, gid;
	uint64_t size;
	int64_t mtime_ns, atime_ns;
	uint32_t caller;   /* uid of the caller: a truncate by non-root clears set-id bits */
};

/*
 * Opens the data dir's catalog and blobs (both must exist, see
 * sl_datadir_open) and recovers: recorded files land at their recorded
 * length, unsettled blobs no record names are removed.
 */
int sl_land_open(const char *datadir, const struct sl_land_opts *opts, struct sl_land **out);

/* The data dir's absolute path (symbolic links resolved), borrowed until close. */
const char *sl_land_datadir(const struct sl_land *l);
/* Starts group commit: call in the process that serves (after a fork). */
int sl_land_start(struct sl_land *l);
/* Calls fn(ctx) after each landing (any thread). Set before serving. */
void sl_land_set_wakeup(struct sl_land *l, void (*fn)(void *ctx), void *ctx);
/*
 * A reload of the mount's config: landings index with cfg's queries from
 * the commit of this call's write on (see sl_qindex_reload: new queries
 * index the landed files, removed ones stop holding files). 0, or the
 * write's error with nothing changed. cfg is borrowed until close, as is
 * the config given at open. Any thread, one reload at a time.
 */
int sl_land_reload(struct sl_land *l, const struct sl_config *cfg);
/* Drops in-flight files, lands recorded ones, closes. NULL ok. */
void sl_land_close(struct sl_land *l);

/* 0, ENOENT, or an error. */
int sl_land_lookup(struct sl_land *l, uint64_t parent, const char *name, struct sl_attr *out);
int sl_land_getattr(struct sl_land *l, uint64_t id, struct sl_attr *out);
/* SL_ID_IN or SL_ID_ARCHIVE: which namespace root folder id is under. */
int sl_land_root(struct sl_land *l, uint64_t id, uint64_t *root);

/*
 * Files. create/open return a new handle in *h, released by
 * sl_land_release(). flags are open(2) flags.
 */
int sl_land_create(struct sl_land *l, uint64_t parent, const char *name, uint32_t mode,
		   uint32_t uid, uint32_t gid, int flags, struct sl_handle **h, struct sl_attr *out);
int sl_land_open_file(struct sl_land *l, uint64_t id, int flags, struct sl_handle **h,
		      bool *landed);
/* Reads up to size bytes at off into buf; *n is what was read. */
int sl_land_read(struct sl_handle *h, void *buf, size_t size, off_t off, size_t *n);
/* For zero-copy reads of a landed blob: its fd (borrowed), else -1. */
int sl_land_read_fd(struct sl_handle *h);
int sl_land_write(struct sl_handle *h, const void *buf, size_t size, off_t off);
/*
 * Zero-copy writes: sl_land_write_fd() readies the handle for a write of
 * size bytes at off by caller uid (not root: set-id bits are cleared) into
 * a blob and returns its fd in *fd (borrowed), or -1 when the bytes must go
 * through sl_land_write(); the caller writes, then reports with
 * sl_land_write_done() (err: the write's errno, or 0).
 *
 * Errors: a storage error (ENOSPC, EDQUOT, EIO) on bytes already accepted
 * poisons the file (it never lands); any other error fails the call only.
 */
int sl_land_write_fd(struct sl_handle *h, size_t size, off_t off, uint32_t uid, int *fd);
int sl_land_write_done(struct sl_handle *h, size_t size, off_t off, int err);
int sl_land_flush(struct sl_handle *h);
/*
 * sl_land_flush() for a caller that must not wait (a FUSE worker): when it
 * returns with *pending true, done(ctx, rc) is called exactly once with
 * the result, on the catalog's commit thread once the record is durable
 * (or on this thread before it returns); otherwise the result is returned
 * and done is never called. The handle stays open until done.
 */
int sl_land_flush_async(struct sl_handle *h, void (*done)(void *ctx, int rc), void *ctx,
			bool *pending);
int sl_land_fsync(struct sl_handle *h);
void sl_land_release(struct sl_handle *h);
int sl_land_fallocate(struct sl_handle *h, int mode, off_t off, off_t len);

/*
 * chmod, chown, utimensat and truncate. A landed file (or one released at a
 * final name, being published) takes mode, owner and times durably: the
 * call returns once a commit recorded them; its size is immutable (EPERM).
 */
int sl_land_setattr(struct sl_land *l, uint64_t id, struct sl_handle *h,
		    const struct sl_setattr *set, struct sl_attr *out);
int sl_land_mkdir(struct sl_land *l, uint64_t parent, const char *name, uint32_t mode,
		  uint32_t uid, uint32_t gid, struct sl_attr *out);
int sl_land_rmdir(struct sl_land *l, uint64_t parent, const char *name);
int sl_land_unlink(struct sl_land *l, uint64_t parent, const char *name);
/* flags: 0, or RENAME_NOREPLACE; RENAME_EXCHANGE/WHITEOUT answer EINVAL. */
int sl_land_rename(struct sl_land *l, uint64_t parent, const char *name, uint64_t newparent,
		   const char *newname, unsigned flags);
/* Counts an operation refused outside core (e.g. EPERM for link). */
void sl_land_refused(struct sl_land *l, int err);

/*
 * Lists a folder: fn(ctx, name, attr) per entry, in-flight files included.
 * fn returns non-zero to stop.
 */
int sl_land_list(struct sl_land *l, uint64_t dir,
		 int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx);

/* The landing counters: committed ones, plus what this process counted. */
void sl_land_counters(struct sl_land *l, struct sl_land_counters *out);
/*
 * The committed landing counters, read in t (`sluice status`); out->in_flight
 * is kept as the caller set it. 0 or a catalog error.
 */
struct sl_txn;
int sl_land_counters_read(struct sl_txn *t, struct sl_land_counters *out);

/*
 * Pins id: ids from it on stay unsettled (probed for orphan blobs after a
 * crash) until unpinned. The engine pins a batch's first output id until
 * the batch commits. EBUSY when 64 pins are held already.
 */
int sl_land_pin(struct sl_land *l, uint64_t id);
void sl_land_unpin(struct sl_land *l, uint64_t id);

/*
 * cleanSource: the landed files ids leave in/: deleted, or with archive
 * moved to archive/ at their in/-relative path (an existing name there is
 * kept; the newcomer is suffixed ~<id>). Files cleaned already are skipped,
 * so an interrupted clean can simply be redone.
 */
int sl_land_clean(struct sl_land *l, const uint64_t *ids, size_t n, bool archive);

/*
 * Calls fn(ctx, parent, name) after core removed a name the kernel may have
 * cached (cleanSource, a complete-mode snapshot). fn must not block on the
 * file system.
 */
void sl_land_set_change(struct sl_land *l,
			void (*fn)(void *ctx, uint64_t parent, const char *name), void *ctx);
/* Reports that parent/name left the tree (through the fn installed above). */
void sl_land_changed(struct sl_land *l, uint64_t parent, const char *name);

/* The catalog and blobs behind l, for the engine (borrowed until close). */
struct sl_catalog *sl_land_catalog(struct sl_land *l);
struct sl_blobs *sl_land_blobs(struct sl_land *l);

/*
 * Files in flight in the mount running on datadir, read from the shared page
 * of its lock file (0 when none runs). For `sluice status`.
 */
int sl_land_shared_in_flight(const char *datadir, uint64_t *out);

/*
 * Landing commit latency: how long a landing (the close, fsync or rename
 * of a final-named file) waited for its durable catalog commit. Counted in
 * the shared page since the process that opened the landing (a mount, or
 * `sluice run`/`land`) started, so that `sluice status` reads the mount's.
 */
#define SL_LAND_LAT_NBUCKET 13
struct sl_land_latency {
	uint64_t count[SL_LAND_LAT_NBUCKET]; /* per bucket, not cumulative; the last is +Inf */
	uint64_t sum_ns;                     /* their total wait */
};
/* The buckets' upper bounds (inclusive), in microseconds; the last bucket has none. */
extern const uint32_t sl_land_latency_bounds_us[SL_LAND_LAT_NBUCKET - 1];
/* This process's landing commit latencies so far. */
void sl_land_latency(struct sl_land *l, struct sl_land_latency *out);
/*
 * The latencies the last process that opened datadir's landing counted,
 * from the shared page of its lock file (all 0 when there is none).
 */
int sl_land_shared_latency(const char *datadir, struct sl_land_latency *out);

/*
 * `sluice land`: lands the local file src under folder `to` (a path under
 * in/, created when missing; NULL or "" for in/ itself), keeping its name,
 * mode and mtime. EISDIR for a folder, EEXIST for an existing name, EINVAL
 * for a temporary name or a `to` leaving in/.
 */
int sl_land_local(struct sl_land *l, const char *src, const char *to);

#endif
