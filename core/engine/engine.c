/* SPDX-License-Identifier: MIT */
/*
 * The engine's batch protocol for one query at a time: plan and log
 * offsets, read and decode, format and write the parts, commit.
 *
 * qlog table (integers big-endian in keys, host order in values):
 *   key: qid u32 | kind u8 | n u64
 *   'b' batch N's record:  K u64 | batchTimestampMs i64 | count u64 | ids u64...
 *   'o' offsets/N, 'c' commits/N, 's' sources/0/K, 'm' metadata (n 0): the
 *       rendered text, as Spark writes it (no trailing newline)
 *   'd' (n 0) what of the query's config its checkpoint cannot survive a
 *       change of (core/compat.h), written with its first batch
 *   'g' blob ids of the out/ parts a complete-mode batch replaced, to unlink
 *       after its commit (redone at start)
 * meta: "q.<qid>.next" next batch id, "q.<qid>.k" source log entries so far,
 * "q.<qid>.maxts" newest age clock planned (us), "q.<qid>.outdir" out/<query>,
 * "q.<qid>.wm" the watermark after the last committed batch (ms),
 * "q.<qid>.bwm" the watermark of the last planned batch (its offsets/N).
 * A batch record with no files is a no-data batch: it runs when the
 * watermark has moved far enough to emit or evict state.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "blob.h"
#include "bytes.h"
#include "catalog.h"
#include "codec.h"
#include "compat.h"
#include "config.h"
#include "decode.h"
#include "engine.h"
#include "err.h"
#include "fault.h"
#include "render.h"
#include "land.h"
#include "log.h"
#include "ops.h"
#include "sink.h"
#include "strbuf.h"
#include "qindex.h"
#include "stage.h"

#define ZST_LIMIT (4ull << 30) /* a compressed input may expand to 4 GiB */

/*
 * Two clocks, never mixed: durations (durationMs, rates) are differences of
 * CLOCK_MONOTONIC readings, as stage.c's done_ns, so that a step of the wall
 * clock cannot make one negative; what is shown as a time of day
 * (batchTimestampMs, timestamp, the mtimes of out/) is CLOCK_REALTIME.
 */
static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void log_key(unsigned char k[13], uint32_t qid, char kind, uint64_t n)
{
	put_be32(k, qid);
	k[4] = (unsigned char)kind;
	put_be64(k + 5, n);
}

static void qkey(char *buf, size_t len, uint32_t qid, const char *what)
{
	snprintf(buf, len, "q.%u.%s", qid, what);
}

static int log_put(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void *v,
		   size_t len)
{
	unsigned char k[13];
	log_key(k, qid, kind, n);
	return sl_txn_put(t, SL_TABLE_QLOG, k, sizeof(k), v, len);
}

int sl_engine_checkpoint_get(struct sl_txn *t, uint32_t qid, char kind, uint64_t n,
			     const void **data, size_t *len)
{
	unsigned char k[13];
	log_key(k, qid, kind, n);
	return sl_txn_get(t, SL_TABLE_QLOG, k, sizeof(k), data, len);
}

/* A JSON string literal of s (RFC 8259 escapes). */
static void text_json_string(struct sl_strbuf *b, const char *s)
{
	sl_strbuf_addc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			sl_strbuf_add(b, e, 2);
		} else if (*p < 0x20) {
			sl_strbuf_addf(b, "\\u%04X", *p);
		} else {
			sl_strbuf_add(b, (const char *)p, 1);
		}
	}
	sl_strbuf_addc(b, '"');
}

/* ---- 1. plan ---- */

struct planned {
	uint64_t id, seq, size;
	int64_t landed_ms;  /* the file's landing time, for sources/0/K */
	int64_t clock_us;   /* its age clock (landing time or mtime) */
	bool seen;          /* skipped: its seen-set key was seen (else: too old) */
	char path[4096];    /* in/-relative */
};

/*
 * A big file is decoded in two halves on two threads (split at a line
 * end): the second half's decoder, rows and counters, kept between batches.
 */
struct half {
	struct sl_decoder *dec;
	struct sl_batch b;
	struct sl_decode_stats st;
	struct sl_decode_error err;
	bool ready;
	/* the job */
	const char *path, *data;
	size_t len;
	int rc;
};

#define SPLIT_MIN (16u << 20) /* files this big are decoded on both cores */

struct plan {
	const volatile bool *stop; /* set by an unmount: abandon the batch */
	struct half half;          /* decoding's second thread */
	const struct sl_query_config *q;
	uint32_t qid;
	char run_id[40];         /* this run's id, for progress reports */
	int64_t prev_t0_ns;      /* the previous trigger's start (monotonic), 0 before the first */
	int64_t apply_ns;        /* time the plan's apply took (latestOffset) */
	uint64_t seq_limit;      /* availableNow: what landed at start */
	bool ignore_caps;        /* trigger once: one batch takes everything */
	int64_t ts_ms;           /* batchTimestampMs of a new batch */
	char uuid[40];           /* metadata id, for a query's first batch */
	const char *desc;        /* the config's compat description ('d') */
	size_t desc_len;
	/* out, reset by each run of the apply */
	uint64_t batch, k;
	bool recovered;          /* batch N had offsets and no commit */
	bool nodata;             /* a no-data batch: state to emit or evict */
	int64_t wm_ms;           /* the batch's watermark (batchWatermarkMs) */
	struct planned *files;
	size_t n, cap;
	/* scratch for the index walk; skips are counted in the catalog (sl_qindex_skip) */
	struct planned *skip;
	size_t nskip, capskip;
	uint64_t total_bytes, maxts;
	struct sl_txn *t;
	int rc;
};

static struct planned *push(struct planned **v, size_t *n, size_t *cap)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct planned *p = realloc(*v, c * sizeof(*p));
		if (!p)
			return NULL;
		*v = p;
		*cap = c;
	}
	return &(*v)[(*n)++];
}

static int fill(struct sl_txn *t, struct planned *f, uint64_t id, uint64_t seq,
		const struct sl_query_config *q)
{
	struct sl_inode i;
	int rc = sl_txn_inode_get(t, id, &i);
	if (rc)
		return rc;
	f->id = id;
	f->seq = seq;
	f->size = i.size;
	f->landed_ms = i.landed_ns / 1000000;
	/*
	 * mtime as it is now, capped at the landing time: a `touch -d 2099`
	 * (allowed on a landed file) must not age every later file
	 */
	int64_t clock_ns = i.landed_ns;
	if (q->source.file_age_by == SL_AGE_MTIME && i.mtime_ns < i.landed_ns)
		clock_ns = i.mtime_ns;
	f->clock_us = clock_ns / 1000;
	return sl_qindex_relpath(t, &i, f->path, sizeof(f->path));
}

/*
 * The seen set (Spark's SeenFilesMap): qseen key qid u32 | seen key, value
 * age clock i64 (+ the full key when hashed); qseents key qid u32 | clock
 * u64 (offset by 2^63) | seen key, for purging in age order. The seen key is
 * the in/-relative path, or its last component with fileNameOnly; longer
 * than 400 bytes it becomes 0xff and a 128-bit hash.
 */
#define SEEN_KEY_MAX 400

struct seen_key {
	unsigned char k[4 + 1 + SEEN_KEY_MAX];
	size_t len;
	const char *full; /* the key text when hashed, else NULL */
};

static void seen_key(uint32_t qid, const struct sl_query_config *q, const char *path,
		     struct seen_key *out)
{
	const char *key = path;
	if (q->source.file_name_only) {
		const char *slash = strrchr(path, '/');
		key = slash ? slash + 1 : path;
	}
	size_t n = strlen(key);
	put_be32(out->k, qid);
	out->full = NULL;
	if (n <= SEEN_KEY_MAX) {
		memcpy(out->k + 4, key, n);
		out->len = 4 + n;
		return;
	}
	uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		h1 = (h1 ^ (unsigned char)key[i]) * 1099511628211ull;
		h2 = (h2 ^ (unsigned char)key[i]) * 0x100000001b3ull + (h2 >> 29);
	}
	out->k[4] = 0xff;
	put_be64(out->k + 5, h1);
	put_be64(out->k + 13, h2);
	out->len = 21;
	out->full = key;
}

