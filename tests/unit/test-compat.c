/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/compat.c: which config changes a checkpoint survives,
 * the messages naming the refused field, and reading stored descriptions
 * (corrupt, from another version, with fields this version does not know).
 */
#include <limits.h>
#include <stdbool.h>

#include "check.h"
#include "compat.h"
#include "config.h"

#define REFUSED ": the checkpoint cannot survive it; rename the query to start afresh"
#define NOT_LOADED INT_MIN /* compare(): a config did not load */

/* Deduplication, a csv source with every option the checkpoint survives a change of. */
static const char dedup_q[] =
    "{\"queries\": {\"events\": {"
    "\"source\": {\"format\": \"csv\", \"path\": \"events/*\", \"schema\": \"event_id STRING NOT "
    "NULL, user_id STRING, amount BIGINT, event_time TIMESTAMP, ingest_time TIMESTAMP, day "
    "STRING\", \"maxFilesPerTrigger\": 500, \"header\": true, \"sep\": \";\", \"mode\": "
    "\"PERMISSIVE\", \"cleanSource\": \"off\", \"maxFileAge\": \"1 day\", \"fileAgeBy\": "
    "\"landed\", \"latestFirst\": false}, "
    "\"watermark\": {\"column\": \"event_time\", \"delay\": \"10 minutes\"}, "
    "\"dropDuplicates\": [\"event_id\", \"event_time\"], "
    "\"sink\": {\"format\": \"json\", \"compression\": \"none\", \"partitionBy\": [\"day\"]}, "
    "\"trigger\": {\"processingTime\": \"5 seconds\"}}}}";

static const char dedup_desc[] = "sluice-compat 1\n"
				 "source.format=csv\n"
				 "source.path=events/*\n"
				 "watermark.column=event_time\n"
				 "dropDuplicates=[event_id, event_time]\n"
				 "dropDuplicatesWithinWatermark=\n"
				 "groupBy=\n"
				 "aggregate=\n"
				 "outputMode=append\n"
				 "sink.format=json\n"
				 "sink.partitionBy=[day]\n"
				 "source.schema=event_id STRING, event_time TIMESTAMP\n";

/* A windowed aggregation. */
static const char agg_q[] =
    "{\"queries\": {\"events\": {"
    "\"source\": {\"format\": \"json\", \"path\": \"events\", \"schema\": \"user_id STRING, "
    "amount BIGINT, price DOUBLE, event_time TIMESTAMP, note STRING\"}, "
    "\"watermark\": {\"column\": \"event_time\", \"delay\": \"1 minute\"}, "
    "\"groupBy\": {\"window\": {\"column\": \"event_time\", \"duration\": \"10 minutes\"}, "
    "\"columns\": [\"user_id\"]}, "
    "\"aggregate\": {\"n\": \"count(*)\", \"total\": \"sum(amount)\"}, "
    "\"outputMode\": \"append\"}}}";

static const char agg_desc[] =
    "sluice-compat 1\n"
    "source.format=json\n"
    "source.path=events\n"
    "watermark.column=event_time\n"
    "dropDuplicates=\n"
    "dropDuplicatesWithinWatermark=\n"
    "groupBy=window(event_time, 10 minutes) by user_id\n"
    "aggregate=count(*) AS n, sum(amount) AS total\n"
    "outputMode=append\n"
    "sink.format=json\n"
    "sink.partitionBy=\n"
    "source.schema=user_id STRING, amount BIGINT, event_time TIMESTAMP\n";

/* The first query of a sluice.json text, or NULL (said on stderr) when it does not load. */
static struct sl_config *load(const char *json)
{
	struct sl_config *c = NULL;
	char err[512];
	int rc;

	rc = sl_config_parse(json, strlen(json), "mem", &c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "config does not load: %s: %s\n  %s\n", sl_strerror(rc), err, json);
		return NULL;
	}
	return c;
}

