/* SPDX-License-Identifier: MIT */
/*
 * The kafka source (source_kafka.h): librdkafka's consumer with explicit
 * offsets. prepare() asks the brokers for the partitions and their offsets
 * and plans the batch (Spark's latestOffset with admission control);
 * read() reads one topic-partition's range [begin, end).
 */
#include <errno.h>
#include <inttypes.h>
#include "rdk.h"
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "catalog.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "kafka_conf.h"
#include "kafka_int.h"
#include "land.h"
#include "log.h"
#include "qlog.h"
#include "secret.h"
#include "source_kafka.h"
#include "strbuf.h"

#define KEEP_BATCHES 100 /* 'b' records kept */
#define META_MS 10000	 /* the longest wait for metadata or offsets */

int64_t sl_kafka_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

void sl_kafka_seterr(struct sl_source *p, const char *fmt, ...)
{
	va_list ap;
	char raw[sizeof(p->error)];

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	sl_secret_mask(raw, (const char *const *)p->secrets, p->nsecrets, p->error, sizeof(p->error));
}

static void parts_free(struct sl_source *p)
{
	for (size_t i = 0; i < p->nparts; i++)
		free(p->parts[i].topic);
	free(p->parts);
	p->parts = NULL;
	p->nparts = 0;
}

/* ---- the brokers ---- */

/* [lo, hi) of a partition: its earliest and latest offsets. */
int sl_kafka_watermarks(struct sl_source *p, const char *topic, int32_t part, int64_t *lo,
			int64_t *hi)
{
	rd_kafka_resp_err_t e =
	    rd_kafka_query_watermark_offsets(p->rk, topic, part, lo, hi, META_MS);
	if (e) {
		sl_kafka_seterr(p, "kafka: cannot get the offsets of %s-%d: %s", topic, part,
				rd_kafka_err2str(e));
		return EIO;
	}
	return 0;
}

static bool wanted(const struct sl_source *p, const char *topic, regex_t *re)
{
	const struct sl_kafka_config *c = p->kc;

	if (c->strategy == SL_KAFKA_SUBSCRIBE) {
		for (size_t i = 0; i < c->ntopics; i++)
			if (!strcmp(c->topics[i], topic))
				return true;
		return false;
	}
	if (c->strategy == SL_KAFKA_PATTERN)
		/* Kafka's internal topics (__consumer_offsets ...) are left out, as Spark's
		 * consumer does */
		return strncmp(topic, "__", 2) && regexec(re, topic, 0, NULL, 0) == 0;
	for (size_t i = 0; i < c->assign.n; i++)
		if (!strcmp(c->assign.e[i].topic, topic))
			return true;
	return false;
}

/*
 * The partitions the strategy names now, each with its latest offset, into
 * *out (new). assign: the assigned ones that exist; subscribe and
 * subscribePattern: every partition of the matching topics.
 */
static int fetch_latest(struct sl_source *p, struct sl_kafka_offsets *out)
{
	const struct sl_kafka_config *c = p->kc;
	const struct rd_kafka_metadata *md = NULL;
	struct sl_kafka_offsets o = {0};
	regex_t re;
	bool have_re = false;
	int rc = 0;

	if (c->strategy == SL_KAFKA_PATTERN) {
		char anchored[1024];
		snprintf(anchored, sizeof(anchored), "^(%s)$", c->pattern);
		if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB)) {
			sl_kafka_seterr(
			    p, "kafka: subscribePattern '%s' is not a POSIX extended regex",
			    c->pattern);
			return SL_ECONFIG;
		}
		have_re = true;
	}
	rd_kafka_resp_err_t e = rd_kafka_metadata(p->rk, 1, NULL, &md, META_MS);
	if (e) {
		sl_kafka_seterr(p, "kafka: cannot get the cluster's metadata: %s",
				rd_kafka_err2str(e));
		rc = EIO;
		goto done;
	}
	for (int t = 0; rc == 0 && t < md->topic_cnt; t++) {
		const struct rd_kafka_metadata_topic *mt = &md->topics[t];
		if (mt->err || !wanted(p, mt->topic, &re))
			continue;
		for (int k = 0; rc == 0 && k < mt->partition_cnt; k++) {
			int32_t id = mt->partitions[k].id;
			int64_t lo, hi;
			if (c->strategy == SL_KAFKA_ASSIGN &&
			    !sl_kafka_offsets_find(&c->assign, mt->topic, id))
				continue;
			if ((rc = sl_kafka_watermarks(p, mt->topic, id, &lo, &hi)) == 0)
				rc = sl_kafka_offsets_set(&o, mt->topic, id, hi);
		}
	}
