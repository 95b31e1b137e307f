/* SPDX-License-Identifier: MIT */
/*
 * Batch N's commit: one transaction names the sink's output, lets the
 * source release the range, writes commits/N and the batch's progress
 * report, and moves the query to batch N + 1.
 *
 * Its entries in the checkpoint log (core/sources/qlog.h): 'c' commits/N
 * (rendered, as Spark writes it), 'p' batch N's progress report (JSON, one
 * line), 'h' the query's cumulative metrics (metrics.c); it clears 'e'
 * (lastError). meta: "q.<qid>.wm" the watermark after the batch (ms),
 * "q.<qid>.rows" its input rows, "q.<qid>.next".
 */
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "decode.h"
#include "engine.h"
#include "engine_int.h"
#include "metrics.h"
#include "ops.h"
#include "qlog.h"
#include "render.h"

#define qkey sl_qlog_meta_key

/* The query id kept in checkpoint/<q>/metadata ({"id":"<uuid>"}). */
static void query_uuid(struct sl_txn *t, uint32_t qid, char out[40])
{
	const void *d;
	size_t len;
	out[0] = 0;
	if (sl_qlog_get(t, qid, 'm', 0, &d, &len) == 0 && len >= 44 &&
	    !memcmp(d, "{\"id\":\"", 7)) {
		memcpy(out, (const char *)d + 7, 36);
		out[36] = 0;
	}
}

void sl_engine_report_read(struct sl_catalog *cat, struct report *r)
{
	const struct plan *p = r->p;
	struct sl_txn *t;

	r->id[0] = 0;
	if (sl_catalog_read(cat, &t))
		return;
	query_uuid(t, p->qid, r->id);
	if (p->sops->pending(t, p->q, p->qid, &r->m.backlog))
		r->m.backlog.known = false;
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
 * the batch's output (operators, parts written), monotonic. trigger_ms:
 * triggerExecution, as the query's metrics count it. m: the source metrics
 * this report shows.
 */
static void progress_report(const struct report *r, int64_t t2, int64_t trigger_ms,
			    uint64_t out_rows, const struct sl_source_metrics *m, char **out,
			    size_t *len)
{
	const struct plan *p = r->p;
	const struct sl_decode_stats *st = r->st;
	const struct sl_ops_result *ops = r->ops;
	int64_t t0 = r->t0, t1 = r->t1;
	const struct sl_query_config *q = p->q;
	struct sl_progress pr = {.run_id = p->run_id, .name = q->name};
	const char *names[64], *mnames[4];
	uint64_t counts[64], mvalues[4];
	double mreals[4];
	char src[4200], sink[128];

	*out = NULL;
	/*
	 * The phases are disjoint spans of [t0, now], each rounded down, so
	 * that they add up to at most triggerExecution: latestOffset the
	 * plan's apply, walCommit the rest of its durable commit, addBatch
	 * until the parts are written. commitOffsets is 0: the report rides
	 * the commit it would time.
	 */
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
	pr.start_offset = p->range.start;
	pr.end_offset = p->range.end;
	pr.latest_offset = m->latest_offset;
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
	p->sops->describe(p->src, src, sizeof(src));
	p->kops->describe(p->sink, sink, sizeof(sink));
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
	pr.backlog = &m->backlog;
	pr.sink_guarantee = sl_engine_guarantee(q);
	pr.skipped_age = m->skipped_age;
	pr.skipped_seen = m->skipped_seen;
	for (size_t k = 0; k < m->nmetrics && k < 4; k++) {
		mnames[k] = m->metrics[k].name;
		mvalues[k] = m->metrics[k].value;
		mreals[k] = m->metrics[k].is_real ? m->metrics[k].real : NAN;
		pr.n_source_metrics = k + 1;
	}
	pr.source_metric_names = mnames;
	pr.source_metric_values = mvalues;
	pr.source_metric_reals = mreals;
	sl_render_progress(&pr, out, len);
}

/* The batch's share of its query's cumulative metrics (the figures its report shows). */
static int add_metrics(struct sl_txn *t, const struct commit *c,
		       const struct sl_sink_result *out, int64_t trigger_ms)
{
	const struct sl_ops_result *ops = c->report->ops;
	struct sl_metrics_batch b = {.input_rows = c->report->st->lines,
				     .output_rows = out->rows,
				     .malformed_rows = c->report->st->malformed,
				     .duration_ms = trigger_ms};

	for (size_t k = 0; ops && k < ops->nm; k++) {
		b.late_rows += ops->m[k].dropped_wm;
		b.state_rows += ops->m[k].rows_total;
		b.state_bytes += ops->m[k].bytes;
	}
	return sl_metrics_add_batch(t, c->p->qid, &b);
}

int sl_engine_commit_apply(struct sl_txn *t, void *arg)
{
	struct commit *c = arg;
	const struct plan *p = c->p;
	struct sl_sink_result out = {0};
	struct sl_source_metrics m = c->report->m;
	char key[48];
	int rc;

	/* the state first: its puts overlap the sink writing its output */
	if (c->ops && (rc = sl_ops_apply(c->ops, t)))
		return rc;
	if ((rc = p->kops->commit(p->sink, t, &out)))
		return rc;
	if (p->sops->commit_txn && (rc = p->sops->commit_txn(p->src, t, p->batch, &m)))
		return rc;
	char commit_text[80];
	int clen = snprintf(commit_text, sizeof(commit_text), "v1\n{\"nextBatchWatermarkMs\":%" PRId64 "}",
			    c->next_wm);
	if ((rc = sl_qlog_put(t, p->qid, 'c', p->batch, commit_text, (size_t)clen)))
		return rc;
	qkey(key, sizeof(key), p->qid, "wm");
	if ((rc = sl_txn_meta_put(t, key, (uint64_t)c->next_wm)))
		return rc;
	qkey(key, sizeof(key), p->qid, "rows");
	if ((rc = sl_txn_meta_put(t, key, c->rows)))
		return rc;
	/* the checkpoint keeps the last 100 batches (Spark's minBatchesToRetain) */
	if (p->batch >= 100) {
		if ((rc = sl_qlog_del(t, p->qid, 'o', p->batch - 100)) ||
		    (rc = sl_qlog_del(t, p->qid, 'c', p->batch - 100)))
			return rc;
	}
	/* triggerExecution: from the trigger's start to now, the end of the batch's work */
	int64_t trigger_ms = ms_between(c->report->t0, sl_engine_mono_ns());
	if ((rc = add_metrics(t, c, &out, trigger_ms)))
		return rc;
	/* the last 100 progress reports, like Spark's recentProgress */
	free(c->progress); /* from an earlier run of this apply */
	progress_report(c->report, out.done_ns, trigger_ms, out.rows, &m, &c->progress,
			&c->progress_len);
	if (c->progress &&
	    (rc = sl_qlog_put(t, p->qid, 'p', p->batch, c->progress, c->progress_len)))
		return rc;
	if (p->batch >= 100 && (rc = sl_qlog_del(t, p->qid, 'p', p->batch - 100)))
		return rc;
	/* a committed batch clears the last error */
	if ((rc = sl_qlog_del(t, p->qid, 'e', 0)))
		return rc;
	qkey(key, sizeof(key), p->qid, "next");
	return sl_txn_meta_put(t, key, p->batch + 1);
}
