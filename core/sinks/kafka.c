/* SPDX-License-Identifier: MIT */
/*
 * The kafka sink (sink_kafka.h): rows to records through librdkafka, at
 * least once, or one transaction per batch with the recovery scan that
 * makes a replay of a committed batch produce nothing. librdkafka's types
 * stay in this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdk.h"

#include "batch.h"
#include "catalog.h"
#include "config.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "log.h"
#include "qlog.h"
#include "secret.h"
#include "sink.h"
#include "sink_kafka.h"
#include "strbuf.h"

#define OFFSETS_KIND 'k'      /* checkpoint log: batch N's recorded end offsets */
#define META_TIMEOUT_MS 10000 /* metadata and offset requests */
#define TXN_TIMEOUT_MS 60000  /* init, commit and abort of a transaction */
#define SCAN_TIMEOUT_MS 60000 /* a recovery scan reaching the last stable offsets */

struct sl_sink {
	const struct sl_query_config *q;
	struct sl_land *l;
	uint32_t qid;
	const atomic_bool *stop;
	bool txn;		/* transactional */
	rd_kafka_t *rk;		/* the producer; NULL until the first batch, or after a fatal error */
	bool in_txn;		/* a transaction begun and not yet committed or aborted */
	char uuid[40];		/* the query's checkpoint id: header sluice.query */
	char **secrets;		/* kafka.* values resolved from @env:/@file:, masked in errors */
	size_t nsecrets;
	long value_col, key_col, topic_col, part_col, headers_col; /* into q->out.cols, or -1 */
	uint64_t batch;		/* the batch write() last ran */
	uint64_t rows;		/* records it wrote (or found, on a replay) */
	/* delivery reports of the batch (served on this thread, by poll and flush) */
	uint64_t delivered;
	rd_kafka_resp_err_t dr_err; /* the first failed delivery's error */
	char dr_where[300];	    /* its topic and partition */
	char error[600];
};