done:
	if (md)
		rd_kafka_metadata_destroy(md);
	if (have_re)
		regfree(&re);
	if (rc)
		sl_kafka_offsets_release(&o);
	else
		*out = o;
	return rc;
}

/*
 * Data loss (Spark's reportDataLoss): with failOnDataLoss the query stops
 * naming what was lost; without, it is logged and counted.
 */
int sl_kafka_data_loss(struct sl_source *p, uint64_t n, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (p->kc->fail_on_data_loss) {
		sl_kafka_seterr(
		    p,
		    "kafka: %s: some data may have been lost because it is not available in "
		    "Kafka any more (aged out by retention, or the topic was deleted); set "
		    "failOnDataLoss to false to skip it and go on",
		    what);
		return SL_EDATALOSS;
	}
	p->lost += n;
	sl_log(SL_LOG_WARNING, "query '%s': kafka: %s: skipped (failOnDataLoss false)", p->q->name,
	       what);
	return 0;
}

/* ---- the checkpoint ---- */

static int get_text(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, char *out, size_t *len)
{
	const void *v;
	size_t l;
	int rc = sl_qlog_get(t, qid, kind, n, &v, &l);

	if (rc)
		return rc;
	if (l >= OFF)
		return SL_ECORRUPT;
	memcpy(out, v, l);
	out[l] = 0;
	if (len)
		*len = l;
	return 0;
}

/* Batch record n: "v1\n<ts>\n<first>\n<begin>\n<end>" into its parts. */
static int get_batch(struct sl_txn *t, uint32_t qid, uint64_t n, int64_t *ts, bool *first,
		     char *begin, char *end)
{
	char rec[3 * OFF];
	const void *v;
	size_t len;
	int rc = sl_qlog_get(t, qid, 'b', n, &v, &len);

	if (rc)
		return rc;
	if (len >= sizeof(rec))
		return SL_ECORRUPT;
	memcpy(rec, v, len);
	rec[len] = 0;
	char *f[5], *s = rec;
	for (int i = 0; i < 5; i++) {
		f[i] = s;
		char *nl = i < 4 ? strchr(s, '\n') : NULL;
		if (i < 4 && !nl)
			return SL_ECORRUPT;
		if (nl) {
			*nl = 0;
			s = nl + 1;
		}
	}
	if (strcmp(f[0], "v1") || strlen(f[3]) >= OFF || strlen(f[4]) >= OFF || !f[4][0])
		return SL_ECORRUPT;
	*ts = strtoll(f[1], NULL, 10);
	*first = f[2][0] == '1';
	strcpy(begin, f[3]);
	strcpy(end, f[4]);
	return 0;
}

/* The sum of a map's offsets (the backlog's bookkeeping). */
static uint64_t offsets_sum(const struct sl_kafka_offsets *o)
{
	uint64_t s = 0;
	for (size_t i = 0; i < o->n; i++)
		s += o->e[i].offset > 0 ? (uint64_t)o->e[i].offset : 0;
	return s;
}

/* ---- planning ---- */

/* The parts of (begin, end]: partitions whose range is not empty. */
static int make_parts(struct sl_source *p, const struct sl_kafka_offsets *b,
		      const struct sl_kafka_offsets *e)
{
	parts_free(p);
	p->parts = calloc(e->n + 1, sizeof(*p->parts));
	if (!p->parts)
		return ENOMEM;
	for (size_t i = 0; i < e->n; i++) {
		const struct sl_kafka_tpo *s =
		    sl_kafka_offsets_find(b, e->e[i].topic, e->e[i].partition);
		int64_t from = s ? s->offset : 0;
		if (e->e[i].offset <= from)
			continue;
		struct part *pt = &p->parts[p->nparts];
		if (!(pt->topic = strdup(e->e[i].topic)))
			return ENOMEM;
		pt->partition = e->e[i].partition;
		pt->from = from;
		pt->until = e->e[i].offset;
		p->nparts++;
	}
	return 0;
}

