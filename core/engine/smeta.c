/* SPDX-License-Identifier: MIT */
/*
 * out/<query>/_spark_metadata/, rendered from one read transaction of the
 * catalog: batch N lists the parts part-N-P.* of out/<query>/ and its
 * partition folders, N.compact those of batches 0..N. Ids follow view.c:
 *   SL_VIEW_TAG | qid << 32 | kind << 28 | n     (n < 2^28)
 * kinds: 12 the folder, 13 batch file N, 14 N.compact.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "err.h"
#include "outparts.h"
#include "qindex.h"
#include "smeta.h"
#include "view.h"

enum { K_DIR = 12, K_BATCH = 13, K_COMPACT = 14 };

#define COMPACT_INTERVAL 10            /* spark.sql.streaming.fileSink.log.compactInterval */
#define BLOCK_SIZE (32ull << 20)        /* what Hadoop's local file system reports */

bool sl_smeta_owns(uint64_t id)
{
	return (id & SL_VIEW_TAG) && sl_view_kind(id) >= K_DIR && sl_view_kind(id) <= K_COMPACT;
}

/* ---- pure: the URI and the file format ---- */

void sl_smeta_uri_encode(struct sl_strbuf *out, const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c >= 0x80 || (c && strchr("_-!.~'()*,;:$&+=/@", c))) {
			sl_strbuf_addc(out, (char)c);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			sl_strbuf_add(out, e, 3);
		}
	}
}

/* A JSON string as Jackson writes it: short escapes, \u00XX for other controls. */
static void json_string(struct sl_strbuf *out, const char *s)
{
	sl_strbuf_addc(out, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': sl_strbuf_adds(out, "\\\""); break;
		case '\\': sl_strbuf_adds(out, "\\\\"); break;
		case '\b': sl_strbuf_adds(out, "\\b"); break;
		case '\f': sl_strbuf_adds(out, "\\f"); break;
		case '\n': sl_strbuf_adds(out, "\\n"); break;
		case '\r': sl_strbuf_adds(out, "\\r"); break;
		case '\t': sl_strbuf_adds(out, "\\t"); break;
		default:
			if (*p < 0x20)
				sl_strbuf_addf(out, "\\u%04X", *p);
			else
				sl_strbuf_addc(out, (char)*p);
		}
	}
	sl_strbuf_addc(out, '"');
}

void sl_smeta_serialize(struct sl_strbuf *out, const struct sl_smeta_status *v, size_t n)
{
	sl_strbuf_adds(out, "v1");
	for (size_t i = 0; i < n; i++) {
		sl_strbuf_adds(out, "\n{\"path\":");
		json_string(out, v[i].path);
		sl_strbuf_addf(out,
			       ",\"size\":%" PRIu64 ",\"isDir\":false,\"modificationTime\":%" PRId64
			       ",\"blockReplication\":%" PRIu32 ",\"blockSize\":%" PRIu64
			       ",\"action\":\"add\"}",
			       v[i].size, v[i].mtime_ms, v[i].replication, v[i].block_size);
	}
}

/* ---- the query behind an id ---- */

/* A query whose log is shown, as of one read transaction. */
struct qinfo {
	uint32_t qid;
	char name[SL_CONFIG_NAME_MAX + 1];
	uint64_t outdir;  /* out/<name>/ */
	bool has_batch;   /* a batch committed */
	uint64_t last;    /* the last committed batch */
};

struct qfind {
	uint32_t qid;
	char *name;
	bool found;
};

static int find_qid(void *ctx, const char *name, uint32_t qid)
{
	struct qfind *f = ctx;
	if (qid != f->qid)
		return 0;
	snprintf(f->name, SL_CONFIG_NAME_MAX + 1, "%s", name);
	f->found = true;
	return 1;
}

static bool shown(const struct sl_smeta *sm, const char *name)
{
	const struct sl_query_config *q = sm->cfg ? sl_config_find(sm->cfg, name) : NULL;
	/* file sinks (json, csv, parquet) in append mode: Spark's refuses other modes */
	return q && q->sink_format <= SL_SINK_PARQUET && q->output_mode == SL_OUTPUT_APPEND;
}

/* The query qid when its log is shown: 0, ENOENT, or an error. */
static int query_of(const struct sl_smeta *sm, struct sl_txn *t, uint32_t qid, struct qinfo *qi)
{
	struct qfind f = {.qid = qid, .name = qi->name};
	struct sl_engine_status st;
	int rc;

	rc = sl_engine_queries(t, find_qid, &f);
	if (rc && !f.found)
		return rc;
	if (!f.found || !shown(sm, qi->name))
		return ENOENT;
	qi->qid = qid;
	rc = sl_txn_dirent_get(t, SL_ID_OUT, qi->name, &qi->outdir);
	if (rc == 0)
		rc = sl_engine_status(t, qid, &st);
	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	qi->has_batch = st.has_batch;
	qi->last = st.batch;
	return 0;
}