/* Whether key is in the seen set (the full text compared when hashed). */
static bool seen_has(struct sl_txn *t, const struct seen_key *k)
{
	const void *v;
	size_t len;
	if (sl_txn_get(t, SL_TABLE_QSEEN, k->k, k->len, &v, &len))
		return false;
	if (!k->full)
		return true;
	return len == 8 + strlen(k->full) && !memcmp((const char *)v + 8, k->full, len - 8);
}

static int seen_add(struct sl_txn *t, const struct seen_key *k, int64_t clock)
{
	unsigned char val[8 + 4096], ts[4 + 8 + 1 + SEEN_KEY_MAX];
	size_t vlen = 8;
	uint64_t biased = (uint64_t)clock + (1ull << 63);
	int rc;

	memcpy(val, &clock, 8);
	if (k->full) {
		size_t n = strlen(k->full);
		if (n > sizeof(val) - 8)
			return ENAMETOOLONG;
		memcpy(val + 8, k->full, n);
		vlen += n;
	}
	memcpy(ts, k->k, 4);
	put_be64(ts + 4, biased);
	memcpy(ts + 12, k->k + 4, k->len - 4);
	if ((rc = sl_txn_put(t, SL_TABLE_QSEEN, k->k, k->len, val, vlen)))
		return rc;
	return sl_txn_put(t, SL_TABLE_QSEENTS, ts, 8 + k->len, "", 0);
}

struct purge {
	uint64_t threshold; /* biased */
	unsigned char (*keys)[4 + 8 + 1 + SEEN_KEY_MAX];
	size_t *lens, n, cap;
	int err;
};

static int purge_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct purge *pg = ctx;
	(void)val, (void)vlen;
	if (klen < 12 || klen > 12 + 1 + SEEN_KEY_MAX)
		return SL_ECORRUPT;
	if (get_be64((const unsigned char *)key + 4) >= pg->threshold)
		return 1;
	if (pg->n == pg->cap) {
		size_t c = pg->cap ? pg->cap * 2 : 64;
		void *k = realloc(pg->keys, c * sizeof(*pg->keys));
		void *l = k ? realloc(pg->lens, c * sizeof(*pg->lens)) : NULL;
		if (k)
			pg->keys = k;
		if (!k || !l) {
			pg->err = ENOMEM;
			return 1;
		}
		pg->lens = l;
		pg->cap = c;
	}
	memcpy(pg->keys[pg->n], key, klen);
	pg->lens[pg->n++] = klen;
	return 0;
}

/* Spark's purge: seen entries older than the threshold go. */
static int seen_purge(struct sl_txn *t, uint32_t qid, int64_t threshold)
{
	struct purge pg = {.threshold = (uint64_t)threshold + (1ull << 63)};
	unsigned char prefix[4], sk[4 + 1 + SEEN_KEY_MAX];
	int rc;

	put_be32(prefix, qid);
	rc = sl_txn_each(t, SL_TABLE_QSEENTS, prefix, 4, purge_each, &pg);
	if (rc == 1)
		rc = pg.err;
	for (size_t i = 0; rc == 0 && i < pg.n; i++) {
		memcpy(sk, pg.keys[i], 4);
		memcpy(sk + 4, pg.keys[i] + 12, pg.lens[i] - 12);
		if ((rc = sl_txn_del(t, SL_TABLE_QSEEN, sk, pg.lens[i] - 8)) == 0)
			rc = sl_txn_del(t, SL_TABLE_QSEENTS, pg.keys[i], pg.lens[i]);
	}
	free(pg.keys);
	free(pg.lens);
	return rc;
}

static bool in_batch(const struct plan *p, const struct seen_key *k)
{
	for (size_t i = 0; i < p->n; i++) {
		struct seen_key o;
		seen_key(p->qid, p->q, p->files[i].path, &o);
		if (o.len == k->len && !memcmp(o.k, k->k, k->len))
			return true;
	}
	return false;
}

static int plan_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct plan *p = ctx;
	const struct sl_source_config *src = &p->q->source;
	struct planned tmp;
	uint64_t seq, id;

	if (klen != 12 || vlen != 8)
		return SL_ECORRUPT;
	seq = get_be64((const unsigned char *)key + 4);
	memcpy(&id, val, 8);
	if (seq > p->seq_limit)
		return src->latest_first ? 0 : 1; /* landed after the start */
	if (!p->ignore_caps && src->max_files && p->n >= (uint64_t)src->max_files)
		return 1;
	if ((p->rc = fill(p->t, &tmp, id, seq, p->q)))
		return p->rc == SL_NOTFOUND ? SL_ECORRUPT : p->rc;
	/*
	 * Spark's rules: a key already seen (a re-upload after the original
	 * went) is skipped, and so is a file older than the newest planned so
	 * far minus maxFileAge (the first batch takes all).
	 */
	struct seen_key sk;
	seen_key(p->qid, p->q, tmp.path, &sk);
	bool seen = seen_has(p->t, &sk) || in_batch(p, &sk);
	tmp.seen = seen; /* both reasons: counted as seen, the more specific one */
	if (seen || (p->maxts && tmp.clock_us < (int64_t)p->maxts - src->max_file_age_us &&
		     !(src->latest_first && (src->max_files || src->max_bytes)))) {
		struct planned *s = push(&p->skip, &p->nskip, &p->capskip);
		if (!s)
			return ENOMEM;
		*s = tmp;
		return 0;
	}
	if (!p->ignore_caps && src->max_bytes && p->n > 0 &&
	    p->total_bytes + tmp.size > (uint64_t)src->max_bytes)
		return 1;
	struct planned *f = push(&p->files, &p->n, &p->cap);
	if (!f)
		return ENOMEM;
	*f = tmp;
	p->total_bytes += tmp.size;
	return 0;
}

/* Batch N's files from its record (recovery). */
static int load_record(struct sl_txn *t, struct plan *p, const unsigned char *v, size_t len)
{
	uint64_t count;
	int rc;

	if (len < 24)
		return SL_ECORRUPT;
	memcpy(&p->k, v, 8);
	memcpy(&p->ts_ms, v + 8, 8);
	memcpy(&count, v + 16, 8);
	if (len != 24 + count * 8)
		return SL_ECORRUPT;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t id;
		memcpy(&id, v + 24 + i * 8, 8);
		struct planned *f = push(&p->files, &p->n, &p->cap);
		if (!f)
			return ENOMEM;
		if ((rc = fill(t, f, id, 0, p->q)))
			return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
	}
	p->recovered = true;
	p->nodata = count == 0;
	char key[48];
	uint64_t wm;
	qkey(key, sizeof(key), p->qid, "bwm");
	if ((rc = sl_txn_meta_get(t, key, &wm)))
		return rc;
	p->wm_ms = (int64_t)wm;
	return 0;
}

static int plan_apply_timed(struct sl_txn *t, struct plan *p);

/*
 * No file to take: a no-data batch runs when the watermark, moved by the
 * last batch, would now emit or evict state (Spark's shouldRunAnotherBatch,
 * narrowed to when it changes something). It logs offsets/N repeating the
 * last source offset K, and a record with no files.
 */
static int plan_nodata(struct sl_txn *t, struct plan *p)
{
	char key[48];
	uint64_t bwm, k;
	bool due = false;
	int rc;

	if (!sl_ops_needed(p->q))
		return 0;
	qkey(key, sizeof(key), p->qid, "bwm");
	if ((rc = sl_txn_meta_get(t, key, &bwm)))
		return rc;
	qkey(key, sizeof(key), p->qid, "k");
	if ((rc = sl_txn_meta_get(t, key, &k)))
		return rc;
	if (p->wm_ms <= (int64_t)bwm || k == 0)
		return 0;
	if ((rc = sl_ops_due(p->q, p->qid, t, p->wm_ms, &due)) || !due)
		return rc;
	p->nodata = true;
	p->k = k - 1;
	unsigned char rec[24];
	uint64_t count = 0;
	memcpy(rec, &p->k, 8);
	memcpy(rec + 8, &p->ts_ms, 8);
	memcpy(rec + 16, &count, 8);
	struct sl_strbuf off = {0};
	sl_strbuf_addf(&off, "v1\n{\"batchWatermarkMs\":%" PRId64 ",\"batchTimestampMs\":%" PRId64
		       ",\"conf\":{}}\n{\"logOffset\":%" PRIu64 "}",
		 p->wm_ms, p->ts_ms, p->k);
	rc = off.oom ? ENOMEM : 0;
	if (rc == 0)
		rc = log_put(t, p->qid, 'b', p->batch, rec, sizeof(rec));
	if (rc == 0)
		rc = log_put(t, p->qid, 'o', p->batch, off.p, off.len);
	if (rc == 0) {
		qkey(key, sizeof(key), p->qid, "bwm");
		rc = sl_txn_meta_put(t, key, (uint64_t)p->wm_ms);
	}
	sl_strbuf_release(&off);
	return rc;
}