/*
 * base with each pairs[2i] replaced by pairs[2i+1] (first occurrence), up to a
 * NULL; new, or NULL (said on stderr) when a pairs[2i] is absent.
 */
static char *edit(const char *base, const char *const *pairs)
{
	char *s = strdup(base);

	for (size_t i = 0; s && pairs[i]; i += 2) {
		const char *from = pairs[i], *to = pairs[i + 1];
		char *hit = strstr(s, from), *t;
		size_t pre, flen = strlen(from), tlen = strlen(to);

		if (!hit) {
			fprintf(stderr, "edit: '%s' not found in\n  %s\n", from, s);
			free(s);
			return NULL;
		}
		pre = (size_t)(hit - s);
		t = malloc(strlen(s) - flen + tlen + 1);
		if (t) {
			memcpy(t, s, pre);
			memcpy(t + pre, to, tlen);
			strcpy(t + pre + tlen, hit + flen);
		}
		free(s);
		s = t;
	}
	return s;
}

/* The description of the first query of json (new), or NULL. */
static char *describe(const char *json, size_t *len)
{
	struct sl_config *c = load(json);
	char *text = NULL;
	int rc;

	if (!c)
		return NULL;
	rc = sl_compat_describe(sl_config_query(c, 0), &text, len);
	if (rc)
		fprintf(stderr, "sl_compat_describe: %s\n", sl_strerror(rc));
	sl_config_free(c);
	return text;
}

/* Checks the first query of json against a stored description. */
static int check_text(const char *json, const char *stored, size_t len, char *err, size_t errlen)
{
	struct sl_config *c = load(json);
	int rc;

	if (!c)
		return NOT_LOADED;
	rc = sl_compat_check(sl_config_query(c, 0), stored, len, err, errlen);
	sl_config_free(c);
	return rc;
}

/* Checks the config now against the description of the config was. */
static int compare(const char *was, const char *now, char *err, size_t errlen)
{
	size_t len;
	char *text = describe(was, &len);
	int rc;

	if (!text)
		return NOT_LOADED;
	rc = check_text(now, text, len, err, errlen);
	free(text);
	return rc;
}

/* True when err is a one-line refusal of queries.events.<field>. */
static bool names_field(const char *err, const char *field)
{
	char prefix[128];
	size_t n = strlen(err), m = strlen(REFUSED);

	snprintf(prefix, sizeof(prefix), "queries.events.%s: ", field);
	if (strncmp(err, prefix, strlen(prefix)) || n < m || strcmp(err + n - m, REFUSED) ||
	    strchr(err, '\n')) {
		fprintf(stderr, "expected a refusal of %s, got '%s'\n", field, err);
		return false;
	}
	return true;
}

struct change {
	const char *base;
	const char *edits[7]; /* from, to pairs, then NULL */
	const char *field;    /* the field refused, or NULL when the change is allowed */
};

/* Runs each change; returns the number that failed. */
static int run_changes(const struct change *cases, size_t n)
{
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		const struct change *t = &cases[i];
		char *now = edit(t->base, t->edits), err[1024] = "";
		int rc = now ? compare(t->base, now, err, sizeof(err)) : NOT_LOADED;

		if (t->field ? rc != SL_ECONFIG || !names_field(err, t->field) : rc != 0) {
			fprintf(stderr, "change %zu ('%s' -> '%s'): expected %s, got %s: %s\n", i,
				t->edits[0], t->edits[1], t->field ? t->field : "compatible",
				rc == NOT_LOADED ? "a config that does not load"
				: rc		 ? sl_strerror(rc)
						 : "compatible",
				err);
			failed++;
		}
		free(now);
	}
	return failed;
}

