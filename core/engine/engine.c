/* SPDX-License-Identifier: MIT */
/*
 * The query loop: runs one query's batches (run_batch), through its source
 * and sink contracts (source.h, sink_ops.h): plan and log offsets (plan.c),
 * read the source's partitions, run the operators, let the sink stage its
 * output, commit (commit.c). A batch with offsets and no commit re-runs
 * over exactly its logged range.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "catalog.h"
#include "compat.h"
#include "config.h"
#include "decode.h"
#include "engine.h"
#include "engine_int.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "metrics.h"
#include "ops.h"
#include "qindex.h"
#include "qlog.h"
#include "sink_console.h"
#include "sink_exec.h"
#include "sink_file.h"
#include "sink_kafka.h"
#include "sluice-build.h"
#include "source_file.h"
#include "source_kafka.h"
#include "source_query.h"
#include "source_process.h"
#include "source_rate.h"
#include "source_socket.h"

/* Reads every partition of the batch's range into b; FAILFAST stops at the first bad line. */
static int read_all(struct plan *p, struct sl_batch *b, struct sl_decode_stats *st,
		    struct sl_engine_report *r)
{
	int rc = 0;

	for (size_t i = 0; i < p->range.nparts && rc == 0; i++) {
		if (p->stop && *p->stop) {
			/* an unmount: the batch is replayed from its offsets at the next start */
			snprintf(r->error, sizeof(r->error), "batch %" PRIu64 " abandoned by the unmount",
				 p->batch);
			return ECANCELED;
		}
		rc = p->sops->read(p->src, i, b, st, r->error, sizeof(r->error));
	}
	return rc;
}

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

/* The operators' output rows are formatted: free them before the commit ends. */
static void ops_spent(void *ctx)
{
	sl_ops_trim(ctx);
}

/* Runs one batch: 1 when there was nothing to do, 0 when committed, or an error. */
static int run_batch(struct sl_land *l, struct plan *p, struct sl_ops *ops, struct sl_batch *b,
		     struct sl_decode_stats *st, struct sl_engine_report *r)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	struct sl_ops_result res;
	const struct sl_batch *outb = b;
	int rc;

	int64_t t0 = sl_engine_mono_ns(), t1;
	/* a source that asks a child does it here, holding no transaction */
	if (p->sops->prepare && (rc = p->sops->prepare(p->src, r->error, sizeof(r->error)))) {
		if (!r->error[0])
			snprintf(r->error, sizeof(r->error), "cannot plan a batch: %s",
				 sl_strerror(rc));
		return rc;
	}
	p->ts_ms = sl_engine_wall_ns() / 1000000;
	if ((rc = sl_catalog_write(cat, sl_engine_plan_apply, p))) {
		if (p->range.why[0])
			snprintf(r->error, sizeof(r->error), "%s", p->range.why);
		else
			snprintf(r->error, sizeof(r->error), "cannot plan a batch: %s",
				 sl_strerror(rc));
		return rc;
	}
	if (p->range.nparts == 0 && !p->nodata)
		return 1;
	SL_FAULT("engine.after_offsets");
	t1 = sl_engine_mono_ns();
	sl_batch_clear(b);
	sl_decode_stats_reset(st);
	if ((rc = read_all(p, b, st, r)))
		return rc;
	if (ops && (rc = run_ops(l, p, ops, b, &outb, &res, r)))
		return rc;
	if (outb != b)
		sl_batch_trim(b, 1 << 16); /* the input rows are spent: free a big batch now */

	struct report rep = {.p = p, .st = st, .ops = ops ? &res : NULL, .t0 = t0, .t1 = t1};
	sl_engine_report_read(cat, &rep);
	if (ops)
		sl_catalog_make_room(cat, state_room(&res) + (1 << 20));
	/* ids from here on stay unsettled until the commit: a crash leaves no leak */
	uint64_t pin = 0;
	if ((rc = sl_catalog_next_id(cat, &pin)) == 0 && sl_land_pin(l, pin))
		pin = 0; /* all pins taken: a crash now may leave this batch's blobs behind */
	struct commit c = {.p = p, .report = &rep, .rows = st->lines, .ops = ops,
			   .next_wm = ops ? res.next_wm_ms : p->wm_ms};
	bool written = false, format_failed = false;
	if (rc == 0) {
		written = true;
		rc = p->kops->write(p->sink, p->batch, outb, ops ? ops_spent : NULL, ops);
	}
	if (rc == 0) {
		SL_FAULT("engine.before_commit");
		rc = sl_catalog_write(cat, sl_engine_commit_apply, &c);
		SL_FAULT("engine.after_commit");
	}
	int end_rc = written ? p->kops->end(p->sink, rc == 0, &format_failed) : 0;
	if (ops)
		sl_ops_trim(ops);

	const char *why = rc && p->kops->error ? p->kops->error(p->sink) : "";
	if (rc && why[0]) {
		snprintf(r->error, sizeof(r->error), "batch %" PRIu64 ": %s", p->batch, why);
	} else if (rc) {
		if (format_failed)
			snprintf(r->error, sizeof(r->error), "cannot format batch %" PRIu64 ": %s",
				 p->batch, sl_strerror(rc));
		else
			snprintf(r->error, sizeof(r->error), "cannot commit batch %" PRIu64 ": %s",
				 p->batch, sl_strerror(rc));
	} else {
		r->batches++;
		r->rows += st->lines;
		r->malformed += st->malformed;
		if ((rc = end_rc))
			snprintf(r->error, sizeof(r->error), "cannot remove the parts batch %" PRIu64
				 " replaced: %s", p->batch, sl_strerror(rc));
		if (rc == 0 && p->sops->commit && (rc = p->sops->commit(p->src)))
			snprintf(r->error, sizeof(r->error), "cannot clean the sources of batch %" PRIu64
				 ": %s", p->batch, sl_strerror(rc));
	}
	if (pin)
		sl_land_unpin(l, pin);
	if (rc == 0)
		p->prev_t0_ns = t0;
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
	rc = sl_qlog_get(t, qid, 'd', 0, &v, &len);
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
#if SL_HAVE_KAFKA
		/* librdkafka's properties, which the config layer cannot know */
		if (q->sink_format == SL_SINK_KAFKA && (rc = sl_sink_kafka_check(q, err, errlen)))
			return rc;
