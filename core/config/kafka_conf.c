/* SPDX-License-Identifier: MIT */
/*
 * The kafka source's options and offsets (kafka_conf.h): Spark's option
 * rules and refusals, a small reader for the two JSON shapes Spark's Kafka
 * options use, the offset JSON writer, and maxOffsetsPerTrigger's split.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "err.h"
#include "kafka_conf.h"

/* ---- offsets ---- */

void sl_kafka_offsets_release(struct sl_kafka_offsets *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->e[i].topic);
	free(o->e);
	o->e = NULL;
	o->n = 0;
}

static int tpo_cmp(const char *t, int32_t p, const struct sl_kafka_tpo *e)
{
	int c = strcmp(t, e->topic);
	return c ? c : (p > e->partition) - (p < e->partition);
}

/* Index of (t, p), or where it would go (*found false). */
static size_t locate(const struct sl_kafka_offsets *o, const char *t, int32_t p, bool *found)
{
	size_t lo = 0, hi = o->n;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = tpo_cmp(t, p, &o->e[mid]);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

const struct sl_kafka_tpo *sl_kafka_offsets_find(const struct sl_kafka_offsets *o,
						 const char *topic, int32_t partition)
{
	bool found;
	size_t i = locate(o, topic, partition, &found);
	return found ? &o->e[i] : NULL;
}

int sl_kafka_offsets_set(struct sl_kafka_offsets *o, const char *topic, int32_t partition,
			 int64_t offset)
{
	bool found;
	size_t i = locate(o, topic, partition, &found);

	if (found) {
		o->e[i].offset = offset;
		return 0;
	}
	char *t = strdup(topic);
	struct sl_kafka_tpo *e = t ? realloc(o->e, (o->n + 1) * sizeof(*e)) : NULL;
	if (!e) {
		free(t);
		return ENOMEM;
	}
	o->e = e;
	memmove(&e[i + 1], &e[i], (o->n - i) * sizeof(*e));
	e[i] = (struct sl_kafka_tpo){.topic = t, .partition = partition, .offset = offset};
	o->n++;
	return 0;
}

int sl_kafka_offsets_copy(struct sl_kafka_offsets *to, const struct sl_kafka_offsets *from)
{
	struct sl_kafka_offsets c = {0};

	if (from->n && !(c.e = calloc(from->n, sizeof(*c.e))))
		return ENOMEM;
	for (size_t i = 0; i < from->n; i++, c.n++) {
		c.e[i] = from->e[i];
		if (!(c.e[i].topic = strdup(from->e[i].topic))) {
			sl_kafka_offsets_release(&c);
			return ENOMEM;
		}
	}
	*to = c;
	return 0;
}

/* A JSON reader for the two shapes: objects of strings to objects or arrays of integers. */
struct rd {
	const char *s, *end;
	char *err;
	size_t errlen;
};

static void ws(struct rd *r)
{
	while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r'))
		r->s++;
}

static bool eat(struct rd *r, char c)
{
	ws(r);
	if (r->s < r->end && *r->s == c) {
		r->s++;
		return true;
	}
	return false;
}

/* A JSON string into buf (len bytes): escapes \" \\ \/ only (topic names need none). */
static int string(struct rd *r, char *buf, size_t len, const char *what)
{
	size_t n = 0;

	if (!eat(r, '"'))
		return sl_config_fail(r->err, r->errlen, "expected %s in double quotes", what);
	while (r->s < r->end && *r->s != '"') {
		char c = *r->s++;
		if (c == '\\') {
			if (r->s >= r->end || !strchr("\"\\/", *r->s))
				return sl_config_fail(r->err, r->errlen, "unsupported escape in %s", what);
			c = *r->s++;
		}
		if ((unsigned char)c < 0x20)
			return sl_config_fail(r->err, r->errlen, "control character in %s", what);
		if (n + 1 >= len)
			return sl_config_fail(r->err, r->errlen, "%s longer than %zu bytes", what, len - 1);
		buf[n++] = c;
	}
	if (r->s >= r->end)
		return sl_config_fail(r->err, r->errlen, "unterminated %s", what);
	r->s++;
	buf[n] = 0;
	if (n == 0)
		return sl_config_fail(r->err, r->errlen, "empty %s", what);
	return 0;
}

static int integer(struct rd *r, int64_t *out, const char *what)
{
	char *e;

	ws(r);
	if (r->s >= r->end || !(*r->s == '-' || (*r->s >= '0' && *r->s <= '9')))
		return sl_config_fail(r->err, r->errlen, "expected an integer %s", what);
	errno = 0;
	/* the text is NUL-ended somewhere after: strtoll stops at the first non-digit */
	long long v = strtoll(r->s, &e, 10);
	if (errno || e > r->end || e == r->s ||
	    (e < r->end && (*e == '.' || *e == 'e' || *e == 'E')))
		return sl_config_fail(r->err, r->errlen, "expected an integer %s", what);
	r->s = e;
	*out = v;
	return 0;
}

static int partition_of(struct rd *r, const char *text, int32_t *out)
{
	char *e;
	errno = 0;
	long v = strtol(text, &e, 10);
	if (errno || *e || !text[0] || v < 0 || v > INT32_MAX || (text[0] == '0' && text[1]))
		return sl_config_fail(r->err, r->errlen, "partition '%s' is not a partition number", text);
	*out = (int32_t)v;
	return 0;
}

/* Parses {"t":X,...} where X is read by one(r, topic, o). */
static int topics_object(struct rd *r, struct sl_kafka_offsets *o, bool special, bool assign)
{
	char topic[256], part[16];
	int rc;

	if (!eat(r, '{'))
		return sl_config_fail(r->err, r->errlen, "expected a JSON object");
	if (eat(r, '}'))
		return 0;
	do {
		if ((rc = string(r, topic, sizeof(topic), "a topic name")))
			return rc;
		if (!eat(r, ':'))
			return sl_config_fail(r->err, r->errlen, "expected ':' after topic '%s'", topic);
		if (!eat(r, assign ? '[' : '{'))
			return sl_config_fail(r->err, r->errlen, "topic '%s': expected %s", topic,
				    assign ? "an array of partitions" : "an object of partitions");
		if (eat(r, assign ? ']' : '}'))
			continue;
		do {
			int32_t p = 0;
			int64_t off = 0;
			if (assign) {
				if ((rc = integer(r, &off, "partition")))
					return rc;
				if (off < 0 || off > INT32_MAX)
					return sl_config_fail(r->err, r->errlen,
						    "topic '%s': partition %" PRId64
						    " is not a partition number",
						    topic, off);
				p = (int32_t)off;
				off = 0;
			} else {
				if ((rc = string(r, part, sizeof(part), "a partition")) ||
				    (rc = partition_of(r, part, &p)))
					return rc;
				if (!eat(r, ':'))
					return sl_config_fail(r->err, r->errlen,
						    "expected ':' after partition");
				if ((rc = integer(r, &off, "offset")))
					return rc;
				if (off < (special ? SL_KAFKA_EARLIEST : 0))
					return sl_config_fail(
					    r->err, r->errlen,
					    "%s-%d: offset %" PRId64 " is not %s", topic, p, off,
					    special ? "an offset, -2 (earliest) or -1 (latest)"
						    : "an offset");
			}
			if (sl_kafka_offsets_find(o, topic, p))
				return sl_config_fail(r->err, r->errlen, "%s-%d is given twice", topic, p);
			if ((rc = sl_kafka_offsets_set(o, topic, p, off)))
				return rc;
		} while (eat(r, ','));
		if (!eat(r, assign ? ']' : '}'))
			return sl_config_fail(r->err, r->errlen, "topic '%s': expected ',' or '%c'", topic,
				    assign ? ']' : '}');
	} while (eat(r, ','));
	if (!eat(r, '}'))
		return sl_config_fail(r->err, r->errlen, "expected ',' or '}'");
	ws(r);
	if (r->s != r->end)
		return sl_config_fail(r->err, r->errlen, "text after the JSON object");
	return 0;
}

static int parse_any(const char *text, size_t len, bool special, bool assign,
		     struct sl_kafka_offsets *out, char *err, size_t errlen)
{
	/* a NUL-ended copy: strtoll needs an end */
	char *copy = malloc(len + 1);
	struct sl_kafka_offsets o = {0};
	int rc;

	if (!copy)
		return ENOMEM;
	memcpy(copy, text, len);
	copy[len] = 0;
	struct rd r = {copy, copy + len, err, errlen};
	rc = topics_object(&r, &o, special, assign);
	free(copy);
	if (rc) {
		sl_kafka_offsets_release(&o);
		return rc;
	}
	*out = o;
	return 0;
}

int sl_kafka_offsets_parse(const char *text, size_t len, bool allow_special,
			   struct sl_kafka_offsets *out, char *err, size_t errlen)
{
	return parse_any(text, len, allow_special, false, out, err, errlen);
}

int sl_kafka_assign_parse(const char *text, size_t len, struct sl_kafka_offsets *out, char *err,
			  size_t errlen)
{
	int rc = parse_any(text, len, false, true, out, err, errlen);
	if (rc == 0 && out->n == 0) {
		sl_kafka_offsets_release(out);
		return sl_config_fail(err, errlen, "no topic-partitions to assign");
	}
	return rc;
}

int sl_kafka_offsets_render(const struct sl_kafka_offsets *o, char *buf, size_t len)
{
	size_t at = 0;
	int n;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		n = snprintf(buf + at, len - at, __VA_ARGS__);                                     \
		if (n < 0 || (size_t)n >= len - at)                                                \
			return ENAMETOOLONG;                                                       \
		at += (size_t)n;                                                                   \
	} while (0)
	if (len == 0)
		return ENAMETOOLONG;
	PUT("{");
	for (size_t i = 0; i < o->n; i++) {
		bool first_of_topic = i == 0 || strcmp(o->e[i - 1].topic, o->e[i].topic);
		if (first_of_topic)
			PUT("%s\"%s\":{", i ? "}," : "", o->e[i].topic);
		else
			PUT(",");
		PUT("\"%d\":%" PRId64, o->e[i].partition, o->e[i].offset);
	}
	PUT(o->n ? "}}" : "}");
#undef PUT
	return 0;
}

