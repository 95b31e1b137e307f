/* SPDX-License-Identifier: MIT */
/*
 * The JSON the mount renders: status/landing.json and the progress reports
 * (status/<query>.json[l]), with jansson (the engine layer's only user).
 */
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ops.h"
#include "render.h"
#include "source.h"
#include "timestamp.h"

int sl_render_landing(const struct sl_land_counters *c, char **out, size_t *len)
{
	json_t *o = json_object(), *refused = json_object();
	char *s;

	if (!o || !refused) {
		json_decref(o);
		json_decref(refused);
		return ENOMEM;
	}
	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		char buf[16];
		const char *name = sl_errno_name(e);
		if (!c->refused[e])
			continue;
		if (!name) {
			snprintf(buf, sizeof(buf), "E%d", e);
			name = buf;
		}
		json_object_set_new(refused, name, json_integer((json_int_t)c->refused[e]));
	}
	json_object_set_new(o, "filesLanded", json_integer((json_int_t)c->files_landed));
	json_object_set_new(o, "bytesLanded", json_integer((json_int_t)c->bytes_landed));
	json_object_set_new(o, "filesInFlight", json_integer((json_int_t)c->in_flight));
	json_object_set_new(o, "tempAbandoned", json_integer((json_int_t)c->temp_abandoned));
	json_object_set_new(o, "refused", refused);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return ENOMEM;
	*len = strlen(s);
	/* a trailing newline, so that `cat` output ends cleanly */
	char *t = realloc(s, *len + 2);
	if (!t) {
		free(s);
		return ENOMEM;
	}
	t[(*len)++] = '\n';
	t[*len] = 0;
	*out = t;
	return 0;
}

