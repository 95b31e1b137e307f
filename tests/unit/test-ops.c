/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/ops.c, core/dedup.c, core/groupby.c and core/state.c,
 * driven the way core/engine.c drives them, against a real catalog: each
 * batch is processed with a read transaction taken before it, then applied
 * inside sl_catalog_write(); batch N runs with the watermark batch N-1
 * returned (res.next_wm_ms). The cases follow Spark's tests in SPARK-NOTES
 * §6 (append, update, complete mode; deduplicate with watermark;
 * dropDuplicatesWithinWatermark on a subset of columns), plus sliding
 * windows, aggregates with nulls, overflow, keys too long for LMDB (stored
 * hashed), restarts and a batch redone after a crash.
 *
 * Every scenario runs three ways: plainly; closing and reopening the
 * catalog (and making new operators) between batches; and redoing each
 * batch after a simulated crash (processed, dropped, reopened, processed
 * again), its commit also failing once after the apply before it succeeds.
 * After every applied batch the stored state is checked against the
 * metrics: its counters equal rows_total and bytes, and rows_total is the
 * number of entries in the qstate table.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "batch.h"
#include "catalog.h"
#include "check.h"
#include "config.h"
#include "kmap.h"
#include "ops.h"
#include "state.h"
#include "watermark.h"

#define SEC INT64_C(1000000)
#define MIN (60 * SEC)
#define T1200 (INT64_C(1759579200) * SEC) /* 2025-10-04T12:00:00Z */
#define QID 3u
#define LONG_LEN 1024

/* Fails the current helper (returning -1) with a message. */
#define REQ(cond)                                                                                  \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);         \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

enum mode { PLAIN, REOPEN, REDO };
static const char *const mode_names[] = {"plain", "reopen", "redo"};

struct fx {
	const char *dir;
	char catdir[128];
	enum mode mode;
	struct sl_config *cfg;
	const struct sl_query_config *q;
	struct sl_catalog *cat;
	struct sl_ops *ops;
	int64_t wm;	    /* the next batch's watermark */
	struct sl_batch in; /* the next batch's rows */
	bool in_init;
	const struct sl_batch *out; /* borrowed from ops or in: valid until the next batch */
	bool ops_stale;		    /* REOPEN: new operators before the next batch */
	bool loose_bytes;	    /* skip the recount of the state's bytes */
	struct sl_ops_result res;
	char err[512];
	char got[16384]; /* the output rows, rendered */
};

/* ---- rendering ---- */

/*
 * A long string made by long_str(n): "L<n>:" then bytes derived from n (a
 * NUL among them), LONG_LEN bytes in all.
 */
static void long_str(int n, char *buf)
{
	int p = snprintf(buf, 16, "L%d:", n);
	for (int i = p; i < LONG_LEN; i++)
		buf[i] = (char)('a' + (i * 7 + n) % 26);
	buf[LONG_LEN / 2] = '\0';
}

/* Appends to the string in buf (cap bytes), truncating. */
__attribute__((format(printf, 3, 4))) static void put(char *buf, size_t cap, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	if (len < cap)
		vsnprintf(buf + len, cap - len, fmt, ap);
	va_end(ap);
}

/* A time in seconds when whole, else in microseconds with "us". */
static void put_time(char *buf, size_t cap, int64_t us)
{
	if (us % SEC == 0)
		put(buf, cap, "%" PRId64, us / SEC);
	else
		put(buf, cap, "%" PRId64 "us", us);
}

/* Renders row r of b: values comma-separated, null as "null". */
static void render_row(const struct sl_batch *b, size_t r, char *buf, size_t cap)
{
	buf[0] = '\0';
	for (size_t c = 0; c < b->schema->n; c++) {
		if (c)
			put(buf, cap, ",");
		if (sl_batch_is_null(b, r, c)) {
			put(buf, cap, "null");
			continue;
		}
		const union sl_cell *v = &b->cols[c].cells[r];
		switch (b->cols[c].type) {
		case SL_TYPE_WINDOW:
			put(buf, cap, "[");
			put_time(buf, cap, v->w.start);
			put(buf, cap, ",");
			put_time(buf, cap, v->w.end);
			put(buf, cap, ")");
			break;
		case SL_TYPE_TIMESTAMP:
			put_time(buf, cap, v->i);
			break;
		case SL_TYPE_DOUBLE:
			put(buf, cap, "%g", v->d);
			break;
		case SL_TYPE_STRING: {
			size_t len;
			const char *s = sl_batch_str(b, r, c, &len);
			int n;
			if (len == LONG_LEN && sscanf(s, "L%d:", &n) == 1) {
				/* a long string: shown as L<n>~, checked whole */
				char want[LONG_LEN];
				long_str(n, want);
				put(buf, cap, "L%d~%s", n, memcmp(s, want, LONG_LEN) ? "BAD" : "");
			} else {
				put(buf, cap, "'%.*s'", (int)len, s);
			}
			break;
		}
		default:
			put(buf, cap, "%" PRId64, v->i);
			break;
		}
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Renders every row of b into buf, " | " between rows; sorted when asked. */
static void render(const struct sl_batch *b, bool sorted, char *buf, size_t cap)
{
	char **rows = calloc(b->nrows + 1, sizeof(*rows));
	buf[0] = '\0';
	if (!rows)
		return;
	for (size_t r = 0; r < b->nrows; r++) {
		rows[r] = malloc(1024);
		if (rows[r])
			render_row(b, r, rows[r], 1024);
	}
	if (sorted)
		qsort(rows, b->nrows, sizeof(*rows), cmp_str);
	for (size_t r = 0; r < b->nrows; r++) {
		put(buf, cap, "%s%s", r ? " | " : "", rows[r] ? rows[r] : "?");
		free(rows[r]);
	}
	free(rows);
}

/* ---- the fixture ---- */

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) ? -1 : 0;
}

static int open_ops(struct fx *f)
{
	f->err[0] = '\0';
	REQ(sl_catalog_open(f->catdir, SL_CATALOG_CREATE, &f->cat) == 0);
	int rc = sl_ops_new(f->q, QID, &f->ops, f->err, sizeof(f->err));
	if (rc)
		fprintf(stderr, "sl_ops_new: %s: %s\n", sl_strerror(rc), f->err);
	REQ(rc == 0);
	return 0;
}

static void close_ops(struct fx *f)
{
	sl_ops_free(f->ops);
	f->ops = NULL;
	sl_catalog_close(f->cat);
	f->cat = NULL;
}

/* Loads sluice.json (json: the "queries" member's value for a query "q") into a new data dir. */
static int setup(struct fx *f, enum mode mode, const char *query)
{
	char path[192], err[512] = "";
	char *text;

	memset(f, 0, sizeof(*f));
	f->mode = mode;
	f->dir = test_dir();
	snprintf(path, sizeof(path), "%s/sluice.json", f->dir);
	snprintf(f->catdir, sizeof(f->catdir), "%s/catalog", f->dir);
	size_t len = strlen(query) + 64;
	REQ((text = malloc(len)));
	snprintf(text, len, "{\"queries\": {\"q\": %s}}", query);
	int wrc = write_file(path, text);
	free(text);
	REQ(wrc == 0);
	int rc = sl_config_load(f->dir, &f->cfg, err, sizeof(err));
	if (rc)
		fprintf(stderr, "sl_config_load: %s\n", err);
	REQ(rc == 0);
	REQ((f->q = sl_config_find(f->cfg, "q")));
	REQ(sl_batch_init(&f->in, &f->q->source.schema) == 0);
	f->in_init = true;
	return open_ops(f);
}

static void teardown(struct fx *f)
{
	close_ops(f);
	if (f->in_init)
		sl_batch_release(&f->in);
	sl_config_free(f->cfg);
	f->cfg = NULL;
	f->in_init = false;
	if (f->dir)
		rm_rf(f->dir);
	f->dir = NULL;
}

/* ---- building input rows ---- */

static size_t col(const struct fx *f, const char *name)
{
	long c = sl_config_schema_find(&f->q->source.schema, name);
	if (c < 0) {
		fprintf(stderr, "no column %s\n", name);
		abort();
	}
	return (size_t)c;
}

/* Starts a new input batch. */
static void batch(struct fx *f) { sl_batch_clear(&f->in); }

static size_t row(struct fx *f)
{
	size_t r;
	if (sl_batch_add_row(&f->in, &r))
		abort();
	return r;
}

static void set_ts(struct fx *f, size_t r, const char *name, int64_t us)
{
	sl_batch_set_int(&f->in, r, col(f, name), us);
}

