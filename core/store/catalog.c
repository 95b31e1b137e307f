/* SPDX-License-Identifier: MIT */
/*
 * The catalog on LMDB: environment, group commit, map growth, id ranges and
 * the table layouts. The only file that includes lmdb.h.
 *
 * Tables (named databases; integers big-endian in keys, host order in values):
 *
 *   meta     key: ASCII name             value: u64
 *   inode    key: id u64                 value: inode record, below
 *   dirent   key: parent u64 | name      value: child id u64
 *   data     key: id u64                 value: the bytes of a small file
 *   pending  key: id u64                 value: empty (recorded, not landed)
 *   landed   key: seq u64                value: id u64
 *   queries, qindex, qhold, qlog, qseen, qseents, qstate: engine tables (enum sl_table), laid
 *            out by their owner modules (source.c, engine.c)
 *   journal  key: "ring"                 value: the journal's two slots (see "The
 *            journal"), written in place, never through LMDB
 *
 * Inode record:
 *   OFFSET SIZE MEANING
 *   0      1    format version (1)
 *   1      1    kind (enum sl_kind)
 *   2      1    state (enum sl_state)
 *   3      1    storage (enum sl_storage)
 *   4      4    mode
 *   8      4    uid
 *   12     4    gid
 *   16     8    parent id
 *   24     8    mtime, ns since the epoch
 *   32     8    ctime, ns
 *   40     8    size
 *   48     8    landing time, ns
 *   56     8    landing sequence number
 *   64     8    atime, ns (version 2; a version 1 record has none: mtime)
 *   72     n    name (1..255 bytes, no NUL)
 * Version 1 records (name at 64) are still read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <time.h>

#include "bytes.h"
#include "catalog.h"
#include "err.h"
#include "fault.h"
#include "log.h"
#include "redo.h"

#define INODE_HDR_V1 64
#define INODE_HDR 72
#define INODE_VERSION 2
#define MAP_INITIAL (64ull << 20)
#define ID_RANGE 4096
#define LAZY_NS 3000000 /* a lazy request waits at most 3 ms for company */

struct wreq {
	sl_apply_fn fn;
	void *arg;
	sl_done_fn done;  /* NULL for a waiting caller */
	int rc;
	bool finished;
	bool skip;        /* failed on its own: left out of the retry */
	bool frees;       /* a deletion: may use the reserve on ENOSPC */
	struct wreq *next;
};

struct sl_catalog {
	MDB_env *env;
	MDB_dbi meta, inode, dirent, data, pending, landed;
	MDB_dbi tables[SL_TABLE_COUNT]; /* 0 when absent (an old catalog opened read-only) */
	bool rdonly;
	char reserve[4200];          /* DATA_DIR/reserve, released on ENOSPC */
	size_t mapsize;
	pthread_rwlock_t map_lock;   /* shared by every txn, exclusive to grow */

	pthread_mutex_t q_mu;        /* guards the queue and request states */
	pthread_cond_t q_cv;         /* commit thread: work arrived */
	pthread_cond_t done_cv;      /* waiters: a group finished */
	struct wreq *head, *tail;
	bool running, stop;
	struct wreq *lazy_head, *lazy_tail; /* ride the next group */
	struct timespec lazy_deadline; /* CLOCK_REALTIME: commit them alone after it */
	pthread_t thread;
	pthread_mutex_t inline_mu;   /* serializes writers without the thread */
	uint64_t commits;
	bool pipelined;              /* MDB_NOMETASYNC while the commit thread runs */
	int witness;                 /* data.mdb again, for our own flushes; -1 */
	int failed;                  /* a flush failed: every later write fails (remount) */
	enum { UNSAFE_NONE, UNSAFE_NOSYNC, UNSAFE_EARLY_ACK, UNSAFE_BAD_JOURNAL, UNSAFE_ONE_FLUSH }
	    unsafe; /* SLUICE_FAULT_SYNC */

	pthread_mutex_t id_mu;
	uint64_t id_next, id_hi;     /* ids handed out / reserved */
	uint64_t unsettled_lo, unsettled_hi;
	uint64_t settle_lo;          /* ids below are settled */

	uint64_t (*live_hook)(void *ctx);
	sl_apply_fn group_hook;
	void *hook_ctx;

	bool zero_ahead;             /* see zero_ahead() */
	uint64_t used_seen;          /* bytes of data.mdb in use at the last look */

	/* the journal (see "The journal" below) */
	MDB_dbi jdbi;
	bool jr_ok;                  /* the ring exists and its place in data.mdb is known */
	bool tail_journaled;         /* the last commit's record is in the ring */
	bool meta_behind;            /* a journaled commit's meta page is not durable yet */
	int jr_slot;                 /* the slot the next record goes to */
	uint64_t jr_seq;             /* the next record's sequence number */
	off_t jr_base;               /* slot 0's place in data.mdb; slot 1 follows */
	size_t jr_limit;             /* a record's biggest size (JR_SLOT) */
	struct sl_redo redo;
};

struct sl_txn {
	struct sl_catalog *cat;
	MDB_txn *txn;
	bool write;
	MDB_cursor *asc;  /* sl_txn_put_ascending()'s cursor (freed with the write txn) */
	MDB_dbi asc_dbi;
	struct sl_redo *redo; /* records the changes (the journal), or NULL */
};

static int map_rc(int rc)
{
	switch (rc) {
	case MDB_SUCCESS: return 0;
	case MDB_NOTFOUND: return SL_NOTFOUND;
	case MDB_MAP_FULL: return SL_EMAPFULL;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_BAD_TXN: return SL_ECORRUPT;
	case MDB_VERSION_MISMATCH: return SL_EVERSION;
	case MDB_TXN_FULL:
	case MDB_READERS_FULL:
	case MDB_DBS_FULL: return ENOMEM;
	case MDB_MAP_RESIZED: return EAGAIN;
	}
	return rc > 0 ? rc : EIO;
}

/*
 * A table's number in redo records: the named tables, then enum sl_table;
 * 256 for none. Part of the ring's format: new tables only at the end.
 */
static bool db_of_code(const struct sl_catalog *cat, unsigned code, MDB_dbi *dbi)
{
	const MDB_dbi named[] = {cat->meta, cat->inode, cat->dirent, cat->data, cat->pending,
				 cat->landed};
	if (code < 6)
		*dbi = named[code];
	else if (code - 6 < SL_TABLE_COUNT && cat->tables[code - 6])
		*dbi = cat->tables[code - 6];
	else
		return false;
	return true;
}

static unsigned db_code(const struct sl_catalog *cat, MDB_dbi dbi)
{
	MDB_dbi d;
	for (unsigned code = 0; code < 6 + SL_TABLE_COUNT; code++)
		if (db_of_code(cat, code, &d) && d == dbi)
			return code;
	return 256;
}

/* Records a change in t's redo record, if t keeps one that still fits. */
static void redo_note(struct sl_txn *t, enum sl_redo_kind kind, MDB_dbi dbi, const void *k,
		      size_t klen, const void *v, size_t vlen)
{
	if (t->redo && !t->redo->over)
		sl_redo_add(t->redo, kind, db_code(t->cat, dbi), k, klen, v, vlen);
}

static int open_dbs(struct sl_catalog *cat, bool create)
{
	static const char *names[] = {"meta", "inode", "dirent", "data", "pending", "landed"};
	MDB_dbi *dbis[] = {&cat->meta, &cat->inode, &cat->dirent, &cat->data, &cat->pending,
			   &cat->landed};
	MDB_txn *txn;
	int rc;

	rc = mdb_txn_begin(cat->env, NULL, cat->rdonly ? MDB_RDONLY : 0, &txn);
	if (rc)
		return map_rc(rc);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rc = mdb_dbi_open(txn, names[i], create ? MDB_CREATE : 0, dbis[i]);
		if (rc) {
			mdb_txn_abort(txn);
			return rc == MDB_NOTFOUND ? SL_ECORRUPT : map_rc(rc);
		}
	}
	static const char *tables[SL_TABLE_COUNT] = {"queries", "qindex", "qhold", "qlog",
						     "qseen", "qseents", "qstate"};
	for (size_t i = 0; i < SL_TABLE_COUNT; i++) {
		rc = mdb_dbi_open(txn, tables[i], create ? MDB_CREATE : 0, &cat->tables[i]);
		if (rc == MDB_NOTFOUND && !create) {
			cat->tables[i] = 0; /* added by a later version: reads as empty */
			continue;
		}
		if (rc) {
			mdb_txn_abort(txn);
			return map_rc(rc);
		}
	}
	rc = mdb_txn_commit(txn);
	return map_rc(rc);
}

/* The catalog-backed roots of the mount: in/, archive/ and out/. */
static int ensure_roots(struct sl_txn *t)
{
	static const struct {
		uint64_t id;
		const char *name;
		uint32_t mode;
	} roots[] = {{SL_ID_IN, "in", 0755}, {SL_ID_ARCHIVE, "archive", 0755},
		     {SL_ID_OUT, "out", 0555}};
	struct sl_inode d;
	int rc;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		rc = sl_txn_inode_get(t, roots[i].id, &d);
		if (rc != SL_NOTFOUND)
			return rc;
		memset(&d, 0, sizeof(d));
		d.id = roots[i].id;
		d.parent = SL_ID_ROOT;
		d.kind = SL_KIND_DIR;
		d.mode = S_IFDIR | roots[i].mode;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		d.mtime_ns = d.ctime_ns = d.atime_ns = ts.tv_sec * 1000000000ll + ts.tv_nsec;
		strcpy(d.name, roots[i].name);
		if ((rc = sl_txn_inode_put(t, &d)))
			return rc;
	}
	return 0;
}

