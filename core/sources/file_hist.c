/* SPDX-License-Identifier: MIT */
/*
 * The file source's per-file history (`sluice files`) and the catalog's
 * upgrade to format 2 (core/store/catalog.h).
 *
 * A file's record (struct sl_file_record) lives in one of two places:
 *   'f' n = file id  the live record of a file planned or skipped and
 *                    still landed (file.c's layout)
 *   'H' n = segment  records of files gone from in/ (cleaned by
 *                    cleanSource, or removed since), which will not change
 *                    again, written together by the transaction that
 *                    settles them:
 *       OFFSET SIZE MEANING
 *       0      1    segment layout (1)
 *       1      8    written at, ms since the epoch (big-endian)
 *       9      4    records (big-endian)
 *       13     4    bytes of the records before compression (big-endian)
 *       17     ...  the records, zstd-compressed, one after another:
 *                   varint id | fate u8 | flag u8 | varint batch | varint seq |
 *                   varint size | varint landed ns | zigzag varint (age clock
 *                   us - landed us) | zigzag varint threshold us |
 *                   varint path length | path
 * A segment goes whole once it is older than the query's fileHistory
 * (oldest first: segments are numbered in the order they were written,
 * meta "q.<qid>.hseg" the next number). Compressed together, a record
 * costs far less than its path: what a processed and cleaned file leaves in
 * the catalog is bounded by time, not by the number of files.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bytes.h"
#include "catalog.h"
#include "codec.h"
#include "err.h"
#include "file_int.h"
#include "log.h"
#include "qlog.h"
#include "source_file.h"

#define SEG_LAYOUT 1
#define SEG_HDR 17
#define SEG_RECORDS_MAX 65536 /* records per segment written by the upgrade */
#define SEG_RAW_MAX (256u << 20)

/* ---- varints ---- */