static void set_int(struct fx *f, size_t r, const char *name, int64_t v)
{
	sl_batch_set_int(&f->in, r, col(f, name), v);
}

static void set_dbl(struct fx *f, size_t r, const char *name, double v)
{
	sl_batch_set_double(&f->in, r, col(f, name), v);
}

static void set_str(struct fx *f, size_t r, const char *name, const char *s)
{
	if (sl_batch_set_str(&f->in, r, col(f, name), s, strlen(s)))
		abort();
}

static void set_long(struct fx *f, size_t r, const char *name, int n)
{
	char buf[LONG_LEN];
	long_str(n, buf);
	if (sl_batch_set_str(&f->in, r, col(f, name), buf, LONG_LEN))
		abort();
}

/* A row whose only value is the event time t, in seconds. */
static void ev(struct fx *f, int64_t sec) { set_ts(f, row(f), "t", sec * SEC); }

static int copy_batch(struct sl_batch *dst, const struct sl_batch *src)
{
	sl_batch_clear(dst);
	for (size_t r = 0; r < src->nrows; r++) {
		size_t d;
		REQ(sl_batch_add_row(dst, &d) == 0);
		for (size_t c = 0; c < src->schema->n; c++) {
			if (sl_batch_is_null(src, r, c))
				continue;
			const union sl_cell *v = &src->cols[c].cells[r];
			switch (src->cols[c].type) {
			case SL_TYPE_STRING: {
				size_t len;
				const char *s = sl_batch_str(src, r, c, &len);
				REQ(sl_batch_set_str(dst, d, c, s, len) == 0);
				break;
			}
			case SL_TYPE_DOUBLE:
				sl_batch_set_double(dst, d, c, v->d);
				break;
			case SL_TYPE_WINDOW:
				sl_batch_set_window(dst, d, c, v->w.start, v->w.end);
				break;
			default:
				sl_batch_set_int(dst, d, c, v->i);
				break;
			}
		}
	}
	return 0;
}

/* ---- running a batch ---- */

static int apply_cb(struct sl_txn *t, void *arg) { return sl_ops_apply(arg, t); }

static int apply_fail_cb(struct sl_txn *t, void *arg)
{
	int rc = sl_ops_apply(arg, t);
	return rc ? rc : ECANCELED;
}

static int process(struct fx *f, struct sl_batch *in)
{
	struct sl_txn *t;
	int rc;

	f->err[0] = '\0';
	f->out = NULL;
	if ((rc = sl_catalog_read(f->cat, &t)))
		return rc;
	rc = sl_ops_process(f->ops, t, f->wm, in, &f->out, &f->res, f->err, sizeof(f->err));
	sl_txn_end(t);
	return rc;
}

static bool same_result(const struct sl_ops_result *a, const struct sl_ops_result *b)
{
	if (a->wm_ms != b->wm_ms || a->next_wm_ms != b->next_wm_ms || a->nm != b->nm ||
	    a->et.count != b->et.count)
		return false;
	if (a->et.count && (a->et.min_ms != b->et.min_ms || a->et.max_ms != b->et.max_ms ||
			    a->et.avg_ms != b->et.avg_ms))
		return false;
	for (size_t i = 0; i < a->nm; i++) {
		const struct sl_op_metrics *x = &a->m[i], *y = &b->m[i];
		if (strcmp(x->name, y->name) || x->rows_total != y->rows_total ||
		    x->rows_updated != y->rows_updated || x->rows_removed != y->rows_removed ||
		    x->bytes != y->bytes || x->dropped_wm != y->dropped_wm ||
		    x->dropped_dup != y->dropped_dup || x->is_dedup != y->is_dedup)
			return false;
	}
	return true;
}

static int count_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	(void)key, (void)klen, (void)val, (void)vlen;
	++*(uint64_t *)ctx;
	return 0;
}

/* Entries of op in the qstate table. */
static uint64_t entries(struct sl_txn *t, char op)
{
	unsigned char prefix[5] = {QID >> 24, (QID >> 16) & 0xff, (QID >> 8) & 0xff, QID & 0xff,
				   (unsigned char)op};
	uint64_t n = 0;
	if (sl_txn_each(t, SL_TABLE_QSTATE, prefix, 5, count_cb, &n))
		return UINT64_MAX;
	return n;
}

struct sizes {
	bool within;
	uint64_t bytes;
};

/*
 * What the operators count for one entry (core/state.h): the entry's size by
 * sl_state_entry_bytes() of its full row key, plus, within the watermark,
 * the expiry entry (expiresAt and the key) of a key with an event time.
 */
static int size_cb(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		   const void *val, size_t vlen)
{
	struct sizes *z = ctx;
	int64_t exp = INT64_MAX;
	(void)skey, (void)sklen, (void)rk;
	z->bytes += sl_state_entry_bytes(rklen, vlen);
	if (z->within && vlen == 8)
		memcpy(&exp, val, 8);
	if (exp != INT64_MAX) { /* its 'E' entry: expiresAt, the 'D' storage key; a length */
		struct sl_state_space sp = {.qid = QID, .op = SL_STATE_DEDUP};
		struct sl_state_skey sk;
		sl_state_skey(&sp, rk, rklen, &sk);
		z->bytes += 5 + 8 + (sk.len - 5) + 4;
	}
	return 0;
}

static int digest_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	uint64_t *h = ctx;
	*h = sl_kmap_hash(key, klen, *h);
	*h = sl_kmap_hash(val, vlen, *h ^ klen);
	return 0;
}

/* A digest of the query's whole state: every qstate entry and the counters. */
static uint64_t state_digest(struct fx *f)
{
	unsigned char prefix[4] = {QID >> 24, (QID >> 16) & 0xff, (QID >> 8) & 0xff, QID & 0xff};
	static const char ops[] = {SL_STATE_DEDUP, SL_STATE_AGG};
	struct sl_txn *t;
	uint64_t h = 1;

	if (!f->cat || sl_catalog_read(f->cat, &t))
		return 0;
	if (sl_txn_each(t, SL_TABLE_QSTATE, prefix, 4, digest_cb, &h))
		h = 0;
	for (size_t i = 0; i < 2; i++) {
		struct sl_state_space sp = {.qid = QID, .op = ops[i]};
		uint64_t c[2] = {0, 0};
		if (sl_state_counters(t, &sp, &c[0], &c[1]))
			h = 0;
		h = sl_kmap_hash(c, sizeof(c), h);
	}
	sl_txn_end(t);
	return h;
}

/* The stored state agrees with the metrics of the batch just applied. */
static int check_stored(struct fx *f)
{
	struct sl_txn *t;
	REQ(sl_catalog_read(f->cat, &t) == 0);
	int bad = 0;
	for (size_t i = 0; i < f->res.nm; i++) {
		const struct sl_op_metrics *m = &f->res.m[i];
		struct sl_state_space sp = {.qid = QID,
					    .op = m->is_dedup ? SL_STATE_DEDUP : SL_STATE_AGG};
		uint64_t rows = 0, bytes = 0, n = entries(t, sp.op);
		if (sl_state_counters(t, &sp, &rows, &bytes) || rows != m->rows_total ||
		    bytes != m->bytes || n != m->rows_total) {
			fprintf(stderr,
				"%s: stored rows %" PRIu64 " bytes %" PRIu64 " entries %" PRIu64
				", metrics rows_total %" PRIu64 " bytes %" PRIu64 "\n",
				m->name, rows, bytes, n, m->rows_total, m->bytes);
			bad = 1;
		}
		struct sizes z = {.within = m->is_dedup && f->q->dedup_within_wm};
		/* the clear lead of a key: the event time of dropDuplicates, or the window */
		for (size_t k = 0;
		     m->is_dedup && !z.within && f->q->has_watermark && k < f->q->ndedup; k++)
			if (f->q->dedup[k] == f->q->wm_col)
				sp.lead_payload = 8;
		if (!m->is_dedup && f->q->has_window)
			sp.lead_payload = 16;
		if (sl_state_each(t, &sp, NULL, 0, size_cb, &z) ||
		    (z.bytes != m->bytes && !f->loose_bytes)) {
			fprintf(stderr,
				"[%s] %s: bytes %" PRIu64 ", but its %" PRIu64
				" entries count %" PRIu64 "\n",
				mode_names[f->mode], m->name, m->bytes, n, z.bytes);
			bad = 1;
		}
		if (m->rows_total && !m->bytes) {
			fprintf(stderr, "%s: %" PRIu64 " rows in 0 bytes\n", m->name,
				m->rows_total);
			bad = 1;
		}
		if (m->is_dedup && f->q->dedup_within_wm && entries(t, SL_STATE_EXPIRY) > n) {
			fprintf(stderr, "%s: more expiry entries than keys\n", m->name);
			bad = 1;
		}
	}
	sl_txn_end(t);
	REQ(!bad);
	return 0;
}