static void test_describe(void)
{
	char *a, *b;
	size_t alen, blen;

	a = describe(dedup_q, &alen);
	CHECK(a && alen == strlen(a));
	if (strcmp(a, dedup_desc))
		fprintf(stderr, "got:\n%s", a);
	CHECK(!strcmp(a, dedup_desc));
	free(a);
	b = describe(agg_q, &blen);
	CHECK(b && blen == strlen(b));
	if (strcmp(b, agg_desc))
		fprintf(stderr, "got:\n%s", b);
	CHECK(!strcmp(b, agg_desc));
	free(b);
	/* stable: the same config describes the same */
	a = describe(agg_q, &alen);
	b = describe(agg_q, &blen);
	CHECK(a && b && alen == blen && !memcmp(a, b, alen));
	free(a);
	free(b);
}

static void test_identical(void)
{
	char err[512] = "untouched";

	CHECK(compare(dedup_q, dedup_q, err, sizeof(err)) == 0);
	CHECK(compare(agg_q, agg_q, err, sizeof(err)) == 0);
	CHECK(!strcmp(err, "untouched"));
	/* the texts written down above, as if read back from the catalog */
	CHECK(check_text(dedup_q, dedup_desc, strlen(dedup_desc), err, sizeof(err)) == 0);
	CHECK(check_text(agg_q, agg_desc, strlen(agg_desc), err, sizeof(err)) == 0);
	CHECK(check_text(agg_q, agg_desc, strlen(agg_desc), NULL, 0) == 0);
}

static void test_refused(void)
{
	static const struct change cases[] = {
	    {agg_q, {"\"format\": \"json\"", "\"format\": \"csv\""}, "source.format"},
	    {dedup_q, {"\"events/*\"", "\"events/x*\""}, "source.path"},
	    {agg_q, {"\"path\": \"events\"", "\"path\": \"events/sub\""}, "source.path"},
	    {dedup_q,
	     {"\"column\": \"event_time\", \"delay\"", "\"column\": \"ingest_time\", \"delay\""},
	     "watermark.column"},
	    {dedup_q,
	     {"\"watermark\": {\"column\": \"event_time\", \"delay\": \"10 minutes\"}, ", ""},
	     "watermark.column"},
	    {dedup_q, {"[\"event_id\", \"event_time\"]", "[\"event_id\"]"}, "dropDuplicates"},
	    {dedup_q,
	     {"[\"event_id\", \"event_time\"]", "[\"event_time\", \"event_id\"]"},
	     "dropDuplicates"},
	    {dedup_q,
	     {"\"dropDuplicates\": [\"event_id\", \"event_time\"], ", ""},
	     "dropDuplicates"},
	    {dedup_q,
	     {"\"dropDuplicates\"", "\"dropDuplicatesWithinWatermark\""},
	     "dropDuplicates"},
	    {agg_q, {"\"duration\": \"10 minutes\"}", "\"duration\": \"5 minutes\"}"}, "groupBy"},
	    {agg_q,
	     {"\"duration\": \"10 minutes\"}",
	      "\"duration\": \"10 minutes\", \"slide\": \"5 minutes\"}"},
	     "groupBy"},
	    {agg_q, {"[\"user_id\"]", "[\"user_id\", \"note\"]"}, "groupBy"},
	    {agg_q, {"[\"user_id\"]", "[\"note\"]"}, "groupBy"},
	    /* the window moves to another column; outputMode changes too, but later */
	    {agg_q,
	     {"event_time TIMESTAMP", "event_time TIMESTAMP, t2 TIMESTAMP",
	      "\"window\": {\"column\": \"event_time\"", "\"window\": {\"column\": \"t2\"",
	      "\"append\"", "\"update\""},
	     "groupBy"},
	    {agg_q,
	     {"\"groupBy\": {\"window\": {\"column\": \"event_time\", \"duration\": \"10 "
	      "minutes\"}, \"columns\": [\"user_id\"]}, ",
	      "", "\"append\"", "\"update\""},
	     "groupBy"},
	    {agg_q, {"\"n\": \"count(*)\"", "\"cnt\": \"count(*)\""}, "aggregate"},
	    {agg_q, {"sum(amount)", "max(amount)"}, "aggregate"},
	    {agg_q, {"sum(amount)", "sum(price)"}, "aggregate"},
	    {agg_q, {"\"count(*)\"", "\"count(note)\""}, "aggregate"},
	    {agg_q,
	     {"{\"n\": \"count(*)\", \"total\": \"sum(amount)\"}",
	      "{\"total\": \"sum(amount)\", \"n\": \"count(*)\"}"},
	     "aggregate"},
	    {agg_q,
	     {"\"total\": \"sum(amount)\"", "\"total\": \"sum(amount)\", \"p\": \"max(price)\""},
	     "aggregate"},
	    {agg_q, {"\"append\"", "\"update\""}, "outputMode"},
	    {agg_q, {"\"append\"", "\"complete\""}, "outputMode"},
	    {dedup_q,
	     {"\"format\": \"json\", \"compression\"", "\"format\": \"csv\", \"compression\""},
	     "sink.format"},
	    {dedup_q,
	     {"\"partitionBy\": [\"day\"]", "\"partitionBy\": [\"user_id\"]"},
	     "sink.partitionBy"},
	    {dedup_q, {", \"partitionBy\": [\"day\"]", ""}, "sink.partitionBy"},
	    {dedup_q, {"[\"day\"]", "[\"day\", \"user_id\"]"}, "sink.partitionBy"},
	    {agg_q, {"amount BIGINT", "amount DOUBLE"}, "source.schema"},
	    {agg_q, {"amount BIGINT", "amount INT"}, "source.schema"},
	    {agg_q, {"user_id STRING", "user_id INT"}, "source.schema"},
	    {dedup_q, {"event_id STRING NOT NULL", "event_id BIGINT NOT NULL"}, "source.schema"},
	};
	CHECK(run_changes(cases, sizeof(cases) / sizeof(cases[0])) == 0);
}

