/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint view, rendered from the engine's log. Ids: sl_view_id();
 * kinds: 1 checkpoint/<q>/, 2 offsets/, 3 commits/, 4 sources/, 5 sources/0/,
 * 6 metadata, 7 offsets/N, 8 commits/N, 9 sources/0/N, 10 status/<q>.json,
 * 11 status/<q>.jsonl (the last progress report, and the last 100);
 * 12-14 are out/<q>/_spark_metadata/'s (smeta.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "engine.h"
#include "err.h"
#include "render.h"
#include "qindex.h"
#include "qlog.h"
#include "view.h"

enum {
	K_QDIR = 1, K_OFFSETS, K_COMMITS, K_SOURCES, K_SOURCES0, K_META, K_OFF, K_COM, K_SRC,
	K_STATUS_JSON, K_STATUS_JSONL, /* status/<q>.json, status/<q>.jsonl */
};

bool sl_view_owns(uint64_t id)
{
	return id == SL_ID_CHECKPOINT || (id & SL_VIEW_TAG);
}

/* The log kind behind a file kind, or 0. */
static char log_kind(unsigned kind)
{
	switch (kind) {
	case K_META: return 'm';
	case K_OFF: return 'o';
	case K_COM: return 'c';
	case K_SRC: return 's';
	}
	return 0;
}

struct joined {
	struct sl_txn *t;
	uint32_t qid;
	char *buf;
	size_t len;
	bool last_only;
	int err;
};

static int join_progress(void *ctx, uint64_t n, size_t len)
{
	struct joined *j = ctx;
	const void *d;
	size_t dl;
	(void)len;
	if (sl_engine_checkpoint_get(j->t, j->qid, 'p', n, &d, &dl))
		return 0;
	if (j->last_only)
		j->len = 0;
	char *b = realloc(j->buf, j->len + dl + 2);
	if (!b) {
		j->err = ENOMEM;
		return 1;
	}
	j->buf = b;
	memcpy(b + j->len, d, dl);
	j->len += dl;
	b[j->len++] = '\n';
	return 0;
}

/* status/<q>.json: the last report or "null"; .jsonl: the last 100, oldest first. */
static int render_status(struct sl_txn *t, uint64_t id, char **data, size_t *len)
{
	struct joined j = {.t = t, .qid = sl_view_qid(id), .last_only = sl_view_kind(id) == K_STATUS_JSON};
	int rc = sl_engine_checkpoint_each(t, j.qid, 'p', join_progress, &j);
	if (rc == 0 && j.err)
		rc = j.err;
	const void *e;
	size_t elen;
	if (rc == 0 && j.last_only && sl_engine_checkpoint_get(t, j.qid, 'e', 0, &e, &elen) == 0) {
		/* a stopped query: its last report, and why it stopped (DESIGN §1) */
		char *with;
		size_t wlen;
		rc = sl_render_with_error(j.buf, j.len, e, elen, &with, &wlen);
		if (rc == 0) {
			free(j.buf);
			j.buf = with;
			j.len = wlen;
		}
	}
	if (rc == 0 && j.len == 0 && j.last_only) {
		free(j.buf);
		j.buf = strdup("null\n");
		j.len = j.buf ? 5 : 0;
		if (!j.buf)
			rc = ENOMEM;
	}
	if (rc) {
		free(j.buf);
		return rc;
	}
	*data = j.buf ? j.buf : strdup("");
	*len = j.len;
	return *data ? 0 : ENOMEM;
}

static void dir_attr(uint64_t id, struct sl_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->mode = S_IFDIR | 0555;
}

/* The attributes of a file entry; SL_NOTFOUND when absent. */
static int file_attr(struct sl_txn *t, uint64_t id, struct sl_attr *a)
{
	const void *d;
	size_t len;
	int rc = sl_engine_checkpoint_get(t, sl_view_qid(id), log_kind(sl_view_kind(id)), sl_view_n(id), &d, &len);
	if (rc)
		return rc;
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->mode = S_IFREG | 0444;
	a->size = sl_qlog_unpacked_size(d, len);
	return 0;
}

static int parse_n(const char *name, uint64_t *n)
{
	char *end;
	if (!*name || (name[0] == '0' && name[1]) || name[0] == '-' || name[0] == '+')
		return ENOENT;
	unsigned long long v = strtoull(name, &end, 10);
	if (*end || v > SL_VIEW_N_MAX)
		return ENOENT;
	*n = v;
	return 0;
}