/*
 * Runs the batch in f->in: returns process's error (nothing applied then),
 * or 0 with f->got and f->res set, the state applied and checked, and f->wm
 * moved on; -1 when the harness itself fails. Output rows are rendered in
 * output order, or sorted (for keys stored hashed, whose order is the hash's).
 */
static int run_batch(struct fx *f, bool sorted)
{
	int rc;

	if (f->mode == REOPEN && f->ops_stale) {
		/* new operators over the reopened catalog, as after a restart */
		sl_ops_free(f->ops);
		f->ops = NULL;
		f->ops_stale = false;
		int orc = sl_ops_new(f->q, QID, &f->ops, f->err, sizeof(f->err));
		REQ(orc == 0);
	}
	if (f->mode == REDO) {
		/* the crash: process, drop it all, reopen, process the same rows again */
		struct sl_batch copy;
		struct sl_ops_result first;
		char *got1 = malloc(sizeof(f->got));
		REQ(got1);
		REQ(sl_batch_init(&copy, &f->q->source.schema) == 0);
		REQ(copy_batch(&copy, &f->in) == 0);
		int rc1 = process(f, &copy);
		got1[0] = '\0';
		if (rc1 == 0)
			render(f->out, sorted, got1, sizeof(f->got));
		first = f->res;
		close_ops(f);
		sl_batch_release(&copy);
		if (open_ops(f)) {
			free(got1);
			return -1;
		}
		rc = process(f, &f->in);
		bool same = rc == rc1;
		if (same && rc == 0) {
			render(f->out, sorted, f->got, sizeof(f->got));
			same = !strcmp(got1, f->got) && same_result(&first, &f->res);
		}
		if (!same)
			fprintf(stderr, "redo differs: rc %d/%d, output '%s' then '%s'\n", rc1, rc,
				got1, f->got);
		free(got1);
		REQ(same);
	} else {
		rc = process(f, &f->in);
	}
	if (rc)
		return rc;
	render(f->out, sorted, f->got, sizeof(f->got));
	REQ(f->res.wm_ms == f->wm);
	REQ(f->res.next_wm_ms >= f->wm);
	if (f->mode == REDO) {
		/* a commit whose group fails after the apply: its writes are dropped, and it reruns
		 */
		REQ(sl_catalog_write(f->cat, apply_fail_cb, f->ops) == ECANCELED);
	}
	REQ(sl_catalog_write(f->cat, apply_cb, f->ops) == 0);
	f->wm = f->res.next_wm_ms;
	REQ(check_stored(f) == 0);
	if (f->mode == REOPEN) {
		/* the catalog now, the operators (which own f->out) at the next batch */
		sl_catalog_close(f->cat);
		f->cat = NULL;
		REQ(sl_catalog_open(f->catdir, SL_CATALOG_CREATE, &f->cat) == 0);
		f->ops_stale = true;
	}
	return 0;
}

/* Runs a batch and compares its output with want. */
static int expect(struct fx *f, bool sorted, const char *want)
{
	int rc = run_batch(f, sorted);
	if (rc)
		fprintf(stderr, "batch: %s (%s)\n", rc == -1 ? "harness" : sl_strerror(rc), f->err);
	REQ(rc == 0);
	if (strcmp(f->got, want))
		fprintf(stderr, "[%s] output '%s', want '%s'\n", mode_names[f->mode], f->got, want);
	REQ(!strcmp(f->got, want));
	return 0;
}

/* A batch without new data. */
static int nodata(struct fx *f, bool sorted, const char *want)
{
	batch(f);
	return expect(f, sorted, want);
}

static int due(struct fx *f, bool *d)
{
	struct sl_txn *t;
	REQ(sl_catalog_read(f->cat, &t) == 0);
	int rc = sl_ops_due(f->q, QID, t, f->wm, d);
	sl_txn_end(t);
	REQ(rc == 0);
	return 0;
}

static bool is_due(struct fx *f)
{
	bool d = false;
	if (due(f, &d))
		return false;
	return d;
}

static const struct sl_op_metrics *metric(const struct fx *f, bool dedup)
{
	for (size_t i = 0; i < f->res.nm; i++)
		if (f->res.m[i].is_dedup == dedup)
			return &f->res.m[i];
	fprintf(stderr, "no %s metrics\n", dedup ? "dedup" : "aggregation");
	abort();
}

/* The aggregation metrics: total, updated, removed, dropped by the watermark. */
static bool agg_is(const struct fx *f, uint64_t total, uint64_t updated, uint64_t removed,
		   uint64_t dropped)
{
	const struct sl_op_metrics *m = metric(f, false);
	bool ok = !strcmp(m->name, "stateStoreSave") && m->rows_total == total &&
		  m->rows_updated == updated && m->rows_removed == removed &&
		  m->dropped_wm == dropped && m->dropped_dup == 0 && (total == 0 || m->bytes > 0);
	if (!ok)
		fprintf(stderr,
			"[%s] %s: total %" PRIu64 " updated %" PRIu64 " removed %" PRIu64
			" droppedWm %" PRIu64 " droppedDup %" PRIu64 " bytes %" PRIu64
			"; want %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			mode_names[f->mode], m->name, m->rows_total, m->rows_updated,
			m->rows_removed, m->dropped_wm, m->dropped_dup, m->bytes, total, updated,
			removed, dropped);
	return ok;
}

static bool dedup_is(const struct fx *f, uint64_t total, uint64_t updated, uint64_t removed,
		     uint64_t dropped_wm, uint64_t dropped_dup)
{
	const struct sl_op_metrics *m = metric(f, true);
	const char *name = f->q->dedup_within_wm ? "dedupeWithinWatermark" : "dedupe";
	bool ok = !strcmp(m->name, name) && m->rows_total == total && m->rows_updated == updated &&
		  m->rows_removed == removed && m->dropped_wm == dropped_wm &&
		  m->dropped_dup == dropped_dup && (total == 0 || m->bytes > 0);
	if (!ok)
		fprintf(stderr,
			"[%s] %s: total %" PRIu64 " updated %" PRIu64 " removed %" PRIu64
			" droppedWm %" PRIu64 " droppedDup %" PRIu64 " bytes %" PRIu64
			"; want %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			mode_names[f->mode], m->name, m->rows_total, m->rows_updated,
			m->rows_removed, m->dropped_wm, m->dropped_dup, m->bytes, total, updated,
			removed, dropped_wm, dropped_dup);
	return ok;
}

/*
 * Event-time statistics of the batch (seconds) and the watermarks (ms). The
 * average is Spark's running mean truncated to ms, so it may fall 1 ms short
 * of the exact mean.
 */
static bool et_is(const struct fx *f, int64_t count, int64_t min_s, int64_t max_s, int64_t avg_ms,
		  int64_t wm_ms, int64_t next_ms)
{
	const struct sl_ops_result *r = &f->res;
	bool ok = r->et.count == count && r->wm_ms == wm_ms && r->next_wm_ms == next_ms &&
		  (count == 0 || (r->et.min_ms == min_s * 1000 && r->et.max_ms == max_s * 1000 &&
				  llabs(sl_watermark_stats_avg_ms(&r->et) - avg_ms) <= 1));
	if (!ok)
		fprintf(stderr,
			"[%s] eventTime count %" PRId64 " min %" PRId64 " max %" PRId64
			" avg %" PRId64 " wm %" PRId64 " next %" PRId64 "\n",
			mode_names[f->mode], r->et.count, r->et.min_ms, r->et.max_ms,
			r->et.count ? sl_watermark_stats_avg_ms(&r->et) : 0, r->wm_ms,
			r->next_wm_ms);
	return ok;
}

#define WINDOWED(delay, mode)                                                                      \
	"{\"source\": {\"format\": \"json\", \"path\": \"ev\", \"schema\": \"t TIMESTAMP\"},"      \
	" \"watermark\": {\"column\": \"t\", \"delay\": \"" delay "\"},"                           \
	" \"groupBy\": {\"window\": {\"column\": \"t\", \"duration\": \"5 seconds\"}},"            \
	" \"aggregate\": {\"count\": \"count(*)\"}, \"outputMode\": \"" mode "\"}"