/* Changes that need an edited base, and the exact messages. */
static void test_refused_messages(void)
{
	static const char *const no_wm[] = {
	    "\"watermark\": {\"column\": \"event_time\", \"delay\": \"10 minutes\"}, ", "", NULL};
	static const char *const within[] = {"\"dropDuplicates\"",
					     "\"dropDuplicatesWithinWatermark\"", NULL};
	static const char *const within_fewer[] = {"[\"event_id\", \"event_time\"]",
						   "[\"event_id\"]", NULL};
	static const char *const five[] = {"\"duration\": \"10 minutes\"}",
					   "\"duration\": \"5 minutes\"}", NULL};
	static const char *const double_amount[] = {"amount BIGINT", "amount DOUBLE", NULL};
	char *a = edit(dedup_q, no_wm), *b = edit(dedup_q, within), *c = NULL, *d = NULL;
	char err[1024];

	CHECK(a && b);
	/* adding a watermark is a change of its column */
	CHECK(compare(a, dedup_q, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.watermark.column: changed since the checkpoint was made "
			   "(was none, now event_time)" REFUSED));
	CHECK(compare(dedup_q, a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.watermark.column: changed since the checkpoint was made "
			   "(was event_time, now none)" REFUSED));
	/* within the watermark: its own field */
	c = edit(b, within_fewer);
	CHECK(c && compare(b, c, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err,
		      "queries.events.dropDuplicatesWithinWatermark: changed since the "
		      "checkpoint was made (was [event_id, event_time], now [event_id])" REFUSED));
	CHECK(compare(b, dedup_q, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.dropDuplicates: changed since the checkpoint was made "
			   "(was none, now [event_id, event_time])" REFUSED));
	free(c);
	c = NULL;
	/* the example of core/compat.h */
	c = edit(agg_q, five);
	CHECK(c && compare(agg_q, c, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err,
		      "queries.events.groupBy: changed since the checkpoint was made (was "
		      "window(event_time, 10 minutes) by user_id, now window(event_time, 5 "
		      "minutes) by user_id): the checkpoint cannot survive it; rename the query "
		      "to start afresh"));
	d = edit(agg_q, double_amount);
	CHECK(d && compare(agg_q, d, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.source.schema: column 'amount' held in state changed "
			   "type from BIGINT to DOUBLE" REFUSED));
	/* no err, or a short one */
	CHECK(compare(agg_q, d, NULL, 0) == SL_ECONFIG);
	CHECK(compare(agg_q, d, err, 8) == SL_ECONFIG && !strcmp(err, "queries"));
	free(a);
	free(b);
	free(c);
	free(d);
}