static int plan_apply(struct sl_txn *t, void *arg)
{
	struct plan *p = arg;
	int rc;

	int64_t t0 = mono_ns();
	rc = plan_apply_timed(t, p);
	p->apply_ns = mono_ns() - t0;
	return rc;
}

static int plan_apply_timed(struct sl_txn *t, struct plan *p)
{
	unsigned char prefix[4];
	const void *v;
	size_t vlen;
	char key[48];
	int rc;

	p->n = p->nskip = 0;
	p->total_bytes = 0;
	p->recovered = p->nodata = false;
	p->wm_ms = 0;
	p->t = t;
	qkey(key, sizeof(key), p->qid, "next");
	if ((rc = sl_txn_meta_get(t, key, &p->batch)))
		return rc;
	rc = sl_engine_checkpoint_get(t, p->qid, 'b', p->batch, &v, &vlen);
	if (rc == 0)
		return load_record(t, p, v, vlen);
	if (rc != SL_NOTFOUND)
		return rc;

	qkey(key, sizeof(key), p->qid, "maxts");
	if ((rc = sl_txn_meta_get(t, key, &p->maxts)))
		return rc;
	put_be32(prefix, p->qid);
	/* landing order; latestFirst takes the newest first */
	rc = (p->q->source.latest_first ? sl_txn_each_rev : sl_txn_each)(t, SL_TABLE_QINDEX,
									  prefix, 4, plan_each, p);
	if (rc < 0 || rc > 1)
		return rc;
	/*
	 * Skips are counted in this txn, for the next report: when no batch
	 * runs now (every file skipped), a later one still shows them.
	 */
	for (size_t i = 0; i < p->nskip; i++)
		if ((rc = sl_qindex_skip(t, p->qid, p->skip[i].seq, p->skip[i].id, p->skip[i].size,
					  p->skip[i].seen ? SL_SKIP_SEEN : SL_SKIP_AGE)))
			return rc;
	/* the checkpoint's config, kept with its first batch (or since this version) */
	rc = sl_engine_checkpoint_get(t, p->qid, 'd', 0, &v, &vlen);
	if (rc == SL_NOTFOUND && p->desc)
		rc = log_put(t, p->qid, 'd', 0, p->desc, p->desc_len);
	if (rc)
		return rc;
	uint64_t wm;
	qkey(key, sizeof(key), p->qid, "wm");
	if ((rc = sl_txn_meta_get(t, key, &wm)))
		return rc;
	p->wm_ms = (int64_t)wm;
	if (p->n == 0)
		return plan_nodata(t, p);

	/* offsets/N is durable before batch N reads a byte */
	uint64_t maxts = p->maxts;
	unsigned char *rec = malloc(24 + p->n * 8);
	if (!rec)
		return ENOMEM;
	qkey(key, sizeof(key), p->qid, "k");
	if ((rc = sl_txn_meta_get(t, key, &p->k)) || (rc = sl_txn_meta_put(t, key, p->k + 1))) {
		free(rec);
		return rc;
	}
	memcpy(rec, &p->k, 8);
	memcpy(rec + 8, &p->ts_ms, 8);
	uint64_t count = p->n;
	memcpy(rec + 16, &count, 8);
	struct sl_strbuf off = {0}, src = {0};
	sl_strbuf_addf(&off, "v1\n{\"batchWatermarkMs\":%" PRId64 ",\"batchTimestampMs\":%" PRId64
		       ",\"conf\":{}}\n{\"logOffset\":%" PRIu64 "}",
		 p->wm_ms, p->ts_ms, p->k);
	sl_strbuf_add(&src, "v1", 2);
	for (size_t i = 0; i < p->n; i++) {
		struct planned *f = &p->files[i];
		memcpy(rec + 24 + i * 8, &f->id, 8);
		sl_strbuf_add(&src, "\n{\"path\":", 9);
		char full[4200];
		snprintf(full, sizeof(full), "in/%s", f->path);
		text_json_string(&src, full);
		sl_strbuf_addf(&src, ",\"timestamp\":%" PRId64 ",\"batchId\":%" PRIu64 "}", f->landed_ms,
			 p->k);
		if (f->clock_us > 0 && (uint64_t)f->clock_us > maxts)
			maxts = (uint64_t)f->clock_us;
		if ((rc = sl_qindex_unindex(t, p->qid, f->seq, f->id, f->size, false)))
			break;
	}
	rc = rc ? rc : off.oom || src.oom ? ENOMEM : 0;
	if (rc == 0)
		rc = log_put(t, p->qid, 'b', p->batch, rec, 24 + p->n * 8);
	if (rc == 0)
		rc = log_put(t, p->qid, 'o', p->batch, off.p, off.len);
	if (rc == 0)
		rc = log_put(t, p->qid, 's', p->k, src.p, src.len);
	if (rc == 0 && p->batch == 0) {
		char meta[64];
		int n = snprintf(meta, sizeof(meta), "{\"id\":\"%s\"}", p->uuid);
		rc = log_put(t, p->qid, 'm', 0, meta, (size_t)n);
	}
	for (size_t i = 0; rc == 0 && i < p->n; i++) {
		struct seen_key sk;
		seen_key(p->qid, p->q, p->files[i].path, &sk);
		rc = seen_add(t, &sk, p->files[i].clock_us);
	}
	/* with latestFirst and a cap Spark never purges: maxFileAge is off */
	const struct sl_source_config *sc = &p->q->source;
	if (rc == 0 && !(sc->latest_first && (sc->max_files || sc->max_bytes)))
		rc = seen_purge(t, p->qid, (int64_t)maxts - sc->max_file_age_us);
	if (rc == 0) {
		qkey(key, sizeof(key), p->qid, "maxts");
		rc = sl_txn_meta_put(t, key, maxts);
	}
	if (rc == 0) {
		qkey(key, sizeof(key), p->qid, "bwm");
		rc = sl_txn_meta_put(t, key, (uint64_t)p->wm_ms);
	}
	free(rec);
	sl_strbuf_release(&off);
	sl_strbuf_release(&src);
	return rc;
}

static void make_uuid(char out[40])
{
	unsigned char r[16] = {0};
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, r, sizeof(r)) != (ssize_t)sizeof(r))
			memset(r, 0, sizeof(r));
		close(fd);
	}
	r[6] = (r[6] & 0x0f) | 0x40; /* version 4 */
	r[8] = (r[8] & 0x3f) | 0x80; /* RFC 4122 variant */
	snprintf(out, 40,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
		 r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
		 r[14], r[15]);
}

/* ---- 2. read, decode, format ---- */

/*
 * A landed file's bytes: inline ones copied (*mapped false, free()), a
 * blob mapped read-only (*mapped true, munmap()): landed blobs never change,
 * and a mapping costs no copy and no resident memory of its own.
 */
