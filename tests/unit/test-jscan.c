/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/jscan.c: a differential test against jansson over
 * generated and mutated JSON lines (fixed seed), crafted edge cases and
 * strings with every special byte at every offset around the SIMD widths,
 * each run once per string-scanning ISA this CPU has (scalar, SSE2, AVX2,
 * forced with sl_jscan_set_isa), and a throughput print (sl_decode_file
 * against jansson line by line; printed, never asserted).
 *
 * The reference is json_loadb(JSON_DECODE_ANY | JSON_ALLOW_NUL) followed by
 * json_is_object(): DESIGN §3 runs jansson with JSON_ALLOW_NUL so that
 * "\u0000" in strings is valid, and a line must be an object (DECODE_ANY
 * lets a top-level scalar parse so that the object check decides). For
 * every line the scanner and jansson must agree on accept/reject, and for
 * every wanted field on kind and value. Allowed divergences (the scanner
 * accepts, jansson refuses), counted and printed:
 * - json_error_numeric_overflow: an integer beyond int64 or a real beyond
 *   double range is valid RFC 8259 syntax; range belongs to the field's
 *   type, so the decoder judges it only for fields the schema names;
 * - json_error_stack_overflow: cannot happen while both limits are 2048,
 *   listed because DESIGN allows it;
 * - json_error_null_byte_in_key: jansson refuses "\u0000" in object keys
 *   even with JSON_ALLOW_NUL, a jansson limitation (RFC 8259 allows it).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "batch.h"
#include "check.h"
#include "config.h"
#include "decode.h"
#include "jscan.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static unsigned pick(unsigned n) { return (unsigned)(next() % n); }

