/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: core/jscan.c differential against jansson (DESIGN §3). The
 * input is one line; the scanner and json_loadb(JSON_DECODE_ANY |
 * JSON_ALLOW_NUL) + json_is_object() must agree on accept/reject and on the
 * kind and value of every wanted field. abort() on a mismatch. Every input
 * goes through one scanner per string-scanning ISA this CPU has (scalar,
 * SSE2, AVX2; sl_jscan_set_isa), each compared with jansson.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jscan.h"

/*
 * The comparison is tests/unit/test-jscan.c's compare(), with the same
 * allowed divergences (the scanner accepts, jansson refuses), here checked
 * further rather than only counted:
 * - json_error_numeric_overflow: an integer beyond int64 or a real beyond
 *   double range is valid RFC 8259; range belongs to the field's type. The
 *   offending number (jansson's error position is just past it) is replaced
 *   by `0` padded with spaces, and the patched line is compared again, so
 *   that a syntax error hiding behind the number is still caught;
 * - json_error_null_byte_in_key: jansson refuses "\u0000" in keys even with
 *   JSON_ALLOW_NUL. Every \u0000 escape becomes \u0001 (no wanted name holds
 *   either) and the patched line is compared again;
 * - json_error_stack_overflow: both limits are 2048; counted as allowed,
 *   as DESIGN allows depth errors.
 * One more, the other way (jansson accepts, the scanner refuses), found by
 * this fuzzer: jansson 2.14 skips a raw NUL byte that follows a number
 * ("[1\0,2]" loads as [1,2]). A raw NUL is never valid JSON, so when the
 * line holds one the scanner must refuse and jansson's answer is ignored.
 */

static const char *const wanted[] = {"a", "b", "s", "\xc3\xa9t\xc3\xa9", ""};
#define NWANTED 5

static struct sl_jscan *scanners[SL_JSCAN_AVX2 + 1]; /* NULL: the CPU lacks that ISA */

static void dump(const char *why, const char *line, size_t len)
{
	fprintf(stderr, "fuzz-jscan: %s\n  line (%zu bytes): '", why, len);
	fwrite(line, 1, len, stderr);
	fprintf(stderr, "'\n");
}

