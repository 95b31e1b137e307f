/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint log as the engine's readers see it (engine.h): rendered
 * entries, the queries ever started and their ids, `sluice status`, and the
 * replaced parts `sluice check` must not count as leaks. Keys: qlog.h.
 */
#include <stdbool.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "err.h"
#include "qlog.h"

#define qkey sl_qlog_meta_key

int sl_engine_checkpoint_get(struct sl_txn *t, uint32_t qid, char kind, uint64_t n,
			     const void **data, size_t *len)
{
	return sl_qlog_get(t, qid, kind, n, data, len);
}

int sl_engine_checkpoint_each(struct sl_txn *t, uint32_t qid, char kind,
			      int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx)
{
	return sl_qlog_each(t, qid, kind, fn, ctx);
}

struct each_query {
	int (*fn)(void *ctx, const char *name, uint32_t qid);
	void *ctx;
};

static int each_query_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct each_query *e = ctx;
	char name[SL_CONFIG_NAME_MAX + 1];
	const unsigned char *v = val;

	if (vlen != 4 || klen == 0 || klen > SL_CONFIG_NAME_MAX)
		return SL_ECORRUPT;
	memcpy(name, key, klen);
	name[klen] = 0;
	return e->fn(e->ctx, name, (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
					   (uint32_t)v[2] << 8 | v[3]);
}

int sl_engine_queries(struct sl_txn *t, int (*fn)(void *ctx, const char *name, uint32_t qid),
		      void *ctx)
{
	struct each_query e = {.fn = fn, .ctx = ctx};
	return sl_txn_each(t, SL_TABLE_QUERIES, NULL, 0, each_query_cb, &e);
}

struct gc_find {
	struct sl_txn *t;
	uint64_t id;
	uint32_t qid;
	bool found;
};

static int gc_find_entry(void *ctx, uint64_t n, size_t len)
{
	struct gc_find *f = ctx;
	const void *v;
	size_t vlen;
	(void)len;
	if (sl_engine_checkpoint_get(f->t, f->qid, 'g', n, &v, &vlen))
		return 0;
	for (size_t i = 0; i + 8 <= vlen; i += 8)
		if (!memcmp((const char *)v + i, &f->id, 8))
			return (f->found = true), 1;
	return 0;
}

static int gc_find_query(void *ctx, const char *name, uint32_t qid)
{
	struct gc_find *f = ctx;
	(void)name;
	f->qid = qid;
	sl_engine_checkpoint_each(f->t, qid, 'g', gc_find_entry, f);
	return f->found ? 1 : 0;
}

bool sl_engine_blob_pending(struct sl_txn *t, uint64_t id)
{
	struct gc_find f = {.t = t, .id = id};
	sl_engine_queries(t, gc_find_query, &f);
	return f.found;
}

int sl_engine_status(struct sl_txn *t, uint32_t qid, struct sl_engine_status *out)
{
	char key[48];
	uint64_t next;
	const void *e;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	qkey(key, sizeof(key), qid, "next");
	if ((rc = sl_txn_meta_get(t, key, &next)))
		return rc;
	out->has_batch = next > 0;
	out->batch = next ? next - 1 : 0;
	qkey(key, sizeof(key), qid, "rows");
	if ((rc = sl_txn_meta_get(t, key, &out->rows)))
		return rc;
	uint64_t wm;
	qkey(key, sizeof(key), qid, "wm");
	if ((rc = sl_txn_meta_get(t, key, &wm)))
		return rc;
	out->wm_ms = (int64_t)wm;
	rc = sl_engine_checkpoint_get(t, qid, 'e', 0, &e, &len);
	if (rc == 0) {
		if (len >= sizeof(out->error))
			len = sizeof(out->error) - 1;
		memcpy(out->error, e, len);
		out->error[len] = 0;
	}
	return rc == SL_NOTFOUND ? 0 : rc;
}
