/* SPDX-License-Identifier: MIT */
/*
 * The landing namespace's in-flight files: the node tables, what is durable
 * when (records), poisoning, publishing at RELEASE, and the counters.
 *
 * Locks, in the order they nest:
 *   l->op      rwlock. Exclusive for namespace changes that wait for a
 *              commit (rename, unlink, mkdir, rmdir, folder attributes);
 *              shared for records (FLUSH, fsync), creates and the
 *              publishing step of RELEASE. So a record's name cannot move
 *              under it, and concurrent records still share group commits.
 *              A FLUSH's record is queued under it shared and finishes on
 *              the commit thread (l->records_queued): the exclusive side
 *              (land_op_excl) also waits for those.
 *   record lock (land_rec_lock) serializes the records of one file; taken
 *              by one thread, it may be let go by another (a FLUSH's
 *              record, finished on the commit thread).
 *   l->mu      the node tables, and each node's naming and landing fields.
 *              Never held across a commit wait; commit callbacks take it.
 *   n->dmu     one node's bytes, size, attributes and record version.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "land_int.h"
#include "log.h"
#include "qindex.h"
#include "temp.h"

#define NBUCKET LAND_NBUCKET

int64_t land_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int64_t land_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Prometheus's default buckets, made finer below 5 ms where a commit usually lands */
const uint32_t sl_land_latency_bounds_us[SL_LAND_LAT_NBUCKET - 1] = {
	250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,
};

void land_latency_observe(struct sl_land *l, int64_t start)
{
	int64_t ns = land_mono_ns() - start;
	uint64_t us = ns > 0 ? (uint64_t)ns / 1000 : 0;
	size_t b = 0;

	while (b < SL_LAND_LAT_NBUCKET - 1 && us > sl_land_latency_bounds_us[b])
		b++;
	atomic_fetch_add(&l->latency[b], 1);
	atomic_fetch_add(&l->latency[SL_LAND_LAT_NBUCKET], ns > 0 ? (uint64_t)ns : 0);
}

void sl_land_latency(struct sl_land *l, struct sl_land_latency *out)
{
	for (size_t b = 0; b < SL_LAND_LAT_NBUCKET; b++)
		out->count[b] = atomic_load(&l->latency[b]);
	out->sum_ns = atomic_load(&l->latency[SL_LAND_LAT_NBUCKET]);
}

static size_t name_hash(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h % NBUCKET;
}

struct node *land_find_id(struct sl_land *l, uint64_t id)
{
	for (struct node *n = l->by_id[id % NBUCKET]; n; n = n->id_next)
		if (n->id == id)
			return n;
	return NULL;
}

struct node *land_find_name(struct sl_land *l, uint64_t parent, const char *name)
{
	for (struct node *n = l->by_name[name_hash(parent, name)]; n; n = n->name_next)
		if (n->parent == parent && !strcmp(n->name, name))
			return n;
	return NULL;
}

void land_link_name(struct sl_land *l, struct node *n)
{
	struct node **b = &l->by_name[name_hash(n->parent, n->name)];
	n->name_next = *b;
	*b = n;
}

void land_unlink_name(struct sl_land *l, struct node *n)
{
	for (struct node **p = &l->by_name[name_hash(n->parent, n->name)]; *p; p = &(*p)->name_next)
		if (*p == n) {
			*p = n->name_next;
			return;
		}
}

static void unlink_id(struct sl_land *l, struct node *n)
{
	if (!n->in_id_table)
		return;
	for (struct node **p = &l->by_id[n->id % NBUCKET]; *p; p = &(*p)->id_next)
		if (*p == n) {
			*p = n->id_next;
			break;
		}
	n->in_id_table = false;
}

void land_free_node(struct sl_land *l, struct node *n)
{
	if (n->fd >= 0) {
		close(n->fd);
		if (!n->keep_blob)
			sl_blob_unlink(l->blobs, n->id);
	}
	free(n->buf);
	pthread_mutex_destroy(&n->dmu);
	pthread_cond_destroy(&n->rec_cv);
	free(n);
}

/* Drops a reference; l->mu held. Returns the node to free, or NULL. */
static struct node *unref_locked(struct sl_land *l, struct node *n)
{
	if (--n->refs > 0)
		return NULL;
	unlink_id(l, n);
	return n;
}

