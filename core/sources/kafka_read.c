/* SPDX-License-Identifier: MIT */
/*
 * The kafka source's reading (kafka_int.h): one topic-partition's range
 * [from, until) through an explicit assign, records into rows (Spark's
 * columns, or values decoded as JSON), data loss found on the way.
 */
#include <errno.h>
#include <inttypes.h>
#include "rdk.h"
#include <stdio.h>
#include <string.h>

#include "batch.h"
#include "decode.h"
#include "err.h"
#include "kafka_int.h"
#include "log.h"
#include "strbuf.h"

static void base64(struct sl_strbuf *b, const unsigned char *s, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63],
			     i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
		sl_strbuf_add(b, q, 4);
	}
}

/* Bytes as the column shows them: base64 (binary) or as they are (string). */
static int set_bytes(struct sl_source *p, struct sl_batch *b, size_t row, size_t col, const void *v,
		     size_t n, struct sl_strbuf *scratch)
{
	if (!v) {
		sl_batch_set_null(b, row, col);
		return 0;
	}
	if (p->kc->vformat == SL_KAFKA_V_STRING)
		return sl_batch_set_str(b, row, col, v, n);
	scratch->len = 0;
	base64(scratch, v, n);
	return scratch->oom ? ENOMEM : sl_batch_set_str(b, row, col, scratch->p, scratch->len);
}

static void json_string(struct sl_strbuf *b, const char *s, size_t n)
{
	sl_strbuf_addc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			sl_strbuf_addc(b, '\\');
			sl_strbuf_addc(b, (char)c);
		} else if (c < 0x20) {
			sl_strbuf_addf(b, "\\u%04x", c);
		} else {
			sl_strbuf_addc(b, (char)c);
		}
	}
	sl_strbuf_addc(b, '"');
}

/* headers: [{"key":"k","value":"<base64 or text>"}, ...] as text; null without any. */
static int set_headers(struct sl_source *p, struct sl_batch *b, size_t row, size_t col,
		       rd_kafka_message_t *m, struct sl_strbuf *scratch)
{
	rd_kafka_headers_t *h = NULL;
	const char *name;
	const void *val;
	size_t size;

	if (rd_kafka_message_headers(m, &h) || !h || rd_kafka_header_cnt(h) == 0) {
		sl_batch_set_null(b, row, col);
		return 0;
	}
	scratch->len = 0;
	sl_strbuf_addc(scratch, '[');
	for (size_t i = 0; !rd_kafka_header_get_all(h, i, &name, &val, &size); i++) {
		sl_strbuf_adds(scratch, i ? ",{\"key\":" : "{\"key\":");
		json_string(scratch, name, strlen(name));
		sl_strbuf_adds(scratch, ",\"value\":");
		if (!val) {
			sl_strbuf_adds(scratch, "null");
		} else if (p->kc->vformat == SL_KAFKA_V_STRING) {
			json_string(scratch, val, size);
		} else {
			sl_strbuf_addc(scratch, '"');
			base64(scratch, val, size);
			sl_strbuf_addc(scratch, '"');
		}
		sl_strbuf_addc(scratch, '}');
	}
	sl_strbuf_addc(scratch, ']');
	return scratch->oom ? ENOMEM : sl_batch_set_str(b, row, col, scratch->p, scratch->len);
}

/* One record into b: Spark's columns, or its value decoded (valueFormat json). */
static int add_record(struct sl_source *p, rd_kafka_message_t *m, const struct part *pt,
		      struct sl_batch *b, struct sl_decode_stats *st, struct sl_strbuf *scratch)
{
	size_t row;
	int rc;

	if (p->kc->vformat == SL_KAFKA_V_JSON) {
		struct sl_decode_error de = {0};
		if (!m->payload || m->len == 0) {
			st->lines++; /* a record without a value makes no row */
			return 0;
		}
		rc = sl_decode_file(p->dec, NULL, m->payload, m->len, b, st, &de);
		if (rc == SL_EMALFORMED)
			sl_kafka_seterr(p, "kafka: %s-%d offset %" PRId64 ": %s (mode FAILFAST)",
					pt->topic, pt->partition, m->offset, de.reason);
		return rc;
	}
	rd_kafka_timestamp_type_t tt;
	int64_t ts = rd_kafka_message_timestamp(m, &tt);
	if ((rc = sl_batch_add_row(b, &row)))
		return rc;
	if ((rc = set_bytes(p, b, row, 0, m->key, m->key_len, scratch)) ||
	    (rc = set_bytes(p, b, row, 1, m->payload, m->len, scratch)) ||
	    (rc = sl_batch_set_str(b, row, 2, pt->topic, strlen(pt->topic))))
		return rc;
	sl_batch_set_int(b, row, 3, pt->partition);
	sl_batch_set_int(b, row, 4, m->offset);
	if (ts >= 0)
		sl_batch_set_int(b, row, 5, ts * 1000);
	else
		sl_batch_set_null(b, row, 5);
	/* Kafka's TimestampType.id: 0 CreateTime, 1 LogAppendTime, -1 none */
	sl_batch_set_int(b, row, 6,
			 tt == RD_KAFKA_TIMESTAMP_CREATE_TIME	    ? 0
			 : tt == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME ? 1
								    : -1);
	if (p->kc->include_headers && (rc = set_headers(p, b, row, 7, m, scratch)))
		return rc;
	st->lines++;
	st->rows++;
	return 0;
}

