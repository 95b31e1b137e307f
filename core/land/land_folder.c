/* SPDX-License-Identifier: MIT */
/*
 * Folders of the landing tree: a folder rename re-evaluates the in-flight
 * files under it (DESIGN §1), so a bundle staged under a temporary folder
 * name lands whole when the folder takes its final name; and the folders'
 * times, changed in memory by every entry made or removed and committed
 * with the next group commit.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "catalog.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "land_int.h"
#include "log.h"
#include "temp.h"

/* Bundles with more blob-backed files than this are synced by one syncfs */
#define SYNCFS_MIN 8
#define DIRT_NBUCKET 1024

/*
 * A bundle: the files a folder rename recorded together while some of them
 * were still open for write. They land in one commit once every member is
 * released. Guarded by l->mu.
 */
struct bundle {
	struct node **v; /* members, each holding a reference */
	size_t n;
	int pending;     /* members with bundle_pending set */
};

/* Hands the members of a ready bundle out and frees it. l->mu held. */
static void bundle_hand_out(struct bundle *b, struct node ***v, size_t *nv)
{
	for (size_t k = 0; k < b->n; k++)
		b->v[k]->bundle = NULL;
	*v = b->v;
	*nv = b->n;
	free(b);
}

void land_bundle_leave(struct sl_land *l, struct node *n, struct node ***v, size_t *nv)
{
	struct bundle *b = n->bundle;

	(void)l;
	*v = NULL;
	*nv = 0;
	for (size_t k = 0; k < b->n; k++)
		if (b->v[k] == n) {
			b->v[k] = b->v[--b->n];
			break;
		}
	if (n->bundle_pending) {
		n->bundle_pending = false;
		b->pending--;
	}
	n->bundle = NULL;
	n->refs--; /* the bundle's; the caller holds another */
	if (b->n == 0) {
		free(b->v);
		free(b);
	} else if (b->pending == 0) {
		bundle_hand_out(b, v, nv);
	}
}

void land_bundle_released(struct sl_land *l, struct node *n, struct node ***v, size_t *nv)
{
	struct bundle *b = n->bundle;

	(void)l;
	*v = NULL;
	*nv = 0;
	if (n->bundle_pending) {
		n->bundle_pending = false;
		b->pending--;
	}
	if (b->pending == 0)
		bundle_hand_out(b, v, nv);
}

void land_bundle_drop(struct node *n)
{
	struct bundle *b = n->bundle;

	if (!b)
		return;
	n->bundle = NULL;
	if (--b->n == 0) {
		free(b->v);
		free(b);
	}
}

/* ---- folder rename ---- */

struct subdir {
	uint64_t id;
	bool temp; /* a folder between it and the renamed one is temporary */
};

struct walk {
	struct sl_land *l;
	struct sl_txn *t;
	struct subdir *v;
	size_t n, cap;
	bool temp;   /* of the folder being listed */
	bool landed; /* a landed file was found */
};