static int parse_offsets(struct sl_source *p, const char *text, struct sl_kafka_offsets *o)
{
	char why[256];
	int rc = sl_kafka_offsets_parse(text, strlen(text), false, o, why, sizeof(why));
	if (rc == SL_ECONFIG) {
		sl_kafka_seterr(p, "kafka: a logged offset is not Spark's offset JSON: %s", why);
		return SL_ECORRUPT;
	}
	return rc;
}

/* The initial offsets: startingOffsets resolved against the partitions now. */
static int resolve_initial(struct sl_source *p, const struct sl_kafka_offsets *latest,
			   struct sl_kafka_offsets *out)
{
	const struct sl_kafka_config *c = p->kc;
	struct sl_kafka_offsets o = {0};
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < latest->n; i++) {
		const struct sl_kafka_tpo *e = &latest->e[i];
		int64_t want =
		    c->start == SL_KAFKA_START_EARLIEST ? SL_KAFKA_EARLIEST : SL_KAFKA_LATEST;
		if (c->start == SL_KAFKA_START_JSON) {
			const struct sl_kafka_tpo *j =
			    sl_kafka_offsets_find(&c->start_json, e->topic, e->partition);
			if (!j) {
				/* Spark's assert in fetchSpecificOffsets */
				sl_kafka_seterr(
				    p,
				    "queries.%s.source.startingOffsets: if startingOffsets "
				    "contains specific offsets, you must specify all "
				    "TopicPartitions: %s-%d is missing",
				    p->q->name, e->topic, e->partition);
				rc = SL_ECONFIG;
				break;
			}
			want = j->offset;
		}
		int64_t lo = 0, hi = e->offset;
		if (want == SL_KAFKA_EARLIEST || want >= 0)
			rc = sl_kafka_watermarks(p, e->topic, e->partition, &lo, &hi);
		if (rc == 0)
			rc = sl_kafka_offsets_set(&o, e->topic, e->partition,
						  want == SL_KAFKA_EARLIEST ? lo
						  : want == SL_KAFKA_LATEST ? hi
									    : want);
	}
	for (size_t i = 0; rc == 0 && c->start == SL_KAFKA_START_JSON && i < c->start_json.n; i++) {
		const struct sl_kafka_tpo *j = &c->start_json.e[i];
		if (!sl_kafka_offsets_find(latest, j->topic, j->partition))
			rc = sl_kafka_data_loss(p, 0,
						"startingOffsets names %s-%d, which does not exist",
						j->topic, j->partition);
	}
	if (rc)
		sl_kafka_offsets_release(&o);
	else
		*out = o;
	return rc;
}

/*
 * The next batch from start (every known partition's next offset) and the
 * latest offsets: new partitions from their earliest, gone ones and
 * offsets that went back reported as data loss, then the admission limits.
 * begin and end get the batch's range.
 */