struct buf {
	char *s;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

static void ws(struct buf *b)
{
	static const char *const spaces[] = {"", "", "", " ", "\t", "  ", "\r", " \n "};
	puts_(b, spaces[pick(8)]);
}

static const char *const wanted[] = {"a", "b", "s", "\xc3\xa9t\xc3\xa9", ""};
#define NWANTED 5

static void gen_string(struct buf *b, int key)
{
	static const char *const pieces[] = {
	    "a",
	    "b",
	    "s",
	    "x",
	    "hello",
	    " ",
	    "\\n",
	    "\\\"",
	    "\\\\",
	    "\\/",
	    "\\u0061",
	    "\\u00e9",
	    "\\u20AC",
	    "\\ud83d\\ude00",
	    "\\u0000",
	    "\xc3\xa9",
	    "\xe2\x82\xac",
	    "\xf0\x9f\x98\x80",
	    "\\t",
	    "\\b\\f\\r",
	    "\xc3\xa9t\xc3\xa9",
	    "0123456789abcdefghijklmnopqrstuvwxyz",
	    "the quick brown fox",
	    "\x7f",
	};
	puts_(b, "\"");
	if (key && pick(3)) {
		/* mostly the wanted names, some spelt with escapes */
		unsigned w = pick(NWANTED + 2);
		if (w < NWANTED)
			puts_(b, w == 0 && pick(4) == 0 ? "\\u0061" : wanted[w]);
		else
			puts_(b, w == NWANTED ? "other" : "c");
	} else {
		/* a quarter long enough for the SIMD paths (16 and 32 bytes at a time) */
		for (unsigned n = pick(4) ? pick(6) : pick(24); n; n--)
			puts_(b, pieces[pick(sizeof(pieces) / sizeof(pieces[0]))]);
	}
	puts_(b, "\"");
}

static void gen_number(struct buf *b)
{
	static const char *const nums[] = {"0",
					   "-0",
					   "1",
					   "-1",
					   "42",
					   "1.5",
					   "-2.25",
					   "1e3",
					   "1E+3",
					   "1e-3",
					   "0.0",
					   "123456789",
					   "9223372036854775807",
					   "-9223372036854775808",
					   "9223372036854775808",
					   "1e400",
					   "-1e400",
					   "1e-400",
					   "3.141592653589793",
					   "100000000000000000000000"};
	puts_(b, nums[pick(sizeof(nums) / sizeof(nums[0]))]);
}

static void gen_value(struct buf *b, int depth)
{
	unsigned k = pick(depth > 4 ? 6 : 8);
	ws(b);
	switch (k) {
	case 0:
		puts_(b, "null");
		break;
	case 1:
		puts_(b, pick(2) ? "true" : "false");
		break;
	case 2:
	case 3:
		gen_number(b);
		break;
	case 4:
	case 5:
		gen_string(b, 0);
		break;
	case 6:
		puts_(b, "[");
		for (unsigned n = pick(4), i = 0; i < n; i++) {
			if (i)
				puts_(b, ",");
			gen_value(b, depth + 1);
		}
		ws(b);
		puts_(b, "]");
		break;
	default:
		puts_(b, "{");
		for (unsigned n = pick(4), i = 0; i < n; i++) {
			if (i)
				puts_(b, ",");
			ws(b);
			gen_string(b, 1);
			ws(b);
			puts_(b, ":");
			gen_value(b, depth + 1);
		}
		ws(b);
		puts_(b, "}");
	}
	ws(b);
}

static void gen_line(struct buf *b)
{
	b->len = 0;
	ws(b);
	puts_(b, "{");
	for (unsigned n = pick(7), i = 0; i < n; i++) {
		if (i)
			puts_(b, ",");
		ws(b);
		gen_string(b, 1);
		ws(b);
		puts_(b, ":");
		gen_value(b, 1);
	}
	puts_(b, "}");
	ws(b);
}

static void mutate(struct buf *b)
{
	static const char special[] = "\"{}[],:\\ 0-eE.tfnu\x00\x80\xbf\xc0\xc3\xed\xf4\xff\x1f";
	for (unsigned m = 1 + pick(3); m; m--) {
		size_t at = b->len ? pick((unsigned)b->len) : 0;
		char c = pick(2) ? special[pick(sizeof(special) - 1)] : (char)next();
		switch (pick(5)) {
		case 0: /* delete */
			if (b->len) {
				memmove(b->s + at, b->s + at + 1, b->len - at - 1);
				b->len--;
			}
			break;
		case 1: /* insert */
			put(b, "", 1);
			memmove(b->s + at + 1, b->s + at, b->len - at - 1);
			b->s[at] = c;
			break;
		case 2: /* replace */
			if (b->len)
				b->s[at] = c;
			break;
		case 3: /* truncate */
			b->len = at;
			break;
		default: /* duplicate a slice */
			if (b->len) {
				size_t n = pick((unsigned)(b->len - at)) + 1;
				char tmp[64];
				if (n > sizeof(tmp))
					n = sizeof(tmp);
				memcpy(tmp, b->s + at, n);
				put(b, tmp, n);
			}
		}
	}
}

struct tally {
	int lines, accepted, rejected, overflow, depth, nulkey, failures;
};

/* Compares the scanner with jansson on one line. */
static int compare(struct sl_jscan *s, const char *line, size_t len, struct tally *t)
{
	struct sl_jfield f[NWANTED];
	json_error_t jerr;
	int rc = sl_jscan_line(s, line, len, f);
	json_t *j = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	int jok = j && json_is_object(j), ok = 1;

	t->lines++;
	if (rc != 0 && rc != SL_EMALFORMED)
		ok = 0;
	else if (rc == 0 && !jok) {
		enum json_error_code code = json_error_code(&jerr);
		if (j)
			ok = 0;
		else if (code == json_error_numeric_overflow)
			t->overflow++;
		else if (code == json_error_stack_overflow)
			t->depth++;
		else if (code == json_error_null_byte_in_key)
			t->nulkey++;
		else
			ok = 0;
		if (!ok)
			fprintf(stderr, "jansson refuses (%s)\n", jerr.text);
	} else if (rc != 0 && jok) {
		ok = 0;
		fprintf(stderr, "scanner refuses (%s)\n", sl_jscan_error(s, NULL));
	} else if (rc == 0) {
		t->accepted++;
		for (int i = 0; i < NWANTED && ok; i++) {
			json_t *v = json_object_getn(j, wanted[i], strlen(wanted[i]));
			const struct sl_jfield *x = &f[i];
			switch (x->kind) {
			case SL_JABSENT:
				ok = v == NULL;
				break;
			case SL_JNULL:
				ok = json_is_null(v);
				break;
			case SL_JTRUE:
				ok = json_is_true(v);
				break;
			case SL_JFALSE:
				ok = json_is_false(v);
				break;
			case SL_JSTRING:
				ok = json_is_string(v) && json_string_length(v) == x->str_len &&
				     !memcmp(json_string_value(v), x->str, x->str_len);
				break;
			case SL_JNUMBER: {
				char num[512];
				if (x->raw_len >= sizeof(num)) {
					ok = 0;
					break;
				}
				memcpy(num, x->raw, x->raw_len);
				num[x->raw_len] = 0;
				if (x->is_int)
					ok = json_is_integer(v) &&
					     json_integer_value(v) == strtoll(num, NULL, 10);
				else
					ok = json_is_real(v) &&
					     json_real_value(v) == strtod(num, NULL);
				break;
			}
			case SL_JOBJECT:
			case SL_JARRAY: {
				/* the raw span and its compact form both parse to the same value */
				char *c = malloc(x->raw_len + 1);
				size_t n = sl_jscan_compact(x->raw, x->raw_len, c);
				json_t *r = json_loadb(x->raw, x->raw_len,
						       JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
				json_t *rc2 =
				    json_loadb(c, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
				ok = (x->kind == SL_JOBJECT ? json_is_object(v)
							    : json_is_array(v)) &&
				     json_equal(r, v) && json_equal(rc2, v);
				json_decref(r);
				json_decref(rc2);
				free(c);
				break;
			}
			}
			if (!ok)
				fprintf(stderr, "field '%s' differs (kind %d)\n", wanted[i],
					x->kind);
		}
	} else {
		t->rejected++;
	}
	json_decref(j);
	if (!ok) {
		t->failures++;
		if (t->failures < 10) {
			fprintf(stderr, "  line: '");
			fwrite(line, 1, len, stderr);
			fprintf(stderr, "'\n");
		}
	}
	return ok;
}

static const char *const isa_names[] = {"scalar", "sse2", "avx2"};

/* Forces s to isa; false (s freed) when this CPU lacks it. */
static bool force_isa(struct sl_jscan *s, enum sl_jscan_isa isa)
{
	if (sl_jscan_set_isa(s, isa) == 0 && sl_jscan_get_isa(s) == isa)
		return true;
	printf("%s: not on this CPU, skipped\n", isa_names[isa]);
	sl_jscan_free(s);
	return false;
}

static void test_differential(void)
{
	for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
		struct sl_jscan *s;
		struct buf b = {0};
		struct tally t = {0};

		CHECK_OK(sl_jscan_new(wanted, NWANTED, &s));
		if (!force_isa(s, (enum sl_jscan_isa)isa))
			continue;
		rng = 0x9E3779B97F4A7C15ull; /* the same lines for every ISA */
		for (int i = 0; i < 20000; i++) {
			gen_line(&b);
			if (i % 2)
				mutate(&b);
			compare(s, b.s, b.len, &t);
		}
		printf("differential %s: %d lines, %d objects, %d refused by both; allowed "
		       "divergences: %d numeric overflow, %d depth, %d NUL in key\n",
		       isa_names[isa], t.lines, t.accepted, t.rejected, t.overflow, t.depth,
		       t.nulkey);
		CHECK(t.failures == 0);
		CHECK(t.accepted > 5000 && t.rejected > 5000);
		free(b.s);
		sl_jscan_free(s);
	}
}

/* Whether two scans filled the fields alike (same kinds, spans and decoded text). */
static bool same_fields(const struct sl_jfield *a, const struct sl_jfield *b)
{
	for (int i = 0; i < NWANTED; i++) {
		if (a[i].kind != b[i].kind)
			return false;
		if (a[i].kind == SL_JABSENT)
			continue;
		if (a[i].raw != b[i].raw || a[i].raw_len != b[i].raw_len ||
		    a[i].is_int != b[i].is_int)
			return false;
		if (a[i].kind == SL_JSTRING &&
		    (a[i].str_len != b[i].str_len || memcmp(a[i].str, b[i].str, a[i].str_len)))
			return false;
	}
	return true;
}

/*
 * sl_jscan_next() against sl_jscan_line() over the line that memchr()
 * finds, on generated and mutated lines followed by another line, some
 * with '\n' or "\r\n" put inside: it accepts exactly the lines that
 * sl_jscan_line() accepts, with the same length and fields, and says
 * EAGAIN for every other. A fresh scanner (no buffer yet) may also say
 * EAGAIN for a line with escapes, never accept one wrongly.
 */
static void test_next_agrees(void)
{
	for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
		struct sl_jscan *s, *ref, *fresh;
		struct sl_jfield f[NWANTED], g[NWANTED];
		struct buf b = {0}, two = {0};
		int fast = 0, slow = 0, fresh_fast = 0;

		CHECK_OK(sl_jscan_new(wanted, NWANTED, &s));
		CHECK_OK(sl_jscan_new(wanted, NWANTED, &ref));
		if (!force_isa(s, (enum sl_jscan_isa)isa)) {
			sl_jscan_free(ref);
			continue;
		}
		/* buffers as big as any line here, as after a long line */
		char *spaces = malloc(1 << 16);
		memset(spaces, ' ', 1 << 16);
		CHECK(sl_jscan_line(s, spaces, 1 << 16, f) == SL_EMALFORMED);
		free(spaces);
		rng = 0x2545F4914F6CDD1Dull;
		for (int i = 0; i < 20000; i++) {
			gen_line(&b);
			if (i % 2)
				mutate(&b);
			two.len = 0;
			put(&two, b.s, b.len);
			if (i % 7 == 3 && two.len) { /* a line end inside it */
				size_t at = pick((unsigned)two.len);
				two.s[at] = '\n';
			}
			if (i % 5 == 1)
				put(&two, "\r", 1);
			if (i % 3) {
				put(&two, "\n", 1);
				gen_line(&b);
				put(&two, b.s, b.len);
			}
			const char *nl = memchr(two.s, '\n', two.len);
			size_t len = nl ? (size_t)(nl - two.s) : two.len, n = 0;
			int rc = sl_jscan_next(s, two.s, two.s + two.len, f, &n);
			int rrc = sl_jscan_line(ref, two.s, len, g);
			CHECK(rc == 0 || rc == EAGAIN);
			if ((rc == 0) != (rrc == 0) || (rc == 0 && (n != len || !same_fields(f, g)))) {
				fprintf(stderr, "next %d (len %zu), line %d (len %zu): '%.*s'\n", rc, n,
					rrc, len, (int)two.len, two.s);
				CHECK(0);
			}
			rc == 0 ? fast++ : slow++;
			CHECK_OK(sl_jscan_new(wanted, NWANTED, &fresh));
			CHECK(sl_jscan_set_isa(fresh, (enum sl_jscan_isa)isa) == 0);
			rc = sl_jscan_next(fresh, two.s, two.s + two.len, f, &n);
			CHECK(rc == 0 || rc == EAGAIN);
			if (rc == 0) {
				fresh_fast++;
				CHECK(rrc == 0 && n == len && same_fields(f, g));
			}
			sl_jscan_free(fresh);
		}
		printf("next %s: %d lines scanned as found, %d left to sl_jscan_line(); "
		       "%d as found by a fresh scanner\n",
		       isa_names[isa], fast, slow, fresh_fast);
		CHECK(fast > 2000 && slow > 5000 && fresh_fast > 1500);
		free(b.s);
		free(two.s);
		sl_jscan_free(s);
		sl_jscan_free(ref);
	}
}

/*
 * A wanted and an unwanted string of n plain bytes with one special byte
 * sequence at offset k, for every k < n <= 80: each vector width's edges.
 */
static void test_string_offsets(void)
{
	static const char *const specials[] = {"\"", "\\\"", "\\n",     "\x01",
					       "\x1f",  "\xc3\xa9",  "\xe2\x82", "\x80",
					       "\xff",  "\\u00e9", "\\ud83d", "\x7f"};
	for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
		struct sl_jscan *s;
		struct tally t = {0};

		CHECK_OK(sl_jscan_new(wanted, NWANTED, &s));
		if (!force_isa(s, (enum sl_jscan_isa)isa))
			continue;
		for (size_t sp = 0; sp < sizeof(specials) / sizeof(specials[0]); sp++)
			for (size_t n = 1; n <= 80; n++)
				for (size_t k = 0; k < n; k++)
					for (int w = 0; w < 2; w++) {
						struct buf b = {0};
						puts_(&b, w ? "{\"a\":\"" : "{\"z\":\"");
						for (size_t i = 0; i < n; i++) {
							if (i == k)
								puts_(&b, specials[sp]);
							else
								put(&b, &"abcdefghij"[i % 10], 1);
						}
						puts_(&b, "\",\"b\":1}");
						compare(s, b.s, b.len, &t);
						free(b.s);
					}
		printf("offsets %s: %d lines, %d objects, %d refused by both\n", isa_names[isa],
		       t.lines, t.accepted, t.rejected);
		CHECK(t.failures == 0);
		CHECK(t.accepted > 0 && t.rejected > 0);
		sl_jscan_free(s);
	}
}

