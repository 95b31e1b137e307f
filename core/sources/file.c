/* SPDX-License-Identifier: MIT */
/*
 * The file source (source_file.h): planning a batch from the query's index
 * (landing order; maxFilesPerTrigger, maxBytesPerTrigger, latestFirst,
 * maxFileAge on either clock; the seen set and its purge; skip counts), its
 * log, and cleanSource. Reading is file_read.c.
 *
 * Its records in the checkpoint log (core/sources/qlog.h), integers in host
 * order:
 *   'b' batch N:   K u64 | batchTimestampMs i64 | count u64 | file ids u64...
 *                  (count 0: a no-data batch at the last end, K-1)
 *   's' sources/0/K: the rendered text, as Spark writes it
 *   'x' batch N's file ids, to clean after its commit (cleanSource)
 *   'f' n = a file id: what planning decided about that file (`sluice
 *       files`; struct sl_file_record), integers big-endian:
 *       OFFSET SIZE MEANING
 *       0      1    fate: enum sl_file_fate
 *       1      1    'a'/'d' cleanSource of a cleaned file; 'n' for a seen
 *                   skip keyed by name (fileNameOnly); else 0
 *       2      8    batch id (planned, cleaned), else 0
 *       10     8    the file's landing sequence number
 *       18     8    its size (bytes)
 *       26     8    its landing time (ns)
 *       34     8    its age clock (us) when planned or skipped
 *       42     8    skipped by age: newest planned minus maxFileAge (us)
 *       50     ...  its in/-relative path (no NUL)
 *       Written by the transaction that plans or skips the file; a commit
 *       with cleanSource rewrites it as cleaned. Never deleted (a history
 *       without retention yet, like Spark's source log).
 * meta: "q.<qid>.k" source log entries so far, "q.<qid>.maxts" newest age
 * clock planned (us).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "config.h"
#include "err.h"
#include "fault.h"
#include "file_int.h"
#include "land.h"
#include "qindex.h"
#include "qlog.h"
#include "source_file.h"
#include "strbuf.h"

#define qkey sl_qlog_meta_key

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
	f->seq = seq ? seq : i.seq; /* a replay knows only ids */
	f->size = i.size;
	f->landed_ms = i.landed_ns / 1000000;
	f->landed_ns = i.landed_ns;
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

/* ---- per-file records ('f') ---- */

#define FREC_FIXED 50

static int frec_put(struct sl_txn *t, uint32_t qid, const struct planned *f, char fate,
		    char flag, uint64_t batch, int64_t threshold_us)
{
	unsigned char v[FREC_FIXED + sizeof(f->path)];
	size_t n = strlen(f->path);
	v[0] = (unsigned char)fate;
	v[1] = (unsigned char)flag;
	put_be64(v + 2, batch);
	put_be64(v + 10, f->seq);
	put_be64(v + 18, f->size);
	put_be64(v + 26, (uint64_t)f->landed_ns);
	put_be64(v + 34, (uint64_t)f->clock_us);
	put_be64(v + 42, (uint64_t)threshold_us);
	memcpy(v + FREC_FIXED, f->path, n);
	return sl_qlog_put(t, qid, 'f', f->id, v, FREC_FIXED + n);
}

static int frec_decode(const unsigned char *v, size_t len, struct sl_file_record *out)
{
	if (len < FREC_FIXED || len - FREC_FIXED >= sizeof(out->path))
		return SL_ECORRUPT;
	out->fate = (char)v[0];
	out->clean = out->fate == SL_FATE_CLEANED ? (char)v[1] : 0;
	out->by_name = out->fate == SL_FATE_SKIP_SEEN && v[1] == 'n';
	out->batch = get_be64(v + 2);
	out->seq = get_be64(v + 10);
	out->size = get_be64(v + 18);
	out->landed_ns = (int64_t)get_be64(v + 26);
	out->clock_us = (int64_t)get_be64(v + 34);
	out->threshold_us = (int64_t)get_be64(v + 42);
	memcpy(out->path, v + FREC_FIXED, len - FREC_FIXED);
	out->path[len - FREC_FIXED] = 0;
	return 0;
}

int sl_file_record_get(struct sl_txn *t, uint32_t qid, uint64_t id, struct sl_file_record *out)
{
	const void *v;
	size_t len;
	int rc = sl_qlog_get(t, qid, 'f', id, &v, &len);
	return rc ? rc : frec_decode(v, len, out);
}

struct frec_each {
	struct sl_txn *t;
	uint32_t qid;
	int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r);
	void *ctx;
	struct sl_file_record r;
};