static int read_bytes(struct sl_land *l, uint64_t id, char **data, size_t *len, bool *mapped)
{
	struct sl_txn *t;
	struct sl_inode i;
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(l), &t)))
		return rc;
	rc = sl_txn_inode_get(t, id, &i);
	if (rc == 0 && i.storage == SL_STORE_INLINE) {
		const void *d;
		size_t n;
		rc = sl_txn_data_get(t, id, &d, &n);
		if (rc == 0 && !(*data = malloc(n ? n : 1)))
			rc = ENOMEM;
		if (rc == 0) {
			memcpy(*data, d, n);
			*len = n;
		}
		sl_txn_end(t);
		return rc;
	}
	sl_txn_end(t);
	if (rc)
		return rc;
	int fd;
	if ((rc = sl_blob_open(sl_land_blobs(l), id, O_RDONLY, &fd)))
		return rc;
	struct stat sb;
	if (i.size > 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= i.size) {
		void *m = mmap(NULL, i.size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			close(fd);
			/* read ahead at once: the disk works while the decoders do */
			madvise(m, i.size, MADV_WILLNEED);
			*data = m;
			*len = i.size;
			*mapped = true;
			return 0;
		}
	}
	char *buf = malloc(i.size ? i.size : 1);
	size_t got = 0;
	if (!buf)
		rc = ENOMEM;
	while (rc == 0 && got < i.size) {
		ssize_t r = pread(fd, buf + got, i.size - got, (off_t)got);
		if (r < 0)
			rc = errno;
		else if (r == 0)
			rc = SL_ECORRUPT; /* shorter than its record */
		else
			got += (size_t)r;
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	*len = i.size;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static void *decode_half(void *arg)
{
	struct half *h = arg;
	h->rc = sl_decode_file(h->dec, h->path, h->data, h->len, &h->b, &h->st, &h->err);
	return NULL;
}

/* The second decoder, ready for a job on path (made at its first use). */
static int half_prepare(struct plan *p, const char *path)
{
	const struct sl_query_config *q = p->q;
	struct half *h = &p->half;
	int rc;

	if (!h->ready) {
		if ((rc = sl_decoder_new(q, &h->dec)))
			return rc;
		if ((rc = sl_batch_init(&h->b, &q->source.schema))) {
			sl_decoder_free(h->dec);
			return rc;
		}
		if ((rc = sl_decode_stats_init(&h->st, q->source.schema.n))) {
			sl_batch_release(&h->b);
			sl_decoder_free(h->dec);
			return rc;
		}
		h->ready = true;
	}
	sl_batch_clear(&h->b);
	sl_decode_stats_reset(&h->st);
	memset(&h->err, 0, sizeof(h->err));
	h->path = path;
	h->rc = 0;
	return 0;
}

/* Line ends in data[0, end): a FAILFAST line found past end is numbered after them. */
static uint64_t lines_before(const char *data, size_t end)
{
	uint64_t n = 0;
	for (const char *c = data; (c = memchr(c, '\n', (size_t)(data + end - c))); c++)
		n++;
	return n;
}

/*
 * After the second decoder did data[cut, ...) (this thread the part before,
 * with result rc): its rows appended after this thread's, its counters
 * added, its FAILFAST line numbered in the whole file.
 */
static int join_half(struct half *h, const char *data, size_t cut, int rc, struct sl_batch *b,
		     struct sl_decode_stats *st, struct sl_decode_error *derr)
{
	if (rc == 0 && h->rc == SL_EMALFORMED) {
		*derr = h->err;
		derr->line += lines_before(data, cut);
	}
	if (rc == 0)
		rc = h->rc;
	if (rc == 0) {
		rc = sl_batch_append(b, &h->b);
		st->lines += h->st.lines;
		st->rows += h->st.rows;
		st->malformed += h->st.malformed;
		st->dropped += h->st.dropped;
		for (size_t c = 0; c < st->ncols && c < h->st.ncols; c++)
			st->null_counts[c] += h->st.null_counts[c];
	}
	sl_batch_trim(&h->b, 1 << 16);
	return rc;
}

/* Whether a file of q can be decoded in pieces cut at line ends (no CSV header to share). */
static bool cuttable(const struct sl_query_config *q)
{
	return !(q->source.format == SL_SOURCE_CSV && q->source.header);
}

/*
 * Decodes one file, the second half of a big one on another thread, as one
 * sl_decode_file() would: rows in order, counters summed, a FAILFAST line
 * numbered in the whole file. Only where a line end cuts the file cleanly
 * (no csv header to share).
 */
static int decode_split(struct plan *p, struct sl_decoder *dec, const char *path,
			const char *data, size_t len, bool mapped, struct sl_batch *b,
			struct sl_decode_stats *st, struct sl_decode_error *derr)
{
	struct half *h = &p->half;
	const char *nl = len >= SPLIT_MIN ? memchr(data + len / 2, '\n', len - len / 2) : NULL;
	size_t cut = nl ? (size_t)(nl - data) + 1 : 0;
	int rc;

	/* a cut before "\xEF" could be taken for a BOM, which only starts a file */
	if (!nl || cut >= len || (unsigned char)data[cut] == 0xEF || !cuttable(p->q))
		return sl_decode_file(dec, path, data, len, b, st, derr);
	if ((rc = half_prepare(p, path)))
		return rc;
	h->data = data + cut;
	h->len = len - cut;
	pthread_t th;
	if (pthread_create(&th, NULL, decode_half, h))
		return sl_decode_file(dec, path, data, len, b, st, derr);
	rc = sl_decode_file(dec, path, data, cut, b, st, derr);
	pthread_join(th, NULL);
	/*
	 * Decoded strings are copies: the file's pages can leave this process
	 * before the halves are joined (they stay in the page cache, and come
	 * back on a read, such as the line count below).
	 */
	if (mapped)
		madvise((void *)data, len, MADV_DONTNEED);
	return join_half(h, data, cut, rc, b, st, derr);
}

/*
 * A big .zst file: decompressed on a second thread while this one decodes
 * what has arrived, up to its last line end; once all of it is there, the
 * rest is cut in two at a line end and the second thread decodes the
 * latter part. Decompression and decoding overlap instead of following
 * each other, and the result is sl_decode_file()'s over the whole.
 */
#define ZPIECE (8u << 20) /* decompressed bytes this thread waits for before decoding */

struct zpipe {
	const char *src;  /* the compressed file */
	size_t srclen;
	char *buf;        /* size + 1 bytes (see sl_codec_decompress_into) */
	size_t size;      /* what the frame headers declare */
	struct half *h;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t avail;     /* bytes of buf decompressed so far */
	bool done;        /* decompression over, with zrc */
	int zrc;
	bool tail_set;    /* the decoder said where the tail starts (size: none) */
	bool stop;        /* the decoder gave up: no tail, stop decompressing */
	size_t tail_from;
};

/* Decompression's progress: n bytes are there (ECANCELED once the decoder gave up). */
static int zpipe_progress(void *ctx, size_t n)
{
	struct zpipe *z = ctx;
	pthread_mutex_lock(&z->mu);
	z->avail = n;
	bool stop = z->stop;
	pthread_cond_broadcast(&z->cv);
	pthread_mutex_unlock(&z->mu);
	return stop ? ECANCELED : 0;
}

static void *zpipe_main(void *arg)
{
	struct zpipe *z = arg;
	int rc = sl_codec_decompress_into(z->src, z->srclen, z->buf, z->size, zpipe_progress, z);

	pthread_mutex_lock(&z->mu);
	z->done = true;
	z->zrc = rc;
	pthread_cond_broadcast(&z->cv);
	while (!z->tail_set)
		pthread_cond_wait(&z->cv, &z->mu);
	size_t from = z->tail_from;
	pthread_mutex_unlock(&z->mu);
	struct half *h = z->h;
	if (rc == 0 && from < z->size) {
		h->data = z->buf + from;
		h->len = z->size - from;
		decode_half(h);
	}
	return NULL;
}

/* Tells the second thread where its tail starts (z->size: none, stop). */
static void zpipe_tail(struct zpipe *z, size_t from, bool stop)
{
	pthread_mutex_lock(&z->mu);
	z->tail_from = from;
	z->tail_set = true;
	z->stop = stop;
	pthread_cond_broadcast(&z->cv);
	pthread_mutex_unlock(&z->mu);
}

/*
 * Decodes the .zst file src whose frames declare size bytes. Returns as
 * decode_split() does, with *zfail set when the error is the
 * decompression's (corrupt, truncated, too big), or EAGAIN when no thread
 * could be had (nothing done: decode it whole).
 */
static int decode_zst(struct plan *p, struct sl_decoder *dec, const char *path, const char *src,
		      size_t srclen, size_t size, struct sl_batch *b, struct sl_decode_stats *st,
		      struct sl_decode_error *derr, bool *zfail)
{
	struct zpipe z = {.src = src, .srclen = srclen, .size = size, .h = &p->half};
	pthread_t th;
	int rc;

	if ((rc = half_prepare(p, path)))
		return rc;
	if (!(z.buf = malloc(size + 1)))
		return ENOMEM;
	pthread_mutex_init(&z.mu, NULL);
	pthread_cond_init(&z.cv, NULL);
	if (pthread_create(&th, NULL, zpipe_main, &z)) {
		rc = EAGAIN;
		goto out;
	}
	size_t piece = SL_FAULT_SIZE("zst.piece", ZPIECE);
	size_t pos = 0, want = piece;
	for (;;) {
		pthread_mutex_lock(&z.mu);
		while (!z.done && z.avail < want)
			pthread_cond_wait(&z.cv, &z.mu);
		size_t avail = z.avail;
		bool done = z.done;
		int zrc = z.zrc;
		pthread_mutex_unlock(&z.mu);
		if (done && zrc) {
			*zfail = true;
			rc = zrc;
			zpipe_tail(&z, size, true);
			break;
		}
		if (done) {
			/* all there: the rest in two, the latter for the second thread */
			size_t cut = size;
			if (size - pos >= 2 * piece) {
				const char *mid = z.buf + pos + (size - pos) / 2;
				const char *nl = memchr(mid, '\n', (size_t)(z.buf + size - mid));
				if (nl && nl + 1 < z.buf + size && (unsigned char)nl[1] != 0xEF)
					cut = (size_t)(nl + 1 - z.buf);
			}
			zpipe_tail(&z, cut, false);
			rc = sl_decode_file(dec, path, z.buf + pos, cut - pos, b, st, derr);
			if (rc == SL_EMALFORMED)
				derr->line += lines_before(z.buf, pos);
			pthread_join(th, NULL);
			if (cut < size)
				rc = join_half(z.h, z.buf, cut, rc, b, st, derr);
			goto out;
		}
		/* the complete lines that arrived, not cut before "\xEF" (a BOM's first byte) */
		const char *end = avail > pos + 1 ? memrchr(z.buf + pos, '\n', avail - 1 - pos) : NULL;
		while (end && (unsigned char)end[1] == 0xEF)
			end = end > z.buf + pos ? memrchr(z.buf + pos, '\n', (size_t)(end - z.buf) - pos) : NULL;
		if (!end) {
			want = avail + 1; /* a long line: wait for its end */
			continue;
		}
		rc = sl_decode_file(dec, path, z.buf + pos, (size_t)(end + 1 - z.buf) - pos, b, st, derr);
		if (rc) {
			if (rc == SL_EMALFORMED)
				derr->line += lines_before(z.buf, pos);
			zpipe_tail(&z, size, true);
			break;
		}
		pos = (size_t)(end + 1 - z.buf);
		want = pos + piece;
	}
	pthread_join(th, NULL);
out:
	pthread_cond_destroy(&z.cv);
	pthread_mutex_destroy(&z.mu);
	free(z.buf);
	return rc;
}

static void half_release(struct half *h)
{
	if (!h->ready)
		return;
	sl_decoder_free(h->dec);
	sl_batch_release(&h->b);
	sl_decode_stats_release(&h->st);
	h->ready = false;
}

/* Decodes every planned file into b; FAILFAST stops at the first bad line. */
static int decode_all(struct sl_land *l, struct plan *p, struct sl_decoder *dec,
		      struct sl_batch *b, struct sl_decode_stats *st, struct sl_engine_report *r)
{
	struct sl_decode_error derr;
	int rc = 0;

	for (size_t i = 0; i < p->n && rc == 0; i++) {
		const struct planned *f = &p->files[i];
		char *data = NULL;
		size_t len = 0;
		bool mapped = false;

		if (p->stop && *p->stop) {
			/* an unmount: the batch is replayed from its offsets at the next start */
			snprintf(r->error, sizeof(r->error), "batch %" PRIu64 " abandoned by the unmount",
				 p->batch);
			return ECANCELED;
		}
		if ((rc = read_bytes(l, f->id, &data, &len, &mapped))) {
			snprintf(r->error, sizeof(r->error), "cannot read 'in/%.300s': %s", f->path,
				 sl_strerror(rc));
			break;
		}
		memset(&derr, 0, sizeof(derr));
		bool zst = ends_with(f->path, ".zst"), zfail = false;
		unsigned long long zsize;
		rc = EAGAIN;
		if (zst && sl_codec_content_size(data, len, &zsize) == 0 && zsize >= SPLIT_MIN &&
		    zsize <= ZST_LIMIT && cuttable(p->q))
			rc = decode_zst(p, dec, f->path, data, len, (size_t)zsize, b, st, &derr, &zfail);
		if (rc == EAGAIN && zst) {
			void *plain;
			size_t plen;
			rc = sl_codec_decompress(data, len, ZST_LIMIT, &plain, &plen);
			if (mapped)
				munmap(data, len);
			else
				free(data);
			mapped = false;
			data = rc ? NULL : plain;
			len = rc ? 0 : plen;
			zfail = rc != 0;
			if (rc == 0)
				rc = EAGAIN;
		}
		if (zfail) {
			snprintf(r->error, sizeof(r->error), "cannot decompress 'in/%.300s': %s", f->path,
				 rc == SL_ECORRUPT ? "not valid zstd data (corrupt or truncated)"
				 : rc == EFBIG	   ? "it expands beyond 4 GiB"
						   : sl_strerror(rc));
			/* bad input, not a passing failure: the query stops, no retry */
			if (rc == SL_ECORRUPT || rc == EFBIG)
				rc = SL_EMALFORMED;
			if (mapped)
				munmap(data, len);
			else
				free(data);
			break;
		}
		if (rc == EAGAIN)
			rc = decode_split(p, dec, f->path, data, len, mapped, b, st, &derr);
		if (mapped)
			munmap(data, len);
		else
			free(data);
		if (rc == SL_EMALFORMED)
			snprintf(r->error, sizeof(r->error), "'in/%.300s' line %" PRIu64 ": %s", f->path,
				 derr.line, derr.reason);
		else if (rc)
			snprintf(r->error, sizeof(r->error), "cannot decode 'in/%.300s': %s", f->path,
				 sl_strerror(rc));
	}
	return rc;
}

/* ---- 3. commit ---- */

/* An entry of out/<query>/ a complete-mode batch replaces. */
struct gone {
	uint64_t parent, id;
	char name[SL_NAME_MAX + 1];
	bool dir, blob;
};

struct commit {
	struct sl_ops *ops;   /* the batch's state changes, or NULL */
	int64_t next_wm;      /* the watermark after the batch */
	bool replace;         /* complete mode: the parts replace out/<query>/ */
	/* out, reset by each run of the apply: what the replace removed */
	struct gone *gone;
	size_t ngone, capgone;
	uint64_t rows;        /* the batch's input rows, for `sluice status` */
	const struct report *report; /* what the progress report is made of */
	char *progress;       /* the batch's progress report (JSON, one line), or NULL */
	size_t progress_len;
	const struct sl_query_config *q;
	const struct plan *p;
	struct sl_stage *stage; /* the parts: waited for before they are named */
	uint64_t outdir_id;   /* for out/<query> when it does not exist yet */
	int64_t now;          /* the commit's time (CLOCK_REALTIME): out/ mtimes */
};

/* What a progress report is made of, besides the batch's plan and outcome. */
struct report {
	const struct plan *p;
	const struct sl_decode_stats *st;
	const struct sl_ops_result *ops; /* NULL for a stateless query */
	int64_t t0, t1;                  /* monotonic: trigger start, end of planning and offsets */
	char id[40];                     /* checkpoint/<q>/metadata's query id */
	struct sl_backlog bl;
};

static void progress_report(const struct report *r, int64_t t2, uint64_t out_rows,
			    const struct sl_skips *sk, char **out, size_t *len);

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
	struct commit *c;
	uint64_t parent;
	int rc;
};