static void put_varint(struct sl_strbuf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;
	while (v >= 0x80) {
		t[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (unsigned char)v;
	sl_strbuf_add(b, (const char *)t, n);
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

struct reader {
	const unsigned char *p, *end;
	bool bad;
};

static uint64_t get_varint(struct reader *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		unsigned char c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static unsigned char get_u8(struct reader *r)
{
	if (r->p >= r->end) {
		r->bad = true;
		return 0;
	}
	return *r->p++;
}

/* ---- segments ---- */

void sl_hist_add(struct sl_hist *h, uint64_t id, const struct sl_file_record *r)
{
	size_t n = strlen(r->path);
	char flag = r->fate == SL_FATE_CLEANED ? r->clean : r->by_name ? 'n' : 0;

	put_varint(&h->raw, id);
	sl_strbuf_addc(&h->raw, r->fate);
	sl_strbuf_addc(&h->raw, flag);
	put_varint(&h->raw, r->batch);
	put_varint(&h->raw, r->seq);
	put_varint(&h->raw, r->size);
	put_varint(&h->raw, (uint64_t)r->landed_ns);
	put_varint(&h->raw, zigzag(r->clock_us - r->landed_ns / 1000));
	put_varint(&h->raw, zigzag(r->threshold_us));
	put_varint(&h->raw, n);
	sl_strbuf_add(&h->raw, r->path, n);
	h->count++;
}

int64_t sl_hist_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sl_hist_flush(struct sl_txn *t, uint32_t qid, struct sl_hist *h, int64_t now_ms)
{
	char key[48];
	uint64_t seg;
	void *z = NULL;
	size_t zlen;
	int rc;

	if (h->raw.oom)
		return ENOMEM;
	if (h->count == 0)
		return 0;
	if (h->raw.len > SEG_RAW_MAX)
		return E2BIG;
	if ((rc = sl_codec_compress(h->raw.p, h->raw.len, 3, &z, &zlen)))
		return rc;
	unsigned char *v = malloc(SEG_HDR + zlen);
	if (!v) {
		free(z);
		return ENOMEM;
	}
	v[0] = SEG_LAYOUT;
	put_be64(v + 1, (uint64_t)now_ms);
	put_be32(v + 9, h->count);
	put_be32(v + 13, (uint32_t)h->raw.len);
	memcpy(v + SEG_HDR, z, zlen);
	free(z);
	sl_qlog_meta_key(key, sizeof(key), qid, "hseg");
	rc = sl_txn_meta_get(t, key, &seg);
	if (rc == 0)
		rc = sl_qlog_put(t, qid, 'H', seg, v, SEG_HDR + zlen);
	if (rc == 0)
		rc = sl_txn_meta_put(t, key, seg + 1);
	free(v);
	h->raw.len = 0;
	h->count = 0;
	return rc;
}

void sl_hist_release(struct sl_hist *h)
{
	sl_strbuf_release(&h->raw);
	h->count = 0;
}

struct prune {
	struct sl_txn *t;
	uint32_t qid;
	int64_t before_ms;
	uint64_t *segs;
	size_t n, cap;
};

static int prune_each(void *ctx, uint64_t n, size_t len)
{
	struct prune *pr = ctx;
	const void *v;
	size_t vlen;
	int rc;

	(void)len;
	if ((rc = sl_qlog_get(pr->t, pr->qid, 'H', n, &v, &vlen)))
		return rc;
	if (vlen < SEG_HDR)
		return SL_ECORRUPT;
	if ((int64_t)get_be64((const unsigned char *)v + 1) >= pr->before_ms)
		return 1; /* this and every later segment are younger */
	if (pr->n == pr->cap) {
		size_t c = pr->cap ? pr->cap * 2 : 16;
		uint64_t *s = realloc(pr->segs, c * sizeof(*s));
		if (!s)
			return ENOMEM;
		pr->segs = s;
		pr->cap = c;
	}
	pr->segs[pr->n++] = n;
	return 0;
}

int sl_hist_prune(struct sl_txn *t, uint32_t qid, int64_t before_ms)
{
	struct prune pr = {.t = t, .qid = qid, .before_ms = before_ms};
	int rc = sl_qlog_each(t, qid, 'H', prune_each, &pr);

	if (rc == 1)
		rc = 0;
	for (size_t i = 0; rc == 0 && i < pr.n; i++)
		rc = sl_qlog_del(t, qid, 'H', pr.segs[i]);
	free(pr.segs);
	return rc;
}

struct hist_each {
	struct sl_txn *t;
	uint32_t qid;
	int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r);
	void *ctx;
	struct sl_file_record r;
};

static int segment_each(void *ctx, uint64_t n, size_t len)
{
	struct hist_each *e = ctx;
	const unsigned char *v;
	const void *vv;
	size_t vlen, rawlen;
	void *raw = NULL;
	int rc;

	(void)len;
	if ((rc = sl_qlog_get(e->t, e->qid, 'H', n, &vv, &vlen)))
		return rc;
	v = vv;
	if (vlen < SEG_HDR || v[0] != SEG_LAYOUT)
		return SL_ECORRUPT;
	uint32_t count = get_be32(v + 9), want = get_be32(v + 13);
	if ((rc = sl_codec_decompress(v + SEG_HDR, vlen - SEG_HDR, want, &raw, &rawlen)))
		return rc == SL_EMALFORMED ? SL_ECORRUPT : rc;
	struct reader r = {raw, (const unsigned char *)raw + rawlen, rawlen != want};
	for (uint32_t i = 0; rc == 0 && i < count && !r.bad; i++) {
		struct sl_file_record *f = &e->r;
		uint64_t id = get_varint(&r);
		char flag;
		f->fate = (char)get_u8(&r);
		flag = (char)get_u8(&r);
		f->clean = f->fate == SL_FATE_CLEANED ? flag : 0;
		f->by_name = f->fate == SL_FATE_SKIP_SEEN && flag == 'n';
		f->batch = get_varint(&r);
		f->seq = get_varint(&r);
		f->size = get_varint(&r);
		f->landed_ns = (int64_t)get_varint(&r);
		f->clock_us = unzigzag(get_varint(&r)) + f->landed_ns / 1000;
		f->threshold_us = unzigzag(get_varint(&r));
		uint64_t plen = get_varint(&r);
		if (r.bad || plen >= sizeof(f->path) || plen > (size_t)(r.end - r.p)) {
			r.bad = true;
			break;
		}
		memcpy(f->path, r.p, plen);
		f->path[plen] = 0;
		r.p += plen;
		rc = e->fn(e->ctx, id, f);
	}
	free(raw);
	if (rc)
		return rc;
	return r.bad || r.p != r.end ? SL_ECORRUPT : 0;
}

int sl_hist_each(struct sl_txn *t, uint32_t qid,
		 int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r), void *ctx)
{
	struct hist_each *e = malloc(sizeof(*e));
	int rc;

	if (!e)
		return ENOMEM;
	*e = (struct hist_each){.t = t, .qid = qid, .fn = fn, .ctx = ctx};
	rc = sl_qlog_each(t, qid, 'H', segment_each, e);
	free(e);
	return rc;
}

/* ---- the upgrade to catalog format 2 ---- */

/*
 * Format 1 kept the seen set as qseen qid | key text (or 0xff | a 128-bit
 * FNV pair, the text in the value after the clock) -> clock, with qseents
 * beside it, and every record as a live 'f' record. The upgrade rehashes
 * the seen set under the new key and moves the records of cleaned files
 * into segments (written now: they are kept fileHistory from now); the
 * records of files removed otherwise move at the next commits' sweeps.
 */
struct upgrade {
	uint8_t *key;              /* the new seen-set key; the stored one when there is one */
	struct sl_txn *t;
	/* old seen entries */
	unsigned char (*newk)[SL_SEEN_KEY_LEN];
	int64_t *clock;
	unsigned char **oldk;
	size_t *oldlen;
	size_t n, cap;
	/* settled 'f' records */
	uint32_t *qid;
	uint64_t *id;
	size_t nf, capf;
	int err;
};

static int old_seen_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct upgrade *u = ctx;
	const unsigned char *k = key;
	const char *text;
	size_t tlen;

	if (klen < 5 || vlen < 8)
		return SL_ECORRUPT;
	if (k[4] == 0x00)
		return 0; /* already in the new layout */
	if (k[4] == 0xff && klen == 21) {
		text = (const char *)val + 8;
		tlen = vlen - 8;
	} else {
		text = (const char *)k + 4;
		tlen = klen - 4;
	}
	if (u->n == u->cap) {
		size_t c = u->cap ? u->cap * 2 : 256;
		void *a = realloc(u->newk, c * sizeof(*u->newk));
		if (a)
			u->newk = a;
		void *b = a ? realloc(u->clock, c * sizeof(*u->clock)) : NULL;
		if (b)
			u->clock = b;
		void *d = b ? realloc(u->oldk, c * sizeof(*u->oldk)) : NULL;
		if (d)
			u->oldk = d;
		void *e = d ? realloc(u->oldlen, c * sizeof(*u->oldlen)) : NULL;
		if (!e)
			return ENOMEM;
		u->oldlen = e;
		u->cap = c;
	}
	size_t i = u->n;
	if (!(u->oldk[i] = malloc(klen)))
		return ENOMEM;
	memcpy(u->oldk[i], key, klen);
	u->oldlen[i] = klen;
	memcpy(&u->clock[i], val, 8);
	sl_file_seen_key(u->key, get_be32(k), text, tlen, u->newk[i]);
	u->n++;
	return 0;
}

static int old_seents_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct upgrade *u = ctx;
	(void)val, (void)vlen;
	if (u->n == u->cap) {
		size_t c = u->cap ? u->cap * 2 : 256;
		unsigned char **a = realloc(u->oldk, c * sizeof(*u->oldk));
		size_t *b = a ? realloc(u->oldlen, c * sizeof(*u->oldlen)) : NULL;
		if (a)
			u->oldk = a;
		if (!b)
			return ENOMEM;
		u->oldlen = b;
		u->cap = c;
	}
	if (!(u->oldk[u->n] = malloc(klen)))
		return ENOMEM;
	memcpy(u->oldk[u->n], key, klen);
	u->oldlen[u->n++] = klen;
	return 0;
}