/* ---- maxOffsetsPerTrigger ---- */

void sl_kafka_split(int64_t limit, const int64_t *begin, const int64_t *until, size_t n,
		    int64_t *ends)
{
	double total = 0;

	for (size_t i = 0; i < n; i++)
		if (until[i] > begin[i])
			total += (double)(until[i] - begin[i]);
	for (size_t i = 0; i < n; i++) {
		ends[i] = until[i];
		if (total < 1 || until[i] <= begin[i])
			continue;
		double size = (double)(until[i] - begin[i]);
		double prorate = (double)limit * (size / total);
		if (prorate >= size)
			continue; /* capped at until (and no overflow below) */
		/* don't completely starve small topicpartitions */
		int64_t whole = prorate < 1 ? (prorate > 0 ? 1 : 0) : (int64_t)prorate;
		if (whole < until[i] - begin[i])
			ends[i] = begin[i] + whole;
	}
}

/* ---- options ---- */

void sl_kafka_config_free(struct sl_kafka_config *c)
{
	if (!c)
		return;
	free(c->strategy_text);
	for (size_t i = 0; i < c->ntopics; i++)
		free(c->topics[i]);
	free(c->topics);
	free(c->pattern);
	free(c->group_prefix);
	sl_kafka_offsets_release(&c->assign);
	sl_kafka_offsets_release(&c->start_json);
	for (size_t i = 0; i < 2 * c->nkv; i++) {
		if (c->kv[i])
			explicit_bzero(c->kv[i], strlen(c->kv[i]));
		free(c->kv[i]);
	}
	free(c->kv);
	free(c);
}

