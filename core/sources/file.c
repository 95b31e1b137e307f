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
 *   'f' n = a file id: the live record of a file planned or skipped and
 *       still landed (`sluice files`; struct sl_file_record), integers
 *       big-endian:
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
 *       Written by the transaction that plans or skips the file. The record
 *       of a file gone from in/ (cleaned by cleanSource, or removed since)
 *       moves into the history's segments ('H', file_hist.c), kept
 *       fileHistory. (Format 1 catalogs kept every record here; their
 *       upgrade moves those of cleaned files.)
 * meta: "q.<qid>.k" source log entries so far, "q.<qid>.maxts" newest age
 * clock planned (us); the seen set's "q.<qid>.purged", "q.<qid>.sweep0/1";
 * the live records' sweep "q.<qid>.fsweep".
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
#include "siphash.h"
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
 * The seen set (Spark's SeenFilesMap), catalog format 2: qseen key qid u32
 * | 0x00 | SipHash-128 of the seen key (the in/-relative path, or its last
 * component with fileNameOnly) under the catalog's random hash key (meta
 * "seen_k0", "seen_k1"), value the age clock i64. The random key makes a
 * collision a 2^-128 chance that no uploader can improve on: the digest
 * stands for the path, which the set no longer stores. Spark's purge is
 * the threshold "q.<qid>.purged" (biased by 2^63): an entry older counts
 * as gone at once; the entries it drops are deleted by a sweep in key
 * order that visits a bounded number per batch ("q.<qid>.sweep": the
 * digest where it stopped).
 */
#define SWEEP_MIN 256

void sl_file_seen_key(const uint8_t hk[16], uint32_t qid, const char *text, size_t tlen,
		      unsigned char out[SL_SEEN_KEY_LEN])
{
	put_be32(out, qid);
	out[4] = 0x00;
	sl_siphash(hk, text, tlen, out + 5, 16);
}

static void seen_key(const struct sl_source *p, const char *path, unsigned char *out)
{
	const char *key = path;
	if (p->q->source.file_name_only) {
		const char *slash = strrchr(path, '/');
		key = slash ? slash + 1 : path;
	}
	sl_file_seen_key(p->seen_hash, p->qid, key, strlen(key), out);
}

static uint64_t biased(int64_t clock)
{
	return (uint64_t)clock + (1ull << 63);
}

/* Whether key is in the seen set: present, and not older than the last purge. */
static bool seen_has(struct sl_txn *t, const struct sl_source *p, const unsigned char *k)
{
	const void *v;
	size_t len;
	int64_t clock;
	if (sl_txn_get(t, SL_TABLE_QSEEN, k, SL_SEEN_KEY_LEN, &v, &len) || len != 8)
		return false;
	memcpy(&clock, v, 8);
	return biased(clock) >= p->purged;
}

static int seen_add(struct sl_txn *t, const unsigned char *k, int64_t clock)
{
	return sl_txn_put(t, SL_TABLE_QSEEN, k, SL_SEEN_KEY_LEN, &clock, 8);
}

struct sweep {
	uint64_t purged;
	size_t budget, visited;
	unsigned char (*gone)[SL_SEEN_KEY_LEN];
	size_t n;
	unsigned char last[SL_SEEN_KEY_LEN];
	int err;
};

static int sweep_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct sweep *sw = ctx;
	int64_t clock;
	if (klen != SL_SEEN_KEY_LEN || vlen != 8)
		return SL_ECORRUPT;
	if (sw->visited == sw->budget)
		return 1;
	sw->visited++;
	memcpy(sw->last, key, klen);
	memcpy(&clock, val, 8);
	if (biased(clock) < sw->purged)
		memcpy(sw->gone[sw->n++], key, klen);
	return 0;
}

/*
 * Spark's purge: seen entries older than threshold count as gone from now
 * on; then the sweep deletes up to budget of them, from where it stopped.
 */
