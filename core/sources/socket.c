/* SPDX-License-Identifier: MIT */
/*
 * The `socket` source (source_socket.h): batches of spooled lines. It never
 * connects: the mount's reader thread fills the spool; a batch ends on a
 * chunk boundary, so a replay reads exactly the chunks it logged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "catalog.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "jscan.h"
#include "land.h"
#include "qlog.h"
#include "source_socket.h"
#include "spool.h"

#define qkey sl_qlog_meta_key
/* a batch's lines, at most about (a spool drained after a long stop catches up in steps) */
#define BATCH_MAX_BYTES (64ull << 20)

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	struct sl_socket_reader *reader; /* NULL outside a mount, or availableNow */
	/* the batch's range (s, e]: line indexes [s, e) */
	bool first; /* no batch was logged before it */
	uint64_t s, e;
	char *fix; /* scratch: a line with invalid UTF-8 repaired */
	size_t fix_cap;
};

static void set_range(const struct sl_source *p, struct sl_source_range *r)
{
	if (p->first)
		r->start[0] = 0;
	else
		snprintf(r->start, sizeof(r->start), "%" PRIu64, p->s);
	snprintf(r->end, sizeof(r->end), "%" PRIu64, p->e);
	r->nparts = p->e > p->s ? 1 : 0;
}

static int socket_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			 struct sl_source_range *r)
{
	char rec[96], start[32];
	int64_t ts_ms;
	int rc;

	if ((rc = sl_qlog_get_text(t, p->qid, 'b', batch, rec, sizeof(rec))))
		return rc;
	if (sscanf(rec, "%" SCNd64 " %31s %" SCNu64, &ts_ms, start, &p->e) != 3)
		return SL_ECORRUPT;
	p->first = !strcmp(start, "-");
	if (p->first)
		p->s = 0;
	else if (sscanf(start, "%" SCNu64, &p->s) != 1 || p->s > p->e)
		return SL_ECORRUPT;
	set_range(p, r);
	r->replay = true;
	r->ts_ms = ts_ms;
	return 0;
}

static int socket_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	char key[48];
	uint64_t end1;
	int rc;

	qkey(key, sizeof(key), p->qid, "send");
	if ((rc = sl_txn_meta_get(t, key, &end1)))
		return rc;
	p->first = end1 == 0;
	p->s = p->first ? 0 : end1 - 1;
	if ((rc = sl_spool_batch_end(t, p->qid, p->s, BATCH_MAX_BYTES, &p->e)))
		return rc;
	set_range(p, r);
	return 0;
}

static int socket_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		      struct sl_source_range *r)
{
	char key[48], rec[96];
	int n, rc;

	if (r->nparts == 0) {
		/* a no-data batch repeats the last end */
		p->e = p->s;
		p->first = false;
		set_range(p, r);
	}
	if (p->first)
		n = snprintf(rec, sizeof(rec), "%" PRId64 " - %" PRIu64, ts_ms, p->e);
	else
		n = snprintf(rec, sizeof(rec), "%" PRId64 " %" PRIu64 " %" PRIu64, ts_ms, p->s,
			     p->e);
	if ((rc = sl_qlog_put(t, p->qid, 'b', batch, rec, (size_t)n)))
		return rc;
	if (batch >= 100 && (rc = sl_qlog_del(t, p->qid, 'b', batch - 100)))
		return rc;
	qkey(key, sizeof(key), p->qid, "send");
	return sl_txn_meta_put(t, key, p->e + 1);
}

struct fill {
	struct sl_source *p;
	struct sl_batch *b;
	struct sl_decode_stats *st;
};