static int plan(struct sl_source *p, const struct sl_kafka_offsets *start,
		struct sl_kafka_offsets *begin, struct sl_kafka_offsets *end)
{
	const struct sl_kafka_config *c = p->kc;
	const struct sl_kafka_offsets *until = p->have_fixed ? &p->fixed : &p->latest;
	struct sl_kafka_offsets b = {0}, e = {0};
	int64_t *from = NULL, *to = NULL, *ends = NULL;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < start->n; i++) {
		const struct sl_kafka_tpo *s = &start->e[i];
		if (!sl_kafka_offsets_find(&p->latest, s->topic, s->partition))
			rc = sl_kafka_data_loss(p, 0, "partition %s-%d is gone", s->topic,
						s->partition);
	}
	for (size_t i = 0; rc == 0 && i < until->n; i++) {
		const struct sl_kafka_tpo *u = &until->e[i];
		const struct sl_kafka_tpo *s = sl_kafka_offsets_find(start, u->topic, u->partition);
		int64_t from_off;
		if (s) {
			from_off = s->offset;
		} else {
			/* a new partition: from its earliest (Spark's rule) */
			int64_t lo, hi;
			if ((rc = sl_kafka_watermarks(p, u->topic, u->partition, &lo, &hi)))
				break;
			if (lo != 0 &&
			    (rc = sl_kafka_data_loss(p, (uint64_t)lo,
						     "added partition %s-%d starts from %" PRId64
						     " instead of 0",
						     u->topic, u->partition, lo)))
				break;
			from_off = lo;
		}
		/*
		 * latest below where the query is: a broker behind the others?
		 * Asked again fetchOffset.numRetries times (Spark's rule)
		 */
		int64_t u_off = u->offset;
		for (int64_t k = 0; rc == 0 && u_off < from_off && k < c->fetch_retries; k++) {
			int64_t lo, until_ms = sl_kafka_now_ms() + c->fetch_retry_ms;
			while (sl_kafka_now_ms() < until_ms && !(p->stop && *p->stop))
				nanosleep(&(struct timespec){0, 20000000}, NULL);
			if ((rc = sl_kafka_watermarks(p, u->topic, u->partition, &lo, &u_off)))
				break;
		}
		if (rc)
			break;
		if (u_off < from_off &&
		    (rc = sl_kafka_data_loss(
			 p, 0, "partition %s-%d's offset was changed from %" PRId64 " to %" PRId64,
			 u->topic, u->partition, from_off, u_off)))
			break;
		/* an offset that went back (failOnDataLoss false) is where the query goes on, as
		 * Spark */
		if ((rc = sl_kafka_offsets_set(&b, u->topic, u->partition, from_off)) ||
		    (rc = sl_kafka_offsets_set(&e, u->topic, u->partition, u_off)))
			break;
	}
	if (rc)
		goto fail;
	/* minOffsetsPerTrigger, held back at most maxTriggerDelay */
	bool delay = false;
	if (c->min_offsets && !p->fix_end && !p->ignore_caps) {
		int64_t now = sl_kafka_now_ms(), avail = 0;
		for (size_t i = 0; i < e.n; i++)
			avail += e.e[i].offset - b.e[i].offset;
		if (p->last_trigger_ms &&
		    now - p->last_trigger_ms < c->max_trigger_delay_us / 1000 &&
		    avail < c->min_offsets)
			delay = true;
		else
			p->last_trigger_ms = now;
	}
	if (delay) {
		for (size_t i = 0; i < e.n; i++)
			e.e[i].offset = b.e[i].offset;
	} else if (c->max_offsets && !p->ignore_caps) {
		from = calloc(e.n + 1, sizeof(*from));
		to = calloc(e.n + 1, sizeof(*to));
		ends = calloc(e.n + 1, sizeof(*ends));
		if (!from || !to || !ends) {
			rc = ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < e.n; i++) {
			from[i] = b.e[i].offset;
			to[i] = e.e[i].offset;
		}
		sl_kafka_split(c->max_offsets, from, to, e.n, ends);
		for (size_t i = 0; i < e.n; i++)
			e.e[i].offset = ends[i];
	}
	free(from);
	free(to);
	free(ends);
	*begin = b;
	*end = e;
	return 0;
fail:
	free(from);
	free(to);
	free(ends);
	sl_kafka_offsets_release(&b);
	sl_kafka_offsets_release(&e);
	return rc;
}

/* What prepare() needs of the checkpoint. */
static int read_state(struct sl_source *p, bool *logged, bool *has_initial)
{
	struct sl_txn *t;
	char key[48];
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(p->l), &t)))
		return rc;
	sl_qlog_meta_key(key, sizeof(key), p->qid, "next");
	*logged = *has_initial = false;
	p->last_end[0] = 0;
	rc = sl_txn_meta_get(t, key, &p->batch);
	if (rc == 0) {
		rc = get_batch(t, p->qid, p->batch, &p->ts_ms, &p->first, p->begin, p->end);
		*logged = rc == 0;
		if (rc == SL_NOTFOUND)
			rc = 0;
	}
	if (rc == 0 && !*logged && p->batch > 0) {
		char b[OFF];
		int64_t ts;
		bool first;
		rc = get_batch(t, p->qid, p->batch - 1, &ts, &first, b, p->last_end);
		if (rc == SL_NOTFOUND)
			rc = SL_ECORRUPT; /* batch N-1 committed: its record is kept */
	}
	if (rc == 0) {
		char v[OFF];
		size_t len;
		rc = get_text(t, p->qid, 's', 0, v, &len);
		if (rc == 0) {
			if (len < 4 || v[0] != 0 || memcmp(v + 1, "v1\n", 3))
				rc = SL_ECORRUPT;
			else
				memcpy(p->initial, v + 4, len - 3);
			*has_initial = rc == 0;
		} else if (rc == SL_NOTFOUND) {
			rc = 0;
		}
	}
	sl_txn_end(t);
	return rc;
}

