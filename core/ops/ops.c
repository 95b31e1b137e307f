/* SPDX-License-Identifier: MIT */
/*
 * The operator pipeline of one batch: event-time statistics at the
 * watermark (every decoded row counts, as at Spark's withWatermark node),
 * the late-row filter of the first stateful operator, dropDuplicates, then
 * groupBy/aggregate. See core/ops.h for the two-step protocol.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "dedup.h"
#include "groupby.h"
#include "ops.h"

struct sl_ops {
	const struct sl_query_config *q;
	struct sl_dedup *dd;
	struct sl_groupby *gb;
	struct sl_batch out;
	bool out_init;
	uint8_t *keep;
	size_t keepcap;
};

bool sl_ops_needed(const struct sl_query_config *q)
{
	return q->has_watermark || sl_config_is_stateful(q);
}

int sl_ops_new(const struct sl_query_config *q, uint32_t qid, struct sl_ops **out, char *err,
	       size_t errlen)
{
	struct sl_ops *o = calloc(1, sizeof(*o));
	int rc = 0;

	if (!o)
		return ENOMEM;
	o->q = q;
	if (q->ndedup)
		rc = sl_dedup_new(q, qid, &o->dd);
	if (rc == 0 && q->naggs) {
		rc = sl_groupby_new(q, qid, &o->gb, err, errlen);
		if (rc == 0 && (rc = sl_batch_init(&o->out, &q->out)) == 0)
			o->out_init = true;
	}
	if (rc) {
		sl_ops_free(o);
		return rc;
	}
	*out = o;
	return 0;
}

void sl_ops_free(struct sl_ops *o)
{
	if (!o)
		return;
	sl_dedup_free(o->dd);
	sl_groupby_free(o->gb);
	if (o->out_init)
		sl_batch_release(&o->out);
	free(o->keep);
	free(o);
}

/*
 * dropDuplicates and groupBy on both cores: a thread deduplicates the rows
 * block by block while this one aggregates the blocks it has finished.
 * Only the dedup thread uses the read transaction until it is joined.
 */
#define PIPE_BLOCK 32768

struct pipe {
	struct sl_ops *o;
	struct sl_txn *t;
	const struct sl_batch *in;
	int64_t wm_ms;
	struct sl_op_metrics *m;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t done; /* rows deduplicated so far (guarded by mu) */
	int rc;      /* the dedup thread's error (guarded by mu) */
};