void land_unref(struct sl_land *l, struct node *n)
{
	pthread_mutex_lock(&l->mu);
	struct node *dead = unref_locked(l, n);
	pthread_mutex_unlock(&l->mu);
	if (dead)
		land_free_node(l, dead);
}

/*
 * Takes n's name out of in/; l->mu held. A node that leaves without landing
 * stops counting as in flight. Returns the node to free, or NULL.
 */
struct node *land_unname_locked(struct sl_land *l, struct node *n)
{
	if (!n->named)
		return NULL;
	land_unlink_name(l, n);
	n->named = false;
	atomic_fetch_sub(l->in_flight, 1);
	if (n->landed)
		unlink_id(l, n);
	return unref_locked(l, n);
}

static int noop_apply(struct sl_txn *t, void *arg)
{
	(void)t, (void)arg;
	return 0;
}

int land_commit_now(struct sl_land *l)
{
	return sl_catalog_write(l->cat, noop_apply, NULL);
}

void land_test_gap(void)
{
	size_t us = SL_FAULT_SIZE("land.race_gap_us", 0);
	if (us)
		usleep((useconds_t)us);
}

/* Counts a refusal; the next group commit takes it. */
static bool count_refused(struct sl_land *l, int err)
{
	if (err <= 0 || err >= SL_ERRNO_MAX)
		return false;
	pthread_mutex_lock(&l->mu);
	l->refused[err]++;
	l->counters_dirty = true;
	pthread_mutex_unlock(&l->mu);
	return true;
}

void sl_land_refused(struct sl_land *l, int err)
{
	/*
	 * Refusals are rare: commit the counter before answering, so that
	 * `sluice status` agrees with status/landing.json.
	 */
	if (count_refused(l, err))
		land_commit_now(l);
}

int land_refuse(struct sl_land *l, int err)
{
	sl_land_refused(l, err);
	return err;
}

void land_attr_of_node(struct node *n, struct sl_attr *a)
{
	a->id = n->id;
	pthread_mutex_lock(&n->dmu);
	a->mode = n->mode;
	a->uid = n->uid;
	a->gid = n->gid;
	a->size = n->size;
	a->mtime_ns = n->mtime_ns;
	a->ctime_ns = n->ctime_ns;
	a->atime_ns = n->atime_ns;
	pthread_mutex_unlock(&n->dmu);
	a->landed = false;
	/* without l->mu: an unlink may be on its way, as with any stat */
	a->unlinked = !n->named && !n->landed;
}

void land_attrs_to_inode(struct node *n, struct sl_inode *i)
{
	pthread_mutex_lock(&n->dmu);
	i->mode = n->mode;
	i->uid = n->uid;
	i->gid = n->gid;
	i->mtime_ns = n->mtime_ns;
	i->ctime_ns = n->ctime_ns;
	i->atime_ns = n->atime_ns;
	pthread_mutex_unlock(&n->dmu);
}

void land_attr_of_inode(const struct sl_inode *i, struct sl_attr *a)
{
	a->id = i->id;
	a->mode = i->mode;
	a->uid = i->uid;
	a->gid = i->gid;
	a->size = i->size;
	a->mtime_ns = i->mtime_ns;
	a->ctime_ns = i->ctime_ns;
	a->atime_ns = i->atime_ns;
	a->landed = i->kind == SL_KIND_FILE && i->state == SL_STATE_LANDED;
	a->unlinked = false;
}

bool land_valid_name(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= SL_NAME_MAX && !strchr(name, '/') && strcmp(name, ".") &&
	       strcmp(name, "..");
}

/* Whether parent/name is a temporary path: any component matches. */
int land_path_is_temp(struct sl_land *l, struct sl_txn *t, uint64_t parent, const char *name,
			bool *temp)
{
	struct sl_inode d;
	int depth = 0;

	if (sl_temp_match(l->temp, name)) {
		*temp = true;
		return 0;
	}
	while (parent != SL_ID_IN && parent != SL_ID_ARCHIVE && parent != SL_ID_OUT) {
		int rc = sl_txn_inode_get(t, parent, &d);
		if (rc)
			return rc == SL_NOTFOUND ? ENOENT : rc;
		if (++depth > 4096)
			return SL_ECORRUPT;
		if (sl_temp_match(l->temp, d.name)) {
			*temp = true;
			return 0;
		}
		parent = d.parent;
	}
	*temp = false;
	return 0;
}