static int make_client(struct sl_source *p);

static int kafka_prepare(struct sl_source *p, char *err, size_t errlen)
{
	struct sl_kafka_offsets start = {0}, begin = {0}, end = {0}, latest = {0};
	bool logged, has_initial;
	int rc;

	p->prepared = false;
	p->error[0] = 0;
	p->write_initial = false;
	p->lost = 0; /* counted by this batch's planning and reads */
	parts_free(p);
	if ((rc = make_client(p)) || (rc = read_state(p, &logged, &has_initial)))
		goto done;
	if (logged) {
		/* a replay: exactly the logged range */
		p->replay = true;
		if ((rc = parse_offsets(p, p->begin, &begin)) ||
		    (rc = parse_offsets(p, p->end, &end)))
			goto done;
		rc = make_parts(p, &begin, &end);
		goto done;
	}
	p->replay = false;
	if ((rc = fetch_latest(p, &latest)))
		goto done;
	sl_kafka_offsets_release(&p->latest);
	p->latest = latest;
	if (sl_kafka_offsets_render(&p->latest, p->latest_text, OFF))
		p->latest_text[0] = 0; /* too long to show */
	if (p->fix_end && !p->have_fixed) {
		if ((rc = sl_kafka_offsets_copy(&p->fixed, &p->latest)))
			goto done;
		p->have_fixed = true;
	}
	p->first = !p->last_end[0];
	if (p->last_end[0]) {
		rc = parse_offsets(p, p->last_end, &start);
	} else if (has_initial) {
		rc = parse_offsets(p, p->initial, &start);
	} else {
		rc = resolve_initial(p, &p->latest, &start);
		if (rc == 0)
			rc = sl_kafka_offsets_render(&start, p->initial, sizeof(p->initial));
		p->write_initial = rc == 0;
	}
	if (rc)
		goto done;
	if ((rc = plan(p, &start, &begin, &end)))
		goto done;
	if ((rc = sl_kafka_offsets_render(&begin, p->begin, OFF)) ||
	    (rc = sl_kafka_offsets_render(&end, p->end, OFF))) {
		if (rc == ENAMETOOLONG)
			sl_kafka_seterr(p, "kafka: the offsets of %zu partitions pass %d bytes",
					end.n, OFF - 1);
		goto done;
	}
	rc = make_parts(p, &begin, &end);
	if (rc == 0 && p->nparts == 0) {
		/*
		 * no records, but the offsets moved (a partition gone, or back, or
		 * new and empty): a batch of no rows logs the new end, as in Spark
		 */
		char was[OFF];
		bool moved = sl_kafka_offsets_render(&start, was, OFF) == 0 && strcmp(was, p->end);
		if (moved && !(p->parts[0].topic = strdup("")))
			rc = ENOMEM;
		else if (moved)
			p->nparts = 1; /* an empty range: read() returns at once */
	}
done:
	sl_kafka_offsets_release(&start);
	sl_kafka_offsets_release(&begin);
	sl_kafka_offsets_release(&end);
	if (rc) {
		if (p->error[0])
			snprintf(err, errlen, "%s", p->error);
		return rc;
	}
	p->prepared = true;
	return 0;
}

static void fill_range(struct sl_source *p, struct sl_source_range *r)
{
	if (p->first)
		r->start[0] = 0;
	else
		memcpy(r->start, p->replay ? p->begin : p->last_end, OFF);
	memcpy(r->end, p->end, OFF);
	r->nparts = p->nparts;
}

static int kafka_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			struct sl_source_range *r)
{
	(void)t;
	if (!p->prepared || !p->replay || batch != p->batch)
		return SL_NOTFOUND;
	fill_range(p, r);
	r->replay = true;
	r->ts_ms = p->ts_ms;
	return 0;
}