static int with_txn(struct sl_land *l, struct sl_txn **t)
{
	return sl_catalog_read(sl_land_catalog(l), t);
}

int sl_view_getattr(struct sl_land *l, uint64_t id, struct sl_attr *out)
{
	struct sl_txn *t;
	int rc;

	if (id == SL_ID_CHECKPOINT) {
		dir_attr(id, out);
		return 0;
	}
	if (sl_view_kind(id) == K_STATUS_JSON || sl_view_kind(id) == K_STATUS_JSONL) {
		char *d;
		size_t len;
		if ((rc = with_txn(l, &t)))
			return rc;
		rc = render_status(t, id, &d, &len);
		sl_txn_end(t);
		if (rc)
			return rc;
		free(d);
		memset(out, 0, sizeof(*out));
		out->id = id;
		out->mode = S_IFREG | 0444;
		out->size = len;
		return 0;
	}
	if (!log_kind(sl_view_kind(id))) {
		if (sl_view_kind(id) < K_QDIR || sl_view_kind(id) > K_SOURCES0)
			return ENOENT;
		dir_attr(id, out);
		return 0;
	}
	if ((rc = with_txn(l, &t)))
		return rc;
	rc = file_attr(t, id, out);
	sl_txn_end(t);
	return rc == SL_NOTFOUND ? ENOENT : rc;
}

int sl_view_lookup(struct sl_land *l, uint64_t parent, const char *name, struct sl_attr *out)
{
	struct sl_txn *t;
	uint32_t qid;
	uint64_t n = 0, id = 0;
	int rc;

	if (parent == SL_ID_STATUS) {
		char q[SL_CONFIG_NAME_MAX + 8];
		size_t n = strlen(name);
		unsigned kind = 0;
		if (n > 6 && !strcmp(name + n - 6, ".jsonl"))
			kind = K_STATUS_JSONL, n -= 6;
		else if (n > 5 && !strcmp(name + n - 5, ".json"))
			kind = K_STATUS_JSON, n -= 5;
		if (!kind || n > SL_CONFIG_NAME_MAX)
			return ENOENT;
		memcpy(q, name, n);
		q[n] = 0;
		if ((rc = with_txn(l, &t)))
			return rc;
		rc = sl_qindex_qid(t, q, &qid);
		sl_txn_end(t);
		if (rc)
			return rc == SL_NOTFOUND ? ENOENT : rc;
		return sl_view_getattr(l, sl_view_id(qid, kind, 0), out);
	}
	if (parent == SL_ID_CHECKPOINT) {
		if ((rc = with_txn(l, &t)))
			return rc;
		rc = sl_qindex_qid(t, name, &qid);
		sl_txn_end(t);
		if (rc)
			return rc == SL_NOTFOUND ? ENOENT : rc;
		dir_attr(sl_view_id(qid, K_QDIR, 0), out);
		return 0;
	}
	qid = sl_view_qid(parent);
	switch (sl_view_kind(parent)) {
	case K_QDIR:
		if (!strcmp(name, "offsets"))
			id = sl_view_id(qid, K_OFFSETS, 0);
		else if (!strcmp(name, "commits"))
			id = sl_view_id(qid, K_COMMITS, 0);
		else if (!strcmp(name, "sources"))
			id = sl_view_id(qid, K_SOURCES, 0);
		else if (!strcmp(name, "metadata"))
			id = sl_view_id(qid, K_META, 0);
		break;
	case K_SOURCES:
		if (!strcmp(name, "0"))
			id = sl_view_id(qid, K_SOURCES0, 0);
		break;
	case K_OFFSETS:
	case K_COMMITS:
	case K_SOURCES0:
		if (parse_n(name, &n) == 0)
			id = sl_view_id(qid, sl_view_kind(parent) == K_OFFSETS   ? K_OFF
				      : sl_view_kind(parent) == K_COMMITS ? K_COM
								   : K_SRC,
				 n);
		break;
	}
	if (!id)
		return ENOENT;
	return sl_view_getattr(l, id, out);
}

struct lister {
	struct sl_txn *t;
	uint32_t qid;
	unsigned kind;
	int (*fn)(void *ctx, const char *name, const struct sl_attr *a);
	void *ctx;
};

static int list_query(void *ctx, const char *name, uint32_t qid)
{
	struct lister *ls = ctx;
	struct sl_attr a;
	dir_attr(sl_view_id(qid, K_QDIR, 0), &a);
	return ls->fn(ls->ctx, name, &a);
}