static int frec_each_cb(void *ctx, uint64_t id, size_t len)
{
	struct frec_each *e = ctx;
	int rc;
	(void)len;
	if ((rc = sl_file_record_get(e->t, e->qid, id, &e->r)))
		return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
	return e->fn(e->ctx, id, &e->r);
}

int sl_file_record_each(struct sl_txn *t, uint32_t qid,
			int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r),
			void *ctx)
{
	struct frec_each *e = malloc(sizeof(*e));
	int rc;

	if (!e)
		return ENOMEM;
	*e = (struct frec_each){.t = t, .qid = qid, .fn = fn, .ctx = ctx};
	rc = sl_qlog_each(t, qid, 'f', frec_each_cb, e);
	free(e);
	return rc;
}

static bool in_batch(const struct sl_source *p, const struct seen_key *k)
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
	struct sl_source *p = ctx;
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

static void log_offset(char *buf, size_t len, uint64_t k)
{
	snprintf(buf, len, "{\"logOffset\":%" PRIu64 "}", k);
}

/* Batch N's files from its record (a replay). */
static int file_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
		       struct sl_source_range *r)
{
	const unsigned char *v;
	const void *vv;
	size_t len;
	uint64_t count;
	int rc;

	p->n = p->nskip = 0;
	p->total_bytes = 0;
	if ((rc = sl_qlog_get(t, p->qid, 'b', batch, &vv, &len)))
		return rc;
	v = vv;
	if (len < 24)
		return SL_ECORRUPT;
	memcpy(&p->k, v, 8);
	memcpy(&r->ts_ms, v + 8, 8);
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
	r->replay = true;
	r->nparts = p->n;
	/* a no-data batch repeats the last end; a batch of files follows it */
	if (count == 0)
		log_offset(r->start, sizeof(r->start), p->k);
	else if (p->k > 0)
		log_offset(r->start, sizeof(r->start), p->k - 1);
	else
		r->start[0] = 0;
	log_offset(r->end, sizeof(r->end), p->k);
	return 0;
}

static int file_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	unsigned char prefix[4];
	char key[48];
	uint64_t k;
	int rc;

	p->n = p->nskip = 0;
	p->total_bytes = 0;
	p->t = t;
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
	int64_t threshold = (int64_t)p->maxts - p->q->source.max_file_age_us;
	for (size_t i = 0; i < p->nskip; i++) {
		const struct planned *f = &p->skip[i];
		if ((rc = sl_qindex_skip(t, p->qid, f->seq, f->id, f->size,
					 f->seen ? SL_SKIP_SEEN : SL_SKIP_AGE)) ||
		    (rc = frec_put(t, p->qid, f, f->seen ? SL_FATE_SKIP_SEEN : SL_FATE_SKIP_AGE,
				   f->seen && p->q->source.file_name_only ? 'n' : 0, 0,
				   f->seen ? 0 : threshold)))
			return rc;
	}
	qkey(key, sizeof(key), p->qid, "k");
	if ((rc = sl_txn_meta_get(t, key, &k)))
		return rc;
	r->replay = false;
	r->nparts = p->n;
	if (k > 0)
		log_offset(r->start, sizeof(r->start), k - 1);
	else
		r->start[0] = 0;
	if (p->n)
		log_offset(r->end, sizeof(r->end), k);
	else
		memcpy(r->end, r->start, sizeof(r->end));
	return 0;
}

/* A no-data batch: a record with no files, at the last end K-1. */
static int log_nodata(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		      struct sl_source_range *r)
{
	char key[48];
	uint64_t k;
	int rc;

	qkey(key, sizeof(key), p->qid, "k");
	if ((rc = sl_txn_meta_get(t, key, &k)))
		return rc;
	if (k == 0)
		return EINVAL; /* no end to repeat: latest_offset() said so */
	p->k = k - 1;
	unsigned char rec[24];
	uint64_t count = 0;
	memcpy(rec, &p->k, 8);
	memcpy(rec + 8, &ts_ms, 8);
	memcpy(rec + 16, &count, 8);
	log_offset(r->start, sizeof(r->start), p->k);
	log_offset(r->end, sizeof(r->end), p->k);
	return sl_qlog_put(t, p->qid, 'b', batch, rec, sizeof(rec));
}

