/* SPDX-License-Identifier: MIT */
/*
 * Files of the landing namespace: lookups, create, open, read, write,
 * FLUSH, fsync, RELEASE and attributes (land_node.c has the node rules,
 * land_names.c the namespace changes).
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

/* ---- lookups ---- */

int sl_land_lookup(struct sl_land *l, uint64_t parent, const char *name, struct sl_attr *out)
{
	struct sl_txn *t;
	struct node *n;
	uint64_t id = 0;
	int rc;

	if (strlen(name) > SL_NAME_MAX)
		return ENAMETOOLONG;
	pthread_mutex_lock(&l->mu);
	n = land_find_name(l, parent, name);
	if (n)
		id = n->id;
	pthread_mutex_unlock(&l->mu);
	if (!id) {
		if ((rc = sl_catalog_read(l->cat, &t)))
			return rc;
		rc = sl_txn_dirent_get(t, parent, name, &id);
		sl_txn_end(t);
		if (rc)
			return rc == SL_NOTFOUND ? ENOENT : rc;
	}
	return sl_land_getattr(l, id, out);
}

int sl_land_getattr(struct sl_land *l, uint64_t id, struct sl_attr *out)
{
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n;
	int rc;

	pthread_mutex_lock(&l->mu);
	n = land_find_id(l, id);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&l->mu);
	if (n) {
		land_attr_of_node(n, out);
		land_unref(l, n);
		return 0;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	rc = sl_txn_inode_get(t, id, &i);
	sl_txn_end(t);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	land_attr_of_inode(&i, out);
	if (i.kind == SL_KIND_DIR) {
		pthread_mutex_lock(&l->mu);
		land_dir_times(l, out);
		pthread_mutex_unlock(&l->mu);
	}
	return 0;
}