/* socket: host and port are the checkpoint's; includeTimestamp and maxSpoolBytes are not. */
static void test_socket(void)
{
	static const char sock_q[] =
	    "{\"queries\": {\"s\": {\"source\": {\"format\": \"socket\", \"host\": "
	    "\"localhost\", \"port\": 9999}}}}";
	static const char *const host[] = {"\"localhost\"", "\"127.0.0.1\"", NULL};
	static const char *const port[] = {"9999", "9998", NULL};
	static const char *const opts[] = {"9999}", "9999, \"maxSpoolBytes\": \"1m\"}", NULL};
	char *a = edit(sock_q, host), *b = edit(sock_q, port), *c = edit(sock_q, opts);
	struct sl_config *cfg = load(sock_q);
	char err[1024], *text = NULL;
	size_t len;

	CHECK(a && b && c && cfg);
	CHECK_OK(sl_compat_describe(sl_config_query(cfg, 0), &text, &len));
	CHECK(text && strstr(text, "source.format=socket\n") &&
	      strstr(text, "source.host=localhost\nsource.port=9999\n"));
	CHECK(compare(sock_q, a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.s.source.host: changed since the checkpoint was made "
			   "(was localhost, now 127.0.0.1)" REFUSED));
	CHECK(compare(sock_q, b, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.s.source.port: changed since the checkpoint was made "
			   "(was 9999, now 9998)" REFUSED));
	CHECK(compare(sock_q, c, err, sizeof(err)) == 0);
	free(text);
	sl_config_free(cfg);
	free(a);
	free(b);
	free(c);
}