/* One spooled line into a row: Spark decodes the bytes as UTF-8, U+FFFD for what is not. */
static int add_line(void *ctx, uint64_t idx, const char *line, size_t len, int64_t ts_ms)
{
	struct fill *f = ctx;
	struct sl_source *p = f->p;
	size_t row, ok = sl_jscan_utf8_prefix(line, len);
	int rc;

	(void)idx;
	if (ok != len) {
		size_t n = 0;
		if (3 * len > p->fix_cap) {
			char *x = realloc(p->fix, 3 * len);
			if (!x)
				return ENOMEM;
			p->fix = x;
			p->fix_cap = 3 * len;
		}
		while (len) {
			memcpy(p->fix + n, line, ok);
			n += ok;
			line += ok;
			len -= ok;
			if (!len)
				break;
			memcpy(p->fix + n, "\xEF\xBF\xBD", 3);
			n += 3;
			line++;
			len--;
			ok = sl_jscan_utf8_prefix(line, len);
		}
		line = p->fix;
		len = n;
	}
	if ((rc = sl_batch_add_row(f->b, &row)) || (rc = sl_batch_set_str(f->b, row, 0, line, len)))
		return rc;
	if (p->q->source.include_timestamp)
		sl_batch_set_int(f->b, row, 1, ts_ms * 1000);
	f->st->lines++;
	f->st->rows++;
	return 0;
}

static int socket_read(struct sl_source *p, size_t part, struct sl_batch *b,
		       struct sl_decode_stats *st, char *err, size_t errlen)
{
	struct fill f = {.p = p, .b = b, .st = st};
	struct sl_txn *t;
	int rc;

	(void)part;
	if ((rc = sl_catalog_read(sl_land_catalog(p->l), &t)))
		return rc;
	rc = sl_spool_read(t, p->qid, p->s, p->e, add_line, &f);
	sl_txn_end(t);
	if (rc == SL_ECORRUPT)
		snprintf(err, errlen, "lines %" PRIu64 "..%" PRIu64 " are missing from the spool",
			 p->s, p->e);
	return rc;
}

/* spooledLines and spoolBytes, as Spark's source metrics. */
static void put_metrics(struct sl_source *p, struct sl_txn *t, struct sl_source_metrics *m)
{
	struct sl_spool_stats st;

	if (sl_spool_stats(t, p->qid, &st))
		return;
	m->nmetrics = 2;
	m->metrics[0].name = "spooledLines";
	m->metrics[0].value = st.spooled;
	m->metrics[1].name = "spoolBytes";
	m->metrics[1].value = st.bytes;
}

/* Lines spooled and not yet committed, and the bytes the spool holds. */
static int socket_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			  struct sl_source_backlog *out)
{
	struct sl_spool_stats st;
	int rc = sl_spool_stats(t, qid, &st);

	(void)q;
	*out = (struct sl_source_backlog){.known = true, .unit = {"lines", "bytes"}};
	if (rc)
		return rc == SL_NOTFOUND ? 0 : rc;
	out->v[0] = st.spooled > st.done ? st.spooled - st.done : 0;
	out->v[1] = st.bytes;
	out->metric[0] = "spooledLines";
	out->mv[0] = st.spooled;
	out->metric[1] = "spoolBytes";
	out->mv[1] = st.bytes;
	return 0;
}

static int socket_commit_txn(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			     struct sl_source_metrics *m)
{
	int rc;

	(void)batch;
	/* the range's lines may leave the spool once this commit is durable */
	if ((rc = sl_spool_set_done(t, p->qid, p->e)))
		return rc;
	put_metrics(p, t, m);
	return 0;
}

static int socket_commit(struct sl_source *p)
{
	uint64_t freed = 0;
	int rc = sl_spool_trim(sl_land_catalog(p->l), p->qid, &freed);

	if (rc == 0 && freed)
		sl_socket_reader_kick(p->reader); /* past maxSpoolBytes, it may read again */
	return rc;
}

static void socket_describe(const struct sl_source *p, char *buf, size_t len)
{
	snprintf(buf, len, "TextSocketV2[host: %s, port: %lld]", p->q->source.host,
		 (long long)p->q->source.port);
}

static int socket_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p = calloc(1, sizeof(*p));

	if (!p)
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->qid = a->qid;
	p->reader = a->reader;
	*out = p;
	return 0;
}

static void socket_stop(struct sl_source *p)
{
	if (!p)
		return;
	free(p->fix);
	free(p);
}

const struct sl_source_ops sl_source_socket = {
    .name = "socket",
    .replayable = true, /* by spooling */
    .open = socket_open,
    .replay = socket_replay,
    .latest_offset = socket_latest_offset,
    .log = socket_log,
    .read = socket_read,
    .pending = socket_pending,
    .commit_txn = socket_commit_txn,
    .commit = socket_commit,
    .describe = socket_describe,
    .stop = socket_stop,
};
