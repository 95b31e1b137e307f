/* SPDX-License-Identifier: MIT */
/*
 * Prometheus metrics (metrics.h): each query's cumulative figures, kept in
 * its batches' commits, and their rendering with the landing counters in
 * the text exposition format, version 0.0.4. Names are sluice_<what>_<unit>
 * in base units, counters end in _total; the output is the same for the
 * same catalog (families, queries and labels in a fixed order).
 *
 * Entries in the checkpoint log (core/sources/qlog.h), n 0:
 *   'h' the query's figures, rewritten by each commit:
 *       OFFSET SIZE      MEANING (big-endian u64 each)
 *       0      8         input rows, all batches
 *       8      8         output rows, all batches
 *       16     8         malformed rows, all batches
 *       24     8         rows dropped by the watermark, all batches
 *       32     8         state rows after the last batch
 *       40     8         state bytes after the last batch
 *       48     8*NDUR    batches per duration bucket (not cumulative; the last is +Inf)
 *       48+8*NDUR 8      their total duration (ms)
 *       A longer record (a later version's) is read up to this length.
 *   'r' the error behind 'e' (lastError): rc as a big-endian s32. Shown
 *       only while 'e' exists (a commit clears 'e' and leaves 'r').
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "err.h"
#include "land.h"
#include "metrics.h"
#include "reload.h"
#include "qindex.h"
#include "qlog.h"
#include "strbuf.h"

/* Batch durations (ms): fine where a landing's batch falls, up to 5 minutes */
static const uint32_t dur_bounds_ms[] = {5,    10,   25,    50,    100,   250,   500,
					 1000, 2500, 5000, 10000, 30000, 60000, 300000};
#define NDUR (sizeof(dur_bounds_ms) / sizeof(dur_bounds_ms[0]) + 1)
#define FIG_LEN (48 + 8 * NDUR + 8)

/* A query's cumulative figures: the 'h' record. */
struct figures {
	uint64_t input_rows, output_rows, malformed_rows, late_rows;
	uint64_t state_rows, state_bytes;
	uint64_t dur[NDUR]; /* batches per bucket, not cumulative */
	uint64_t dur_sum_ms;
};

static int figures_read(struct sl_txn *t, uint32_t qid, struct figures *f)
{
	const unsigned char *v;
	const void *d;
	size_t len;
	int rc;

	memset(f, 0, sizeof(*f));
	rc = sl_qlog_get(t, qid, 'h', 0, &d, &len);
	if (rc == SL_NOTFOUND)
		return 0; /* no batch committed yet (or only before this version) */
	if (rc)
		return rc;
	if (len < FIG_LEN)
		return SL_ECORRUPT;
	v = d;
	f->input_rows = get_be64(v);
	f->output_rows = get_be64(v + 8);
	f->malformed_rows = get_be64(v + 16);
	f->late_rows = get_be64(v + 24);
	f->state_rows = get_be64(v + 32);
	f->state_bytes = get_be64(v + 40);
	for (size_t b = 0; b < NDUR; b++)
		f->dur[b] = get_be64(v + 48 + 8 * b);
	f->dur_sum_ms = get_be64(v + 48 + 8 * NDUR);
	return 0;
}

static int figures_write(struct sl_txn *t, uint32_t qid, const struct figures *f)
{
	unsigned char v[FIG_LEN];

	put_be64(v, f->input_rows);
	put_be64(v + 8, f->output_rows);
	put_be64(v + 16, f->malformed_rows);
	put_be64(v + 24, f->late_rows);
	put_be64(v + 32, f->state_rows);
	put_be64(v + 40, f->state_bytes);
	for (size_t b = 0; b < NDUR; b++)
		put_be64(v + 48 + 8 * b, f->dur[b]);
	put_be64(v + 48 + 8 * NDUR, f->dur_sum_ms);
	return sl_qlog_put(t, qid, 'h', 0, v, sizeof(v));
}

int sl_metrics_add_batch(struct sl_txn *t, uint32_t qid, const struct sl_metrics_batch *b)
{
	uint64_t ms = b->duration_ms > 0 ? (uint64_t)b->duration_ms : 0;
	struct figures f;
	size_t k = 0;
	int rc;

	if ((rc = figures_read(t, qid, &f)))
		return rc;
	f.input_rows += b->input_rows;
	f.output_rows += b->output_rows;
	f.malformed_rows += b->malformed_rows;
	f.late_rows += b->late_rows;
	f.state_rows = b->state_rows;
	f.state_bytes = b->state_bytes;
	while (k < NDUR - 1 && ms > dur_bounds_ms[k])
		k++;
	f.dur[k]++;
	f.dur_sum_ms += ms;
	return figures_write(t, qid, &f);
}