/* ---- Spark: "append mode" ---- */

static int spark_append(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "append")) == 0);
	REQ(!is_due(f));
	batch(f);
	for (int s = 10; s <= 15; s++)
		ev(f, s);
	REQ(expect(f, false, "") == 0);
	REQ(agg_is(f, 2, 2, 0, 0));
	REQ(et_is(f, 6, 10, 15, 12500, 0, 5000));
	REQ(!is_due(f));

	batch(f);
	ev(f, 25); /* the watermark becomes 15 s */
	REQ(expect(f, false, "") == 0);
	REQ(agg_is(f, 3, 1, 0, 0));
	REQ(et_is(f, 1, 25, 25, 25000, 5000, 15000));

	REQ(is_due(f));
	REQ(nodata(f, false, "[10,15),5") == 0);
	REQ(agg_is(f, 2, 0, 1, 0));
	REQ(et_is(f, 0, 0, 0, 0, 15000, 15000));
	REQ(!is_due(f));

	batch(f);
	ev(f, 10); /* late */
	REQ(expect(f, false, "") == 0);
	REQ(agg_is(f, 2, 0, 0, 1));
	REQ(et_is(f, 1, 10, 10, 10000, 15000, 15000));
	REQ(!is_due(f));
	return 0;
}

/* Spark's "writing with aggregation" (file sink, 10 s delay, 5 s windows). */
static int spark_file_sink(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "append")) == 0);
	batch(f);
	ev(f, 100);
	REQ(expect(f, false, "") == 0);
	batch(f);
	ev(f, 104);
	ev(f, 123);
	REQ(expect(f, false, "") == 0);
	REQ(is_due(f) && f->wm == 113000);
	REQ(nodata(f, false, "[100,105),2") == 0);
	batch(f);
	ev(f, 140);
	REQ(expect(f, false, "") == 0);
	REQ(nodata(f, false, "[120,125),1") == 0);
	REQ(agg_is(f, 1, 0, 1, 0));
	return 0;
}

/* ---- Spark: "update mode" ---- */

static int spark_update(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "update")) == 0);
	batch(f);
	for (int s = 10; s <= 15; s++)
		ev(f, s);
	REQ(expect(f, false, "[10,15),5 | [15,20),1") == 0);
	REQ(agg_is(f, 2, 2, 0, 0));

	batch(f);
	ev(f, 25);
	REQ(expect(f, false, "[25,30),1") == 0);
	REQ(agg_is(f, 3, 1, 0, 0));
	REQ(f->wm == 15000 && is_due(f));
	REQ(nodata(f, false, "") == 0); /* evicts [10,15), writes nothing */
	REQ(agg_is(f, 2, 0, 1, 0));
	REQ(!is_due(f));

	batch(f);
	ev(f, 10);
	ev(f, 25);
	REQ(expect(f, false, "[25,30),2") == 0);
	REQ(agg_is(f, 2, 1, 0, 1));
	REQ(et_is(f, 2, 10, 25, 17500, 15000, 15000));
	return 0;
}

/* ---- Spark: "complete mode" ---- */

static int spark_complete(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "complete")) == 0);
	batch(f);
	ev(f, 10);
	ev(f, 11);
	ev(f, 12);
	REQ(expect(f, false, "[10,15),3") == 0);
	REQ(agg_is(f, 1, 1, 0, 0));
	batch(f);
	ev(f, 25);
	REQ(expect(f, false, "[10,15),3 | [25,30),1") == 0);
	REQ(f->wm == 15000 && !is_due(f)); /* complete mode never evicts */
	batch(f);
	ev(f, 25);
	REQ(expect(f, false, "[10,15),3 | [25,30),2") == 0);
	batch(f);
	ev(f, 10); /* behind the watermark, still counted */
	REQ(expect(f, false, "[10,15),4 | [25,30),2") == 0);
	REQ(agg_is(f, 2, 1, 0, 0));
	batch(f);
	ev(f, 25);
	REQ(expect(f, false, "[10,15),4 | [25,30),3") == 0);
	REQ(agg_is(f, 2, 1, 0, 0));
	/* a batch without rows still writes every group */
	REQ(nodata(f, false, "[10,15),4 | [25,30),3") == 0);
	REQ(agg_is(f, 2, 0, 0, 0));
	return 0;
}

/* ---- Spark: "deduplicate with watermark" ---- */

#define DEDUP_WM                                                                                   \
	"{\"source\": {\"format\": \"json\", \"path\": \"ev\","                                    \
	" \"schema\": \"value BIGINT, t TIMESTAMP\"},"                                             \
	" \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"},"                          \
	" \"dropDuplicates\": [\"value\", \"t\"]}"

static void vt(struct fx *f, int64_t v)
{
	size_t r = row(f);
	set_int(f, r, "value", v);
	set_ts(f, r, "t", v * SEC);
}

static int spark_dedup(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, DEDUP_WM) == 0);
	batch(f);
	for (int k = 0; k < 5; k++)
		for (int s = 10; s <= 15; s++)
			vt(f, s);
	REQ(expect(f, false, "10,10 | 11,11 | 12,12 | 13,13 | 14,14 | 15,15") == 0);
	REQ(f->res.nm == 1 && dedup_is(f, 6, 6, 0, 0, 24));
	REQ(et_is(f, 30, 10, 15, 12500, 0, 5000));

	batch(f);
	vt(f, 25); /* the watermark becomes 15 s */
	REQ(expect(f, false, "25,25") == 0);
	REQ(dedup_is(f, 7, 1, 0, 0, 0));
	REQ(is_due(f));
	REQ(nodata(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 6, 0, 0));
	REQ(!is_due(f));

	batch(f);
	vt(f, 10); /* late */
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 0, 1, 0));

	batch(f);
	vt(f, 45); /* the watermark becomes 35 s */
	REQ(expect(f, false, "45,45") == 0);
	REQ(dedup_is(f, 2, 1, 0, 0, 0));
	REQ(f->wm == 35000 && is_due(f));
	REQ(nodata(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 1, 0, 0));
	REQ(!is_due(f));
	/* 25 left the state and is late now; 45 is still a duplicate */
	batch(f);
	vt(f, 45);
	vt(f, 25);
	vt(f, 46);
	REQ(expect(f, false, "46,46") == 0);
	REQ(dedup_is(f, 2, 1, 0, 1, 1));
	return 0;
}

/* ---- Spark: dropDuplicatesWithinWatermark, "subset of columns" ---- */

static void kt(struct fx *f, const char *k, int64_t sec)
{
	size_t r = row(f);
	set_str(f, r, "k", k);
	set_ts(f, r, "t", sec * SEC);
}

static int spark_within(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  "{\"source\": {\"format\": \"json\", \"path\": \"ev\","
		  " \"schema\": \"k STRING, t TIMESTAMP\"},"
		  " \"watermark\": {\"column\": \"t\", \"delay\": \"2 seconds\"},"
		  " \"dropDuplicatesWithinWatermark\": [\"k\"]}") == 0);
	batch(f);
	kt(f, "a", 17); /* expires at 19 */
	REQ(expect(f, false, "'a',17") == 0);
	REQ(dedup_is(f, 1, 1, 0, 0, 0));
	REQ(f->wm == 15000 && !is_due(f));

	batch(f);
	kt(f, "a", 16); /* a duplicate */
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 0, 0, 1));
	REQ(f->wm == 15000);

	batch(f);
	kt(f, "a", 13); /* late */
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 0, 1, 0));

	batch(f);
	kt(f, "b", 22);
	kt(f, "c", 21);
	REQ(expect(f, false, "'b',22 | 'c',21") == 0);
	REQ(dedup_is(f, 3, 2, 0, 0, 0));
	REQ(f->wm == 20000 && is_due(f));
	REQ(nodata(f, false, "") == 0); /* evicts a (expired at 19) */
	REQ(dedup_is(f, 2, 0, 1, 0, 0));
	REQ(!is_due(f));

	batch(f);
	kt(f, "a", 21); /* new again */
	kt(f, "b", 23); /* still a duplicate */
	REQ(expect(f, false, "'a',21") == 0);
	REQ(dedup_is(f, 3, 1, 0, 0, 1));
	return 0;
}

/* ---- sliding windows ---- */