int land_check_dir(struct sl_txn *t, uint64_t id)
{
	struct sl_inode d;
	int rc = sl_txn_inode_get(t, id, &d);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	return d.kind == SL_KIND_DIR ? 0 : ENOTDIR;
}

/* ---- catalog writes ---- */

/* Removes every trace of id from the catalog; a missing id is fine. */
int land_cancel(struct sl_txn *t, uint64_t id)
{
	struct sl_inode i;
	uint64_t cur;
	int rc = sl_txn_inode_get(t, id, &i);

	if (rc == SL_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (sl_txn_dirent_get(t, i.parent, i.name, &cur) == 0 && cur == id &&
	    (rc = sl_txn_dirent_del(t, i.parent, i.name)))
		return rc;
	if (i.state == SL_STATE_LANDED &&
	    ((rc = sl_txn_landed_del(t, i.seq)) || (rc = sl_qindex_forget(t, &i))))
		return rc;
	if ((rc = sl_txn_inode_del(t, id)) || (rc = sl_txn_data_del(t, id)))
		return rc;
	return sl_txn_pending_del(t, id);
}

int land_in_txn(struct sl_land *l, struct sl_txn *t, struct sl_inode *i)
{
	uint64_t seq;
	int rc;

	if ((rc = sl_txn_meta_get(t, "seq", &seq)))
		return rc;
	i->state = SL_STATE_LANDED;
	i->seq = seq + 1;
	if ((rc = sl_txn_meta_put(t, "seq", i->seq)) || (rc = sl_txn_landed_put(t, i->seq, i->id)) ||
	    (rc = sl_txn_meta_add(t, "files_landed", 1)) ||
	    (rc = sl_txn_meta_add(t, "bytes_landed", (int64_t)i->size)) ||
	    (rc = sl_txn_pending_del(t, i->id)))
		return rc;
	return sl_qindex_landed(l->sources, t, i);
}

int land_rec_apply(struct sl_txn *t, void *arg)
{
	struct rec *r = arg;
	struct sl_inode i = r->ino;
	uint64_t cur;
	int rc;

	/* a test build's slow disk: a group commit with records takes that long more */
	size_t delay_ms = SL_FAULT_SIZE("land.record_delay_ms", 0);
	if (delay_ms && r->l) {
		static _Atomic uint64_t last = UINT64_MAX; /* the group that waited last */
		uint64_t group = sl_catalog_commits(r->l->cat);
		if (atomic_exchange(&last, group) != group)
			usleep((useconds_t)(delay_ms * 1000));
	}
	if (r->excl && sl_txn_dirent_get(t, i.parent, i.name, &cur) == 0)
		return EEXIST;
	/* a chmod or utime that raced the record is in the node: take it now */
	if (r->n)
		land_attrs_to_inode(r->n, &i);
	if (r->cancel_id && (rc = land_cancel(t, r->cancel_id)))
		return rc;
	if (r->del_old && sl_txn_dirent_get(t, r->old_parent, r->old_name, &cur) == 0 &&
	    cur == i.id && (rc = sl_txn_dirent_del(t, r->old_parent, r->old_name)))
		return rc;
	if (r->land) {
		if ((rc = land_in_txn(r->l, t, &i)))
			return rc;
	} else {
		i.state = SL_STATE_RECORDED;
		if ((rc = sl_txn_pending_put(t, i.id)))
			return rc;
	}
	if ((rc = sl_txn_inode_put(t, &i)) || (rc = sl_txn_dirent_put(t, i.parent, i.name, i.id)))
		return rc;
	if (i.storage == SL_STORE_INLINE)
		return sl_txn_data_put(t, i.id, r->data ? r->data : "", i.size);
	return sl_txn_data_del(t, i.id);
}

int land_cancel_apply(struct sl_txn *t, void *arg)
{
	return land_cancel(t, *(uint64_t *)arg);
}


/* Fills r from n's bytes, made durable. n's record lock held. */
int land_make_durable(struct sl_land *l, struct node *n, struct rec *r, uint64_t *version,
		      bool sync)
{
	int fd, rc = 0;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&n->dmu);
	*version = n->version;
	r->ino.id = n->id;
	r->ino.kind = SL_KIND_FILE;
	r->ino.mode = n->mode;
	r->ino.uid = n->uid;
	r->ino.gid = n->gid;
	r->ino.mtime_ns = n->mtime_ns;
	r->ino.ctime_ns = n->ctime_ns;
	r->ino.atime_ns = n->atime_ns;
	r->ino.size = n->size;
	fd = n->fd;
	if (n->size <= SL_INLINE_MAX) {
		r->ino.storage = SL_STORE_INLINE;
		r->data = malloc(n->size ? n->size : 1);
		if (!r->data)
			rc = ENOMEM;
		else if (fd < 0)
			memcpy(r->data, n->buf ? n->buf : (unsigned char *)"", n->size);
		else if (pread(fd, r->data, n->size, 0) != (ssize_t)n->size)
			rc = errno ? errno : EIO;
	} else {
		r->ino.storage = SL_STORE_BLOB;
	}
	bool named = n->blob_named;
	/*
	 * The blob may hold more than n->size: a spliced write another handle
	 * has not reported yet. Never trim here; what lands is n->size bytes,
	 * and recovery cuts a blob to its record.
	 */
	pthread_mutex_unlock(&n->dmu);
	if (rc || r->ino.storage == SL_STORE_INLINE || !sync)
		return rc;
	SL_FAULT("land.before_blob_fsync");
	if ((rc = SL_FAULT_ERR("blob.fsync")))
		return rc;
	if (fsync(fd))
		return errno;
	if (!named) {
		if ((rc = sl_blob_sync_name(l->blobs, n->id)))
			return rc;
		pthread_mutex_lock(&n->dmu);
		n->blob_named = true;
		pthread_mutex_unlock(&n->dmu);
	}
	return 0;
}