int sl_metrics_set_error(struct sl_txn *t, uint32_t qid, int rc)
{
	unsigned char v[4];
	put_be32(v, (uint32_t)rc);
	return sl_qlog_put(t, qid, 'r', 0, v, sizeof(v));
}

/* ---- error classes ---- */

enum eclass { EC_NONE, EC_MALFORMED, EC_CONFIG, EC_NO_SPACE, EC_IO, EC_OTHER, EC_N };

static const char *const eclass_names[EC_N] = {"none", "malformed", "config",
					       "no_space", "io", "other"};

/*
 * The class of the error that stopped or delays a query: FAILFAST on a
 * malformed row and a config this version cannot run stop it (trigger.c);
 * a full disk and I/O errors are retried.
 */
static enum eclass classify(int rc)
{
	switch (rc) {
	case SL_EMALFORMED:
	case SL_EDATALOSS: return EC_MALFORMED;
	case SL_ECONFIG:
	case SL_EVERSION:
	case ENOTSUP: return EC_CONFIG;
	case ENOSPC:
	case EDQUOT:
	case SL_EMAPFULL: return EC_NO_SPACE;
	case EIO:
	case EROFS:
	case SL_ECORRUPT: return EC_IO;
	case ECANCELED: return EC_NONE; /* an unmount abandoned a batch: it replays at start */
	}
	return EC_OTHER;
}