/* Assigns only (topic, partition) at offset. */
static int assign_at(struct sl_source *p, const struct part *pt, int64_t offset)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	if (!l)
		return ENOMEM;
	rd_kafka_topic_partition_list_add(l, pt->topic, pt->partition)->offset = offset;
	rd_kafka_resp_err_t e = rd_kafka_assign(p->rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	if (e) {
		sl_kafka_seterr(p, "kafka: cannot read %s-%d: %s", pt->topic, pt->partition,
				rd_kafka_err2str(e));
		return EIO;
	}
	return 0;
}

/*
 * The offsets below next are gone: [next, lo) lost. 0 with *resume the
 * offset to go on from (failOnDataLoss false), or SL_EDATALOSS.
 */
static int lost_below(struct sl_source *p, const struct part *pt, int64_t next, int64_t *resume)
{
	int64_t lo, hi;
	int rc;

	if ((rc = sl_kafka_watermarks(p, pt->topic, pt->partition, &lo, &hi)))
		return rc;
	if (lo <= next) {
		*resume = next; /* still there: read it again */
		return 0;
	}
	int64_t to = lo < pt->until ? lo : pt->until;
	if ((rc = sl_kafka_data_loss(p, (uint64_t)(to - next),
				     "topic '%s' partition %d: offsets %" PRId64 " to %" PRId64
				     " are gone (the earliest offset is now %" PRId64 ")",
				     pt->topic, pt->partition, next, to - 1, lo)))
		return rc;
	*resume = to;
	return 0;
}

int sl_kafka_read(struct sl_source *p, size_t part, struct sl_batch *b, struct sl_decode_stats *st,
		  char *err, size_t errlen)
{
	struct sl_strbuf scratch = {0};
	int64_t next, deadline;
	int rc = 0;

	if (part >= p->nparts || p->parts[part].from >= p->parts[part].until)
		return 0; /* a batch of no records that moves the offsets */
	const struct part *pt = &p->parts[part];
	p->error[0] = 0;
	next = pt->from;
	if ((rc = assign_at(p, pt, next)))
		goto done;
	deadline = sl_kafka_now_ms() + p->kc->poll_timeout_ms;
	while (next < pt->until) {
		if (p->stop && *p->stop) {
			sl_kafka_seterr(p, "kafka: reading %s-%d stopped by the unmount", pt->topic,
					pt->partition);
			rc = ECANCELED;
			break;
		}
		if (sl_kafka_now_ms() > deadline) {
			/* errors only, or nothing: bounded like Spark's poll timeout */
			sl_kafka_seterr(p,
					"kafka: no record of %s-%d at offset %" PRId64
					" within kafkaConsumer.pollTimeoutMs (%" PRId64 " ms)",
					pt->topic, pt->partition, next, p->kc->poll_timeout_ms);
			rc = ETIMEDOUT;
			break;
		}
		rd_kafka_message_t *m = rd_kafka_consumer_poll(p->rk, 100);
		if (!m)
			continue;
		int64_t resume = -1;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			/* the log ends before the range does: truncated? */
			if (m->offset < pt->until) {
				int64_t lo, hi;
				if ((rc = sl_kafka_watermarks(p, pt->topic, pt->partition, &lo,
							      &hi)) == 0 &&
				    hi < pt->until) {
					rc = sl_kafka_data_loss(
					    p, (uint64_t)(pt->until - (hi > next ? hi : next)),
					    "topic '%s' partition %d: offsets %" PRId64
					    " to %" PRId64 " are gone (the log ends at %" PRId64
					    ")",
					    pt->topic, pt->partition, hi > next ? hi : next,
					    pt->until - 1, hi);
					if (rc == 0)
						next = pt->until;
				}
			} else {
				next = pt->until; /* read_committed: only markers were left */
			}
		} else if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
			   m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
			/* gone: skip to what is left (or stop); still there: fetch again */
			if ((rc = lost_below(p, pt, next, &resume)) == 0)
				next = resume;
		} else if (m->err) {
			/* transient (a broker went away): librdkafka retries; the deadline bounds
			 * it */
			sl_log(SL_LOG_DEBUG, "query '%s': kafka: %s", p->q->name,
			       rd_kafka_message_errstr(m));
		} else if (m->partition == pt->partition && m->offset >= next &&
			   m->offset < pt->until) {
			if (m->offset > next) {
				/* a gap: compaction and transaction markers make them; retention
				 * too */
				int64_t lo, hi;
				if ((rc = sl_kafka_watermarks(p, pt->topic, pt->partition, &lo,
							      &hi)) == 0 &&
				    lo > next)
					rc = sl_kafka_data_loss(
					    p, (uint64_t)(lo - next),
					    "topic '%s' partition %d: offsets %" PRId64
					    " to %" PRId64
					    " are gone (the earliest offset is now %" PRId64 ")",
					    pt->topic, pt->partition, next, lo - 1, lo);
			}
			if (rc == 0) {
				rc = add_record(p, m, pt, b, st, &scratch);
				next = m->offset + 1;
				deadline = sl_kafka_now_ms() + p->kc->poll_timeout_ms;
			}
		} else if (m->partition == pt->partition && m->offset >= pt->until) {
			next = pt->until;
		}
		rd_kafka_message_destroy(m);
		if (rc)
			break;
		if (resume >= 0 && next < pt->until && (rc = assign_at(p, pt, next)))
			break;
	}
	rd_kafka_assign(p->rk, NULL);
done:
	sl_strbuf_release(&scratch);
	if (rc && p->error[0])
		snprintf(err, errlen, "%s", p->error);
	return rc;
}