int sl_render_with_error(const char *report, size_t len, const char *error, size_t elen,
		       char **out, size_t *outlen)
{
	json_t *o = NULL;
	if (report && len)
		o = json_loadb(report, len, JSON_DISABLE_EOF_CHECK, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	if (!o)
		return ENOMEM;
	json_object_set_new(o, "lastError", json_stringn(error, elen));
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(o);
	if (!s)
		return ENOMEM;
	size_t n = strlen(s);
	char *r = realloc(s, n + 2);
	if (!r) {
		free(s);
		return ENOMEM;
	}
	r[n] = '\n';
	r[n + 1] = 0;
	*out = r;
	*outlen = n + 1;
	return 0;
}

int sl_render_progress(const struct sl_progress *p, char **out, size_t *len)
{
	char ts[40];
	json_t *o = json_object(), *d = json_object(), *src = json_object(), *sink = json_object();
	json_t *nulls = json_object(), *backlog = json_object(), *sources = json_array();
	char *s;

	if (!o || !d || !src || !sink || !nulls || !backlog || !sources) {
		json_decref(o), json_decref(d), json_decref(src), json_decref(sink);
		json_decref(nulls), json_decref(backlog), json_decref(sources);
		return ENOMEM;
	}
	sl_timestamp_format(p->timestamp_ms * 1000, ts);
	json_object_set_new(o, "id", json_string(p->id));
	json_object_set_new(o, "runId", json_string(p->run_id));
	json_object_set_new(o, "name", json_string(p->name));
	json_object_set_new(o, "timestamp", json_string(ts));
	json_object_set_new(o, "batchId", json_integer((json_int_t)p->batch_id));
	json_object_set_new(o, "numInputRows", json_integer((json_int_t)p->num_input_rows));
	json_object_set_new(o, "inputRowsPerSecond", json_real(p->input_rows_per_s));
	json_object_set_new(o, "processedRowsPerSecond", json_real(p->processed_rows_per_s));
	/* Spark sorts the keys of durationMs */
	json_object_set_new(d, "addBatch", json_integer(p->ms_add_batch));
	json_object_set_new(d, "commitOffsets", json_integer(p->ms_commit_offsets));
	json_object_set_new(d, "latestOffset", json_integer(p->ms_latest_offset));
	json_object_set_new(d, "triggerExecution", json_integer(p->ms_trigger));
	json_object_set_new(d, "walCommit", json_integer(p->ms_wal_commit));
	json_object_set_new(o, "durationMs", d);
	if (p->has_event_time) {
		json_t *et = json_object();
		char buf[40];
		/* sorted keys, as Spark; a batch without event times shows the watermark only */
		if (et && p->et_rows) {
			sl_timestamp_format(p->et_avg_ms * 1000, buf);
			json_object_set_new(et, "avg", json_string(buf));
			sl_timestamp_format(p->et_max_ms * 1000, buf);
			json_object_set_new(et, "max", json_string(buf));
			sl_timestamp_format(p->et_min_ms * 1000, buf);
			json_object_set_new(et, "min", json_string(buf));
		}
		sl_timestamp_format(p->et_wm_ms * 1000, buf);
		json_object_set_new(et, "watermark", json_string(buf));
		json_object_set_new(o, "eventTime", et);
	}
	json_t *ops = json_array();
	for (size_t i = 0; ops && i < p->nops; i++) {
		const struct sl_op_metrics *m = &p->ops[i];
		json_t *op = json_object();
		json_object_set_new(op, "operatorName", json_string(m->name));
		json_object_set_new(op, "numRowsTotal", json_integer((json_int_t)m->rows_total));
		json_object_set_new(op, "numRowsUpdated", json_integer((json_int_t)m->rows_updated));
		json_object_set_new(op, "numRowsRemoved", json_integer((json_int_t)m->rows_removed));
		json_object_set_new(op, "memoryUsedBytes", json_integer((json_int_t)m->bytes));
		json_object_set_new(op, "numRowsDroppedByWatermark",
				    json_integer((json_int_t)m->dropped_wm));
		if (m->is_dedup) {
			json_t *cm = json_object();
			json_object_set_new(cm, "numDroppedDuplicateRows",
					    json_integer((json_int_t)m->dropped_dup));
			json_object_set_new(op, "customMetrics", cm);
		}
		json_array_append_new(ops, op);
	}
	json_object_set_new(o, "stateOperators", ops);
	json_object_set_new(src, "description", json_string(p->source_desc));
	json_t *start = p->start_offset && p->start_offset[0]
				? json_loads(p->start_offset, JSON_DECODE_ANY, NULL) : NULL;
	json_t *end = p->end_offset ? json_loads(p->end_offset, JSON_DECODE_ANY, NULL) : NULL;
	if (!start)
		start = json_null();
	if (!end)
		end = json_null();
	json_object_set_new(src, "startOffset", start);
	json_object_set_new(src, "endOffset", end);
	json_t *latest = p->latest_offset && p->latest_offset[0]
				 ? json_loads(p->latest_offset, JSON_DECODE_ANY, NULL)
				 : NULL;
	json_object_set_new(src, "latestOffset", latest ? latest : json_null());
	json_object_set_new(src, "numInputRows", json_integer((json_int_t)p->num_input_rows));
	json_object_set_new(src, "inputRowsPerSecond", json_real(p->input_rows_per_s));
	json_object_set_new(src, "processedRowsPerSecond", json_real(p->processed_rows_per_s));
	if (p->n_source_metrics) {
		/* Spark's SourceProgress.metrics: a map of strings, left out when empty */
		json_t *sm = json_object();
		for (size_t i = 0; sm && i < p->n_source_metrics; i++) {
			char v[40];
			double d = p->source_metric_reals ? p->source_metric_reals[i] : NAN;
			if (!isnan(d)) {
				/* Java's Double.toString for the values met here: "1.0", "2.5" */
				for (int prec = 1; prec <= 17; prec++) {
					snprintf(v, sizeof(v), "%.*g", prec, d);
					if (strtod(v, NULL) == d)
						break;
				}
				if (!strpbrk(v, ".en"))
					strncat(v, ".0", sizeof(v) - strlen(v) - 1);
			} else {
				snprintf(v, sizeof(v), "%llu",
					 (unsigned long long)p->source_metric_values[i]);
			}
			json_object_set_new(sm, p->source_metric_names[i], json_string(v));
		}
		json_object_set_new(src, "metrics", sm);
	}
	json_array_append_new(sources, src);
	json_object_set_new(o, "sources", sources);
	json_object_set_new(sink, "description", json_string(p->sink_desc));
	json_object_set_new(sink, "numOutputRows", json_integer((json_int_t)p->num_output_rows));
	if (p->sink_guarantee)
		json_object_set_new(sink, "guarantee", json_string(p->sink_guarantee));
	json_object_set_new(o, "sink", sink);
	json_object_set_new(o, "numMalformedRows", json_integer((json_int_t)p->malformed));
	for (size_t i = 0; i < p->n_nulls; i++)
		json_object_set_new(nulls, p->null_names[i],
				    json_integer((json_int_t)p->null_counts[i]));
	json_object_set_new(o, "nullCounts", nulls);
	if (p->backlog && p->backlog->known) {
		for (int u = 0; u < 2 && p->backlog->unit[u]; u++)
			json_object_set_new(backlog, p->backlog->unit[u],
					    json_integer((json_int_t)p->backlog->v[u]));
		json_object_set_new(o, "backlog", backlog);
	} else {
		json_decref(backlog);
		json_object_set_new(o, "backlog", json_null());
	}
	json_object_set_new(o, "skippedByMaxFileAge", json_integer((json_int_t)p->skipped_age));
	json_object_set_new(o, "skippedAlreadySeen", json_integer((json_int_t)p->skipped_seen));
	if (p->last_error)
		json_object_set_new(o, "lastError", json_string(p->last_error));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(o);
	if (!s)
		return ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}
