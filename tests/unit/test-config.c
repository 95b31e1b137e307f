/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/config.c and the sluice.json walk in core/json.c: every
 * tests/data/config/ok-*.json loads, every bad-*.json fails with exactly the
 * line in its bad-*.err (DATA_DIR stands for the data dir), plus the parsers'
 * edge cases.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"
#include "config.h"

#define MIN_BAD_CASES 40

#include "testdata.h"

static int write_all(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return errno;
	ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : EIO;
}

/* Copies the case to <new tmpdir>/sluice.json and loads it. */
static int load_case(const char *name, char *dir, size_t dirlen, struct sl_config **out, char *err,
		     size_t errlen)
{
	char src[PATH_MAX + 256], dst[PATH_MAX + 32];
	size_t len;
	char *text;
	int rc;

	snprintf(src, sizeof(src), "%s/%s", data_dir, name);
	snprintf(dir, dirlen, "%s", test_dir());
	snprintf(dst, sizeof(dst), "%s/sluice.json", dir);
	text = read_all(src, &len);
	if (!text)
		return errno ? errno : EIO;
	rc = write_all(dst, text, len);
	free(text);
	if (!rc)
		rc = sl_config_load(dir, out, err, errlen);
	/* check.h keeps 64 folders for test_exit(); there are more cases than that */
	unlink(dst);
	rmdir(dir);
	return rc;
}

