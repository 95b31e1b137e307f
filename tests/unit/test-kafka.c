/* SPDX-License-Identifier: MIT */
/*
 * The kafka source's pure parts (kafka_conf.h): Spark's offset JSON both
 * ways, assign's JSON, maxOffsetsPerTrigger's split against Spark's test
 * vector, and the options' rules and refusals through sl_config_parse().
 */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "config.h"
#include "kafka_conf.h"
#include "sluice-build.h"

static void test_offsets_round_trip(void)
{
	struct sl_kafka_offsets o = {0};
	char buf[256], err[256];
	const char *in = "{ \"t2\" : {\"1\":5, \"0\" :7}, \"t1\":{\"10\":-1,\"2\":-2}}";

	CHECK_OK(sl_kafka_offsets_parse(in, strlen(in), true, &o, err, sizeof(err)));
	CHECK(o.n == 4);
	CHECK_OK(sl_kafka_offsets_render(&o, buf, sizeof(buf)));
	/* sorted by topic, then partition number (2 before 10) */
	CHECK(!strcmp(buf, "{\"t1\":{\"2\":-2,\"10\":-1},\"t2\":{\"0\":7,\"1\":5}}"));
	CHECK(sl_kafka_offsets_find(&o, "t2", 1)->offset == 5);
	CHECK(sl_kafka_offsets_find(&o, "t2", 2) == NULL);
	CHECK(sl_kafka_offsets_render(&o, buf, 10) == ENAMETOOLONG);
	sl_kafka_offsets_release(&o);

	/* -1 and -2 only where startingOffsets allows them */
	CHECK(sl_kafka_offsets_parse("{\"t\":{\"0\":-1}}", 14, false, &o, err, sizeof(err)) ==
	      SL_ECONFIG);
	static const char *const bad[] = {"",
					  "[]",
					  "{\"t\":[0]}",
					  "{\"t\":{\"0\":1.5}}",
					  "{\"t\":{\"x\":1}}",
					  "{\"t\":{\"0\":1,\"0\":2}}",
					  "{\"t\":{\"0\":1}} x",
					  "{\"\":{\"0\":1}}",
					  "{\"t\":{\"0\":-3}}",
					  "{\"t\":{\"01\":1}}",
					  "{\"t\":{\"0\":1}",
					  NULL};
	for (int i = 0; bad[i]; i++) {
		int rc = sl_kafka_offsets_parse(bad[i], strlen(bad[i]), true, &o, err, sizeof(err));
		if (rc != SL_ECONFIG)
			fprintf(stderr, "accepted '%s'\n", bad[i]);
		CHECK(rc == SL_ECONFIG);
	}
	/* an empty map renders as Spark's {} */
	CHECK_OK(sl_kafka_offsets_parse("{}", 2, false, &o, err, sizeof(err)));
	CHECK_OK(sl_kafka_offsets_render(&o, buf, sizeof(buf)));
	CHECK(!strcmp(buf, "{}"));
	sl_kafka_offsets_release(&o);
}

static void test_assign(void)
{
	struct sl_kafka_offsets o = {0};
	char err[256];
	const char *in = "{\"topicB\":[2,4],\"topicA\":[0,1]}";

	CHECK_OK(sl_kafka_assign_parse(in, strlen(in), &o, err, sizeof(err)));
	CHECK(o.n == 4);
	CHECK(!strcmp(o.e[0].topic, "topicA") && o.e[0].partition == 0);
	CHECK(!strcmp(o.e[3].topic, "topicB") && o.e[3].partition == 4);
	sl_kafka_offsets_release(&o);
	CHECK(sl_kafka_assign_parse("{}", 2, &o, err, sizeof(err)) == SL_ECONFIG);
	CHECK(sl_kafka_assign_parse("{\"a\":[-1]}", 10, &o, err, sizeof(err)) == SL_ECONFIG);
	CHECK(sl_kafka_assign_parse("topicA", 6, &o, err, sizeof(err)) == SL_ECONFIG);
}

