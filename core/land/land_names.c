/* SPDX-License-Identifier: MIT */
/*
 * Namespace changes of the landing tree: folders, unlink, rename (which
 * lands a released file at a final name) and listing.
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

/* ---- folders ---- */

struct mkdir_rec {
	struct sl_inode ino;
};

static int mkdir_apply(struct sl_txn *t, void *arg)
{
	struct mkdir_rec *m = arg;
	uint64_t cur;
	int rc;

	if (sl_txn_dirent_get(t, m->ino.parent, m->ino.name, &cur) == 0)
		return EEXIST;
	if ((rc = sl_txn_inode_put(t, &m->ino)))
		return rc;
	return sl_txn_dirent_put(t, m->ino.parent, m->ino.name, m->ino.id);
}

int sl_land_mkdir(struct sl_land *l, uint64_t parent, const char *name, uint32_t mode,
		  uint32_t uid, uint32_t gid, struct sl_attr *out)
{
	struct mkdir_rec m;
	struct sl_txn *t;
	uint64_t id;
	int rc;

	if (!land_valid_name(name))
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
	m.ino.mtime_ns = m.ino.ctime_ns = land_now_ns();
	strcpy(m.ino.name, name);

	land_op_excl(l);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = land_check_dir(t, parent);
	sl_txn_end(t);
	if (rc)
		goto unlock;
	pthread_mutex_lock(&l->mu);
	if (land_find_name(l, parent, name))
		rc = EEXIST;
	pthread_mutex_unlock(&l->mu);
	if (rc == 0)
		rc = sl_catalog_write(l->cat, mkdir_apply, &m);
	if (rc == 0) {
		land_attr_of_inode(&m.ino, out);
		pthread_mutex_lock(&l->mu);
		land_touch_dir(l, parent);
		pthread_mutex_unlock(&l->mu);
	}
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

	land_op_excl(l);
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_txn_dirent_get(t, parent, name, &id);
	if (rc == 0)
		rc = sl_txn_inode_get(t, id, &i);
	if (rc == 0 && i.kind != SL_KIND_DIR)
		rc = ENOTDIR;
	if (rc == 0) {
		rc = sl_txn_dirent_each(t, id, NULL, any_child, NULL);
		if (rc == 1)
			rc = ENOTEMPTY;
	}
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? (land_find_name(l, parent, name) ? ENOTDIR : ENOENT) : rc;
		goto unlock;
	}
	pthread_mutex_lock(&l->mu);
	if (has_node_child(l, id))
		rc = ENOTEMPTY;
	pthread_mutex_unlock(&l->mu);
	if (rc == 0)
		rc = sl_catalog_write_freeing(l->cat, land_cancel_apply, &id);
	if (rc == 0) {
		pthread_mutex_lock(&l->mu);
		land_forget_dir(l, id);
		land_touch_dir(l, parent);
		pthread_mutex_unlock(&l->mu);
	}
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

struct unlink_landed {
	struct sl_land *l;
	uint64_t id;
};

/* A landed file goes only once no query still needs it (EBUSY). */
static int unlink_landed_apply(struct sl_txn *t, void *arg)
{
	struct unlink_landed *u = arg;
	if (sl_qindex_held(u->l->sources, t, u->id))
		return EBUSY;
	return land_cancel(t, u->id);
}