#endif
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

/* The source behind a query's source.format. */
static const struct sl_source_ops *source_ops(const struct sl_query_config *q)
{
	switch (q->source.format) {
	case SL_SOURCE_RATE:
	case SL_SOURCE_RATE_MICRO_BATCH:
		return &sl_source_rate;
	case SL_SOURCE_QUERY:
		return &sl_source_query;
	case SL_SOURCE_PROCESS:
		return &sl_source_process;
	case SL_SOURCE_SOCKET:
		return &sl_source_socket;
	case SL_SOURCE_KAFKA:
		return &sl_source_kafka;
	default:
		return &sl_source_file;
	}
}

/* The sink behind a query's sink.format. */
static const struct sl_sink_ops *sink_ops(const struct sl_query_config *q)
{
	switch (q->sink_format) {
	case SL_SINK_CONSOLE:
		return &sl_sink_console;
	case SL_SINK_EXEC:
		return &sl_sink_exec;
#if SL_HAVE_KAFKA
	case SL_SINK_KAFKA:
		return q->kafka_transactional ? &sl_sink_kafka_txn : &sl_sink_kafka;
#endif
	default:
		return &sl_sink_file;
	}
}

int sl_engine_backlog(struct sl_txn *t, const struct sl_query_config *q,
		      struct sl_engine_backlog *out)
{
	struct sl_source_backlog b = {0};
	uint32_t qid = 0;
	int rc = sl_qindex_qid(t, q->name, &qid);

	if (rc && rc != SL_NOTFOUND)
		return rc;
	rc = source_ops(q)->pending(t, q, qid, &b);
	if (rc == 0 && !qid)
		memset(b.v, 0, sizeof(b.v)); /* never started */
	*out = (struct sl_engine_backlog){.known = b.known, .unit = {b.unit[0], b.unit[1]},
					  .v = {b.v[0], b.v[1]},
					  .metric = {b.metric[0], b.metric[1]},
					  .mv = {b.mv[0], b.mv[1]}};
	return rc;
}

