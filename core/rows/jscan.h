/* SPDX-License-Identifier: MIT */
/*
 * A schema-directed JSON object scanner: validates one line as a complete
 * RFC 8259 object in UTF-8 and extracts only the top-level fields asked for,
 * skipping the rest without building anything. The JSON source's fast path.
 */
#ifndef SLUICE_CORE_JSCAN_H
#define SLUICE_CORE_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Deepest nesting accepted, the top-level object counting as 1 (jansson's
 * default limit, so that the differential test agrees on depth too).
 */
#define SL_JSCAN_MAX_DEPTH 2048

struct sl_jscan;

enum sl_jkind {
	SL_JABSENT, /* the key does not occur */
	SL_JNULL,
	SL_JFALSE,
	SL_JTRUE,
	SL_JNUMBER, /* raw is the number's text; is_int when it has no fraction or exponent */
	SL_JSTRING, /* str/str_len hold the decoded bytes (valid UTF-8, may hold NUL) */
	SL_JOBJECT, /* raw is the object's text, validated */
	SL_JARRAY,  /* raw is the array's text, validated */
};

/* One wanted field of the last scanned line. With duplicate keys the last wins. */
struct sl_jfield {
	enum sl_jkind kind;
	bool is_int;	 /* SL_JNUMBER: matches -?(0|[1-9][0-9]*) */
	const char *raw; /* the value's text in the line: borrowed from the line */
	size_t raw_len;	 /* bytes */
	const char *str; /* SL_JSTRING: decoded text, borrowed from the line (no escapes) or
			    the scanner (until the next scan or free) */
	size_t str_len;	 /* bytes */
};

/*
 * Makes a scanner for the n field names (NUL-terminated, matched exactly,
 * byte for byte, against decoded keys; copied). Field i of every scan
 * reports names[i]. Returns 0 with *out new (sl_jscan_free), or ENOMEM.
 * A scanner is used by one thread at a time.
 */
int sl_jscan_new(const char *const *names, size_t n, struct sl_jscan **out);
void sl_jscan_free(struct sl_jscan *s);

/*
 * How plain string bytes are scanned: all give the same results; the
 * scalar code looks at 8 bytes at a time, SSE2 at 16, AVX2 at 32.
 */
enum sl_jscan_isa {
	SL_JSCAN_SCALAR,
	SL_JSCAN_SSE2,
	SL_JSCAN_AVX2,
};

/*
 * sl_jscan_new() picks the ISA named by the environment variable
 * SLUICE_JSCAN_ISA (scalar, sse2 or avx2) when the CPU has it, otherwise
 * the best the CPU has. sl_jscan_set_isa() forces one (tests): 0, or
 * ENOTSUP when this CPU or build lacks it (s unchanged).
 */
int sl_jscan_set_isa(struct sl_jscan *s, enum sl_jscan_isa isa);
enum sl_jscan_isa sl_jscan_get_isa(const struct sl_jscan *s);

/*
 * Scans one line (len bytes, no NUL needed; JSON whitespace allowed around
 * the object). Fills out[0..n-1], one per wanted name. Returns 0, or
 * SL_EMALFORMED when the line is not one valid UTF-8 JSON object (out is
 * then undefined and sl_jscan_error() says why), or ENOMEM.
 */
int sl_jscan_line(struct sl_jscan *s, const char *line, size_t len, struct sl_jfield *out);

/*
 * sl_jscan_line() for the line at line, which ends at the first '\n' before
 * end (or at end), without finding that end first: a file's lines are then
 * read once, not twice. Returns 0 with *len the line's length ('\n' not
 * counted) when the line is one valid JSON object, out filled as
 * sl_jscan_line(s, line, *len, out) would fill it. Returns EAGAIN when the
 * line is anything else, or when its escaped text does not fit the buffers
 * of earlier lines: the caller then finds the line's end and asks
 * sl_jscan_line(), whose answer (and error) stands. Never reads past end.
 */
int sl_jscan_next(struct sl_jscan *s, const char *line, const char *end, struct sl_jfield *out,
		  size_t *len);

/*
 * Why the last scan failed (static text, e.g. "invalid UTF-8 in a string")
 * and, in *offset when not NULL, the byte offset in the line where it did.
 */
const char *sl_jscan_error(const struct sl_jscan *s, size_t *offset);

/* Length of the longest prefix of s that is valid UTF-8 (RFC 3629). */
size_t sl_jscan_utf8_prefix(const char *s, size_t len);

/*
 * Writes the text of a validated JSON value (raw, len bytes) without the
 * whitespace outside strings into out (at least len bytes). Returns the
 * length written.
 */
size_t sl_jscan_compact(const char *raw, size_t len, char *out);

#endif