bool sl_kafka_key_is_secret(const char *key)
{
	return strstr(key, "password") || strstr(key, "secret") ||
	       !strcmp(key, "sasl.oauthbearer.config") || !strcmp(key, "ssl.key.pem");
}

/* Spark's refusals of kafka.* keys (KafkaSourceProvider), by key. */
static const char *refused(const char *key)
{
	if (!strcmp(key, "auto.offset.reset"))
		return "Kafka option 'auto.offset.reset' is not supported: set the source option "
		       "'startingOffsets' to 'earliest' or 'latest' instead; a resumed query "
		       "continues where it left off";
	if (!strcmp(key, "key.deserializer"))
		return "Kafka option 'key.deserializer' is not supported: keys are always bytes";
	if (!strcmp(key, "value.deserializer"))
		return "Kafka option 'value.deserializer' is not supported: values are always "
		       "bytes (valueFormat chooses how they are shown)";
	if (!strcmp(key, "enable.auto.commit"))
		return "Kafka option 'enable.auto.commit' is not supported: the source never "
		       "commits offsets to Kafka (they live in the checkpoint)";
	if (!strcmp(key, "interceptor.classes"))
		return "Kafka option 'interceptor.classes' is not supported";
	return NULL;
}

static int add_kv(struct sl_kafka_config *c, const char *key, const char *value)
{
	char **kv = realloc(c->kv, (c->nkv + 1) * 2 * sizeof(*kv));
	if (!kv)
		return ENOMEM;
	c->kv = kv;
	kv[2 * c->nkv] = strdup(key);
	kv[2 * c->nkv + 1] = strdup(value);
	c->nkv++;
	return kv[2 * c->nkv - 2] && kv[2 * c->nkv - 1] ? 0 : ENOMEM;
}