static void cancel_done(void *arg, int rc)
{
	if (rc)
		sl_log(SL_LOG_ERR, "cannot cancel record of id %" PRIu64 ": %s", *(uint64_t *)arg,
		       sl_strerror(rc));
	free(arg);
}

/*
 * Poisons n: it never lands, its name leaves in/, its bytes go at its last
 * release, and err is counted: committed before this returns if
 * commit_now, else by the next group commit (the commit thread cannot wait
 * for one). Whether this call poisoned it.
 */
static bool poison(struct sl_land *l, struct node *n, int err, bool commit_now)
{
	int expected = 0;
	struct node *dead, **pub = NULL;
	size_t npub = 0;
	bool recorded;

	if (!atomic_compare_exchange_strong(&n->poison, &expected, err))
		return false;
	sl_log(SL_LOG_WARNING, "'%s': %s: the file will not land", n->name, strerror(err));
	if (commit_now)
		sl_land_refused(l, err);
	else
		count_refused(l, err);
	pthread_mutex_lock(&n->dmu);
	recorded = n->recorded;
	n->recorded = false;
	pthread_mutex_unlock(&n->dmu);
	if (recorded) {
		uint64_t *id = malloc(sizeof(*id));
		if (id) {
			*id = n->id;
			sl_catalog_write_async(l->cat, land_cancel_apply, id, cancel_done);
		}
	}
	pthread_mutex_lock(&l->mu);
	if (n->bundle)
		land_bundle_leave(l, n, &pub, &npub);
	dead = land_unname_locked(l, n);
	pthread_mutex_unlock(&l->mu);
	if (dead)
		land_free_node(l, dead);
	if (npub)
		land_publish(l, pub, npub);
	free(pub);
	return true;
}

void land_poison(struct sl_land *l, struct node *n, int err)
{
	poison(l, n, err, true);
}

int land_fail(struct sl_land *l, struct node *n, int err)
{
	if (land_storage_error(err))
		land_poison(l, n, err);
	return err;
}

/* ---- records ---- */

void land_rec_lock(struct node *n)
{
	pthread_mutex_lock(&n->dmu);
	while (n->rec_busy)
		pthread_cond_wait(&n->rec_cv, &n->dmu);
	n->rec_busy = true;
	pthread_mutex_unlock(&n->dmu);
}