static int seen_purge(struct sl_txn *t, struct sl_source *p, int64_t threshold, size_t budget)
{
	struct sweep sw = {.purged = biased(threshold), .budget = budget};
	unsigned char prefix[5], from[SL_SEEN_KEY_LEN];
	uint64_t cursor[2] = {0, 0};
	char key[48];
	int rc;

	qkey(key, sizeof(key), p->qid, "purged");
	if (sw.purged < p->purged)
		sw.purged = p->purged; /* a purge never brings entries back */
	if ((rc = sl_txn_meta_put(t, key, sw.purged)))
		return rc;
	p->purged = sw.purged;
	put_be32(prefix, p->qid);
	prefix[4] = 0x00;
	memcpy(from, prefix, 5);
	qkey(key, sizeof(key), p->qid, "sweep0");
	if ((rc = sl_txn_meta_get(t, key, &cursor[0])))
		return rc;
	qkey(key, sizeof(key), p->qid, "sweep1");
	if ((rc = sl_txn_meta_get(t, key, &cursor[1])))
		return rc;
	put_be64(from + 5, cursor[0]);
	put_be64(from + 13, cursor[1]);
	if (!(sw.gone = malloc(budget * sizeof(*sw.gone))))
		return ENOMEM;
	rc = sl_txn_each_from(t, SL_TABLE_QSEEN, prefix, 5, from, SL_SEEN_KEY_LEN, sweep_each, &sw);
	bool wrapped = rc == 0; /* reached the end: the next sweep starts over */
	if (rc == 1)
		rc = 0;
	for (size_t i = 0; rc == 0 && i < sw.n; i++)
		rc = sl_txn_del(t, SL_TABLE_QSEEN, sw.gone[i], SL_SEEN_KEY_LEN);
	free(sw.gone);
	if (rc)
		return rc;
	/* the next sweep starts just after the last key visited */
	uint64_t c0 = 0, c1 = 0;
	if (!wrapped && sw.visited) {
		c0 = get_be64(sw.last + 5);
		c1 = get_be64(sw.last + 13) + 1;
		if (c1 == 0)
			c0++;
	}
	qkey(key, sizeof(key), p->qid, "sweep0");
	if ((rc = sl_txn_meta_put(t, key, c0)))
		return rc;
	qkey(key, sizeof(key), p->qid, "sweep1");
	return sl_txn_meta_put(t, key, c1);
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

/* f's record, as planning or a commit settles it. */
static void frec_of(const struct planned *f, char fate, char flag, uint64_t batch,
		    int64_t threshold_us, struct sl_file_record *out)
{
	out->fate = fate;
	out->clean = fate == SL_FATE_CLEANED ? flag : 0;
	out->by_name = fate == SL_FATE_SKIP_SEEN && flag == 'n';
	out->batch = batch;
	out->seq = f->seq;
	out->size = f->size;
	out->landed_ns = f->landed_ns;
	out->clock_us = f->clock_us;
	out->threshold_us = threshold_us;
	snprintf(out->path, sizeof(out->path), "%s", f->path);
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
	return rc ? rc : sl_hist_each(t, qid, fn, ctx);
}

static bool in_batch(const struct sl_source *p, const unsigned char *k)
{
	for (size_t i = 0; i < p->n; i++)
		if (!memcmp(p->files[i].seen_key, k, SL_SEEN_KEY_LEN))
			return true;
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
	seen_key(p, tmp.path, tmp.seen_key);
	bool seen = seen_has(p->t, p, tmp.seen_key) || in_batch(p, tmp.seen_key);
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
	qkey(key, sizeof(key), p->qid, "purged");
	if ((rc = sl_txn_meta_get(t, key, &p->purged)))
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
		rc = sl_qlog_put_packed(t, p->qid, 's', p->k, src.p, src.len);
	for (size_t i = 0; rc == 0 && i < p->n; i++)
		rc = seen_add(t, p->files[i].seen_key, p->files[i].clock_us);
	/* with latestFirst and a cap Spark never purges: maxFileAge is off */
	const struct sl_source_config *sc = &p->q->source;
	if (rc == 0 && !(sc->latest_first && (sc->max_files || sc->max_bytes)))
		rc = seen_purge(t, p, (int64_t)maxts - sc->max_file_age_us, 2 * p->n + SWEEP_MIN);
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

static int history_upkeep(struct sl_txn *t, struct sl_source *p, size_t budget);

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
		/* settled: the live records go into the history */
		char how = p->q->source.clean == SL_CLEAN_ARCHIVE ? 'a' : 'd';
		struct sl_hist h = {0};
		for (size_t i = 0; rc == 0 && i < p->n; i++) {
			frec_of(&p->files[i], SL_FATE_CLEANED, how, batch, 0, &p->rec);
			sl_hist_add(&h, p->files[i].id, &p->rec);
			rc = sl_qlog_del(t, p->qid, 'f', p->files[i].id);
		}
		if (rc == 0)
			rc = sl_hist_flush(t, p->qid, &h, sl_hist_now_ms());
		sl_hist_release(&h);
		if (rc)
			return rc;
	}
	if ((rc = history_upkeep(t, p, 2 * p->n + SWEEP_MIN)))
		return rc;
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

/*
 * The history's upkeep at each commit: segments older than fileHistory go,
 * and live records of files removed since (by a user, without cleanSource)
 * move into the history, up to budget visited per commit from where the
 * last visit stopped ("q.<qid>.fsweep": the next file id).
 */
struct live_sweep {
	struct sl_txn *t;
	size_t budget, visited;
	uint64_t *gone, next;
	size_t n;
};

static int live_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct live_sweep *ls = ctx;
	struct sl_inode i;
	int rc;

	(void)val, (void)vlen;
	if (klen != 13)
		return SL_ECORRUPT;
	if (ls->visited == ls->budget)
		return 1;
	ls->visited++;
	uint64_t id = get_be64((const unsigned char *)key + 5);
	ls->next = id + 1;
	rc = sl_txn_inode_get(ls->t, id, &i);
	if (rc == SL_NOTFOUND)
		ls->gone[ls->n++] = id;
	else if (rc)
		return rc;
	return 0;
}