static int split_topics(struct sl_kafka_config *c, const char *s)
{
	const char *p = s;

	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *a = p, *b = p + len;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (b > a) {
			char **t = realloc(c->topics, (c->ntopics + 1) * sizeof(*t));
			if (!t)
				return ENOMEM;
			c->topics = t;
			if (!(t[c->ntopics] = strndup(a, (size_t)(b - a))))
				return ENOMEM;
			c->ntopics++;
		}
		p += len + (comma != NULL);
	}
	return 0;
}

/* Spark's option names (any case); schema, mode and pollInterval are load.c's */
static const char *const known[] = {"assign",
				    "subscribe",
				    "subscribePattern",
				    "startingOffsets",
				    "maxOffsetsPerTrigger",
				    "minOffsetsPerTrigger",
				    "maxTriggerDelay",
				    "failOnDataLoss",
				    "includeHeaders",
				    "valueFormat",
				    "kafkaConsumer.pollTimeoutMs",
				    "groupIdPrefix",
				    "fetchOffset.numRetries",
				    "fetchOffset.retryIntervalMs",
				    NULL};

static const char *const streaming_only[] = {"endingOffsets", "endingOffsetsByTimestamp", NULL};
static const char *const not_yet[] = {"startingOffsetsByTimestamp",
				      "startingTimestamp",
				      "startingOffsetsByTimestampStrategy",
				      "minPartitions",
				      "maxRecordsPerPartition",
				      NULL};

static int in_list(const char *key, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (!strcasecmp(key, list[i]))
			return i;
	return -1;
}

/* Every option, by its canonical name (Spark matches keys in any case). */
static const struct sl_config_value *get(const struct sl_kafka_opt *opts, size_t n,
					 const char *name, const char **key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(opts[i].key, name)) {
			*key = opts[i].key;
			return &opts[i].v;
		}
	return NULL;
}