/* A catalog of a newer sluice: never misread, refused naming both versions. */
static int too_new(uint64_t fmt)
{
	sl_log(SL_LOG_ERR,
	       "catalog format %" PRIu64 " was written by a newer sluice; this one reads formats "
	       "1 to %d",
	       fmt, SL_CATALOG_FORMAT);
	return SL_EVERSION;
}

/* Writes the fixed folders and the format marker into a new catalog. */
static int init_apply(struct sl_txn *t, void *arg)
{
	uint64_t fmt;
	int rc;

	(void)arg;
	rc = sl_txn_meta_get(t, "format", &fmt);
	if (rc)
		return rc;
	if (fmt > SL_CATALOG_FORMAT)
		return too_new(fmt);
	/* also for catalogs made before out/ lived in the catalog */
	if ((rc = ensure_roots(t)) || fmt != 0)
		return rc;
	if ((rc = sl_txn_meta_put(t, "id_hi", SL_ID_FIRST)) ||
	    (rc = sl_txn_meta_put(t, "id_settled", SL_ID_FIRST)))
		return rc;
	return sl_txn_meta_put(t, "format", SL_CATALOG_FORMAT);
}

static int reserve_apply(struct sl_txn *t, void *arg)
{
	struct sl_catalog *cat = arg;
	int rc = sl_txn_meta_put(t, "id_hi", cat->id_hi + ID_RANGE);
	if (rc)
		return rc;
	return sl_txn_meta_put(t, "id_settled", cat->settle_lo);
}

static int read_ids(struct sl_catalog *cat)
{
	struct sl_txn *t;
	uint64_t hi = 0, settled = 0, fmt = 0;
	int rc = sl_catalog_read(cat, &t);
	if (rc)
		return rc;
	if (!(rc = sl_txn_meta_get(t, "format", &fmt)) && !(rc = sl_txn_meta_get(t, "id_hi", &hi)))
		rc = sl_txn_meta_get(t, "id_settled", &settled);
	sl_txn_end(t);
	if (rc)
		return rc;
	if (fmt == 0)
		return SL_ECORRUPT;
	if (fmt > SL_CATALOG_FORMAT)
		return too_new(fmt);
	if (hi < SL_ID_FIRST || settled > hi)
		return SL_ECORRUPT;
	cat->id_next = cat->id_hi = hi;
	cat->unsettled_lo = settled;
	cat->unsettled_hi = hi;
	cat->settle_lo = settled;
	return 0;
}

/*
 * Refuses a data.mdb shorter than the pages its newest meta page uses: a
 * disk that lost writes after acknowledging their flush (a broken write
 * cache) can leave that meta page durable without the pages before it,
 * and LMDB would fault (SIGBUS) reading a page past the file's end. A
 * catalog flushed as sluice flushes it never is: a meta page is written
 * after the flush of its pages.
 */
static int check_length(struct sl_catalog *cat, const MDB_envinfo *info)
{
	MDB_stat st;
	struct stat sb;
	mdb_filehandle_t fd;

	if (mdb_env_stat(cat->env, &st) || mdb_env_get_fd(cat->env, &fd) || fstat(fd, &sb))
		return 0; /* cannot tell: LMDB's own checks then */
	uint64_t need = ((uint64_t)info->me_last_pgno + 1) * st.ms_psize;
	if ((uint64_t)sb.st_size >= need)
		return 0;
	sl_log(SL_LOG_ERR,
	       "catalog/data.mdb is corrupt: %" PRIu64 " bytes, and its last commit uses %" PRIu64
	       " (the disk lost writes it had acknowledged; restore the data dir from a backup)",
	       (uint64_t)sb.st_size, need);
	return SL_ECORRUPT;
}

static int jr_replay(struct sl_catalog *cat);

int sl_catalog_open(const char *dir, unsigned flags, struct sl_catalog **out)
{
	struct sl_catalog *cat;
	MDB_envinfo info;
	int rc;

	cat = calloc(1, sizeof(*cat));
	if (!cat)
		return ENOMEM;
	cat->rdonly = flags & SL_CATALOG_RDONLY;
	cat->witness = -1;
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&cat->map_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&cat->q_mu, NULL);
	pthread_cond_init(&cat->q_cv, NULL);
	pthread_cond_init(&cat->done_cv, NULL);
	pthread_mutex_init(&cat->inline_mu, NULL);
	pthread_mutex_init(&cat->id_mu, NULL);

	const char *slash = strrchr(dir, '/');
	snprintf(cat->reserve, sizeof(cat->reserve), "%.*s%sreserve",
		 slash ? (int)(slash - dir) : 0, dir, slash ? "/" : "");
	if ((flags & SL_CATALOG_CREATE) && mkdir(dir, 0700) && errno != EEXIST) {
		rc = errno;
		goto free_cat;
	}
	rc = mdb_env_create(&cat->env);
	if (rc) {
		rc = map_rc(rc);
		goto free_cat;
	}
	mdb_env_set_maxdbs(cat->env, 16);
	mdb_env_set_maxreaders(cat->env, 256);
	mdb_env_set_mapsize(cat->env, MAP_INITIAL);
	/*
	 * MDB_NOTLS: FUSE callbacks hop threads. Never MDB_WRITEMAP: a full
	 * disk would turn into SIGBUS instead of an error.
	 */
	unsigned env_flags = MDB_NOTLS | (cat->rdonly ? MDB_RDONLY : 0) |
			     (flags & SL_CATALOG_RANDOM ? MDB_NORDAHEAD : 0);
#if SL_FAULTS
	/*
	 * SLUICE_FAULT_SYNC: a broken durability, for
	 * tests/integration/test_powerloss.py to show that it catches one:
	 * nosync: no flush at all (MDB_NOSYNC, and none of our own);
	 * early-ack: the pipelined commit acknowledges a group as soon as
	 * it committed, before its meta page is durable (harmless with the
	 * journal, which makes it durable then: run it with SLUICE_JOURNAL=0);
	 * bad-journal: the journal's records fail their checksum, so none is
	 * ever applied;
	 * one-flush: a group's commit writes its pages and its meta page
	 * (MDB_NOSYNC), then one flush makes them durable together: safe if a
	 * flush lands all or nothing, not when a power cut lets the meta page
	 * through without some of the pages it names (PL_TORN).
	 */
	const char *unsafe = getenv("SLUICE_FAULT_SYNC");
	if (unsafe && !strcmp(unsafe, "nosync")) {
		env_flags |= MDB_NOSYNC;
		cat->unsafe = UNSAFE_NOSYNC;
	} else if (unsafe && !strcmp(unsafe, "early-ack")) {
		cat->unsafe = UNSAFE_EARLY_ACK;
	} else if (unsafe && !strcmp(unsafe, "bad-journal")) {
		cat->unsafe = UNSAFE_BAD_JOURNAL;
	} else if (unsafe && !strcmp(unsafe, "one-flush")) {
		cat->unsafe = UNSAFE_ONE_FLUSH;
	}
#endif
	rc = mdb_env_open(cat->env, dir, env_flags, 0600);
	if (rc) {
		rc = map_rc(rc);
		goto env_close;
	}
	mdb_env_info(cat->env, &info);
	cat->mapsize = info.me_mapsize;
	if ((rc = check_length(cat, &info)))
		goto env_close;
	rc = open_dbs(cat, !cat->rdonly);
	if (rc)
		goto env_close;
	if (!cat->rdonly && (rc = jr_replay(cat)))
		goto env_close;
	if (!cat->rdonly) {
		rc = sl_catalog_write(cat, init_apply, NULL);
		if (rc)
			goto env_close;
	}
	rc = read_ids(cat);
	if (rc)
		goto env_close;
	*out = cat;
	return 0;

env_close:
	mdb_env_close(cat->env);
free_cat:
	free(cat);
	return rc;
}

static void *commit_main(void *arg);
static void jr_setup(struct sl_catalog *cat);

/*
 * Set in the commit thread: the journal's state (slot, sequence, record
 * buffer) is its alone, and a writer that commits inline while it stops
 * never touches it.
 */
static _Thread_local bool in_commit_thread;

void sl_catalog_set_hooks(struct sl_catalog *cat, uint64_t (*live)(void *ctx),
			  sl_apply_fn group, void *ctx)
{
	cat->live_hook = live;
	cat->group_hook = group;
	cat->hook_ctx = ctx;
}

int sl_catalog_start(struct sl_catalog *cat)
{
	/* SLUICE_PIPELINE=0: the previous two-flush commit (for measurements) */
	const char *pl = getenv("SLUICE_PIPELINE");
	const char *dir;
	char path[4200];
	if (!cat->rdonly && !(pl && !strcmp(pl, "0")) && mdb_env_get_path(cat->env, &dir) == 0) {
		snprintf(path, sizeof(path), "%s/data.mdb", dir);
		cat->witness = open(path, O_RDWR | O_CLOEXEC); /* writes: zero_ahead(), the journal */
		if (cat->witness >= 0)
			jr_setup(cat);
		if (cat->witness >= 0 && mdb_env_set_flags(cat->env, MDB_NOMETASYNC, 1) == 0)
			cat->pipelined = true;
		if (cat->pipelined && cat->unsafe == UNSAFE_ONE_FLUSH)
			mdb_env_set_flags(cat->env, MDB_NOSYNC, 1); /* a fault build's broken mode */
		cat->jr_ok &= cat->pipelined;
	}
	/* SLUICE_ZERO_AHEAD=0: see zero_ahead() (for measurements) */
	const char *za = getenv("SLUICE_ZERO_AHEAD");
	cat->zero_ahead = cat->pipelined && !(za && !strcmp(za, "0"));
	int rc = pthread_create(&cat->thread, NULL, commit_main, cat);
	if (rc) {
		if (cat->pipelined)
			mdb_env_set_flags(cat->env, MDB_NOMETASYNC, 0);
		cat->pipelined = false;
		return rc;
	}
	pthread_mutex_lock(&cat->q_mu);
	cat->running = true;
	pthread_mutex_unlock(&cat->q_mu);
	return 0;
}