/*
 * Whether log file n answers a lookup: every batch file and every
 * compaction up to the last batch, listed or not. A reader that listed the
 * folder just before a compaction can still read what it listed (Spark
 * keeps superseded log files for fileSink.log.cleanupDelay, 10 minutes, for
 * the same reason); a rendered file never changes, so this costs nothing.
 */
static bool answers(const struct qinfo *qi, bool compact, uint64_t n)
{
	if (!qi->has_batch || n > qi->last)
		return false;
	return !compact || (n + 1) % COMPACT_INTERVAL == 0;
}

/* ---- rendering a file ---- */

static int64_t ms_of(int64_t ns)
{
	return ns >= 0 ? ns / 1000000 : -((-ns + 999999) / 1000000);
}

/* File id's bytes into *out, and the newest mtime of its parts. */
static int render(const struct sl_smeta *sm, struct sl_txn *t, uint64_t id,
		  struct sl_strbuf *out, int64_t *mtime_ns)
{
	struct qinfo qi;
	bool compact = sl_view_kind(id) == K_COMPACT;
	int rc;

	if ((rc = query_of(sm, t, sl_view_qid(id), &qi)))
		return rc;
	if (!answers(&qi, compact, sl_view_n(id)))
		return ENOENT;
	struct sl_out_part *parts;
	size_t nparts;
	if ((rc = sl_out_parts(t, qi.outdir, compact ? 0 : sl_view_n(id), sl_view_n(id), &parts,
			       &nparts)))
		return rc;
	struct sl_smeta_status *v = calloc(nparts ? nparts : 1, sizeof(*v));
	struct sl_strbuf uris = {0};
	size_t *at = calloc(nparts ? nparts : 1, sizeof(*at));
	*mtime_ns = 0;
	for (size_t i = 0; v && at && i < nparts; i++) {
		at[i] = uris.len;
		sl_strbuf_adds(&uris, sm->root);
		sl_strbuf_adds(&uris, "/out/");
		sl_smeta_uri_encode(&uris, qi.name);
		sl_strbuf_addc(&uris, '/');
		sl_smeta_uri_encode(&uris, parts[i].rel);
		sl_strbuf_addc(&uris, 0);
		v[i] = (struct sl_smeta_status){.size = parts[i].size,
						.mtime_ms = ms_of(parts[i].mtime_ns),
						.replication = 1, .block_size = BLOCK_SIZE};
		if (parts[i].mtime_ns > *mtime_ns)
			*mtime_ns = parts[i].mtime_ns;
	}
	if (!v || !at || uris.oom) {
		rc = ENOMEM;
	} else {
		for (size_t i = 0; i < nparts; i++)
			v[i].path = uris.p + at[i];
		sl_smeta_serialize(out, v, nparts);
		if (out->oom)
			rc = ENOMEM;
	}
	sl_strbuf_release(&uris);
	free(at);
	free(v);
	sl_out_parts_free(parts, nparts);
	return rc;
}

/* ---- the nodes ---- */

static void file_attr(uint64_t id, size_t len, int64_t mtime_ns, struct sl_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->mode = S_IFREG | 0444;
	a->size = len;
	a->mtime_ns = a->ctime_ns = mtime_ns;
}

/* The folder's attributes: out/<q>/'s times, which change at each commit. */
static int dir_attr(struct sl_txn *t, const struct qinfo *qi, struct sl_attr *a)
{
	struct sl_inode d;
	int rc = sl_txn_inode_get(t, qi->outdir, &d);

	if (rc)
		return rc == SL_NOTFOUND ? ENOENT : rc;
	memset(a, 0, sizeof(*a));
	a->id = sl_view_id(qi->qid, K_DIR, 0);
	a->mode = S_IFDIR | 0555;
	a->mtime_ns = d.mtime_ns;
	a->ctime_ns = d.ctime_ns;
	return 0;
}

int sl_smeta_entry(const struct sl_smeta *sm, uint64_t dir, struct sl_attr *out)
{
	struct sl_txn *t;
	struct sl_inode d;
	struct qinfo qi;
	int rc;

	if (dir < SL_ID_FIRST)
		return ENOENT;
	if ((rc = sl_catalog_read(sl_land_catalog(sm->l), &t)))
		return rc;
	rc = sl_txn_inode_get(t, dir, &d);
	if (rc == 0 && (d.parent != SL_ID_OUT || d.kind != SL_KIND_DIR || !shown(sm, d.name)))
		rc = ENOENT;
	if (rc == 0 && (rc = sl_qindex_qid(t, d.name, &qi.qid)) == 0)
		rc = query_of(sm, t, qi.qid, &qi);
	if (rc == 0)
		rc = dir_attr(t, &qi, out);
	sl_txn_end(t);
	return rc == SL_NOTFOUND ? ENOENT : rc;
}