int sl_kafka_config_parse(const struct sl_kafka_opt *opts, size_t n, struct sl_kafka_config **out,
			  const char **bad, char *err, size_t errlen)
{
	struct sl_kafka_config *c = calloc(1, sizeof(*c));
	const struct sl_config_value *v;
	const char *key = NULL, *s;
	int rc = 0;

	*bad = NULL;
	if (!c)
		return ENOMEM;
	c->max_trigger_delay_us = 15 * 60 * 1000000ll;
	c->fail_on_data_loss = true;
	c->poll_timeout_ms = 120000;
	c->fetch_retries = 3;
	c->fetch_retry_ms = 1000;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *k = opts[i].key;
		*bad = k;
		if (!strncmp(k, "kafka.", 6)) {
			const char *why = refused(k + 6);
			if (why)
				rc = sl_config_fail(err, errlen, "%s", why);
			else if (opts[i].v.kind == SL_CONFIG_V_COMPOSITE ||
				 !strcmp(opts[i].v.str, "null"))
				rc = sl_config_fail(err, errlen,
					  "expected a string, number or boolean, got %s",
					  opts[i].v.str);
			else if (!k[6])
				rc = sl_config_fail(err, errlen,
					  "expected a Kafka client property after 'kafka.'");
			else
				rc = add_kv(c, k + 6, opts[i].v.str);
			if (rc == 0 && !strcmp(k + 6, "group.id"))
				c->group_id = true;
			if (rc == 0 && sl_kafka_key_is_secret(k + 6) && !c->secret) {
				c->secret = true;
				snprintf(c->secret_key, sizeof(c->secret_key), "%s", k);
			}
		} else if (in_list(k, streaming_only) >= 0) {
			rc = sl_config_fail(err, errlen, "ending offsets are not valid in streaming queries");
		} else if (in_list(k, not_yet) >= 0) {
			rc = sl_config_fail(err, errlen, "not supported by sluice's kafka source");
		} else if (in_list(k, known) < 0) {
			rc = sl_config_fail(err, errlen, "unknown option");
		}
	}
	if (rc)
		goto fail;
	*bad = NULL;

	/* exactly one strategy */
	static const char *const strategies[] = {"assign", "subscribe", "subscribePattern"};
	int nstrat = 0;
	const char *skey = NULL;
	const struct sl_config_value *sv = NULL;
	for (int i = 0; i < 3; i++) {
		const char *k;
		const struct sl_config_value *x = get(opts, n, strategies[i], &k);
		if (x) {
			if (nstrat++) {
				*bad = k;
				rc = sl_config_fail(err, errlen,
					  "only one of 'assign', 'subscribe', 'subscribePattern' "
					  "may be given");
				goto fail;
			}
			c->strategy = (enum sl_kafka_strategy)i;
			skey = k;
			sv = x;
		}
	}
	if (!nstrat) {
		rc = sl_config_fail(
		    err, errlen,
		    "one of the options 'assign', 'subscribe', 'subscribePattern' is required");
		goto fail;
	}
	*bad = skey;
	if (c->strategy == SL_KAFKA_ASSIGN) {
		if (sv->kind != SL_CONFIG_V_COMPOSITE && sv->kind != SL_CONFIG_V_STRING) {
			rc = sl_config_fail(err, errlen,
				  "expected e.g. {\"topicA\":[0,1],\"topicB\":[0,1]}, got %s",
				  sv->str);
			goto fail;
		}
		char msg[256];
		rc = sl_kafka_assign_parse(sv->str, strlen(sv->str), &c->assign, msg, sizeof(msg));
		if (rc == SL_ECONFIG)
			sl_config_fail(err, errlen, "%s; expected e.g. {\"topicA\":[0,1],\"topicB\":[0,1]}",
			     msg);
		if (rc)
			goto fail;
		/* the canonical text, for compat and the description: {"t":[0,1]} */
		char text[4096];
		size_t at = 0;
		for (size_t i = 0; i < c->assign.n && at < sizeof(text); i++) {
			const struct sl_kafka_tpo *e = &c->assign.e[i];
			bool first = i == 0 || strcmp(c->assign.e[i - 1].topic, e->topic);
			int m = first ? snprintf(text + at, sizeof(text) - at, "%s\"%s\":[%d",
						 i ? "]," : "{", e->topic, e->partition)
				      : snprintf(text + at, sizeof(text) - at, ",%d", e->partition);
			at += m > 0 ? (size_t)m : 0;
		}
		if (at + 3 > sizeof(text)) {
			rc = sl_config_fail(err, errlen, "longer than %zu bytes", sizeof(text) - 3);
			goto fail;
		}
		memcpy(text + at, "]}", 3);
		if (!(c->strategy_text = strdup(text))) {
			rc = ENOMEM;
			goto fail;
		}
	} else {
		if ((rc = sl_config_value_string(sv, &s, err, errlen)))
			goto fail;
		if (c->strategy == SL_KAFKA_SUBSCRIBE) {
			if ((rc = split_topics(c, s)))
				goto fail;
			if (!c->ntopics) {
				rc = sl_config_fail(err, errlen, "no topics to subscribe to");
				goto fail;
			}
		} else {
			const char *a = s, *b = s + strlen(s);
			while (a < b && (*a == ' ' || *a == '\t'))
				a++;
			while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
				b--;
			if (a == b) {
				rc = sl_config_fail(err, errlen, "pattern to subscribe is empty");
				goto fail;
			}
			if (!(c->pattern = strndup(a, (size_t)(b - a)))) {
				rc = ENOMEM;
				goto fail;
			}
		}
		if (!(c->strategy_text = strdup(s))) {
			rc = ENOMEM;
			goto fail;
		}
	}
	*bad = NULL;

	bool has_bootstrap = false;
	for (size_t i = 0; i < c->nkv; i++)
		if (!strcmp(c->kv[2 * i], "bootstrap.servers") && c->kv[2 * i + 1][0])
			has_bootstrap = true;
	if (!has_bootstrap) {
		rc = sl_config_fail(err, errlen,
			  "option 'kafka.bootstrap.servers' must be specified for "
			  "configuring Kafka consumer");
		goto fail;
	}

	if ((v = get(opts, n, "startingOffsets", &key))) {
		*bad = key;
		if (v->kind == SL_CONFIG_V_STRING && !strcasecmp(v->str, "latest")) {
			c->start = SL_KAFKA_START_LATEST;
		} else if (v->kind == SL_CONFIG_V_STRING && !strcasecmp(v->str, "earliest")) {
			c->start = SL_KAFKA_START_EARLIEST;
		} else if (v->kind == SL_CONFIG_V_STRING || v->kind == SL_CONFIG_V_COMPOSITE) {
			char msg[256];
			c->start = SL_KAFKA_START_JSON;
			rc = sl_kafka_offsets_parse(v->str, strlen(v->str), true, &c->start_json,
						    msg, sizeof(msg));
			if (rc == SL_ECONFIG)
				sl_config_fail(err, errlen,
				     "expected 'earliest', 'latest' or JSON as "
				     "{\"topicA\":{\"0\":23,\"1\":-1}}: %s",
				     msg);
			if (rc)
				goto fail;
			/* with assign, every assigned partition must be there (Spark's assert) */
			for (size_t i = 0; c->strategy == SL_KAFKA_ASSIGN && i < c->assign.n; i++) {
				const struct sl_kafka_tpo *e = &c->assign.e[i];
				if (!sl_kafka_offsets_find(&c->start_json, e->topic,
							   e->partition)) {
					rc = sl_config_fail(
					    err, errlen,
					    "if startingOffsets contains specific offsets, you "
					    "must specify all TopicPartitions: %s-%d is missing",
					    e->topic, e->partition);
					goto fail;
				}
			}
		} else {
			rc = sl_config_fail(err, errlen, "expected 'earliest', 'latest' or JSON, got %s",
				  v->str);
			goto fail;
		}
	}
	struct {
		const char *name;
		int64_t *out;
	} ints[] = {{"maxOffsetsPerTrigger", &c->max_offsets},
		    {"minOffsetsPerTrigger", &c->min_offsets},
		    {"kafkaConsumer.pollTimeoutMs", &c->poll_timeout_ms},
		    {"fetchOffset.retryIntervalMs", &c->fetch_retry_ms}};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		if (!(v = get(opts, n, ints[i].name, &key)))
			continue;
		*bad = key;
		if ((rc = sl_config_value_posint(v, INT64_MAX, ints[i].out, err, errlen)))
			goto fail;
	}
	if ((v = get(opts, n, "fetchOffset.numRetries", &key))) {
		*bad = key;
		if (v->kind == SL_CONFIG_V_INT && v->i == 0)
			c->fetch_retries = 0;
		else if ((rc = sl_config_value_posint(v, 1000, &c->fetch_retries, err, errlen)))
			goto fail;
	}
	if (c->min_offsets && c->max_offsets && c->min_offsets > c->max_offsets) {
		*bad = key = NULL;
		get(opts, n, "minOffsetsPerTrigger", bad);
		rc = sl_config_fail(err, errlen,
			  "the value of minOffsetPerTrigger(%" PRId64
			  ") is higher than the maxOffsetsPerTrigger(%" PRId64 ")",
			  c->min_offsets, c->max_offsets);
		goto fail;
	}
	if ((v = get(opts, n, "maxTriggerDelay", &key))) {
		*bad = key;
		if ((rc = sl_config_value_duration(v, &c->max_trigger_delay_us, err, errlen)))
			goto fail;
	}
	struct {
		const char *name;
		bool *out;
	} bools[] = {{"failOnDataLoss", &c->fail_on_data_loss},
		     {"includeHeaders", &c->include_headers}};
	for (size_t i = 0; i < 2; i++) {
		if (!(v = get(opts, n, bools[i].name, &key)))
			continue;
		*bad = key;
		if ((rc = sl_config_value_bool(v, bools[i].out, err, errlen)))
			goto fail;
	}
	s = "sluice-kafka-source";
	if ((v = get(opts, n, "groupIdPrefix", &key))) {
		*bad = key;
		if ((rc = sl_config_value_string(v, &s, err, errlen)))
			goto fail;
		if (!s[0]) {
			rc = sl_config_fail(err, errlen, "expected a non-empty prefix");
			goto fail;
		}
	}
	if (!(c->group_prefix = strdup(s))) {
		rc = ENOMEM;
		goto fail;
	}
	static const char *const vformats[] = {"binary", "string", "json", NULL};
	if ((v = get(opts, n, "valueFormat", &key))) {
		int f;
		*bad = key;
		if ((rc = sl_config_value_enum(v, vformats, &f, err, errlen)))
			goto fail;
		c->vformat = (enum sl_kafka_vformat)f;
	}
	*bad = NULL;
	*out = c;
	return 0;
fail:
	sl_kafka_config_free(c);
	return rc;
}