/* Sets s->error (masked), returning rc. */
__attribute__((format(printf, 3, 4))) static int fail(struct sl_sink *s, int rc, const char *fmt,
						       ...)
{
	char raw[sizeof(s->error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	sl_secret_mask(raw, (const char *const *)s->secrets, s->nsecrets, s->error,
		       sizeof(s->error));
	return rc;
}

/* The errno a broker or client error is reported as (the text says the rest). */
static int errno_of(rd_kafka_resp_err_t e)
{
	switch (e) {
	case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
	case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
		return EMSGSIZE;
	case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
	case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
	case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
		return ENOENT;
	case RD_KAFKA_RESP_ERR__FENCED:
	case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
	case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
		return ESTALE; /* not EPERM: 1 is run_batch's "nothing to do" */
	default:
		return EIO;
	}
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct sl_sink *s = opaque;

	(void)rk;
	if (!m->err) {
		s->delivered++;
		return;
	}
	if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
		return; /* dropped by us after a failure, which is the error to report */
	if (s->dr_err)
		return; /* the first error names the cause */
	s->dr_err = m->err;
	snprintf(s->dr_where, sizeof(s->dr_where), "topic '%s' partition %" PRId32,
		 rd_kafka_topic_name(m->rkt), m->partition);
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk;
	sl_log(level <= 3 ? SL_LOG_ERR : level <= 4 ? SL_LOG_WARNING : SL_LOG_DEBUG,
	       "kafka: %s: %s", fac, buf);
}

/* The query's checkpoint id (metadata {"id":"<uuid>"}), written when its first batch planned. */
static int read_uuid(struct sl_sink *s)
{
	struct sl_txn *t;
	const void *d;
	size_t len;
	int rc;

	if (s->uuid[0])
		return 0;
	if ((rc = sl_catalog_read(sl_land_catalog(s->l), &t)))
		return rc;
	rc = sl_qlog_get(t, s->qid, 'm', 0, &d, &len);
	if (rc == 0 && (len < 44 || memcmp(d, "{\"id\":\"", 7)))
		rc = SL_ECORRUPT;
	if (rc == 0) {
		memcpy(s->uuid, (const char *)d + 7, 36);
		s->uuid[36] = 0;
	}
	sl_txn_end(t);
	return rc;
}

/* One property into conf; an error names the field. */
static int conf_set(struct sl_sink *s, rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char why[256];

	if (rd_kafka_conf_set(conf, name, value, why, sizeof(why)) == RD_KAFKA_CONF_OK)
		return 0;
	return fail(s, SL_ECONFIG, "kafka: queries.%s.sink.kafka.%s: %s", s->q->name, name, why);
}

/*
 * A client configuration: the query's kafka.* options (secrets resolved),
 * then what sluice sets. consumer: for the recovery scan.
 */
static int make_conf(struct sl_sink *s, bool consumer, rd_kafka_conf_t **out)
{
	rd_kafka_conf_t *conf;
	char id[64], why[400];
	int rc = 0;

	if ((rc = sl_rdk_load(why, sizeof(why))))
		return fail(s, rc, "queries.%s.sink: %s", s->q->name, why);
	if (!(conf = rd_kafka_conf_new()))
		return ENOMEM;
	rd_kafka_conf_set_log_cb(conf, on_log);
	snprintf(id, sizeof(id), "sluice-%s", s->q->name);
	rc = conf_set(s, conf, "client.id", id);
	for (size_t i = 0, k = 0; rc == 0 && i < s->q->nkafka_conf; i++) {
		const char *name = s->q->kafka_conf[2 * i], *value = s->q->kafka_conf[2 * i + 1];
		if (sl_secret_is_ref(value))
			value = s->secrets[k++];
		if (consumer && (!strncmp(name, "acks", 4) || strstr(name, "linger") ||
				 strstr(name, "batch.") || strstr(name, "compression") ||
				 strstr(name, "message.timeout") || strstr(name, "idempotence") ||
				 strstr(name, "queue.buffering") || strstr(name, "transaction")))
			continue; /* the producer's: the scan's consumer would warn of each */
		rc = conf_set(s, conf, name, value);
	}
	if (rc == 0 && consumer) {
		snprintf(id, sizeof(id), "sluice-scan-%s", s->uuid);
		if ((rc = conf_set(s, conf, "group.id", id)) == 0 &&
		    (rc = conf_set(s, conf, "isolation.level", "read_committed")) == 0 &&
		    (rc = conf_set(s, conf, "enable.auto.commit", "false")) == 0 &&
		    (rc = conf_set(s, conf, "enable.partition.eof", "true")) == 0)
			rc = conf_set(s, conf, "auto.offset.reset", "earliest");
	} else if (rc == 0 && s->txn) {
		snprintf(id, sizeof(id), "sluice-%s", s->uuid);
		rc = conf_set(s, conf, "transactional.id", id);
	}
	if (rc) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	*out = conf;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Ends the producer (after a fatal error, or at close): an open transaction is aborted. */
static void drop_producer(struct sl_sink *s)
{
	if (!s->rk)
		return;
	if (s->in_txn) {
		rd_kafka_error_t *e = rd_kafka_abort_transaction(s->rk, 5000);
		if (e)
			rd_kafka_error_destroy(e);
		s->in_txn = false;
	}
	rd_kafka_destroy(s->rk);
	s->rk = NULL;
}

/* The kafka.* values given as @env: or @file: references, resolved (once). */
static int resolve_secrets(struct sl_sink *s)
{
	const struct sl_query_config *q = s->q;
	char why[300];
	int rc;

	if (s->secrets)
		return 0;
	if (!(s->secrets = calloc(q->nkafka_conf + 1, sizeof(char *))))
		return ENOMEM;
	for (size_t i = 0; i < q->nkafka_conf; i++) {
		const char *v = q->kafka_conf[2 * i + 1];
		if (!sl_secret_is_ref(v))
			continue;
		if ((rc = sl_secret_resolve(v, &s->secrets[s->nsecrets], why, sizeof(why)))) {
			fail(s, rc, "kafka: queries.%s.sink.kafka.%s: %s", q->name,
			     q->kafka_conf[2 * i], why);
			for (size_t k = 0; k < s->nsecrets; k++)
				sl_secret_free(s->secrets[k]);
			free(s->secrets);
			s->secrets = NULL;
			s->nsecrets = 0;
			return rc;
		}
		s->nsecrets++;
	}
	return 0;
}

/* The producer, made at the first batch (the checkpoint id exists then); transactional: fenced in. */
static int ensure_producer(struct sl_sink *s)
{
	rd_kafka_conf_t *conf;
	char why[512];
	int rc;

	if (s->rk)
		return 0;
	if ((rc = resolve_secrets(s)))
		return rc;
	if ((rc = read_uuid(s)))
		return fail(s, rc, "kafka: cannot read the query's checkpoint id: %s", sl_strerror(rc));
	if ((rc = make_conf(s, false, &conf)))
		return rc;
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rd_kafka_conf_set_opaque(conf, s);
	s->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
	if (!s->rk) {
		rd_kafka_conf_destroy(conf);
		return fail(s, SL_ECONFIG, "kafka: cannot make a producer: %s", why);
	}
	if (!s->txn)
		return 0;
	/*
	 * Fences any earlier producer of this query and aborts what it left
	 * open. Asked a second at a time, so that an unmount does not wait for
	 * unreachable brokers (a timed-out init may be called again).
	 */
	rd_kafka_error_t *e;
	int64_t deadline = now_ms() + TXN_TIMEOUT_MS;
	while ((e = rd_kafka_init_transactions(s->rk, 1000)) && rd_kafka_error_is_retriable(e) &&
	       now_ms() < deadline && !(s->stop && *s->stop))
		rd_kafka_error_destroy(e);
	if (e) {
		rc = fail(s, errno_of(rd_kafka_error_code(e)),
			  "kafka: cannot start transactions (transactional.id sluice-%s): %s",
			  s->uuid, rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		rd_kafka_destroy(s->rk);
		s->rk = NULL;
		return rc;
	}
	return 0;
}

/* ---- the recorded end offsets of a batch ---- */

struct offsets {
	int32_t n;	  /* partitions */
	int64_t *end;	  /* end offset of each, at the record */
	struct sl_sink *s;
	uint64_t batch;
	char text[4096];  /* "P:O P:O ..." */
};

static int put_offsets(struct sl_txn *t, void *arg)
{
	struct offsets *o = arg;
	return sl_qlog_put(t, o->s->qid, OFFSETS_KIND, o->batch, o->text, strlen(o->text));
}

/* Batch's recorded offsets into o->text, or SL_NOTFOUND. */
static int get_offsets(struct sl_sink *s, uint64_t batch, struct offsets *o)
{
	struct sl_txn *t;
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(s->l), &t)))
		return rc;
	rc = sl_qlog_get_text(t, s->qid, OFFSETS_KIND, batch, o->text, sizeof(o->text));
	sl_txn_end(t);
	return rc;
}

/* The topic's partition count, from the producer's metadata. */
static int partition_count(struct sl_sink *s, int32_t *n)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(s->rk, s->q->kafka_topic, NULL);
	rd_kafka_resp_err_t e;

	if (!rkt)
		return fail(s, ENOMEM, "kafka: cannot name topic '%s'", s->q->kafka_topic);
	e = rd_kafka_metadata(s->rk, 0, rkt, &md, META_TIMEOUT_MS);
	rd_kafka_topic_destroy(rkt);
	if (e)
		return fail(s, errno_of(e), "kafka: cannot read the metadata of topic '%s': %s",
			    s->q->kafka_topic, rd_kafka_err2str(e));
	if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1) {
		e = md->topic_cnt == 1 && md->topics[0].err ? md->topics[0].err
							    : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
		rd_kafka_metadata_destroy(md);
		return fail(s, errno_of(e), "kafka: topic '%s': %s", s->q->kafka_topic,
			    rd_kafka_err2str(e));
	}
	*n = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	return 0;
}