/* Replaces every occurrence of dir in s with DATA_DIR. */
static void mask_dir(char *s, size_t len, const char *dir)
{
	char out[1024] = "", *p = s, *hit;
	size_t dl = strlen(dir);

	while ((hit = strstr(p, dir))) {
		strncat(out, p, (size_t)(hit - p));
		strncat(out, "DATA_DIR", sizeof(out) - strlen(out) - 1);
		p = hit + dl;
	}
	strncat(out, p, sizeof(out) - strlen(out) - 1);
	snprintf(s, len, "%s", out);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static void test_cases(void)
{
	struct dirent **ents;
	int n, nok = 0, nbad = 0, failed = 0;

	n = scandir(data_dir, &ents, NULL, by_name);
	CHECK(n > 0);
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char dir[PATH_MAX], err[1024] = "", path[PATH_MAX + 256], *want;
		struct sl_config *c = NULL;
		int rc;

		if (!strncmp(name, "ok-", 3) && ends_with(name, ".json")) {
			nok++;
			rc = load_case(name, dir, sizeof(dir), &c, err, sizeof(err));
			if (rc) {
				fprintf(stderr, "%s: expected to load, got %s: %s\n", name,
					sl_strerror(rc), err);
				failed++;
			}
			sl_config_free(c);
		} else if (!strncmp(name, "bad-", 4) && ends_with(name, ".json")) {
			nbad++;
			snprintf(path, sizeof(path), "%s/%.*s.err", data_dir,
				 (int)(strlen(name) - 5), name);
			want = read_all(path, NULL);
			if (!want) {
				fprintf(stderr, "%s: no .err file\n", name);
				failed++;
				continue;
			}
			want[strcspn(want, "\n")] = 0;
			rc = load_case(name, dir, sizeof(dir), &c, err, sizeof(err));
			mask_dir(err, sizeof(err), dir);
			if (rc != SL_ECONFIG || strcmp(err, want)) {
				fprintf(stderr, "%s: expected SL_ECONFIG '%s'\n%*s got %s '%s'\n",
					name, want, (int)strlen(name), "",
					rc ? sl_strerror(rc) : "0", err);
				failed++;
			}
			if (!rc)
				sl_config_free(c);
			free(want);
		} else if (ends_with(name, ".err")) {
			snprintf(path, sizeof(path), "%s/%.*s.json", data_dir,
				 (int)(strlen(name) - 4), name);
			if (access(path, F_OK)) {
				fprintf(stderr, "%s: no matching .json case\n", name);
				failed++;
			}
		} else if (name[0] != '.') {
			fprintf(stderr, "%s: not an ok-*.json, bad-*.json or bad-*.err case\n",
				name);
			failed++;
		}
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	printf("     %d ok cases, %d bad cases\n", nok, nbad);
	CHECK(failed == 0);
	CHECK(nok >= 10);
	CHECK(nbad >= MIN_BAD_CASES);
}

/* The DESIGN.md example, field by field. */
static void test_design_example(void)
{
	struct sl_config *c = NULL;
	const struct sl_query_config *q;
	const struct sl_source_config *s;
	char dir[PATH_MAX], err[512];

	CHECK_OK(load_case("ok-design-example.json", dir, sizeof(dir), &c, err, sizeof(err)));
	CHECK(sl_config_nqueries(c) == 1);
	CHECK(!strcmp(sl_config_query_name(c, 0), "events"));
	CHECK(sl_config_query_name(c, 1) == NULL);
	q = sl_config_find(c, "events");
	CHECK(q == sl_config_query(c, 0) && !sl_config_find(c, "nope"));
	s = &q->source;
	CHECK(s->format == SL_SOURCE_JSON && s->path.n == 1 && !strcmp(s->path.comps[0], "events"));
	CHECK(s->schema.n == 4);
	CHECK(!strcmp(s->schema.cols[0].name, "event_id") && s->schema.cols[0].not_null);
	CHECK(s->schema.cols[2].type == SL_TYPE_BIGINT && !s->schema.cols[2].not_null);
	CHECK(s->schema.cols[3].type == SL_TYPE_TIMESTAMP);
	CHECK(s->max_files == 500 && s->max_bytes == 0);
	CHECK(s->mode == SL_MODE_PERMISSIVE && s->clean == SL_CLEAN_OFF);
	CHECK(s->max_file_age_us == 7ll * 86400 * 1000000 && s->file_age_by == SL_AGE_LANDED);
	CHECK(!s->latest_first && !s->file_name_only && !s->header && s->sep == ',');
	CHECK(q->has_watermark && q->wm_col == 3 && q->wm_delay_us == 600ll * 1000000);
	CHECK(q->ndedup == 2 && q->dedup[0] == 0 && q->dedup[1] == 3 && !q->dedup_within_wm);
	CHECK(!sl_config_has_aggregation(q) && sl_config_is_stateful(q));
	CHECK(q->output_mode == SL_OUTPUT_APPEND);
	CHECK(q->out.n == 4 && !strcmp(q->out.cols[1].name, "user_id"));
	CHECK(q->sink_format == SL_SINK_JSON && q->compression == SL_COMPRESSION_NONE);
	CHECK(q->trigger == SL_TRIGGER_PROCESSING_TIME && q->trigger_interval_us == 5000000);
	CHECK(!strcmp(sl_config_column(q, q->wm_col)->name, "event_time"));
	sl_config_free(c);
}

/* A windowed aggregation: output columns and their types. */
static void test_aggregation_outputs(void)
{
	struct sl_config *c = NULL;
	const struct sl_query_config *q;
	char dir[PATH_MAX], err[512];

	CHECK_OK(load_case("ok-aggregation-append.json", dir, sizeof(dir), &c, err, sizeof(err)));
	q = sl_config_query(c, 0);
	CHECK(q && q->has_window && q->win_duration_us == 600ll * 1000000);
	CHECK(q->win_slide_us == 300ll * 1000000);
	CHECK(q->ngroup == 1 && q->naggs == 5);
	CHECK(q->out.n == 7);
	CHECK(!strcmp(q->out.cols[0].name, "window") && q->out.cols[0].type == SL_TYPE_WINDOW);
	CHECK(!strcmp(q->out.cols[1].name, "device") && q->out.cols[1].type == SL_TYPE_STRING);
	CHECK(!strcmp(q->out.cols[2].name, "n") && q->out.cols[2].type == SL_TYPE_BIGINT);
	CHECK(q->aggs[0].fn == SL_AGG_COUNT_STAR);
	CHECK(q->aggs[1].fn == SL_AGG_SUM && q->out.cols[3].type == SL_TYPE_BIGINT);
	CHECK(q->aggs[2].fn == SL_AGG_MAX && q->out.cols[4].type == SL_TYPE_INT);
	CHECK(q->aggs[3].fn == SL_AGG_AVG && q->out.cols[5].type == SL_TYPE_DOUBLE);
	CHECK(q->aggs[4].fn == SL_AGG_SUM && q->out.cols[6].type == SL_TYPE_DOUBLE);
	sl_config_free(c);
}

/* Spark-style strings for every option type, and csv options. */
static void test_spark_strings(void)
{
	struct sl_config *c = NULL;
	const struct sl_source_config *s;
	char dir[PATH_MAX], err[512];

	CHECK_OK(load_case("ok-spark-strings.json", dir, sizeof(dir), &c, err, sizeof(err)));
	s = &sl_config_query(c, 0)->source;
	CHECK(s->format == SL_SOURCE_CSV && s->max_bytes == 64ll << 20);
	CHECK(s->latest_first && s->file_name_only && s->header && s->sep == '\t');
	CHECK(s->max_file_age_us == 3600000ll * 1000 && s->file_age_by == SL_AGE_MTIME);
	CHECK(s->mode == SL_MODE_DROPMALFORMED && s->clean == SL_CLEAN_ARCHIVE);
	CHECK(sl_config_query(c, 0)->compression == SL_COMPRESSION_ZSTD);
	CHECK(sl_config_query(c, 0)->trigger == SL_TRIGGER_AVAILABLE_NOW);
	sl_config_free(c);
}

static void test_missing_file(void)
{
	struct sl_config *c = NULL;
	char err[64];

	CHECK_OK(sl_config_load(test_dir(), &c, err, sizeof(err)));
	CHECK(c && sl_config_nqueries(c) == 0);
	sl_config_free(c);
	sl_config_free(NULL);
}

static void test_parse_in_memory(void)
{
	static const char doc[] = "{\"queries\": {\"b\": {\"source\": {\"format\": \"text\", "
				  "\"path\": \"x/*.log\"}}, \"a\": {\"source\": {\"format\": "
				  "\"text\", \"path\": \"y\"}}}}";
	struct sl_config *c = NULL;
	char err[256];

	CHECK_OK(sl_config_parse(doc, strlen(doc), "mem", &c, err, sizeof(err)));
	/* file order, not sorted */
	CHECK(!strcmp(sl_config_query_name(c, 0), "b") && !strcmp(sl_config_query_name(c, 1), "a"));
	CHECK(sl_config_query(c, 0)->source.schema.n == 1);
	CHECK(!strcmp(sl_config_query(c, 0)->source.schema.cols[0].name, "value"));
	CHECK(sl_config_query(c, 0)->source.path.n == 2);
	CHECK(sl_config_query(c, 0)->trigger == SL_TRIGGER_NONE);
	sl_config_free(c);
	c = NULL;
	CHECK(sl_config_parse("{\"queries\": 1}", 14, "mem", &c, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "queries: expected an object, got '1'") && c == NULL);
	CHECK(sl_config_parse("{", 1, "mem", &c, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strncmp(err, "mem:1:", 6) && !strchr(err, '\n'));
}

/* The parquet sink: zstd unless told otherwise, rowGroupSize a size. */
static void test_parquet_sink(void)
{
	static const char *const docs[] = {
	    "{\"queries\": {\"q\": {\"source\": {\"format\": \"text\", \"path\": \"x\"}, "
	    "\"sink\": {\"format\": \"parquet\"}}}}",
	    "{\"queries\": {\"q\": {\"source\": {\"format\": \"text\", \"path\": \"x\"}, "
	    "\"sink\": {\"format\": \"parquet\", \"compression\": \"none\", "
	    "\"rowGroupSize\": \"8m\"}}}}",
	    "{\"queries\": {\"q\": {\"source\": {\"format\": \"text\", \"path\": \"x\"}, "
	    "\"sink\": {\"format\": \"json\"}}}}",
	};
	const struct {
		enum sl_sink_format f;
		enum sl_compression c;
		uint64_t rg;
	} want[] = {{SL_SINK_PARQUET, SL_COMPRESSION_ZSTD, 0},
		    {SL_SINK_PARQUET, SL_COMPRESSION_NONE, 8u << 20},
		    {SL_SINK_JSON, SL_COMPRESSION_NONE, 0}};
	for (size_t k = 0; k < 3; k++) {
		struct sl_config *c = NULL;
		char err[256];
		CHECK_OK(sl_config_parse(docs[k], strlen(docs[k]), "mem", &c, err, sizeof(err)));
		const struct sl_query_config *q = sl_config_query(c, 0);
		CHECK(q->sink_format == want[k].f && q->compression == want[k].c);
		CHECK(q->row_group_bytes == want[k].rg);
		sl_config_free(c);
	}
}

static void test_durations(void)
{
	static const struct {
		const char *s;
		int64_t us;
	} ok[] = {
	    {"0", 0},
	    {"1500", 1500000},
	    {"7us", 7},
	    {"7 ms", 7000},
	    {"10s", 10000000},
	    {"10 sec", 10000000},
	    {"1 second", 1000000},
	    {"2 Seconds", 2000000},
	    {"5m", 300000000},
	    {"5 MIN", 300000000},
	    {"1 minute", 60000000},
	    {"10 minutes", 600000000},
	    {"2h", 7200000000},
	    {"1 hour", 3600000000},
	    {"3 hours", 10800000000},
	    {"1d", 86400000000},
	    {"2 days", 172800000000},
	    {"1 Day", 86400000000},
	    {"1 week", 604800000000},
	    {"2 WEEKS", 1209600000000},
	    {"250 milliseconds", 250000},
	    {"9223372036854775807us", INT64_MAX},
	    {"9223372036854775 ms", 9223372036854775000},
	    {"00010 s", 10000000},
	};
	static const char *const bad[] = {
	    "",
	    " 10s",
	    "10s ",
	    "10  s",
	    "10 s s",
	    "-1 s",
	    "+1 s",
	    "1.5 s",
	    "s",
	    "ten seconds",
	    "10 fortnights",
	    "10 mins",
	    "10 secs",
	    "10 hrs",
	    "1e3",
	    "10 ",
	    "10\ts",
	    "9223372036854775808us",
	    "9223372036854776 ms",
	    "15250285 weeks",
	    "99999999999999999999999",
	    "0x10 s",
	};
	char err[256];
	int64_t us;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		us = -1;
		if (sl_config_duration_parse(ok[i].s, &us, err, sizeof(err)) || us != ok[i].us) {
			fprintf(stderr, "duration '%s': got %lld (%s)\n", ok[i].s, (long long)us,
				err);
			CHECK(0);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		us = -1;
		if (sl_config_duration_parse(bad[i], &us, err, sizeof(err)) != SL_ECONFIG ||
		    us != -1) {
			fprintf(stderr, "duration '%s' was accepted\n", bad[i]);
			CHECK(0);
		}
	}
	CHECK(sl_config_duration_parse("10 fortnights", &us, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "unknown unit 'fortnights' in duration '10 fortnights'"));
	CHECK(sl_config_duration_parse("15250285 weeks", &us, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "duration '15250285 weeks' is out of range"));
	CHECK(sl_config_duration_parse("-1 s", &us, NULL, 0) == SL_ECONFIG);
	/* the largest week count that fits */
	CHECK_OK(sl_config_duration_parse("15250284 weeks", &us, NULL, 0));
	CHECK(us == 15250284ll * 604800000000ll);
}

static void test_sizes(void)
{
	static const struct {
		const char *s;
		uint64_t b;
	} ok[] = {
	    {"0", 0},
	    {"1", 1},
	    {"100b", 100},
	    {"100B", 100},
	    {"1k", 1024},
	    {"1kb", 1024},
	    {"2KB", 2048},
	    {"64m", 64ull << 20},
	    {"64Mb", 64ull << 20},
	    {"3g", 3ull << 30},
	    {"1gB", 1ull << 30},
	    {"2t", 2ull << 40},
	    {"2TB", 2ull << 40},
	    {"9223372036854775807", INT64_MAX},
	    {"8388607t", 8388607ull << 40},
	};
	static const char *const bad[] = {
	    "",
	    "k",
	    "1 k",
	    "1kib",
	    "1p",
	    "1.5m",
	    "-1",
	    "1bb",
	    "1kk",
	    " 1",
	    "1 ",
	    "1x",
	    "8388608t",
	    "8589934592g",
	    "9223372036854775808",
	    "18446744073709551616k",
	};
	char err[256];
	uint64_t b;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		b = 7;
		if (sl_config_size_parse(ok[i].s, &b, err, sizeof(err)) || b != ok[i].b) {
			fprintf(stderr, "size '%s': got %llu (%s)\n", ok[i].s,
				(unsigned long long)b, err);
			CHECK(0);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = 7;
		if (sl_config_size_parse(bad[i], &b, err, sizeof(err)) != SL_ECONFIG || b != 7) {
			fprintf(stderr, "size '%s' was accepted\n", bad[i]);
			CHECK(0);
		}
	}
	CHECK(sl_config_size_parse("8388608t", &b, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "size '8388608t' is out of range"));
}

static void test_schemas(void)
{
	static const struct {
		const char *ddl, *err;
	} bad[] = {
	    {"", "expected at least one column"},
	    {"   ", "expected at least one column"},
	    {"a", "expected a type after column 'a'"},
	    {"a,b STRING", "expected a type after column 'a', got ',b STRING'"},
	    {"a FLOAT", "unknown type 'FLOAT'"},
	    {"a DECIMAL(10,2)", "unknown type 'DECIMAL'"},
	    {"a STRING,", "expected a column after the last ','"},
	    {"a STRING,,b INT", "expected a column name at ',b INT'"},
	    {"a STRING NOT", "expected NULL after NOT in column 'a'"},
	    {"a STRING NOT NUL", "expected NULL after NOT in column 'a'"},
	    {"a STRING NULL", "unexpected 'NULL' after column 'a'"},
	    {"a STRING COMMENT 'x'", "unexpected 'COMMENT 'x'' after column 'a'"},
	    {"a STRING, A INT", "duplicate column 'A'"},
	    {"`a` STRING, a INT", "duplicate column 'a'"},
	    {"`a STRING", "unterminated backquote at '`a STRING'"},
	    {"`` STRING", "empty column name"},
	    {"a-b STRING", "expected a type after column 'a', got '-b STRING'"},
	    {"_corrupt_record INT", "_corrupt_record must be a nullable STRING"},
	    {"_corrupt_record STRING NOT NULL", "_corrupt_record must be a nullable STRING"},
	    {"`a\tb` INT", "control character in column name at '`a\tb` INT'"},
	};
	struct sl_schema s = {0};
	char err[256];

	CHECK_OK(sl_config_schema_parse(" a string not null ,b Long,c integer, `my col` INT ,"
					"`x``y` double, d Boolean, e timestamp NOT  NULL, f date,"
					"_corrupt_record STRING, 1st BIGINT",
					&s, err, sizeof(err)));
	CHECK(s.n == 10);
	CHECK(!strcmp(s.cols[0].name, "a") && s.cols[0].type == SL_TYPE_STRING &&
	      s.cols[0].not_null);
	CHECK(s.cols[1].type == SL_TYPE_BIGINT && !s.cols[1].not_null);
	CHECK(s.cols[2].type == SL_TYPE_INT);
	CHECK(!strcmp(s.cols[3].name, "my col") && s.cols[3].type == SL_TYPE_INT);
	CHECK(!strcmp(s.cols[4].name, "x`y") && s.cols[4].type == SL_TYPE_DOUBLE);
	CHECK(s.cols[5].type == SL_TYPE_BOOLEAN);
	CHECK(s.cols[6].type == SL_TYPE_TIMESTAMP && s.cols[6].not_null);
	CHECK(s.cols[7].type == SL_TYPE_DATE);
	CHECK(!strcmp(s.cols[8].name, "_corrupt_record"));
	CHECK(!strcmp(s.cols[9].name, "1st"));
	CHECK(sl_config_schema_find(&s, "my col") == 3 && sl_config_schema_find(&s, "A") == -1);
	sl_config_schema_release(&s);
	CHECK(s.n == 0 && s.cols == NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (sl_config_schema_parse(bad[i].ddl, &s, err, sizeof(err)) != SL_ECONFIG ||
		    strcmp(err, bad[i].err)) {
			fprintf(stderr, "schema '%s': expected '%s', got '%s'\n", bad[i].ddl,
				bad[i].err, err);
			CHECK(0);
		}
	}
	CHECK(s.n == 0);
}

static void test_names_paths(void)
{
	static const char *const bad_paths[] = {
	    "", "/abs", "a//b", "a/", "..", "a/../b", ".", "a/./b", ".hidden", "a/**", "**/x",
	};
	struct sl_path a = {0};
	char err[256], long_name[80];

	CHECK(sl_config_name_valid("a") && sl_config_name_valid("Q_1-x"));
	memset(long_name, 'q', 64);
	long_name[64] = 0;
	CHECK(sl_config_name_valid(long_name));
	long_name[64] = 'q';
	long_name[65] = 0;
	CHECK(!sl_config_name_valid(long_name));
	CHECK(!sl_config_name_valid("") && !sl_config_name_valid("a b") &&
	      !sl_config_name_valid("a.b") && !sl_config_name_valid("caf\xc3\xa9"));

	CHECK_OK(sl_config_path_parse("logs/date=*/x[0-9]?.json", &a, err, sizeof(err)));
	CHECK(a.n == 3 && !strcmp(a.comps[1], "date=*") &&
	      !strcmp(a.text, "logs/date=*/x[0-9]?.json"));
	sl_config_path_release(&a);
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		if (sl_config_path_parse(bad_paths[i], &a, err, sizeof(err)) != SL_ECONFIG) {
			fprintf(stderr, "path '%s' was accepted\n", bad_paths[i]);
			CHECK(0);
		}
	}
	CHECK(a.n == 0);
}

static bool overlap(const char *x, const char *y)
{
	struct sl_path a = {0}, b = {0};
	bool r1, r2;

	if (sl_config_path_parse(x, &a, NULL, 0) || sl_config_path_parse(y, &b, NULL, 0))
		abort();
	r1 = sl_config_path_overlap(&a, &b);
	r2 = sl_config_path_overlap(&b, &a);
	sl_config_path_release(&a);
	sl_config_path_release(&b);
	if (r1 != r2)
		abort(); /* overlap is symmetric */
	return r1;
}

static void test_overlap(void)
{
	CHECK(overlap("events", "events"));
	CHECK(!overlap("events", "clicks"));
	CHECK(overlap("events", "events/date=2026-10-04")); /* key=value folders are read */
	CHECK(overlap("events", "events/sub"));		    /* prefix: conservative */
	CHECK(overlap("a/*/c", "a/b/c"));
	CHECK(overlap("a/*/c", "a/b"));
	CHECK(!overlap("a/*/c", "a/b/d"));
	CHECK(!overlap("a/*/c", "x/b/c"));
	CHECK(overlap("*", "anything/deep"));
	CHECK(overlap("a/b?", "a/bc"));
	CHECK(overlap("a/[bc]", "a/zz")); /* a glob overlaps any name */
	CHECK(overlap("a/x\\*", "a/x*"));
	CHECK(!overlap("ab", "a"));
}

static void test_values(void)
{
	static const char *const names[] = {"PERMISSIVE", "DROPMALFORMED", "FAILFAST", NULL};
	struct sl_config_value v;
	char err[256];
	int64_t i;
	uint64_t u;
	bool b;
	int e;

	v = (struct sl_config_value){.kind = SL_CONFIG_V_STRING, .str = "TRUE"};
	CHECK_OK(sl_config_value_bool(&v, &b, err, sizeof(err)));
	CHECK(b);
	v.str = "yes";
	CHECK(sl_config_value_bool(&v, &b, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected true or false, got 'yes'"));
	v = (struct sl_config_value){.kind = SL_CONFIG_V_INT, .str = "1", .i = 1};
	CHECK(sl_config_value_bool(&v, &b, err, sizeof(err)) == SL_ECONFIG);
	CHECK_OK(sl_config_value_posint(&v, 10, &i, err, sizeof(err)));
	CHECK(i == 1);
	v = (struct sl_config_value){.kind = SL_CONFIG_V_STRING, .str = "11"};
	CHECK(sl_config_value_posint(&v, 10, &i, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected a positive integer up to 10, got '11'"));
	v.str = "99999999999999999999";
	CHECK(sl_config_value_posint(&v, 10, &i, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected a positive integer up to 10, got '99999999999999999999'"));
	v.str = "-1";
	CHECK(sl_config_value_posint(&v, 10, &i, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected a positive integer, got '-1'"));
	v = (struct sl_config_value){.kind = SL_CONFIG_V_INT, .str = "2500", .i = 2500};
	CHECK_OK(sl_config_value_duration(&v, &i, err, sizeof(err)));
	CHECK(i == 2500000);
	v.i = INT64_MAX;
	CHECK(sl_config_value_duration(&v, &i, err, sizeof(err)) == SL_ECONFIG);
	CHECK_OK(sl_config_value_size(
	    &(struct sl_config_value){.kind = SL_CONFIG_V_INT, .str = "5", .i = 5}, &u, err,
	    sizeof(err)));
	CHECK(u == 5);
	v = (struct sl_config_value){.kind = SL_CONFIG_V_COMPOSITE, .str = "an array"};
	CHECK(sl_config_value_size(&v, &u, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected a size like '64m', got an array"));
	v = (struct sl_config_value){.kind = SL_CONFIG_V_STRING, .str = "failFast"};
	CHECK_OK(sl_config_value_enum(&v, names, &e, err, sizeof(err)));
	CHECK(e == 2);
	v.str = "lenient";
	CHECK(sl_config_value_enum(&v, names, &e, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "expected 'PERMISSIVE', 'DROPMALFORMED' or 'FAILFAST', got 'lenient'"));
}

static void test_aggregates(void)
{
	struct sl_schema s = {0};
	struct sl_aggregate a;
	char err[256];

	CHECK_OK(sl_config_schema_parse("n INT, d DOUBLE, s STRING, `t x` TIMESTAMP", &s, err,
					sizeof(err)));
	CHECK_OK(sl_config_aggregate_parse(" COUNT ( * ) ", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_COUNT_STAR && a.type == SL_TYPE_BIGINT);
	CHECK_OK(sl_config_aggregate_parse("count(s)", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_COUNT && a.col == 2 && a.type == SL_TYPE_BIGINT);
	CHECK_OK(sl_config_aggregate_parse("Sum(n)", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_SUM && a.type == SL_TYPE_BIGINT);
	CHECK_OK(sl_config_aggregate_parse("sum(d)", &s, &a, err, sizeof(err)));
	CHECK(a.type == SL_TYPE_DOUBLE);
	CHECK_OK(sl_config_aggregate_parse("avg(n)", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_AVG && a.type == SL_TYPE_DOUBLE);
	CHECK_OK(sl_config_aggregate_parse("max(`t x`)", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_MAX && a.col == 3 && a.type == SL_TYPE_TIMESTAMP);
	CHECK_OK(sl_config_aggregate_parse("min(s)", &s, &a, err, sizeof(err)));
	CHECK(a.fn == SL_AGG_MIN && a.type == SL_TYPE_STRING);
	CHECK(sl_config_aggregate_parse("avg(s)", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "avg needs a numeric column: 's' is STRING"));
	CHECK(sl_config_aggregate_parse("max(*)", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "'*' only works in count(*)"));
	CHECK(sl_config_aggregate_parse("count(N)", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(!strcmp(err, "unknown column 'N' (did you mean 'n'?)"));
	CHECK(sl_config_aggregate_parse("count(n) + 1", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(sl_config_aggregate_parse("count n", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	CHECK(sl_config_aggregate_parse("", &s, &a, err, sizeof(err)) == SL_ECONFIG);
	sl_config_schema_release(&s);
}

int main(void)
{
	if (find_data_dir("config")) {
		fprintf(stderr, "cannot find tests/data/config (set SLUICE_TEST_DATA)\n");
		return 1;
	}
	test(test_cases);
	test(test_design_example);
	test(test_aggregation_outputs);
	test(test_spark_strings);
	test(test_missing_file);
	test(test_parse_in_memory);
	test(test_parquet_sink);
	test(test_durations);
	test(test_sizes);
	test(test_schemas);
	test(test_names_paths);
	test(test_overlap);
	test(test_values);
	test(test_aggregates);
	return test_exit();
}
