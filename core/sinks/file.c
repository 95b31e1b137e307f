/* SPDX-License-Identifier: MIT */
/*
 * The file sink (sink_file.h): a batch's parts staged (stage.h), then
 * named under out/<query>/ in the batch's commit, folders made as needed,
 * a complete-mode snapshot replaced whole.
 *
 * Its record in the checkpoint log (core/sources/qlog.h): 'g' batch N's
 * blob ids (u64, host order) of the out/ parts a complete-mode batch
 * replaced, or that retention expired, to unlink after its commit (redone
 * at start).
 *
 * Retention (sink.retention): in each batch's commit transaction, and at
 * start for what a config change newly expires, the parts of earlier
 * batches that either limit expires leave out/ (batches: not among the
 * last N batch ids; age: committed longer ago than that), except those of
 * batches a downstream query source has not committed yet, and the
 * partition folders they leave empty go with them. A reader that has a
 * part open holds its blob's file descriptor: the bytes stay readable
 * until its last close, when the file system frees them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "blob.h"
#include "catalog.h"
#include "config.h"
#include "err.h"
#include "land.h"
#include "qlog.h"
#include "retain.h"
#include "sink_file.h"
#include "stage.h"

/* An entry of out/<query>/ a complete-mode batch replaces. */
struct gone {
	uint64_t parent, id;
	char name[SL_NAME_MAX + 1];
	bool dir, blob;
};

struct sl_sink {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	/* the batch: from write() to end() */
	uint64_t batch;
	struct sl_stage stage;  /* the parts: waited for before they are named */
	bool started;           /* the stage started: sl_stage_end() is due */
	uint64_t outdir_id;     /* for out/<query> when it does not exist yet */
	int64_t now;            /* the commit's time (CLOCK_REALTIME): out/ mtimes */
	/* reset by each run of commit(): what a complete-mode replace removed */
	struct gone *gone;
	size_t ngone, capgone;
};

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/*
 * A folder whose entries the commit changes takes the commit's time as its
 * mtime and ctime (DESIGN §1: a poller watching out/<query>/ sees new parts).
 */
static int touch_dir(struct sl_txn *t, uint64_t id, int64_t now)
{
	struct sl_inode d;
	int rc = sl_txn_inode_get(t, id, &d);

	if (rc)
		return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
	if (d.mtime_ns == now && d.ctime_ns == now)
		return 0; /* a second part in the same folder */
	d.mtime_ns = d.ctime_ns = now;
	return sl_txn_inode_put(t, &d);
}

static int ensure_dir(struct sl_txn *t, uint64_t parent, const char *name, uint64_t new_id,
		      int64_t now, uint64_t *id)
{
	struct sl_inode d;
	int rc = sl_txn_dirent_get(t, parent, name, id);

	if (rc != SL_NOTFOUND)
		return rc;
	if ((rc = touch_dir(t, parent, now)))
		return rc;
	memset(&d, 0, sizeof(d));
	d.id = new_id;
	d.parent = parent;
	d.kind = SL_KIND_DIR;
	d.mode = S_IFDIR | 0555;
	d.mtime_ns = d.ctime_ns = now;
	snprintf(d.name, sizeof(d.name), "%s", name);
	if ((rc = sl_txn_inode_put(t, &d)) || (rc = sl_txn_dirent_put(t, parent, name, new_id)))
		return rc;
	*id = new_id;
	return 0;
}

struct collect {
	struct sl_sink *c;
	uint64_t parent;
	int rc;
};

static int collect_child(void *ctx, const char *name, uint64_t id)
{
	struct collect *k = ctx;
	struct sl_sink *c = k->c;
	if (c->ngone == c->capgone) {
		size_t cap = c->capgone ? c->capgone * 2 : 64;
		struct gone *g = realloc(c->gone, cap * sizeof(*g));
		if (!g)
			return (k->rc = ENOMEM), 1;
		c->gone = g;
		c->capgone = cap;
	}
	struct gone *g = &c->gone[c->ngone++];
	memset(g, 0, sizeof(*g));
	g->parent = k->parent;
	g->id = id;
	snprintf(g->name, sizeof(g->name), "%s", name);
	return 0;
}

/*
 * Complete mode: everything under out/<query>/ leaves in the transaction
 * that adds the new parts, so a reader sees one snapshot or the next. The
 * blobs of the old parts are unlinked after the commit ('g' entry).
 */