int sl_land_unlink(struct sl_land *l, uint64_t parent, const char *name)
{
	struct sl_txn *t;
	struct sl_inode i;
	struct node *n, *dead = NULL, **pub = NULL;
	size_t npub = 0;
	uint64_t id;
	int rc = 0;

	land_op_excl(l);
	pthread_mutex_lock(&l->mu);
	n = land_find_name(l, parent, name);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&l->mu);
	land_test_gap();
	if (n) {
		pthread_mutex_lock(&n->dmu);
		bool recorded = n->recorded;
		pthread_mutex_unlock(&n->dmu);
		pthread_mutex_lock(&l->mu);
		bool landing = n->publishing || n->landed;
		pthread_mutex_unlock(&l->mu);
		/*
		 * A publish in flight may land it any moment, or has landed it
		 * since the lookup: cancel either way, but a landed file goes only
		 * once no query needs it, as below.
		 */
		if (recorded || landing) {
			id = n->id;
			struct unlink_landed u = {l, id};
			rc = sl_catalog_write_freeing(l->cat, unlink_landed_apply, &u);
			if (rc == EBUSY)
				land_refuse(l, rc);
		}
		if (rc == 0) {
			pthread_mutex_lock(&n->dmu);
			n->recorded = false;
			n->keep_blob = false; /* landed meanwhile: its blob goes with it */
			pthread_mutex_unlock(&n->dmu);
			pthread_mutex_lock(&l->mu);
			if (n->bundle)
				land_bundle_leave(l, n, &pub, &npub);
			dead = land_unname_locked(l, n);
			land_touch_dir(l, parent);
			pthread_mutex_unlock(&l->mu);
		}
		if (dead)
			land_free_node(l, dead);
		land_unref(l, n);
		if (npub)
			land_publish(l, pub, npub);
		free(pub);
		goto unlock;
	}
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = sl_txn_dirent_get(t, parent, name, &id);
	if (rc == 0)
		rc = sl_txn_inode_get(t, id, &i);
	sl_txn_end(t);
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc;
		goto unlock;
	}
	if (i.kind == SL_KIND_DIR) {
		rc = EISDIR;
		goto unlock;
	}
	struct unlink_landed u = {l, id};
	rc = sl_catalog_write_freeing(l->cat, unlink_landed_apply, &u);
	if (rc == EBUSY)
		land_refuse(l, rc);
	if (rc == 0 && i.storage == SL_STORE_BLOB)
		sl_blob_unlink(l->blobs, id);
	if (rc == 0) {
		pthread_mutex_lock(&l->mu);
		land_touch_dir(l, parent);
		pthread_mutex_unlock(&l->mu);
	}
unlock:
	pthread_rwlock_unlock(&l->op);
	return rc;
}

/* ---- rename ---- */

/* A folder rename, checked by rename_dir(), carried out by land_rename_dir(). */
struct dir_move {
	uint64_t id, parent, newparent;
	char name[SL_NAME_MAX + 1], newname[SL_NAME_MAX + 1];
	uint64_t replace; /* an empty folder replaced, or 0 */
};

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

	for (int depth = 0; up != SL_ID_IN && up != SL_ID_ARCHIVE && up != SL_ID_OUT;
	     depth++) {
		struct sl_inode d;
		if (up == m->id)
			return EINVAL; /* into its own subtree */
		if ((rc = sl_txn_inode_get(t, up, &d)) || depth > 4096)
			return rc ? rc : SL_ECORRUPT;
		up = d.parent;
	}
	pthread_mutex_lock(&l->mu);
	bool target_node = land_find_name(l, m->newparent, m->newname) != NULL;
	pthread_mutex_unlock(&l->mu);
	if (target_node)
		return (flags & RENAME_NOREPLACE) ? EEXIST : ENOTDIR;
	if (sl_txn_dirent_get(t, m->newparent, m->newname, &tid) == 0) {
		if (flags & RENAME_NOREPLACE)
			return EEXIST;
		if (tid == m->id)
			return -1; /* same folder: nothing to do */
		if ((rc = sl_txn_inode_get(t, tid, &target)))
			return rc;
		if (target.kind != SL_KIND_DIR)
			return ENOTDIR;
		rc = sl_txn_dirent_each(t, tid, NULL, any_child, NULL);
		pthread_mutex_lock(&l->mu);
		if (rc == 0 && has_node_child(l, tid))
			rc = 1;
		pthread_mutex_unlock(&l->mu);
		if (rc)
			return rc == 1 ? ENOTEMPTY : rc;
		m->replace = tid;
	}
	return 0; /* landed files under it: land_rename_dir() refuses */
}

