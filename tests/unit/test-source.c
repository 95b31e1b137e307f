/* SPDX-License-Identifier: MIT */
/* Unit tests of core/source.c: which landed paths a query's path reads. */
#include "check.h"
#include "config.h"
#include "source.h"

static bool matches(const char *pattern, const char *relpath)
{
	struct sl_path p;
	char err[128];
	if (sl_config_path_parse(pattern, &p, err, sizeof(err))) {
		fprintf(stderr, "bad pattern '%s': %s\n", pattern, err);
		exit(1);
	}
	bool m = sl_source_match(&p, relpath);
	sl_config_path_release(&p);
	return m;
}

static void test_design_examples(void)
{
	/* DESIGN §1: "events" reads events/x.json and events/date=.../x.json */
	CHECK(matches("events", "events/x.json"));
	CHECK(matches("events", "events/date=2026-10-04/x.json"));
	CHECK(matches("events", "events/date=2026-10-04/hour=12/x.json"));
	CHECK(!matches("events", "events/sub/x.json"));
	CHECK(!matches("events", "other/x.json"));
	CHECK(!matches("events", "eventsx/x.json"));
}

static void test_ignored_names(void)
{
	CHECK(!matches("events", "events/_SUCCESS"));
	CHECK(!matches("events", "events/.hidden.json"));
	CHECK(!matches("events", "events/_temporary/x.json"));
	CHECK(matches("events", "events/_part=1/x.json")); /* _ with = is a partition */
	CHECK(!matches("events", "events/=1/x.json"));     /* no key */
}

static void test_globs(void)
{
	CHECK(matches("logs/*", "logs/web/a.json"));
	CHECK(matches("logs/*", "logs/web/date=1/a.json"));
	CHECK(!matches("logs/*", "logs/.web/a.json")); /* FNM_PERIOD */
	CHECK(matches("logs/web*", "logs/web2/a.json"));
	CHECK(!matches("logs/web*", "logs/api/a.json"));
	/* a pattern may name the files themselves */
	CHECK(matches("dev/*.json", "dev/bundle1.json"));
	CHECK(!matches("dev/*.json", "dev/bundle1.csv"));
	CHECK(matches("dev/b?.json", "dev/b1.json"));
	CHECK(matches("dev/[ab].json", "dev/a.json"));
	/* a file directly at a folder pattern's level is that file */
	CHECK(matches("dev", "dev"));
}

int main(void)
{
	test(test_design_examples);
	test(test_ignored_names);
	test(test_globs);
	return test_exit();
}