static int replace_snapshot(struct sl_txn *t, struct sl_sink *c, uint64_t outdir)
{
	struct collect k = {.c = c, .parent = outdir};
	int rc;

	c->ngone = 0;
	if ((rc = sl_txn_dirent_each(t, outdir, NULL, collect_child, &k)))
		return k.rc ? k.rc : rc;
	for (size_t i = 0; i < c->ngone; i++) { /* breadth first: ngone grows */
		struct sl_inode ino;
		if ((rc = sl_txn_inode_get(t, c->gone[i].id, &ino)))
			return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
		c->gone[i].dir = ino.kind == SL_KIND_DIR;
		c->gone[i].blob = ino.kind == SL_KIND_FILE && ino.storage == SL_STORE_BLOB;
		if (!c->gone[i].dir)
			continue;
		k.parent = c->gone[i].id;
		if ((rc = sl_txn_dirent_each(t, k.parent, NULL, collect_child, &k)))
			return k.rc ? k.rc : rc;
	}
	size_t nblobs = 0;
	for (size_t i = 0; i < c->ngone; i++) {
		struct gone *g = &c->gone[i];
		if ((rc = sl_txn_dirent_del(t, g->parent, g->name)) ||
		    (rc = sl_txn_inode_del(t, g->id)))
			return rc;
		if (!g->dir && !g->blob && (rc = sl_txn_data_del(t, g->id)) && rc != SL_NOTFOUND)
			return rc;
		nblobs += g->blob;
	}
	if (nblobs == 0)
		return 0;
	uint64_t *ids = malloc(nblobs * 8);
	if (!ids)
		return ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < c->ngone; i++)
		if (c->gone[i].blob)
			ids[n++] = c->gone[i].id;
	rc = sl_qlog_put(t, c->qid, 'g', c->batch, ids, n * 8);
	free(ids);
	return rc;
}

/* Adds an entry removed from out/ to c->gone (the kernel is told after the commit). */
static int add_gone(struct sl_sink *c, uint64_t parent, uint64_t id, const char *name, bool dir,
		    bool blob)
{
	if (c->ngone == c->capgone) {
		size_t cap = c->capgone ? c->capgone * 2 : 64;
		struct gone *g = realloc(c->gone, cap * sizeof(*g));
		if (!g)
			return ENOMEM;
		c->gone = g;
		c->capgone = cap;
	}
	struct gone *g = &c->gone[c->ngone++];
	memset(g, 0, sizeof(*g));
	g->parent = parent;
	g->id = id;
	g->dir = dir;
	g->blob = blob;
	snprintf(g->name, sizeof(g->name), "%s", name);
	return 0;
}

static int gone_cb(void *ctx, uint64_t parent, uint64_t id, const char *name, bool dir,
		   bool blob)
{
	return add_gone(ctx, parent, id, name, dir, blob);
}

static int retain(struct sl_txn *t, struct sl_sink *c, uint64_t outdir, uint64_t batch)
{
	struct sl_retain r = {.q = c->q, .qid = c->qid, .outdir = outdir, .batch = batch,
			      .now = c->now, .gone = gone_cb, .ctx = c};
	return sl_retain(t, &r);
}

static int file_write(struct sl_sink *c, uint64_t batch, const struct sl_batch *rows,
		      void (*spent)(void *ctx), void *spent_ctx)
{
	struct sl_catalog *cat = sl_land_catalog(c->l);
	int rc;

	c->batch = batch;
	c->ngone = 0;
	c->started = false;
	c->stage = (struct sl_stage){.cat = cat, .blobs = sl_land_blobs(c->l), .q = c->q,
				     .batch = batch, .rows = rows, .spent = spent,
				     .spent_ctx = spent_ctx};
	c->now = wall_ns();
	if ((rc = sl_catalog_next_id(cat, &c->outdir_id)) == 0) {
		c->started = true;
		rc = sl_stage_start(&c->stage); /* on a thread of its own, or done by now */
	}
	return rc;
}

