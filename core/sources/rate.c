/* SPDX-License-Identifier: MIT */
/*
 * The sources `rate` and `rate-micro-batch` (source_rate.h): Spark's test
 * sources, one implementation of the source contract for both. A run fixes
 * its end offset at the first planning (so `availableNow` and `once` give
 * one batch, and a mount asks again every pollInterval).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "catalog.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "qlog.h"
#include "source_rate.h"

#define qkey sl_qlog_meta_key
#define MAX_BATCH_ROWS 10000000 /* rate: rows of one batch while catching up */

/*
 * Now, in ms since the epoch. A -Dfaults build takes a manual clock from
 * SLUICE_FAULT_SIZE=rate.clock_ms:N, as Spark's tests use a manual clock.
 */
static int64_t now_ms(void)
{
	struct timespec ts;
	size_t manual = SL_FAULT_SIZE("rate.clock_ms", 0);

	if (manual)
		return (int64_t)manual;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	bool micro;          /* rate-micro-batch */
	bool fixed;          /* the run's end is fixed (the first planning) */
	int64_t creation_ms; /* rate: sources/0/0 */
	/* the batch's range */
	bool first;          /* no batch was logged before it */
	int64_t s, e;        /* rate: seconds; micro: rows so far */
	int64_t ts_ms;       /* micro: the range's start timestamp */
	int64_t end_ts_ms;   /* micro: the range's end timestamp */
	int64_t vs, ve;      /* values [vs, ve) */
	int64_t end_fixed, end_fixed_ts; /* the run's end */
};

int64_t sl_rate_value_at(int64_t t, int64_t rate, int64_t ramp)
{
	int64_t delta = rate / (ramp + 1);

	if (t <= ramp) /* halve first: delta * t * (t + 1) / 2 without overflow */
		return t % 2 ? (t + 1) / 2 * delta * t : t / 2 * delta * (t + 1);
	return sl_rate_value_at(ramp, rate, ramp) + (t - ramp) * rate;
}

int64_t sl_rate_ts_ms(int64_t creation_ms, int64_t s, int64_t e, int64_t vs, int64_t ve,
		      int64_t v)
{
	double per_value = (double)((e - s) * 1000) / (double)(ve - vs);
	/* Java's Math.round, floor(x + 0.5): x is never negative here, so truncation */
	return (int64_t)((double)(creation_ms + s * 1000) + (double)(v - vs) * per_value + 0.5);
}

static int64_t partitions(const struct sl_source *p)
{
	return p->q->source.num_partitions > 0 ? p->q->source.num_partitions : 1;
}

/* The offset text of a rate end (seconds) or a micro-batch end (rows, ms). */
static void offset_text(const struct sl_source *p, int64_t end, int64_t ts, char *buf, size_t len)
{
	if (p->micro)
		snprintf(buf, len, "{\"offset\":%" PRId64 ",\"timestamp\":%" PRId64 "}", end, ts);
	else
		snprintf(buf, len, "%" PRId64, end);
}

/* Values of the range, and the range's offsets into r. */
static int set_range(struct sl_source *p, struct sl_source_range *r)
{
	const struct sl_source_config *c = &p->q->source;

	if (p->micro) {
		p->vs = p->s;
		p->ve = p->e;
	} else {
		if (p->e > INT64_MAX / c->rows_per_second)
			return ERANGE; /* Spark: "Max offset with N rowsPerSecond is ..." */
		p->vs = sl_rate_value_at(p->s, c->rows_per_second, c->ramp_up_s);
		p->ve = sl_rate_value_at(p->e, c->rows_per_second, c->ramp_up_s);
	}
	r->nparts = p->ve > p->vs ? (size_t)partitions(p) : 0;
	if (p->first)
		r->start[0] = 0;
	else
		offset_text(p, p->s, p->ts_ms, r->start, sizeof(r->start));
	offset_text(p, p->e, p->end_ts_ms, r->end, sizeof(r->end));
	return 0;
}

/*
 * The end of a rate batch from p->s towards e: the furthest second whose
 * rows stay within MAX_BATCH_ROWS, at least one second. A query that fell
 * behind (down for a day) catches up in batches of Spark's offsets rather
 * than in one batch that would not fit in memory (Spark: one batch).
 */