static void run_inline(struct sl_catalog *cat, struct wreq *r);

/*
 * At a clean close: the settled ids, and the reserved ids never handed out
 * given back (id_hi = id_next), so that the next start probes only the ids
 * this process handed out and did not settle, not the rest of its range
 * (up to ID_RANGE stat calls of blobs that cannot exist: ~13 ms a start here).
 */
static int settled_apply(struct sl_txn *t, void *arg)
{
	struct sl_catalog *cat = arg;
	int rc = sl_txn_meta_put(t, "id_settled", cat->settle_lo);
	if (rc == 0 && cat->id_next < cat->id_hi)
		rc = sl_txn_meta_put(t, "id_hi", cat->id_next);
	return rc;
}

void sl_catalog_close(struct sl_catalog *cat)
{
	if (!cat)
		return;
	pthread_mutex_lock(&cat->q_mu);
	bool running = cat->running;
	cat->stop = true;
	pthread_cond_broadcast(&cat->q_cv);
	pthread_mutex_unlock(&cat->q_mu);
	if (running)
		pthread_join(cat->thread, NULL);
	if (cat->pipelined) {
		/* the thread made its last group durable; commits from here are durable on return */
		mdb_env_set_flags(cat->env, MDB_NOMETASYNC, 0);
		if (cat->unsafe == UNSAFE_ONE_FLUSH)
			mdb_env_set_flags(cat->env, MDB_NOSYNC, 0);
		cat->pipelined = false;
	}
	if (cat->witness >= 0)
		close(cat->witness);
	sl_redo_free(&cat->redo);
	if (!cat->rdonly) {
		/* what is settled now, or was never handed out, needs no probe at the next start */
		if ((cat->settle_lo > cat->unsettled_lo && cat->settle_lo != UINT64_MAX) ||
		    cat->id_next < cat->id_hi)
			run_inline(cat, &(struct wreq){.fn = settled_apply, .arg = cat});
		/* no mdb_env_sync(): every commit was durable when it returned */
	}
	mdb_env_close(cat->env);
	pthread_rwlock_destroy(&cat->map_lock);
	free(cat);
}

bool sl_catalog_journaled(struct sl_catalog *cat)
{
	return cat->jr_ok;
}

uint64_t sl_catalog_commits(struct sl_catalog *cat)
{
	pthread_mutex_lock(&cat->q_mu);
	uint64_t n = cat->commits;
	pthread_mutex_unlock(&cat->q_mu);
	return n;
}

int sl_catalog_read(struct sl_catalog *cat, struct sl_txn **out)
{
	struct sl_txn *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return ENOMEM;
	t->cat = cat;
	t->write = false;
	for (;;) {
		pthread_rwlock_rdlock(&cat->map_lock);
		rc = mdb_txn_begin(cat->env, NULL, MDB_RDONLY, &t->txn);
		if (rc != MDB_MAP_RESIZED)
			break;
		/* another process grew the map: adopt its size */
		pthread_rwlock_unlock(&cat->map_lock);
		pthread_rwlock_wrlock(&cat->map_lock);
		mdb_env_set_mapsize(cat->env, 0);
		pthread_rwlock_unlock(&cat->map_lock);
	}
	if (rc) {
		pthread_rwlock_unlock(&cat->map_lock);
		free(t);
		return map_rc(rc);
	}
	*out = t;
	return 0;
}

void sl_txn_end(struct sl_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	pthread_rwlock_unlock(&t->cat->map_lock);
	free(t);
}

static void grow_map(struct sl_catalog *cat);

/*
 * The bytes of data.mdb that the newest commit uses (up to its last page)
 * and the map's size, read under map_lock: a map being grown by another
 * thread moves the meta pages these are read from.
 */
static int in_use(struct sl_catalog *cat, uint64_t *used, size_t *mapsize)
{
	MDB_envinfo info;
	MDB_stat st;

	pthread_rwlock_rdlock(&cat->map_lock);
	int rc = mdb_env_stat(cat->env, &st);
	if (rc == 0)
		rc = mdb_env_info(cat->env, &info);
	*mapsize = cat->mapsize;
	pthread_rwlock_unlock(&cat->map_lock);
	if (rc == 0)
		*used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	return rc;
}

void sl_catalog_make_room(struct sl_catalog *cat, size_t bytes)
{
	uint64_t used;
	size_t mapsize;

	for (;;) {
		if (in_use(cat, &used, &mapsize))
			return;
		if (used <= mapsize && mapsize - used >= bytes)
			return;
		grow_map(cat);
		pthread_rwlock_rdlock(&cat->map_lock);
		bool grew = cat->mapsize != mapsize;
		pthread_rwlock_unlock(&cat->map_lock);
		if (!grew)
			return; /* the commit will say why */
	}
}

static void grow_map(struct sl_catalog *cat)
{
	pthread_rwlock_wrlock(&cat->map_lock);
	size_t next = cat->mapsize < (1ull << 30) ? cat->mapsize * 2 : cat->mapsize + (1ull << 30);
	int rc = mdb_env_set_mapsize(cat->env, next);
	if (rc == 0) {
		MDB_envinfo info;
		mdb_env_info(cat->env, &info);
		cat->mapsize = info.me_mapsize;
		sl_log(SL_LOG_INFO, "catalog map grown to %zu MiB", cat->mapsize >> 20);
	} else {
		sl_log(SL_LOG_ERR, "cannot grow catalog map: %s", mdb_strerror(rc));
	}
	pthread_rwlock_unlock(&cat->map_lock);
}

/*
 * The errno of a commit that failed to write. LMDB reports a short write as
 * EIO, and a short write is what a full disk gives (the write takes what
 * fits): with less than a MiB left, it was ENOSPC.
 */
static int commit_errno(struct sl_catalog *cat, int rc)
{
	struct statvfs sv;
	int fd;

	if (rc == EIO && mdb_env_get_fd(cat->env, &fd) == 0 && fstatvfs(fd, &sv) == 0 &&
	    (unsigned long long)sv.f_bavail * sv.f_frsize < (1ull << 20))
		return ENOSPC;
	return map_rc(rc);
}

static void run_group(struct sl_catalog *cat, struct wreq *group);

/*
 * The disk is full: frees DATA_DIR/reserve (made at start, see datadir.c)
 * so that this commit, and deletions after it, can still be written. True
 * when there was a reserve to free; the next start makes it again.
 */
static bool all_free(const struct wreq *group)
{
	for (; group; group = group->next)
		if (!group->skip && !group->frees)
			return false;
	return true;
}

static bool release_reserve(struct sl_catalog *cat)
{
	if (!cat->reserve[0] || unlink(cat->reserve))
		return false;
	sl_log(SL_LOG_WARNING, "disk full: released '%s' so that commits (deletions) go on",
	       cat->reserve);
	return true;
}

/*
 * The journal. A pipelined commit is durable only after two flushes in
 * sequence: its own data flush, then one that carries its meta page (the
 * next group's data flush, or an idle flush of its own when none follows,
 * which is the common case when every producer waits for its group). So
 * the commit thread also writes each group's changes as a redo record
 * (redo.h) into a ring inside data.mdb, before LMDB's commit: LMDB's data
 * flush (fdatasync of data.mdb, which covers every byte of the file) makes
 * the record durable with the group's pages, and the group is
 * acknowledged after that one flush. A power loss before the meta page is
 * durable leaves LMDB at the transaction before, and the next writer to
 * open the catalog applies the record whose txnid follows it.
 *
 * The ring is the value of key "ring" in table "journal": its pages are
 * written once by LMDB (zeros) and never again by LMDB, so their place in
 * data.mdb is fixed; records are written there with pwrite on the witness.
 * Two slots, used in turn after each journaled commit: a record is needed
 * until the meta page of its commit is durable, which the next commit's
 * data flush ensures, and the next record goes to the other slot. A record
 * that did not fit (JR_SLOT), or that could not be written, leaves its
 * group to the two-flush path. SLUICE_JOURNAL=0 turns it off (measurements).
 */
#define JR_SLOT (2u << 20)
#define JR_RING (2 * (size_t)JR_SLOT + 4096)

static int jr_ring(MDB_txn *txn, MDB_dbi dbi, MDB_val *v)
{
	MDB_val k = {4, (void *)"ring"};
	int rc = mdb_get(txn, dbi, &k, v);
	if (rc == 0 && v->mv_size != JR_RING)
		rc = MDB_INCOMPATIBLE;
	return rc;
}

/*
 * Slot 0's place in data.mdb (page-aligned: a torn page never spans two
 * records) and its distance from the ring's start, from the ring's
 * address in LMDB's map (LMDB does not say where its map starts: the
 * mapping that holds the address does), checked by reading the ring's
 * first bytes back through LMDB's descriptor.
 */