const char *sl_engine_guarantee(const struct sl_query_config *q)
{
	return sink_ops(q)->guarantee == SL_SINK_EXACTLY_ONCE ? "exactly-once" : "at-least-once";
}

struct error_rec {
	uint32_t qid;
	const char *text;
	int rc;
};

/* lastError, and the error code metrics classify (never the text) */
static int error_rec_apply(struct sl_txn *t, void *arg)
{
	struct error_rec *e = arg;
	int rc = sl_qlog_put(t, e->qid, 'e', 0, e->text, strlen(e->text));
	return rc ? rc : sl_metrics_set_error(t, e->qid, e->rc);
}

int sl_engine_run_query(struct sl_land *l, const struct sl_query_config *q,
			const struct sl_engine_limits *lim, struct sl_engine_report *r)
{
	struct sl_catalog *cat = sl_land_catalog(l);
	struct plan p = {.q = q, .stop = lim->stop, .sops = source_ops(q),
			 .kops = sink_ops(q)};
	uint64_t done = 0;
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
	bool ready = false;
	struct sl_source_args sa = {.l = l, .q = q, .qid = p.qid, .seq_limit = lim->seq_limit,
				    .ignore_caps = lim->ignore_caps, .stop = lim->stop,
				    .reader = lim->reader};
	struct sl_sink_args ka = {.l = l, .q = q, .qid = p.qid, .stop = lim->stop};
	if ((rc = p.sops->open(&sa, &p.src)) || (rc = p.kops->open(&ka, &p.sink)))
		goto fail;
	/* cleanSource or a snapshot replace interrupted by a crash is redone first */
	if ((p.sops->commit && (rc = p.sops->commit(p.src))) || (rc = p.kops->settle(p.sink))) {
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
	sl_engine_make_uuid(p.uuid);
	sl_engine_make_uuid(p.run_id);
	if ((rc = sl_batch_init(&b, &q->source.schema)))
		goto fail;
	if ((rc = sl_decode_stats_init(&st, q->source.schema.n))) {
		sl_batch_release(&b);
		goto fail;
	}
	if (SL_SOURCE_IS_FILE(q->source.format) || q->source.format == SL_SOURCE_QUERY) {
		/* the decoder fills only the columns the query reads (sl_decoder_new) */
		uint8_t *used = malloc(q->source.schema.n + 1);
		if (!used) {
			sl_decode_stats_release(&st);
			sl_batch_release(&b);
			rc = ENOMEM;
			goto fail;
		}
		sl_config_used_columns(q, used);
		sl_batch_project(&b, used);
		free(used);
	}
	ready = true;
	while ((!lim->max_batches || done < lim->max_batches) && !(lim->stop && *lim->stop)) {
		rc = run_batch(l, &p, ops, &b, &st, r);
		if (rc == 1 && lim->idle && lim->idle(lim->idle_ctx))
			continue; /* nothing new: asked again after pollInterval, source open */
		if (rc)
			break;
		done++;
		if (lim->committed)
			lim->committed(lim->committed_ctx);
	}
	if (rc == 1)
		rc = 0;
fail:
	if (rc) {
		/* lastError: kept until a batch of this query commits */
		if (!r->error[0])
			snprintf(r->error, sizeof(r->error), "%s", sl_strerror(rc));
		struct error_rec e = {.qid = p.qid, .text = r->error, .rc = rc};
		sl_catalog_write(cat, error_rec_apply, &e);
	}
	if (ready) {
		sl_decode_stats_release(&st);
		sl_batch_release(&b);
	}
	sl_ops_free(ops);
	free(desc);
	if (p.sink)
		p.kops->close(p.sink);
	if (p.src)
		p.sops->stop(p.src);
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
	/* upstreams first: a pipeline of query sources drains in one run */
	for (size_t k = 0; k < sl_config_nqueries(cfg); k++) {
		const struct sl_query_config *q = sl_config_query_ordered(cfg, k);
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
