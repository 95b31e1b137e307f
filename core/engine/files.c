/* SPDX-License-Identifier: MIT */
/*
 * Per-file state (files.h): the landed files in landing order, where each
 * is now, and per query the file source's record of it (planned, skipped,
 * cleaned: source_file.h), its index (waiting) and its batches' commits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "err.h"
#include "files.h"
#include "qindex.h"
#include "source_file.h"

/* A query's record of a file (source_file.h), kept for the listing. */
struct rec {
	uint64_t id;
	char fate, clean;
	bool by_name;
	uint64_t batch, seq, size;
	int64_t landed_ns, clock_us, threshold_us;
	char *path;
};

/* A query of the config, as of the listing's transaction. */
struct qinfo {
	const struct sl_query_config *cfg;
	bool started;                  /* it has an id: it ran once */
	uint32_t qid;
	struct sl_engine_status es;
	struct rec *recs;              /* its records (live and history), by id */
	size_t nrecs, caprecs;
};

struct build {
	struct sl_txn *t;
	const struct sl_files_filter *f;
	struct qinfo *qs;
	size_t nq;
	struct sl_files *out;
	size_t cap;
	uint64_t *gone;                /* ids of removed files the queries have records of */
	size_t ngone, capgone;
	char path[4096], loc[4200];    /* scratch */
};