/* Records the end offset of every partition of the topic, durably, for batch. */
static int record_offsets(struct sl_sink *s, uint64_t batch)
{
	struct offsets o = {.s = s, .batch = batch};
	size_t len = 0;
	int32_t n = 0;
	int rc;

	if ((rc = partition_count(s, &n)))
		return rc;
	for (int32_t p = 0; p < n; p++) {
		int64_t lo, hi;
		rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
		    s->rk, s->q->kafka_topic, p, &lo, &hi, META_TIMEOUT_MS);
		if (e)
			return fail(s, errno_of(e),
				    "kafka: cannot read the end offset of topic '%s' partition %" PRId32
				    ": %s",
				    s->q->kafka_topic, p, rd_kafka_err2str(e));
		int k = snprintf(o.text + len, sizeof(o.text) - len, "%s%" PRId32 ":%" PRId64,
				 p ? " " : "", p, hi);
		if (k < 0 || (size_t)k >= sizeof(o.text) - len)
			return fail(s, EOVERFLOW, "kafka: topic '%s' has too many partitions (%" PRId32 ")",
				    s->q->kafka_topic, n);
		len += (size_t)k;
	}
	if ((rc = sl_catalog_write(sl_land_catalog(s->l), put_offsets, &o)))
		return fail(s, rc, "kafka: cannot record the end offsets of batch %" PRIu64 ": %s",
			    batch, sl_strerror(rc));
	return 0;
}