static int collect_child(void *ctx, const char *name, uint64_t id)
{
	struct collect *k = ctx;
	struct commit *c = k->c;
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
static int replace_snapshot(struct sl_txn *t, struct commit *c, uint64_t outdir)
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
	rc = log_put(t, c->p->qid, 'g', c->p->batch, ids, n * 8);
	free(ids);
	return rc;
}

static int commit_apply(struct sl_txn *t, void *arg)
{
	struct commit *c = arg;
	const struct plan *p = c->p;
	char key[48];
	uint64_t outdir;
	int rc;

	/* the state first: its puts overlap the stage writing the parts */
	if (c->ops && (rc = sl_ops_apply(c->ops, t)))
		return rc;
	if ((rc = sl_stage_wait(c->stage)))
		return rc;
	if ((rc = ensure_dir(t, SL_ID_OUT, c->q->name, c->outdir_id, c->now, &outdir)))
		return rc;
	if (c->replace && (rc = replace_snapshot(t, c, outdir)))
		return rc;
	if (c->ngone && (rc = touch_dir(t, outdir, c->now)))
		return rc;
	uint64_t out_rows = 0;
	for (size_t i = 0; i < c->stage->nparts; i++) {
		struct sl_out_part *op = &c->stage->out[i];
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
	for (size_t i = 0; i < p->n; i++)
		if ((rc = sl_qindex_release(t, p->qid, p->files[i].id)))
			return rc;
	/* cleanSource intents, carried out right after this commit */
	if (c->q->source.clean != SL_CLEAN_OFF && p->n) {
		uint64_t *ids = malloc(p->n * 8);
		if (!ids)
			return ENOMEM;
		for (size_t i = 0; i < p->n; i++)
			ids[i] = p->files[i].id;
		rc = log_put(t, p->qid, 'x', p->batch, ids, p->n * 8);
		free(ids);
		if (rc)
			return rc;
	}
	char commit_text[80];
	int clen = snprintf(commit_text, sizeof(commit_text), "v1\n{\"nextBatchWatermarkMs\":%" PRId64 "}",
			    c->next_wm);
	if ((rc = log_put(t, p->qid, 'c', p->batch, commit_text, (size_t)clen)))
		return rc;
	qkey(key, sizeof(key), p->qid, "wm");
	if ((rc = sl_txn_meta_put(t, key, (uint64_t)c->next_wm)))
		return rc;
	qkey(key, sizeof(key), p->qid, "rows");
	if ((rc = sl_txn_meta_put(t, key, c->rows)))
		return rc;
	/* the checkpoint keeps the last 100 batches (Spark's minBatchesToRetain) */
	if (p->batch >= 100) {
		static const char kinds[] = {'o', 'c', 'b'};
		for (size_t i = 0; i < sizeof(kinds); i++) {
			unsigned char ok[13];
			log_key(ok, p->qid, kinds[i], p->batch - 100);
			if ((rc = sl_txn_del(t, SL_TABLE_QLOG, ok, sizeof(ok))))
				return rc;
		}
	}
	if (p->k >= 100) {
		unsigned char sk[13];
		log_key(sk, p->qid, 's', p->k - 100);
		if ((rc = sl_txn_del(t, SL_TABLE_QLOG, sk, sizeof(sk))))
			return rc;
	}
	/* the last 100 progress reports, like Spark's recentProgress */
	struct sl_skips sk;
	if ((rc = sl_qindex_skips(t, p->qid, true, &sk)))
		return rc;
	free(c->progress); /* from an earlier run of this apply */
	progress_report(c->report, c->stage->done_ns, out_rows, &sk, &c->progress,
			&c->progress_len);
	if (c->progress &&
	    (rc = log_put(t, p->qid, 'p', p->batch, c->progress, c->progress_len)))
		return rc;
	if (p->batch >= 100) {
		unsigned char pk[13];
		log_key(pk, p->qid, 'p', p->batch - 100);
		if ((rc = sl_txn_del(t, SL_TABLE_QLOG, pk, sizeof(pk))))
			return rc;
	}
	unsigned char ek[13];
	log_key(ek, p->qid, 'e', 0); /* a committed batch clears the last error */
	if ((rc = sl_txn_del(t, SL_TABLE_QLOG, ek, sizeof(ek))))
		return rc;
	qkey(key, sizeof(key), p->qid, "next");
	return sl_txn_meta_put(t, key, p->batch + 1);
}

struct error_rec {
	uint32_t qid;
	const char *text;
};

static int error_apply(struct sl_txn *t, void *arg)
{
	struct error_rec *e = arg;
	return log_put(t, e->qid, 'e', 0, e->text, strlen(e->text));
}

/* ---- cleanSource ---- */

struct intents {
	uint64_t batches[64];
	size_t n;
};

static int collect_intent(void *ctx, uint64_t n, size_t len)
{
	struct intents *in = ctx;
	(void)len;
	in->batches[in->n++] = n;
	return in->n == 64 ? 1 : 0;
}

static int intent_del_apply(struct sl_txn *t, void *arg)
{
	const uint64_t *a = arg; /* qid, kind, batch */
	unsigned char k[13];
	log_key(k, (uint32_t)a[0], (char)a[1], a[2]);
	return sl_txn_del(t, SL_TABLE_QLOG, k, sizeof(k));
}

/*
 * Carries out the intents of kind ('x' cleanSource, 'g' replaced parts) of
 * query qid, oldest first: act(ctx, ids, n) on each entry's file ids, then
 * the entry goes. Idempotent, so that a start redoes what a crash cut.
 */
static int each_intent(struct sl_land *l, uint32_t qid, char kind,
		       int (*act)(void *ctx, const uint64_t *ids, size_t n), void *ctx)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	struct intents in;
	int rc;

	do {
		struct sl_txn *t;
		in.n = 0;
		if ((rc = sl_catalog_read(cat, &t)))
			return rc;
		rc = sl_engine_checkpoint_each(t, qid, kind, collect_intent, &in);
		sl_txn_end(t);
		if (rc < 0 || rc > 1)
			return rc;
		for (size_t k = 0; k < in.n; k++) {
			const void *v;
			size_t len;
			uint64_t *ids = NULL;
			if ((rc = sl_catalog_read(cat, &t)))
				return rc;
			rc = sl_engine_checkpoint_get(t, qid, kind, in.batches[k], &v, &len);
			if (rc == 0 && (len % 8 || !(ids = malloc(len ? len : 1))))
				rc = len % 8 ? SL_ECORRUPT : ENOMEM;
			if (rc == 0)
				memcpy(ids, v, len);
			sl_txn_end(t);
			if (rc == 0)
				rc = act(ctx, ids, len / 8);
			free(ids);
			uint64_t a[3] = {qid, (uint64_t)kind, in.batches[k]};
			if (rc == 0)
				rc = sl_catalog_write_freeing(cat, intent_del_apply, a);
			if (rc)
				return rc;
		}
	} while (in.n == 64);
	return 0;
}