/* The class of query qid's error state: none without a lastError. */
static int error_class(struct sl_txn *t, uint32_t qid, enum eclass *out)
{
	const void *d;
	size_t len;
	int rc = sl_qlog_get(t, qid, 'e', 0, &d, &len);

	*out = EC_NONE;
	if (rc == SL_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	rc = sl_qlog_get(t, qid, 'r', 0, &d, &len);
	if (rc == SL_NOTFOUND || (rc == 0 && len != 4)) {
		*out = EC_OTHER; /* a lastError an older version wrote */
		return 0;
	}
	if (rc)
		return rc;
	*out = classify((int)(int32_t)get_be32(d));
	return 0;
}

/* ---- one query's figures, read for rendering ---- */

struct qfig {
	const char *name;       /* borrowed from the config */
	bool has_wm;            /* the query has a watermark and a batch committed */
	uint64_t batches;       /* the next batch id */
	uint64_t expired;       /* out/ parts retention removed (meta q.<qid>.expired) */
	struct sl_backlog backlog;     /* files and bytes: the file source's, else zero */
	struct sl_engine_backlog units; /* in the source's own units */
	int64_t oldest_age_ms;  /* age of the oldest backlogged file; 0 when none */
	int64_t wm_ms;          /* the watermark (ms) ... */
	int64_t lag_ms;         /* ... and how far behind the wall clock */
	enum eclass err;
	struct sl_skips skipped; /* files skipped since this version counted them */
	struct figures f;
};

static int read_query(struct sl_txn *t, const struct sl_query_config *q, int64_t now_ms,
		      struct qfig *out)
{
	struct sl_engine_status es;
	int64_t landed_ns;
	uint32_t qid;
	int rc;

	memset(out, 0, sizeof(*out));
	out->name = q->name;
	if (!t)
		return 0;
	rc = sl_qindex_qid(t, q->name, &qid);
	if (rc == SL_NOTFOUND)
		return 0; /* never started: zeros */
	if (rc || (rc = sl_engine_status(t, qid, &es)) ||
	    (rc = sl_engine_backlog(t, q, &out->units)) ||
	    (rc = figures_read(t, qid, &out->f)) || (rc = error_class(t, qid, &out->err)) ||
	    (rc = sl_qindex_skips_total(t, qid, &out->skipped)))
		return rc;
	if (out->units.unit[0] && !strcmp(out->units.unit[0], "files"))
		out->backlog = (struct sl_backlog){.files = out->units.v[0], .bytes = out->units.v[1]};
	out->batches = es.has_batch ? es.batch + 1 : 0;
	char key[48];
	sl_qlog_meta_key(key, sizeof(key), qid, "expired");
	if ((rc = sl_txn_meta_get(t, key, &out->expired)))
		return rc;
	out->has_wm = q->has_watermark && es.has_batch;
	out->wm_ms = es.wm_ms;
	out->lag_ms = now_ms - es.wm_ms;
	rc = sl_qindex_oldest(t, qid, &landed_ns);
	if (rc == 0 && landed_ns / 1000000 < now_ms)
		out->oldest_age_ms = now_ms - landed_ns / 1000000;
	return rc == SL_NOTFOUND ? 0 : rc;
}

/* ---- rendering ---- */

/* A family's # HELP and # TYPE lines. */
static void family(struct sl_strbuf *b, const char *name, const char *type, const char *help)
{
	sl_strbuf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* v / 10^digits as a decimal without trailing zeros: exact, unlike %g. */
static void add_scaled(struct sl_strbuf *b, int64_t v, unsigned digits)
{
	uint64_t scale = 1, u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char frac[24];

	for (unsigned i = 0; i < digits; i++)
		scale *= 10;
	sl_strbuf_addf(b, "%s%" PRIu64, v < 0 ? "-" : "", u / scale);
	if (u % scale == 0)
		return;
	snprintf(frac, sizeof(frac), "%0*" PRIu64, (int)digits, u % scale);
	for (size_t n = strlen(frac); n > 0 && frac[n - 1] == '0'; n--)
		frac[n - 1] = 0;
	sl_strbuf_addf(b, ".%s", frac);
}

/* `{query="<name>"`, escaped as the format asks (names are [A-Za-z0-9_-] today) */
static void query_label(struct sl_strbuf *b, const char *name)
{
	sl_strbuf_adds(b, "{query=\"");
	for (const char *p = name; *p; p++) {
		if (*p == '\\' || *p == '"')
			sl_strbuf_addc(b, '\\');
		if (*p == '\n')
			sl_strbuf_adds(b, "\\n");
		else
			sl_strbuf_addc(b, *p);
	}
	sl_strbuf_addc(b, '"');
}

/* `name[suffix]{query="q"}` or `name[suffix]`, then a space: a sample's head. */
static void head(struct sl_strbuf *b, const char *name, const char *suffix, const char *qname)
{
	sl_strbuf_adds(b, name);
	sl_strbuf_adds(b, suffix);
	if (qname) {
		query_label(b, qname);
		sl_strbuf_addc(b, '}');
	}
	sl_strbuf_addc(b, ' ');
}

static void sample_u64(struct sl_strbuf *b, const char *name, const char *qname, uint64_t v)
{
	head(b, name, "", qname);
	sl_strbuf_addf(b, "%" PRIu64 "\n", v);
}

/* A gauge in seconds from milliseconds. */
static void sample_ms(struct sl_strbuf *b, const char *name, const char *qname, int64_t ms)
{
	head(b, name, "", qname);
	add_scaled(b, ms, 3);
	sl_strbuf_addc(b, '\n');
}

/*
 * A histogram's samples: count[k] observations in bucket k (not
 * cumulative; bounds[k] its upper bound in units of 10^-digits seconds,
 * the last bucket +Inf), and their sum in the same units.
 */
struct hist {
	const uint64_t *count;
	const uint32_t *bounds;
	size_t n;
	uint64_t sum;
	unsigned digits;
};

static void histogram(struct sl_strbuf *b, const char *name, const char *qname,
		      const struct hist *h)
{
	uint64_t cum = 0;

	for (size_t k = 0; k < h->n; k++) {
		cum += h->count[k];
		sl_strbuf_addf(b, "%s_bucket", name);
		if (qname) {
			query_label(b, qname);
			sl_strbuf_addc(b, ',');
		} else {
			sl_strbuf_addc(b, '{');
		}
		sl_strbuf_adds(b, "le=\"");
		if (k + 1 < h->n)
			add_scaled(b, h->bounds[k], h->digits);
		else
			sl_strbuf_adds(b, "+Inf");
		sl_strbuf_addf(b, "\"} %" PRIu64 "\n", cum);
	}
	head(b, name, "_sum", qname);
	add_scaled(b, (int64_t)h->sum, h->digits);
	sl_strbuf_addc(b, '\n');
	/* the +Inf bucket's count, so that the two agree even when the shared page tore */
	head(b, name, "_count", qname);
	sl_strbuf_addf(b, "%" PRIu64 "\n", cum);
}

static void render_landing(struct sl_strbuf *b, const struct sl_land_counters *c,
			   const struct sl_land_latency *lat)
{
	family(b, "sluice_landing_files_total", "counter",
	       "Files landed since the data dir was created.");
	sample_u64(b, "sluice_landing_files_total", NULL, c->files_landed);
	family(b, "sluice_landing_bytes_total", "counter",
	       "Bytes of the files landed since the data dir was created.");
	sample_u64(b, "sluice_landing_bytes_total", NULL, c->bytes_landed);
	family(b, "sluice_landing_files_in_flight", "gauge",
	       "Files created through the running mount and not landed yet.");
	sample_u64(b, "sluice_landing_files_in_flight", NULL, c->in_flight);
	family(b, "sluice_landing_temp_abandoned_total", "counter",
	       "Temporary files released and left an hour without a rename.");
	sample_u64(b, "sluice_landing_temp_abandoned_total", NULL, c->temp_abandoned);
	family(b, "sluice_landing_refused_total", "counter",
	       "Operations on in/ refused, by errno, since the data dir was created.");
	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		const char *name = sl_errno_name(e);
		if (!c->refused[e])
			continue;
		if (name)
			sl_strbuf_addf(b, "sluice_landing_refused_total{errno=\"%s\"}", name);
		else
			sl_strbuf_addf(b, "sluice_landing_refused_total{errno=\"E%d\"}", e);
		sl_strbuf_addf(b, " %" PRIu64 "\n", c->refused[e]);
	}
	family(b, "sluice_landing_commit_seconds", "histogram",
	       "Time a landing (close, fsync or rename of a final-named file) waited for its "
	       "durable commit; in memory, since the mount (or run, land) started.");
	struct hist h = {.count = lat->count, .bounds = sl_land_latency_bounds_us,
			 .n = SL_LAND_LAT_NBUCKET, .sum = lat->sum_ns / 1000, .digits = 6};
	histogram(b, "sluice_landing_commit_seconds", NULL, &h);
}

/* The last config load, named as Prometheus names its own. */
static void render_reload(struct sl_strbuf *b, const struct sl_reload_state *r)
{
	family(b, "sluice_config_last_reload_successful", "gauge",
	       "Whether the last load of sluice.json (mount or SIGHUP) took effect; 0: it "
	       "was refused and the previous config runs.");
	sample_u64(b, "sluice_config_last_reload_successful", NULL, r->refused[0] ? 0 : 1);
	family(b, "sluice_config_last_reload_success_timestamp_seconds", "gauge",
	       "When sluice.json last loaded and took effect (Unix time).");
	head(b, "sluice_config_last_reload_success_timestamp_seconds", "", NULL);
	add_scaled(b, r->ok_ms, 3);
	sl_strbuf_addc(b, '\n');
}

/* A per-query family of one u64 field of struct qfig, or of its figures. */
struct qfamily {
	const char *name, *type, *help;
	size_t off;       /* offset of the uint64_t in struct qfig */
};

#define QF(field) offsetof(struct qfig, field)

static const struct qfamily qfamilies[] = {
	{"sluice_query_batches_total", "counter",
	 "Batches committed (the last batch id + 1).", QF(batches)},
	{"sluice_query_input_rows_total", "counter",
	 "Input rows of the committed batches (numInputRows).", QF(f.input_rows)},
	{"sluice_query_output_rows_total", "counter",
	 "Rows the committed batches wrote to the sink (numOutputRows).", QF(f.output_rows)},
	{"sluice_query_malformed_rows_total", "counter",
	 "Malformed input rows of the committed batches, kept or dropped (numMalformedRows).",
	 QF(f.malformed_rows)},
	{"sluice_query_late_rows_total", "counter",
	 "Input rows dropped as later than the watermark (numRowsDroppedByWatermark).",
	 QF(f.late_rows)},
	{"sluice_query_parts_expired_total", "counter",
	 "Parts of out/<query>/ that sink.retention removed.", QF(expired)},
	{"sluice_query_backlog_files", "gauge",
	 "Landed files the query reads and has not planned yet.", QF(backlog.files)},
	{"sluice_query_backlog_bytes", "gauge",
	 "Bytes of the landed files the query has not planned yet.", QF(backlog.bytes)},
	{"sluice_query_state_rows", "gauge",
	 "State rows after the last batch (numRowsTotal of its state operators).",
	 QF(f.state_rows)},
	{"sluice_query_state_bytes", "gauge",
	 "Bytes the state takes in the catalog after the last batch (memoryUsedBytes).",
	 QF(f.state_bytes)},
};

static void render_queries(struct sl_strbuf *b, const struct qfig *v, size_t n)
{
	for (size_t i = 0; i < sizeof(qfamilies) / sizeof(qfamilies[0]); i++) {
		const struct qfamily *qf = &qfamilies[i];
		family(b, qf->name, qf->type, qf->help);
		for (size_t k = 0; k < n; k++)
			sample_u64(b, qf->name, v[k].name,
				   *(const uint64_t *)((const char *)&v[k] + qf->off));
	}
	family(b, "sluice_query_backlog", "gauge",
	       "What the query has not planned yet, in its source's units (unit label: files and "
	       "bytes, batches of a query source, rows of rate, lines and bytes of a spool).");
	for (size_t k = 0; k < n; k++)
		for (int u = 0; u < 2 && v[k].units.known && v[k].units.unit[u]; u++) {
			sl_strbuf_adds(b, "sluice_query_backlog");
			query_label(b, v[k].name);
			sl_strbuf_addf(b, ",unit=\"%s\"} %" PRIu64 "\n", v[k].units.unit[u],
				       v[k].units.v[u]);
		}
	/*
	 * counted in the transaction that skips, so a skip made while no batch
	 * runs shows at once (the progress report shows it with the next batch)
	 */
	family(b, "sluice_query_skipped_files_total", "counter",
	       "Landed files the query skipped unread, by reason: max_file_age "
	       "(skippedByMaxFileAge), already_seen (skippedAlreadySeen).");
	for (size_t k = 0; k < n; k++) {
		static const char *const why[] = {"max_file_age", "already_seen"};
		const uint64_t count[] = {v[k].skipped.age, v[k].skipped.seen};
		for (size_t w = 0; w < 2; w++) {
			sl_strbuf_adds(b, "sluice_query_skipped_files_total");
			query_label(b, v[k].name);
			sl_strbuf_addf(b, ",reason=\"%s\"} %" PRIu64 "\n", why[w], count[w]);
		}
	}
	family(b, "sluice_query_backlog_oldest_age_seconds", "gauge",
	       "Age of the oldest landed file in the backlog since it landed; 0 when none.");
	for (size_t k = 0; k < n; k++)
		sample_ms(b, "sluice_query_backlog_oldest_age_seconds", v[k].name,
			  v[k].oldest_age_ms);
	family(b, "sluice_query_watermark_timestamp_seconds", "gauge",
	       "The watermark after the last batch, as a Unix time (queries with a watermark).");
	for (size_t k = 0; k < n; k++)
		if (v[k].has_wm)
			sample_ms(b, "sluice_query_watermark_timestamp_seconds", v[k].name,
				  v[k].wm_ms);
	family(b, "sluice_query_watermark_lag_seconds", "gauge",
	       "How far the watermark is behind the wall clock (queries with a watermark).");
	for (size_t k = 0; k < n; k++)
		if (v[k].has_wm)
			sample_ms(b, "sluice_query_watermark_lag_seconds", v[k].name, v[k].lag_ms);
	family(b, "sluice_query_batch_duration_seconds", "histogram",
	       "Duration of the committed batches (durationMs.triggerExecution).");
	for (size_t k = 0; k < n; k++) {
		struct hist h = {.count = v[k].f.dur, .bounds = dur_bounds_ms, .n = NDUR,
				 .sum = v[k].f.dur_sum_ms, .digits = 3};
		histogram(b, "sluice_query_batch_duration_seconds", v[k].name, &h);
	}
	family(b, "sluice_query_error", "gauge",
	       "1 for the class of the error that stopped or delays the query (none when it "
	       "runs), 0 for the other classes.");
	for (size_t k = 0; k < n; k++)
		for (int c = 0; c < EC_N; c++) {
			sl_strbuf_adds(b, "sluice_query_error");
			query_label(b, v[k].name);
			sl_strbuf_addf(b, ",class=\"%s\"} %d\n", eclass_names[c],
				       v[k].err == (enum eclass)c);
		}
}

int sl_metrics_render(struct sl_txn *t, const struct sl_metrics_input *in, char **out,
		      size_t *len)
{
	size_t n = sl_config_nqueries(in->cfg);
	struct qfig *v = calloc(n ? n : 1, sizeof(*v));
	struct sl_strbuf b = {0};
	int rc = 0;

	if (!v)
		return ENOMEM;
	for (size_t k = 0; rc == 0 && k < n; k++)
		rc = read_query(t, sl_config_query(in->cfg, k), in->now_ms, &v[k]);
	if (rc == 0) {
		render_landing(&b, in->landing, in->latency);
		if (in->reload)
			render_reload(&b, in->reload);
		render_queries(&b, v, n);
		sl_strbuf_addc(&b, 0);
		rc = b.oom ? ENOMEM : 0;
	}
	free(v);
	if (rc) {
		sl_strbuf_release(&b);
		return rc;
	}
	*out = b.p;
	*len = b.len - 1;
	return 0;
}