int sl_smeta_getattr(const struct sl_smeta *sm, uint64_t id, struct sl_attr *out)
{
	struct sl_strbuf b = {0};
	struct sl_txn *t;
	struct qinfo qi;
	int64_t mtime;
	int rc;

	if (!sl_smeta_owns(id))
		return ENOENT;
	if ((rc = sl_catalog_read(sl_land_catalog(sm->l), &t)))
		return rc;
	if (sl_view_kind(id) == K_DIR) {
		if ((rc = query_of(sm, t, sl_view_qid(id), &qi)) == 0)
			rc = dir_attr(t, &qi, out);
	} else if ((rc = render(sm, t, id, &b, &mtime)) == 0) {
		file_attr(id, b.len, mtime, out);
	}
	sl_txn_end(t);
	sl_strbuf_release(&b);
	return rc;
}

/* "N" or "N.compact", N without leading zeros; false for any other name. */
static bool parse_name(const char *name, unsigned *kind, uint64_t *n)
{
	char *end;

	if (name[0] < '0' || name[0] > '9' || (name[0] == '0' && name[1] >= '0' && name[1] <= '9'))
		return false;
	unsigned long long v = strtoull(name, &end, 10);
	if (v > SL_VIEW_N_MAX)
		return false;
	if (!strcmp(end, ".compact"))
		*kind = K_COMPACT;
	else if (!*end)
		*kind = K_BATCH;
	else
		return false;
	*n = v;
	return true;
}

int sl_smeta_lookup(const struct sl_smeta *sm, uint64_t parent, const char *name,
		    struct sl_attr *out)
{
	unsigned kind;
	uint64_t n;

	if (!sl_smeta_owns(parent) || sl_view_kind(parent) != K_DIR)
		return ENOTDIR;
	if (!parse_name(name, &kind, &n))
		return ENOENT;
	return sl_smeta_getattr(sm, sl_view_id(sl_view_qid(parent), kind, n), out);
}

int sl_smeta_list(const struct sl_smeta *sm, uint64_t dir,
		  int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx)
{
	struct sl_txn *t;
	struct qinfo qi;
	struct sl_attr a;
	char name[32];
	int rc;

	if (!sl_smeta_owns(dir) || sl_view_kind(dir) != K_DIR)
		return ENOTDIR;
	if ((rc = sl_catalog_read(sl_land_catalog(sm->l), &t)))
		return rc;
	if ((rc = query_of(sm, t, sl_view_qid(dir), &qi)) || !qi.has_batch)
		goto end;
	/* Spark's compactible log: the latest compaction c (c + 1 a multiple of
	 * the interval) as c.compact, and the batches after it; sizes come with
	 * getattr: listing renders nothing */
	uint64_t k = (qi.last + 1) / COMPACT_INTERVAL, first = k * COMPACT_INTERVAL;
	if (k > 0) {
		snprintf(name, sizeof(name), "%" PRIu64 ".compact", first - 1);
		file_attr(sl_view_id(qi.qid, K_COMPACT, first - 1), 0, 0, &a);
		rc = fn(ctx, name, &a);
	}
	for (uint64_t n = first; rc == 0 && n <= qi.last && n <= SL_VIEW_N_MAX; n++) {
		snprintf(name, sizeof(name), "%" PRIu64, n);
		file_attr(sl_view_id(qi.qid, K_BATCH, n), 0, 0, &a);
		rc = fn(ctx, name, &a);
	}
end:
	sl_txn_end(t);
	return rc;
}

int sl_smeta_read(const struct sl_smeta *sm, uint64_t id, char **data, size_t *len)
{
	struct sl_strbuf b = {0};
	struct sl_txn *t;
	int64_t mtime;
	int rc;

	if (!sl_smeta_owns(id))
		return ENOENT;
	if (sl_view_kind(id) == K_DIR)
		return EISDIR;
	if ((rc = sl_catalog_read(sl_land_catalog(sm->l), &t)))
		return rc;
	rc = render(sm, t, id, &b, &mtime);
	sl_txn_end(t);
	if (rc == 0 && !b.p)
		sl_strbuf_grow(&b, 1);
	if (rc == 0 && b.oom)
		rc = ENOMEM;
	if (rc) {
		sl_strbuf_release(&b);
		return rc;
	}
	*data = b.p;
	*len = b.len;
	return 0;
}