/* A meta value, written only when it changed (a poll writes nothing new). */
static int meta_set(struct sl_txn *t, uint32_t qid, const char *what, uint64_t v)
{
	char key[48];
	uint64_t old;
	int rc;

	sl_qlog_meta_key(key, sizeof(key), qid, what);
	if ((rc = sl_txn_meta_get(t, key, &old)))
		return rc;
	return old == v ? 0 : sl_txn_meta_put(t, key, v);
}

static int kafka_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	int rc;

	if (!p->prepared)
		return EINVAL; /* the engine calls prepare() first */
	if (p->write_initial) {
		/* Spark's KafkaSourceInitialOffsetWriter: kept even without a batch */
		struct sl_strbuf b = {0};
		sl_strbuf_add(&b, "\0v1\n", 4);
		sl_strbuf_adds(&b, p->initial);
		rc = b.oom ? ENOMEM : sl_qlog_put(t, p->qid, 's', 0, b.p, b.len);
		sl_strbuf_release(&b);
		if (rc)
			return rc;
		/* write_initial stays: a transaction tried again writes it again */
		if (!p->last_end[0])
			memcpy(p->last_end, p->initial, OFF); /* the next asking's start */
	}
	if ((rc = meta_set(t, p->qid, "klat", offsets_sum(&p->latest))))
		return rc;
	fill_range(p, r);
	if (r->nparts == 0 && !p->first)
		memcpy(r->end, r->start, OFF);
	return 0;
}

static int kafka_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		     struct sl_source_range *r)
{
	struct sl_strbuf rec = {0};
	struct sl_kafka_offsets e = {0};
	int rc;

	if (r->nparts == 0) {
		/* a no-data batch repeats the last end */
		const char *last = p->last_end[0] ? p->last_end : p->initial;
		memmove(p->end, last, OFF);
		memmove(p->begin, last, OFF);
		p->first = false;
		memcpy(r->end, p->end, OFF);
		memcpy(r->start, p->end, OFF);
	}
	sl_strbuf_addf(&rec, "v1\n%" PRId64 "\n%d\n%s\n%s", ts_ms, p->first ? 1 : 0, p->begin,
		       p->end);
	rc = rec.oom ? ENOMEM : sl_qlog_put(t, p->qid, 'b', batch, rec.p, rec.len);
	sl_strbuf_release(&rec);
	if (rc == 0 && batch >= KEEP_BATCHES)
		rc = sl_qlog_del(t, p->qid, 'b', batch - KEEP_BATCHES);
	if (rc == 0 && (rc = parse_offsets(p, p->end, &e)) == 0) {
		rc = meta_set(t, p->qid, "kend", offsets_sum(&e));
		sl_kafka_offsets_release(&e);
	}
	return rc;
}

/* ---- the rest of the contract ---- */

static int kafka_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			 struct sl_source_backlog *out)
{
	char key[48];
	uint64_t lat, end;
	int rc;

	(void)q;
	*out = (struct sl_source_backlog){.known = true, .unit = {"offsets", NULL}};
	sl_qlog_meta_key(key, sizeof(key), qid, "klat");
	if ((rc = sl_txn_meta_get(t, key, &lat)))
		return rc;
	sl_qlog_meta_key(key, sizeof(key), qid, "kend");
	if ((rc = sl_txn_meta_get(t, key, &end)))
		return rc;
	if (end == 0) {
		/* no batch yet: behind the initial offsets */
		const void *v;
		size_t len;
		struct sl_kafka_offsets o = {0};
		char why[64];
		rc = sl_qlog_get(t, qid, 's', 0, &v, &len);
		if (rc == SL_NOTFOUND)
			return 0;
		if (rc)
			return rc;
		if (len > 4 && sl_kafka_offsets_parse((const char *)v + 4, len - 4, false, &o, why,
						      sizeof(why)) == 0) {
			end = offsets_sum(&o);
			sl_kafka_offsets_release(&o);
		}
	}
	out->v[0] = lat > end ? lat - end : 0;
	return 0;
}

/*
 * The batch's metrics: how far its end is behind the latest offsets asked
 * for when it was planned (none for a replay in a new run, which asked
 * for none: Spark's rule), and the offsets failOnDataLoss false skipped.
 */