/* Whether record m carries header name with value want (len bytes). */
static bool header_is(const rd_kafka_message_t *m, const char *name, const char *want)
{
	rd_kafka_headers_t *h;
	const void *v;
	size_t len;

	if (rd_kafka_message_headers(m, &h) ||
	    rd_kafka_header_get_last(h, name, &v, &len) || !v)
		return false;
	return len == strlen(want) && !memcmp(v, want, len);
}

/*
 * The recovery scan of a replayed batch: reads each partition from its
 * recorded offset to its last stable offset with read_committed. *found:
 * records tagged (query, batch) are there, so the batch committed in Kafka.
 */
static int scan(struct sl_sink *s, uint64_t batch, const char *text, bool *found)
{
	rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(8);
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_t *c = NULL;
	char why[512], want[32];
	int32_t open = 0;
	int rc = 0;

	*found = false;
	snprintf(want, sizeof(want), "%" PRIu64, batch);
	if (!parts)
		return ENOMEM;
	for (const char *p = text; *p;) {
		char *end;
		long part = strtol(p, &end, 10);
		if (*end != ':') {
			rc = fail(s, SL_ECORRUPT, "kafka: batch %" PRIu64 "'s recorded offsets are corrupt",
				  batch);
			goto parts_free;
		}
		long long off = strtoll(end + 1, &end, 10);
		rd_kafka_topic_partition_list_add(parts, s->q->kafka_topic, (int32_t)part)->offset =
		    off;
		open++;
		p = *end == ' ' ? end + 1 : end;
	}
	if ((rc = make_conf(s, true, &conf)))
		goto parts_free;
	if (!(c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why)))) {
		rd_kafka_conf_destroy(conf);
		rc = fail(s, SL_ECONFIG, "kafka: cannot make the recovery consumer: %s", why);
		goto parts_free;
	}
	rd_kafka_resp_err_t e = rd_kafka_assign(c, parts);
	if (e) {
		rc = fail(s, errno_of(e), "kafka: cannot read topic '%s' for recovery: %s",
			  s->q->kafka_topic, rd_kafka_err2str(e));
		goto consumer_close;
	}
	/* an empty partition gives its end at once; each one's end is its last stable offset */
	int64_t deadline = now_ms() + SCAN_TIMEOUT_MS;
	while (open > 0 && !*found) {
		if (s->stop && *s->stop) {
			rc = fail(s, ECANCELED, "batch %" PRIu64 " abandoned by the unmount", batch);
			break;
		}
		if (now_ms() > deadline) {
			rc = fail(s, ETIMEDOUT,
				  "kafka: the recovery scan of batch %" PRIu64 " in topic '%s' did not "
				  "reach the end of its partitions in %d s",
				  batch, s->q->kafka_topic, SCAN_TIMEOUT_MS / 1000);
			break;
		}
		rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
		if (!m)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			open--;
		} else if (m->err) {
			rc = fail(s, errno_of(m->err),
				  "kafka: the recovery scan of batch %" PRIu64 " in topic '%s': %s",
				  batch, s->q->kafka_topic, rd_kafka_message_errstr(m));
		} else if (header_is(m, "sluice.batch", want) &&
			   header_is(m, "sluice.query", s->uuid)) {
			*found = true;
		}
		rd_kafka_message_destroy(m);
		if (rc)
			break;
	}
consumer_close:
	rd_kafka_consumer_close(c);
	rd_kafka_destroy(c);
parts_free:
	rd_kafka_topic_partition_list_destroy(parts);
	return rc;
}

/* ---- producing a batch ---- */

/*
 * Parses a headers column value, a JSON object of string values
 * ({"name":"value",...}), adding each to h. false when it is not one.
 */