void land_rec_unlock(struct node *n)
{
	pthread_mutex_lock(&n->dmu);
	n->rec_busy = false;
	pthread_cond_broadcast(&n->rec_cv);
	pthread_mutex_unlock(&n->dmu);
}

void land_op_excl(struct sl_land *l)
{
	pthread_rwlock_wrlock(&l->op);
	pthread_mutex_lock(&l->mu);
	while (l->records_queued)
		pthread_cond_wait(&l->records_cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/*
 * The first half of a record: 0 with *queue false when there is nothing
 * to write (temporary, unnamed, recorded at this version; a temp file's
 * bytes synced if force), else 0 with r filled and n's record lock held for
 * record_finish(), or an error (lock let go, n failed). l->op held.
 */
static int record_prepare(struct sl_land *l, struct node *n, bool force, struct rec *r,
			  uint64_t *version, bool *queue)
{
	struct sl_txn *t;
	bool named, temp = true;
	int rc;

	*queue = false;
	land_rec_lock(n);
	pthread_mutex_lock(&l->mu);
	named = n->named && !n->landed;
	uint64_t parent = n->parent;
	char name[SL_NAME_MAX + 1];
	memcpy(name, n->name, sizeof(name));
	pthread_mutex_unlock(&l->mu);
	rc = 0;
	if (!named || atomic_load(&n->poison))
		goto unlock;
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = land_path_is_temp(l, t, parent, name, &temp);
	sl_txn_end(t);
	if (rc)
		goto unlock;
	pthread_mutex_lock(&n->dmu);
	bool current = n->recorded && n->rec_version == n->version;
	int fd = n->fd;
	pthread_mutex_unlock(&n->dmu);
	if (temp) {
		/* a temp file's fsync still reaches the disk; FLUSH does not sync */
		if (force && fd >= 0 && fsync(fd))
			rc = errno;
		goto unlock;
	}
	if (current)
		goto unlock;
	rc = land_make_durable(l, n, r, version, true);
	r->l = l;
	r->n = n;
	if (rc) {
		free(r->data);
		r->data = NULL;
		goto unlock;
	}
	r->ino.parent = parent;
	memcpy(r->ino.name, name, sizeof(name));
	*queue = true;
	return 0;
unlock:
	land_rec_unlock(n);
	if (rc > 0)
		land_fail(l, n, rc);
	return rc;
}

/*
 * The second half, once the record's commit ended with rc: n's record lock
 * let go, n failed by a storage error. On the commit thread (queued) the
 * refusal counter is left to the next group commit; returns whether it was.
 */
static bool record_finish(struct sl_land *l, struct node *n, struct rec *r, uint64_t version,
			  int rc, bool queued)
{
	free(r->data);
	r->data = NULL;
	if (rc == 0) {
		pthread_mutex_lock(&n->dmu);
		n->recorded = true;
		if (version > n->rec_version)
			n->rec_version = version;
		pthread_mutex_unlock(&n->dmu);
	}
	land_rec_unlock(n);
	return rc > 0 && land_storage_error(rc) && poison(l, n, rc, !queued) && queued;
}

/*
 * Makes n durable at its name and records (path, length) in one commit,
 * unless it is temporary, unnamed or already recorded at this version.
 * l->op held shared or exclusive.
 */
int land_record_locked(struct sl_land *l, struct node *n, bool force)
{
	struct rec r;
	uint64_t version;
	bool queue;
	int rc = record_prepare(l, n, force, &r, &version, &queue);

	if (rc || !queue)
		return rc;
	SL_FAULT("land.before_record");
	int64_t start = land_mono_ns();
	rc = sl_catalog_write(l->cat, land_rec_apply, &r);
	if (rc == 0)
		land_latency_observe(l, start);
	SL_FAULT("land.after_record");
	record_finish(l, n, &r, version, rc, false);
	return rc;
}

/* A queued record is finished: land_op_excl() may go on once none is left. */
static void record_unqueued(struct sl_land *l)
{
	pthread_mutex_lock(&l->mu);
	if (--l->records_queued == 0)
		pthread_cond_broadcast(&l->records_cv);
	pthread_mutex_unlock(&l->mu);
}

/* A record queued by land_record_queue(), finished on the commit thread. */
struct queued_rec {
	struct rec r; /* first: the apply's argument is this struct */
	uint64_t version;
	int64_t start;
	void (*done)(void *ctx, int rc);
	void *ctx;
};

/* A failed record's answer, after the commit that carries its refusal count. */
struct late_answer {
	void (*done)(void *ctx, int rc);
	void *ctx;
	int rc;
};

static void late_answered(void *arg, int rc)
{
	struct late_answer *a = arg;
	(void)rc; /* the counter is lost with that commit, as a crash's would be */
	a->done(a->ctx, a->rc);
	free(a);
}

static void queued_rec_done(void *arg, int rc)
{
	struct queued_rec *q = arg;
	struct sl_land *l = q->r.l;

	if (rc == 0)
		land_latency_observe(l, q->start);
	SL_FAULT("land.after_record");
	bool counted = record_finish(l, q->r.n, &q->r, q->version, rc, true);
	void (*done)(void *, int) = q->done;
	void *ctx = q->ctx;
	free(q);
	/* n is the caller's (a handle's) until done: let go of the op first */
	record_unqueued(l);
	/*
	 * This thread cannot wait for a commit: a refusal it counted is
	 * answered once the next group commit (which takes the counter) is
	 * done, as sl_land_refused() does for the other callers.
	 */
	struct late_answer *a = counted ? malloc(sizeof(*a)) : NULL;
	if (a) {
		*a = (struct late_answer){done, ctx, rc};
		if (sl_catalog_write_async(l->cat, noop_apply, a, late_answered) == 0)
			return;
		free(a);
	}
	done(ctx, rc);
}

int land_record_queue(struct sl_land *l, struct node *n, void (*done)(void *ctx, int rc),
		      void *ctx, bool *queued)
{
	struct queued_rec *q = malloc(sizeof(*q));
	bool queue;
	int rc;

	*queued = false;
	if (!q)
		return ENOMEM;
	if ((rc = record_prepare(l, n, false, &q->r, &q->version, &queue)) || !queue) {
		free(q);
		return rc;
	}
	q->done = done;
	q->ctx = ctx;
	SL_FAULT("land.before_record");
	q->start = land_mono_ns();
	pthread_mutex_lock(&l->mu);
	l->records_queued++;
	pthread_mutex_unlock(&l->mu);
	/* from here on done() is called once, maybe before this returns */
	if ((rc = sl_catalog_write_async(l->cat, land_rec_apply, q, queued_rec_done))) {
		record_unqueued(l);
		record_finish(l, n, &q->r, q->version, rc, false);
		free(q);
		return rc;
	}
	*queued = true;
	return 0;
}

/* ---- publish: sealed files land in the next group commit ---- */

struct pub {
	struct sl_land *l;
	size_t n;
	int64_t landed_ns;   /* when they land */
	struct node **v;     /* the files, each with a reference */
	bool *landed;        /* out: the apply found v[k] recorded and landed it */
};

static int publish_apply(struct sl_txn *t, void *arg)
{
	struct pub *p = arg;
	int rc;

	for (size_t k = 0; k < p->n; k++) {
		struct sl_inode i;
		p->landed[k] = false;
		rc = sl_txn_inode_get(t, p->v[k]->id, &i);
		if (rc == SL_NOTFOUND)
			continue; /* unlinked meanwhile */
		if (rc)
			return rc;
		if (i.state != SL_STATE_RECORDED)
			continue;
		/* the attributes as they are now: a chmod after close is kept */
		land_attrs_to_inode(p->v[k], &i);
		i.landed_ns = p->landed_ns;
		if ((rc = land_in_txn(p->l, t, &i)) || (rc = sl_txn_inode_put(t, &i)))
			return rc;
		p->landed[k] = true;
	}
	return 0;
}

static void pub_free(struct pub *p)
{
	if (!p)
		return;
	free(p->landed);
	free(p->v);
	free(p);
}

/* After the commit: landed files leave the node tables (l->mu held). */
static void published_locked(struct sl_land *l, struct node *n, bool landed,
			     struct node **dead1, struct node **dead2)
{
	n->publishing = false;
	*dead1 = *dead2 = NULL;
	if (landed) {
		pthread_mutex_lock(&n->dmu);
		n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
		pthread_mutex_unlock(&n->dmu);
		n->landed = true;
		*dead1 = land_unname_locked(l, n);
	}
	if (!*dead1)
		*dead2 = unref_locked(l, n);
}

static void publish_done(void *arg, int rc)
{
	struct pub *p = arg;
	struct sl_land *l = p->l;
	bool any = false;

	for (size_t k = 0; k < p->n; k++) {
		struct node *n = p->v[k], *dead1, *dead2;
		bool landed = rc == 0 && p->landed[k];
		if (rc)
			sl_log(SL_LOG_ERR, "cannot land '%s': %s (it lands at the next start)",
			       n->name, sl_strerror(rc));
		pthread_mutex_lock(&l->mu);
		published_locked(l, n, landed, &dead1, &dead2);
		pthread_mutex_unlock(&l->mu);
		if (dead1)
			land_unref(l, dead1);
		if (dead2)
			land_free_node(l, dead2);
		any |= landed;
	}
	atomic_fetch_sub(&l->publishing, p->n);
	if (any && l->on_land)
		l->on_land(l->on_land_ctx);
	pub_free(p);
}

void land_publish(struct sl_land *l, struct node **v, size_t n)
{
	struct pub *p = calloc(1, sizeof(*p));

	if (p) {
		p->v = malloc(n * sizeof(*p->v));
		p->landed = calloc(n, sizeof(*p->landed));
	}
	if (!p || !p->v || !p->landed) {
		/* recorded: recovery lands them; until then they stay sealed */
		sl_log(SL_LOG_ERR, "cannot land %zu file(s): out of memory (they land at the "
		       "next start)", n);
		pub_free(p);
		return;
	}
	p->l = l;
	p->n = n;
	memcpy(p->v, v, n * sizeof(*v));
	p->landed_ns = land_now_ns();
	atomic_fetch_add(&l->publishing, n);
	SL_FAULT("land.before_publish");
	sl_catalog_write_lazy(l->cat, publish_apply, p, publish_done);
}

/* ---- counters ---- */

static const char *refused_key(int err, char *buf, size_t len)
{
	const char *name = sl_errno_name(err);
	if (name)
		snprintf(buf, len, "refused.%s", name);
	else
		snprintf(buf, len, "refused.E%d", err);
	return buf;
}

/* Rides every group commit: the counters `sluice status` reads. */
int land_counters_apply(struct sl_txn *t, void *arg)
{
	struct sl_land *l = arg;
	uint64_t refused[SL_ERRNO_MAX];
	char key[64];
	bool dirty;
	int rc;

	pthread_mutex_lock(&l->mu);
	dirty = l->counters_dirty;
	memcpy(refused, l->refused, sizeof(refused));
	uint64_t abandoned = l->temp_abandoned_new;
	pthread_mutex_unlock(&l->mu);
	for (int e = 1; dirty && e < SL_ERRNO_MAX; e++)
		if (refused[e] && (rc = sl_txn_meta_put(t, refused_key(e, key, sizeof(key)),
							 refused[e])))
			return rc;
	if (abandoned && (rc = sl_txn_meta_add(t, "temp_abandoned", (int64_t)abandoned)))
		return rc;
	if ((rc = land_dir_times_apply(l, t)))
		return rc;
	if (abandoned) {
		/* the txn may still fail: then the count is lost, like a crash's */
		pthread_mutex_lock(&l->mu);
		l->temp_abandoned_new -= abandoned;
		pthread_mutex_unlock(&l->mu);
	}
	return 0;
}

static int errno_by_name(const char *name)
{
	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		const char *n = sl_errno_name(e);
		if (n && !strcmp(n, name))
			return e;
	}
	if (name[0] == 'E' && name[1] >= '0' && name[1] <= '9')
		return atoi(name + 1);
	return 0;
}

int land_load_refused(void *ctx, const char *key, uint64_t val)
{
	struct sl_land *l = ctx;
	int e = errno_by_name(key + strlen("refused."));
	if (e > 0 && e < SL_ERRNO_MAX)
		l->refused[e] = val;
	return 0;
}

static int read_refused(void *ctx, const char *key, uint64_t val)
{
	struct sl_land_counters *c = ctx;
	int e = errno_by_name(key + strlen("refused."));
	if (e > 0 && e < SL_ERRNO_MAX)
		c->refused[e] = val;
	return 0;
}

int sl_land_counters_read(struct sl_txn *t, struct sl_land_counters *out)
{
	uint64_t in_flight = out->in_flight;
	int rc;

	memset(out, 0, sizeof(*out));
	out->in_flight = in_flight;
	if ((rc = sl_txn_meta_get(t, "files_landed", &out->files_landed)) && rc != SL_NOTFOUND)
		return rc;
	if ((rc = sl_txn_meta_get(t, "bytes_landed", &out->bytes_landed)) && rc != SL_NOTFOUND)
		return rc;
	if ((rc = sl_txn_meta_get(t, "temp_abandoned", &out->temp_abandoned)) &&
	    rc != SL_NOTFOUND)
		return rc;
	return sl_txn_meta_each(t, "refused.", read_refused, out);
}

void sl_land_counters(struct sl_land *l, struct sl_land_counters *out)
{
	struct sl_txn *t;

	memset(out, 0, sizeof(*out));
	/*
	 * In flight first: a file leaves it only after its landing committed,
	 * so a reader that sees 0 there then sees every landing in the catalog.
	 */
	out->in_flight = atomic_load(l->in_flight);
	if (sl_catalog_read(l->cat, &t) == 0) {
		sl_land_counters_read(t, out);
		sl_txn_end(t);
	}
	pthread_mutex_lock(&l->mu);
	out->temp_abandoned += l->temp_abandoned_new;
	/* refusals are counted here first, committed with the next commit */
	memcpy(out->refused, l->refused, sizeof(out->refused));
	pthread_mutex_unlock(&l->mu);
}

uint64_t land_lowest_live(void *ctx)
{
	struct sl_land *l = ctx;
	uint64_t lo = UINT64_MAX;

	pthread_mutex_lock(&l->mu);
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct node *n = l->by_id[b]; n; n = n->id_next)
			if (n->id < lo)
				lo = n->id;
	for (size_t i = 0; i < sizeof(l->pins) / sizeof(l->pins[0]); i++)
		if (l->pins[i] && l->pins[i] < lo)
			lo = l->pins[i];
	pthread_mutex_unlock(&l->mu);
	return lo;
}