int sl_land_root(struct sl_land *l, uint64_t id, uint64_t *root)
{
	struct sl_txn *t;
	struct sl_inode i;
	int rc, depth = 0;

	pthread_mutex_lock(&l->mu);
	struct node *n = land_find_id(l, id);
	if (n)
		id = n->parent;
	pthread_mutex_unlock(&l->mu);
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	while (id != SL_ID_IN && id != SL_ID_ARCHIVE && id != SL_ID_OUT) {
		if ((rc = sl_txn_inode_get(t, id, &i)) || ++depth > 4096)
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
	if (!land_valid_name(name))
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
	n->mtime_ns = n->ctime_ns = n->atime_ns = land_now_ns();
	n->version = 1; /* created: its first FLUSH records it, even empty */
	n->named = true;
	n->writers = 1;
	n->refs = 2; /* named + the handle */
	pthread_mutex_init(&n->dmu, NULL);
	pthread_cond_init(&n->rec_cv, NULL);

	pthread_rwlock_rdlock(&l->op);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = land_check_dir(t, parent);
	if (rc == 0)
		rc = land_path_is_temp(l, t, parent, name, &temp);
	if (rc == 0 && sl_txn_dirent_get(t, parent, name, &other) == 0)
		rc = EEXIST;
	sl_txn_end(t);
	if (rc == 0 && l->strict && !temp)
		rc = land_refuse(l, EPERM);
	if (rc)
		goto unlock;
	pthread_mutex_lock(&l->mu);
	if (land_find_name(l, parent, name)) {
		rc = EEXIST;
	} else {
		land_link_name(l, n);
		n->id_next = l->by_id[id % NBUCKET];
		l->by_id[id % NBUCKET] = n;
		n->in_id_table = true;
		atomic_fetch_add(l->in_flight, 1);
		land_touch_dir(l, parent);
	}
	pthread_mutex_unlock(&l->mu);
unlock:
	pthread_rwlock_unlock(&l->op);
	if (rc) {
		land_free_node(l, n);
		free(h);
		return rc;
	}
	h->n = n;
	h->write = true;
	h->wrote = true;
	land_attr_of_node(n, out);
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
		n->mtime_ns = n->ctime_ns = land_now_ns();
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
	n = land_find_id(l, id);
	rc = 0;
	if (n && atomic_load(&n->poison)) {
		rc = EIO; /* poisoned: its name left in/, its bytes never land */
		n = NULL;
	} else if (n && n->publishing && (wr || (flags & O_TRUNC))) {
		rc = EPERM; /* released at a final name: landed for every caller */
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
		return rc == EPERM ? land_refuse(l, rc) : rc;
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
	rc = sl_txn_inode_get(t, id, &i);
	if (rc == 0 && i.kind == SL_KIND_DIR)
		rc = EISDIR;
	else if (rc == 0 && (wr || (flags & O_TRUNC)))
		rc = land_refuse(l, EPERM); /* landed: immutable, like chattr +i */
	if (rc == 0 && i.storage == SL_STORE_INLINE) {
		const void *d;
		size_t len;
		rc = sl_txn_data_get(t, id, &d, &len);
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
	/* never past st_size, whatever fallocate reserved */
	uint64_t avail = (uint64_t)off < n->size ? n->size - (uint64_t)off : 0;
	pthread_mutex_unlock(&n->dmu);
	if (size > avail)
		size = (size_t)avail;
	if (size == 0)
		return 0;
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
	n->mtime_ns = n->ctime_ns = land_now_ns();
}

/*
 * A write or truncate by anyone but root clears the set-id bits, as the
 * kernel does on local file systems (FUSE_WRITE_KILL_SUIDGID does not reach
 * us through libfuse 3.14). n->dmu held.
 */
static void kill_suid(struct node *n, uint32_t uid)
{
	if (uid == 0 || !(n->mode & (S_ISUID | S_ISGID)))
		return;
	n->mode &= ~(uint32_t)S_ISUID;
	if (n->mode & S_IXGRP)
		n->mode &= ~(uint32_t)S_ISGID;
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
	if ((rc = SL_FAULT_ERR("blob.write")))
		return land_fail(h->l, n, rc);
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
	if (rc)
		return land_fail(h->l, n, rc);
	h->wrote = true;
	return 0;
}

int sl_land_write_fd(struct sl_handle *h, size_t size, off_t off, uint32_t uid, int *fd)
{
	struct node *n = h->n;
	int rc = 0;

	if (!n || !h->write)
		return EBADF;
	if ((rc = atomic_load(&n->poison)))
		return rc;
	pthread_mutex_lock(&n->dmu);
	kill_suid(n, uid);
	if (n->fd < 0 && (uint64_t)off + size > SL_INLINE_MAX)
		rc = spill(h->l, n);
	*fd = n->fd;
	pthread_mutex_unlock(&n->dmu);
	if (rc)
		return land_fail(h->l, n, rc);
	return 0;
}

int sl_land_write_done(struct sl_handle *h, size_t size, off_t off, int err)
{
	struct node *n = h->n;

	if (err)
		return land_fail(h->l, n, err);
	pthread_mutex_lock(&n->dmu);
	wrote(n, (uint64_t)off + size);
	pthread_mutex_unlock(&n->dmu);
	h->wrote = true;
	return 0;
}

/* A folder renamed to a final name takes the files flushed so far. */
static void note_flushed(struct node *n, uint64_t version)
{
	pthread_mutex_lock(&n->dmu);
	if (version > n->flushed_version)
		n->flushed_version = version;
	pthread_mutex_unlock(&n->dmu);
}

/* A FLUSH whose record was queued: its version counts as flushed once durable. */
struct flush {
	struct node *n;
	uint64_t version;
	void (*done)(void *ctx, int rc);
	void *ctx;
};

static void flush_done(void *arg, int rc)
{
	struct flush *f = arg;
	void (*done)(void *, int) = f->done;
	void *ctx = f->ctx;

	if (rc == 0)
		note_flushed(f->n, f->version);
	free(f);
	done(ctx, rc);
}

int sl_land_flush_async(struct sl_handle *h, void (*done)(void *ctx, int rc), void *ctx,
			bool *pending)
{
	struct sl_land *l = h->l;
	struct flush *f;
	bool queued;
	int rc;

	*pending = false;
	if (!h->n || !h->write)
		return 0;
	if ((rc = atomic_load(&h->n->poison)))
		return rc;
	if (!h->wrote)
		return 0;
	if (!(f = malloc(sizeof(*f))))
		return ENOMEM;
	*f = (struct flush){.n = h->n, .done = done, .ctx = ctx};
	pthread_mutex_lock(&h->n->dmu);
	f->version = h->n->version;
	pthread_mutex_unlock(&h->n->dmu);
	pthread_rwlock_rdlock(&l->op);
	rc = land_record_queue(l, h->n, flush_done, f, &queued);
	pthread_rwlock_unlock(&l->op);
	if (queued) {
		*pending = true;
		return 0;
	}
	if (rc == 0)
		note_flushed(h->n, f->version);
	free(f);
	return rc;
}

/* sl_land_flush(): the async one, waited for. */
struct flush_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rc;
};

static void flush_waited(void *ctx, int rc)
{
	struct flush_wait *w = ctx;
	pthread_mutex_lock(&w->mu);
	w->rc = rc;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int sl_land_flush(struct sl_handle *h)
{
	struct flush_wait w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	bool pending;
	int rc = sl_land_flush_async(h, flush_waited, &w, &pending);

	if (pending) {
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		rc = w.rc;
		pthread_mutex_unlock(&w.mu);
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
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
	rc = land_record_locked(l, h->n, true);
	pthread_rwlock_unlock(&l->op);
	return rc;
}

/*
 * The last writer's RELEASE of a final-named file seals it: from here on it
 * is landed for every caller (opens for write and truncates get EPERM), even
 * while the commit that lands it is on its way. Bytes changed since the last
 * FLUSH (mmap) are recorded first. A bundle member waits for its bundle.
 */
static void release_writer(struct sl_land *l, struct node *n)
{
	struct node **pub = NULL;
	size_t npub = 0;
	struct sl_txn *t;
	bool seal, temp = true;
	uint64_t parent;
	char name[SL_NAME_MAX + 1];

	/* l->op held shared: renames, which change the path, wait */
	pthread_rwlock_rdlock(&l->op);
	pthread_mutex_lock(&l->mu);
	parent = n->parent;
	memcpy(name, n->name, sizeof(name));
	pthread_mutex_unlock(&l->mu);
	if (sl_catalog_read(l->cat, &t) == 0) {
		if (land_path_is_temp(l, t, parent, name, &temp))
			temp = true;
		sl_txn_end(t);
	}
	pthread_mutex_lock(&l->mu);
	seal = --n->writers == 0 && n->named && !n->landed && !n->publishing &&
	       !atomic_load(&n->poison) && !temp;
	if (seal)
		n->publishing = true;
	if (n->writers == 0 && temp)
		n->released_ns = land_now_ns();
	pthread_mutex_unlock(&l->mu);
	if (!seal)
		goto unlock;
	int rc = land_record_locked(l, n, false);
	pthread_mutex_lock(&l->mu);
	if (rc == 0 && n->bundle) {
		land_bundle_released(l, n, &pub, &npub);
	} else if (rc == 0) {
		n->refs++; /* the publish's */
		pub = NULL;
		npub = 1;
	} else {
		n->publishing = false; /* poisoned, or it lands at the next FLUSH */
	}
	pthread_mutex_unlock(&l->mu);
	if (npub)
		land_publish(l, pub ? pub : &n, npub);
	free(pub);
unlock:
	pthread_rwlock_unlock(&l->op);
}

void sl_land_release(struct sl_handle *h)
{
	if (!h)
		return;
	struct sl_land *l = h->l;
	struct node *n = h->n;

	if (n && h->write)
		release_writer(l, n);
	if (n)
		land_unref(l, n);
	if (h->fd >= 0)
		close(h->fd);
	free(h->data);
	free(h);
}

/*
 * Reserves space; errors (ENOSPC included) fail the call only, since no
 * accepted byte is at stake. FALLOC_FL_KEEP_SIZE reserves past the end
 * without changing st_size (reads stop there; landing trims the blob).
 */
int sl_land_fallocate(struct sl_handle *h, int mode, off_t off, off_t len)
{
	struct node *n = h->n;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	int rc = 0;

	if (!n || !h->write)
		return land_refuse(h->l, EPERM);
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return EOPNOTSUPP;
	if (off < 0 || len <= 0)
		return EINVAL;
	if ((rc = atomic_load(&n->poison)))
		return rc;
	pthread_mutex_lock(&n->dmu);
	if (n->fd < 0 && end > SL_INLINE_MAX && !keep)
		rc = spill(h->l, n);
	if (rc == 0 && n->fd >= 0 && fallocate(n->fd, keep ? FALLOC_FL_KEEP_SIZE : 0, off, len))
		rc = errno;
	pthread_mutex_unlock(&n->dmu);
	if (rc == EOPNOTSUPP && !keep)
		rc = 0; /* the truncate below still gives it its size */
	if (rc)
		return rc;
	if (!keep && end > n->size && (rc = truncate_node(n, end)) == 0)
		h->wrote = true;
	return rc;
}

/* ---- attributes ---- */

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
	if ((s->flags & SL_SET_ATIME) && s->atime_ns != i->atime_ns)
		return false;
	if (s->flags & (SL_SET_MTIME_NOW | SL_SET_ATIME_NOW))
		return false;
	return true;
}

/*
 * Applies the attribute changes of s (all but the size) to the fields of an
 * inode or a node. A chown clears the set-id bits (of a file), as the kernel
 * does; an explicit mode in the same call wins.
 */
static void set_attrs(const struct sl_setattr *s, struct sl_inode *i, bool file)
{
	int64_t now = land_now_ns();

	if ((s->flags & (SL_SET_UID | SL_SET_GID)) && file && !(s->flags & SL_SET_MODE)) {
		i->mode &= ~(uint32_t)S_ISUID;
		if (i->mode & S_IXGRP)
			i->mode &= ~(uint32_t)S_ISGID;
	}
	if (s->flags & SL_SET_MODE)
		i->mode = (i->mode & S_IFMT) | (s->mode & 07777);
	if (s->flags & SL_SET_UID)
		i->uid = s->uid;
	if (s->flags & SL_SET_GID)
		i->gid = s->gid;
	if (s->flags & SL_SET_MTIME)
		i->mtime_ns = s->mtime_ns;
	if (s->flags & SL_SET_MTIME_NOW)
		i->mtime_ns = now;
	if (s->flags & SL_SET_ATIME)
		i->atime_ns = s->atime_ns;
	if (s->flags & SL_SET_ATIME_NOW)
		i->atime_ns = now;
	i->ctime_ns = now;
}

/* An attribute change of a recorded or landed file: its record takes it. */
struct attr_put {
	uint64_t id;
	struct node *n;           /* the in-flight file, whose attributes win; or NULL */
	const struct sl_setattr *s; /* for a landed file: the change */
	struct sl_inode ino;      /* out: the record as written */
	bool found;
};

static int attr_put_apply(struct sl_txn *t, void *arg)
{
	struct attr_put *a = arg;
	int rc = sl_txn_inode_get(t, a->id, &a->ino);

	a->found = false;
	if (rc == SL_NOTFOUND)
		return 0; /* unlinked, or not recorded yet: its record will take them */
	if (rc)
		return rc;
	if (a->n)
		land_attrs_to_inode(a->n, &a->ino);
	else
		set_attrs(a->s, &a->ino, a->ino.kind == SL_KIND_FILE);
	a->found = true;
	return sl_txn_inode_put(t, &a->ino);
}

/* setattr of an in-flight file (sealed ones included). */
static int setattr_node(struct sl_land *l, struct node *n, struct sl_handle *h,
			const struct sl_setattr *s, struct sl_attr *out)
{
	bool joined = false;
	int rc = 0;

	if (s->flags & SL_SET_SIZE) {
		/*
		 * A truncate by path is a writer for the length of the call: if
		 * it is ordered before the last RELEASE it joins that landing
		 * (the seal waits for it, and it seals if it is the last one);
		 * after it, EPERM. Checking the seal and then truncating
		 * without joining let a RELEASE in between land the old bytes
		 * under a truncate that had succeeded, and one whose landing
		 * had finished since the lookup truncate the landed blob. The
		 * attributes of the same call are set before it lets go, so
		 * that a record it seals holds them.
		 */
		bool by_path = !(h && h->write);
		pthread_mutex_lock(&n->dmu);
		bool same = s->size == n->size;
		pthread_mutex_unlock(&n->dmu);
		pthread_mutex_lock(&l->mu);
		bool sealed = n->publishing || n->landed; /* landed since our lookup */
		if (!sealed && by_path && !same)
			n->writers++;
		pthread_mutex_unlock(&l->mu);
		if (sealed && !same)
			return land_refuse(l, EPERM); /* landed for every caller */
		joined = by_path && !same;
		pthread_mutex_lock(&n->dmu);
		if (n->fd < 0 && s->size > SL_INLINE_MAX)
			rc = spill(l, n);
		if (rc == 0)
			kill_suid(n, s->caller);
		pthread_mutex_unlock(&n->dmu);
		/* no byte accepted is at stake: a failed truncate fails alone */
		if (rc == 0 && !same)
			rc = truncate_node(n, s->size);
		if (rc)
			goto out;
		if (h)
			h->wrote = true;
	}
	if (s->flags & ~(unsigned)SL_SET_SIZE) {
		/*
		 * Serialized with the file's records: a record then holds these
		 * attributes, or the put below follows it. A recorded file's
		 * attributes are durable when the call returns, like a landed one's.
		 */
		land_rec_lock(n);
		struct sl_inode i;
		land_attrs_to_inode(n, &i);
		set_attrs(s, &i, true);
		pthread_mutex_lock(&n->dmu);
		n->mode = i.mode;
		n->uid = i.uid;
		n->gid = i.gid;
		n->mtime_ns = i.mtime_ns;
		n->ctime_ns = i.ctime_ns;
		n->atime_ns = i.atime_ns;
		bool recorded = n->recorded;
		pthread_mutex_unlock(&n->dmu);
		pthread_mutex_lock(&l->mu);
		recorded |= n->publishing;
		pthread_mutex_unlock(&l->mu);
		if (recorded) {
			struct attr_put a = {.id = n->id, .n = n};
			rc = sl_catalog_write(l->cat, attr_put_apply, &a);
		}
		land_rec_unlock(n);
	}
out:
	if (joined)
		release_writer(l, n);
	if (rc == 0)
		land_attr_of_node(n, out);
	return rc;
}

int sl_land_setattr(struct sl_land *l, uint64_t id, struct sl_handle *h,
		    const struct sl_setattr *s, struct sl_attr *out)
{
	struct sl_txn *t;
	struct attr_put a = {.id = id, .s = s};
	struct node *n;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	n = land_find_id(l, id);
	if (n && !n->landed)
		n->refs++;
	else
		n = NULL;
	pthread_mutex_unlock(&l->mu);
	land_test_gap(); /* the file's RELEASE and publish may finish here */
	if (n) {
		rc = setattr_node(l, n, h, s, out);
		land_unref(l, n);
		return rc;
	}

	/* landed files and folders: their records */
	land_op_excl(l);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_txn_inode_get(t, id, &a.ino);
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc;
		goto unlock;
	}
	if ((s->flags & SL_SET_SIZE) && s->size != a.ino.size) {
		rc = a.ino.kind == SL_KIND_DIR ? EISDIR : land_refuse(l, EPERM);
		goto unlock;
	}
	if (a.ino.kind == SL_KIND_DIR) {
		/* a folder's times as stat shows them: the uncommitted ones win */
		struct sl_attr shown;
		land_attr_of_inode(&a.ino, &shown);
		pthread_mutex_lock(&l->mu);
		land_dir_times(l, &shown);
		pthread_mutex_unlock(&l->mu);
		a.ino.mtime_ns = shown.mtime_ns;
		a.ino.ctime_ns = shown.ctime_ns;
	}
	if (!is_noop(&a.ino, s)) {
		if (a.ino.kind == SL_KIND_DIR) {
			/* its record takes the times now: no older change may follow */
			pthread_mutex_lock(&l->mu);
			land_forget_dir(l, id);
			pthread_mutex_unlock(&l->mu);
		}
		rc = sl_catalog_write(l->cat, attr_put_apply, &a);
		if (rc == 0 && !a.found)
			rc = ENOENT;
	}
	if (rc == 0) {
		land_attr_of_inode(&a.ino, out);
		if (a.ino.kind == SL_KIND_DIR) {
			pthread_mutex_lock(&l->mu);
			land_dir_times(l, out);
			pthread_mutex_unlock(&l->mu);
		}
	}
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}