static int sliding(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  "{\"source\": {\"format\": \"json\", \"path\": \"ev\","
		  " \"schema\": \"device STRING, t TIMESTAMP\"},"
		  " \"watermark\": {\"column\": \"t\", \"delay\": \"1 minute\"},"
		  " \"groupBy\": {\"window\": {\"column\": \"t\", \"duration\": \"10 minutes\","
		  " \"slide\": \"5 minutes\"}, \"columns\": [\"device\"]},"
		  " \"aggregate\": {\"n\": \"count(*)\"}}") == 0);
	const int64_t base = T1200 / SEC;
	char want[256];
	size_t r;

	batch(f);
	r = row(f); /* 12:07 falls into 12:00-12:10 and 12:05-12:15 */
	set_str(f, r, "device", "d1");
	set_ts(f, r, "t", T1200 + 7 * MIN);
	REQ(expect(f, false, "") == 0);
	REQ(agg_is(f, 2, 2, 0, 0));
	REQ(f->wm == (T1200 + 6 * MIN) / 1000);

	batch(f);
	r = row(f);
	set_str(f, r, "device", "d1");
	set_ts(f, r, "t", T1200 + 9 * MIN); /* both windows again */
	r = row(f);
	set_str(f, r, "device", "d1");
	set_ts(f, r, "t", T1200 + 31 * MIN); /* 12:25-12:35, 12:30-12:40 */
	REQ(expect(f, false, "") == 0);
	REQ(agg_is(f, 4, 4, 0, 0));
	REQ(is_due(f) && f->wm == (T1200 + 30 * MIN) / 1000);
	snprintf(want, sizeof(want),
		 "[%" PRId64 ",%" PRId64 "),'d1',2 | [%" PRId64 ",%" PRId64 "),'d1',2", base,
		 base + 600, base + 300, base + 900);
	REQ(nodata(f, false, want) == 0);
	REQ(agg_is(f, 2, 0, 2, 0));
	REQ(!is_due(f));
	return 0;
}

/* ---- aggregates with nulls, null groups, no groups ---- */

#define STATS_SCHEMA                                                                               \
	"{\"source\": {\"format\": \"json\", \"path\": \"ev\","                                    \
	" \"schema\": \"g STRING, v BIGINT, d DOUBLE, t TIMESTAMP\"},"

static void gvd(struct fx *f, const char *g, const int64_t *v, const double *d)
{
	size_t r = row(f);
	if (g)
		set_str(f, r, "g", g);
	if (v)
		set_int(f, r, "v", *v);
	if (d)
		set_dbl(f, r, "d", *d);
}

static int aggregates(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  STATS_SCHEMA " \"groupBy\": {\"columns\": [\"g\"]},"
			       " \"aggregate\": {\"n\": \"count(*)\", \"c\": \"count(v)\","
			       " \"s\": \"sum(v)\", \"lo\": \"min(v)\", \"hi\": \"max(v)\","
			       " \"a\": \"avg(v)\", \"dmax\": \"max(d)\", \"dsum\": \"sum(d)\"},"
			       " \"outputMode\": \"update\"}") == 0);
	const int64_t one = 1, four = 4, seven = 7, ten = 10, neg = -3;
	const double half = 0.5, two = 2.0;

	REQ(!is_due(f)); /* no watermark */
	batch(f);
	gvd(f, "a", &one, &half);
	gvd(f, "a", NULL, NULL);
	gvd(f, "a", &four, NULL);
	gvd(f, NULL, &seven, &two); /* a null group value: a group of its own */
	gvd(f, NULL, NULL, NULL);
	gvd(f, "b", NULL, NULL); /* only nulls: count 0, the others null */
	gvd(f, "", &neg, NULL);	 /* the empty string is not null */
	/* groups in key order: null first, then '', 'a', 'b' */
	REQ(expect(f, false,
		   "null,2,1,7,7,7,7,2,2 | '',1,1,-3,-3,-3,-3,null,null"
		   " | 'a',3,2,5,1,4,2.5,0.5,0.5 | 'b',1,0,null,null,null,null,null,null") == 0);
	REQ(agg_is(f, 4, 4, 0, 0));
	REQ(et_is(f, 0, 0, 0, 0, 0, 0));

	batch(f);
	gvd(f, "a", &ten, NULL);
	gvd(f, "b", NULL, NULL);
	gvd(f, NULL, NULL, &half);
	REQ(expect(f, false,
		   "null,3,1,7,7,7,7,2,2.5 | 'a',4,3,15,1,10,5,0.5,0.5"
		   " | 'b',2,0,null,null,null,null,null,null") == 0);
	REQ(agg_is(f, 4, 3, 0, 0));
	return 0;
}

/* An aggregation without groupBy: one group, in update and complete mode. */
static int global_agg(struct fx *f, enum mode mode, const char *out_mode)
{
	char q[512];
	snprintf(q, sizeof(q),
		 STATS_SCHEMA " \"aggregate\": {\"n\": \"count(*)\", \"s\": \"sum(v)\","
			      " \"a\": \"avg(v)\"}, \"outputMode\": \"%s\"}",
		 out_mode);
	REQ(setup(f, mode, q) == 0);
	const int64_t one = 1, two = 2, six = 6;
	bool complete = !strcmp(out_mode, "complete");

	batch(f);
	gvd(f, "a", &one, NULL);
	gvd(f, "b", &two, NULL);
	gvd(f, NULL, NULL, NULL);
	REQ(expect(f, false, "3,3,1.5") == 0);
	REQ(agg_is(f, 1, 1, 0, 0));
	batch(f);
	gvd(f, "x", &six, NULL);
	REQ(expect(f, false, "4,9,3") == 0);
	REQ(agg_is(f, 1, 1, 0, 0));
	REQ(nodata(f, false, complete ? "4,9,3" : "") == 0);
	REQ(agg_is(f, 1, 0, 0, 0));
	return 0;
}

static int global_update(struct fx *f, enum mode mode) { return global_agg(f, mode, "update"); }

static int global_complete(struct fx *f, enum mode mode) { return global_agg(f, mode, "complete"); }

/* ---- overflow ---- */

static int overflow(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  STATS_SCHEMA " \"groupBy\": {\"columns\": [\"g\"]},"
			       " \"aggregate\": {\"n\": \"count(*)\", \"total\": \"sum(v)\"},"
			       " \"outputMode\": \"update\"}") == 0);
	const int64_t big = INT64_MAX - 1, two = 2, one = 1, neg = INT64_MIN;

	/* within one batch */
	batch(f);
	gvd(f, "a", &big, NULL);
	gvd(f, "a", &two, NULL);
	int rc = run_batch(f, false);
	REQ(rc == SL_EMALFORMED);
	REQ(strstr(f->err, "total") && strstr(f->err, "overflow"));

	/* nothing was applied: the group is still new */
	batch(f);
	gvd(f, "a", &big, NULL);
	gvd(f, "b", &neg, NULL);
	REQ(expect(f, false, "'a',1,9223372036854775806 | 'b',1,-9223372036854775808") == 0);
	REQ(agg_is(f, 2, 2, 0, 0));

	/* across batches: the merge with the stored state overflows */
	batch(f);
	gvd(f, "b", &one, NULL); /* fine: INT64_MIN + 1 */
	gvd(f, "a", &two, NULL);
	rc = run_batch(f, false);
	REQ(rc == SL_EMALFORMED);
	REQ(strstr(f->err, "total") && strstr(f->err, "overflow"));
	batch(f);
	gvd(f, "a", &one, NULL);
	REQ(expect(f, false, "'a',2,9223372036854775807") == 0);
	REQ(agg_is(f, 2, 1, 0, 0));
	return 0;
}

/* ---- keys longer than SL_STATE_KEY_INLINE: stored hashed ---- */

static void lk(struct fx *f, int n, const char *shortk, int64_t sec)
{
	size_t r = row(f);
	if (shortk)
		set_str(f, r, "k", shortk);
	else
		set_long(f, r, "k", n);
	if (sec >= 0)
		set_ts(f, r, "t", sec * SEC);
}

#define LONG_SCHEMA                                                                                \
	"{\"source\": {\"format\": \"json\", \"path\": \"ev\","                                    \
	" \"schema\": \"k STRING, t TIMESTAMP\"},"

