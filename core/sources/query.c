/* SPDX-License-Identifier: MIT */
/* The `query` source: another query's committed output (source_query.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "batch.h"
#include "catalog.h"
#include "codec.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "land.h"
#include "outparts.h"
#include "qindex.h"
#include "qlog.h"
#include "source_query.h"

#define qkey sl_qlog_meta_key
#define ZST_LIMIT (4ull << 30) /* a compressed part may expand to 4 GiB */
#define UUID_LEN 36

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	struct sl_decoder *dec;
	bool fixed;             /* the run's end is fixed (its first planning) */
	int64_t end_fixed;      /* the upstream's last commit then, or -1 */
	/* the batch's range: upstream batches (s, e] */
	int64_t s, e;           /* s -1: before the first */
	char uuid[UUID_LEN + 1];
	struct sl_out_part *parts; /* partition i reads parts[i] (none: one empty partition) */
	size_t nparts;
};

static void offset_text(const struct sl_source *p, int64_t n, char *buf, size_t len)
{
	snprintf(buf, len, "{\"query\":\"%s\",\"batchId\":%" PRId64 "}", p->uuid, n);
}

/* The upstream's id and checkpoint id; SL_NOTFOUND before its first batch. */
static int upstream(struct sl_txn *t, const struct sl_source *p, uint32_t *uqid,
		    char uuid[UUID_LEN + 1])
{
	const void *d;
	size_t len;
	int rc;

	if ((rc = sl_qindex_qid(t, p->q->source.upstream, uqid)))
		return rc;
	if ((rc = sl_qlog_get(t, *uqid, 'm', 0, &d, &len)))
		return rc;
	if (len < 8 + UUID_LEN || memcmp(d, "{\"id\":\"", 7))
		return SL_ECORRUPT;
	memcpy(uuid, (const char *)d + 7, UUID_LEN);
	uuid[UUID_LEN] = 0;
	return 0;
}

/* The upstream's last committed batch, or -1. */
static int upstream_last(struct sl_txn *t, uint32_t uqid, int64_t *last)
{
	char key[48];
	uint64_t next;
	int rc;

	qkey(key, sizeof(key), uqid, "next");
	if ((rc = sl_txn_meta_get(t, key, &next)))
		return rc;
	*last = (int64_t)next - 1;
	return 0;
}

/* The parts of upstream batches (s, e] into p->parts, and the range into r. */
static int set_range(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	uint64_t outdir;
	int rc;

	sl_out_parts_free(p->parts, p->nparts);
	p->parts = NULL;
	p->nparts = 0;
	r->nparts = 0;
	if (p->s < 0)
		r->start[0] = 0;
	else
		offset_text(p, p->s, r->start, sizeof(r->start));
	if (p->e < 0) {
		r->end[0] = 0;
		return 0;
	}
	offset_text(p, p->e, r->end, sizeof(r->end));
	if (p->e <= p->s)
		return 0;
	rc = sl_txn_dirent_get(t, SL_ID_OUT, p->q->source.upstream, &outdir);
	if (rc == 0)
		rc = sl_out_parts(t, outdir, (uint64_t)(p->s + 1), (uint64_t)p->e, &p->parts,
				  &p->nparts);
	else if (rc == SL_NOTFOUND)
		rc = 0; /* no batch wrote a row yet */
	if (rc)
		return rc;
	/* batches without rows have no parts: one empty partition still moves the offset */
	r->nparts = p->nparts ? p->nparts : 1;
	return 0;
}

/* Batch record n: its batchTimestampMs, range (s, e] and the upstream's checkpoint id. */
static int read_rec(struct sl_source *p, struct sl_txn *t, uint64_t n, int64_t *ts_ms,
		    int64_t *s, int64_t *e, char uuid[UUID_LEN + 1])
{
	char rec[128];
	int rc = sl_qlog_get_text(t, p->qid, 'b', n, rec, sizeof(rec));

	if (rc)
		return rc;
	if (sscanf(rec, "%" SCNd64 " %" SCNd64 " %" SCNd64 " %36s", ts_ms, s, e, uuid) != 4 ||
	    strlen(uuid) != UUID_LEN)
		return SL_ECORRUPT;
	return 0;
}

static int query_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			struct sl_source_range *r)
{
	int64_t ts_ms;
	int rc;

	if ((rc = read_rec(p, t, batch, &ts_ms, &p->s, &p->e, p->uuid)))
		return rc;
	if ((rc = set_range(p, t, r)))
		return rc;
	if (p->e == p->s)
		r->nparts = 0; /* a no-data batch at the last end */
	r->replay = true;
	r->ts_ms = ts_ms;
	return 0;
}

/* The checkpoint id the last logged batch read ("" before the first). */
static void last_uuid(struct sl_source *p, struct sl_txn *t, char was[UUID_LEN + 1])
{
	char key[48];
	uint64_t next;
	int64_t x;

	qkey(key, sizeof(key), p->qid, "next");
	if (sl_txn_meta_get(t, key, &next) || next == 0 ||
	    read_rec(p, t, next - 1, &x, &x, &x, was))
		was[0] = 0;
}