static void test_allowed(void)
{
	static const struct change cases[] = {
	    {dedup_q, {"\"maxFilesPerTrigger\": 500", "\"maxFilesPerTrigger\": 7"}, NULL},
	    {dedup_q, {"\"maxFilesPerTrigger\": 500", "\"maxBytesPerTrigger\": \"1mb\""}, NULL},
	    {dedup_q, {"\"maxFilesPerTrigger\": 500, ", ""}, NULL},
	    {dedup_q, {"\"latestFirst\": false", "\"latestFirst\": true"}, NULL},
	    {dedup_q, {"\"maxFileAge\": \"1 day\"", "\"maxFileAge\": \"2 hours\""}, NULL},
	    {dedup_q, {"\"fileAgeBy\": \"landed\"", "\"fileAgeBy\": \"mtime\""}, NULL},
	    {dedup_q, {"\"mode\": \"PERMISSIVE\"", "\"mode\": \"FAILFAST\""}, NULL},
	    {dedup_q, {"\"mode\": \"PERMISSIVE\"", "\"mode\": \"DROPMALFORMED\""}, NULL},
	    {dedup_q, {"\"cleanSource\": \"off\"", "\"cleanSource\": \"archive\""}, NULL},
	    {dedup_q, {"\"cleanSource\": \"off\"", "\"cleanSource\": \"delete\""}, NULL},
	    {dedup_q, {"\"header\": true", "\"header\": false"}, NULL},
	    {dedup_q, {"\"sep\": \";\"", "\"sep\": \",\""}, NULL},
	    {dedup_q, {"{\"processingTime\": \"5 seconds\"}", "{\"availableNow\": true}"}, NULL},
	    {dedup_q, {"{\"processingTime\": \"5 seconds\"}", "{\"once\": true}"}, NULL},
	    {dedup_q, {"\"5 seconds\"", "\"1 minute\""}, NULL},
	    {dedup_q, {", \"trigger\": {\"processingTime\": \"5 seconds\"}", ""}, NULL},
	    {dedup_q, {"\"compression\": \"none\"", "\"compression\": \"zstd\""}, NULL},
	    {dedup_q, {"\"delay\": \"10 minutes\"", "\"delay\": \"1 hour\""}, NULL},
	    {agg_q, {"\"delay\": \"1 minute\"", "\"delay\": \"0 seconds\""}, NULL},
	    /* schema columns not held in state: added (indexes shift), removed, retyped */
	    {dedup_q, {"\"schema\": \"event_id", "\"schema\": \"extra INT, event_id"}, NULL},
	    {agg_q, {"\"schema\": \"user_id", "\"schema\": \"extra INT, user_id"}, NULL},
	    {agg_q, {"note STRING", "note STRING, more DATE"}, NULL},
	    {dedup_q, {"amount BIGINT, ", ""}, NULL},
	    {dedup_q, {"amount BIGINT", "amount DOUBLE"}, NULL},
	    {dedup_q, {"user_id STRING", "user_id INT"}, NULL},
	    {agg_q, {"price DOUBLE", "price BIGINT"}, NULL},
	    {agg_q,
	     {"user_id STRING, amount BIGINT, price DOUBLE, event_time TIMESTAMP, note STRING",
	      "note STRING, event_time TIMESTAMP, price DOUBLE, amount BIGINT, user_id STRING"},
	     NULL},
	    /* nullability is not part of the state */
	    {dedup_q, {"event_id STRING NOT NULL", "event_id STRING"}, NULL},
	    /* the same thing spelt differently */
	    {agg_q, {"\"10 minutes\"", "\"600 seconds\""}, NULL},
	    {agg_q,
	     {"\"duration\": \"10 minutes\"}",
	      "\"duration\": \"10 minutes\", \"slide\": \"10 minutes\"}"},
	     NULL},
	    {agg_q, {"count(*)", "COUNT( * )", "sum(amount)", "Sum(`amount`)"}, NULL},
	    {agg_q, {"\"format\": \"json\"", "\"format\": \"JSON\""}, NULL},
	};
	CHECK(run_changes(cases, sizeof(cases) / sizeof(cases[0])) == 0);
}