static bool json_string(const char **pp, const char *end, struct sl_strbuf *out)
{
	const char *p = *pp;

	if (p >= end || *p++ != '"')
		return false;
	out->len = 0;
	while (p < end && *p != '"') {
		char c = *p++;
		if (c != '\\') {
			sl_strbuf_addc(out, c);
			continue;
		}
		if (p >= end)
			return false;
		c = *p++;
		switch (c) {
		case 'n': sl_strbuf_addc(out, '\n'); break;
		case 't': sl_strbuf_addc(out, '\t'); break;
		case 'r': sl_strbuf_addc(out, '\r'); break;
		case 'b': sl_strbuf_addc(out, '\b'); break;
		case 'f': sl_strbuf_addc(out, '\f'); break;
		case 'u': {
			unsigned v = 0;
			for (int i = 0; i < 4; i++, p++) {
				if (p >= end)
					return false;
				char h = *p;
				v = v * 16 + (unsigned)(h >= '0' && h <= '9'	 ? h - '0'
							: h >= 'a' && h <= 'f' ? h - 'a' + 10
							: h >= 'A' && h <= 'F' ? h - 'A' + 10
									       : 99);
				if (v > 0xffff)
					return false;
			}
			/* UTF-8 of a BMP code point (surrogate pairs kept as they come) */
			if (v < 0x80) {
				sl_strbuf_addc(out, (char)v);
			} else if (v < 0x800) {
				sl_strbuf_addc(out, (char)(0xc0 | (v >> 6)));
				sl_strbuf_addc(out, (char)(0x80 | (v & 0x3f)));
			} else {
				sl_strbuf_addc(out, (char)(0xe0 | (v >> 12)));
				sl_strbuf_addc(out, (char)(0x80 | ((v >> 6) & 0x3f)));
				sl_strbuf_addc(out, (char)(0x80 | (v & 0x3f)));
			}
			break;
		}
		default: sl_strbuf_addc(out, c); break; /* \" \\ \/ */
		}
	}
	if (p >= end)
		return false;
	*pp = p + 1;
	return !out->oom;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static bool parse_headers(const char *p, size_t len, rd_kafka_headers_t *h)
{
	const char *end = p + len;
	struct sl_strbuf k = {0}, v = {0};
	bool ok = false;

	p = skip_ws(p, end);
	if (p >= end || *p++ != '{')
		goto out;
	p = skip_ws(p, end);
	if (p < end && *p == '}') {
		ok = skip_ws(p + 1, end) == end;
		goto out;
	}
	for (;;) {
		p = skip_ws(p, end);
		if (!json_string(&p, end, &k))
			goto out;
		sl_strbuf_addc(&k, 0);
		p = skip_ws(p, end);
		if (p >= end || *p++ != ':')
			goto out;
		p = skip_ws(p, end);
		if (p + 4 <= end && !memcmp(p, "null", 4)) {
			p += 4;
			rd_kafka_header_add(h, k.p, -1, NULL, 0);
		} else if (json_string(&p, end, &v)) {
			rd_kafka_header_add(h, k.p, -1, v.p ? v.p : "", (ssize_t)v.len);
		} else {
			goto out;
		}
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			ok = skip_ws(p + 1, end) == end;
		break;
	}
out:
	sl_strbuf_release(&k);
	sl_strbuf_release(&v);
	return ok;
}

/* Serves delivery reports until every record is acknowledged, or the unmount. */
static int flush_all(struct sl_sink *s, uint64_t batch)
{
	while (rd_kafka_outq_len(s->rk) > 0) {
		if (s->stop && *s->stop)
			return fail(s, ECANCELED, "batch %" PRIu64 " abandoned by the unmount", batch);
		rd_kafka_flush(s->rk, 100);
	}
	if (s->dr_err)
		return fail(s, errno_of(s->dr_err), "kafka: cannot deliver to %s: %s%s", s->dr_where,
			    rd_kafka_err2str(s->dr_err),
			    s->dr_err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE
				    ? " (a record is larger than the broker's message.max.bytes)"
			    : s->dr_err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
					    s->dr_err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
				    ? " (unknown topic)"
				    : "");
	return 0;
}

/* Produces row r of rows (lines: the rows as JSON Lines when there is no value column). */
static int produce_row(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows, size_t r,
		       const char *line, size_t line_len)
{
	const char *topic = s->q->kafka_topic, *key = NULL, *value = line;
	size_t key_len = 0, value_len = line_len;
	char topic_buf[256], key_buf[64], batch_text[32];
	int32_t part = RD_KAFKA_PARTITION_UA;
	rd_kafka_headers_t *h;
	rd_kafka_resp_err_t e;

	if (!topic) {
		size_t n;
		const char *t = sl_batch_is_null(rows, r, s->topic_col)
					? NULL
					: sl_batch_str(rows, r, s->topic_col, &n);
		if (!t)
			return fail(s, EINVAL,
				    "kafka: null topic present in the data (row %zu). Use the topic "
				    "option for setting a default topic.",
				    r);
		if (n == 0 || n >= sizeof(topic_buf))
			return fail(s, EINVAL, "kafka: row %zu: a topic name of %zu bytes", r, n);
		memcpy(topic_buf, t, n);
		topic_buf[n] = 0;
		topic = topic_buf;
	}
	if (s->part_col >= 0 && !sl_batch_is_null(rows, r, s->part_col)) {
		int64_t v = rows->cols[s->part_col].cells[r].i;
		if (v < 0 || v > INT32_MAX)
			return fail(s, EINVAL, "kafka: row %zu: partition %" PRId64 " out of range", r,
				    v);
		part = (int32_t)v;
	}
	if (s->key_col >= 0 && !sl_batch_is_null(rows, r, s->key_col)) {
		const struct sl_batch_col *c = &rows->cols[s->key_col];
		if (c->type == SL_TYPE_STRING) {
			key = sl_batch_str(rows, r, s->key_col, &key_len);
		} else {
			sl_sink_fmt_scalar(key_buf, c->type, &c->cells[r]);
			key = key_buf;
			key_len = strlen(key_buf);
		}
	}
	if (s->value_col >= 0) {
		value = sl_batch_is_null(rows, r, s->value_col)
				? NULL
				: sl_batch_str(rows, r, s->value_col, &value_len);
		if (!value)
			value_len = 0;
	}
	if (!(h = rd_kafka_headers_new(4)))
		return ENOMEM;
	if (s->headers_col >= 0 && !sl_batch_is_null(rows, r, s->headers_col)) {
		size_t n;
		const char *t = sl_batch_str(rows, r, s->headers_col, &n);
		if (!parse_headers(t, n, h)) {
			rd_kafka_headers_destroy(h);
			return fail(s, EINVAL,
				    "kafka: row %zu: the headers column is not a JSON object of "
				    "string values",
				    r);
		}
	}
	snprintf(batch_text, sizeof(batch_text), "%" PRIu64, batch);
	rd_kafka_header_add(h, "sluice.query", -1, s->uuid, -1);
	rd_kafka_header_add(h, "sluice.batch", -1, batch_text, -1);
	for (;;) {
		e = rd_kafka_producev(s->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
				      RD_KAFKA_V_KEY((void *)(uintptr_t)key, key_len), RD_KAFKA_V_VALUE((void *)(uintptr_t)value, value_len),
				      RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				      RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		if (s->stop && *s->stop) {
			rd_kafka_headers_destroy(h);
			return fail(s, ECANCELED, "batch %" PRIu64 " abandoned by the unmount", batch);
		}
		rd_kafka_poll(s->rk, 100); /* room frees as deliveries are reported */
	}
	if (!e)
		return 0; /* h is the record's now */
	rd_kafka_headers_destroy(h);
	if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
		return fail(s, EMSGSIZE,
			    "kafka: row %zu: a record of %zu bytes is larger than message.max.bytes "
			    "(set sink.kafka.message.max.bytes, within the broker's limit)",
			    r, key_len + value_len);
	return fail(s, errno_of(e), "kafka: cannot produce to topic '%s'%s: %s", topic,
		    part == RD_KAFKA_PARTITION_UA ? "" : " (the row's partition)",
		    rd_kafka_err2str(e));
}

/* Produces every row of the batch and waits for their acknowledgements. */
static int produce_all(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows)
{
	struct sl_strbuf text = {0};
	const char *line = NULL, *end = NULL;
	int rc = 0;

	s->dr_err = 0;
	s->delivered = 0;
	if (s->value_col < 0) {
		/* no value column: each row whole, as the JSON sink writes it */
		struct sl_query_config fmt = *s->q;
		fmt.sink_format = SL_SINK_JSON;
		fmt.compression = SL_COMPRESSION_NONE;
		fmt.npartition_by = 0;
		if ((rc = sl_sink_format_rows(&fmt, rows, 0, rows->nrows, false, &text)))
			return fail(s, rc, "kafka: cannot write the rows as JSON: %s", sl_strerror(rc));
		line = text.p;
		end = text.p + text.len;
	}
	for (size_t r = 0; r < rows->nrows && rc == 0; r++) {
		const char *nl = line ? memchr(line, '\n', (size_t)(end - line)) : NULL;
		size_t len = nl ? (size_t)(nl - line) : 0;
		rc = produce_row(s, batch, rows, r, line, len);
		if (nl)
			line = nl + 1;
		if (r % 1024 == 0)
			rd_kafka_poll(s->rk, 0);
	}
	sl_strbuf_release(&text);
	if (rc == 0)
		rc = flush_all(s, batch);
	if (rc && !s->txn) {
		/*
		 * What the failed batch left queued must not go out with the
		 * next one (an abort does this for a transaction).
		 */
		rd_kafka_purge(s->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_flush(s->rk, 1000);
	}
	return rc;
}

/* A transactional error into s->error; a fatal one (fenced) drops the producer. */
static int txn_fail(struct sl_sink *s, rd_kafka_error_t *e, const char *what, uint64_t batch)
{
	rd_kafka_resp_err_t code = rd_kafka_error_code(e);
	int rc = fail(s, errno_of(code), "kafka: cannot %s the transaction of batch %" PRIu64 "%s: %s",
		      what, batch,
		      code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED
			      ? " (fenced: another producer runs this query's transactional.id)"
			      : "",
		      rd_kafka_error_string(e));
	bool fatal = rd_kafka_error_is_fatal(e);
	rd_kafka_error_destroy(e);
	if (fatal)
		drop_producer(s);
	return rc;
}

/* Aborts the open transaction after a failure (s->error is kept). */
static void txn_abort(struct sl_sink *s)
{
	if (!s->rk || !s->in_txn)
		return;
	rd_kafka_error_t *e = rd_kafka_abort_transaction(s->rk, TXN_TIMEOUT_MS);
	s->in_txn = false;
	if (!e) /* always after a failure: say which */
		sl_log(SL_LOG_WARNING,
		       "query '%s': kafka: aborted the transaction of batch %" PRIu64 " (%s)",
		       s->q->name, s->batch, s->error[0] ? s->error : "failed");
	if (e) {
		bool fatal = rd_kafka_error_is_fatal(e);
		sl_log(SL_LOG_WARNING, "query '%s': kafka: cannot abort a transaction: %s",
		       s->q->name, rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		if (fatal)
			drop_producer(s);
	}
}

static int write_txn(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows)
{
	struct offsets o;
	rd_kafka_error_t *e;
	bool found = false;
	int rc;

	rc = get_offsets(s, batch, &o);
	if (rc == 0) {
		/* a replay: did the batch commit in Kafka before the crash? */
		if ((rc = scan(s, batch, o.text, &found)))
			return rc;
		if (found) {
			sl_log(SL_LOG_INFO,
			       "query '%s': batch %" PRIu64 " is committed in topic '%s' already: "
			       "not produced again",
			       s->q->name, batch, s->q->kafka_topic);
			return 0;
		}
	} else if (rc != SL_NOTFOUND) {
		return fail(s, rc, "kafka: cannot read the recorded offsets of batch %" PRIu64 ": %s",
			    batch, sl_strerror(rc));
	} else if ((rc = record_offsets(s, batch))) {
		return rc;
	}
	if ((e = rd_kafka_begin_transaction(s->rk)))
		return txn_fail(s, e, "begin", batch);
	s->in_txn = true;
	if ((rc = produce_all(s, batch, rows))) {
		txn_abort(s);
		return rc;
	}
	SL_FAULT("kafka.before_commit");
	e = rd_kafka_commit_transaction(s->rk, TXN_TIMEOUT_MS);
	if (e) {
		/*
		 * Aborted whatever the error (a timed-out commit may have
		 * committed: the replay's scan tells); a fatal one drops the
		 * producer, and the next batch fences in again.
		 */
		rc = txn_fail(s, e, "commit", batch);
		txn_abort(s);
		return rc;
	}
	s->in_txn = false;
	SL_FAULT("kafka.after_commit");
	return 0;
}

static int kafka_write(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows,
		       void (*spent)(void *ctx), void *spent_ctx)
{
	int rc = 0;

	s->error[0] = 0;
	s->batch = batch;
	s->rows = rows->nrows;
	if (rows->nrows > 0)
		rc = ensure_producer(s);
	if (rows->nrows > 0 && rc == 0 && s->txn) {
		rc = write_txn(s, batch, rows);
	} else if (rows->nrows > 0 && rc == 0) {
		/*
		 * The topic's metadata first: an unknown topic fails here, clearly,
		 * and records produced to a topic librdkafka knows are partitioned
		 * as they come, not queued until its metadata arrives (4x faster).
		 */
		int32_t n;
		if (!s->q->kafka_topic || (rc = partition_count(s, &n)) == 0)
			rc = produce_all(s, batch, rows);
	}
	if (spent)
		spent(spent_ctx);
	return rc;
}

/* The batch's record of offsets leaves with its commit: it is never replayed now. */
static int kafka_commit(struct sl_sink *s, struct sl_txn *t, struct sl_sink_result *res)
{
	struct timespec ts;
	int rc;

	if (s->txn && (rc = sl_qlog_del(t, s->qid, OFFSETS_KIND, s->batch)))
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	res->rows = s->rows;
	res->done_ns = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	return 0;
}

static int kafka_end(struct sl_sink *s, bool committed, bool *format_failed)
{
	(void)s;
	(void)committed; /* a transaction is committed or aborted by write() */
	if (format_failed)
		*format_failed = false;
	return 0;
}

static int kafka_settle(struct sl_sink *s)
{
	(void)s;
	return 0; /* a batch's offset record leaves in its commit: nothing is left over */
}

static const char *kafka_error(const struct sl_sink *s)
{
	return s->error;
}

static void kafka_describe(const struct sl_sink *s, char *buf, size_t len)
{
	snprintf(buf, len, "KafkaSink[%s, %s]", s->q->kafka_topic ? s->q->kafka_topic : "topic column",
		 s->txn ? "exactly-once" : "at-least-once");
}

static void kafka_close(struct sl_sink *s)
{
	if (!s)
		return;
	drop_producer(s); /* shutdown aborts an open transaction */
	for (size_t i = 0; i < s->nsecrets; i++)
		sl_secret_free(s->secrets[i]);
	free(s->secrets);
	free(s);
}

int sl_sink_kafka_check(const struct sl_query_config *q, char *err, size_t errlen)
{
	rd_kafka_conf_t *conf;
	char why[400];
	int rc;

	if ((rc = sl_rdk_load(why, sizeof(why)))) {
		snprintf(err, errlen, "queries.%s.sink: %s", q->name, why);
		return rc;
	}
	if (!(conf = rd_kafka_conf_new()))
		return ENOMEM;
	for (size_t i = 0; rc == 0 && i < q->nkafka_conf; i++) {
		const char *name = q->kafka_conf[2 * i], *value = q->kafka_conf[2 * i + 1];
		rd_kafka_conf_res_t r;
		why[0] = 0;
		if (sl_secret_is_ref(value)) {
			/* the value is known only when the batch runs: the name, at least */
			r = rd_kafka_conf_set(conf, name, "", why, sizeof(why));
			if (r == RD_KAFKA_CONF_INVALID)
				r = RD_KAFKA_CONF_OK; /* a known name ("" is no value of it) */
		} else {
			r = rd_kafka_conf_set(conf, name, value, why, sizeof(why));
		}
		if (r != RD_KAFKA_CONF_OK) {
			snprintf(err, errlen, "queries.%s.sink.kafka.%s: %s", q->name, name, why);
			rc = SL_ECONFIG;
		}
	}
	rd_kafka_conf_destroy(conf);
	return rc;
}

static int open_any(const struct sl_sink_args *a, bool txn, struct sl_sink **out)
{
	const struct sl_query_config *q = a->q;
	struct sl_sink *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->q = q;
	s->l = a->l;
	s->qid = a->qid;
	s->stop = a->stop;
	s->txn = txn;
	s->value_col = sl_config_schema_find(&q->out, "value");
	s->key_col = q->kafka_key_col >= 0 ? q->kafka_key_col : sl_config_schema_find(&q->out, "key");
	s->topic_col = sl_config_schema_find(&q->out, "topic");
	s->part_col = sl_config_schema_find(&q->out, "partition");
	s->headers_col = sl_config_schema_find(&q->out, "headers");
	*out = s;
	return 0;
}

static int kafka_open(const struct sl_sink_args *a, struct sl_sink **out)
{
	return open_any(a, false, out);
}

static int kafka_open_txn(const struct sl_sink_args *a, struct sl_sink **out)
{
	return open_any(a, true, out);
}

const struct sl_sink_ops sl_sink_kafka = {
	.name = "kafka",
	.guarantee = SL_SINK_AT_LEAST_ONCE,
	.open = kafka_open,
	.write = kafka_write,
	.commit = kafka_commit,
	.end = kafka_end,
	.settle = kafka_settle,
	.error = kafka_error,
	.describe = kafka_describe,
	.close = kafka_close,
};

const struct sl_sink_ops sl_sink_kafka_txn = {
	.name = "kafka",
	.guarantee = SL_SINK_EXACTLY_ONCE,
	.open = kafka_open_txn,
	.write = kafka_write,
	.commit = kafka_commit,
	.end = kafka_end,
	.settle = kafka_settle,
	.error = kafka_error,
	.describe = kafka_describe,
	.close = kafka_close,
};