static int jr_place(struct sl_catalog *cat, const MDB_val *v, off_t *base, size_t *skip)
{
	uintptr_t p = (uintptr_t)v->mv_data;
	unsigned long long lo, hi, foff;
	char line[4352], head[64];
	off_t at = -1;
	int fd;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return errno;
	while (at < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %*s %llx", &lo, &hi, &foff) == 3 && p >= lo && p < hi)
			at = (off_t)(p - lo + foff);
	fclose(f);
	if (at < 0 || mdb_env_get_fd(cat->env, &fd) ||
	    pread(fd, head, sizeof(head), at) != (ssize_t)sizeof(head) ||
	    memcmp(head, v->mv_data, sizeof(head)))
		return MDB_INCOMPATIBLE;
	*base = (at + 4095) / 4096 * 4096;
	*skip = (size_t)(*base - at);
	return 0;
}

struct replay {
	struct sl_catalog *cat;
	MDB_txn *txn;
};

static int replay_op(void *ctx, enum sl_redo_kind kind, unsigned table, const void *key,
		     size_t klen, const void *val, size_t vlen)
{
	struct replay *r = ctx;
	MDB_dbi dbi;
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	if (!db_of_code(r->cat, table, &dbi))
		return SL_ECORRUPT;
	int rc = kind == SL_REDO_PUT ? mdb_put(r->txn, dbi, &k, &v, 0)
				     : mdb_del(r->txn, dbi, &k, NULL);
	/* the state is the one the record was made on: a missing key is not */
	return rc == MDB_NOTFOUND ? SL_ECORRUPT : map_rc(rc);
}

/*
 * Applies the ring's record of the transaction after the last durable one,
 * if there is one (a power loss came between its acknowledgement and the
 * flush of its meta page), as a durable commit. Opening writer, no thread.
 */
static int jr_replay(struct sl_catalog *cat)
{
	for (int attempt = 0;; attempt++) {
		MDB_txn *txn;
		MDB_dbi dbi;
		MDB_val v;
		off_t base;
		size_t skip;
		int rc = mdb_txn_begin(cat->env, NULL, 0, &txn);
		if (rc)
			return map_rc(rc);
		rc = mdb_dbi_open(txn, "journal", 0, &dbi);
		if (rc == 0)
			rc = jr_ring(txn, dbi, &v);
		if (rc) {
			mdb_txn_abort(txn);
			return rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE ? 0 : map_rc(rc);
		}
		if ((rc = jr_place(cat, &v, &base, &skip))) {
			mdb_txn_abort(txn);
			sl_log(SL_LOG_ERR, "catalog: cannot find the journal in data.mdb: %s",
			       rc > 0 ? strerror(rc) : mdb_strerror(rc));
			return SL_ECORRUPT;
		}
		uint64_t next = mdb_txn_id(txn), top = 0;
		struct sl_redo_rec rec, best;
		bool found = false;
		for (int i = 0; i < 2; i++) {
			const char *slot = (const char *)v.mv_data + skip + (size_t)i * JR_SLOT;
			if (!sl_redo_open(slot, JR_SLOT, &rec))
				continue;
			top = rec.seq > top ? rec.seq : top;
			if (rec.txnid == next && (!found || rec.seq > best.seq)) {
				best = rec;
				found = true;
			}
		}
		cat->jr_seq = top + 1;
		if (!found) {
			mdb_txn_abort(txn);
			return 0;
		}
		/* a copy: LMDB's values are valid only until the txn's next update */
		unsigned char *copy = malloc(best.len ? best.len : 1);
		if (!copy) {
			mdb_txn_abort(txn);
			return ENOMEM;
		}
		memcpy(copy, best.ops, best.len);
		best.ops = copy;
		rc = sl_redo_each(&best, replay_op, &(struct replay){cat, txn});
		free(copy);
		if (rc == EINVAL)
			rc = SL_ECORRUPT;
		if (rc == 0) {
			rc = map_rc(mdb_txn_commit(txn));
		} else {
			mdb_txn_abort(txn);
		}
		if (rc == SL_EMAPFULL && attempt < 8) {
			grow_map(cat);
			continue;
		}
		if (rc)
			sl_log(SL_LOG_ERR, "catalog: cannot apply the journal's last transaction "
			       "(%" PRIu64 "): %s", next, sl_strerror(rc));
		else
			sl_log(SL_LOG_WARNING, "catalog: applied the journal's record of transaction "
			       "%" PRIu64 " (%zu bytes), acknowledged before a power loss", next,
			       best.len);
		return rc;
	}
}

/*
 * Creates the ring (a durable commit) and finds its place. Before the thread
 * starts. Like the zeros ahead, the journal saves time, never space: no ring
 * is made on a disk with less than JR_ROOM rings free, and a commit of it
 * that fails gives back what it wrote.
 */
#define JR_ROOM 8

static void jr_setup(struct sl_catalog *cat)
{
	const char *env = getenv("SLUICE_JOURNAL");
	MDB_txn *txn;
	MDB_val k = {4, (void *)"ring"}, v;
	struct stat sb0, sb;
	struct statvfs vfs;
	bool small = false;
	int rc;

	if ((env && !strcmp(env, "0")) || fstat(cat->witness, &sb0))
		return;
	cat->jr_limit = JR_SLOT;
#if SL_FAULTS
	/* SLUICE_JOURNAL_LIMIT=BYTES: smaller records, so that tests mix both paths */
	const char *lim = getenv("SLUICE_JOURNAL_LIMIT");
	if (lim && atol(lim) > 0 && (size_t)atol(lim) < JR_SLOT)
		cat->jr_limit = (size_t)atol(lim);
#endif
	for (int attempt = 0;; attempt++) {
		pthread_rwlock_rdlock(&cat->map_lock);
		rc = mdb_txn_begin(cat->env, NULL, 0, &txn);
		if (rc == 0) {
			rc = mdb_dbi_open(txn, "journal", MDB_CREATE, &cat->jdbi);
			if (rc == 0 && (rc = mdb_get(txn, cat->jdbi, &k, &v)) == MDB_NOTFOUND &&
			    (fstatvfs(cat->witness, &vfs) ||
			     (uint64_t)vfs.f_bavail * vfs.f_frsize < JR_ROOM * (uint64_t)JR_RING)) {
				small = true;
			} else if (rc == MDB_NOTFOUND) {
				v.mv_size = JR_RING;
				v.mv_data = NULL;
				if ((rc = mdb_put(txn, cat->jdbi, &k, &v, MDB_RESERVE)) == 0) {
					/* zeros, after a mark that jr_place() finds it by */
					memset(v.mv_data, 0, JR_RING);
					struct timespec ts;
					clock_gettime(CLOCK_REALTIME, &ts);
					snprintf(v.mv_data, 64, "sluice journal %lld.%09ld %d",
						 (long long)ts.tv_sec, ts.tv_nsec, (int)getpid());
				}
			}
			rc = rc || small ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
		}
		pthread_rwlock_unlock(&cat->map_lock);
		if (rc != MDB_MAP_FULL || attempt >= 8)
			break;
		grow_map(cat); /* a full catalog (a big engine state): room for the ring */
	}
	int why = rc == EIO ? commit_errno(cat, rc) : rc; /* before the space comes back */
	if (rc && fstat(cat->witness, &sb) == 0 && sb.st_size > sb0.st_size)
		(void)!ftruncate(cat->witness, sb0.st_size); /* a commit's part that fitted */
	if (small) {
		sl_log(SL_LOG_INFO, "catalog: no journal on a disk with less than %llu MiB "
		       "free: each landing group waits for two flushes",
		       (unsigned long long)(JR_ROOM * JR_RING) >> 20);
		return;
	}
	pthread_rwlock_rdlock(&cat->map_lock);
	if (rc == 0 && (rc = mdb_txn_begin(cat->env, NULL, MDB_RDONLY, &txn)) == 0) {
		size_t skip;
		if ((rc = jr_ring(txn, cat->jdbi, &v)) == 0)
			rc = jr_place(cat, &v, &cat->jr_base, &skip);
		mdb_txn_abort(txn);
	}
	pthread_rwlock_unlock(&cat->map_lock);
	if (rc && !why)
		why = rc; /* the ring is there, its place not found */
	if (rc)
		sl_log(SL_LOG_WARNING, "catalog: no journal (%s): each landing group waits for "
		       "two flushes", why > 0 ? strerror(why) : mdb_strerror(why));
	cat->jr_ok = rc == 0;
}

static off_t jr_slot_at(const struct sl_catalog *cat)
{
	return cat->jr_base + (off_t)cat->jr_slot * JR_SLOT;
}

/* The commit of the record just written failed: it must never be applied. */
static void jr_cancel(struct sl_catalog *cat)
{
	static const char zeros[SL_REDO_HDR];
	if (pwrite(cat->witness, zeros, sizeof(zeros), jr_slot_at(cat)) != (ssize_t)sizeof(zeros))
		sl_log(SL_LOG_WARNING, "catalog: cannot cancel a journal record: %s",
		       strerror(errno));
}

/* Writes t's record to the next slot; whether it is there to be made durable. */
static bool jr_write(struct sl_catalog *cat, struct sl_txn *t)
{
	struct sl_redo *r = t->redo;
	if (!r || !sl_redo_usable(r) || SL_FAULT_ERR("catalog.journal"))
		return false;
	sl_redo_seal(r, cat->jr_seq++, mdb_txn_id(t->txn));
	if (cat->unsafe == UNSAFE_BAD_JOURNAL)
		r->b.p[8] ^= 1; /* its checksum */
	off_t off = jr_slot_at(cat);
	for (size_t done = 0; done < r->b.len;) {
		ssize_t w = pwrite(cat->witness, r->b.p + done, r->b.len - done, off + (off_t)done);
		if (w <= 0) {
			jr_cancel(cat); /* and its checksum would not match */
			return false;
		}
		done += (size_t)w;
	}
	return true;
}

/*
 * After a group's commit failed to write, commits each of its requests on
 * its own: one request too big for the disk must not fail the small ones
 * (a publish, a deletion) that rode with it.
 */
static void run_each(struct sl_catalog *cat, struct wreq *group)
{
	for (struct wreq *r = group, *next; r; r = next) {
		next = r->next;
		if (r->skip)
			continue;
		r->next = NULL;
		run_group(cat, r);
		r->next = next;
	}
}

/* A flush failed: nothing lands from here until a remount. */
static void flush_failed(struct sl_catalog *cat, int rc)
{
	if (!cat->failed) {
		sl_log(SL_LOG_ERR, "catalog flush failed (%s): landing stops until a remount",
		       strerror(rc));
		cat->failed = rc;
	}
}

/*
 * Runs one group of requests in one transaction. A request that fails on its
 * own is dropped and the group re-run without it; a full map grows and the
 * whole group re-runs; a commit that fails to write is retried request by
 * request.
 */
static void run_group(struct sl_catalog *cat, struct wreq *group)
{
	struct sl_txn t = {.cat = cat, .write = true};
	bool hook = cat->group_hook != NULL;
	int rc;

	for (struct wreq *r = group; r; r = r->next)
		r->skip = false;
	for (;;) {
		struct wreq *failed = NULL;
		bool full = false;

		pthread_rwlock_rdlock(&cat->map_lock);
		rc = mdb_txn_begin(cat->env, NULL, 0, &t.txn);
		t.asc = NULL;
		t.redo = NULL;
		if (in_commit_thread && cat->jr_ok) {
			sl_redo_reset(&cat->redo, cat->jr_limit);
			t.redo = &cat->redo;
		}
		if (rc) {
			pthread_rwlock_unlock(&cat->map_lock);
			rc = map_rc(rc);
			break;
		}
		for (struct wreq *r = group; r; r = r->next) {
			if (r->skip)
				continue;
			r->rc = r->fn(&t, r->arg);
			if (r->rc == SL_EMAPFULL) {
				full = true;
				break;
			}
			if (r->rc) {
				failed = r;
				break;
			}
		}
		if (!full && !failed && hook) {
			rc = cat->group_hook(&t, cat->hook_ctx);
			if (rc && rc != SL_EMAPFULL) {
				/* counters are best effort: commit without them */
				mdb_txn_abort(t.txn);
				pthread_rwlock_unlock(&cat->map_lock);
				hook = false;
				continue;
			}
			full = rc == SL_EMAPFULL;
		}
		if (full || failed) {
			mdb_txn_abort(t.txn);
			pthread_rwlock_unlock(&cat->map_lock);
			if (full)
				grow_map(cat);
			else
				failed->skip = true;
			continue;
		}
		SL_FAULT("catalog.before_commit");
		int injected = SL_FAULT_ERR("catalog.commit");
		if (injected) {
			mdb_txn_abort(t.txn); /* as a commit that failed to reach the disk */
			pthread_rwlock_unlock(&cat->map_lock);
			rc = injected;
			break;
		}
		bool journaled = t.redo && jr_write(cat, &t);
		/* "catalog.sync" here: LMDB's flush, the only one of a journaled commit, failed */
		int lost = journaled ? SL_FAULT_ERR("catalog.sync") : 0;
		if (lost) {
			mdb_txn_abort(t.txn);
			pthread_rwlock_unlock(&cat->map_lock);
			jr_cancel(cat);
			flush_failed(cat, lost);
			rc = lost;
			break;
		}
		rc = mdb_txn_commit(t.txn);
		pthread_rwlock_unlock(&cat->map_lock);
		if (journaled && rc)
			jr_cancel(cat); /* the next record goes to the same slot */
		else if (journaled)
			cat->jr_slot ^= 1;
		if (rc == 0 && in_commit_thread)
			cat->tail_journaled = journaled;
		if (rc == MDB_MAP_FULL) {
			grow_map(cat);
			continue;
		}
		rc = commit_errno(cat, rc);
		if (rc == ENOSPC && all_free(group) && release_reserve(cat))
			continue;
		if (rc && group->next) {
			size_t live = 0;
			for (struct wreq *r = group; r; r = r->next)
				live += !r->skip;
			if (live > 1) {
				run_each(cat, group);
				return;
			}
		}
		SL_FAULT("catalog.after_commit");
		break;
	}
	for (struct wreq *r = group; r; r = r->next)
		if (!r->skip)
			r->rc = rc;
}

static void finish(struct sl_catalog *cat, struct wreq *group)
{
	struct wreq *async = NULL, *next;

	if (!group)
		return;

	/* a waiter's request lives on its stack: touch none after signalling */
	pthread_mutex_lock(&cat->q_mu);
	cat->commits++;
	for (struct wreq *r = group; r; r = next) {
		next = r->next;
		if (r->done) {
			r->next = async;
			async = r;
		} else {
			r->finished = true;
		}
	}
	pthread_cond_broadcast(&cat->done_cv);
	pthread_mutex_unlock(&cat->q_mu);
	for (struct wreq *r = async; r; r = next) {
		next = r->next;
		r->done(r->arg, r->rc);
		free(r);
	}
}

/*
 * The commit thread. Lazy requests (publishes) do not wake it: they join the
 * next group, or commit on their own once LAZY_NS passed with no other work.
 */
static uint64_t last_txnid(struct sl_catalog *cat)
{
	MDB_envinfo info;
	mdb_env_info(cat->env, &info);
	return info.me_last_txnid;
}

/*
 * The pipelined commit. While the commit thread runs, the catalog runs with
 * MDB_NOMETASYNC: a commit writes its pages, flushes them, then writes its
 * meta page without a flush. That meta page becomes durable with the next
 * commit's data flush (LMDB writes the meta page of commit N before commit
 * N+1's pages, and fdatasync covers the whole file), or with a flush of its
 * own when no commit follows (idle). A group's requests are finished (their
 * callers acknowledge, delete, free) only then: *pending is the group
 * committed last, not yet durable.
 *
 * The flushes of our own are made on cat->witness, a second descriptor of
 * data.mdb: a writeback error is reported once per descriptor, so after a
 * commit whose flush failed, an fdatasync on LMDB's descriptor could report
 * success over lost pages; the witness reports every error since its own
 * last flush.
 */
static int durable_sync(struct sl_catalog *cat)
{
	SL_FAULT("catalog.before_sync");
	int rc = SL_FAULT_ERR("catalog.sync");
	if (cat->unsafe == UNSAFE_NOSYNC)
		return 0;
	if (!rc && fdatasync(cat->witness))
		rc = errno;
	if (rc)
		flush_failed(cat, rc);
	return rc;
}

/* A flush failed: every request that the catalog holds but not durably fails. */
static void fail_committed(struct wreq *group, int rc)
{
	for (struct wreq *r = group; r; r = r->next)
		if (r->rc == 0)
			r->rc = rc;
}

/*
 * Keeps written zeros ahead of the pages LMDB uses. A commit that writes
 * past data.mdb's end grows the file, and on ext4 (and most file systems)
 * its fdatasync must then also commit the journal (the new size and the
 * blocks), which roughly doubles the cost of the flush that every landing
 * waits for. Blocks that were written once are overwritten in place, and
 * their flush is only the data's. So while commits are small (landing),
 * once the file's end comes within half a chunk of the last page in use,
 * it is extended to a whole chunk past that page (an eighth of the pages
 * in use, ZERO_MIN to ZERO_MAX), with zeros written in the commit thread
 * just before an idle flush, which makes them durable too.
 * Pages past the last one in use are referenced by neither meta page, so
 * what they hold is never read, after a crash either. A big commit (the
 * engine's state) grows the file itself, and no chunk follows it at once.
 * It saves time, never space: no chunk is written while the disk has less
 * than ZERO_ROOM chunks free, and a write that fails anyway (ENOSPC) is
 * cut back and zero-ahead stops for the life of the mount.
 */
#define ZERO_MIN (4ull << 20)
#define ZERO_MAX (8ull << 20) /* a flush waits for a chunk: keep it short on slow disks */
#define ZERO_ROOM 64 /* chunks of free space, at least, for a chunk to be written */

static void zero_ahead(struct sl_catalog *cat)
{
	static const char zeros[1 << 16];
	uint64_t used;
	size_t mapsize;
	struct stat sb;

	if (!cat->zero_ahead || in_use(cat, &used, &mapsize) || fstat(cat->witness, &sb))
		return;
	uint64_t grew = used > cat->used_seen ? used - cat->used_seen : 0;
	uint64_t chunk = used / 8 < ZERO_MIN ? ZERO_MIN : used / 8 > ZERO_MAX ? ZERO_MAX : used / 8;
	uint64_t size = (uint64_t)sb.st_size;
	cat->used_seen = used;
	if (size >= used + chunk / 2 || grew >= chunk / 4)
		return; /* half a chunk ahead still, or a big commit grew it itself */
	struct statvfs vfs;
	if (fstatvfs(cat->witness, &vfs) || (uint64_t)vfs.f_bavail * vfs.f_frsize < ZERO_ROOM * chunk)
		return; /* a small or nearly full disk: its space is worth more */
	uint64_t from = size > used ? size : used, to = used + chunk;
	for (uint64_t off = from; off < to;) {
		size_t n = to - off < sizeof(zeros) ? (size_t)(to - off) : sizeof(zeros);
		int fe = off > from ? SL_FAULT_ERR("catalog.zero_ahead") : 0;
		ssize_t w = fe ? -1 : pwrite(cat->witness, zeros, n, (off_t)off);
		if (w <= 0) {
			int e = fe ? fe : w < 0 ? errno : EIO;
			/* if the cut fails, zeros past the last page stay: harmless */
			(void)!ftruncate(cat->witness, (off_t)from);
			cat->zero_ahead = false;
			sl_log(SL_LOG_WARNING, "catalog: writing ahead of its pages failed (%s): "
			       "landing flushes cost a journal commit more from now on", strerror(e));
			return;
		}
		off += (uint64_t)w;
	}
}

static void make_durable(struct sl_catalog *cat, struct wreq **pending)
{
	if (!*pending)
		return;
	zero_ahead(cat); /* before the flush, which makes the zeros durable too */
	int rc = durable_sync(cat);
	if (rc)
		fail_committed(*pending, rc);
	finish(cat, *pending);
	*pending = NULL;
}

static void run_pipelined(struct sl_catalog *cat, struct wreq *group, struct wreq **pending)
{
	if (cat->failed) {
		for (struct wreq *r = group; r; r = r->next)
			r->rc = cat->failed;
		finish(cat, group);
		return;
	}
	if (cat->jr_ok)
		zero_ahead(cat); /* no idle flush comes to do it: this group's flush will */
	uint64_t before = last_txnid(cat);
	cat->tail_journaled = false;
	run_group(cat, group);
	bool committed = last_txnid(cat) != before, commit_failed = false;
	for (struct wreq *r = group; r; r = r->next)
		commit_failed |= !r->skip && r->rc != 0;
	/* a fault build's one-flush: its pages and meta page get one flush, below */
	bool ok = committed && !commit_failed && cat->unsafe != UNSAFE_ONE_FLUSH;
	if (ok && cat->unsafe == UNSAFE_EARLY_ACK) {
		finish(cat, *pending);
		*pending = NULL;
		finish(cat, group);
		return;
	}
	if (ok && cat->tail_journaled) {
		/* its data flush carried its record and the previous meta page: durable */
		cat->meta_behind = true;
		finish(cat, *pending);
		*pending = NULL;
		finish(cat, group);
		return;
	}
	if (ok) {
		/* this group's data flush made the previous group's meta page durable */
		cat->meta_behind = false;
		finish(cat, *pending);
		*pending = group;
		return;
	}
	/*
	 * Nothing was committed (nothing flushed), or a commit failed (its
	 * flush may have failed), or one-flush: flush on the witness, which
	 * says whether what was committed before is durable.
	 */
	if (*pending || committed) {
		int rc = durable_sync(cat);
		if (rc) {
			if (*pending)
				fail_committed(*pending, rc);
			fail_committed(group, rc);
		}
	}
	finish(cat, *pending);
	*pending = NULL;
	finish(cat, group);
}

static void *commit_main(void *arg)
{
	struct sl_catalog *cat = arg;
	struct wreq *pending = NULL;

	in_commit_thread = true;
	pthread_mutex_lock(&cat->q_mu);
	for (;;) {
		bool timed_out = false;
		if (pending && !cat->head) {
			/* idle: no commit comes to carry the meta page, so flush it */
			pthread_mutex_unlock(&cat->q_mu);
			make_durable(cat, &pending);
			pthread_mutex_lock(&cat->q_mu);
			continue;
		}
		while (!cat->head && !cat->stop && !timed_out) {
			if (!cat->lazy_head) {
				pthread_cond_wait(&cat->q_cv, &cat->q_mu);
				continue;
			}
			timed_out = pthread_cond_timedwait(&cat->q_cv, &cat->q_mu,
							   &cat->lazy_deadline) == ETIMEDOUT;
		}
		if (!cat->head && !cat->lazy_head)
			break; /* stopping, nothing left */
		struct wreq *group = cat->head;
		if (cat->lazy_head) {
			/* lazy ones go last: a waiting record never waits behind them */
			if (group)
				cat->tail->next = cat->lazy_head;
			else
				group = cat->lazy_head;
		}
		cat->head = cat->tail = cat->lazy_head = cat->lazy_tail = NULL;
		pthread_mutex_unlock(&cat->q_mu);
		if (cat->pipelined) {
			run_pipelined(cat, group, &pending);
		} else {
			run_group(cat, group);
			finish(cat, group);
		}
		pthread_mutex_lock(&cat->q_mu);
	}
	pthread_mutex_unlock(&cat->q_mu);
	make_durable(cat, &pending);
	if (cat->meta_behind && durable_sync(cat) == 0)
		cat->meta_behind = false; /* a clean stop needs no journal at the next start */
	pthread_mutex_lock(&cat->q_mu);
	cat->running = false;
	pthread_mutex_unlock(&cat->q_mu);
	return NULL;
}

/*
 * Queues r, on the lazy list when lazy (its first entry starts the timer);
 * returns false when no commit thread runs (the caller commits inline).
 */
static bool enqueue(struct sl_catalog *cat, struct wreq *r, bool lazy)
{
	struct wreq **head = lazy ? &cat->lazy_head : &cat->head;
	struct wreq **tail = lazy ? &cat->lazy_tail : &cat->tail;

	pthread_mutex_lock(&cat->q_mu);
	if (!cat->running || cat->stop) {
		pthread_mutex_unlock(&cat->q_mu);
		return false;
	}
	r->next = NULL;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
	if (lazy && *head == r) {
		clock_gettime(CLOCK_REALTIME, &cat->lazy_deadline);
		cat->lazy_deadline.tv_nsec += LAZY_NS;
		if (cat->lazy_deadline.tv_nsec >= 1000000000) {
			cat->lazy_deadline.tv_sec++;
			cat->lazy_deadline.tv_nsec -= 1000000000;
		}
	}
	if (!lazy || *head == r)
		pthread_cond_signal(&cat->q_cv); /* work, or a timer to start */
	pthread_mutex_unlock(&cat->q_mu);
	return true;
}

static void run_inline(struct sl_catalog *cat, struct wreq *r)
{
	pthread_mutex_lock(&cat->inline_mu);
	r->next = NULL;
	uint64_t before = last_txnid(cat);
	run_group(cat, r);
	/* while the thread stops, the env still skips the meta flush: do it */
	if (cat->pipelined && !r->rc && last_txnid(cat) != before)
		r->rc = durable_sync(cat);
	pthread_mutex_unlock(&cat->inline_mu);
	pthread_mutex_lock(&cat->q_mu);
	cat->commits++;
	pthread_mutex_unlock(&cat->q_mu);
}

/* Runs request r (on the caller's stack) in a group commit and waits for it. */
static int write_wait(struct sl_catalog *cat, struct wreq *r)
{
	if (cat->rdonly)
		return EROFS;
	if (!enqueue(cat, r, false)) {
		run_inline(cat, r);
		return r->rc;
	}
	pthread_mutex_lock(&cat->q_mu);
	while (!r->finished)
		pthread_cond_wait(&cat->done_cv, &cat->q_mu);
	pthread_mutex_unlock(&cat->q_mu);
	return r->rc;
}

int sl_catalog_write(struct sl_catalog *cat, sl_apply_fn fn, void *arg)
{
	return write_wait(cat, &(struct wreq){.fn = fn, .arg = arg});
}

int sl_catalog_write_freeing(struct sl_catalog *cat, sl_apply_fn fn, void *arg)
{
	return write_wait(cat, &(struct wreq){.fn = fn, .arg = arg, .frees = true});
}

static int write_async(struct sl_catalog *cat, sl_apply_fn fn, void *arg, sl_done_fn done,
		       bool lazy)
{
	struct wreq *r;

	if (cat->rdonly)
		return EROFS;
	r = calloc(1, sizeof(*r));
	if (!r)
		return ENOMEM;
	r->fn = fn;
	r->arg = arg;
	r->done = done;
	if (!enqueue(cat, r, lazy)) {
		run_inline(cat, r);
		done(arg, r->rc);
		free(r);
	}
	return 0;
}

int sl_catalog_write_async(struct sl_catalog *cat, sl_apply_fn fn, void *arg, sl_done_fn done)
{
	return write_async(cat, fn, arg, done, false);
}

int sl_catalog_write_lazy(struct sl_catalog *cat, sl_apply_fn fn, void *arg, sl_done_fn done)
{
	return write_async(cat, fn, arg, done, true);
}

int sl_catalog_next_id(struct sl_catalog *cat, uint64_t *id)
{
	int rc = 0;

	pthread_mutex_lock(&cat->id_mu);
	if (cat->id_next == cat->id_hi) {
		uint64_t live = cat->live_hook ? cat->live_hook(cat->hook_ctx) : UINT64_MAX;
		if (live > cat->id_next)
			live = cat->id_next;
		if (live > cat->settle_lo)
			cat->settle_lo = live;
		/* callers never hold a commit open, so a sync write is safe */
		rc = sl_catalog_write(cat, reserve_apply, cat);
		if (rc == 0)
			cat->id_hi += ID_RANGE;
	}
	if (rc == 0)
		*id = cat->id_next++;
	pthread_mutex_unlock(&cat->id_mu);
	return rc;
}

void sl_catalog_unsettled(struct sl_catalog *cat, uint64_t *lo, uint64_t *hi)
{
	*lo = cat->unsettled_lo;
	*hi = cat->unsettled_hi;
}

void sl_catalog_settle(struct sl_catalog *cat, uint64_t lo)
{
	pthread_mutex_lock(&cat->id_mu);
	if (lo > cat->id_next)
		lo = cat->id_next; /* ids not handed out yet stay unsettled */
	if (lo > cat->settle_lo)
		cat->settle_lo = lo;
	pthread_mutex_unlock(&cat->id_mu);
}

/* ---- tables ---- */

static int get(struct sl_txn *t, MDB_dbi dbi, void *k, size_t klen, MDB_val *v)
{
	MDB_val key = {klen, k};
	return map_rc(mdb_get(t->txn, dbi, &key, v));
}

static int put(struct sl_txn *t, MDB_dbi dbi, void *k, size_t klen, const void *v, size_t vlen)
{
	MDB_val key = {klen, k}, val = {vlen, (void *)v};
	if (!t->write)
		return EROFS;
	int rc = map_rc(mdb_put(t->txn, dbi, &key, &val, 0));
	if (rc == 0)
		redo_note(t, SL_REDO_PUT, dbi, k, klen, v, vlen);
	return rc;
}

static int del(struct sl_txn *t, MDB_dbi dbi, void *k, size_t klen)
{
	MDB_val key = {klen, k};
	int rc = map_rc(mdb_del(t->txn, dbi, &key, NULL));
	if (rc == 0)
		redo_note(t, SL_REDO_DEL, dbi, k, klen, NULL, 0);
	return rc == SL_NOTFOUND ? 0 : rc;
}

int sl_txn_inode_get(struct sl_txn *t, uint64_t id, struct sl_inode *o)
{
	unsigned char k[8];
	MDB_val v;
	const unsigned char *p;
	int rc;

	put_be64(k, id);
	rc = get(t, t->cat->inode, k, 8, &v);
	if (rc)
		return rc;
	p = v.mv_data;
	size_t hdr = v.mv_size > 0 && p[0] == 1 ? INODE_HDR_V1 : INODE_HDR;
	if (v.mv_size <= hdr || v.mv_size > hdr + SL_NAME_MAX || (p[0] != 1 && p[0] != INODE_VERSION))
		return SL_ECORRUPT;
	o->id = id;
	o->kind = p[1];
	o->state = p[2];
	o->storage = p[3];
	memcpy(&o->mode, p + 4, 4);
	memcpy(&o->uid, p + 8, 4);
	memcpy(&o->gid, p + 12, 4);
	memcpy(&o->parent, p + 16, 8);
	memcpy(&o->mtime_ns, p + 24, 8);
	memcpy(&o->ctime_ns, p + 32, 8);
	memcpy(&o->size, p + 40, 8);
	memcpy(&o->landed_ns, p + 48, 8);
	memcpy(&o->seq, p + 56, 8);
	if (hdr == INODE_HDR)
		memcpy(&o->atime_ns, p + 64, 8);
	else
		o->atime_ns = o->mtime_ns;
	memcpy(o->name, p + hdr, v.mv_size - hdr);
	o->name[v.mv_size - hdr] = 0;
	return 0;
}

int sl_txn_inode_put(struct sl_txn *t, const struct sl_inode *o)
{
	unsigned char k[8], p[INODE_HDR + SL_NAME_MAX];
	size_t n = strlen(o->name);

	if (n == 0 || n > SL_NAME_MAX)
		return ENAMETOOLONG;
	put_be64(k, o->id);
	p[0] = INODE_VERSION;
	p[1] = o->kind;
	p[2] = o->state;
	p[3] = o->storage;
	memcpy(p + 4, &o->mode, 4);
	memcpy(p + 8, &o->uid, 4);
	memcpy(p + 12, &o->gid, 4);
	memcpy(p + 16, &o->parent, 8);
	memcpy(p + 24, &o->mtime_ns, 8);
	memcpy(p + 32, &o->ctime_ns, 8);
	memcpy(p + 40, &o->size, 8);
	memcpy(p + 48, &o->landed_ns, 8);
	memcpy(p + 56, &o->seq, 8);
	memcpy(p + 64, &o->atime_ns, 8);
	memcpy(p + INODE_HDR, o->name, n);
	return put(t, t->cat->inode, k, 8, p, INODE_HDR + n);
}

int sl_txn_inode_del(struct sl_txn *t, uint64_t id)
{
	unsigned char k[8];
	put_be64(k, id);
	return del(t, t->cat->inode, k, 8);
}

static size_t dirent_key(unsigned char *k, uint64_t parent, const char *name)
{
	size_t n = strnlen(name, SL_NAME_MAX + 1);
	put_be64(k, parent);
	memcpy(k + 8, name, n > SL_NAME_MAX ? SL_NAME_MAX : n);
	return 8 + (n > SL_NAME_MAX ? SL_NAME_MAX : n);
}

int sl_txn_dirent_get(struct sl_txn *t, uint64_t parent, const char *name, uint64_t *id)
{
	unsigned char k[8 + SL_NAME_MAX];
	MDB_val v;
	int rc;

	if (strlen(name) > SL_NAME_MAX)
		return SL_NOTFOUND;
	rc = get(t, t->cat->dirent, k, dirent_key(k, parent, name), &v);
	if (rc)
		return rc;
	if (v.mv_size != 8)
		return SL_ECORRUPT;
	memcpy(id, v.mv_data, 8);
	return 0;
}

int sl_txn_dirent_put(struct sl_txn *t, uint64_t parent, const char *name, uint64_t id)
{
	unsigned char k[8 + SL_NAME_MAX];
	if (strlen(name) > SL_NAME_MAX)
		return ENAMETOOLONG;
	return put(t, t->cat->dirent, k, dirent_key(k, parent, name), &id, 8);
}

int sl_txn_dirent_del(struct sl_txn *t, uint64_t parent, const char *name)
{
	unsigned char k[8 + SL_NAME_MAX];
	return del(t, t->cat->dirent, k, dirent_key(k, parent, name));
}

int sl_txn_dirent_each(struct sl_txn *t, uint64_t parent, const char *after,
		       int (*fn)(void *ctx, const char *name, uint64_t id), void *ctx)
{
	unsigned char k[8 + SL_NAME_MAX];
	char name[SL_NAME_MAX + 1];
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, stop = 0;

	rc = mdb_cursor_open(t->txn, t->cat->dirent, &cur);
	if (rc)
		return map_rc(rc);
	key.mv_size = after ? dirent_key(k, parent, after) : 8;
	put_be64(k, parent);
	key.mv_data = k;
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	if (rc == 0 && after && key.mv_size == 8 + strlen(after) &&
	    !memcmp(key.mv_data, k, key.mv_size))
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	while (rc == 0) {
		const unsigned char *p = key.mv_data;
		uint64_t id;
		if (key.mv_size < 9 || get_be64(p) != parent)
			break;
		if (val.mv_size != 8 || key.mv_size > 8 + SL_NAME_MAX) {
			stop = SL_ECORRUPT;
			break;
		}
		memcpy(name, p + 8, key.mv_size - 8);
		name[key.mv_size - 8] = 0;
		memcpy(&id, val.mv_data, 8);
		stop = fn(ctx, name, id);
		if (stop)
			break;
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (stop)
		return stop;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : map_rc(rc);
}

int sl_txn_data_get(struct sl_txn *t, uint64_t id, const void **data, size_t *len)
{
	unsigned char k[8];
	MDB_val v;
	int rc;

	put_be64(k, id);
	rc = get(t, t->cat->data, k, 8, &v);
	if (rc)
		return rc;
	*data = v.mv_data;
	*len = v.mv_size;
	return 0;
}

int sl_txn_data_put(struct sl_txn *t, uint64_t id, const void *data, size_t len)
{
	unsigned char k[8];
	put_be64(k, id);
	return put(t, t->cat->data, k, 8, data, len);
}

int sl_txn_data_del(struct sl_txn *t, uint64_t id)
{
	unsigned char k[8];
	put_be64(k, id);
	return del(t, t->cat->data, k, 8);
}

int sl_txn_pending_put(struct sl_txn *t, uint64_t id)
{
	unsigned char k[8];
	put_be64(k, id);
	return put(t, t->cat->pending, k, 8, "", 0);
}

int sl_txn_pending_del(struct sl_txn *t, uint64_t id)
{
	unsigned char k[8];
	put_be64(k, id);
	return del(t, t->cat->pending, k, 8);
}

/*
 * Calls fn for each entry of dbi whose key starts with prefix (all when plen
 * is 0), in key order; fn returns non-zero to stop, and that is returned.
 * Every forward walk over a table goes through here.
 */
static int walk_from(struct sl_txn *t, MDB_dbi dbi, const void *prefix, size_t plen,
		     const void *from, size_t flen,
		     int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v), void *ctx)
{
	MDB_cursor *cur;
	MDB_val key = {flen, (void *)from}, val;
	int rc, stop = 0;

	rc = mdb_cursor_open(t->txn, dbi, &cur);
	if (rc)
		return map_rc(rc);
	for (rc = mdb_cursor_get(cur, &key, &val, flen ? MDB_SET_RANGE : MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (plen && (key.mv_size < plen || memcmp(key.mv_data, prefix, plen)))
			break;
		if ((stop = fn(ctx, &key, &val)))
			break;
	}
	mdb_cursor_close(cur);
	if (stop)
		return stop;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : map_rc(rc);
}

static int walk(struct sl_txn *t, MDB_dbi dbi, const void *prefix, size_t plen,
		int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v), void *ctx)
{
	return walk_from(t, dbi, prefix, plen, prefix, plen, fn, ctx);
}

struct pending_walk {
	int (*fn)(void *ctx, uint64_t id);
	void *ctx;
};

static int pending_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct pending_walk *w = ctx;
	(void)v;
	if (k->mv_size != 8)
		return SL_ECORRUPT;
	return w->fn(w->ctx, get_be64(k->mv_data));
}