struct clean_ctx {
	struct sl_land *l;
	const struct sl_query_config *q;
};

static int clean_act(void *ctx, const uint64_t *ids, size_t n)
{
	struct clean_ctx *c = ctx;
	int rc = 0;
	/* with cleanSource turned off since, the intent is dropped */
	if (c->q->source.clean != SL_CLEAN_OFF)
		rc = sl_land_clean(c->l, ids, n, c->q->source.clean == SL_CLEAN_ARCHIVE);
	SL_FAULT("engine.during_clean");
	return rc;
}

/* cleanSource: the query's intents, carried out right after each commit and at start. */
static int clean_pending(struct sl_land *l, const struct sl_query_config *q, uint32_t qid)
{
	struct clean_ctx c = {.l = l, .q = q};
	return each_intent(l, qid, 'x', clean_act, &c);
}

/* ---- progress ---- */

/* The query id kept in checkpoint/<q>/metadata ({"id":"<uuid>"}). */
static void query_uuid(struct sl_txn *t, uint32_t qid, char out[40])
{
	const void *d;
	size_t len;
	out[0] = 0;
	if (sl_engine_checkpoint_get(t, qid, 'm', 0, &d, &len) == 0 && len >= 44 &&
	    !memcmp(d, "{\"id\":\"", 7)) {
		memcpy(out, (const char *)d + 7, 36);
		out[36] = 0;
	}
}

/* Reads what a report needs of the catalog, before the commit. */
static void report_read(struct sl_land *l, struct report *r)
{
	struct sl_txn *t;

	r->id[0] = 0;
	if (sl_catalog_read(sl_land_catalog(l), &t))
		return;
	query_uuid(t, r->p->qid, r->id);
	sl_qindex_backlog(t, r->p->q->name, &r->bl);
	sl_txn_end(t);
}