static void test_split(void)
{
	/* Spark's "maxOffsetsPerTrigger" test: 101, 11 and 1 messages, limit 10 */
	int64_t begin[3] = {0, 0, 0}, until[3] = {101, 11, 1}, ends[3];
	sl_kafka_split(10, begin, until, 3, ends);
	/* "1 from smallest, 1 from middle, 8 from biggest" */
	CHECK(ends[0] == 8 && ends[1] == 1 && ends[2] == 1);
	/* next: from (8, 1, 1) */
	int64_t b2[3] = {8, 1, 1};
	sl_kafka_split(10, b2, until, 3, ends);
	CHECK(ends[0] == 8 + 9 && ends[1] == 1 + 1 && ends[2] == 1);
	/* nothing to read: until */
	int64_t same[2] = {5, 5};
	sl_kafka_split(10, same, same, 2, ends);
	CHECK(ends[0] == 5 && ends[1] == 5);
	/* a limit above what there is: until */
	int64_t b3[2] = {0, 3}, u3[2] = {4, 5};
	sl_kafka_split(100, b3, u3, 2, ends);
	CHECK(ends[0] == 4 && ends[1] == 5);
	/* huge ranges do not overflow */
	int64_t b4[2] = {0, 0}, u4[2] = {INT64_MAX, INT64_MAX};
	sl_kafka_split(INT64_MAX, b4, u4, 2, ends);
	CHECK(ends[0] <= INT64_MAX && ends[0] > 0 && ends[1] > 0);
}

/* Loads one query whose source is src (JSON text); err gets the message. */
static int load(const char *src, char *err, size_t errlen)
{
	char text[2048];
	struct sl_config *c = NULL;
	int n = snprintf(text, sizeof(text), "{\"queries\":{\"q\":{\"source\":%s}}}", src);
	int rc = sl_config_parse(text, (size_t)n, "test", &c, err, errlen);
	sl_config_free(c);
	return rc;
}

#define B "\"format\":\"kafka\",\"kafka.bootstrap.servers\":\"h:9092\""

static void expect_refused(const char *src, const char *want)
{
	char err[1024] = "";
	int rc = load(src, err, sizeof(err));
	if (rc != SL_ECONFIG || !strstr(err, want))
		fprintf(stderr, "%s\n  expected '%s'\n  got %d '%s'\n", src, want, rc, err);
	CHECK(rc == SL_ECONFIG && strstr(err, want));
}

