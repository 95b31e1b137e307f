/* SPDX-License-Identifier: MIT */
/*
 * The landing namespace: in-flight files in memory, landed files and folders
 * in the catalog, and the rules that move a file from one to the other.
 *
 * Locks, in the order they nest:
 *   l->op      rwlock. Exclusive for namespace changes that wait for a
 *              commit (rename, unlink, mkdir, rmdir, folder attributes);
 *              shared for records (FLUSH, fsync), creates and the
 *              publishing step of RELEASE. So a record's name cannot move
 *              under it, and concurrent records still share group commits.
 *   n->rec_mu  serializes the records of one file.
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
#include "temp.h"

#define NBUCKET LAND_NBUCKET

struct node {
	uint64_t id;
	/* guarded by l->mu */
	uint64_t parent;
	char name[SL_NAME_MAX + 1];
	bool named;         /* its name is in in/ (false once unlinked, replaced, poisoned) */
	bool landed;        /* published: the catalog holds it now */
	bool publishing;    /* a publish is queued */
	bool in_id_table;
	int writers;        /* open writable handles */
	int refs;           /* handles + named + publishing */
	struct node *id_next, *name_next;

	pthread_mutex_t rec_mu;
	/* guarded by dmu */
	pthread_mutex_t dmu;
	unsigned char *buf; /* staged bytes while fd < 0 */
	size_t cap;
	int fd;             /* staged blob, -1 until spilled */
	bool blob_named;    /* the blob's folder entry is durable */
	bool keep_blob;     /* the blob holds landed bytes: keep it at free */
	uint32_t mode, uid, gid;
	int64_t mtime_ns, ctime_ns;
	uint64_t size;
	uint64_t version;   /* bumps on every change of the bytes */
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

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static size_t name_hash(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h % NBUCKET;
}

static struct node *find_id(struct sl_land *l, uint64_t id)
{
	for (struct node *n = l->by_id[id % NBUCKET]; n; n = n->id_next)
		if (n->id == id)
			return n;
	return NULL;
}

static struct node *find_name(struct sl_land *l, uint64_t parent, const char *name)
{
	for (struct node *n = l->by_name[name_hash(parent, name)]; n; n = n->name_next)
		if (n->parent == parent && !strcmp(n->name, name))
			return n;
	return NULL;
}

static void link_name(struct sl_land *l, struct node *n)
{
	struct node **b = &l->by_name[name_hash(n->parent, n->name)];
	n->name_next = *b;
	*b = n;
}

static void unlink_name(struct sl_land *l, struct node *n)
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