static int query_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	const char *up = p->q->source.upstream;
	char key[48], uuid[UUID_LEN + 1], was[UUID_LEN + 1];
	uint64_t end1;
	uint32_t uqid;
	int64_t last;
	int rc;

	qkey(key, sizeof(key), p->qid, "qend");
	if ((rc = sl_txn_meta_get(t, key, &end1)))
		return rc;
	p->s = (int64_t)end1 - 1;
	last_uuid(p, t, was);
	rc = upstream(t, p, &uqid, uuid);
	if (rc == SL_NOTFOUND && p->s < 0) {
		p->e = p->s; /* the upstream has not planned a batch yet: nothing to read */
		return set_range(p, t, r);
	}
	if (rc == SL_NOTFOUND || (rc == 0 && was[0] && strcmp(was, uuid))) {
		/* its batch numbers are not the ones this checkpoint counted */
		snprintf(r->why, sizeof(r->why),
			 "upstream query '%s' is not the one this query read (checkpoint id %s, "
			 "now %s): rename this query to start afresh",
			 up, was[0] ? was : "unknown", rc ? "none" : uuid);
		return SL_ECONFIG;
	}
	if (rc)
		return rc;
	memcpy(p->uuid, uuid, sizeof(p->uuid));
	if ((rc = upstream_last(t, uqid, &last)))
		return rc;
	if (!p->fixed) {
		p->end_fixed = last;
		p->fixed = true;
	}
	p->e = p->end_fixed > p->s ? p->end_fixed : p->s;
	return set_range(p, t, r);
}

static int query_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		     struct sl_source_range *r)
{
	char key[48], rec[128];
	int n, rc;

	if (r->nparts == 0) {
		p->e = p->s; /* a no-data batch repeats the last end */
		if ((rc = set_range(p, t, r)))
			return rc;
		snprintf(r->start, sizeof(r->start), "%s", r->end);
	}
	n = snprintf(rec, sizeof(rec), "%" PRId64 " %" PRId64 " %" PRId64 " %s", ts_ms, p->s,
		     p->e, p->uuid);
	if ((rc = sl_qlog_put(t, p->qid, 'b', batch, rec, (size_t)n)))
		return rc;
	if (batch >= 100 && (rc = sl_qlog_del(t, p->qid, 'b', batch - 100)))
		return rc;
	qkey(key, sizeof(key), p->qid, "qend");
	return sl_txn_meta_put(t, key, (uint64_t)(p->e + 1));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static int query_read(struct sl_source *p, size_t part, struct sl_batch *b,
		      struct sl_decode_stats *st, char *err, size_t errlen)
{
	const char *up = p->q->source.upstream;
	struct sl_decode_error derr = {0};
	char *data;
	size_t len;
	bool mapped;
	int rc;

	if (part >= p->nparts)
		return 0; /* the empty partition of a range whose batches wrote no rows */
	const struct sl_out_part *o = &p->parts[part];
	if ((rc = sl_land_file_bytes(p->l, o->id, &data, &len, &mapped))) {
		snprintf(err, errlen, "cannot read 'out/%s/%.300s': %s", up, o->rel,
			 sl_strerror(rc));
		return rc;
	}
	if (mapped)
		madvise(data, len, MADV_WILLNEED); /* the disk works while the decoder does */
	if (ends_with(o->rel, ".zst")) {
		void *plain;
		size_t plen;
		rc = sl_codec_decompress(data, len, ZST_LIMIT, &plain, &plen);
		if (mapped)
			munmap(data, len);
		else
			free(data);
		if (rc) {
			snprintf(err, errlen, "cannot decompress 'out/%s/%.300s': %s", up, o->rel,
				 sl_strerror(rc));
			return rc == SL_ECORRUPT || rc == EFBIG ? SL_EMALFORMED : rc;
		}
		data = plain;
		len = plen;
		mapped = false;
	}
	rc = sl_decode_file(p->dec, o->rel, data, len, b, st, &derr);
	if (mapped)
		munmap(data, len);
	else
		free(data);
	if (rc == SL_EMALFORMED)
		snprintf(err, errlen, "'out/%s/%.300s' line %" PRIu64 ": %s", up, o->rel, derr.line,
			 derr.reason);
	else if (rc)
		snprintf(err, errlen, "cannot decode 'out/%s/%.300s': %s", up, o->rel,
			 sl_strerror(rc));
	return rc;
}

/* The upstream's committed batches after the last one planned. */
static int query_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			 struct sl_source_backlog *out)
{
	struct sl_source p = {.q = q, .qid = qid};
	char key[48], uuid[UUID_LEN + 1];
	uint64_t end1;
	uint32_t uqid;
	int64_t last;
	int rc;

	*out = (struct sl_source_backlog){.known = true, .unit = {"batches", NULL}};
	qkey(key, sizeof(key), qid, "qend");
	if ((rc = sl_txn_meta_get(t, key, &end1)))
		return rc;
	rc = upstream(t, &p, &uqid, uuid);
	if (rc == 0)
		rc = upstream_last(t, uqid, &last);
	if (rc)
		return rc == SL_NOTFOUND ? 0 : rc;
	if (last + 1 > (int64_t)end1)
		out->v[0] = (uint64_t)(last + 1 - (int64_t)end1);
	return 0;
}

static void query_describe(const struct sl_source *p, char *buf, size_t len)
{
	snprintf(buf, len, "QuerySource[out/%s]", p->q->source.upstream);
}

static int query_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->qid = a->qid;
	p->s = p->e = -1;
	if ((rc = sl_decoder_new(a->q, &p->dec))) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void query_stop(struct sl_source *p)
{
	if (!p)
		return;
	sl_out_parts_free(p->parts, p->nparts);
	sl_decoder_free(p->dec);
	free(p);
}

const struct sl_source_ops sl_source_query = {
	.name = "query",
	.replayable = true,
	.open = query_open,
	.replay = query_replay,
	.latest_offset = query_latest_offset,
	.log = query_log,
	.read = query_read,
	.pending = query_pending,
	.describe = query_describe,
	.stop = query_stop,
};