static void test_crafted(void)
{
#define L(s)                                                                                       \
	{                                                                                          \
		s, sizeof(s) - 1                                                                   \
	}
	static const struct {
		const char *s;
		size_t len;
	} lines[] = {
	    L("{}"),
	    L(" {} "),
	    L("{\"a\":1}"),
	    L("{\"a\":1,\"a\":\"two\"}"),
	    L("{\"\":\"empty key\"}"),
	    L("{\"\\u00e9t\\u00e9\":true}"),
	    L("{\"a\":\"\\ud83d\\ude00\"}"),
	    L("{\"a\":\"\\ud83d\"}"),
	    L("{\"a\":\"\\ude00\"}"),
	    L("{\"a\":\"\\ud83d\\u0041\"}"),
	    L("{\"a\":\"\\uD83D\\uDE00\"}"),
	    L("{\"a\":\"\\u12\"}"),
	    L("{\"a\":\"\\u12g4\"}"),
	    L("{\"a\":\"\\a\"}"),
	    L("{\"a\":\"\x7f\"}"),
	    L("{\"a\":-}"),
	    L("{\"a\":-01}"),
	    L("{\"a\":1.e3}"),
	    L("{\"a\":.5}"),
	    L("{\"a\":+1}"),
	    L("{\"a\":1e}"),
	    L("{\"a\":1e+}"),
	    L("{\"a\":0e0}"),
	    L("{\"a\":-0.0e-0}"),
	    L("{\"a\":[]}"),
	    L("{\"a\":[,]}"),
	    L("{\"a\":[1 2]}"),
	    L("{\"a\":{\"b\"}}"),
	    L("{\"a\":{\"b\":}}"),
	    L("{\"a\":{,}}"),
	    L("{,}"),
	    L("{\"a\"}"),
	    L("{\"a\":1 \"b\":2}"),
	    L("[]"),
	    L("\"str\""),
	    L("1"),
	    L("null"),
	    L(""),
	    L(" "),
	    L("{"),
	    L("}"),
	    L("{\"a\":nul}"),
	    L("{\"a\":NULL}"),
	    L("{\"a\":True}"),
	    L("{\"a\":\"\xc3\"}"),
	    L("{\"a\":\"\xe0\x80\x80\"}"),
	    L("{\"a\":\"\xf0\x80\x80\x80\"}"),
	    L("{\"a\":\"\xf4\x90\x80\x80\"}"),
	    L("{\"a\":\"\xef\xbf\xbf\"}"),
	    L("{\"a\":\"\xf4\x8f\xbf\xbf\"}"),
	    L("{\"\xff\":1}"),
	    L("{\"a\":1}\x00"),
	    L("\xef\xbb\xbf{}"),
	    L("{\"a\":\"\\u0000\"}"),
	    L("{\"\\u0000\":1}"),
	    L("{\"b\":99999999999999999999}"),
	    L("{\"b\":1e999}"),
	    L("{\"a\":1}//"),
	    L("{\"a\":1}\r\n"),
	    L("{\"a\":\"x\x00y\"}"),
	    L("{\"a\":\"tab\there\"}"),
	    L("\t{\"a\" : [ 1 , { } ] , \"s\" : { \"k\" : \" v \" } }\r"),
	    L("{\"s\":1,\"s\":{\"x\":[true,false,null]}}"),
	};
	size_t lens[] = {2048, 2049, 100000};

	for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
	struct sl_jscan *s;
	struct tally t = {0};

	CHECK_OK(sl_jscan_new(wanted, NWANTED, &s));
	if (!force_isa(s, (enum sl_jscan_isa)isa))
		continue;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		compare(s, lines[i].s, lines[i].len, &t);
	/* nesting at, just past and far past the limit, through an unwanted and a wanted field */
	for (int k = 0; k < 3; k++)
		for (int w = 0; w < 2; w++) {
			struct buf b = {0};
			puts_(&b, w ? "{\"a\":" : "{\"z\":");
			for (size_t i = 1; i < lens[k]; i++)
				puts_(&b, "[");
			for (size_t i = 1; i < lens[k]; i++)
				puts_(&b, "]");
			puts_(&b, "}");
			compare(s, b.s, b.len, &t);
			free(b.s);
		}
	printf("crafted %s: %d lines, %d objects, %d refused by both, %d depth\n", isa_names[isa],
	       t.lines, t.accepted, t.rejected, t.depth);
	CHECK(t.failures == 0);
	sl_jscan_free(s);
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_throughput(void)
{
	const char *mb_env = getenv("SLUICE_BENCH_MB");
	size_t target = (size_t)(mb_env ? atof(mb_env) : 50) << 20;
	struct buf b = {0};
	struct sl_query_config q;
	struct sl_decoder *d;
	struct sl_batch batch;
	struct sl_decode_stats st;
	struct sl_decode_error err;
	size_t lines = 0;
	char line[512];

	while (b.len < target) {
		int n = snprintf(
		    line, sizeof(line),
		    "{\"event_id\":\"e-%08zu\",\"user_id\":\"user-%04u\",\"device\":\"%s\","
		    "\"amount_cents\":%u,\"payload\":{\"tags\":[\"a\",\"b\",%u],"
		    "\"msg\":\"caf\\u00e9 au lait, no sugar\"},"
		    "\"event_time\":\"2026-10-04T12:%02u:%02u.%03uZ\",\"country\":\"fr\"}\n",
		    lines, pick(10000), pick(2) ? "android" : "ios", pick(100000), pick(9),
		    pick(60), pick(60), pick(1000));
		put(&b, line, (size_t)n);
		lines++;
	}
	memset(&q, 0, sizeof(q));
	q.source.format = SL_SOURCE_JSON;
	CHECK_OK(sl_config_schema_parse("event_id STRING NOT NULL, user_id STRING, amount_cents "
					"BIGINT, event_time TIMESTAMP",
					&q.source.schema, NULL, 0));
	CHECK_OK(sl_decoder_new(&q, &d));
	CHECK_OK(sl_batch_init(&batch, &q.source.schema));
	CHECK_OK(sl_decode_stats_init(&st, q.source.schema.n));

	/* decode in 1 MiB files, as landed files would come */
	double best = 1e9, t0;
	for (int rep = 0; rep < 3; rep++) {
		t0 = now();
		for (size_t off = 0; off < b.len;) {
			size_t n = b.len - off < (1u << 20) ? b.len - off : (1u << 20);
			const char *nl = memchr(b.s + off + n - 1, '\n', b.len - off - n + 1);
			n = nl ? (size_t)(nl - (b.s + off)) + 1 : b.len - off;
			sl_batch_clear(&batch);
			CHECK_OK(sl_decode_file(d, "q/x.json", b.s + off, n, &batch, &st, &err));
			off += n;
		}
		double dt = now() - t0;
		if (dt < best)
			best = dt;
	}
	CHECK(st.rows == 3 * lines && st.malformed == 0);

	double jbest = 1e9;
	for (int rep = 0; rep < 2; rep++) {
		size_t got = 0;
		t0 = now();
		for (size_t off = 0; off < b.len;) {
			const char *nl = memchr(b.s + off, '\n', b.len - off);
			size_t n = (size_t)(nl - (b.s + off));
			json_t *j = json_loadb(b.s + off, n, JSON_ALLOW_NUL, NULL);
			if (j && json_string_value(json_object_get(j, "event_id")) &&
			    json_object_get(j, "user_id") && json_object_get(j, "amount_cents") &&
			    json_object_get(j, "event_time"))
				got++;
			json_decref(j);
			off += n + 1;
		}
		double dt = now() - t0;
		if (dt < jbest)
			jbest = dt;
		CHECK(got == lines);
	}
	double mb = (double)b.len / (1 << 20);
	printf("throughput: %.1f MiB, %zu lines, 4 of 7 fields wanted: sl_decode_file %.0f MiB/s, "
	       "jansson line by line %.0f MiB/s (x%.1f); best of 3 and 2 runs, not asserted\n",
	       mb, lines, mb / best, mb / jbest, jbest / best);
	sl_decode_stats_release(&st);
	sl_batch_release(&batch);
	sl_decoder_free(d);
	sl_config_schema_release(&q.source.schema);
	free(b.s);
}

int main(void)
{
	test(test_crafted);
	test(test_differential);
	test(test_next_agrees);
	test(test_string_offsets);
	test(test_throughput);
	return test_exit();
}