static void test_corrupt(void)
{
	static const char *const texts[] = {
	    "",
	    "hello\n",
	    "sluice-compat",
	    "sluice-compat 1",
	    "sluice-compat \n",
	    "sluice-compat 01\n",
	    "sluice-compat x\n",
	    "sluice-compat 1 \n",
	    "sluice-compat 1\r\n",
	    "Sluice-compat 1\n",
	    "sluice-compat 1\nsource.format=json",
	    "sluice-compat 1\nsource.format\n",
	    "sluice-compat 1\n\n",
	    "sluice-compat 1\n=json\n",
	    "sluice-compat 1\nsource format=json\n",
	    "sluice-compat 1\nsource.format=json\nsource.format=json\n",
	    "sluice-compat 1\nsource.path=a\\qb\n",
	    "sluice-compat 1\nsource.path=a\\\n",
	    "sluice-compat 1\nsource.path=a\\x4\n",
	    "sluice-compat 1\nsource.path=a\\x41\n",
	    "sluice-compat 1\nsource.path=a\\x0A\n",
	    "sluice-compat 1\nsource.path=a\tb\n",
	    "sluice-compat 1\nsource.path=a\rb\n",
	    "sluice-compat 1\nfuture.field=a\x01\n",
	    "sluice-compat 1\nsource.schema=amount\n",
	    "sluice-compat 1\nsource.schema=amount \n",
	    "sluice-compat 1\nsource.schema= BIGINT\n",
	    "sluice-compat 1\nsource.schema=amount BIGINT,\n",
	    "sluice-compat 1\nsource.schema=amount BIGINT, \n",
	    "sluice-compat 1\nsource.schema=amount BIGINT,user_id STRING\n",
	    "sluice-compat 1\nsource.schema=amount  BIGINT\n",
	    "sluice-compat 1\nsource.schema=`amount BIGINT\n",
	    "sluice-compat 1\nsource.schema=`` BIGINT\n",
	    "sluice-compat 1\nsource.schema=`a\\x0ab` BIGINT\n",
	    "sluice-compat 1\nsource.schema=amount BIGINT NOT NULL\n",
	};
	/* a real description, then a change after a corrupt one: corruption wins */
	static const char bad_tail[] =
	    "sluice-compat 1\nsource.format=json\nsource.path=events\nwatermark.column=event_time\n"
	    "groupBy=window(event_time, 10 minutes) by user_id\n"
	    "aggregate=count(*) AS n, sum(amount) AS total\n"
	    "source.schema=amount DOUBLE, x\n";
	static const char nul[] = "sluice-compat 1\nsource.path=a\0b\n";
	char err[256] = "untouched";
	int failed = 0;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		int rc = check_text(agg_q, texts[i], strlen(texts[i]), err, sizeof(err));
		if (rc != SL_ECORRUPT) {
			fprintf(stderr, "corrupt text %zu '%s': got %s\n", i, texts[i],
				rc ? sl_strerror(rc) : "compatible");
			failed++;
		}
	}
	CHECK(failed == 0);
	CHECK(check_text(agg_q, nul, sizeof(nul) - 1, err, sizeof(err)) == SL_ECORRUPT);
	CHECK(check_text(agg_q, bad_tail, strlen(bad_tail), err, sizeof(err)) == SL_ECORRUPT);
	CHECK(check_text(agg_q, NULL, 0, err, sizeof(err)) == SL_ECORRUPT);
	CHECK(!strcmp(err, "untouched"));
	/*
	 * A description cut anywhere but right after a line's '\n' (which leaves
	 * a shorter, well-formed one).
	 */
	for (size_t n = 0; n < strlen(agg_desc); n++) {
		int rc;

		if (n > 0 && agg_desc[n - 1] == '\n')
			continue;
		rc = check_text(agg_q, agg_desc, n, err, sizeof(err));
		if (rc != SL_ECORRUPT) {
			fprintf(stderr, "cut at %zu: got %s\n", n,
				rc ? sl_strerror(rc) : "compatible");
			failed++;
		}
	}
	CHECK(failed == 0);
	CHECK(!strcmp(err, "untouched"));
}

static void test_version(void)
{
	static const char v2[] = "sluice-compat 2\nwhatever: the format may differ\n";
	static const char v10[] = "sluice-compat 10\n";
	char err[256] = "untouched";

	CHECK(check_text(agg_q, v2, strlen(v2), err, sizeof(err)) == SL_EVERSION);
	CHECK(check_text(agg_q, v10, strlen(v10), err, sizeof(err)) == SL_EVERSION);
	CHECK(!strcmp(err, "untouched"));
}