static int walk_cb(void *ctx, const char *name, uint64_t id)
{
	struct walk *w = ctx;
	struct sl_inode i;
	int rc;

	if ((rc = sl_txn_inode_get(w->t, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	if (i.kind == SL_KIND_FILE) {
		if (i.state == SL_STATE_LANDED) {
			w->landed = true;
			return 1;
		}
		return 0;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap * 2;
		struct subdir *v = realloc(w->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n].id = id;
	w->v[w->n++].temp = w->temp || sl_temp_match(w->l->temp, name);
	return 0;
}

/* Lists the folders under dir (dir first); stops at a landed file. */
static int walk_folders(struct walk *w, uint64_t dir)
{
	int rc = 0;

	w->cap = 16;
	if (!(w->v = malloc(w->cap * sizeof(*w->v))))
		return ENOMEM;
	w->v[0].id = dir;
	w->v[0].temp = false;
	w->n = 1;
	for (size_t k = 0; k < w->n && rc == 0 && !w->landed; k++) {
		if (w->n > 1000000)
			return SL_ECORRUPT;
		w->temp = w->v[k].temp;
		rc = sl_txn_dirent_each(w->t, w->v[k].id, NULL, walk_cb, w);
	}
	return rc == 1 ? 0 : rc;
}

static int by_subdir(const void *a, const void *b)
{
	uint64_t x = ((const struct subdir *)a)->id, y = ((const struct subdir *)b)->id;
	return x < y ? -1 : x > y;
}

/* What a folder rename does to one in-flight file under it. */
struct member {
	struct node *n;    /* with a reference */
	struct rec r;      /* when it joins: its record */
	uint64_t version;  /* the bytes the record holds */
	bool join;         /* becomes final, flushed: recorded by the rename */
	bool cancel;       /* becomes temporary: its record goes */
	bool sealed;       /* released: sealed by the rename */
	bool cancel_after; /* poisoned while it was recorded: cancel the record */
};

struct move {
	uint64_t id, parent, newparent, replace;
	const char *name, *newname;
	struct member *m;
	size_t n;
	const struct subdir *dirs; /* the folder and the folders under it */
	size_t ndirs;
	bool land;         /* every joining file is released: they land now */
	int64_t landed_ns; /* when they land (their age clock) */
};

static int landed_cb(void *ctx, const char *name, uint64_t id)
{
	struct sl_inode i;
	int rc;

	(void)name;
	if ((rc = sl_txn_inode_get(ctx, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	return i.kind == SL_KIND_FILE && i.state == SL_STATE_LANDED;
}

static int move_apply(struct sl_txn *t, void *arg)
{
	struct move *mv = arg;
	struct sl_inode i;
	int rc;

	/*
	 * A file under it may have landed since the walk's snapshot: its
	 * publish committed, and its node left the table before find_members()
	 * looked. Folders cannot come or go meanwhile (l->op is exclusive).
	 */
	for (size_t k = 0; k < mv->ndirs; k++)
		if ((rc = sl_txn_dirent_each(t, mv->dirs[k].id, NULL, landed_cb, t)))
			return rc == 1 ? EPERM : rc;
	if (mv->replace && (rc = land_cancel(t, mv->replace)))
		return rc;
	if ((rc = sl_txn_inode_get(t, mv->id, &i)))
		return rc;
	i.parent = mv->newparent;
	strcpy(i.name, mv->newname);
	if ((rc = sl_txn_dirent_del(t, mv->parent, mv->name)) || (rc = sl_txn_inode_put(t, &i)) ||
	    (rc = sl_txn_dirent_put(t, mv->newparent, mv->newname, mv->id)))
		return rc;
	for (size_t k = 0; k < mv->n; k++) {
		struct member *m = &mv->m[k];
		if (m->cancel && (rc = land_cancel(t, m->n->id)))
			return rc;
		if (m->join) {
			m->r.land = mv->land;
			m->r.ino.landed_ns = mv->land ? mv->landed_ns : 0;
			if ((rc = land_rec_apply(t, &m->r)))
				return rc;
		}
	}
	return 0;
}

/* Finds the in-flight files under the folders w->v; l->mu held. */
static int find_members(struct sl_land *l, struct walk *w, bool outer_old, bool outer_new,
			struct move *mv)
{
	size_t cap = 0;

	qsort(w->v, w->n, sizeof(*w->v), by_subdir);
	for (size_t b = 0; b < LAND_NBUCKET; b++)
		for (struct node *n = l->by_name[b]; n; n = n->name_next) {
			struct subdir key = {.id = n->parent}, *d;
			if (!(d = bsearch(&key, w->v, w->n, sizeof(key), by_subdir)))
				continue;
			if (n->publishing)
				return EPERM; /* released at a final name: as good as landed */
			bool inner = d->temp || sl_temp_match(l->temp, n->name);
			if (inner || outer_old == outer_new || atomic_load(&n->poison))
				continue; /* its temporariness does not change */
			if (mv->n == cap) {
				cap = cap ? cap * 2 : 16;
				struct member *v = realloc(mv->m, cap * sizeof(*v));
				if (!v)
					return ENOMEM;
				mv->m = v;
			}
			struct member *m = &mv->m[mv->n++];
			memset(m, 0, sizeof(*m));
			m->n = n;
			n->refs++;
			if (outer_new) {
				pthread_mutex_lock(&n->dmu);
				m->cancel = n->recorded;
				pthread_mutex_unlock(&n->dmu);
			} else {
				/* every close sends a FLUSH first, whatever RELEASE lags */
				pthread_mutex_lock(&n->dmu);
				m->join = n->writers == 0 || n->flushed_version == n->version;
				pthread_mutex_unlock(&n->dmu);
			}
		}
	return 0;
}

/* Makes the joining files durable: one syncfs for many blobs. l->op held. */
static int make_members_durable(struct sl_land *l, struct move *mv)
{
	size_t blobs = 0;
	int rc = 0;

	for (size_t k = 0; k < mv->n; k++)
		if (mv->m[k].join) {
			pthread_mutex_lock(&mv->m[k].n->dmu);
			blobs += mv->m[k].n->size > SL_INLINE_MAX;
			pthread_mutex_unlock(&mv->m[k].n->dmu);
		}
	bool one_sync = blobs >= SYNCFS_MIN;
	for (size_t k = 0; k < mv->n && rc == 0; k++) {
		struct member *m = &mv->m[k];
		if (!m->join)
			continue;
		land_rec_lock(m->n);
		rc = land_make_durable(l, m->n, &m->r, &m->version, !one_sync);
		land_rec_unlock(m->n);
		m->r.l = l;
		m->r.n = m->n;
		pthread_mutex_lock(&l->mu);
		m->r.ino.parent = m->n->parent;
		strcpy(m->r.ino.name, m->n->name);
		pthread_mutex_unlock(&l->mu);
		if (rc)
			land_fail(l, m->n, rc);
	}
	if (rc == 0 && one_sync && (rc = sl_blobs_syncfs(l->blobs)) == 0)
		for (size_t k = 0; k < mv->n; k++)
			if (mv->m[k].join) {
				pthread_mutex_lock(&mv->m[k].n->dmu);
				mv->m[k].n->blob_named = true;
				pthread_mutex_unlock(&mv->m[k].n->dmu);
			}
	return rc;
}

/*
 * Seals the released joining files, so that no writer opens them while they
 * land; whether all joining files are released. l->mu held.
 */
static bool seal_released(struct move *mv)
{
	bool all = true;

	for (size_t k = 0; k < mv->n; k++) {
		struct member *m = &mv->m[k];
		if (!m->join)
			continue;
		if (m->n->writers == 0 && m->n->named) {
			m->n->publishing = true;
			m->sealed = true;
		} else {
			all = false;
		}
	}
	return all;
}

/* After the commit: node states follow the catalog. l->mu held. */
static void moved_locked(struct sl_land *l, struct move *mv, struct node ***pub, size_t *npub,
			 struct node ***dead, size_t *ndead)
{
	struct bundle *b = NULL;

	for (size_t k = 0; k < mv->n; k++) {
		struct member *m = &mv->m[k];
		struct node *n = m->n, **v;
		size_t nv;
		if (m->cancel) {
			pthread_mutex_lock(&n->dmu);
			n->recorded = false;
			pthread_mutex_unlock(&n->dmu);
			if (n->bundle) {
				land_bundle_leave(l, n, &v, &nv);
				struct node **all = nv ? realloc(*pub, (*npub + nv) * sizeof(*all))
						       : NULL;
				if (all) {
					memcpy(all + *npub, v, nv * sizeof(*v));
					*pub = all;
					*npub += nv;
				}
				/* without memory they stay sealed: the next start lands them */
				free(v);
			}
		}
		if (!m->join)
			continue;
		if (!mv->land && atomic_load(&n->poison)) {
			/* a write failed meanwhile: it never lands, its record goes */
			m->cancel_after = true;
			continue;
		}
		pthread_mutex_lock(&n->dmu);
		n->recorded = true;
		if (m->version > n->rec_version)
			n->rec_version = m->version;
		if (mv->land)
			n->keep_blob = n->fd >= 0 && n->size > SL_INLINE_MAX;
		pthread_mutex_unlock(&n->dmu);
		if (mv->land) {
			n->publishing = false;
			n->landed = true;
			struct node *d = land_unname_locked(l, n);
			if (d)
				(*dead)[(*ndead)++] = d;
			continue;
		}
		if (!b && !(b = calloc(1, sizeof(*b))))
			continue; /* recorded: lands at its release or at the next start */
		if (!b->v && !(b->v = calloc(mv->n, sizeof(*b->v)))) {
			free(b);
			b = NULL;
			continue;
		}
		b->v[b->n++] = n;
		n->refs++;
		n->bundle = b;
		n->bundle_pending = !m->sealed;
		b->pending += !m->sealed;
	}
}

int land_rename_dir(struct sl_land *l, uint64_t id, uint64_t parent, const char *name,
		    uint64_t newparent, const char *newname, uint64_t replace)
{
	struct move mv = {.id = id, .parent = parent, .newparent = newparent, .replace = replace,
			  .name = name, .newname = newname};
	struct walk w = {.l = l};
	struct node **pub = NULL, **dead = NULL;
	size_t npub = 0, ndead = 0;
	bool outer_old, outer_new;
	int rc;

	if ((rc = sl_catalog_read(l->cat, &w.t)))
		return rc;
	rc = land_path_is_temp(l, w.t, parent, name, &outer_old);
	if (rc == 0)
		rc = land_path_is_temp(l, w.t, newparent, newname, &outer_new);
	if (rc == 0)
		rc = walk_folders(&w, id);
	sl_txn_end(w.t);
	land_test_gap();
	if (rc == 0 && w.landed)
		rc = land_refuse(l, EPERM); /* a landed name is final, and so are its folders */
	if (rc)
		goto free_walk;

	pthread_mutex_lock(&l->mu);
	rc = find_members(l, &w, outer_old, outer_new, &mv);
	pthread_mutex_unlock(&l->mu);
	if (rc == EPERM)
		land_refuse(l, rc);
	if (rc == 0)
		rc = make_members_durable(l, &mv);
	if (rc)
		goto unref;
	pthread_mutex_lock(&l->mu);
	mv.land = seal_released(&mv);
	pthread_mutex_unlock(&l->mu);
	mv.landed_ns = land_now_ns();
	mv.dirs = w.v;
	mv.ndirs = w.n;

	if (!(dead = calloc(mv.n ? mv.n : 1, sizeof(*dead)))) {
		rc = ENOMEM;
	} else {
		SL_FAULT("land.before_folder_record");
		rc = sl_catalog_write(l->cat, move_apply, &mv);
		SL_FAULT("land.after_folder_record");
		if (rc == EPERM)
			land_refuse(l, rc);
	}
	pthread_mutex_lock(&l->mu);
	if (rc) {
		for (size_t k = 0; k < mv.n; k++)
			if (mv.m[k].sealed)
				mv.m[k].n->publishing = false;
	} else {
		moved_locked(l, &mv, &pub, &npub, &dead, &ndead);
	}
	pthread_mutex_unlock(&l->mu);
	for (size_t k = 0; k < ndead; k++)
		land_free_node(l, dead[k]);
	for (size_t k = 0; rc == 0 && k < mv.n; k++) {
		uint64_t id = mv.m[k].n->id;
		int crc;
		/* the rename itself is done: a failed cancel is logged, not returned */
		if (mv.m[k].cancel_after &&
		    (crc = sl_catalog_write(l->cat, land_cancel_apply, &id)))
			sl_log(SL_LOG_ERR, "cannot cancel the record of '%s': %s (it may land at "
			       "the next start)", mv.m[k].n->name, sl_strerror(crc));
	}
	if (npub)
		land_publish(l, pub, npub);
	if (rc == 0 && mv.land && mv.n && l->on_land)
		l->on_land(l->on_land_ctx);
unref:
	for (size_t k = 0; k < mv.n; k++) {
		free(mv.m[k].r.data);
		land_unref(l, mv.m[k].n);
	}
	free(mv.m);
	free(pub);
	free(dead);
free_walk:
	free(w.v);
	return rc;
}

/* ---- folder times ---- */

struct dirtime {
	uint64_t id;
	int64_t ns;    /* its mtime and ctime */
	bool dirty;    /* not yet written by a commit */
	struct dirtime *next;
};

static struct dirtime **dirt_slot(struct sl_land *l, uint64_t id)
{
	struct dirtime **p = &l->dirtimes[id % DIRT_NBUCKET];
	while (*p && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

void land_touch_dir(struct sl_land *l, uint64_t dir)
{
	struct dirtime **p, *d;

	if (!l->dirtimes && !(l->dirtimes = calloc(DIRT_NBUCKET, sizeof(*l->dirtimes))))
		return; /* the time is then lost, never the entry */
	p = dirt_slot(l, dir);
	if (!(d = *p)) {
		if (!(d = calloc(1, sizeof(*d))))
			return;
		d->id = dir;
		*p = d;
		l->ndirtimes++;
	}
	d->ns = land_now_ns();
	d->dirty = true;
}

void land_dir_times(struct sl_land *l, struct sl_attr *a)
{
	struct dirtime *d;

	if (!l->dirtimes || !S_ISDIR(a->mode) || !(d = *dirt_slot(l, a->id)))
		return;
	a->mtime_ns = a->ctime_ns = d->ns;
}

void land_forget_dir(struct sl_land *l, uint64_t dir)
{
	struct dirtime **p, *d;

	if (!l->dirtimes || !(d = *(p = dirt_slot(l, dir))))
		return;
	*p = d->next;
	free(d);
	l->ndirtimes--;
}

int land_dir_times_apply(struct sl_land *l, struct sl_txn *t)
{
	struct dirtime *v = NULL;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	for (size_t b = 0; l->dirtimes && b < DIRT_NBUCKET; b++)
		for (struct dirtime **p = &l->dirtimes[b], *d; (d = *p);) {
			if (!d->dirty) {
				/* written by an earlier commit, which is done */
				*p = d->next;
				free(d);
				l->ndirtimes--;
				continue;
			}
			p = &d->next;
			n++;
		}
	if (n && (v = malloc(n * sizeof(*v)))) {
		n = 0;
		for (size_t b = 0; b < DIRT_NBUCKET; b++)
			for (struct dirtime *d = l->dirtimes[b]; d; d = d->next) {
				d->dirty = false;
				v[n++] = *d;
			}
	}
	pthread_mutex_unlock(&l->mu);
	for (size_t k = 0; v && k < n && rc == 0; k++) {
		struct sl_inode i;
		if ((rc = sl_txn_inode_get(t, v[k].id, &i)) == SL_NOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc == 0 && i.kind == SL_KIND_DIR) {
			i.mtime_ns = i.ctime_ns = v[k].ns;
			rc = sl_txn_inode_put(t, &i);
		}
	}
	free(v);
	return rc;
}

void land_dir_times_free(struct sl_land *l)
{
	for (size_t b = 0; l->dirtimes && b < DIRT_NBUCKET; b++)
		for (struct dirtime *d = l->dirtimes[b], *next; d; d = next) {
			next = d->next;
			free(d);
		}
	free(l->dirtimes);
	l->dirtimes = NULL;
}