int sl_txn_pending_each(struct sl_txn *t, int (*fn)(void *ctx, uint64_t id), void *ctx)
{
	struct pending_walk w = {fn, ctx};
	return walk(t, t->cat->pending, NULL, 0, pending_cb, &w);
}

int sl_txn_landed_put(struct sl_txn *t, uint64_t seq, uint64_t id)
{
	unsigned char k[8];
	put_be64(k, seq);
	return put(t, t->cat->landed, k, 8, &id, 8);
}

int sl_txn_landed_del(struct sl_txn *t, uint64_t seq)
{
	unsigned char k[8];
	put_be64(k, seq);
	return del(t, t->cat->landed, k, 8);
}

int sl_txn_meta_get(struct sl_txn *t, const char *key, uint64_t *val)
{
	MDB_val v;
	int rc = get(t, t->cat->meta, (void *)key, strlen(key), &v);
	if (rc == SL_NOTFOUND) {
		*val = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size != 8)
		return SL_ECORRUPT;
	memcpy(val, v.mv_data, 8);
	return 0;
}

int sl_txn_meta_put(struct sl_txn *t, const char *key, uint64_t val)
{
	return put(t, t->cat->meta, (void *)key, strlen(key), &val, 8);
}

int sl_txn_meta_add(struct sl_txn *t, const char *key, int64_t delta)
{
	uint64_t v;
	int rc = sl_txn_meta_get(t, key, &v);
	if (rc)
		return rc;
	return sl_txn_meta_put(t, key, v + (uint64_t)delta);
}