/* Lines this version does not know are skipped; fields it knows but misses are defaults. */
static void test_forward_compatible(void)
{
	static const char *const first[] = {
	    "sluice-compat 1\n", "sluice-compat 1\nfuture.option=anything = goes\n", NULL};
	static const char *const update[] = {"\"append\"", "\"update\"", NULL};
	static const char older[] = "sluice-compat 1\n"
				    "source.format=json\n"
				    "source.path=events\n"
				    "watermark.column=event_time\n"
				    "groupBy=window(event_time, 10 minutes) by user_id\n"
				    "aggregate=count(*) AS n, sum(amount) AS total\n";
	char *text, *extra, *upd, err[512];
	size_t len;

	text = describe(agg_q, &len);
	CHECK(text);
	extra = edit(text, first);
	CHECK(extra);
	/* an unknown field at the start and at the end, one with escapes */
	extra = realloc(extra, strlen(extra) + 64);
	CHECK(extra);
	strcat(extra, "x-later_field.2=a\\\\b\\x0ac\nempty=\n");
	CHECK(check_text(agg_q, extra, strlen(extra), err, sizeof(err)) == 0);
	/* they do not hide a change */
	upd = edit(agg_q, update);
	CHECK(upd && check_text(upd, extra, strlen(extra), err, sizeof(err)) == SL_ECONFIG);
	CHECK(names_field(err, "outputMode"));
	free(extra);
	free(text);

	/* fields missing: each compares as a config without the option */
	CHECK(check_text(agg_q, older, strlen(older), err, sizeof(err)) == 0);
	CHECK(check_text(upd, older, strlen(older), err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.outputMode: changed since the checkpoint was made (was "
			   "append, now update)" REFUSED));
	CHECK(check_text(agg_q, "sluice-compat 1\n", 16, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.events.source.format: changed since the checkpoint was made "
			   "(was none, now json)" REFUSED));
	free(upd);
}

/* Names that need quoting, and values that need escaping, stay one unambiguous line each. */
static void test_quoting(void)
{
	static const char q[] =
	    "{\"queries\": {\"odd\": {\"source\": {\"format\": \"json\", \"path\": "
	    "\"in\\\\*/a\\nb\", \"schema\": \"`my col` STRING, `a``b` INT, ts TIMESTAMP\"}, "
	    "\"groupBy\": {\"columns\": [\"my col\"]}, "
	    "\"aggregate\": {\"n, x\": \"count(*)\", \"m\": \"max(`a``b`)\"}, "
	    "\"outputMode\": \"update\", \"sink\": {\"partitionBy\": [\"my col\"]}}}}";
	static const char want[] = "sluice-compat 1\n"
				   "source.format=json\n"
				   "source.path=in\\\\*/a\\x0ab\n"
				   "watermark.column=\n"
				   "dropDuplicates=\n"
				   "dropDuplicatesWithinWatermark=\n"
				   "groupBy=by `my col`\n"
				   "aggregate=count(*) AS `n, x`, max(`a``b`) AS m\n"
				   "outputMode=update\n"
				   "sink.format=json\n"
				   "sink.partitionBy=[`my col`]\n"
				   "source.schema=`my col` STRING, `a``b` INT\n";
	static const char *const retype[] = {"`a``b` INT", "`a``b` BIGINT", NULL};
	static const char *const retype2[] = {"`my col` STRING", "`my col` DATE", NULL};
	/* the path's text spelt with a backslash, x, 0 and a, not a newline */
	static const char *const literal[] = {"a\\nb", "a\\\\x0ab", NULL};
	char *text, *a, *b, *c, err[512];
	size_t len;

	text = describe(q, &len);
	CHECK(text);
	if (strcmp(text, want))
		fprintf(stderr, "got:\n%s", text);
	CHECK(!strcmp(text, want));
	free(text);
	CHECK(compare(q, q, err, sizeof(err)) == 0);
	a = edit(q, retype);
	b = edit(q, retype2);
	c = edit(q, literal);
	CHECK(a && b && c);
	CHECK(compare(q, a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.odd.source.schema: column 'a`b' held in state changed type "
			   "from INT to BIGINT" REFUSED));
	CHECK(compare(q, b, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.odd.source.schema: column 'my col' held in state changed type "
			   "from STRING to DATE" REFUSED));
	CHECK(compare(q, c, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries.odd.source.path: changed since the checkpoint was made (was "
			   "in\\\\*/a\\x0ab, now in\\\\*/a\\\\x0ab)" REFUSED));
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	test(test_describe);
	test(test_identical);
	test(test_refused);
	test(test_refused_messages);
	test(test_socket);
	test(test_allowed);
	test(test_corrupt);
	test(test_version);
	test(test_forward_compatible);
	test(test_quoting);
	return test_exit();
}