static int old_frec_each(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct upgrade *u = ctx;
	const unsigned char *k = key;

	if (klen != 13 || k[4] != 'f' || vlen < 1)
		return 0;
	if (*(const char *)val != SL_FATE_CLEANED)
		return 0; /* live, or moved by a sweep once its file is gone */
	if (u->nf == u->capf) {
		size_t c = u->capf ? u->capf * 2 : 256;
		uint32_t *a = realloc(u->qid, c * sizeof(*u->qid));
		uint64_t *b = a ? realloc(u->id, c * sizeof(*u->id)) : NULL;
		if (a)
			u->qid = a;
		if (!b)
			return ENOMEM;
		u->id = b;
		u->capf = c;
	}
	u->qid[u->nf] = get_be32(k);
	u->id[u->nf++] = get_be64(k + 5);
	return 0;
}

static void upgrade_reset(struct upgrade *u)
{
	for (size_t i = 0; i < u->n; i++)
		free(u->oldk[i]);
	u->n = 0;
}

static void upgrade_release(struct upgrade *u)
{
	upgrade_reset(u);
	free(u->newk);
	free(u->clock);
	free(u->oldk);
	free(u->oldlen);
	free(u->qid);
	free(u->id);
}

/* Moves the settled 'f' records (u->qid/id, in key order) into segments. */
static int move_settled(struct upgrade *u, int64_t now_ms)
{
	struct sl_hist h = {0};
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < u->nf; i++) {
		struct sl_file_record r;
		if ((rc = sl_file_record_get(u->t, u->qid[i], u->id[i], &r)))
			break;
		sl_hist_add(&h, u->id[i], &r);
		if ((rc = sl_qlog_del(u->t, u->qid[i], 'f', u->id[i])))
			break;
		bool last = i + 1 == u->nf || u->qid[i + 1] != u->qid[i];
		if (last || h.count >= SEG_RECORDS_MAX)
			rc = sl_hist_flush(u->t, u->qid[i], &h, now_ms);
	}
	sl_hist_release(&h);
	return rc;
}