int sl_land_pin(struct sl_land *l, uint64_t id)
{
	int rc = EBUSY;
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < sizeof(l->pins) / sizeof(l->pins[0]); i++)
		if (!l->pins[i]) {
			l->pins[i] = id;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

void sl_land_unpin(struct sl_land *l, uint64_t id)
{
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < sizeof(l->pins) / sizeof(l->pins[0]); i++)
		if (l->pins[i] == id) {
			l->pins[i] = 0;
			break;
		}
	pthread_mutex_unlock(&l->mu);
}

void land_drop_nodes(struct sl_land *l)
{
	struct node *all = NULL;

	pthread_mutex_lock(&l->mu);
	for (size_t b = 0; b < NBUCKET; b++) {
		struct node *n = l->by_id[b], *next;
		for (; n; n = next) {
			next = n->id_next;
			n->id_next = all;
			all = n;
		}
		l->by_id[b] = NULL;
		l->by_name[b] = NULL;
	}
	pthread_mutex_unlock(&l->mu);
	for (struct node *n = all, *next; n; n = next) {
		next = n->id_next;
		n->in_id_table = false;
		pthread_mutex_lock(&n->dmu);
		bool recorded = n->recorded && !atomic_load(&n->poison);
		pthread_mutex_unlock(&n->dmu);
		if (recorded && n->named && !n->landed) {
			/* recovery would land it at the next start: land it now */
			bool landed = false;
			struct pub p = {.l = l, .n = 1, .v = &n, .landed = &landed,
					.landed_ns = land_now_ns()};
			if (sl_catalog_write(l->cat, publish_apply, &p) == 0 && landed)
				n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
		}
		land_bundle_drop(n);
		land_free_node(l, n);
	}
	atomic_store(l->in_flight, 0);
}