struct meta_walk {
	int (*fn)(void *ctx, const char *key, uint64_t val);
	void *ctx;
};

static int meta_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct meta_walk *w = ctx;
	char name[128];
	uint64_t val;

	if (v->mv_size != 8 || k->mv_size >= sizeof(name))
		return 0;
	memcpy(name, k->mv_data, k->mv_size);
	name[k->mv_size] = 0;
	memcpy(&val, v->mv_data, 8);
	return w->fn(w->ctx, name, val);
}

int sl_txn_meta_each(struct sl_txn *t, const char *prefix,
		     int (*fn)(void *ctx, const char *key, uint64_t val), void *ctx)
{
	struct meta_walk w = {fn, ctx};
	return walk(t, t->cat->meta, prefix, strlen(prefix), meta_cb, &w);
}

/* ---- engine tables ---- */

int sl_txn_get(struct sl_txn *t, enum sl_table tb, const void *key, size_t klen,
	       const void **val, size_t *vlen)
{
	MDB_val v;
	int rc;

	if (!t->cat->tables[tb])
		return SL_NOTFOUND;
	rc = get(t, t->cat->tables[tb], (void *)key, klen, &v);
	if (rc == 0) {
		*val = v.mv_data;
		*vlen = v.mv_size;
	}
	return rc;
}