/* Whole milliseconds from one monotonic reading to a later one (0 if not later). */
static int64_t ms_between(int64_t from, int64_t to)
{
	return to > from ? (to - from) / 1000000 : 0;
}

/*
 * Builds batch p's progress report (best effort: a report that cannot be
 * made leaves *out NULL and the batch commits without one). t2: the end of
 * the batch's output (operators, parts written), monotonic. sk: the skips
 * this report shows.
 */
static void progress_report(const struct report *r, int64_t t2, uint64_t out_rows,
			    const struct sl_skips *sk, char **out, size_t *len)
{
	const struct plan *p = r->p;
	const struct sl_decode_stats *st = r->st;
	const struct sl_ops_result *ops = r->ops;
	int64_t t0 = r->t0, t1 = r->t1;
	const struct sl_query_config *q = p->q;
	struct sl_progress pr = {.run_id = p->run_id, .name = q->name};
	const char *names[64];
	uint64_t counts[64];
	char src[4200], sink[128];

	*out = NULL;
	/*
	 * The phases are disjoint spans of [t0, now], each rounded down, so
	 * that they add up to at most triggerExecution: latestOffset the
	 * plan's apply, walCommit the rest of its durable commit, addBatch
	 * until the parts are written. commitOffsets is 0: the report rides
	 * the commit it would time.
	 */
	int64_t trigger_ms = ms_between(t0, mono_ns());
	pr.id = r->id[0] ? r->id : p->uuid;
	pr.timestamp_ms = p->ts_ms;
	pr.batch_id = p->batch;
	pr.num_input_rows = st->lines;
	/* Spark: rows over the time since the previous trigger started (none: 0) */
	pr.input_rows_per_s = p->prev_t0_ns && t0 > p->prev_t0_ns
				      ? (double)st->lines * 1e9 / (double)(t0 - p->prev_t0_ns)
				      : 0.0;
	pr.processed_rows_per_s = (double)st->lines * 1000.0 / (double)(trigger_ms > 0 ? trigger_ms : 1);
	pr.ms_latest_offset = ms_between(0, p->apply_ns);
	pr.ms_wal_commit = ms_between(t0 + p->apply_ns, t1);
	pr.ms_add_batch = ms_between(t1, t2);
	pr.ms_commit_offsets = 0;
	pr.ms_trigger = trigger_ms;
	pr.has_start = p->nodata || p->k > 0;
	pr.start = p->nodata ? p->k : p->k ? p->k - 1 : 0;
	pr.end = p->k;
	if (q->has_watermark && ops) {
		pr.has_event_time = true;
		pr.et_rows = ops->et.count > 0;
		pr.et_min_ms = ops->et.min_ms;
		pr.et_max_ms = ops->et.max_ms;
		pr.et_avg_ms = ops->et.count ? sl_watermark_stats_avg_ms(&ops->et) : 0;
		pr.et_wm_ms = ops->wm_ms;
	}
	if (ops) {
		pr.ops = ops->m;
		pr.nops = ops->nm;
	}
	snprintf(src, sizeof(src), "FileStreamSource[in/%s]", q->source.path.text);
	snprintf(sink, sizeof(sink), "FileSink[out/%s]", q->name);
	pr.source_desc = src;
	pr.sink_desc = sink;
	pr.num_output_rows = out_rows;
	pr.malformed = st->malformed;
	for (size_t c = 0; c < q->source.schema.n && pr.n_nulls < 64; c++) {
		if (!q->source.schema.cols[c].not_null)
			continue;
		names[pr.n_nulls] = q->source.schema.cols[c].name;
		counts[pr.n_nulls++] = c < st->ncols ? st->null_counts[c] : 0;
	}
	pr.null_names = names;
	pr.null_counts = counts;
	pr.backlog_files = r->bl.files;
	pr.backlog_bytes = r->bl.bytes;
	pr.skipped_age = sk->age;
	pr.skipped_seen = sk->seen;
	sl_render_progress(&pr, out, len);
}

/* ---- one query ---- */

/* Runs the operators over the decoded batch b, as of the state now. */
static int run_ops(struct sl_land *l, struct plan *p, struct sl_ops *ops, struct sl_batch *b,
		   const struct sl_batch **outb, struct sl_ops_result *res,
		   struct sl_engine_report *r)
{
	struct sl_txn *t;
	char err[256] = "";
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(l), &t)) == 0) {
		rc = sl_ops_process(ops, t, p->wm_ms, b, outb, res, err, sizeof(err));
		sl_txn_end(t);
	}
	if (rc == SL_EMALFORMED)
		snprintf(r->error, sizeof(r->error), "batch %" PRIu64 ": %s", p->batch, err);
	else if (rc)
		snprintf(r->error, sizeof(r->error), "batch %" PRIu64 ": cannot update the state: %s",
			 p->batch, sl_strerror(rc));
	return rc;
}

static int unlink_act(void *ctx, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sl_blob_unlink(sl_land_blobs(ctx), ids[i]);
	return 0;
}

/*
 * Bytes the batch's state changes may need in the catalog: each written row
 * at the state's mean size plus LMDB's cost per entry, twice over (pages
 * copied on write stay in the map until the commit).
 */
static size_t state_room(const struct sl_ops_result *res)
{
	size_t need = 0;
	for (size_t i = 0; i < res->nm; i++) {
		const struct sl_op_metrics *m = &res->m[i];
		uint64_t mean = m->rows_total ? m->bytes / m->rows_total : 0;
		need += (size_t)(m->rows_updated * (mean + 16));
	}
	return 2 * need;
}

/* Unlinks the blobs of replaced complete-mode parts ('g' intents), oldest first. */
static int gc_pending(struct sl_land *l, uint32_t qid)
{
	return each_intent(l, qid, 'g', unlink_act, l);
}

/* The operators' output rows are formatted: free them before the commit ends. */
static void ops_spent(void *ctx)
{
	sl_ops_trim(ctx);
}

/* Runs one batch: 1 when there was nothing to do, 0 when committed, or an error. */
static int run_batch(struct sl_land *l, struct plan *p, struct sl_decoder *dec,
		     struct sl_ops *ops, struct sl_batch *b, struct sl_decode_stats *st,
		     struct sl_engine_report *r)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	struct sl_ops_result res;
	const struct sl_batch *outb = b;
	int rc;

	int64_t t0 = mono_ns(), t1;
	p->ts_ms = wall_ns() / 1000000;
	if ((rc = sl_catalog_write(cat, plan_apply, p))) {
		snprintf(r->error, sizeof(r->error), "cannot plan a batch: %s", sl_strerror(rc));
		return rc;
	}
	if (p->n == 0 && !p->nodata)
		return 1;
	SL_FAULT("engine.after_offsets");
	t1 = mono_ns();
	sl_batch_clear(b);
	sl_decode_stats_reset(st);
	if ((rc = decode_all(l, p, dec, b, st, r)))
		return rc;
	if (ops && (rc = run_ops(l, p, ops, b, &outb, &res, r)))
		return rc;
	if (outb != b)
		sl_batch_trim(b, 1 << 16); /* the input rows are spent: free a big batch now */

	struct report rep = {.p = p, .st = st, .ops = ops ? &res : NULL, .t0 = t0, .t1 = t1};
	report_read(l, &rep);
	if (ops)
		sl_catalog_make_room(cat, state_room(&res) + (1 << 20));
	/* ids from here on stay unsettled until the commit: a crash leaves no leak */
	uint64_t pin = 0;
	if ((rc = sl_catalog_next_id(cat, &pin)) == 0 && sl_land_pin(l, pin))
		pin = 0; /* all pins taken: a crash now may leave this batch's blobs behind */
	struct sl_stage sg = {.l = l, .q = p->q, .batch = p->batch, .rows = outb,
			      .spent = ops ? ops_spent : NULL, .spent_ctx = ops};
	struct commit c = {.q = p->q, .p = p, .stage = &sg, .report = &rep,
			   .now = wall_ns(), .rows = st->lines, .ops = ops,
			   .next_wm = ops ? res.next_wm_ms : p->wm_ms,
			   .replace = p->q->output_mode == SL_OUTPUT_COMPLETE};
	if (rc == 0)
		rc = sl_catalog_next_id(cat, &c.outdir_id);
	bool started = false;
	if (rc == 0) {
		started = true;
		rc = sl_stage_start(&sg); /* on a thread of its own, or done by now */
	}
	if (rc == 0) {
		SL_FAULT("engine.before_commit");
		rc = sl_catalog_write(cat, commit_apply, &c);
		SL_FAULT("engine.after_commit");
	}
	if (started)
		sl_stage_end(&sg, rc == 0);
	if (ops)
		sl_ops_trim(ops);

	if (rc) {
		if (started && sg.format_failed)
			snprintf(r->error, sizeof(r->error), "cannot format batch %" PRIu64 ": %s",
				 p->batch, sl_strerror(rc));
		else
			snprintf(r->error, sizeof(r->error), "cannot commit batch %" PRIu64 ": %s",
				 p->batch, sl_strerror(rc));
	} else {
		r->batches++;
		r->rows += st->lines;
		r->malformed += st->malformed;
		/* the kernel may cache the replaced names for a day: tell it */
		for (size_t i = 0; i < c.ngone; i++)
			sl_land_changed(l, c.gone[i].parent, c.gone[i].name);
		if (c.ngone && (rc = gc_pending(l, p->qid)))
			snprintf(r->error, sizeof(r->error), "cannot remove the parts batch %" PRIu64
				 " replaced: %s", p->batch, sl_strerror(rc));
		if (rc == 0 && p->q->source.clean != SL_CLEAN_OFF &&
		    (rc = clean_pending(l, p->q, p->qid)))
			snprintf(r->error, sizeof(r->error), "cannot clean the sources of batch %" PRIu64
				 ": %s", p->batch, sl_strerror(rc));
	}
	if (pin)
		sl_land_unpin(l, pin);
	if (rc == 0)
		p->prev_t0_ns = t0;
	free(c.gone);
	free(c.progress);
	return rc;
}