static int list_status(void *ctx, const char *name, uint32_t qid)
{
	struct lister *ls = ctx;
	struct sl_attr a = {0};
	char file[SL_CONFIG_NAME_MAX + 8];
	int rc;

	a.mode = S_IFREG | 0444; /* sizes are rendered at getattr */
	a.id = sl_view_id(qid, K_STATUS_JSON, 0);
	snprintf(file, sizeof(file), "%s.json", name);
	if ((rc = ls->fn(ls->ctx, file, &a)))
		return rc;
	a.id = sl_view_id(qid, K_STATUS_JSONL, 0);
	snprintf(file, sizeof(file), "%s.jsonl", name);
	return ls->fn(ls->ctx, file, &a);
}

static int list_entry(void *ctx, uint64_t n, size_t len)
{
	struct lister *ls = ctx;
	struct sl_attr a = {0};
	char name[24];

	if (n > SL_VIEW_N_MAX)
		return 0;
	a.id = sl_view_id(ls->qid, ls->kind, n);
	a.mode = S_IFREG | 0444;
	a.size = len;
	const void *d;
	size_t dl;
	if (len >= SL_QLOG_PACK_MIN / 8 &&
	    sl_engine_checkpoint_get(ls->t, ls->qid, log_kind(ls->kind), n, &d, &dl) == 0)
		a.size = sl_qlog_unpacked_size(d, dl);
	snprintf(name, sizeof(name), "%" PRIu64, n);
	return ls->fn(ls->ctx, name, &a);
}

int sl_view_list(struct sl_land *l, uint64_t dir,
		 int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx)
{
	struct lister ls = {.fn = fn, .ctx = ctx, .qid = sl_view_qid(dir)};
	struct sl_txn *t;
	struct sl_attr a;
	int rc;

	if ((rc = with_txn(l, &t)))
		return rc;
	ls.t = t;
	if (dir == SL_ID_CHECKPOINT) {
		rc = sl_engine_queries(t, list_query, &ls);
		goto end;
	}
	if (dir == SL_ID_STATUS) {
		rc = sl_engine_queries(t, list_status, &ls);
		goto end;
	}
	switch (sl_view_kind(dir)) {
	case K_QDIR: {
		static const struct {
			const char *name;
			unsigned kind;
		} kids[] = {{"commits", K_COMMITS}, {"offsets", K_OFFSETS}, {"sources", K_SOURCES}};
		for (size_t i = 0; i < 3 && rc == 0; i++) {
			dir_attr(sl_view_id(ls.qid, kids[i].kind, 0), &a);
			rc = fn(ctx, kids[i].name, &a);
		}
		if (rc == 0 && file_attr(t, sl_view_id(ls.qid, K_META, 0), &a) == 0)
			rc = fn(ctx, "metadata", &a);
		break;
	}
	case K_SOURCES:
		dir_attr(sl_view_id(ls.qid, K_SOURCES0, 0), &a);
		rc = fn(ctx, "0", &a);
		break;
	case K_OFFSETS:
		ls.kind = K_OFF;
		rc = sl_engine_checkpoint_each(t, ls.qid, 'o', list_entry, &ls);
		break;
	case K_COMMITS:
		ls.kind = K_COM;
		rc = sl_engine_checkpoint_each(t, ls.qid, 'c', list_entry, &ls);
		break;
	case K_SOURCES0:
		ls.kind = K_SRC;
		rc = sl_engine_checkpoint_each(t, ls.qid, 's', list_entry, &ls);
		break;
	default:
		rc = ENOTDIR;
	}
end:
	sl_txn_end(t);
	return rc;
}

int sl_view_read(struct sl_land *l, uint64_t id, char **data, size_t *len)
{
	struct sl_txn *t;
	const void *d;
	size_t n;
	int rc;

	if (sl_view_kind(id) == K_STATUS_JSON || sl_view_kind(id) == K_STATUS_JSONL) {
		if ((rc = with_txn(l, &t)))
			return rc;
		rc = render_status(t, id, data, len);
		sl_txn_end(t);
		return rc;
	}
	if (!log_kind(sl_view_kind(id)) || id == SL_ID_CHECKPOINT)
		return EISDIR;
	if ((rc = with_txn(l, &t)))
		return rc;
	rc = sl_engine_checkpoint_get(t, sl_view_qid(id), log_kind(sl_view_kind(id)), sl_view_n(id), &d, &n);
	if (rc == 0)
		rc = sl_qlog_unpack(d, n, data, len);
	sl_txn_end(t);
	return rc == SL_NOTFOUND ? ENOENT : rc;
}