static void free_node(struct sl_land *l, struct node *n)
{
	if (n->fd >= 0) {
		close(n->fd);
		if (!n->keep_blob)
			sl_blob_unlink(l->blobs, n->id);
	}
	free(n->buf);
	pthread_mutex_destroy(&n->dmu);
	pthread_mutex_destroy(&n->rec_mu);
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

static void unref(struct sl_land *l, struct node *n)
{
	pthread_mutex_lock(&l->mu);
	struct node *dead = unref_locked(l, n);
	pthread_mutex_unlock(&l->mu);
	if (dead)
		free_node(l, dead);
}

/*
 * Takes n's name out of in/; l->mu held. A node that leaves without landing
 * stops counting as in flight. Returns the node to free, or NULL.
 */
static struct node *unname_locked(struct sl_land *l, struct node *n)
{
	if (!n->named)
		return NULL;
	unlink_name(l, n);
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

void sl_land_refused(struct sl_land *l, int err)
{
	if (err <= 0 || err >= SL_ERRNO_MAX)
		return;
	pthread_mutex_lock(&l->mu);
	l->refused[err]++;
	l->counters_dirty = true;
	pthread_mutex_unlock(&l->mu);
	/*
	 * Refusals are rare: commit the counter before answering, so that
	 * `sluice status` agrees with status/landing.json.
	 */
	sl_catalog_write(l->cat, noop_apply, NULL);
}

static int refuse(struct sl_land *l, int err)
{
	sl_land_refused(l, err);
	return err;
}

static void attr_of_node(struct node *n, struct sl_attr *a)
{
	a->id = n->id;
	pthread_mutex_lock(&n->dmu);
	a->mode = n->mode;
	a->uid = n->uid;
	a->gid = n->gid;
	a->size = n->size;
	a->mtime_ns = n->mtime_ns;
	a->ctime_ns = n->ctime_ns;
	pthread_mutex_unlock(&n->dmu);
	a->landed = false;
}

static void attr_of_inode(const struct sl_inode *i, struct sl_attr *a)
{
	a->id = i->id;
	a->mode = i->mode;
	a->uid = i->uid;
	a->gid = i->gid;
	a->size = i->size;
	a->mtime_ns = i->mtime_ns;
	a->ctime_ns = i->ctime_ns;
	a->landed = i->kind == SL_KIND_FILE && i->state == SL_STATE_LANDED;
}

static bool valid_name(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= SL_NAME_MAX && !strchr(name, '/') && strcmp(name, ".") &&
	       strcmp(name, "..");
}

/* Whether parent/name is a temporary path: any component matches. */
static int path_is_temp(struct sl_land *l, struct sl_txn *t, uint64_t parent, const char *name,
			bool *temp)
{
	struct sl_inode d;
	int depth = 0;

	if (sl_temp_match(l->temp, name)) {
		*temp = true;
		return 0;
	}
	while (parent != SL_ID_IN && parent != SL_ID_ARCHIVE) {
		int rc = sl_cat_inode_get(t, parent, &d);
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

static int check_dir(struct sl_txn *t, uint64_t id)
{
	struct sl_inode d;
	int rc = sl_cat_inode_get(t, id, &d);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	return d.kind == SL_KIND_DIR ? 0 : ENOTDIR;
}

/* ---- catalog writes ---- */

/* Removes every trace of id from the catalog; a missing id is fine. */
static int cancel(struct sl_txn *t, uint64_t id)
{
	struct sl_inode i;
	uint64_t cur;
	int rc = sl_cat_inode_get(t, id, &i);

	if (rc == SL_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (sl_cat_dirent_get(t, i.parent, i.name, &cur) == 0 && cur == id &&
	    (rc = sl_cat_dirent_del(t, i.parent, i.name)))
		return rc;
	if (i.state == SL_STATE_LANDED && (rc = sl_cat_landed_del(t, i.seq)))
		return rc;
	if ((rc = sl_cat_inode_del(t, id)) || (rc = sl_cat_data_del(t, id)))
		return rc;
	return sl_cat_pending_del(t, id);
}

int land_in_txn(struct sl_txn *t, struct sl_inode *i)
{
	uint64_t seq;
	int rc;

	if ((rc = sl_cat_meta_get(t, "seq", &seq)))
		return rc;
	i->state = SL_STATE_LANDED;
	i->seq = seq + 1;
	if ((rc = sl_cat_meta_put(t, "seq", i->seq)) || (rc = sl_cat_landed_put(t, i->seq, i->id)) ||
	    (rc = sl_cat_meta_add(t, "files_landed", 1)) ||
	    (rc = sl_cat_meta_add(t, "bytes_landed", (int64_t)i->size)))
		return rc;
	return sl_cat_pending_del(t, i->id);
}

int land_rec_apply(struct sl_txn *t, void *arg)
{
	struct rec *r = arg;
	struct sl_inode i = r->ino;
	uint64_t cur;
	int rc;

	if (r->excl && sl_cat_dirent_get(t, i.parent, i.name, &cur) == 0)
		return EEXIST;
	if (r->cancel_id && (rc = cancel(t, r->cancel_id)))
		return rc;
	if (r->del_old && sl_cat_dirent_get(t, r->old_parent, r->old_name, &cur) == 0 &&
	    cur == i.id && (rc = sl_cat_dirent_del(t, r->old_parent, r->old_name)))
		return rc;
	if (r->land) {
		if ((rc = land_in_txn(t, &i)))
			return rc;
	} else {
		i.state = SL_STATE_RECORDED;
		if ((rc = sl_cat_pending_put(t, i.id)))
			return rc;
	}
	if ((rc = sl_cat_inode_put(t, &i)) || (rc = sl_cat_dirent_put(t, i.parent, i.name, i.id)))
		return rc;
	if (i.storage == SL_STORE_INLINE)
		return sl_cat_data_put(t, i.id, r->data ? r->data : "", i.size);
	return sl_cat_data_del(t, i.id);
}

static int cancel_apply(struct sl_txn *t, void *arg)
{
	return cancel(t, *(uint64_t *)arg);
}

int land_cancel(struct sl_txn *t, uint64_t id)
{
	return cancel(t, id);
}

/* Fills r from n's bytes, made durable. n->rec_mu held. */
static int make_durable(struct sl_land *l, struct node *n, struct rec *r, uint64_t *version)
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
	r->ino.size = n->size;
	fd = n->fd;
	if (n->size <= SL_INLINE_MAX) {
		r->ino.storage = SL_STORE_INLINE;
		r->data = malloc(n->size ? n->size : 1);
		if (!r->data)
			rc = ENOMEM;
		else if (fd < 0)
			memcpy(r->data, n->buf, n->size);
		else if (pread(fd, r->data, n->size, 0) != (ssize_t)n->size)
			rc = errno ? errno : EIO;
	} else {
		r->ino.storage = SL_STORE_BLOB;
	}
	bool named = n->blob_named;
	pthread_mutex_unlock(&n->dmu);
	if (rc || r->ino.storage == SL_STORE_INLINE)
		return rc;
	SL_FAULT("land.before_blob_fsync");
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

static void poison(struct sl_land *l, struct node *n, int err);

static void cancel_done(void *arg, int rc)
{
	if (rc)
		sl_log(SL_LOG_ERR, "cannot cancel record of id %" PRIu64 ": %s", *(uint64_t *)arg,
		       sl_strerror(rc));
	free(arg);
}

/*
 * Poisons n: it never lands, its name leaves in/, its bytes go at its last
 * release, and err is counted.
 */
static void poison(struct sl_land *l, struct node *n, int err)
{
	int expected = 0;
	struct node *dead;
	bool recorded;

	if (!atomic_compare_exchange_strong(&n->poison, &expected, err))
		return;
	sl_log(SL_LOG_WARNING, "'%s': %s: the file will not land", n->name, strerror(err));
	sl_land_refused(l, err);
	pthread_mutex_lock(&n->dmu);
	recorded = n->recorded;
	n->recorded = false;
	pthread_mutex_unlock(&n->dmu);
	if (recorded) {
		uint64_t *id = malloc(sizeof(*id));
		if (id) {
			*id = n->id;
			sl_catalog_write_async(l->cat, cancel_apply, id, cancel_done);
		}
	}
	pthread_mutex_lock(&l->mu);
	dead = unname_locked(l, n);
	pthread_mutex_unlock(&l->mu);
	if (dead)
		free_node(l, dead);
}

/*
 * Makes n durable at its name and records (path, length) in one commit,
 * unless it is temporary, unnamed or already recorded at this version.
 * l->op held shared or exclusive.
 */
static int record_locked(struct sl_land *l, struct node *n, bool force)
{
	struct sl_txn *t;
	struct rec r;
	uint64_t version;
	bool named, temp = true;
	int rc;

	pthread_mutex_lock(&n->rec_mu);
	pthread_mutex_lock(&l->mu);
	named = n->named && !n->landed;
	r.ino.parent = n->parent;
	memcpy(r.old_name, n->name, sizeof(n->name));
	pthread_mutex_unlock(&l->mu);
	rc = 0;
	if (!named || atomic_load(&n->poison))
		goto unlock;
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = path_is_temp(l, t, r.ino.parent, r.old_name, &temp);
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
	uint64_t parent = r.ino.parent;
	char name[SL_NAME_MAX + 1];
	memcpy(name, r.old_name, sizeof(name));
	rc = make_durable(l, n, &r, &version);
	if (rc == 0) {
		r.ino.parent = parent;
		memcpy(r.ino.name, name, sizeof(name));
		SL_FAULT("land.before_record");
		rc = sl_catalog_write(l->cat, land_rec_apply, &r);
		SL_FAULT("land.after_record");
	}
	free(r.data);
	if (rc == 0) {
		pthread_mutex_lock(&n->dmu);
		n->recorded = true;
		if (version > n->rec_version)
			n->rec_version = version;
		pthread_mutex_unlock(&n->dmu);
	}
unlock:
	pthread_mutex_unlock(&n->rec_mu);
	if (rc > 0)
		poison(l, n, rc);
	return rc;
}

/* ---- publish: RELEASE of a final-named file ---- */

struct pub {
	struct sl_land *l;
	struct node *n;
	struct sl_inode attrs; /* the attributes it lands with */
	bool landed;           /* out: the apply found it recorded and landed it */
};

static int publish_apply(struct sl_txn *t, void *arg)
{
	struct pub *p = arg;
	struct sl_inode i;
	int rc = sl_cat_inode_get(t, p->n->id, &i);

	p->landed = false;
	if (rc == SL_NOTFOUND)
		return 0; /* unlinked meanwhile */
	if (rc)
		return rc;
	if (i.state != SL_STATE_RECORDED)
		return 0;
	i.mode = p->attrs.mode;
	i.uid = p->attrs.uid;
	i.gid = p->attrs.gid;
	i.mtime_ns = p->attrs.mtime_ns;
	i.ctime_ns = p->attrs.ctime_ns;
	i.landed_ns = p->attrs.landed_ns;
	if ((rc = land_in_txn(t, &i)) || (rc = sl_cat_inode_put(t, &i)))
		return rc;
	p->landed = true;
	return 0;
}

static void publish_done(void *arg, int rc)
{
	struct pub *p = arg;
	struct sl_land *l = p->l;
	struct node *n = p->n, *dead1 = NULL, *dead2;

	if (rc)
		sl_log(SL_LOG_ERR, "cannot land '%s': %s (it lands at the next start)", n->name,
		       sl_strerror(rc));
	atomic_fetch_sub(&l->publishing, 1);
	pthread_mutex_lock(&l->mu);
	n->publishing = false;
	if (rc == 0 && p->landed) {
		pthread_mutex_lock(&n->dmu);
		n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
		pthread_mutex_unlock(&n->dmu);
		n->landed = true;
		dead1 = unname_locked(l, n);
	}
	dead2 = dead1 ? NULL : unref_locked(l, n);
	pthread_mutex_unlock(&l->mu);
	if (dead1)
		unref(l, dead1);
	if (dead2)
		free_node(l, dead2);
	if (rc == 0 && p->landed && l->on_land)
		l->on_land(l->on_land_ctx);
	free(p);
}

/* Queues the landing of n. l->op held; n has no writer left. */
static void publish(struct sl_land *l, struct node *n)
{
	struct pub *p = calloc(1, sizeof(*p));
	if (!p) {
		sl_log(SL_LOG_ERR, "cannot land '%s': out of memory (it lands at the next start)",
		       n->name);
		return;
	}
	p->l = l;
	p->n = n;
	pthread_mutex_lock(&n->dmu);
	p->attrs.mode = n->mode;
	p->attrs.uid = n->uid;
	p->attrs.gid = n->gid;
	p->attrs.mtime_ns = n->mtime_ns;
	p->attrs.ctime_ns = n->ctime_ns;
	pthread_mutex_unlock(&n->dmu);
	p->attrs.landed_ns = now_ns();
	pthread_mutex_lock(&l->mu);
	n->publishing = true;
	n->refs++;
	pthread_mutex_unlock(&l->mu);
	atomic_fetch_add(&l->publishing, 1);
	SL_FAULT("land.before_publish");
	sl_catalog_write_lazy(l->cat, publish_apply, p, publish_done);
}

/* ---- lookups ---- */

int sl_land_lookup(struct sl_land *l, uint64_t parent, const char *name, struct sl_attr *out)
{
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n;
	uint64_t id;
	int rc;

	if (strlen(name) > SL_NAME_MAX)
		return ENAMETOOLONG;
	pthread_mutex_lock(&l->mu);
	n = find_name(l, parent, name);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&l->mu);
	if (n) {
		attr_of_node(n, out);
		unref(l, n);
		return 0;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	rc = sl_cat_dirent_get(t, parent, name, &id);
	if (rc == 0)
		rc = sl_cat_inode_get(t, id, &i);
	sl_txn_end(t);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	attr_of_inode(&i, out);
	return 0;
}

int sl_land_getattr(struct sl_land *l, uint64_t id, struct sl_attr *out)
{
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n;
	int rc;

	pthread_mutex_lock(&l->mu);
	n = find_id(l, id);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&l->mu);
	if (n) {
		attr_of_node(n, out);
		unref(l, n);
		return 0;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	rc = sl_cat_inode_get(t, id, &i);
	sl_txn_end(t);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	attr_of_inode(&i, out);
	return 0;
}

int sl_land_root(struct sl_land *l, uint64_t id, uint64_t *root)
{
	struct sl_txn *t;
	struct sl_inode i;
	int rc, depth = 0;

	pthread_mutex_lock(&l->mu);
	struct node *n = find_id(l, id);
	if (n)
		id = n->parent;
	pthread_mutex_unlock(&l->mu);
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	while (id != SL_ID_IN && id != SL_ID_ARCHIVE) {
		if ((rc = sl_cat_inode_get(t, id, &i)) || ++depth > 4096)
			break;
		id = i.parent;
	}
	sl_txn_end(t);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	if (depth > 4096)
		return SL_ECORRUPT;
	*root = id;
	return 0;
}

/* ---- files ---- */

static struct sl_handle *new_handle(struct sl_land *l, uint64_t id)
{
	struct sl_handle *h = calloc(1, sizeof(*h));
	if (h) {
		h->l = l;
		h->id = id;
		h->fd = -1;
	}
	return h;
}

int sl_land_create(struct sl_land *l, uint64_t parent, const char *name, uint32_t mode,
		   uint32_t uid, uint32_t gid, int flags, struct sl_handle **hp, struct sl_attr *out)
{
	struct sl_handle *h;
	struct sl_txn *t;
	struct node *n;
	uint64_t id, other;
	bool temp;
	int rc;

	(void)flags;
	if (!valid_name(name))
		return strlen(name) > SL_NAME_MAX ? ENAMETOOLONG : EINVAL;
	if ((rc = sl_catalog_next_id(l->cat, &id)))
		return rc;
	n = calloc(1, sizeof(*n));
	h = new_handle(l, id);
	if (!n || !h) {
		free(n);
		free(h);
		return ENOMEM;
	}
	n->id = id;
	n->parent = parent;
	strcpy(n->name, name);
	n->fd = -1;
	n->mode = S_IFREG | (mode & 07777);
	n->uid = uid;
	n->gid = gid;
	n->mtime_ns = n->ctime_ns = now_ns();
	n->version = 1; /* created: its first FLUSH records it, even empty */
	n->named = true;
	n->writers = 1;
	n->refs = 2; /* named + the handle */
	pthread_mutex_init(&n->dmu, NULL);
	pthread_mutex_init(&n->rec_mu, NULL);

	pthread_rwlock_rdlock(&l->op);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = check_dir(t, parent);
	if (rc == 0)
		rc = path_is_temp(l, t, parent, name, &temp);
	if (rc == 0 && sl_cat_dirent_get(t, parent, name, &other) == 0)
		rc = EEXIST;
	sl_txn_end(t);
	if (rc == 0 && l->strict && !temp)
		rc = refuse(l, EPERM);
	if (rc)
		goto unlock;
	pthread_mutex_lock(&l->mu);
	if (find_name(l, parent, name)) {
		rc = EEXIST;
	} else {
		link_name(l, n);
		n->id_next = l->by_id[id % NBUCKET];
		l->by_id[id % NBUCKET] = n;
		n->in_id_table = true;
		atomic_fetch_add(l->in_flight, 1);
	}
	pthread_mutex_unlock(&l->mu);
unlock:
	pthread_rwlock_unlock(&l->op);
	if (rc) {
		free_node(l, n);
		free(h);
		return rc;
	}
	h->n = n;
	h->write = true;
	h->wrote = true;
	attr_of_node(n, out);
	*hp = h;
	return 0;
}

static int truncate_node(struct node *n, uint64_t size)
{
	int rc = 0;

	pthread_mutex_lock(&n->dmu);
	if (n->fd >= 0) {
		if (ftruncate(n->fd, (off_t)size))
			rc = errno;
	} else if (size > SL_INLINE_MAX) {
		rc = EFBIG; /* not reached: spill first, see sl_land_setattr */
	} else if (size > n->size) {
		if (size > n->cap) {
			unsigned char *b = realloc(n->buf, size);
			if (!b) {
				rc = ENOMEM;
				goto out;
			}
			n->buf = b;
			n->cap = size;
		}
		memset(n->buf + n->size, 0, size - n->size);
	}
	if (rc == 0 && size != n->size) {
		n->size = size;
		n->version++;
		n->mtime_ns = n->ctime_ns = now_ns();
	}
out:
	pthread_mutex_unlock(&n->dmu);
	return rc;
}

int sl_land_open_file(struct sl_land *l, uint64_t id, int flags, struct sl_handle **hp,
		      bool *landed)
{
	bool wr = (flags & O_ACCMODE) != O_RDONLY;
	struct sl_handle *h = new_handle(l, id);
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n;
	int rc;

	if (!h)
		return ENOMEM;
	pthread_mutex_lock(&l->mu);
	n = find_id(l, id);
	rc = 0;
	if (n && atomic_load(&n->poison)) {
		rc = EIO; /* poisoned: its name left in/, its bytes never land */
		n = NULL;
	}
	if (n) {
		n->refs++;
		if (wr)
			n->writers++;
	}
	pthread_mutex_unlock(&l->mu);
	if (rc) {
		free(h);
		return rc;
	}
	if (n) {
		h->n = n;
		h->write = wr;
		*landed = false;
		if (wr && (flags & O_TRUNC)) {
			if ((rc = truncate_node(n, 0))) {
				sl_land_release(h);
				return rc;
			}
			h->wrote = true;
		}
		*hp = h;
		return 0;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto free_h;
	rc = sl_cat_inode_get(t, id, &i);
	if (rc == 0 && i.kind == SL_KIND_DIR)
		rc = EISDIR;
	else if (rc == 0 && (wr || (flags & O_TRUNC)))
		rc = refuse(l, EPERM); /* landed: immutable, like chattr +i */
	if (rc == 0 && i.storage == SL_STORE_INLINE) {
		const void *d;
		size_t len;
		rc = sl_cat_data_get(t, id, &d, &len);
		if (rc == 0 && len != i.size)
			rc = SL_ECORRUPT;
		if (rc == 0 && !(h->data = malloc(len ? len : 1)))
			rc = ENOMEM;
		if (rc == 0) {
			memcpy(h->data, d, len);
			h->len = len;
		}
	}
	sl_txn_end(t);
	if (rc == 0 && i.storage == SL_STORE_BLOB)
		rc = sl_blob_open(l->blobs, id, O_RDONLY, &h->fd);
	if (rc)
		goto free_h;
	*landed = true;
	*hp = h;
	return 0;
free_h:
	free(h->data);
	free(h);
	return rc == SL_NOTFOUND ? ENOENT : rc;
}

int sl_land_read(struct sl_handle *h, void *buf, size_t size, off_t off, size_t *nread)
{
	struct node *n = h->n;
	ssize_t r;

	*nread = 0;
	if (!n) {
		if (h->fd < 0) {
			if ((size_t)off < h->len) {
				*nread = h->len - (size_t)off < size ? h->len - (size_t)off : size;
				memcpy(buf, h->data + off, *nread);
			}
			return 0;
		}
		r = pread(h->fd, buf, size, off);
		if (r < 0)
			return errno;
		*nread = (size_t)r;
		return 0;
	}
	pthread_mutex_lock(&n->dmu);
	if (n->fd < 0) {
		if ((uint64_t)off < n->size) {
			*nread = n->size - (uint64_t)off < size ? n->size - (uint64_t)off : size;
			memcpy(buf, n->buf + off, *nread);
		}
		pthread_mutex_unlock(&n->dmu);
		return 0;
	}
	int fd = n->fd;
	pthread_mutex_unlock(&n->dmu);
	r = pread(fd, buf, size, off);
	if (r < 0)
		return errno;
	*nread = (size_t)r;
	return 0;
}

int sl_land_read_fd(struct sl_handle *h)
{
	return h->n ? -1 : h->fd;
}

/* Moves staged bytes from memory into a new blob. n->dmu held. */
static int spill(struct sl_land *l, struct node *n)
{
	int fd, rc;

	if ((rc = sl_blob_create(l->blobs, n->id, &fd)))
		return rc;
	for (size_t done = 0; done < n->size;) {
		ssize_t w = pwrite(fd, n->buf + done, n->size - done, (off_t)done);
		if (w < 0) {
			rc = errno;
			close(fd);
			sl_blob_unlink(l->blobs, n->id);
			return rc;
		}
		done += (size_t)w;
	}
	free(n->buf);
	n->buf = NULL;
	n->cap = 0;
	n->fd = fd;
	return 0;
}

static void wrote(struct node *n, uint64_t end)
{
	if (end > n->size)
		n->size = end;
	n->version++;
	n->mtime_ns = n->ctime_ns = now_ns();
}

int sl_land_write(struct sl_handle *h, const void *buf, size_t size, off_t off)
{
	struct node *n = h->n;
	uint64_t end = (uint64_t)off + size;
	int rc = 0;

	if (!n || !h->write)
		return EBADF;
	if ((rc = atomic_load(&n->poison)))
		return rc;
	SL_FAULT("land.write");
	pthread_mutex_lock(&n->dmu);
	if (n->fd < 0 && end <= SL_INLINE_MAX) {
		if (end > n->cap) {
			size_t cap = n->cap ? n->cap : 4096;
			while (cap < end)
				cap *= 2;
			unsigned char *b = realloc(n->buf, cap);
			if (!b) {
				rc = ENOMEM;
				goto unlock;
			}
			n->buf = b;
			n->cap = cap;
		}
		if ((uint64_t)off > n->size)
			memset(n->buf + n->size, 0, (size_t)off - n->size);
		memcpy(n->buf + off, buf, size);
	} else {
		if (n->fd < 0 && (rc = spill(h->l, n)))
			goto unlock;
		for (size_t done = 0; done < size;) {
			ssize_t w = pwrite(n->fd, (const char *)buf + done, size - done,
					   off + (off_t)done);
			if (w < 0) {
				rc = errno;
				goto unlock;
			}
			done += (size_t)w;
		}
	}
	wrote(n, end);
unlock:
	pthread_mutex_unlock(&n->dmu);
	if (rc) {
		poison(h->l, n, rc);
		return rc;
	}
	h->wrote = true;
	return 0;
}

int sl_land_write_fd(struct sl_handle *h, size_t size, off_t off, int *fd)
{
	struct node *n = h->n;
	int rc = 0;

	if (!n || !h->write)
		return EBADF;
	if ((rc = atomic_load(&n->poison)))
		return rc;
	pthread_mutex_lock(&n->dmu);
	if (n->fd < 0 && (uint64_t)off + size > SL_INLINE_MAX)
		rc = spill(h->l, n);
	*fd = n->fd;
	pthread_mutex_unlock(&n->dmu);
	if (rc)
		poison(h->l, n, rc);
	return rc;
}

int sl_land_write_done(struct sl_handle *h, size_t size, off_t off, int err)
{
	struct node *n = h->n;

	if (err) {
		poison(h->l, n, err);
		return err;
	}
	pthread_mutex_lock(&n->dmu);
	wrote(n, (uint64_t)off + size);
	pthread_mutex_unlock(&n->dmu);
	h->wrote = true;
	return 0;
}

int sl_land_flush(struct sl_handle *h)
{
	struct sl_land *l = h->l;
	int rc;

	if (!h->n || !h->write)
		return 0;
	if ((rc = atomic_load(&h->n->poison)))
		return rc;
	if (!h->wrote)
		return 0;
	pthread_rwlock_rdlock(&l->op);
	rc = record_locked(l, h->n, false);
	pthread_rwlock_unlock(&l->op);
	return rc;
}

int sl_land_fsync(struct sl_handle *h)
{
	struct sl_land *l = h->l;
	int rc;

	if (!h->n)
		return 0;
	if ((rc = atomic_load(&h->n->poison)))
		return rc;
	pthread_rwlock_rdlock(&l->op);
	rc = record_locked(l, h->n, true);
	pthread_rwlock_unlock(&l->op);
	return rc;
}

void sl_land_release(struct sl_handle *h)
{
	struct sl_land *l = h->l;
	struct node *n = h->n;

	if (!h)
		return;
	if (n && h->write) {
		struct sl_txn *t;
		bool last, temp = true;

		pthread_rwlock_rdlock(&l->op);
		pthread_mutex_lock(&l->mu);
		last = --n->writers == 0 && n->named && !n->landed && !n->publishing &&
		       !atomic_load(&n->poison);
		uint64_t parent = n->parent;
		char name[SL_NAME_MAX + 1];
		memcpy(name, n->name, sizeof(name));
		pthread_mutex_unlock(&l->mu);
		if (last && sl_catalog_read(l->cat, &t) == 0) {
			if (path_is_temp(l, t, parent, name, &temp))
				temp = true;
			sl_txn_end(t);
		}
		/*
		 * Normally the last FLUSH recorded exactly these bytes; bytes
		 * changed since (mmap) are recorded here first.
		 */
		if (last && !temp && record_locked(l, n, false) == 0)
			publish(l, n);
		pthread_rwlock_unlock(&l->op);
	}
	if (n)
		unref(l, n);
	if (h->fd >= 0)
		close(h->fd);
	free(h->data);
	free(h);
}

int sl_land_fallocate(struct sl_handle *h, int mode, off_t off, off_t len)
{
	struct node *n = h->n;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	int rc = 0;

	if (!n || !h->write)
		return refuse(h->l, EPERM);
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return EOPNOTSUPP;
	pthread_mutex_lock(&n->dmu);
	if (n->fd < 0 && end > SL_INLINE_MAX)
		rc = spill(h->l, n);
	if (rc == 0 && n->fd >= 0)
		rc = posix_fallocate(n->fd, off, len);
	pthread_mutex_unlock(&n->dmu);
	if (rc) {
		poison(h->l, n, rc);
		return rc;
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > n->size)
		return truncate_node(n, end);
	return 0;
}

/* ---- attributes ---- */

struct dirattr {
	struct sl_inode ino;
};

static int inode_put_apply(struct sl_txn *t, void *arg)
{
	return sl_cat_inode_put(t, &((struct dirattr *)arg)->ino);
}

static bool is_noop(const struct sl_inode *i, const struct sl_setattr *s)
{
	if ((s->flags & SL_SET_MODE) && (s->mode & 07777) != (i->mode & 07777))
		return false;
	if ((s->flags & SL_SET_UID) && s->uid != i->uid)
		return false;
	if ((s->flags & SL_SET_GID) && s->gid != i->gid)
		return false;
	if ((s->flags & SL_SET_SIZE) && s->size != i->size)
		return false;
	if ((s->flags & SL_SET_MTIME) && s->mtime_ns != i->mtime_ns)
		return false;
	if (s->flags & SL_SET_MTIME_NOW)
		return false;
	return true;
}

int sl_land_setattr(struct sl_land *l, uint64_t id, struct sl_handle *h,
		    const struct sl_setattr *s, struct sl_attr *out)
{
	struct sl_txn *t;
	struct dirattr d;
	struct node *n;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	n = find_id(l, id);
	if (n && !n->landed)
		n->refs++;
	else
		n = NULL;
	pthread_mutex_unlock(&l->mu);
	if (n) {
		if (s->flags & SL_SET_SIZE) {
			pthread_mutex_lock(&n->dmu);
			if (n->fd < 0 && s->size > SL_INLINE_MAX)
				rc = spill(l, n);
			pthread_mutex_unlock(&n->dmu);
			if (rc == 0)
				rc = truncate_node(n, s->size);
			if (rc)
				poison(l, n, rc);
			else if (h)
				h->wrote = true;
		}
		pthread_mutex_lock(&n->dmu);
		if (s->flags & SL_SET_MODE)
			n->mode = (n->mode & S_IFMT) | (s->mode & 07777);
		if (s->flags & SL_SET_UID)
			n->uid = s->uid;
		if (s->flags & SL_SET_GID)
			n->gid = s->gid;
		if (s->flags & SL_SET_MTIME)
			n->mtime_ns = s->mtime_ns;
		if (s->flags & SL_SET_MTIME_NOW)
			n->mtime_ns = now_ns();
		n->ctime_ns = now_ns();
		pthread_mutex_unlock(&n->dmu);
		attr_of_node(n, out);
		unref(l, n);
		return rc;
	}

	pthread_rwlock_wrlock(&l->op);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_cat_inode_get(t, id, &d.ino);
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc;
		goto unlock;
	}
	if (d.ino.kind == SL_KIND_FILE) {
		if (!is_noop(&d.ino, s))
			rc = refuse(l, EPERM);
	} else if (s->flags & SL_SET_SIZE) {
		rc = EISDIR;
	} else if (!is_noop(&d.ino, s)) {
		if (s->flags & SL_SET_MODE)
			d.ino.mode = (d.ino.mode & S_IFMT) | (s->mode & 07777);
		if (s->flags & SL_SET_UID)
			d.ino.uid = s->uid;
		if (s->flags & SL_SET_GID)
			d.ino.gid = s->gid;
		if (s->flags & SL_SET_MTIME)
			d.ino.mtime_ns = s->mtime_ns;
		if (s->flags & SL_SET_MTIME_NOW)
			d.ino.mtime_ns = now_ns();
		d.ino.ctime_ns = now_ns();
		rc = sl_catalog_write(l->cat, inode_put_apply, &d);
	}
	if (rc == 0)
		attr_of_inode(&d.ino, out);
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

/* ---- folders ---- */

struct mkdir_rec {
	struct sl_inode ino;
};

static int mkdir_apply(struct sl_txn *t, void *arg)
{
	struct mkdir_rec *m = arg;
	uint64_t cur;
	int rc;

	if (sl_cat_dirent_get(t, m->ino.parent, m->ino.name, &cur) == 0)
		return EEXIST;
	if ((rc = sl_cat_inode_put(t, &m->ino)))
		return rc;
	return sl_cat_dirent_put(t, m->ino.parent, m->ino.name, m->ino.id);
}

int sl_land_mkdir(struct sl_land *l, uint64_t parent, const char *name, uint32_t mode,
		  uint32_t uid, uint32_t gid, struct sl_attr *out)
{
	struct mkdir_rec m;
	struct sl_txn *t;
	uint64_t id;
	int rc;

	if (!valid_name(name))
		return strlen(name) > SL_NAME_MAX ? ENAMETOOLONG : EINVAL;
	if ((rc = sl_catalog_next_id(l->cat, &id)))
		return rc;
	memset(&m, 0, sizeof(m));
	m.ino.id = id;
	m.ino.parent = parent;
	m.ino.kind = SL_KIND_DIR;
	m.ino.mode = S_IFDIR | (mode & 07777);
	m.ino.uid = uid;
	m.ino.gid = gid;
	m.ino.mtime_ns = m.ino.ctime_ns = now_ns();
	strcpy(m.ino.name, name);

	pthread_rwlock_wrlock(&l->op);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = check_dir(t, parent);
	sl_txn_end(t);
	if (rc)
		goto unlock;
	pthread_mutex_lock(&l->mu);
	if (find_name(l, parent, name))
		rc = EEXIST;
	pthread_mutex_unlock(&l->mu);
	if (rc == 0)
		rc = sl_catalog_write(l->cat, mkdir_apply, &m);
	if (rc == 0)
		attr_of_inode(&m.ino, out);
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

static int any_child(void *ctx, const char *name, uint64_t id)
{
	(void)ctx, (void)name, (void)id;
	return 1;
}

/* Whether any in-flight file sits directly in folder dir. l->mu held. */
static bool has_node_child(struct sl_land *l, uint64_t dir)
{
	for (size_t b = 0; b < NBUCKET; b++)
		for (struct node *n = l->by_name[b]; n; n = n->name_next)
			if (n->parent == dir)
				return true;
	return false;
}

int sl_land_rmdir(struct sl_land *l, uint64_t parent, const char *name)
{
	struct sl_txn *t;
	struct sl_inode i;
	uint64_t id;
	int rc;

	pthread_rwlock_wrlock(&l->op);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_cat_dirent_get(t, parent, name, &id);
	if (rc == 0)
		rc = sl_cat_inode_get(t, id, &i);
	if (rc == 0 && i.kind != SL_KIND_DIR)
		rc = ENOTDIR;
	if (rc == 0) {
		rc = sl_cat_dirent_each(t, id, NULL, any_child, NULL);
		if (rc == 1)
			rc = ENOTEMPTY;
	}
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? (find_name(l, parent, name) ? ENOTDIR : ENOENT) : rc;
		goto unlock;
	}
	pthread_mutex_lock(&l->mu);
	if (has_node_child(l, id))
		rc = ENOTEMPTY;
	pthread_mutex_unlock(&l->mu);
	if (rc == 0)
		rc = sl_catalog_write(l->cat, cancel_apply, &id);
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

int sl_land_unlink(struct sl_land *l, uint64_t parent, const char *name)
{
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n, *dead = NULL;
	uint64_t id;
	int rc = 0;

	pthread_rwlock_wrlock(&l->op);
	pthread_mutex_lock(&l->mu);
	n = find_name(l, parent, name);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&l->mu);
	if (n) {
		pthread_mutex_lock(&n->dmu);
		bool recorded = n->recorded;
		pthread_mutex_unlock(&n->dmu);
		/* a publish in flight may land it any moment: cancel either way */
		if (recorded || n->publishing) {
			id = n->id;
			rc = sl_catalog_write(l->cat, cancel_apply, &id);
		}
		if (rc == 0) {
			pthread_mutex_lock(&n->dmu);
			n->recorded = false;
			pthread_mutex_unlock(&n->dmu);
			pthread_mutex_lock(&l->mu);
			dead = unname_locked(l, n);
			pthread_mutex_unlock(&l->mu);
		}
		if (dead)
			free_node(l, dead);
		unref(l, n);
		goto unlock;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_cat_dirent_get(t, parent, name, &id);
	if (rc == 0)
		rc = sl_cat_inode_get(t, id, &i);
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc;
		goto unlock;
	}
	if (i.kind == SL_KIND_DIR) {
		rc = EISDIR;
		goto unlock;
	}
	rc = sl_catalog_write(l->cat, cancel_apply, &id);
	if (rc == 0 && i.storage == SL_STORE_BLOB)
		sl_blob_unlink(l->blobs, id);
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

/* ---- rename ---- */

struct dir_move {
	uint64_t id, parent, newparent;
	char name[SL_NAME_MAX + 1], newname[SL_NAME_MAX + 1];
	uint64_t replace; /* an empty folder replaced, or 0 */
};

static int dir_move_apply(struct sl_txn *t, void *arg)
{
	struct dir_move *m = arg;
	struct sl_inode i;
	int rc;

	if (m->replace && (rc = cancel(t, m->replace)))
		return rc;
	if ((rc = sl_cat_inode_get(t, m->id, &i)))
		return rc;
	i.parent = m->newparent;
	strcpy(i.name, m->newname);
	if ((rc = sl_cat_dirent_del(t, m->parent, m->name)) || (rc = sl_cat_inode_put(t, &i)))
		return rc;
	return sl_cat_dirent_put(t, m->newparent, m->newname, m->id);
}

/* Stops at the first file found under a folder (recursively): 1. */
static int any_file(struct sl_txn *t, uint64_t dir, int depth);

static int any_file_cb(void *ctx, const char *name, uint64_t id)
{
	struct sl_txn *t = ((void **)ctx)[0];
	int depth = *(int *)((void **)ctx)[1];
	struct sl_inode i;
	int rc;

	(void)name;
	if ((rc = sl_cat_inode_get(t, id, &i)))
		return rc;
	if (i.kind == SL_KIND_FILE)
		return 1;
	return any_file(t, id, depth + 1);
}

static int any_file(struct sl_txn *t, uint64_t dir, int depth)
{
	void *ctx[2] = {t, &depth};
	if (depth > 256)
		return SL_ECORRUPT;
	return sl_cat_dirent_each(t, dir, NULL, any_file_cb, ctx);
}

/*
 * Checks a folder rename and fills m; the caller commits it after ending t
 * (a read txn must not be held across a commit wait: growing the map waits
 * for every reader).
 */
static int rename_dir(struct sl_land *l, struct sl_txn *t, struct dir_move *m, unsigned flags)
{
	struct sl_inode target;
	uint64_t tid, up = m->newparent;
	int rc;

	for (int depth = 0; up != SL_ID_IN && up != SL_ID_ARCHIVE; depth++) {
		struct sl_inode d;
		if (up == m->id)
			return EINVAL; /* into its own subtree */
		if ((rc = sl_cat_inode_get(t, up, &d)) || depth > 4096)
			return rc ? rc : SL_ECORRUPT;
		up = d.parent;
	}
	pthread_mutex_lock(&l->mu);
	bool target_node = find_name(l, m->newparent, m->newname) != NULL;
	pthread_mutex_unlock(&l->mu);
	if (target_node)
		return (flags & RENAME_NOREPLACE) ? EEXIST : ENOTDIR;
	if (sl_cat_dirent_get(t, m->newparent, m->newname, &tid) == 0) {
		if (flags & RENAME_NOREPLACE)
			return EEXIST;
		if (tid == m->id)
			return -1; /* same folder: nothing to do */
		if ((rc = sl_cat_inode_get(t, tid, &target)))
			return rc;
		if (target.kind != SL_KIND_DIR)
			return ENOTDIR;
		rc = sl_cat_dirent_each(t, tid, NULL, any_child, NULL);
		pthread_mutex_lock(&l->mu);
		if (rc == 0 && has_node_child(l, tid))
			rc = 1;
		pthread_mutex_unlock(&l->mu);
		if (rc)
			return rc == 1 ? ENOTEMPTY : rc;
		m->replace = tid;
	}
	/* a landed name is final, and so are the folders above it */
	rc = any_file(t, m->id, 0);
	if (rc)
		return rc == 1 ? refuse(l, EPERM) : rc;
	return 0;
}

/* Renames in-flight file n; l->op held exclusive. */
static int rename_node(struct sl_land *l, struct node *n, struct node *replaced,
		       uint64_t newparent, const char *newname, bool temp)
{
	struct node *dead = NULL, *dead2 = NULL;
	struct rec r;
	uint64_t version = 0;
	bool was_recorded, land = false;
	int rc = 0;

	pthread_mutex_lock(&n->dmu);
	was_recorded = n->recorded;
	pthread_mutex_unlock(&n->dmu);
	bool replaced_recorded = false;
	if (replaced) {
		pthread_mutex_lock(&replaced->dmu);
		replaced_recorded = replaced->recorded;
		pthread_mutex_unlock(&replaced->dmu);
	}
	if (!temp) {
		/* renaming to a final path makes the bytes durable first */
		pthread_mutex_lock(&n->rec_mu);
		rc = make_durable(l, n, &r, &version);
		pthread_mutex_unlock(&n->rec_mu);
		if (rc) {
			free(r.data);
			poison(l, n, rc);
			return rc;
		}
		pthread_mutex_lock(&l->mu);
		land = n->writers == 0;
		r.old_parent = n->parent;
		strcpy(r.old_name, n->name);
		pthread_mutex_unlock(&l->mu);
		r.ino.parent = newparent;
		strcpy(r.ino.name, newname);
		r.land = land;
		r.ino.landed_ns = land ? now_ns() : 0;
		r.del_old = was_recorded;
		r.cancel_id = replaced_recorded ? replaced->id : 0;
		SL_FAULT("land.before_rename_record");
		rc = sl_catalog_write(l->cat, land_rec_apply, &r);
		SL_FAULT("land.after_rename_record");
		free(r.data);
	} else if (was_recorded || replaced_recorded) {
		uint64_t ids[2] = {was_recorded ? n->id : 0, replaced_recorded ? replaced->id : 0};
		for (int k = 0; k < 2 && rc == 0; k++)
			if (ids[k])
				rc = sl_catalog_write(l->cat, cancel_apply, &ids[k]);
	}
	if (rc)
		return rc;

	pthread_mutex_lock(&n->dmu);
	n->recorded = !temp;
	if (!temp && version > n->rec_version)
		n->rec_version = version;
	if (land)
		n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
	pthread_mutex_unlock(&n->dmu);
	if (replaced) {
		pthread_mutex_lock(&replaced->dmu);
		replaced->recorded = false;
		pthread_mutex_unlock(&replaced->dmu);
	}
	pthread_mutex_lock(&l->mu);
	if (replaced)
		dead = unname_locked(l, replaced);
	unlink_name(l, n);
	n->parent = newparent;
	strcpy(n->name, newname);
	link_name(l, n);
	if (land) {
		n->landed = true;
		dead2 = unname_locked(l, n);
	}
	pthread_mutex_unlock(&l->mu);
	if (dead)
		free_node(l, dead);
	if (dead2)
		free_node(l, dead2);
	if (land && l->on_land)
		l->on_land(l->on_land_ctx);
	return 0;
}

int sl_land_rename(struct sl_land *l, uint64_t parent, const char *name, uint64_t newparent,
		   const char *newname, unsigned flags)
{
	struct sl_txn *t;
	struct sl_inode src, dst;
	struct node *n, *target;
	uint64_t id;
	bool temp = true, have_src = false, have_dst = false;
	int rc;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return EINVAL;
	if (!valid_name(newname))
		return strlen(newname) > SL_NAME_MAX ? ENAMETOOLONG : EINVAL;

	pthread_rwlock_wrlock(&l->op);
	pthread_mutex_lock(&l->mu);
	n = find_name(l, parent, name);
	target = find_name(l, newparent, newname);
	if (n)
		n->refs++;
	if (target)
		target->refs++;
	pthread_mutex_unlock(&l->mu);

	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = check_dir(t, newparent);
	if (rc == 0 && !n) {
		rc = sl_cat_dirent_get(t, parent, name, &id);
		if (rc == 0)
			rc = sl_cat_inode_get(t, id, &src);
		have_src = rc == 0;
	}
	if (rc == 0 && !target && sl_cat_dirent_get(t, newparent, newname, &id) == 0) {
		rc = sl_cat_inode_get(t, id, &dst);
		have_dst = rc == 0;
	}
	if (rc == 0)
		rc = path_is_temp(l, t, newparent, newname, &temp);
	struct dir_move m = {0};
	if (rc == 0 && have_src && src.kind == SL_KIND_DIR) {
		m.id = src.id;
		m.parent = parent;
		m.newparent = newparent;
		strcpy(m.name, name);
		strcpy(m.newname, newname);
		rc = rename_dir(l, t, &m, flags);
	}
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc == -1 ? 0 : rc;
		goto unref;
	}
	if (have_src && src.kind == SL_KIND_DIR) {
		rc = sl_catalog_write(l->cat, dir_move_apply, &m);
		goto unref;
	}
	/* a landed name is final; a file being published is as good as landed */
	if (have_src || n->publishing) {
		rc = refuse(l, EPERM);
		goto unref;
	}
	if (target == n) {
		rc = 0;
		goto unref;
	}
	if ((target || have_dst) && (flags & RENAME_NOREPLACE)) {
		rc = EEXIST;
		goto unref;
	}
	if (have_dst) {
		rc = dst.kind == SL_KIND_DIR ? EISDIR : refuse(l, EPERM);
		goto unref;
	}
	if (target && target->publishing) {
		rc = refuse(l, EPERM);
		goto unref;
	}
	rc = rename_node(l, n, target, newparent, newname, temp);
unref:
	if (n)
		unref(l, n);
	if (target)
		unref(l, target);
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

/* ---- listing ---- */

struct entry {
	char *name;
	struct sl_attr a;
};

struct list_ctx {
	struct sl_land *l;
	struct sl_txn *t;
	struct entry *nodes; /* in-flight entries, sorted by id */
	size_t nnodes;
	int (*fn)(void *ctx, const char *name, const struct sl_attr *a);
	void *ctx;
};

static int by_id(const void *a, const void *b)
{
	uint64_t x = ((const struct entry *)a)->a.id, y = ((const struct entry *)b)->a.id;
	return x < y ? -1 : x > y;
}

static int list_cb(void *ctx, const char *name, uint64_t id)
{
	struct list_ctx *c = ctx;
	struct entry key = {.a.id = id};
	struct sl_inode i;
	struct sl_attr a;
	int rc;

	/* recorded in-flight files are in both places: memory wins */
	if (bsearch(&key, c->nodes, c->nnodes, sizeof(key), by_id))
		return 0;
	if ((rc = sl_cat_inode_get(c->t, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	attr_of_inode(&i, &a);
	return c->fn(c->ctx, name, &a);
}

int sl_land_list(struct sl_land *l, uint64_t dir,
		 int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx)
{
	struct list_ctx c = {.l = l, .fn = fn, .ctx = ctx};
	size_t cap = 0;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	for (size_t b = 0; b < NBUCKET && rc == 0; b++)
		for (struct node *n = l->by_name[b]; n; n = n->name_next) {
			if (n->parent != dir)
				continue;
			if (c.nnodes == cap) {
				cap = cap ? cap * 2 : 16;
				struct entry *e = realloc(c.nodes, cap * sizeof(*e));
				if (!e) {
					rc = ENOMEM;
					break;
				}
				c.nodes = e;
			}
			c.nodes[c.nnodes].name = strdup(n->name);
			attr_of_node(n, &c.nodes[c.nnodes].a);
			if (!c.nodes[c.nnodes++].name)
				rc = ENOMEM;
		}
	pthread_mutex_unlock(&l->mu);
	if (rc)
		goto free_nodes;
	qsort(c.nodes, c.nnodes, sizeof(*c.nodes), by_id);
	if ((rc = sl_catalog_read(l->cat, &c.t)))
		goto free_nodes;
	rc = check_dir(c.t, dir);
	if (rc == 0)
		rc = sl_cat_dirent_each(c.t, dir, NULL, list_cb, &c);
	sl_txn_end(c.t);
	for (size_t k = 0; k < c.nnodes && rc == 0; k++)
		rc = fn(ctx, c.nodes[k].name, &c.nodes[k].a);
free_nodes:
	for (size_t k = 0; k < c.nnodes; k++)
		free(c.nodes[k].name);
	free(c.nodes);
	return rc == SL_NOTFOUND ? ENOENT : rc;
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
	pthread_mutex_unlock(&l->mu);
	for (int e = 1; dirty && e < SL_ERRNO_MAX; e++)
		if (refused[e] && (rc = sl_cat_meta_put(t, refused_key(e, key, sizeof(key)),
							 refused[e])))
			return rc;
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

void sl_land_counters(struct sl_land *l, struct sl_land_counters *out)
{
	struct sl_txn *t;

	memset(out, 0, sizeof(*out));
	if (sl_catalog_read(l->cat, &t) == 0) {
		sl_cat_meta_get(t, "files_landed", &out->files_landed);
		sl_cat_meta_get(t, "bytes_landed", &out->bytes_landed);
		sl_txn_end(t);
	}
	out->in_flight = atomic_load(l->in_flight);
	pthread_mutex_lock(&l->mu);
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
	pthread_mutex_unlock(&l->mu);
	return lo;
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
			struct pub p = {.l = l, .n = n};
			p.attrs.mode = n->mode;
			p.attrs.uid = n->uid;
			p.attrs.gid = n->gid;
			p.attrs.mtime_ns = n->mtime_ns;
			p.attrs.ctime_ns = n->ctime_ns;
			p.attrs.landed_ns = now_ns();
			if (sl_catalog_write(l->cat, publish_apply, &p) == 0 && p.landed)
				n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
		}
		free_node(l, n);
	}
	atomic_store(l->in_flight, 0);
}