int sl_txn_put(struct sl_txn *t, enum sl_table tb, const void *key, size_t klen,
	       const void *val, size_t vlen)
{
	return put(t, t->cat->tables[tb], (void *)key, klen, val, vlen);
}

int sl_txn_put_ascending(struct sl_txn *t, enum sl_table tb, const void *key, size_t klen,
			 const void *val, size_t vlen)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	MDB_dbi dbi = t->cat->tables[tb];
	int rc;

	if (!t->write)
		return EROFS;
	/* one cursor for the run: after an append it sits at the table's end */
	if (!t->asc || t->asc_dbi != dbi) {
		if ((rc = mdb_cursor_open(t->txn, dbi, &t->asc)))
			return map_rc(rc);
		t->asc_dbi = dbi;
	}
	/* appending after the table's last key skips the search and fills pages */
	rc = mdb_cursor_put(t->asc, &k, &v, MDB_APPEND);
	if (rc == MDB_KEYEXIST)
		rc = mdb_cursor_put(t->asc, &k, &v, 0);
	if (rc == 0)
		redo_note(t, SL_REDO_PUT, dbi, key, klen, val, vlen);
	return map_rc(rc);
}

int sl_txn_del(struct sl_txn *t, enum sl_table tb, const void *key, size_t klen)
{
	return del(t, t->cat->tables[tb], (void *)key, klen);
}

