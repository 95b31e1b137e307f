/* SPDX-License-Identifier: MIT */
/*
 * Planning batch N and its offsets log: the source's range (a replay, or
 * its latest offset), offsets/N, the checkpoint's metadata and config
 * record, in the one durable transaction that comes before any read.
 *
 * Its entries in the checkpoint log (core/sources/qlog.h):
 *   'o' offsets/N, 'm' metadata (n 0): the rendered text, as Spark writes it
 *   'd' (n 0) what of the query's config its checkpoint cannot survive a
 *       change of (core/compat.h), written with its first batch
 * meta: "q.<qid>.next" next batch id, "q.<qid>.wm" the watermark after the
 * last committed batch (ms), "q.<qid>.bwm" the watermark of the last
 * planned batch (its offsets/N).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "engine_int.h"
#include "err.h"
#include "ops.h"
#include "qlog.h"
#include "strbuf.h"

#define qkey sl_qlog_meta_key

/*
 * Two clocks, never mixed: durations (durationMs, rates) are differences of
 * CLOCK_MONOTONIC readings, as stage.c's done_ns, so that a step of the wall
 * clock cannot make one negative; what is shown as a time of day
 * (batchTimestampMs, timestamp, the mtimes of out/) is CLOCK_REALTIME.
 */
int64_t sl_engine_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int64_t sl_engine_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void sl_engine_make_uuid(char out[40])
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

/* offsets/N: the batch's metadata, then the source's end offset verbatim. */
static int put_offsets(struct sl_txn *t, const struct plan *p)
{
	struct sl_strbuf off = {0};
	int rc;

	sl_strbuf_addf(&off, "v1\n{\"batchWatermarkMs\":%" PRId64 ",\"batchTimestampMs\":%" PRId64
		       ",\"conf\":{}}\n%s",
		 p->wm_ms, p->ts_ms, p->range.end);
	rc = off.oom ? ENOMEM : sl_qlog_put(t, p->qid, 'o', p->batch, off.p, off.len);
	sl_strbuf_release(&off);
	return rc;
}

/*
 * No new data: a no-data batch runs when the watermark, moved by the last
 * batch, would now emit or evict state (Spark's shouldRunAnotherBatch,
 * narrowed to when it changes something). It logs offsets/N repeating the
 * source's last end offset, and the source logs a batch of no data.
 */
static int plan_nodata(struct sl_txn *t, struct plan *p)
{
	char key[48];
	uint64_t bwm;
	bool due = false;
	int rc;

	if (!sl_ops_needed(p->q))
		return 0;
	qkey(key, sizeof(key), p->qid, "bwm");
	if ((rc = sl_txn_meta_get(t, key, &bwm)))
		return rc;
	if (p->wm_ms <= (int64_t)bwm || !p->range.start[0])
		return 0;
	if ((rc = sl_ops_due(p->q, p->qid, t, p->wm_ms, &due)) || !due)
		return rc;
	p->nodata = true;
	if ((rc = p->sops->log(p->src, t, p->batch, p->ts_ms, &p->range)) ||
	    (rc = put_offsets(t, p)))
		return rc;
	qkey(key, sizeof(key), p->qid, "bwm");
	return sl_txn_meta_put(t, key, (uint64_t)p->wm_ms);
}

static int plan_apply_timed(struct sl_txn *t, struct plan *p)
{
	const void *v;
	size_t vlen;
	char key[48];
	int rc;

	p->recovered = p->nodata = false;
	p->wm_ms = 0;
	memset(&p->range, 0, sizeof(p->range));
	qkey(key, sizeof(key), p->qid, "next");
	if ((rc = sl_txn_meta_get(t, key, &p->batch)))
		return rc;
	rc = p->sops->replay(p->src, t, p->batch, &p->range);
	if (rc == 0) {
		uint64_t wm;
		p->recovered = true;
		p->ts_ms = p->range.ts_ms;
		p->nodata = p->range.nparts == 0;
		qkey(key, sizeof(key), p->qid, "bwm");
		if ((rc = sl_txn_meta_get(t, key, &wm)))
			return rc;
		p->wm_ms = (int64_t)wm;
		return 0;
	}
	if (rc != SL_NOTFOUND)
		return rc;

	if ((rc = p->sops->latest_offset(p->src, t, &p->range)))
		return rc;
	/* the checkpoint's config, kept with its first batch (or since this version) */
	rc = sl_qlog_get(t, p->qid, 'd', 0, &v, &vlen);
	if (rc == SL_NOTFOUND && p->desc)
		rc = sl_qlog_put(t, p->qid, 'd', 0, p->desc, p->desc_len);
	if (rc)
		return rc;
	uint64_t wm;
	qkey(key, sizeof(key), p->qid, "wm");
	if ((rc = sl_txn_meta_get(t, key, &wm)))
		return rc;
	p->wm_ms = (int64_t)wm;
	if (p->range.nparts == 0)
		return plan_nodata(t, p);

	/* offsets/N is durable before batch N reads a byte */
	if ((rc = p->sops->log(p->src, t, p->batch, p->ts_ms, &p->range)) ||
	    (rc = put_offsets(t, p)))
		return rc;
	if (p->batch == 0) {
		char meta[64];
		int n = snprintf(meta, sizeof(meta), "{\"id\":\"%s\"}", p->uuid);
		if ((rc = sl_qlog_put(t, p->qid, 'm', 0, meta, (size_t)n)))
			return rc;
	}
	qkey(key, sizeof(key), p->qid, "bwm");
	return sl_txn_meta_put(t, key, (uint64_t)p->wm_ms);
}

int sl_engine_plan_apply(struct sl_txn *t, void *arg)
{
	struct plan *p = arg;
	int rc;

	int64_t t0 = sl_engine_mono_ns();
	rc = plan_apply_timed(t, p);
	p->apply_ns = sl_engine_mono_ns() - t0;
	return rc;
}