static int64_t catch_up_end(const struct sl_source *p, int64_t e)
{
	const struct sl_source_config *c = &p->q->source;
	int64_t lo = p->s + 1, hi = e;

	if (e <= p->s || e > INT64_MAX / c->rows_per_second)
		return e; /* nothing new, or the range error set_range() reports */
	int64_t vs = sl_rate_value_at(p->s, c->rows_per_second, c->ramp_up_s);
	if (sl_rate_value_at(e, c->rows_per_second, c->ramp_up_s) - vs <= MAX_BATCH_ROWS)
		return e;
	while (lo < hi) { /* the largest end in [s + 1, e] within the cap */
		int64_t mid = lo + (hi - lo + 1) / 2;
		if (sl_rate_value_at(mid, c->rows_per_second, c->ramp_up_s) - vs <= MAX_BATCH_ROWS)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* rate's creationTimeMs: sources/0/0, written at the first planning. */
static int creation(struct sl_source *p, struct sl_txn *t, bool create)
{
	const void *v;
	size_t len;
	char text[48];
	int rc;

	if (p->creation_ms)
		return 0;
	rc = sl_qlog_get(t, p->qid, 's', 0, &v, &len);
	if (rc == 0) {
		if (len < 4 || len >= sizeof(text) || memcmp(v, "v1\n", 3))
			return SL_ECORRUPT;
		memcpy(text, (const char *)v + 3, len - 3);
		text[len - 3] = 0;
		char *end;
		p->creation_ms = strtoll(text, &end, 10);
		return *end || p->creation_ms <= 0 ? SL_ECORRUPT : 0;
	}
	if (rc != SL_NOTFOUND || !create)
		return rc;
	p->creation_ms = now_ms();
	int n = snprintf(text, sizeof(text), "v1\n%" PRId64, p->creation_ms);
	return sl_qlog_put(t, p->qid, 's', 0, text, (size_t)n);
}

static int rate_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
		       struct sl_source_range *r)
{
	char rec[128], start[32];
	int64_t ts_ms;
	int rc;

	if ((rc = sl_qlog_get_text(t, p->qid, 'b', batch, rec, sizeof(rec))))
		return rc;
	if (sscanf(rec, "%" SCNd64 " %31s %" SCNd64 " %" SCNd64 " %" SCNd64, &ts_ms, start, &p->e,
		   &p->end_ts_ms, &p->ts_ms) != 5)
		return SL_ECORRUPT;
	p->first = !strcmp(start, "-");
	if (p->first)
		p->s = 0;
	else if (sscanf(start, "%" SCNd64, &p->s) != 1)
		return SL_ECORRUPT;
	if (!p->micro && (rc = creation(p, t, false)))
		return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
	if ((rc = set_range(p, r)))
		return rc;
	r->replay = true;
	r->ts_ms = ts_ms;
	if (p->s == p->e)
		r->nparts = 0; /* a no-data batch at the last end */
	return 0;
}

static int rate_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	const struct sl_source_config *c = &p->q->source;
	char key[48];
	uint64_t end1, ts;
	int rc;

	qkey(key, sizeof(key), p->qid, "rend");
	if ((rc = sl_txn_meta_get(t, key, &end1)))
		return rc;
	qkey(key, sizeof(key), p->qid, "rts");
	if ((rc = sl_txn_meta_get(t, key, &ts)))
		return rc;
	p->first = end1 == 0;
	p->s = p->first ? 0 : (int64_t)end1 - 1;
	p->ts_ms = p->first ? c->start_ts_ms : (int64_t)ts;
	if (!p->fixed) {
		if (p->micro) {
			p->end_fixed = p->s + c->rows_per_batch;
			p->end_fixed_ts = p->ts_ms + c->advance_ms;
		} else {
			if ((rc = creation(p, t, true)))
				return rc;
			int64_t now = now_ms();
			p->end_fixed = now > p->creation_ms ? (now - p->creation_ms) / 1000 : 0;
		}
		p->fixed = true;
	}
	/* a fixed end already reached: nothing new in this run */
	p->e = p->end_fixed > p->s ? p->end_fixed : p->s;
	if (!p->micro)
		p->e = catch_up_end(p, p->e);
	p->end_ts_ms = p->e > p->s ? p->end_fixed_ts : p->ts_ms;
	if ((rc = set_range(p, r)))
		return rc;
	if (p->e == p->s)
		r->nparts = 0;
	return 0;
}