static int file_commit(struct sl_sink *c, struct sl_txn *t, struct sl_sink_result *res)
{
	uint64_t outdir;
	int rc;

	c->ngone = 0; /* a retried transaction starts over */
	if ((rc = sl_stage_wait(&c->stage)))
		return rc;
	if ((rc = ensure_dir(t, SL_ID_OUT, c->q->name, c->outdir_id, c->now, &outdir)))
		return rc;
	if (c->q->output_mode == SL_OUTPUT_COMPLETE && (rc = replace_snapshot(t, c, outdir)))
		return rc;
	if (c->ngone && (rc = touch_dir(t, outdir, c->now)))
		return rc;
	uint64_t out_rows = 0;
	for (size_t i = 0; i < c->stage.nparts; i++) {
		struct sl_out_part *op = &c->stage.out[i];
		uint64_t parent = outdir;
		char dir[4096], *save = NULL;
		size_t k = 0;

		snprintf(dir, sizeof(dir), "%s", op->dir);
		for (char *comp = strtok_r(dir, "/", &save); comp; comp = strtok_r(NULL, "/", &save))
			if ((rc = ensure_dir(t, parent, comp, op->dir_ids[k++], c->now, &parent)))
				return rc;
		struct sl_inode f = {.id = op->id, .parent = parent, .kind = SL_KIND_FILE,
				     .state = SL_STATE_LANDED, .mode = S_IFREG | 0444,
				     .size = op->len, .mtime_ns = c->now, .ctime_ns = c->now,
				     .landed_ns = c->now};
		f.storage = op->data ? SL_STORE_INLINE : SL_STORE_BLOB;
		snprintf(f.name, sizeof(f.name), "%s", op->name);
		if ((rc = sl_txn_inode_put(t, &f)) ||
		    (rc = sl_txn_dirent_put(t, parent, f.name, f.id)) ||
		    (rc = touch_dir(t, parent, c->now)))
			return rc;
		if (op->data && (rc = sl_txn_data_put(t, f.id, op->data, op->len)))
			return rc;
		out_rows += op->rows;
	}
	if ((c->q->retention_batches || c->q->retention_age_us) &&
	    (rc = retain(t, c, outdir, c->batch)))
		return rc;
	res->rows = out_rows;
	res->done_ns = c->stage.done_ns;
	return 0;
}

static int unlink_act(void *ctx, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sl_blob_unlink(sl_land_blobs(ctx), ids[i]);
	return 0;
}

/* Unlinks the blobs of replaced or expired parts ('g' intents), oldest first. */
static int unlink_intents(struct sl_sink *c)
{
	return sl_qlog_each_intent(sl_land_catalog(c->l), c->qid, 'g', unlink_act, c->l);
}

/* Retention at start, as of the last committed batch (none: nothing to do). */
static int retain_apply(struct sl_txn *t, void *arg)
{
	struct sl_sink *c = arg;
	char key[48];
	uint64_t next, outdir;
	int rc;

	c->ngone = 0;
	sl_qlog_meta_key(key, sizeof(key), c->qid, "next");
	if ((rc = sl_txn_meta_get(t, key, &next)))
		return rc == SL_NOTFOUND ? 0 : rc;
	if (next == 0)
		return 0;
	if ((rc = sl_txn_dirent_get(t, SL_ID_OUT, c->q->name, &outdir)))
		return rc == SL_NOTFOUND ? 0 : rc;
	return retain(t, c, outdir, next - 1);
}

/*
 * At start: redoes the unlinks a crash cut short, then expires what a
 * changed retention (or a downstream that caught up or left) lets go.
 */
static int file_settle(struct sl_sink *c)
{
	int rc = unlink_intents(c);

	if (rc || !(c->q->retention_batches || c->q->retention_age_us))
		return rc;
	c->now = wall_ns();
	if ((rc = sl_catalog_write_freeing(sl_land_catalog(c->l), retain_apply, c)))
		return rc;
	for (size_t i = 0; i < c->ngone; i++)
		sl_land_changed(c->l, c->gone[i].parent, c->gone[i].name);
	rc = c->ngone ? unlink_intents(c) : 0;
	c->ngone = 0;
	return rc;
}

static int file_end(struct sl_sink *c, bool committed, bool *format_failed)
{
	int rc = 0;

	if (format_failed)
		*format_failed = c->started && c->stage.format_failed;
	if (c->started)
		sl_stage_end(&c->stage, committed);
	c->started = false;
	if (!committed)
		return 0;
	/* the kernel may cache the replaced names for a day: tell it */
	for (size_t i = 0; i < c->ngone; i++)
		sl_land_changed(c->l, c->gone[i].parent, c->gone[i].name);
	if (c->ngone)
		rc = unlink_intents(c);
	return rc;
}

static void file_describe(const struct sl_sink *c, char *buf, size_t len)
{
	snprintf(buf, len, "FileSink[out/%s]", c->q->name);
}

static int file_open(const struct sl_sink_args *a, struct sl_sink **out)
{
	struct sl_sink *c = calloc(1, sizeof(*c));
	if (!c)
		return ENOMEM;
	c->l = a->l;
	c->q = a->q;
	c->qid = a->qid;
	*out = c;
	return 0;
}

static void file_close(struct sl_sink *c)
{
	if (!c)
		return;
	free(c->gone);
	free(c);
}

const struct sl_sink_ops sl_sink_file = {
	.name = "file",
	.guarantee = SL_SINK_EXACTLY_ONCE,
	.open = file_open,
	.write = file_write,
	.commit = file_commit,
	.end = file_end,
	.settle = file_settle,
	.describe = file_describe,
	.close = file_close,
};