static void *dedup_main(void *arg)
{
	struct pipe *p = arg;
	size_t n = p->in->nrows;
	int rc = 0;

	for (size_t from = 0; from < n && rc == 0; from += PIPE_BLOCK) {
		size_t to = from + PIPE_BLOCK < n ? from + PIPE_BLOCK : n;
		rc = sl_dedup_rows(p->o->dd, p->t, p->in, p->o->keep, from, to, p->wm_ms, p->m);
		pthread_mutex_lock(&p->mu);
		p->done = rc ? n : to;
		p->rc = rc;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	if (rc == 0 && (rc = sl_dedup_sort(p->o->dd))) {
		pthread_mutex_lock(&p->mu);
		p->rc = rc;
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

static int run_pipelined(struct sl_ops *o, struct sl_txn *t, int64_t wm_ms, struct sl_batch *in,
			 struct sl_ops_result *res, char *err, size_t errlen)
{
	struct pipe p = {.o = o, .t = t, .in = in, .wm_ms = wm_ms, .m = &res->m[0]};
	pthread_t th;
	int rc, grc = 0;

	if ((rc = sl_dedup_begin(o->dd, t, in)) ||
	    (rc = sl_groupby_begin(o->gb, t, in, &o->out)))
		return rc;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	if ((rc = pthread_create(&th, NULL, dedup_main, &p))) {
		pthread_cond_destroy(&p.cv);
		pthread_mutex_destroy(&p.mu);
		return rc;
	}
	for (size_t from = 0; from < in->nrows && grc == 0; from += PIPE_BLOCK) {
		size_t to = from + PIPE_BLOCK < in->nrows ? from + PIPE_BLOCK : in->nrows;
		pthread_mutex_lock(&p.mu);
		while (p.done < to)
			pthread_cond_wait(&p.cv, &p.mu);
		rc = p.rc;
		pthread_mutex_unlock(&p.mu);
		if (rc)
			break;
		grc = sl_groupby_rows(o->gb, in, o->keep, from, to, err, errlen);
	}
	pthread_join(th, NULL);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	if (p.rc)
		return p.rc;
	if (grc)
		return grc;
	sl_batch_trim(in, 1 << 16); /* consumed: its memory goes before the output's comes */
	if ((rc = sl_dedup_end(o->dd, t, wm_ms, &res->m[0])))
		return rc;
	return sl_groupby_end(o->gb, t, wm_ms, &o->out, &res->m[1], err, errlen);
}

int sl_ops_process(struct sl_ops *o, struct sl_txn *t, int64_t wm_ms, struct sl_batch *in,
		   const struct sl_batch **out, struct sl_ops_result *res, char *err,
		   size_t errlen)
{
	const struct sl_query_config *q = o->q;
	struct sl_op_metrics *late = NULL;
	int rc;

	memset(res, 0, sizeof(*res));
	res->wm_ms = res->next_wm_ms = wm_ms;
	sl_watermark_stats_init(&res->et);
	if (q->has_watermark) {
		struct sl_watermark w;
		sl_watermark_init(&w, q->wm_delay_us, wm_ms);
		sl_watermark_stats_add_column(&res->et, in, q->wm_col);
		sl_watermark_advance(&w, &res->et);
		res->next_wm_ms = w.wm_ms;
	}
	if (o->dd) {
		struct sl_op_metrics *m = &res->m[res->nm++];
		m->name = q->dedup_within_wm ? "dedupeWithinWatermark" : "dedupe";
		m->is_dedup = true;
		late = m;
	}
	if (o->gb) {
		struct sl_op_metrics *m = &res->m[res->nm++];
		m->name = "stateStoreSave";
		/* complete mode keeps every group: late rows still count there (Spark) */
		if (!late && q->output_mode != SL_OUTPUT_COMPLETE)
			late = m;
	}
	if (in->nrows > o->keepcap) {
		uint8_t *k = realloc(o->keep, in->nrows);
		if (!k)
			return ENOMEM;
		o->keep = k;
		o->keepcap = in->nrows;
	}
	if (in->nrows)
		memset(o->keep, 1, in->nrows);
	/* late rows: event time <= the batch's watermark (a null is never late) */
	if (late && q->has_watermark && wm_ms > 0) {
		for (size_t r = 0; r < in->nrows; r++) {
			if (sl_batch_is_null(in, r, q->wm_col) ||
			    !sl_watermark_is_late(wm_ms, in->cols[q->wm_col].cells[r].i))
				continue;
			o->keep[r] = 0;
			late->dropped_wm++;
		}
	}
	if (o->dd && o->gb && in->nrows >= 4 * PIPE_BLOCK) {
		if ((rc = run_pipelined(o, t, wm_ms, in, res, err, errlen)))
			return rc;
		*out = &o->out;
		return 0;
	}
	if (o->dd && (rc = sl_dedup_process(o->dd, t, in, o->keep, wm_ms, &res->m[0])))
		return rc;
	if (o->gb) {
		rc = sl_groupby_process(o->gb, t, in, o->keep, wm_ms, &o->out, &res->m[res->nm - 1],
					err, errlen);
		if (rc)
			return rc;
		*out = &o->out;
		return 0;
	}
	sl_batch_keep(in, o->keep);
	*out = in;
	return 0;
}

void sl_ops_trim(struct sl_ops *o)
{
	if (o->out_init)
		sl_batch_trim(&o->out, 1 << 16);
}

int sl_ops_apply(struct sl_ops *o, struct sl_txn *t)
{
	int rc;
	/* 'A' keys sort before 'D' keys: in this order both runs can append */
	if (o->gb && (rc = sl_groupby_apply(o->gb, t)))
		return rc;
	if (o->dd && (rc = sl_dedup_apply(o->dd, t)))
		return rc;
	return 0;
}

int sl_ops_due(const struct sl_query_config *q, uint32_t qid, struct sl_txn *t, int64_t wm_ms,
	       bool *due)
{
	int rc;

	*due = false;
	if (!q->has_watermark)
		return 0;
	if (q->ndedup && ((rc = sl_dedup_due(q, qid, t, wm_ms, due)) || *due))
		return rc;
	if (q->naggs)
		return sl_groupby_due(q, qid, t, wm_ms, due);
	return 0;
}