static int kafka_commit_txn(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			    struct sl_source_metrics *m)
{
	struct sl_kafka_offsets e = {0};
	size_t k = 0;

	(void)t;
	(void)batch;
	if (p->latest.n && parse_offsets(p, p->end, &e) == 0 && e.n) {
		uint64_t min = UINT64_MAX, max = 0, sum = 0;
		for (size_t i = 0; i < e.n; i++) {
			const struct sl_kafka_tpo *l =
			    sl_kafka_offsets_find(&p->latest, e.e[i].topic, e.e[i].partition);
			uint64_t behind = l && l->offset > e.e[i].offset
					      ? (uint64_t)(l->offset - e.e[i].offset)
					      : 0;
			min = behind < min ? behind : min;
			max = behind > max ? behind : max;
			sum += behind;
		}
		m->metrics[k].name = "avgOffsetsBehindLatest";
		m->metrics[k].value = sum / e.n;
		m->metrics[k].real = (double)sum / (double)e.n;
		m->metrics[k++].is_real = true;
		m->metrics[k].name = "maxOffsetsBehindLatest";
		m->metrics[k++].value = max;
		m->metrics[k].name = "minOffsetsBehindLatest";
		m->metrics[k++].value = min;
	}
	sl_kafka_offsets_release(&e);
	if (p->lost) {
		m->metrics[k].name = "dataLoss";
		m->metrics[k++].value = p->lost;
	}
	m->nmetrics = k;
	m->latest_offset = p->latest.n ? p->latest_text : NULL;
	return 0;
}

static void kafka_describe(const struct sl_source *p, char *buf, size_t len)
{
	const struct sl_kafka_config *c = p->kc;
	struct sl_strbuf b = {0};

	if (c->strategy == SL_KAFKA_SUBSCRIBE) {
		sl_strbuf_adds(&b, "KafkaV2[Subscribe[");
		for (size_t i = 0; i < c->ntopics; i++)
			sl_strbuf_addf(&b, "%s%s", i ? ", " : "", c->topics[i]);
	} else if (c->strategy == SL_KAFKA_PATTERN) {
		sl_strbuf_addf(&b, "KafkaV2[SubscribePattern[%s", c->pattern);
	} else {
		sl_strbuf_adds(&b, "KafkaV2[Assign[");
		for (size_t i = 0; i < c->assign.n; i++)
			sl_strbuf_addf(&b, "%s%s-%d", i ? ", " : "", c->assign.e[i].topic,
				       c->assign.e[i].partition);
	}
	sl_strbuf_adds(&b, "]]");
	if (b.oom)
		snprintf(buf, len, "KafkaV2");
	else
		snprintf(buf, len, "%.*s", (int)b.len, b.p);
	sl_strbuf_release(&b);
}

/* librdkafka's log lines: debug lines of sluice's, secrets masked. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	struct sl_source *p = rd_kafka_opaque(rk);
	char line[1024];

	(void)level;
	if (p)
		sl_secret_mask(buf, (const char *const *)p->secrets, p->nsecrets, line, sizeof(line));
	else
		snprintf(line, sizeof(line), "%s", buf);
	sl_log(SL_LOG_DEBUG, "query '%s': librdkafka %s: %s", p ? p->q->name : "?", fac, line);
}

static int conf_set(struct sl_source *p, rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char why[512];

	if (rd_kafka_conf_set(conf, k, v, why, sizeof(why)) != RD_KAFKA_CONF_OK) {
		sl_kafka_seterr(p, "queries.%s.source.kafka.%s: %s", p->q->name, k, why);
		return SL_ECONFIG;
	}
	return 0;
}

/*
 * The consumer, made at the first prepare() (which can say what is wrong
 * with a kafka.* option): Spark's forced settings over the user's, secrets
 * resolved. 0, or an error with p->error set.
 */