struct table_walk {
	int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen);
	void *ctx;
};

static int table_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct table_walk *w = ctx;
	return w->fn(w->ctx, k->mv_data, k->mv_size, v->mv_data, v->mv_size);
}

int sl_txn_each(struct sl_txn *t, enum sl_table tb, const void *prefix, size_t plen,
		int (*fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen),
		void *ctx)
{
	struct table_walk w = {fn, ctx};
	if (!t->cat->tables[tb])
		return 0;
	return walk(t, t->cat->tables[tb], prefix, plen, table_cb, &w);
}

int sl_txn_each_from(struct sl_txn *t, enum sl_table tb, const void *prefix, size_t plen,
		     const void *from, size_t flen,
		     int (*fn)(void *ctx, const void *key, size_t klen, const void *val,
			       size_t vlen),
		     void *ctx)
{
	struct table_walk w = {fn, ctx};
	if (!t->cat->tables[tb])
		return 0;
	if (flen < plen || memcmp(from, prefix, plen))
		return EINVAL;
	return walk_from(t, t->cat->tables[tb], prefix, plen, from, flen, table_cb, &w);
}

struct landed_walk {
	int (*fn)(void *ctx, uint64_t seq, uint64_t id);
	void *ctx;
};

static int landed_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct landed_walk *w = ctx;
	uint64_t id;
	if (k->mv_size != 8 || v->mv_size != 8)
		return SL_ECORRUPT;
	memcpy(&id, v->mv_data, 8);
	return w->fn(w->ctx, get_be64(k->mv_data), id);
}

int sl_txn_landed_each(struct sl_txn *t, int (*fn)(void *ctx, uint64_t seq, uint64_t id),
		       void *ctx)
{
	struct landed_walk w = {fn, ctx};
	return walk(t, t->cat->landed, NULL, 0, landed_cb, &w);
}

int sl_txn_each_rev(struct sl_txn *t, enum sl_table tb, const void *prefix, size_t plen,
		    int (*fn)(void *ctx, const void *key, size_t klen, const void *val,
			      size_t vlen),
		    void *ctx)
{
	unsigned char next[64];
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, stop = 0;
	size_t n = plen;

	if (!t->cat->tables[tb])
		return 0;
	if (plen > sizeof(next))
		return EINVAL;
	rc = mdb_cursor_open(t->txn, t->cat->tables[tb], &cur);
	if (rc)
		return map_rc(rc);
	/* the first key after every key with this prefix: the prefix plus one */
	memcpy(next, prefix, plen);
	while (n > 0 && next[n - 1] == 0xff)
		n--;
	if (n > 0) {
		next[n - 1]++;
		key.mv_size = n;
		key.mv_data = next;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
		rc = rc == 0 ? mdb_cursor_get(cur, &key, &val, MDB_PREV)
			     : mdb_cursor_get(cur, &key, &val, MDB_LAST);
	} else {
		rc = mdb_cursor_get(cur, &key, &val, MDB_LAST);
	}
	for (; rc == 0; rc = mdb_cursor_get(cur, &key, &val, MDB_PREV)) {
		if (key.mv_size < plen || memcmp(key.mv_data, prefix, plen))
			break;
		if ((stop = fn(ctx, key.mv_data, key.mv_size, val.mv_data, val.mv_size)))
			break;
	}
	mdb_cursor_close(cur);
	if (stop)
		return stop;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : map_rc(rc);
}

struct inode_walk {
	struct sl_txn *t;
	int (*fn)(void *ctx, const struct sl_inode *i);
	void *ctx;
};

static int inode_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct inode_walk *w = ctx;
	struct sl_inode i;
	int rc;
	(void)v;
	if (k->mv_size != 8)
		return SL_ECORRUPT;
	if ((rc = sl_txn_inode_get(w->t, get_be64(k->mv_data), &i)))
		return rc;
	return w->fn(w->ctx, &i);
}

int sl_txn_inode_each(struct sl_txn *t, int (*fn)(void *ctx, const struct sl_inode *i),
		      void *ctx)
{
	struct inode_walk w = {t, fn, ctx};
	return walk(t, t->cat->inode, NULL, 0, inode_cb, &w);
}

struct dirent_walk {
	int (*fn)(void *ctx, uint64_t parent, const char *name, uint64_t id);
	void *ctx;
};

static int dirent_cb(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct dirent_walk *w = ctx;
	char name[SL_NAME_MAX + 1];
	uint64_t id;

	if (k->mv_size < 9 || k->mv_size > 8 + SL_NAME_MAX || v->mv_size != 8)
		return SL_ECORRUPT;
	memcpy(name, (const char *)k->mv_data + 8, k->mv_size - 8);
	name[k->mv_size - 8] = 0;
	memcpy(&id, v->mv_data, 8);
	return w->fn(w->ctx, get_be64(k->mv_data), name, id);
}

int sl_txn_dirent_all(struct sl_txn *t,
		      int (*fn)(void *ctx, uint64_t parent, const char *name, uint64_t id),
		      void *ctx)
{
	struct dirent_walk w = {fn, ctx};
	return walk(t, t->cat->dirent, NULL, 0, dirent_cb, &w);
}