/* Refuses a config the query's checkpoint cannot survive (SL_ECONFIG, err set). */
static int check_changes(struct sl_catalog *cat, const struct sl_query_config *q, uint32_t qid,
			 char *err, size_t errlen)
{
	struct sl_txn *t;
	const void *v;
	size_t len;
	int rc;

	if ((rc = sl_catalog_read(cat, &t)))
		return rc;
	rc = sl_engine_checkpoint_get(t, qid, 'd', 0, &v, &len);
	if (rc == 0) {
		rc = sl_compat_check(q, v, len, err, errlen);
		if (rc == SL_ECORRUPT || rc == SL_EVERSION)
			snprintf(err, errlen, "queries.%s: the checkpoint's config record is %s",
				 q->name, rc == SL_ECORRUPT ? "corrupt" : "from a newer version");
	} else if (rc == SL_NOTFOUND) {
		rc = 0;
	}
	sl_txn_end(t);
	return rc;
}

int sl_engine_check_changes(struct sl_land *l, const struct sl_config *cfg, char *err,
			    size_t errlen)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < sl_config_nqueries(cfg); k++) {
		const struct sl_query_config *q = sl_config_query(cfg, k);
		struct sl_txn *t;
		uint32_t qid;
		if ((rc = sl_catalog_read(cat, &t)))
			return rc;
		rc = sl_qindex_qid(t, q->name, &qid);
		sl_txn_end(t);
		if (rc == SL_NOTFOUND) {
			rc = 0; /* never started: nothing to survive */
			continue;
		}
		if (rc == 0)
			rc = check_changes(cat, q, qid, err, errlen);
	}
	return rc;
}

int sl_engine_run_query(struct sl_land *l, const struct sl_query_config *q,
			const struct sl_engine_limits *lim, struct sl_engine_report *r)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	struct plan p = {.q = q, .seq_limit = lim->seq_limit, .ignore_caps = lim->ignore_caps,
			 .stop = lim->stop};
	uint64_t done = 0;
	struct sl_decoder *dec = NULL;
	struct sl_ops *ops = NULL;
	struct sl_decode_stats st;
	struct sl_batch b;
	struct sl_txn *t;
	char *desc = NULL;
	int rc;

	rc = 0;
	if ((rc = sl_catalog_read(cat, &t)))
		return rc;
	rc = sl_qindex_qid(t, q->name, &p.qid);
	sl_txn_end(t);
	if (rc)
		return rc;
	/* cleanSource or a snapshot replace interrupted by a crash is redone first */
	bool ready = false;
	if ((rc = clean_pending(l, q, p.qid)) || (rc = gc_pending(l, p.qid))) {
		snprintf(r->error, sizeof(r->error), "cannot clean sources: %s", sl_strerror(rc));
		goto fail;
	}
	if (sl_ops_needed(q) && (rc = sl_ops_new(q, p.qid, &ops, r->error, sizeof(r->error)))) {
		if (rc != ENOTSUP)
			snprintf(r->error, sizeof(r->error), "cannot set up the operators: %s",
				 sl_strerror(rc));
		goto fail;
	}
	if ((rc = check_changes(cat, q, p.qid, r->error, sizeof(r->error))))
		goto fail;
	if ((rc = sl_compat_describe(q, &desc, &p.desc_len)))
		goto fail;
	p.desc = desc;
	make_uuid(p.uuid);
	make_uuid(p.run_id);
	if ((rc = sl_decoder_new(q, &dec)))
		goto fail;
	if ((rc = sl_batch_init(&b, &q->source.schema)))
		goto fail;
	if ((rc = sl_decode_stats_init(&st, q->source.schema.n))) {
		sl_batch_release(&b);
		goto fail;
	}
	ready = true;
	while ((!lim->max_batches || done < lim->max_batches) &&
	       !(lim->stop && *lim->stop) && (rc = run_batch(l, &p, dec, ops, &b, &st, r)) == 0)
		done++;
	if (rc == 1)
		rc = 0;
fail:
	if (rc) {
		/* lastError: kept until a batch of this query commits */
		if (!r->error[0])
			snprintf(r->error, sizeof(r->error), "%s", sl_strerror(rc));
		struct error_rec e = {.qid = p.qid, .text = r->error};
		sl_catalog_write(cat, error_apply, &e);
	}
	if (ready) {
		sl_decode_stats_release(&st);
		sl_batch_release(&b);
	}
	sl_decoder_free(dec);
	sl_ops_free(ops);
	free(desc);
	half_release(&p.half);
	free(p.files);
	free(p.skip);
	return rc;
}

int sl_engine_run_available_now(struct sl_land *l, const struct sl_config *cfg,
				sl_engine_report_fn fn, void *ctx)
{
	struct sl_txn *t;
	uint64_t seq_limit;
	int rc, first = 0;

	/* everything landed at start: the landing sequence now */
	if ((rc = sl_catalog_read(sl_land_catalog(l), &t)))
		return rc;
	rc = sl_txn_meta_get(t, "seq", &seq_limit);
	sl_txn_end(t);
	if (rc)
		return rc;
	for (size_t k = 0; k < sl_config_nqueries(cfg); k++) {
		const struct sl_query_config *q = sl_config_query(cfg, k);
		struct sl_engine_report r = {.query = q->name};
		struct sl_engine_limits lim = {.seq_limit = seq_limit};
		r.rc = sl_engine_run_query(l, q, &lim, &r);
		if (r.rc && !r.error[0])
			snprintf(r.error, sizeof(r.error), "%s", sl_strerror(r.rc));
		if (r.rc && !first)
			first = r.rc;
		if (fn)
			fn(&r, ctx);
	}
	return first;
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

struct each_entry {
	int (*fn)(void *ctx, uint64_t n, size_t len);
	void *ctx;
};

static int each_entry_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct each_entry *e = ctx;
	(void)val;
	if (klen != 13)
		return SL_ECORRUPT;
	return e->fn(e->ctx, get_be64((const unsigned char *)key + 5), vlen);
}

int sl_engine_checkpoint_each(struct sl_txn *t, uint32_t qid, char kind,
			      int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx)
{
	struct each_entry e = {.fn = fn, .ctx = ctx};
	unsigned char prefix[5];
	put_be32(prefix, qid);
	prefix[4] = (unsigned char)kind;
	return sl_txn_each(t, SL_TABLE_QLOG, prefix, 5, each_entry_cb, &e);
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
