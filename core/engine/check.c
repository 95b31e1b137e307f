/* SPDX-License-Identifier: MIT */
/* `sluice check`: catalog and blobs cross-checked, read-only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "check.h"
#include "engine.h"
#include "err.h"
#include "land.h"

struct ctx {
	struct sl_txn *t;
	const char *datadir;
	void (*fn)(void *ctx, const char *line);
	void *fn_ctx;
	struct sl_check_report *r;
	uint64_t lo, hi; /* unsettled ids */
};

static void problem(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct ctx *c, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->r->problems++;
	if (c->fn)
		c->fn(c->fn_ctx, line);
}

static int blob_size(const char *datadir, uint64_t id, int64_t *size)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/blobs/%02x/%016" PRIx64, datadir, (unsigned)(id % 256), id);
	if (stat(path, &st))
		return errno;
	*size = st.st_size;
	return 0;
}

static int check_dirent(void *arg, uint64_t parent, const char *name, uint64_t id)
{
	struct ctx *c = arg;
	struct sl_inode i, p;

	if (sl_txn_inode_get(c->t, id, &i)) {
		problem(c, "name '%s' in folder %" PRIu64 " points at missing record %" PRIu64, name,
			parent, id);
		return 0;
	}
	if (i.parent != parent || strcmp(i.name, name))
		problem(c, "name '%s' in folder %" PRIu64 " points at record %" PRIu64
			   " named '%s' in %" PRIu64, name, parent, id, i.name, i.parent);
	if (sl_txn_inode_get(c->t, parent, &p) || p.kind != SL_KIND_DIR)
		problem(c, "name '%s' sits in %" PRIu64 ", which is no folder", name, parent);
	return 0;
}

static int check_inode(void *arg, const struct sl_inode *i)
{
	struct ctx *c = arg;
	uint64_t id;

	if (i->kind == SL_KIND_DIR)
		c->r->folders++;
	else
		c->r->files++;
	if (i->parent != SL_ID_ROOT &&
	    (sl_txn_dirent_get(c->t, i->parent, i->name, &id) || id != i->id))
		problem(c, "record %" PRIu64 " ('%s') has no name pointing at it", i->id, i->name);
	if (i->kind != SL_KIND_FILE)
		return 0;
	if (i->storage == SL_STORE_BLOB) {
		int64_t size;
		int rc = blob_size(c->datadir, i->id, &size);
		if (rc)
			problem(c, "'%s' (%" PRIu64 "): its blob is missing: %s", i->name, i->id,
				strerror(rc));
		else if (i->state == SL_STATE_LANDED ? (uint64_t)size != i->size
						       : (uint64_t)size < i->size)
			problem(c, "'%s' (%" PRIu64 "): its blob holds %" PRId64 " bytes, its record %"
				   PRIu64, i->name, i->id, size, i->size);
	} else {
		const void *d;
		size_t len;
		if (sl_txn_data_get(c->t, i->id, &d, &len) || len != i->size)
			problem(c, "'%s' (%" PRIu64 "): its inline bytes are missing or short",
				i->name, i->id);
	}
	return 0;
}

static int check_pending(void *arg, uint64_t id)
{
	struct ctx *c = arg;
	struct sl_inode i;
	if (sl_txn_inode_get(c->t, id, &i) || i.state != SL_STATE_RECORDED)
		problem(c, "pending record %" PRIu64 " is no recorded file", id);
	return 0;
}

static void check_blobs(struct ctx *c)
{
	char path[4200];

	for (int fan = 0; fan < 256; fan++) {
		snprintf(path, sizeof(path), "%s/blobs/%02x", c->datadir, fan);
		DIR *d = opendir(path);
		struct dirent *e;
		if (!d) {
			problem(c, "cannot list '%s': %s", path, strerror(errno));
			continue;
		}
		while ((e = readdir(d))) {
			struct sl_inode i;
			char *end;
			if (e->d_name[0] == '.')
				continue;
			uint64_t id = strtoull(e->d_name, &end, 16);
			if (*end || strlen(e->d_name) != 16 || id % 256 != (uint64_t)fan) {
				problem(c, "'%s/%s' is no blob", path, e->d_name);
				continue;
			}
			c->r->blobs++;
			if (sl_txn_inode_get(c->t, id, &i) == 0 && i.storage == SL_STORE_BLOB)
				continue;
			if ((id >= c->lo && id < c->hi) || sl_engine_blob_pending(c->t, id))
				c->r->orphans++; /* a crash's leftover: the next start removes it */
			else
				problem(c, "blob %" PRIu64 " is named by no record", id);
		}
		closedir(d);
	}
}

int sl_check(struct sl_land *l, const char *datadir, void (*fn)(void *ctx, const char *line),
	     void *fn_ctx, struct sl_check_report *out)
{
	struct ctx c = {.datadir = datadir, .fn = fn, .fn_ctx = fn_ctx, .r = out};
	int rc;

	memset(out, 0, sizeof(*out));
	sl_catalog_unsettled(sl_land_catalog(l), &c.lo, &c.hi);
	if ((rc = sl_catalog_read(sl_land_catalog(l), &c.t)))
		return rc;
	rc = sl_txn_dirent_all(c.t, check_dirent, &c);
	if (rc == 0)
		rc = sl_txn_inode_each(c.t, check_inode, &c);
	if (rc == 0)
		rc = sl_txn_pending_each(c.t, check_pending, &c);
	if (rc == 0)
		check_blobs(&c);
	sl_txn_end(c.t);
	return rc;
}