static void test_options(void)
{
	char err[1024];
	struct sl_config *c = NULL;

	if (!SL_HAVE_KAFKA) {
		expect_refused("{" B ",\"subscribe\":\"t\"}", "built without librdkafka");
		return;
	}
	CHECK_OK(load("{" B ",\"subscribe\":\" a, ,b \"}", err, sizeof(err)));
	CHECK_OK(load("{" B
		      ",\"assign\":{\"t\":[0,1]},\"startingOffsets\":{\"t\":{\"0\":-2,\"1\":5}}}",
		      err, sizeof(err)));
	CHECK_OK(load("{" B ",\"assign\":\"{\\\"t\\\":[0]}\",\"maxOffsetsPerTrigger\":\"10\"}", err,
		      sizeof(err)));
	const char *ok =
	    "{\"queries\":{\"q\":{\"source\":{" B ",\"subscribePattern\":\"ev.*\","
	    "\"valueFormat\":\"json\",\"schema\":\"id BIGINT\",\"includeHeaders\":true,"
	    "\"kafka.group.id\":\"g\",\"kafka.isolation.level\":\"read_committed\"}}}}";
	CHECK_OK(sl_config_parse(ok, strlen(ok), "test", &c, err, sizeof(err)));
	const struct sl_kafka_config *k = sl_config_query(c, 0)->source.kafka;
	CHECK(k->strategy == SL_KAFKA_PATTERN && !strcmp(k->pattern, "ev.*"));
	CHECK(k->group_id && k->include_headers && k->vformat == SL_KAFKA_V_JSON);
	CHECK(k->fail_on_data_loss && k->max_trigger_delay_us == 15 * 60 * 1000000ll);
	CHECK(k->nkv == 3);
	CHECK(!strcmp(k->group_prefix, "sluice-kafka-source"));
	sl_config_free(c);

	expect_refused("{" B "}", "queries.q.source: one of the options 'assign', 'subscribe', "
				  "'subscribePattern' is required");
	expect_refused("{" B ",\"subscribe\":\"a\",\"assign\":{\"a\":[0]}}",
		       "only one of 'assign', 'subscribe', 'subscribePattern'");
	expect_refused("{" B ",\"subscribe\":\" , \"}",
		       "queries.q.source.subscribe: no topics to subscribe to");
	expect_refused("{\"format\":\"kafka\",\"subscribe\":\"a\"}", "kafka.bootstrap.servers");
	static const char *const keys[] = {"auto.offset.reset",	  "key.deserializer",
					   "value.deserializer",  "enable.auto.commit",
					   "interceptor.classes", NULL};
	for (int i = 0; keys[i]; i++) {
		char src[256], want[256];
		snprintf(src, sizeof(src), "{" B ",\"subscribe\":\"a\",\"kafka.%s\":\"x\"}",
			 keys[i]);
		snprintf(want, sizeof(want),
			 "queries.q.source.kafka.%s: Kafka option '%s' is not supported", keys[i],
			 keys[i]);
		expect_refused(src, want);
	}
	expect_refused("{" B ",\"subscribe\":\"a\",\"schema\":\"x INT\"}",
		       "queries.q.source.schema: the kafka format has a fixed schema");
	expect_refused("{" B ",\"subscribe\":\"a\",\"valueFormat\":\"json\"}",
		       "queries.q.source.schema: required with valueFormat json");
	expect_refused("{" B ",\"subscribe\":\"a\",\"minOffsetsPerTrigger\":20,"
		       "\"maxOffsetsPerTrigger\":10}",
		       "queries.q.source.minOffsetsPerTrigger: the value of "
		       "minOffsetPerTrigger(20) is higher than the maxOffsetsPerTrigger(10)");
	expect_refused("{" B ",\"assign\":{\"t\":[0,1]},\"startingOffsets\":{\"t\":{\"0\":1}}}",
		       "queries.q.source.startingOffsets: if startingOffsets contains specific "
		       "offsets, you must specify all TopicPartitions: t-1 is missing");
	expect_refused("{" B ",\"subscribe\":\"a\",\"startingOffsets\":\"first\"}",
		       "queries.q.source.startingOffsets: expected 'earliest', 'latest' or JSON");
	expect_refused("{" B ",\"subscribe\":\"a\",\"endingOffsets\":\"latest\"}",
		       "queries.q.source.endingOffsets: ending offsets are not valid in streaming");
	expect_refused("{" B ",\"subscribe\":\"a\",\"maxOffsetsPerTrigger\":0}",
		       "queries.q.source.maxOffsetsPerTrigger:");
	expect_refused("{" B ",\"subscribe\":\"a\",\"path\":\"x\"}",
		       "queries.q.source.path: the kafka format reads no files");
	expect_refused("{" B ",\"subscribe\":\"a\",\"bogus\":1}",
		       "queries.q.source.bogus: unknown option");
	expect_refused("{" B ",\"subscribe\":\"a\",\"groupIdPrefix\":\"\"}",
		       "queries.q.source.groupIdPrefix: expected a non-empty prefix");
	expect_refused("{" B ",\"subscribe\":\"a\",\"mode\":\"FAILFAST\"}",
		       "queries.q.source.mode: only with valueFormat json");
}

int main(void)
{
	test(test_offsets_round_trip);
	test(test_assign);
	test(test_split);
	test(test_options);
	return test_exit();
}