/* dropDuplicates without a watermark: kept forever. */
static int long_dedup(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, LONG_SCHEMA " \"dropDuplicates\": [\"k\"]}") == 0);
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 1, NULL, 11);
	lk(f, 2, NULL, 12);
	lk(f, 0, "s", 13);
	REQ(expect(f, true, "'s',13 | L1~,10 | L2~,12") == 0);
	REQ(dedup_is(f, 3, 3, 0, 0, 1));
	batch(f);
	lk(f, 2, NULL, 20);
	lk(f, 3, NULL, 21);
	lk(f, 0, "s", 22);
	lk(f, 1, NULL, 23);
	lk(f, 3, NULL, 24);
	REQ(expect(f, true, "L3~,21") == 0);
	REQ(dedup_is(f, 4, 1, 0, 0, 4));
	return 0;
}

/* dropDuplicates with the event time in the key: the time leads the hashed key. */
static int long_dedup_wm(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA " \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"},"
			      " \"dropDuplicates\": [\"k\", \"t\"]}") == 0);
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 1, NULL, 10);
	lk(f, 1, NULL, 11);
	lk(f, 2, NULL, 12);
	lk(f, 0, "s", 12);
	lk(f, 2, NULL, 30);
	REQ(expect(f, true, "'s',12 | L1~,10 | L1~,11 | L2~,12 | L2~,30") == 0);
	REQ(dedup_is(f, 5, 5, 0, 0, 1));
	REQ(f->wm == 20000 && is_due(f));
	REQ(nodata(f, true, "") == 0);
	REQ(dedup_is(f, 1, 0, 4, 0, 0));
	REQ(!is_due(f));
	batch(f);
	lk(f, 2, NULL, 30); /* a duplicate */
	lk(f, 1, NULL, 30); /* new */
	lk(f, 1, NULL, 11); /* late */
	REQ(expect(f, true, "L1~,30") == 0);
	REQ(dedup_is(f, 2, 1, 0, 1, 1));
	return 0;
}

/* dropDuplicatesWithinWatermark on long keys: expiry entries point at hashed keys. */
static int long_within(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA " \"watermark\": {\"column\": \"t\", \"delay\": \"2 seconds\"},"
			      " \"dropDuplicatesWithinWatermark\": [\"k\"]}") == 0);
	f->loose_bytes = true; /* see long_within_bytes */
	batch(f);
	lk(f, 1, NULL, 17);
	lk(f, 2, NULL, 18);
	lk(f, 1, NULL, 18);
	lk(f, 0, "a", 17);
	REQ(expect(f, true, "'a',17 | L1~,17 | L2~,18") == 0);
	REQ(dedup_is(f, 3, 3, 0, 0, 1));
	batch(f);
	lk(f, 1, NULL, 17); /* still in the state */
	lk(f, 3, NULL, 30); /* the watermark becomes 28 */
	REQ(expect(f, true, "L3~,30") == 0);
	REQ(dedup_is(f, 4, 1, 0, 0, 1));
	REQ(is_due(f));
	REQ(nodata(f, true, "") == 0);
	REQ(dedup_is(f, 1, 0, 3, 0, 0));
	REQ(!is_due(f));
	batch(f);
	lk(f, 1, NULL, 29); /* accepted again */
	lk(f, 3, NULL, 31); /* a duplicate */
	REQ(expect(f, true, "L1~,29") == 0);
	REQ(dedup_is(f, 2, 1, 0, 0, 1));
	batch(f);
	lk(f, 0, "z", 60); /* the watermark becomes 58: everything else expires */
	REQ(expect(f, true, "'z',60") == 0);
	REQ(nodata(f, true, "") == 0);
	REQ(dedup_is(f, 1, 0, 2, 0, 0));
	batch(f);
	lk(f, 1, NULL, 61);
	lk(f, 3, NULL, 58); /* late: at the watermark */
	REQ(expect(f, true, "L1~,61") == 0);
	REQ(dedup_is(f, 2, 1, 0, 1, 0));
	return 0;
}

/*
 * The bytes of a within-watermark state go back down when long keys leave
 * it: once only 'y' (a 4-byte row key) is left, they are its two entries'.
 */
static int long_within_bytes(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA " \"watermark\": {\"column\": \"t\", \"delay\": \"2 seconds\"},"
			      " \"dropDuplicatesWithinWatermark\": [\"k\"]}") == 0);
	f->loose_bytes = true; /* checked here, by hand */
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 2, NULL, 11);
	REQ(expect(f, true, "L1~,10 | L2~,11") == 0);
	uint64_t two_long = metric(f, true)->bytes;
	batch(f);
	lk(f, 0, "y", 100); /* the watermark becomes 98: both long keys expire */
	REQ(expect(f, true, "'y',100") == 0);
	REQ(metric(f, true)->bytes > two_long);
	REQ(nodata(f, true, "") == 0);
	const struct sl_op_metrics *m = metric(f, true);
	/* 'D' key and expiresAt, 'E' key and the row key's length */
	uint64_t want = (5 + 4 + 8) + (5 + 8 + 4 + 4);
	if (m->rows_total != 1 || m->bytes != want)
		fprintf(stderr,
			"[%s] within-watermark state of 'y' alone: %" PRIu64 " rows, %" PRIu64
			" bytes, want 1 row, %" PRIu64 " bytes (%" PRIu64 " with two long keys)\n",
			mode_names[f->mode], m->rows_total, m->bytes, want, two_long);
	REQ(m->rows_total == 1 && m->bytes == want);
	return 0;
}

#define LONG_GROUPS(mode)                                                                          \
	LONG_SCHEMA " \"groupBy\": {\"columns\": [\"k\"]},"                                        \
		    " \"aggregate\": {\"n\": \"count(*)\", \"last\": \"max(t)\"},"                 \
		    " \"outputMode\": \"" mode "\"}"

/* groupBy a 1 KiB string, update mode: groups merge across batches. */
static int long_update(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, LONG_GROUPS("update")) == 0);
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 1, NULL, 11);
	lk(f, 2, NULL, 12);
	lk(f, 0, "s", 13);
	REQ(expect(f, true, "'s',1,13 | L1~,2,11 | L2~,1,12") == 0);
	REQ(agg_is(f, 3, 3, 0, 0));
	batch(f);
	lk(f, 1, NULL, 20);
	lk(f, 3, NULL, 21);
	lk(f, 0, "s", 22);
	REQ(expect(f, true, "'s',2,22 | L1~,3,20 | L3~,1,21") == 0);
	REQ(agg_is(f, 4, 3, 0, 0));
	return 0;
}

/* complete mode: the state walk (hashed keys after the inline ones) merged with the batch. */
static int long_complete(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, LONG_GROUPS("complete")) == 0);
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 0, "s1", 11);
	lk(f, 2, NULL, 12);
	REQ(expect(f, true, "'s1',1,11 | L1~,1,10 | L2~,1,12") == 0);
	REQ(agg_is(f, 3, 3, 0, 0));
	batch(f);
	lk(f, 2, NULL, 20);
	lk(f, 0, "s2", 21);
	lk(f, 3, NULL, 22);
	lk(f, 0, "s1", 23);
	lk(f, 0, "s0", 24);
	lk(f, 4, NULL, 25);
	REQ(expect(
		f, true,
		"'s0',1,24 | 's1',2,23 | 's2',1,21 | L1~,1,10 | L2~,2,20 | L3~,1,22 | L4~,1,25") ==
	    0);
	REQ(agg_is(f, 7, 6, 0, 0));
	/* in storage-key order: the inline keys first, in key order, then the hashed ones */
	render(f->out, false, f->got, sizeof(f->got));
	REQ(!strncmp(f->got, "'s0',1,24 | 's1',2,23 | 's2',1,21 | L", 37));
	batch(f);
	for (int n = 1; n <= 4; n++)
		lk(f, n, NULL, 30 + n);
	lk(f, 0, "s3", 40);
	REQ(expect(f, true,
		   "'s0',1,24 | 's1',2,23 | 's2',1,21 | 's3',1,40 | L1~,2,31 | L2~,3,32 | L3~,2,33 "
		   "| L4~,2,34") == 0);
	REQ(agg_is(f, 8, 5, 0, 0));
	REQ(nodata(f, true,
		   "'s0',1,24 | 's1',2,23 | 's2',1,21 | 's3',1,40 | L1~,2,31 | L2~,3,32 | L3~,2,33 "
		   "| L4~,2,34") == 0);
	return 0;
}