/*
 * Whether in-flight node n, found by name and referenced before l->op was
 * taken, is still an in-flight file under that name: its publish may have
 * finished meanwhile (the commit callback takes no l->op), or a storage
 * error poisoned it. 0: it is; EPERM: it is landed or being published (its
 * name is final); ENOENT: its name left in/. With l->op held exclusive no
 * publish can start, so the answer holds until l->op is released.
 */
static int node_gone(struct sl_land *l, struct node *n)
{
	pthread_mutex_lock(&l->mu);
	int rc = n->publishing || n->landed ? EPERM : !n->named ? ENOENT : 0;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

/* Renames in-flight file n; l->op held exclusive. */
static int rename_node(struct sl_land *l, struct node *n, struct node *replaced,
		       uint64_t newparent, const char *newname, bool temp)
{
	struct node *dead = NULL, *dead2 = NULL, **pub = NULL;
	size_t npub = 0;
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
		land_rec_lock(n);
		rc = land_make_durable(l, n, &r, &version, true);
		r.l = l;
		land_rec_unlock(n);
		if (rc) {
			free(r.data);
			return land_fail(l, n, rc);
		}
		r.n = n;
		pthread_mutex_lock(&l->mu);
		/* released: sealed, so no writer opens it while it lands */
		land = n->writers == 0;
		if (land)
			n->publishing = true;
		r.old_parent = n->parent;
		strcpy(r.old_name, n->name);
		pthread_mutex_unlock(&l->mu);
		r.ino.parent = newparent;
		strcpy(r.ino.name, newname);
		r.land = land;
		r.ino.landed_ns = land ? land_now_ns() : 0;
		r.del_old = was_recorded;
		r.cancel_id = replaced_recorded ? replaced->id : 0;
		SL_FAULT("land.before_rename_record");
		int64_t start = land_mono_ns();
		rc = sl_catalog_write(l->cat, land_rec_apply, &r);
		if (rc == 0 && land)
			land_latency_observe(l, start);
		SL_FAULT("land.after_rename_record");
		free(r.data);
		if (rc && land) {
			pthread_mutex_lock(&l->mu);
			n->publishing = false;
			pthread_mutex_unlock(&l->mu);
		}
	} else if (was_recorded || replaced_recorded) {
		uint64_t ids[2] = {was_recorded ? n->id : 0, replaced_recorded ? replaced->id : 0};
		for (int k = 0; k < 2 && rc == 0; k++)
			if (ids[k])
				rc = sl_catalog_write(l->cat, land_cancel_apply, &ids[k]);
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
	struct node **pub2 = NULL;
	size_t npub2 = 0;
	if (replaced && replaced->bundle)
		land_bundle_leave(l, replaced, &pub2, &npub2);
	if (replaced)
		dead = land_unname_locked(l, replaced);
	if (n->bundle)
		land_bundle_leave(l, n, &pub, &npub); /* it lands on its own now */
	land_touch_dir(l, n->parent);
	land_unlink_name(l, n);
	n->parent = newparent;
	strcpy(n->name, newname);
	land_link_name(l, n);
	land_touch_dir(l, newparent);
	if (land) {
		n->publishing = false;
		n->landed = true;
		dead2 = land_unname_locked(l, n);
	}
	pthread_mutex_unlock(&l->mu);
	if (dead)
		land_free_node(l, dead);
	if (dead2)
		land_free_node(l, dead2);
	if (npub)
		land_publish(l, pub, npub);
	if (npub2)
		land_publish(l, pub2, npub2);
	free(pub);
	free(pub2);
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
	if (!land_valid_name(newname))
		return strlen(newname) > SL_NAME_MAX ? ENAMETOOLONG : EINVAL;

	land_op_excl(l);
	pthread_mutex_lock(&l->mu);
	n = land_find_name(l, parent, name);
	target = land_find_name(l, newparent, newname);
	if (n)
		n->refs++;
	if (target)
		target->refs++;
	pthread_mutex_unlock(&l->mu);

	if ((rc = sl_catalog_read(l->cat, &t)))
		goto unlock;
	rc = land_check_dir(t, newparent);
	if (rc == 0 && !n) {
		rc = sl_txn_dirent_get(t, parent, name, &id);
		if (rc == 0)
			rc = sl_txn_inode_get(t, id, &src);
		have_src = rc == 0;
	}
	if (rc == 0 && !target && sl_txn_dirent_get(t, newparent, newname, &id) == 0) {
		rc = sl_txn_inode_get(t, id, &dst);
		have_dst = rc == 0;
	}
	if (rc == 0)
		rc = land_path_is_temp(l, t, newparent, newname, &temp);
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
	land_test_gap();
	if (rc) {
		rc = rc == SL_NOTFOUND ? ENOENT : rc == -1 ? 0 : rc;
		goto unref;
	}
	if (have_src && src.kind == SL_KIND_DIR) {
		rc = land_rename_dir(l, m.id, m.parent, m.name, m.newparent, m.newname, m.replace);
		if (rc == 0) {
			pthread_mutex_lock(&l->mu);
			if (m.replace)
				land_forget_dir(l, m.replace);
			land_touch_dir(l, parent);
			land_touch_dir(l, newparent);
			pthread_mutex_unlock(&l->mu);
		}
		goto unref;
	}
	/* a landed name is final; a file being published is as good as landed */
	if (have_src || (rc = node_gone(l, n)) == EPERM) {
		rc = land_refuse(l, EPERM);
		goto unref;
	}
	if (rc)
		goto unref;
	if (target && (rc = node_gone(l, target))) {
		if (rc == EPERM) {
			rc = land_refuse(l, EPERM);
			goto unref;
		}
		land_unref(l, target); /* poisoned meanwhile: its name is free */
		target = NULL;
		rc = 0;
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
		rc = dst.kind == SL_KIND_DIR ? EISDIR : land_refuse(l, EPERM);
		goto unref;
	}
	rc = rename_node(l, n, target, newparent, newname, temp);
unref:
	if (n)
		land_unref(l, n);
	if (target)
		land_unref(l, target);
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
	if (c->nnodes && bsearch(&key, c->nodes, c->nnodes, sizeof(key), by_id))
		return 0;
	if ((rc = sl_txn_inode_get(c->t, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	land_attr_of_inode(&i, &a);
	if (i.kind == SL_KIND_DIR) {
		pthread_mutex_lock(&c->l->mu);
		land_dir_times(c->l, &a);
		pthread_mutex_unlock(&c->l->mu);
	}
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
			land_attr_of_node(n, &c.nodes[c.nnodes].a);
			if (!c.nodes[c.nnodes++].name)
				rc = ENOMEM;
		}
	pthread_mutex_unlock(&l->mu);
	if (rc)
		goto free_nodes;
	if (c.nnodes)
		qsort(c.nodes, c.nnodes, sizeof(*c.nodes), by_id);
	if ((rc = sl_catalog_read(l->cat, &c.t)))
		goto free_nodes;
	rc = land_check_dir(c.t, dir);
	if (rc == 0)
		rc = sl_txn_dirent_each(c.t, dir, NULL, list_cb, &c);
	sl_txn_end(c.t);
	for (size_t k = 0; k < c.nnodes && rc == 0; k++)
		rc = fn(ctx, c.nodes[k].name, &c.nodes[k].a);
free_nodes:
	for (size_t k = 0; k < c.nnodes; k++)
		free(c.nodes[k].name);
	free(c.nodes);
	return rc == SL_NOTFOUND ? ENOENT : rc;
}