static int make_client(struct sl_source *p)
{
	const struct sl_kafka_config *c = p->kc;
	rd_kafka_conf_t *conf;
	char why[512], group[512];
	int rc;

	if (p->rk)
		return 0;
	if ((rc = sl_rdk_load(why, sizeof(why)))) {
		sl_kafka_seterr(p, "queries.%s.source: %s", p->q->name, why);
		return rc;
	}
	if (!(conf = rd_kafka_conf_new()))
		return ENOMEM;
	rd_kafka_conf_set_opaque(conf, p);
	rd_kafka_conf_set_log_cb(conf, on_log);
	/* a group id is needed by the consumer; it never joins it nor commits */
	snprintf(group, sizeof(group), "%s-%s-%" PRIu32, c->group_prefix, p->q->name, p->qid);
	static const char *const forced[] = {"enable.auto.commit",
					     "false",
					     "enable.auto.offset.store",
					     "false",
					     "auto.offset.reset",
					     "error",
					     "enable.partition.eof",
					     "true",
					     NULL};
	rc = conf_set(p, conf, "group.id", group);
	/*
	 * The consumer is assigned only while it reads a range that is there:
	 * a fetch that waits for more (librdkafka's 500 ms default) only holds
	 * up the next partition's read. The user's kafka.* setting wins.
	 */
	if (rc == 0)
		rc = conf_set(p, conf, "fetch.wait.max.ms", "10");
	for (size_t i = 0; rc == 0 && i < c->nkv; i++) {
		const char *k = c->kv[2 * i], *v = c->kv[2 * i + 1];
		char *s = NULL;
		if (sl_secret_is_ref(v)) {
			if ((rc = sl_secret_resolve(v, &s, why, sizeof(why)))) {
				sl_kafka_seterr(p, "queries.%s.source.kafka.%s: %s", p->q->name, k,
						why);
				rc = SL_ECONFIG;
				break;
			}
			v = s;
		} else if (sl_kafka_key_is_secret(k) && !(s = strdup(v))) {
			rc = ENOMEM;
			break;
		}
		if (s) {
			/* kept for masking */
			char **g = realloc(p->secrets, (p->nsecrets + 1) * sizeof(*g));
			if (!g) {
				sl_secret_free(s);
				rc = ENOMEM;
				break;
			}
			p->secrets = g;
			p->secrets[p->nsecrets++] = s;
		}
		rc = conf_set(p, conf, k, v);
	}
	for (size_t i = 0; rc == 0 && forced[i]; i += 2)
		rc = conf_set(p, conf, forced[i], forced[i + 1]);
	if (rc) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	if (c->group_id)
		sl_log(SL_LOG_WARNING,
		       "query '%s': kafka.group.id is set: the source never joins the group nor "
		       "commits to it, but concurrently running queries or sources with the same "
		       "group id may interfere with each other",
		       p->q->name);
	if (!(p->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why)))) {
		rd_kafka_conf_destroy(conf);
		sl_kafka_seterr(p, "queries.%s.source: cannot make a Kafka consumer: %s",
				p->q->name, why);
		return SL_ECONFIG;
	}
	return 0;
}

static int kafka_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p;
	int rc;

	if (!a->q->source.kafka)
		return EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->kc = a->q->source.kafka;
	p->qid = a->qid;
	p->stop = a->stop;
	p->ignore_caps = a->ignore_caps;
	p->fix_end = a->seq_limit != UINT64_MAX || a->q->trigger == SL_TRIGGER_AVAILABLE_NOW ||
		     a->q->trigger == SL_TRIGGER_ONCE;
	if (p->kc->vformat == SL_KAFKA_V_JSON && (rc = sl_decoder_new(a->q, &p->dec))) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void kafka_stop(struct sl_source *p)
{
	if (!p)
		return;
	if (p->rk) {
		rd_kafka_assign(p->rk, NULL);
		rd_kafka_consumer_close(p->rk);
		rd_kafka_destroy(p->rk);
	}
	sl_decoder_free(p->dec);
	parts_free(p);
	sl_kafka_offsets_release(&p->latest);
	sl_kafka_offsets_release(&p->fixed);
	for (size_t i = 0; i < p->nsecrets; i++)
		sl_secret_free(p->secrets[i]);
	free(p->secrets);
	free(p);
}

const struct sl_source_ops sl_source_kafka = {
    .name = "kafka",
    .replayable = true,
    .open = kafka_open,
    .prepare = kafka_prepare,
    .replay = kafka_replay,
    .latest_offset = kafka_latest_offset,
    .log = kafka_log,
    .read = sl_kafka_read,
    .pending = kafka_pending,
    .commit_txn = kafka_commit_txn,
    .describe = kafka_describe,
    .stop = kafka_stop,
};