/* append mode: windows with hashed group keys close and leave the state. */
static int long_append(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA
		  " \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"},"
		  " \"groupBy\": {\"window\": {\"column\": \"t\", \"duration\": \"5 seconds\"},"
		  " \"columns\": [\"k\"]},"
		  " \"aggregate\": {\"n\": \"count(*)\"}, \"outputMode\": \"append\"}") == 0);
	batch(f);
	lk(f, 1, NULL, 10);
	lk(f, 0, "s", 11);
	lk(f, 2, NULL, 12);
	lk(f, 1, NULL, 14);
	lk(f, 1, NULL, 21);
	REQ(expect(f, true, "") == 0);
	REQ(agg_is(f, 4, 4, 0, 0));
	batch(f);
	lk(f, 0, "s", 31); /* the watermark becomes 21 */
	lk(f, 2, NULL, 16);
	REQ(expect(f, true, "") == 0);
	REQ(agg_is(f, 6, 2, 0, 0));
	REQ(is_due(f));
	REQ(nodata(f, true, "[10,15),'s',1 | [10,15),L1~,2 | [10,15),L2~,1 | [15,20),L2~,1") == 0);
	REQ(agg_is(f, 2, 0, 4, 0));
	REQ(!is_due(f));
	batch(f);
	lk(f, 1, NULL, 22);
	lk(f, 1, NULL, 12); /* late */
	lk(f, 0, "s", 40);
	REQ(expect(f, true, "") == 0);
	REQ(agg_is(f, 3, 2, 0, 1));
	REQ(is_due(f));
	REQ(nodata(f, true, "[20,25),L1~,2") == 0);
	REQ(agg_is(f, 2, 0, 1, 0));
	return 0;
}

/* ---- null event times ---- */

static int null_event_time(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, DEDUP_WM) == 0);
	batch(f);
	size_t r = row(f);
	set_int(f, r, "value", 1); /* t null: never late, never evicted, no watermark */
	r = row(f);
	set_int(f, r, "value", 1);
	vt(f, 20);
	REQ(expect(f, false, "1,null | 20,20") == 0);
	REQ(dedup_is(f, 2, 2, 0, 0, 1));
	REQ(et_is(f, 1, 20, 20, 20000, 0, 10000));
	batch(f);
	vt(f, 50);
	REQ(expect(f, false, "50,50") == 0);
	REQ(nodata(f, false, "") == 0);
	REQ(dedup_is(f, 2, 0, 1, 0, 0));
	batch(f);
	r = row(f);
	set_int(f, r, "value", 1);
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 2, 0, 0, 0, 1));
	REQ(et_is(f, 0, 0, 0, 0, 40000, 40000));
	return 0;
}

static int null_window_time(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "update")) == 0);
	batch(f);
	row(f); /* joins no window */
	ev(f, 12);
	REQ(expect(f, false, "[10,15),1") == 0);
	REQ(agg_is(f, 1, 1, 0, 0));
	REQ(et_is(f, 1, 12, 12, 12000, 0, 2000));
	return 0;
}

/* ---- dedup before aggregation ---- */

static int dedup_then_agg(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  "{\"source\": {\"format\": \"json\", \"path\": \"ev\","
		  " \"schema\": \"id BIGINT, t TIMESTAMP\"},"
		  " \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"},"
		  " \"dropDuplicates\": [\"id\", \"t\"],"
		  " \"groupBy\": {\"window\": {\"column\": \"t\", \"duration\": \"5 seconds\"}},"
		  " \"aggregate\": {\"n\": \"count(*)\", \"s\": \"sum(id)\"},"
		  " \"outputMode\": \"append\"}") == 0);
	batch(f);
	for (int k = 0; k < 3; k++) {
		size_t r = row(f);
		set_int(f, r, "id", 1);
		set_ts(f, r, "t", 11 * SEC);
	}
	size_t r = row(f);
	set_int(f, r, "id", 2);
	set_ts(f, r, "t", 12 * SEC);
	REQ(expect(f, false, "") == 0);
	REQ(f->res.nm == 2 && dedup_is(f, 2, 2, 0, 0, 2) && agg_is(f, 1, 1, 0, 0));
	batch(f);
	r = row(f);
	set_int(f, r, "id", 1);
	set_ts(f, r, "t", 11 * SEC); /* a duplicate of the stored key */
	r = row(f);
	set_int(f, r, "id", 3);
	set_ts(f, r, "t", 30 * SEC);
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 3, 1, 0, 0, 1) && agg_is(f, 2, 1, 0, 0));
	REQ(is_due(f));
	REQ(nodata(f, false, "[10,15),2,3") == 0);
	REQ(dedup_is(f, 1, 0, 2, 0, 0) && agg_is(f, 1, 0, 1, 0));
	batch(f);
	r = row(f);
	set_int(f, r, "id", 9);
	set_ts(f, r, "t", 12 * SEC); /* late: counted once, by the first operator */
	REQ(expect(f, false, "") == 0);
	REQ(dedup_is(f, 1, 0, 0, 1, 0) && agg_is(f, 1, 0, 0, 0));
	return 0;
}

/* ---- more event-time cases ---- */

/* append mode without the no-data batch: the next data batch writes what closed. */
static int append_in_data_batch(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode, WINDOWED("10 seconds", "append")) == 0);
	batch(f);
	ev(f, 100);
	ev(f, 104);
	ev(f, 123);
	REQ(expect(f, false, "") == 0);
	REQ(f->wm == 113000);
	batch(f);
	ev(f, 124);
	ev(f, 103); /* late */
	REQ(expect(f, false, "[100,105),2") == 0);
	REQ(agg_is(f, 1, 1, 1, 1));
	batch(f);
	ev(f, 200); /* closes [120,125) at the next batch */
	REQ(expect(f, false, "") == 0);
	batch(f);
	ev(f, 201);
	REQ(expect(f, false, "[120,125),2") == 0);
	REQ(agg_is(f, 1, 1, 1, 0));
	return 0;
}

/* dropDuplicates without the event time among its columns: late rows go, the state stays. */
static int dedup_without_time(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA " \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"},"
			      " \"dropDuplicates\": [\"k\"]}") == 0);
	batch(f);
	kt(f, "a", 10);
	kt(f, "b", 100);
	kt(f, "a", 101);
	REQ(expect(f, false, "'a',10 | 'b',100") == 0);
	REQ(dedup_is(f, 2, 2, 0, 0, 1));
	REQ(f->wm == 91000 && !is_due(f));
	REQ(nodata(f, false, "") == 0);
	REQ(dedup_is(f, 2, 0, 0, 0, 0));
	batch(f);
	kt(f, "c", 50);	 /* late */
	kt(f, "a", 500); /* still a duplicate */
	kt(f, "d", 500);
	REQ(expect(f, false, "'d',500") == 0);
	REQ(dedup_is(f, 3, 1, 0, 1, 1));
	REQ(!is_due(f));
	return 0;
}

/* A watermark alone drops nothing (Spark: only stateful operators do). */
static int watermark_only(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  LONG_SCHEMA
		  " \"watermark\": {\"column\": \"t\", \"delay\": \"10 seconds\"}}") == 0);
	batch(f);
	kt(f, "a", 30);
	kt(f, "a", 30);
	REQ(expect(f, false, "'a',30 | 'a',30") == 0);
	REQ(f->res.nm == 0 && et_is(f, 2, 30, 30, 30000, 0, 20000));
	batch(f);
	kt(f, "b", 5);
	row(f);
	kt(f, "c", 25);
	REQ(expect(f, false, "'b',5 | null,null | 'c',25") == 0);
	REQ(et_is(f, 2, 5, 25, 15000, 20000, 20000));
	REQ(!is_due(f));
	return 0;
}

/* ---- group column types ---- */

static int group_types(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  "{\"source\": {\"format\": \"json\", \"path\": \"ev\","
		  " \"schema\": \"d DOUBLE, b BOOLEAN, i INT, day DATE\"},"
		  " \"groupBy\": {\"columns\": [\"d\", \"b\", \"i\", \"day\"]},"
		  " \"aggregate\": {\"n\": \"count(*)\"}, \"outputMode\": \"complete\"}") == 0);
	static const struct {
		double d;
		int b, i, day; /* -99: null */
	} rows[] = {
	    {0.0, 1, 5, 3},	     {-0.0, 1, 5, 3},	/* -0.0 and 0.0 are one group */
	    {NAN, 0, -5, -1},	     {-NAN, 0, -5, -1}, /* so are all NaNs */
	    {-1.5, -99, -99, -99},   {-1.5, -99, -99, -99},
	    {INFINITY, 1, 7, 20000}, {-INFINITY, 0, 2147483647, -99},
	};
	batch(f);
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		size_t r = row(f);
		set_dbl(f, r, "d", rows[k].d);
		if (rows[k].b != -99)
			set_int(f, r, "b", rows[k].b);
		if (rows[k].i != -99)
			set_int(f, r, "i", rows[k].i);
		if (rows[k].day != -99)
			set_int(f, r, "day", rows[k].day);
	}
	/* doubles in order, NaN after +Infinity */
	const char *want = "-inf,0,2147483647,null,1 | -1.5,null,null,null,2 | 0,1,5,3,2"
			   " | inf,1,7,20000,1 | nan,0,-5,-1,2";
	REQ(expect(f, false, want) == 0);
	REQ(agg_is(f, 5, 5, 0, 0));
	REQ(nodata(f, false, want) == 0);
	return 0;
}