static bool numchar(char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* The number ending at pos becomes `0` and spaces. False when there is none. */
static bool patch_number(char *s, size_t len, size_t pos)
{
	size_t start = pos > len ? len : pos;

	while (start > 0 && numchar(s[start - 1]))
		start--;
	if (start == pos || pos > len)
		return false;
	s[start] = '0';
	memset(s + start + 1, ' ', pos - start - 1);
	return true;
}

/*
 * Every \u0000 escape inside a string becomes \u0001. Only called on a line
 * the scanner accepted, so that this simple lexing of strings is right.
 */
static bool patch_nul_escapes(char *s, size_t len)
{
	bool in = false, any = false;

	for (size_t i = 0; i < len; i++) {
		if (!in) {
			in = s[i] == '"';
		} else if (s[i] == '"') {
			in = false;
		} else if (s[i] == '\\' && i + 1 < len) {
			if (s[i + 1] == 'u' && len - i >= 6 && !memcmp(s + i + 2, "0000", 4)) {
				s[i + 5] = '1';
				any = true;
			}
			i++;
		}
	}
	return any;
}

static bool same_field(const struct sl_jfield *x, json_t *v)
{
	switch (x->kind) {
	case SL_JABSENT:
		return v == NULL;
	case SL_JNULL:
		return json_is_null(v);
	case SL_JTRUE:
		return json_is_true(v);
	case SL_JFALSE:
		return json_is_false(v);
	case SL_JSTRING:
		return json_is_string(v) && json_string_length(v) == x->str_len &&
		       !memcmp(json_string_value(v), x->str, x->str_len);
	case SL_JNUMBER: {
		char num[4200];
		if (x->raw_len >= sizeof(num))
			return false;
		memcpy(num, x->raw, x->raw_len);
		num[x->raw_len] = 0;
		if (x->is_int)
			return json_is_integer(v) &&
			       json_integer_value(v) == strtoll(num, NULL, 10);
		return json_is_real(v) && json_real_value(v) == strtod(num, NULL);
	}
	case SL_JOBJECT:
	case SL_JARRAY: {
		/* the raw span and its compact form both parse to the same value */
		char *c = malloc(x->raw_len + 1);
		if (!c)
			abort();
		size_t n = sl_jscan_compact(x->raw, x->raw_len, c);
		json_t *r = json_loadb(x->raw, x->raw_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		json_t *rc = json_loadb(c, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		bool ok = (x->kind == SL_JOBJECT ? json_is_object(v) : json_is_array(v)) &&
			  json_equal(r, v) && json_equal(rc, v);
		json_decref(r);
		json_decref(rc);
		free(c);
		return ok;
	}
	}
	return false;
}

/*
 * Compares the scanner with jansson on line once. Returns true when it
 * patched an allowed divergence out of line: compare again. patched says
 * that an earlier round did, so the scanner, which accepted the line, must
 * still accept it.
 */
static bool compare_once(struct sl_jscan *scanner, char *line, size_t len, bool patched)
{
	struct sl_jfield f[NWANTED];
	json_error_t jerr;
	int rc = sl_jscan_line(scanner, line, len, f);
	json_t *j = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	bool jok = j && json_is_object(j);
	char why[512];

	if (rc != 0 && rc != SL_EMALFORMED) {
		snprintf(why, sizeof(why), "sl_jscan_line returned %d", rc);
		dump(why, line, len);
		abort();
	}
	if (patched && rc != 0) {
		dump("scanner refuses a line once an allowed divergence is patched out", line, len);
		abort();
	}
	if (rc == 0 && memchr(line, 0, len)) {
		dump("scanner accepts a raw NUL byte", line, len);
		abort();
	}
	if (rc == 0 && !jok) {
		enum json_error_code code = json_error_code(&jerr);
		bool fixed = false;
		if (j) {
			dump("scanner accepts a line that is not an object", line, len);
			abort();
		}
		if (code == json_error_stack_overflow)
			return false;
		if (code == json_error_numeric_overflow)
			fixed = patch_number(line, len, (size_t)jerr.position);
		else if (code == json_error_null_byte_in_key)
			fixed = patch_nul_escapes(line, len);
		if (!fixed) {
			snprintf(why, sizeof(why),
				 "scanner accepts, jansson refuses (%s at byte %d)", jerr.text,
				 jerr.position);
			dump(why, line, len);
			abort();
		}
		return true;
	}
	if (rc != 0 && jok && memchr(line, 0, len)) {
		json_decref(j);
		return false;
	}
	if (rc != 0 && jok) {
		snprintf(why, sizeof(why), "scanner refuses (%s), jansson accepts",
			 sl_jscan_error(scanner, NULL));
		dump(why, line, len);
		abort();
	}
	if (rc == 0) {
		for (int i = 0; i < NWANTED; i++) {
			json_t *v = json_object_getn(j, wanted[i], strlen(wanted[i]));
			if (!same_field(&f[i], v)) {
				snprintf(why, sizeof(why), "field '%s' differs (scanner kind %d)",
					 wanted[i], f[i].kind);
				dump(why, line, len);
				abort();
			}
		}
	}
	json_decref(j);
	return false;
}

/* Compares a scanner with jansson on line (a private copy: it may be patched). */
static void compare(struct sl_jscan *scanner, char *line, size_t len)
{
	/* each round patches at least one byte away for good: len rounds at most */
	for (size_t round = 0; compare_once(scanner, line, len, round > 0); round++)
		if (round > len) {
			dump("patching does not converge", line, len);
			abort();
		}
}

/*
 * sl_jscan_next() on the input as a file: it may say EAGAIN; when it
 * accepts, the first line (up to the first '\n') is what it measured and
 * sl_jscan_line() accepts that line with the same fields.
 */
static void next_agrees(struct sl_jscan *s, const char *buf, size_t size)
{
	struct sl_jfield f[NWANTED], g[NWANTED];
	size_t n = 0;
	int rc = sl_jscan_next(s, buf, buf + size, f, &n);

	if (rc == EAGAIN)
		return;
	const char *nl = memchr(buf, '\n', size);
	size_t len = nl ? (size_t)(nl - buf) : size;
	if (rc != 0 || n != len) {
		dump("sl_jscan_next: not the first line", buf, size);
		abort();
	}
	/* g: what next found, its decoded strings copied (they may live in the scanner) */
	memcpy(g, f, sizeof(f));
	char *text[NWANTED] = {0};
	for (int i = 0; i < NWANTED; i++)
		if (g[i].kind == SL_JSTRING) {
			text[i] = malloc(g[i].str_len + 1);
			if (!text[i])
				abort();
			memcpy(text[i], g[i].str, g[i].str_len);
		}
	if (sl_jscan_line(s, buf, len, f)) {
		dump("sl_jscan_next accepts what sl_jscan_line refuses", buf, size);
		abort();
	}
	for (int i = 0; i < NWANTED; i++) {
		bool same = f[i].kind == g[i].kind;
		if (same && f[i].kind != SL_JABSENT)
			same = f[i].raw == g[i].raw && f[i].raw_len == g[i].raw_len &&
			       f[i].is_int == g[i].is_int;
		if (same && f[i].kind == SL_JSTRING)
			same = f[i].str_len == g[i].str_len && !memcmp(f[i].str, text[i], f[i].str_len);
		free(text[i]);
		if (!same) {
			dump("sl_jscan_next and sl_jscan_line differ", buf, size);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
			if (sl_jscan_new(wanted, NWANTED, &scanners[isa]))
				abort();
			if (sl_jscan_set_isa(scanners[isa], (enum sl_jscan_isa)isa)) {
				sl_jscan_free(scanners[isa]);
				scanners[isa] = NULL;
			}
		}
		ready = true;
	}
	for (int isa = SL_JSCAN_SCALAR; isa <= SL_JSCAN_AVX2; isa++) {
		if (!scanners[isa])
			continue;
		/* an exact-size copy, so that ASan sees any read past the line */
		char *line = malloc(size ? size : 1);
		if (!line)
			abort();
		memcpy(line, data, size);
		compare(scanners[isa], line, size);
		next_agrees(scanners[isa], line, size);
		free(line);
	}
	return 0;
}