static int upgrade_apply(struct sl_txn *t, void *arg)
{
	struct upgrade *u = arg;
	uint64_t fmt, k0, k1;
	int rc;

	upgrade_reset(u);
	u->nf = 0;
	u->t = t;
	if ((rc = sl_txn_meta_get(t, "format", &fmt)) ||
	    (rc = sl_txn_meta_get(t, "seen_k0", &k0)) || (rc = sl_txn_meta_get(t, "seen_k1", &k1)))
		return rc;
	if (k0 == 0 && k1 == 0) {
		memcpy(&k0, u->key, 8);
		memcpy(&k1, u->key + 8, 8);
		if ((rc = sl_txn_meta_put(t, "seen_k0", k0)) ||
		    (rc = sl_txn_meta_put(t, "seen_k1", k1)))
			return rc;
	} else {
		/* a key made by an earlier start: the one to hash with */
		memcpy(u->key, &k0, 8);
		memcpy(u->key + 8, &k1, 8);
	}
	if (fmt >= 2)
		return 0;
	/* the seen set, rehashed */
	if ((rc = sl_txn_each(t, SL_TABLE_QSEEN, NULL, 0, old_seen_each, u)))
		return rc;
	for (size_t i = 0; rc == 0 && i < u->n; i++)
		rc = sl_txn_del(t, SL_TABLE_QSEEN, u->oldk[i], u->oldlen[i]);
	for (size_t i = 0; rc == 0 && i < u->n; i++)
		rc = sl_txn_put(t, SL_TABLE_QSEEN, u->newk[i], SL_SEEN_KEY_LEN, &u->clock[i], 8);
	size_t nseen = u->n;
	upgrade_reset(u);
	if (rc || (rc = sl_txn_each(t, SL_TABLE_QSEENTS, NULL, 0, old_seents_each, u)))
		return rc;
	for (size_t i = 0; rc == 0 && i < u->n; i++)
		rc = sl_txn_del(t, SL_TABLE_QSEENTS, u->oldk[i], u->oldlen[i]);
	/* the settled records, into segments */
	if (rc || (rc = sl_txn_each(t, SL_TABLE_QLOG, NULL, 0, old_frec_each, u)) ||
	    (rc = move_settled(u, sl_hist_now_ms())))
		return rc;
	sl_log(SL_LOG_INFO,
	       "catalog upgraded from format 1 to %d: %zu seen-set entries rehashed, %zu file "
	       "records moved into history segments",
	       SL_CATALOG_FORMAT, nseen, u->nf);
	return sl_txn_meta_put(t, "format", SL_CATALOG_FORMAT);
}

int sl_file_upgrade(struct sl_catalog *cat, uint8_t key[16])
{
	struct sl_txn *t;
	uint64_t fmt = 0, k0 = 0, k1 = 0;
	int rc;

	if ((rc = sl_catalog_read(cat, &t)))
		return rc;
	if (!(rc = sl_txn_meta_get(t, "format", &fmt)) && !(rc = sl_txn_meta_get(t, "seen_k0", &k0)))
		rc = sl_txn_meta_get(t, "seen_k1", &k1);
	sl_txn_end(t);
	if (rc)
		return rc;
	if (fmt >= 2 && (k0 || k1)) {
		memcpy(key, &k0, 8);
		memcpy(key + 8, &k1, 8);
		return 0;
	}
	/* a new key, unless another query's start wrote one meanwhile */
	if (getrandom(key, 16, 0) != 16)
		return errno ? errno : EIO;
	struct upgrade u = {.key = key};
	rc = sl_catalog_write(cat, upgrade_apply, &u);
	upgrade_release(&u);
	return rc;
}
