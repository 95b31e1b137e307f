/* SPDX-License-Identifier: MIT */
/*
 * cleanSource: landed files a query committed leave in/, deleted or moved
 * to archive/ at the same in/-relative path (a name already there keeps it
 * and the newcomer gets the suffix ~<id>). Idempotent, so that an
 * interrupted clean can be redone at start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blob.h"
#include "catalog.h"
#include "err.h"
#include "land.h"
#include "land_int.h"
#include "log.h"
#include "qindex.h"

#define MAX_DEPTH 64

struct move {
	uint64_t id;
	uint64_t dir_ids[MAX_DEPTH]; /* for archive folders to create */
	uint64_t old_parent;         /* out: where its name was, for the kernel */
	char old_name[SL_NAME_MAX + 1];
	bool done;                   /* out: cleaned now */
	bool blob;                   /* out: its blob goes (delete) */
};

struct clean {
	struct move *m;
	size_t n;
	bool archive;
	int64_t now;
};

/* Creates (or finds) archive/<path's folders>; *parent gets the last. */
static int archive_dirs(struct sl_txn *t, const char *path, const struct move *m, int64_t now,
			uint64_t *parent)
{
	char buf[4096], *save = NULL, *comp, *next;
	size_t k = 0;
	int rc;

	snprintf(buf, sizeof(buf), "%s", path);
	*parent = SL_ID_ARCHIVE;
	comp = strtok_r(buf, "/", &save);
	while (comp && (next = strtok_r(NULL, "/", &save))) {
		uint64_t id;
		rc = sl_txn_dirent_get(t, *parent, comp, &id);
		if (rc == SL_NOTFOUND) {
			if (k >= MAX_DEPTH)
				return ENAMETOOLONG;
			struct sl_inode d = {.id = m->dir_ids[k++], .parent = *parent,
					     .kind = SL_KIND_DIR, .mode = S_IFDIR | 0755,
					     .mtime_ns = now, .ctime_ns = now};
			snprintf(d.name, sizeof(d.name), "%s", comp);
			if ((rc = sl_txn_inode_put(t, &d)) ||
			    (rc = sl_txn_dirent_put(t, *parent, comp, d.id)))
				return rc;
			id = d.id;
		} else if (rc) {
			return rc;
		}
		*parent = id;
		comp = next;
	}
	return 0;
}

static int clean_apply(struct sl_txn *t, void *arg)
{
	struct clean *c = arg;
	int rc;

	for (size_t k = 0; k < c->n; k++) {
		struct move *m = &c->m[k];
		struct sl_inode i;
		char path[4096];

		m->done = m->blob = false;
		rc = sl_txn_inode_get(t, m->id, &i);
		if (rc == SL_NOTFOUND)
			continue; /* cleaned already, or unlinked */
		if (rc)
			return rc;
		rc = sl_qindex_relpath(t, &i, path, sizeof(path));
		if (rc == ENOENT)
			continue; /* in archive/ already */
		if (rc)
			return rc;
		m->old_parent = i.parent;
		snprintf(m->old_name, sizeof(m->old_name), "%s", i.name);
		m->done = true;
		if (!c->archive) {
			m->blob = i.storage == SL_STORE_BLOB;
			if ((rc = land_cancel(t, m->id)))
				return rc;
			continue;
		}
		uint64_t parent, other;
		if ((rc = archive_dirs(t, path, m, c->now, &parent)))
			return rc;
		if ((rc = sl_txn_dirent_del(t, i.parent, i.name)))
			return rc;
		if (sl_txn_dirent_get(t, parent, i.name, &other) == 0) {
			char suffix[24];
			int sn = snprintf(suffix, sizeof(suffix), "~%" PRIu64, i.id);
			size_t keep = strlen(i.name);
			if (keep + (size_t)sn > SL_NAME_MAX)
				keep = SL_NAME_MAX - (size_t)sn;
			memcpy(i.name + keep, suffix, (size_t)sn + 1);
		}
		i.parent = parent;
		if ((rc = sl_txn_inode_put(t, &i)) ||
		    (rc = sl_txn_dirent_put(t, parent, i.name, i.id)))
			return rc;
	}
	return 0;
}

int sl_land_clean(struct sl_land *l, const uint64_t *ids, size_t n, bool archive)
{
	struct clean c = {.n = n, .archive = archive, .now = 0};
	struct timespec ts;
	int rc = 0;

	if (n == 0)
		return 0;
	c.m = calloc(n, sizeof(*c.m));
	if (!c.m)
		return ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	c.now = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	for (size_t k = 0; k < n && rc == 0; k++) {
		c.m[k].id = ids[k];
		for (size_t d = 0; archive && d < MAX_DEPTH && rc == 0; d++)
			rc = sl_catalog_next_id(l->cat, &c.m[k].dir_ids[d]);
	}
	/* namespace changes are exclusive of FLUSH records and renames */
	land_op_excl(l);
	if (rc == 0)
		rc = sl_catalog_write_freeing(l->cat, clean_apply, &c);
	pthread_rwlock_unlock(&l->op);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		if (!c.m[k].done)
			continue;
		if (c.m[k].blob)
			sl_blob_unlink(l->blobs, c.m[k].id);
		/* the kernel may hold the old name for a day: tell it */
		if (l->on_change)
			l->on_change(l->on_change_ctx, c.m[k].old_parent, c.m[k].old_name);
	}
	free(c.m);
	return rc;
}

void sl_land_changed(struct sl_land *l, uint64_t parent, const char *name)
{
	if (l->on_change)
		l->on_change(l->on_change_ctx, parent, name);
}

void sl_land_set_change(struct sl_land *l,
			void (*fn)(void *ctx, uint64_t parent, const char *name), void *ctx)
{
	l->on_change = fn;
	l->on_change_ctx = ctx;
}