static int history_upkeep(struct sl_txn *t, struct sl_source *p, size_t budget)
{
	int64_t now_ms = sl_hist_now_ms();
	struct live_sweep ls = {.t = t, .budget = budget};
	unsigned char prefix[5], from[13];
	uint64_t cursor;
	char key[48];
	int rc;

	if ((rc = sl_hist_prune(t, p->qid, now_ms - p->q->source.file_history_us / 1000)))
		return rc;
	qkey(key, sizeof(key), p->qid, "fsweep");
	if ((rc = sl_txn_meta_get(t, key, &cursor)))
		return rc;
	put_be32(prefix, p->qid);
	prefix[4] = 'f';
	memcpy(from, prefix, 5);
	put_be64(from + 5, cursor);
	if (!(ls.gone = malloc(budget * sizeof(*ls.gone))))
		return ENOMEM;
	rc = sl_txn_each_from(t, SL_TABLE_QLOG, prefix, 5, from, sizeof(from), live_each, &ls);
	if (rc == 0)
		ls.next = 0; /* reached the end: the next visit starts over */
	else if (rc == 1)
		rc = 0;
	struct sl_hist h = {0};
	for (size_t i = 0; rc == 0 && i < ls.n; i++) {
		if ((rc = sl_file_record_get(t, p->qid, ls.gone[i], &p->rec)))
			break;
		sl_hist_add(&h, ls.gone[i], &p->rec);
		rc = sl_qlog_del(t, p->qid, 'f', ls.gone[i]);
	}
	if (rc == 0)
		rc = sl_hist_flush(t, p->qid, &h, now_ms);
	sl_hist_release(&h);
	free(ls.gone);
	return rc ? rc : sl_txn_meta_put(t, key, ls.next);
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
	if ((rc = sl_file_upgrade(sl_land_catalog(a->l), p->seen_hash)) ||
	    (rc = sl_decoder_new(a->q, &p->dec))) {
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