static int rate_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		    struct sl_source_range *r)
{
	char key[48], rec[128], start[32] = "-";
	int n, rc;

	if (r->nparts == 0) {
		/* a no-data batch repeats the last end */
		p->e = p->s;
		p->end_ts_ms = p->ts_ms;
		p->first = false;
		if ((rc = set_range(p, r)))
			return rc;
		r->nparts = 0;
		snprintf(r->start, sizeof(r->start), "%s", r->end);
	}
	if (!p->first)
		snprintf(start, sizeof(start), "%" PRId64, p->s);
	n = snprintf(rec, sizeof(rec), "%" PRId64 " %s %" PRId64 " %" PRId64 " %" PRId64, ts_ms,
		     start, p->e, p->end_ts_ms, p->ts_ms);
	if ((rc = sl_qlog_put(t, p->qid, 'b', batch, rec, (size_t)n)))
		return rc;
	if (batch >= 100 && (rc = sl_qlog_del(t, p->qid, 'b', batch - 100)))
		return rc;
	qkey(key, sizeof(key), p->qid, "rend");
	if ((rc = sl_txn_meta_put(t, key, (uint64_t)p->e + 1)))
		return rc;
	qkey(key, sizeof(key), p->qid, "rts");
	return sl_txn_meta_put(t, key, (uint64_t)p->end_ts_ms);
}

static int rate_read(struct sl_source *p, size_t part, struct sl_batch *b,
		     struct sl_decode_stats *st, char *err, size_t errlen)
{
	int64_t n = partitions(p);
	int rc;

	(void)err;
	(void)errlen;
	for (int64_t v = p->vs + (int64_t)part; v < p->ve; v += n) {
		size_t row;
		int64_t ms = p->micro ? p->ts_ms
				      : sl_rate_ts_ms(p->creation_ms, p->s, p->e, p->vs, p->ve, v);
		if ((rc = sl_batch_add_row(b, &row)))
			return rc;
		sl_batch_set_int(b, row, 0, ms * 1000);
		sl_batch_set_int(b, row, 1, v);
		st->lines++;
		st->rows++;
	}
	return 0;
}

/*
 * rate: the rows of the seconds elapsed since the last logged end (what the
 * next batch would make now); rate-micro-batch: none, a batch is always due.
 */
static int rate_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			struct sl_source_backlog *out)
{
	struct sl_source p = {.q = q, .qid = qid};
	const struct sl_source_config *c = &q->source;
	char key[48];
	uint64_t end1;
	int rc;

	*out = (struct sl_source_backlog){.known = true, .unit = {"rows", NULL}};
	if (q->source.format == SL_SOURCE_RATE_MICRO_BATCH)
		return 0;
	qkey(key, sizeof(key), qid, "rend");
	if ((rc = sl_txn_meta_get(t, key, &end1)))
		return rc;
	rc = creation(&p, t, false);
	if (rc == SL_NOTFOUND)
		return 0; /* never planned */
	if (rc)
		return rc;
	int64_t s = end1 ? (int64_t)end1 - 1 : 0, now = now_ms();
	int64_t e = now > p.creation_ms ? (now - p.creation_ms) / 1000 : 0;
	if (e > s && e <= INT64_MAX / c->rows_per_second)
		out->v[0] = (uint64_t)(sl_rate_value_at(e, c->rows_per_second, c->ramp_up_s) -
				       sl_rate_value_at(s, c->rows_per_second, c->ramp_up_s));
	return 0;
}

static void rate_describe(const struct sl_source *p, char *buf, size_t len)
{
	const struct sl_source_config *c = &p->q->source;

	if (p->micro) {
		snprintf(buf, len,
			 "RatePerMicroBatchStream[rowsPerBatch=%" PRId64 ", numPartitions=%" PRId64
			 ", startTimestamp=%" PRId64 ", advanceMsPerBatch=%" PRId64 "]",
			 c->rows_per_batch, partitions(p), c->start_ts_ms, c->advance_ms);
	} else if (c->num_partitions > 0) {
		/* Spark's text, without its closing bracket */
		snprintf(buf, len,
			 "RateStreamV2[rowsPerSecond=%" PRId64 ", rampUpTimeSeconds=%" PRId64
			 ", numPartitions=%" PRId64,
			 c->rows_per_second, c->ramp_up_s, c->num_partitions);
	} else {
		snprintf(buf, len,
			 "RateStreamV2[rowsPerSecond=%" PRId64 ", rampUpTimeSeconds=%" PRId64
			 ", numPartitions=default",
			 c->rows_per_second, c->ramp_up_s);
	}
}

static int rate_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p = calloc(1, sizeof(*p));

	if (!p)
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->qid = a->qid;
	p->micro = a->q->source.format == SL_SOURCE_RATE_MICRO_BATCH;
	*out = p;
	return 0;
}

static void rate_stop(struct sl_source *p)
{
	free(p);
}

/* One vtable for both formats: open() tells them apart by source.format. */
const struct sl_source_ops sl_source_rate = {
	.name = "rate",
	.replayable = true,
	.open = rate_open,
	.replay = rate_replay,
	.latest_offset = rate_latest_offset,
	.log = rate_log,
	.read = rate_read,
	.pending = rate_pending,
	.describe = rate_describe,
	.stop = rate_stop,
};