const char *sl_files_state_name(enum sl_files_state s)
{
	static const char *const names[] = {"waiting",   "planned",  "failed",  "committed",
					    "skipped",   "archived", "deleted"};
	return (size_t)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* Whether the query's lastError names the file (a FAILFAST stop, a read error). */
static bool error_names(const char *error, const char *path)
{
	const char *p = error;
	size_t n = strlen(path);

	while ((p = strstr(p, "'in/")) != NULL) {
		if (!strncmp(p + 4, path, n) && p[4 + n] == '\'')
			return true;
		p += 4;
	}
	return false;
}

/*
 * Query x's view of file e (location already set): false when x does not
 * read it.
 */
static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int rec_load(void *ctx, uint64_t id, const struct sl_file_record *r)
{
	struct qinfo *x = ctx;
	if (x->nrecs == x->caprecs) {
		size_t c = x->caprecs ? x->caprecs * 2 : 64;
		struct rec *v = realloc(x->recs, c * sizeof(*v));
		if (!v)
			return ENOMEM;
		x->recs = v;
		x->caprecs = c;
	}
	struct rec *d = &x->recs[x->nrecs];
	*d = (struct rec){.id = id, .fate = r->fate, .clean = r->clean, .by_name = r->by_name,
			  .batch = r->batch, .seq = r->seq, .size = r->size,
			  .landed_ns = r->landed_ns, .clock_us = r->clock_us,
			  .threshold_us = r->threshold_us, .path = strdup(r->path)};
	if (!d->path)
		return ENOMEM;
	x->nrecs++;
	return 0;
}

/* Query x's record of file id, or NULL. */
static const struct rec *rec_find(const struct qinfo *x, uint64_t id)
{
	struct rec k = {.id = id};
	return x->nrecs ? bsearch(&k, x->recs, x->nrecs, sizeof(k), rec_cmp) : NULL;
}

static void qinfo_release(struct qinfo *qs, size_t n)
{
	for (size_t k = 0; qs && k < n; k++) {
		for (size_t i = 0; i < qs[k].nrecs; i++)
			free(qs[k].recs[i].path);
		free(qs[k].recs);
	}
	free(qs);
}

static int query_state(struct build *b, struct qinfo *x, const struct sl_files_entry *e,
		       struct sl_files_query *out, bool *reads)
{
	const struct rec *r;

	memset(out, 0, sizeof(*out));
	out->name = x->cfg->name;
	*reads = false;
	if (!x->started) {
		/* it indexes every landed file at its first start */
		*reads = e->location && !strncmp(e->location, "in/", 3) &&
			 sl_qindex_match(&x->cfg->source.path, e->path);
		out->state = SL_FILES_WAITING;
		return 0;
	}
	r = rec_find(x, e->id);
	if (!r) {
		/* not planned, or planned by a version that kept no records */
		if (!e->location || strncmp(e->location, "in/", 3) ||
		    !sl_qindex_match(&x->cfg->source.path, e->path))
			return 0;
		*reads = true;
		if (sl_qindex_waiting(b->t, x->qid, e->seq))
			out->state = SL_FILES_WAITING;
		else if (sl_qindex_holds(b->t, x->qid, e->id))
			out->state = SL_FILES_PLANNED;
		else
			out->state = SL_FILES_COMMITTED;
		return 0;
	}
	*reads = true;
	out->batch = r->batch;
	switch (r->fate) {
	case SL_FATE_SKIP_AGE:
	case SL_FATE_SKIP_SEEN:
		out->state = SL_FILES_SKIPPED;
		out->reason = r->fate == SL_FATE_SKIP_AGE ? SL_FILES_MAX_FILE_AGE
							  : SL_FILES_ALREADY_SEEN;
		out->clock_us = r->clock_us;
		out->threshold_us = r->threshold_us;
		out->by_name = r->by_name;
		return 0;
	case SL_FATE_CLEANED:
		out->has_batch = true;
		/* the clean runs right after the commit: until then, committed */
		if (e->location && !strncmp(e->location, "in/", 3))
			out->state = SL_FILES_COMMITTED;
		else
			out->state = r->clean == 'a' ? SL_FILES_ARCHIVED : SL_FILES_DELETED;
		return 0;
	case SL_FATE_PLANNED:
		out->has_batch = true;
		if (x->es.has_batch && r->batch <= x->es.batch)
			out->state = SL_FILES_COMMITTED;
		else if (x->es.error[0] && error_names(x->es.error, r->path))
			out->state = SL_FILES_FAILED;
		else
			out->state = SL_FILES_PLANNED;
		return 0;
	}
	return SL_ECORRUPT;
}

static void entry_release(struct sl_files_entry *e)
{
	free(e->path);
	free(e->location);
	free(e->q);
}

/* Adds file e (path, location set; strings steal b's copies) when the filter keeps it. */
static int add(struct build *b, struct sl_files_entry *e)
{
	const struct sl_files_filter *f = b->f;
	int rc = 0;

	if (f && f->match && !f->match(f->ctx, e->path))
		return 0;
	e->q = calloc(b->nq ? b->nq : 1, sizeof(*e->q));
	e->path = strdup(e->path);
	if (e->location)
		e->location = strdup(e->location);
	if (!e->q || !e->path || (b->loc[0] && !e->location)) {
		rc = ENOMEM;
		goto release;
	}
	e->nq = 0;
	for (size_t k = 0; k < b->nq; k++) {
		bool reads;
		if ((rc = query_state(b, &b->qs[k], e, &e->q[e->nq], &reads)))
			goto release;
		if (reads)
			e->nq++;
	}
	if (f && f->query && e->nq == 0)
		goto release; /* not one the query reads */
	if (b->out->n == b->cap) {
		size_t c = b->cap ? b->cap * 2 : 64;
		struct sl_files_entry *v = realloc(b->out->v, c * sizeof(*v));
		if (!v) {
			rc = ENOMEM;
			goto release;
		}
		b->out->v = v;
		b->cap = c;
	}
	b->out->v[b->out->n++] = *e;
	return 0;
release:
	entry_release(e);
	return rc;
}

/* The in/-relative path an archived file landed at: from a query's record. */
static void landed_path(struct build *b, uint64_t id, const char *fallback)
{
	for (size_t k = 0; k < b->nq; k++) {
		const struct rec *r = rec_find(&b->qs[k], id);
		if (r) {
			snprintf(b->path, sizeof(b->path), "%s", r->path);
			return;
		}
	}
	snprintf(b->path, sizeof(b->path), "%s", fallback);
}

static int landed_cb(void *ctx, uint64_t seq, uint64_t id)
{
	struct build *b = ctx;
	struct sl_inode i;
	char rel[4096];
	int rc;

	if ((rc = sl_txn_inode_get(b->t, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	rc = sl_qindex_relpath(b->t, &i, b->path, sizeof(b->path));
	if (rc == 0) {
		snprintf(b->loc, sizeof(b->loc), "in/%s", b->path);
	} else if (rc == ENOENT) {
		if ((rc = sl_qindex_relpath_under(b->t, &i, SL_ID_ARCHIVE, rel, sizeof(rel))))
			return rc == ENOENT ? 0 : rc;
		snprintf(b->loc, sizeof(b->loc), "archive/%s", rel);
		landed_path(b, id, rel);
	} else {
		return rc;
	}
	struct sl_files_entry e = {.id = id, .seq = seq, .size = i.size,
				   .landed_ns = i.landed_ns, .mtime_ns = i.mtime_ns,
				   .path = b->path, .location = b->loc};
	return add(b, &e);
}

static int gone_cb(struct build *b, uint64_t id)
{
	struct sl_inode i;
	int rc = sl_txn_inode_get(b->t, id, &i);

	if (rc != SL_NOTFOUND)
		return rc;
	if (b->ngone == b->capgone) {
		size_t c = b->capgone ? b->capgone * 2 : 64;
		uint64_t *v = realloc(b->gone, c * sizeof(*v));
		if (!v)
			return ENOMEM;
		b->gone = v;
		b->capgone = c;
	}
	b->gone[b->ngone++] = id;
	return 0;
}

static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int by_seq(const void *a, const void *b)
{
	const struct sl_files_entry *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Files removed since a query planned or skipped them: from its records. */
static int add_gone(struct build *b)
{
	int rc;

	for (size_t k = 0; k < b->nq; k++)
		for (size_t i = 0; i < b->qs[k].nrecs; i++)
			if ((rc = gone_cb(b, b->qs[k].recs[i].id)))
				return rc;
	if (b->ngone == 0)
		return 0;
	qsort(b->gone, b->ngone, sizeof(*b->gone), by_u64);
	for (size_t g = 0; g < b->ngone; g++) {
		if (g && b->gone[g] == b->gone[g - 1])
			continue;
		struct sl_files_entry e = {.id = b->gone[g]};
		for (size_t k = 0; k < b->nq; k++) {
			const struct rec *r = rec_find(&b->qs[k], e.id);
			if (!r)
				continue;
			e.seq = r->seq;
			e.size = r->size;
			e.landed_ns = r->landed_ns;
			snprintf(b->path, sizeof(b->path), "%s", r->path);
			break;
		}
		e.path = b->path;
		b->loc[0] = 0;
		if ((rc = add(b, &e)))
			return rc;
	}
	return 0;
}

int sl_files_list(struct sl_txn *t, const struct sl_config *cfg, const struct sl_files_filter *f,
		  struct sl_files **out)
{
	size_t n = sl_config_nqueries(cfg);
	struct build *b = calloc(1, sizeof(*b));
	struct sl_files *l = calloc(1, sizeof(*l));
	int rc = 0;

	if (!b || !l || !(b->qs = calloc(n ? n : 1, sizeof(*b->qs))) ||
	    !(l->errors = calloc(n ? n : 1, sizeof(*l->errors)))) {
		rc = ENOMEM;
		goto fail;
	}
	b->t = t;
	b->f = f;
	b->out = l;
	for (size_t k = 0; k < n; k++) {
		const struct sl_query_config *q = sl_config_query(cfg, k);
		struct qinfo *x = &b->qs[b->nq];
		if (f && f->query && strcmp(f->query, q->name))
			continue;
		x->cfg = q;
		rc = sl_qindex_qid(t, q->name, &x->qid);
		if (rc == 0 && (rc = sl_engine_status(t, x->qid, &x->es)) == SL_NOTFOUND)
			rc = 0;
		if (rc == SL_NOTFOUND)
			rc = 0; /* never started */
		else if (rc == 0)
			x->started = true;
		if (rc == 0 && x->started) {
			b->nq++; /* released with the others from here on */
			if ((rc = sl_file_record_each(t, x->qid, rec_load, x)))
				goto fail;
			b->nq--;
			if (x->nrecs)
				qsort(x->recs, x->nrecs, sizeof(*x->recs), rec_cmp);
		}
		if (rc)
			goto fail;
		snprintf(l->errors[b->nq], sizeof(l->errors[0]), "%s", x->es.error);
		b->nq++;
	}
	if ((rc = sl_txn_landed_each(t, landed_cb, b)) || (rc = add_gone(b)))
		goto fail;
	/* lastError pointers, now that the entries stopped moving */
	for (size_t i = 0; i < l->n; i++)
		for (size_t k = 0; k < l->v[i].nq; k++)
			if (l->v[i].q[k].state == SL_FILES_FAILED)
				for (size_t j = 0; j < b->nq; j++)
					if (b->qs[j].cfg->name == l->v[i].q[k].name)
						l->v[i].q[k].error = l->errors[j];
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), by_seq);
	free(b->gone);
	qinfo_release(b->qs, b->nq);
	free(b);
	*out = l;
	return 0;
fail:
	if (b) {
		free(b->gone);
		qinfo_release(b->qs, b->nq);
	}
	free(b);
	sl_files_free(l);
	return rc;
}

void sl_files_free(struct sl_files *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		entry_release(&l->v[i]);
	free(l->v);
	free(l->errors);
	free(l);
}
