/* SPDX-License-Identifier: MIT */
/* Retention of out/ (retain.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "err.h"
#include "outparts.h"
#include "qindex.h"
#include "qlog.h"
#include "retain.h"

/* A folder whose entries change takes now as its mtime and ctime (as file.c). */
static int touch_dir(struct sl_txn *t, uint64_t id, int64_t now)
{
	struct sl_inode d;
	int rc = sl_txn_inode_get(t, id, &d);

	if (rc)
		return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
	if (d.mtime_ns == now && d.ctime_ns == now)
		return 0;
	d.mtime_ns = d.ctime_ns = now;
	return sl_txn_inode_put(t, &d);
}

int sl_retain_hold(struct sl_txn *t, const char *name, uint64_t *hold)
{
	char key[48], rec[128], uuid[64];
	int64_t ts, s, e;
	uint64_t next;
	uint32_t qid;
	const void *v;
	size_t len;
	int rc;

	*hold = 0;
	if ((rc = sl_qindex_qid(t, name, &qid)))
		return rc == SL_NOTFOUND ? 0 : rc;
	sl_qlog_meta_key(key, sizeof(key), qid, "next");
	if ((rc = sl_txn_meta_get(t, key, &next)))
		return rc == SL_NOTFOUND ? 0 : rc;
	if (next == 0)
		return 0;
	if ((rc = sl_qlog_get(t, qid, 'b', next - 1, &v, &len)))
		return rc == SL_NOTFOUND ? 0 : rc; /* not a query source's record: hold all */
	if (len >= sizeof(rec))
		return SL_ECORRUPT;
	memcpy(rec, v, len);
	rec[len] = 0;
	if (sscanf(rec, "%" SCNd64 " %" SCNd64 " %" SCNd64 " %63s", &ts, &s, &e, uuid) != 4)
		return SL_ECORRUPT;
	*hold = e >= 0 ? (uint64_t)e + 1 : 0;
	return 0;
}

static int first_child(void *ctx, const char *name, uint64_t id)
{
	(void)name;
	(void)id;
	*(bool *)ctx = true;
	return 1;
}

/*
 * Removes the partition folder dir of out/<q>/ (outdir) when it is empty,
 * and then its parent likewise; a folder that stays is touched.
 */
static int prune_dir(struct sl_txn *t, const struct sl_retain *r, uint64_t dir)
{
	int rc;

	while (dir != r->outdir) {
		struct sl_inode d;
		bool any = false;
		if ((rc = sl_txn_dirent_each(t, dir, NULL, first_child, &any)) && !any)
			return rc;
		if ((rc = sl_txn_inode_get(t, dir, &d)))
			return rc == SL_NOTFOUND ? 0 : rc; /* removed already */
		if (any)
			return touch_dir(t, dir, r->now);
		if ((rc = sl_txn_dirent_del(t, d.parent, d.name)) ||
		    (rc = sl_txn_inode_del(t, dir)) ||
		    (rc = r->gone(r->ctx, d.parent, dir, d.name, true, false)))
			return rc;
		dir = d.parent;
	}
	return touch_dir(t, r->outdir, r->now);
}

int sl_retain(struct sl_txn *t, const struct sl_retain *r)
{
	const struct sl_query_config *q = r->q;
	uint64_t outdir = r->outdir, batch = r->batch;
	struct sl_out_part *v = NULL;
	uint64_t cap = batch, *ids = NULL, *dirs = NULL;
	size_t n = 0, nids = 0, ndirs = 0, nexp = 0;
	int rc;

	for (size_t i = 0; i < q->ndownstreams; i++) {
		uint64_t hold;
		if ((rc = sl_retain_hold(t, q->downstreams[i], &hold)))
			return rc;
		if (hold < cap)
			cap = hold;
	}
	if (cap == 0)
		return 0;
	if ((rc = sl_out_parts(t, outdir, 0, cap - 1, &v, &n)))
		return rc;
	int64_t too_old = INT64_MIN; /* an age of centuries expires nothing */
	if (q->retention_age_us && q->retention_age_us < (INT64_MAX - r->now) / 1000)
		too_old = r->now - q->retention_age_us * 1000;
	if (n && (!(ids = malloc(n * sizeof(*ids))) || !(dirs = malloc(n * sizeof(*dirs))))) {
		rc = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		bool by_count =
		    q->retention_batches && v[i].batch + (uint64_t)q->retention_batches <= batch;
		bool by_age = q->retention_age_us && v[i].mtime_ns < too_old;
		struct sl_inode f;
		if (!by_count && !by_age)
			continue;
		if ((rc = sl_txn_inode_get(t, v[i].id, &f))) {
			rc = rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
			goto out;
		}
		bool blob = f.storage == SL_STORE_BLOB;
		if ((rc = sl_txn_dirent_del(t, f.parent, f.name)) ||
		    (rc = sl_txn_inode_del(t, f.id)) ||
		    (rc = r->gone(r->ctx, f.parent, f.id, f.name, false, blob)))
			goto out;
		if (!blob && (rc = sl_txn_data_del(t, f.id)) && rc != SL_NOTFOUND)
			goto out;
		rc = 0;
		nexp++;
		if (blob)
			ids[nids++] = f.id;
		size_t k = 0;
		while (k < ndirs && dirs[k] != f.parent)
			k++;
		if (k == ndirs)
			dirs[ndirs++] = f.parent;
	}
	/* deepest first does not matter: each prune climbs while folders empty */
	for (size_t k = 0; k < ndirs; k++)
		if ((rc = prune_dir(t, r, dirs[k])))
			goto out;
	if (nids && (rc = sl_qlog_put(t, r->qid, 'g', batch, ids, nids * sizeof(*ids))))
		goto out;
	if (nexp) { /* sluice_query_parts_expired_total */
		char key[48];
		sl_qlog_meta_key(key, sizeof(key), r->qid, "expired");
		rc = sl_txn_meta_add(t, key, (int64_t)nexp);
	}
out:
	sl_out_parts_free(v, n);
	free(ids);
	free(dirs);
	return rc;
}