static int file_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		    struct sl_source_range *r)
{
	char key[48];
	int rc;

	if (p->n == 0)
		return log_nodata(p, t, batch, ts_ms, r);
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
	memcpy(rec + 8, &ts_ms, 8);
	uint64_t count = p->n;
	memcpy(rec + 16, &count, 8);
	struct sl_strbuf src = {0};
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
		if ((rc = sl_qindex_unindex(t, p->qid, f->seq, f->id, f->size, false)) ||
		    (rc = frec_put(t, p->qid, f, SL_FATE_PLANNED, 0, batch, 0)))
			break;
	}
	rc = rc ? rc : src.oom ? ENOMEM : 0;
	if (rc == 0)
		rc = sl_qlog_put(t, p->qid, 'b', batch, rec, 24 + p->n * 8);
	if (rc == 0)
		rc = sl_qlog_put(t, p->qid, 's', p->k, src.p, src.len);
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
		if (p->k > 0)
			log_offset(r->start, sizeof(r->start), p->k - 1);
		else
			r->start[0] = 0;
		log_offset(r->end, sizeof(r->end), p->k);
	}
	free(rec);
	sl_strbuf_release(&src);
	return rc;
}

static int file_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			struct sl_source_backlog *out)
{
	struct sl_backlog bl = {0};
	int rc = sl_qindex_backlog(t, q->name, &bl);

	(void)qid;
	*out = (struct sl_source_backlog){.known = true, .unit = {"files", "bytes"},
					  .v = {bl.files, bl.bytes}};
	return rc == SL_NOTFOUND ? 0 : rc;
}

static int file_commit_txn(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			   struct sl_source_metrics *m)
{
	int rc;

	for (size_t i = 0; i < p->n; i++)
		if ((rc = sl_qindex_release(t, p->qid, p->files[i].id)))
			return rc;
	/* cleanSource intents, carried out right after this commit */
	if (p->q->source.clean != SL_CLEAN_OFF && p->n) {
		uint64_t *ids = malloc(p->n * 8);
		if (!ids)
			return ENOMEM;
		for (size_t i = 0; i < p->n; i++)
			ids[i] = p->files[i].id;
		rc = sl_qlog_put(t, p->qid, 'x', batch, ids, p->n * 8);
		free(ids);
		char how = p->q->source.clean == SL_CLEAN_ARCHIVE ? 'a' : 'd';
		for (size_t i = 0; rc == 0 && i < p->n; i++)
			rc = frec_put(t, p->qid, &p->files[i], SL_FATE_CLEANED, how, batch, 0);
		if (rc)
			return rc;
	}
	/* the log keeps the last 100 batches and entries (Spark's minBatchesToRetain) */
	if (batch >= 100 && (rc = sl_qlog_del(t, p->qid, 'b', batch - 100)))
		return rc;
	if (p->k >= 100 && (rc = sl_qlog_del(t, p->qid, 's', p->k - 100)))
		return rc;
	struct sl_skips sk;
	if ((rc = sl_qindex_skips(t, p->qid, true, &sk)))
		return rc;
	m->skipped_age = sk.age;
	m->skipped_seen = sk.seen;
	return 0;
}

/* ---- cleanSource ---- */

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

/*
 * cleanSource: the query's intents, carried out right after each commit,
 * and at start (where intents of a cleanSource turned off since are dropped).
 */
static int file_commit(struct sl_source *p)
{
	struct clean_ctx c = {.l = p->l, .q = p->q};
	if (p->started && p->q->source.clean == SL_CLEAN_OFF)
		return 0;
	p->started = true;
	return sl_qlog_each_intent(sl_land_catalog(p->l), p->qid, 'x', clean_act, &c);
}

static void file_describe(const struct sl_source *p, char *buf, size_t len)
{
	snprintf(buf, len, "FileStreamSource[in/%s]", p->q->source.path.text);
}

static int file_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->qid = a->qid;
	p->seq_limit = a->seq_limit;
	p->ignore_caps = a->ignore_caps;
	if ((rc = sl_decoder_new(a->q, &p->dec))) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void file_stop(struct sl_source *p)
{
	if (!p)
		return;
	sl_decoder_free(p->dec);
	sl_file_half_release(&p->half);
	free(p->files);
	free(p->skip);
	free(p);
}

const struct sl_source_ops sl_source_file = {
	.name = "file",
	.replayable = true,
	.open = file_open,
	.replay = file_replay,
	.latest_offset = file_latest_offset,
	.log = file_log,
	.read = sl_file_read,
	.pending = file_pending,
	.commit_txn = file_commit_txn,
	.commit = file_commit,
	.describe = file_describe,
	.stop = file_stop,
};