/* ---- many groups ---- */

/* complete mode over tens of thousands of groups: the merge of the walk and the batch. */
static int many_groups(struct fx *f, enum mode mode)
{
	REQ(setup(f, mode,
		  STATS_SCHEMA " \"groupBy\": {\"columns\": [\"v\"]},"
			       " \"aggregate\": {\"n\": \"count(*)\", \"s\": \"sum(v)\"},"
			       " \"outputMode\": \"complete\"}") == 0);
	const int64_t n = 30000;
	batch(f);
	for (int64_t v = n - 1; v >= 0; v--)
		set_int(f, row(f), "v", v * 3); /* 0, 3, ..., 3(n-1) */
	REQ(run_batch(f, false) == 0);
	REQ(f->out && f->out->nrows == (size_t)n);
	REQ(agg_is(f, (uint64_t)n, (uint64_t)n, 0, 0));
	batch(f);
	for (int64_t v = 0; v < n; v++) {
		set_int(f, row(f), "v", v * 2); /* 0, 2, ..., 2(n-1): every third also above */
		if (v % 1000 == 0)
			set_int(f, row(f), "v", v * 2);
	}
	REQ(run_batch(f, false) == 0);
	/* groups: 3k for k < n, 2k for k < n, overlapping at multiples of 6 */
	int64_t both = (2 * (n - 1)) / 6 + 1, total = 2 * n - both;
	REQ(f->out->nrows == (size_t)total);
	REQ(agg_is(f, (uint64_t)total, (uint64_t)n, 0, 0));
	size_t cv = 0, cn = 1, cs = 2;
	REQ(f->out->schema->n == 3);
	for (size_t r = 0; r < f->out->nrows; r++) {
		int64_t v = f->out->cols[cv].cells[r].i, want = 0;
		if (r)
			REQ(f->out->cols[cv].cells[r - 1].i < v); /* in key order */
		if (v % 3 == 0 && v / 3 < n)
			want++;
		if (v % 2 == 0 && v / 2 < n)
			want += 1 + (v / 2 % 1000 == 0);
		REQ(want > 0 && f->out->cols[cn].cells[r].i == want);
		REQ(f->out->cols[cs].cells[r].i == want * v);
	}
	return 0;
}

/* ---- the runner ---- */

/*
 * Runs scenario fn in each mode; the state it leaves must be the same,
 * byte for byte, whether the catalog was reopened or batches redone.
 */
#define ALL_MODES(fn)                                                                              \
	static void test_##fn(void)                                                                \
	{                                                                                          \
		uint64_t plain = 0;                                                                \
		for (int m = PLAIN; m <= REDO; m++) {                                              \
			struct fx *f = calloc(1, sizeof(*f));                                      \
			CHECK(f);                                                                  \
			int rc_ = fn(f, (enum mode)m);                                             \
			uint64_t d = rc_ ? 0 : state_digest(f);                                    \
			teardown(f);                                                               \
			free(f);                                                                   \
			if (rc_)                                                                   \
				fprintf(stderr, "%s failed in mode %s\n", #fn, mode_names[m]);     \
			CHECK(rc_ == 0);                                                           \
			if (m == PLAIN)                                                            \
				plain = d;                                                         \
			if (d != plain)                                                            \
				fprintf(stderr, "%s: the state differs in mode %s\n", #fn,         \
					mode_names[m]);                                            \
			CHECK(d != 0 && d == plain);                                               \
		}                                                                                  \
	}

ALL_MODES(spark_append)
ALL_MODES(spark_file_sink)
ALL_MODES(spark_update)
ALL_MODES(spark_complete)
ALL_MODES(spark_dedup)
ALL_MODES(spark_within)
ALL_MODES(sliding)
ALL_MODES(aggregates)
ALL_MODES(global_update)
ALL_MODES(global_complete)
ALL_MODES(overflow)
ALL_MODES(long_dedup)
ALL_MODES(long_dedup_wm)
ALL_MODES(long_within)
ALL_MODES(long_within_bytes)
ALL_MODES(long_update)
ALL_MODES(long_complete)
ALL_MODES(long_append)
ALL_MODES(null_event_time)
ALL_MODES(null_window_time)
ALL_MODES(dedup_then_agg)
ALL_MODES(append_in_data_batch)
ALL_MODES(dedup_without_time)
ALL_MODES(watermark_only)
ALL_MODES(group_types)
ALL_MODES(many_groups)

/* min and max of a STRING column have no fixed-size state: refused up front. */
static void test_string_min_max_refused(void)
{
	static const char *const aggs[] = {"max(k)", "min(k)"};
	for (size_t i = 0; i < 2; i++) {
		struct fx *f = calloc(1, sizeof(*f));
		char q[512], path[192], err[512] = "";
		struct sl_ops *ops = (struct sl_ops *)&err; /* must stay untouched */
		CHECK(f);
		f->dir = test_dir();
		snprintf(q, sizeof(q),
			 "{\"queries\": {\"q\": " LONG_SCHEMA
			 " \"groupBy\": {\"columns\": [\"t\"]},"
			 " \"aggregate\": {\"n\": \"count(*)\", \"biggest\": \"%s\"},"
			 " \"outputMode\": \"update\"}}}",
			 aggs[i]);
		snprintf(path, sizeof(path), "%s/sluice.json", f->dir);
		CHECK(write_file(path, q) == 0);
		CHECK_OK(sl_config_load(f->dir, &f->cfg, err, sizeof(err)));
		CHECK((f->q = sl_config_find(f->cfg, "q")));
		CHECK(sl_ops_new(f->q, QID, &ops, err, sizeof(err)) == ENOTSUP);
		CHECK(ops == (struct sl_ops *)&err);
		if (!strstr(err, "biggest") || !strstr(err, "STRING"))
			fprintf(stderr, "message: %s\n", err);
		CHECK(strstr(err, "biggest") && strstr(err, "STRING"));
		sl_config_free(f->cfg);
		free(f);
	}
}

/* Two queries in one catalog keep their state apart. */
static void test_queries_apart(void)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sl_ops *other = NULL;
	struct sl_txn *t;
	const struct sl_batch *out;
	struct sl_ops_result res;
	char err[256];

	CHECK(f);
	CHECK(setup(f, PLAIN, DEDUP_WM) == 0);
	batch(f);
	vt(f, 10);
	CHECK(expect(f, false, "10,10") == 0);
	/* the same query under another id sees no state */
	CHECK_OK(sl_ops_new(f->q, QID + 1, &other, err, sizeof(err)));
	batch(f);
	vt(f, 10);
	CHECK_OK(sl_catalog_read(f->cat, &t));
	int rc = sl_ops_process(other, t, 0, &f->in, &out, &res, err, sizeof(err));
	sl_txn_end(t);
	CHECK_OK(rc);
	CHECK(out->nrows == 1 && res.m[0].rows_total == 1 && res.m[0].dropped_dup == 0);
	sl_ops_free(other);
	teardown(f);
	free(f);
}

int main(void)
{
	test(test_spark_append);
	test(test_spark_file_sink);
	test(test_spark_update);
	test(test_spark_complete);
	test(test_spark_dedup);
	test(test_spark_within);
	test(test_sliding);
	test(test_aggregates);
	test(test_global_update);
	test(test_global_complete);
	test(test_overflow);
	test(test_long_dedup);
	test(test_long_dedup_wm);
	test(test_long_within);
	test(test_long_within_bytes);
	test(test_long_update);
	test(test_long_complete);
	test(test_long_append);
	test(test_null_event_time);
	test(test_null_window_time);
	test(test_dedup_then_agg);
	test(test_append_in_data_batch);
	test(test_dedup_without_time);
	test(test_watermark_only);
	test(test_group_types);
	test(test_many_groups);
	test(test_string_min_max_refused);
	test(test_queries_apart);
	return test_exit();
}
