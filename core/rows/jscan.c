/* SPDX-License-Identifier: MIT */
/*
 * The schema-directed JSON object scanner. One forward pass over the line:
 * wanted top-level fields are recorded (strings decoded into one reusable
 * buffer), everything else is validated by an iterative skipper whose
 * nesting lives in a bit stack, so hostile depth costs 256 bytes, not stack
 * frames. Plain string bytes are checked 8 at a time inline, then with
 * SIMD (jscan_sse2.c, jscan_avx2.c: the best the CPU has, chosen when the
 * scanner is made) or 8 at a time where there is none.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "jscan.h"
#include "jscan_simd.h"

struct sl_jscan {
	char **names;	  /* wanted names, copied */
	size_t *lens;	  /* their lengths */
	size_t n;	  /* number of wanted names */
	uint32_t *slots;  /* open-addressing table: name index + 1, 0 when empty */
	size_t mask;	  /* slots - 1 (a power of two minus one) */
	char *buf;	  /* decoded strings of the current line; cap >= line length */
	char *kbuf;	  /* the current escaped key, decoded; same capacity */
	size_t cap;	  /* bytes of buf and of kbuf */
	size_t blen;	  /* bytes of buf in use */
	const char *line; /* the line being scanned (for error offsets) */
	const char *err;  /* why the last scan failed; static */
	size_t err_off;	  /* where, in bytes from the line start */
	sl_jscan_run_fn run;	  /* plain string bytes past the first 16 (isa's) */
	enum sl_jscan_isa isa;	  /* which run */
	char nlws;		  /* '\n' (whitespace), or ' ' where '\n' ends the line (sl_jscan_next) */
	uint8_t stack[SL_JSCAN_MAX_DEPTH / 8]; /* bit d: container at depth d is an object */
};

static void pick_isa(struct sl_jscan *s);

static uint32_t hash(const char *k, size_t len)
{
	uint32_t h = (uint32_t)len * 2654435761u;
	if (len)
		h ^= (uint8_t)k[0] * 0x01000193u ^ (uint8_t)k[len - 1] * 0x5bd1e995u;
	return h ^ (h >> 15);
}

int sl_jscan_new(const char *const *names, size_t n, struct sl_jscan **out)
{
	struct sl_jscan *s = calloc(1, sizeof(*s));
	/*
	 * Sparse: most keys of a line are not wanted, and an empty slot is the
	 * cheapest way to say so (a full one costs a compare).
	 */
	size_t nslots = 64;

	if (!s)
		return ENOMEM;
	s->nlws = '\n';
	while (nslots < 8 * n)
		nslots *= 2;
	s->names = calloc(n ? n : 1, sizeof(*s->names));
	s->lens = calloc(n ? n : 1, sizeof(*s->lens));
	s->slots = calloc(nslots, sizeof(*s->slots));
	if (!s->names || !s->lens || !s->slots)
		goto fail;
	s->n = n;
	s->mask = nslots - 1;
	pick_isa(s);
	for (size_t i = 0; i < n; i++) {
		s->lens[i] = strlen(names[i]);
		s->names[i] = strdup(names[i]);
		if (!s->names[i])
			goto fail;
		size_t j = hash(names[i], s->lens[i]) & s->mask;
		while (s->slots[j]) {
			size_t k = s->slots[j] - 1;
			if (s->lens[k] == s->lens[i] && !memcmp(s->names[k], names[i], s->lens[i]))
				break; /* a repeated name keeps its first index */
			j = (j + 1) & s->mask;
		}
		if (!s->slots[j])
			s->slots[j] = (uint32_t)i + 1;
	}
	*out = s;
	return 0;
fail:
	sl_jscan_free(s);
	return ENOMEM;
}

void sl_jscan_free(struct sl_jscan *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s->lens);
	free(s->slots);
	free(s->buf);
	free(s->kbuf);
	free(s);
}

const char *sl_jscan_error(const struct sl_jscan *s, size_t *offset)
{
	if (offset)
		*offset = s->err_off;
	return s->err ? s->err : "no error";
}

/* a[0, len) == b[0, len), inline for the short lengths of keys */
static inline bool same_bytes(const char *a, const char *b, size_t len)
{
	if (len >= 8 && len <= 16) {
		/* two overlapping loads cover 8 to 16 bytes */
		uint64_t a0, b0, a1, b1;
		memcpy(&a0, a, 8);
		memcpy(&b0, b, 8);
		memcpy(&a1, a + len - 8, 8);
		memcpy(&b1, b + len - 8, 8);
		return a0 == b0 && a1 == b1;
	}
	if (len >= 4 && len < 8) {
		uint32_t a0, b0, a1, b1;
		memcpy(&a0, a, 4);
		memcpy(&b0, b, 4);
		memcpy(&a1, a + len - 4, 4);
		memcpy(&b1, b + len - 4, 4);
		return a0 == b0 && a1 == b1;
	}
	return !memcmp(a, b, len);
}

static long lookup(const struct sl_jscan *s, const char *k, size_t len)
{
	size_t j = hash(k, len) & s->mask;
	while (s->slots[j]) {
		size_t i = s->slots[j] - 1;
		if (s->lens[i] == len && same_bytes(s->names[i], k, len))
			return (long)i;
		j = (j + 1) & s->mask;
	}
	return -1;
}

/* Records a failure; returns NULL so that callers can `return fail(...)`. */
static const char *fail(struct sl_jscan *s, const char *p, const char *why)
{
	s->err = why;
	s->err_off = (size_t)(p - s->line);
	return NULL;
}

/* JSON whitespace at p, skipped; a '\n' too unless it ends the line (s->nlws). */
static inline const char *ws(const struct sl_jscan *s, const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == s->nlws || *p == '\r'))
		p++;
	return p;
}

/* Length of the valid UTF-8 sequence of 2-4 bytes at p, or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0], lo = 0x80, hi = 0xBF;
	size_t n = (size_t)(end - p);

	if (c >= 0xC2 && c <= 0xDF)
		return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		if (n < 3 || (p[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
		return p[1] >= lo && p[1] <= hi ? 3 : 0;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if (n < 4 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
			return 0;
		if (c == 0xF0)
			lo = 0x90; /* overlong */
		else if (c == 0xF4)
			hi = 0x8F; /* above U+10FFFF */
		return p[1] >= lo && p[1] <= hi ? 4 : 0;
	}
	return 0;
}

size_t sl_jscan_utf8_prefix(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		if (*p < 0x80) {
			p++;
			continue;
		}
		size_t n = utf8_seq(p, end);
		if (!n)
			break;
		p += n;
	}
	return (size_t)(p - (const unsigned char *)s);
}

/* True when one of the 8 bytes may be < 0x20, '"', '\\' or >= 0x80 (false positives allowed). */
static inline int special8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
	uint64_t hit = (x - ones * 0x20) | ((q - ones) & ~q) | ((b - ones) & ~b) | x;
	return (hit & high) != 0;
}

static inline int special(unsigned char c)
{
	return c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
}

/* Advances over plain ASCII string bytes, 8 at a time: the scalar ISA. */
static const char *run_scalar(const char *p, const char *end)
{
	for (;;) {
		uint64_t x;
		while (end - p >= 8) {
			memcpy(&x, p, 8);
			if (special8(x))
				break;
			p += 8;
		}
		const char *stop = end - p > 8 ? p + 8 : end;
		for (; p < stop; p++)
			if (special((unsigned char)*p))
				return p;
		if (p == end)
			return p;
	}
}

/*
 * Advances over plain ASCII string bytes. Most strings (keys, short values)
 * end within 16 bytes: those are looked at inline, 8 at a time; a longer
 * run goes to the ISA's code.
 */
static inline const char *plain_run(const struct sl_jscan *s, const char *p, const char *end)
{
#ifdef SL_JSCAN_SSE2_INLINE
	/* SSE2 is x86-64's baseline: its 16-byte test is inline unless scalar is forced */
	if (s->isa != SL_JSCAN_SCALAR) {
		if (end - p < 16)
			return run_scalar(p, end);
		unsigned m = sl_jscan_special16(p);
		return m ? p + __builtin_ctz(m) : s->run(p + 16, end);
	}
#endif
	for (int k = 0; k < 2; k++) {
		uint64_t x;
		if (end - p < 8)
			return run_scalar(p, end);
		memcpy(&x, p, 8);
		if (special8(x)) {
			/* special8 may be a false positive: then the run goes on */
			for (const char *stop = p + 8; p < stop; p++)
				if (special((unsigned char)*p))
					return p;
		} else {
			p += 8;
		}
	}
	return s->run(p, end);
}

int sl_jscan_set_isa(struct sl_jscan *s, enum sl_jscan_isa isa)
{
	sl_jscan_run_fn run = run_scalar;

	switch (isa) {
	case SL_JSCAN_SCALAR:
		break;
#ifdef SL_JSCAN_X86
	case SL_JSCAN_SSE2:
		__builtin_cpu_init();
		if (!__builtin_cpu_supports("sse2"))
			return ENOTSUP;
		run = sl_jscan_run_sse2;
		break;
	case SL_JSCAN_AVX2:
		__builtin_cpu_init();
		if (!__builtin_cpu_supports("avx2"))
			return ENOTSUP;
		run = sl_jscan_run_avx2;
		break;
#endif
	default:
		return ENOTSUP;
	}
	s->run = run;
	s->isa = isa;
	return 0;
}

enum sl_jscan_isa sl_jscan_get_isa(const struct sl_jscan *s)
{
	return s->isa;
}

/* The ISA SLUICE_JSCAN_ISA names when the CPU has it, else the best the CPU has. */
static void pick_isa(struct sl_jscan *s)
{
	static const char *const names[] = {"scalar", "sse2", "avx2"};
	const char *env = getenv("SLUICE_JSCAN_ISA");

	for (int i = 0; env && i < 3; i++)
		if (!strcmp(env, names[i]) && sl_jscan_set_isa(s, (enum sl_jscan_isa)i) == 0)
			return;
	if (sl_jscan_set_isa(s, SL_JSCAN_AVX2) && sl_jscan_set_isa(s, SL_JSCAN_SSE2))
		sl_jscan_set_isa(s, SL_JSCAN_SCALAR);
}

static int hex4(const char *p, uint32_t *v)
{
	uint32_t x = 0;
	for (int i = 0; i < 4; i++) {
		unsigned char c = (unsigned char)p[i];
		x <<= 4;
		if (c >= '0' && c <= '9')
			x |= c - '0';
		else if (c >= 'a' && c <= 'f')
			x |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			x |= c - 'A' + 10;
		else
			return -1;
	}
	*v = x;
	return 0;
}

/* The escape at p (on the backslash): its code point in *cp; returns the position after it. */
static const char *escape(struct sl_jscan *s, const char *p, const char *end, uint32_t *cp)
{
	uint32_t lo;

	if (end - p < 2)
		return fail(s, p, "unterminated string");
	switch (p[1]) {
	case '"':
		*cp = '"';
		return p + 2;
	case '\\':
		*cp = '\\';
		return p + 2;
	case '/':
		*cp = '/';
		return p + 2;
	case 'b':
		*cp = '\b';
		return p + 2;
	case 'f':
		*cp = '\f';
		return p + 2;
	case 'n':
		*cp = '\n';
		return p + 2;
	case 'r':
		*cp = '\r';
		return p + 2;
	case 't':
		*cp = '\t';
		return p + 2;
	case 'u':
		break;
	default:
		return fail(s, p, "invalid escape in a string");
	}
	if (end - p < 6 || hex4(p + 2, cp))
		return fail(s, p, "invalid \\u escape");
	if (*cp >= 0xDC00 && *cp <= 0xDFFF)
		return fail(s, p, "lone low surrogate in a \\u escape");
	if (*cp < 0xD800 || *cp > 0xDBFF)
		return p + 6;
	if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &lo) || lo < 0xDC00 ||
	    lo > 0xDFFF)
		return fail(s, p, "lone high surrogate in a \\u escape");
	*cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
	return p + 12;
}

static size_t put_utf8(char *d, uint32_t cp)
{
	if (cp < 0x80) {
		d[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (char)(0xC0 | cp >> 6);
		d[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (char)(0xE0 | cp >> 12);
		d[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		d[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	d[0] = (char)(0xF0 | cp >> 18);
	d[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	d[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	d[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/*
 * string()'s general case: the body starts at p, and its plain bytes run
 * up to run (not '"'). Out of line, so that string() stays small.
 */
static __attribute__((noinline)) const char *string_rest(struct sl_jscan *s, const char *p,
							 const char *run, const char *end,
							 char *dst, size_t *dlen, int *esc)
{
	char *d = dst;
	uint32_t cp;

	if (d) {
		memcpy(d, p, (size_t)(run - p));
		d += run - p;
	}
	p = run;
	for (;;) {
		if (p == end)
			return fail(s, p, "unterminated string");
		unsigned char c = (unsigned char)*p;
		if (c == '"') {
			if (d)
				*dlen = (size_t)(d - dst);
			return p + 1;
		}
		if (c == '\\') {
			if (esc)
				*esc = 1;
			p = escape(s, p, end, &cp);
			if (!p)
				return NULL;
			if (d)
				d += put_utf8(d, cp);
		} else if (c < 0x20) {
			return fail(s, p, "control character in a string");
		} else {
			size_t n = utf8_seq((const unsigned char *)p, (const unsigned char *)end);
			if (!n)
				return fail(s, p, "invalid UTF-8 in a string");
			if (d) {
				memcpy(d, p, n);
				d += n;
			}
			p += n;
		}
		run = p;
		p = plain_run(s, p, end);
		if (d) {
			memcpy(d, run, (size_t)(p - run));
			d += p - run;
		}
	}
}

/*
 * The string whose body starts at p (after the opening quote). When dst is
 * not NULL the decoded bytes go there and *dlen gets their count (never more
 * than the raw length). *esc, when not NULL, tells whether it held escapes.
 * Returns the position after the closing quote. Inline for the common case,
 * plain ASCII up to the quote (most keys and values).
 */
static inline const char *string(struct sl_jscan *s, const char *p, const char *end, char *dst,
				 size_t *dlen, int *esc)
{
	const char *q = plain_run(s, p, end);

	if (__builtin_expect(q < end && *q == '"', 1)) {
		if (dst) {
			memcpy(dst, p, (size_t)(q - p));
			*dlen = (size_t)(q - p);
		}
		return q + 1;
	}
	return string_rest(s, p, q, end, dst, dlen, esc);
}

static const char *number(struct sl_jscan *s, const char *p, const char *end, bool *is_int)
{
	const char *q = p;
	bool integral = true;

	if (q < end && *q == '-')
		q++;
	if (q < end && *q == '0') {
		q++;
	} else if (q < end && *q >= '1' && *q <= '9') {
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	} else {
		return fail(s, p, "invalid value");
	}
	if (q < end && *q == '.') {
		q++;
		if (q == end || *q < '0' || *q > '9')
			return fail(s, q, "invalid number");
		while (q < end && *q >= '0' && *q <= '9')
			q++;
		integral = false;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q == end || *q < '0' || *q > '9')
			return fail(s, q, "invalid number");
		while (q < end && *q >= '0' && *q <= '9')
			q++;
		integral = false;
	}
	*is_int = integral;
	return q;
}

static const char *literal(struct sl_jscan *s, const char *p, const char *end, const char *word,
			   size_t n)
{
	if ((size_t)(end - p) < n || memcmp(p, word, n))
		return fail(s, p, "invalid value");
	return p + n;
}

/* A member key and its colon: p is on the opening quote; returns the position after ':'. */
static const char *key(struct sl_jscan *s, const char *p, const char *end)
{
	if (p == end || *p != '"')
		return fail(s, p, "expected a string key");
	p = string(s, p + 1, end, NULL, NULL, NULL);
	if (!p)
		return NULL;
	p = ws(s, p, end);
	if (p == end || *p != ':')
		return fail(s, p, "expected ':'");
	return p + 1;
}

/*
 * Validates the value at p (whitespace allowed before it), nested inside
 * depth0 open containers, without recursion. Returns the position after it.
 */
static const char *skip(struct sl_jscan *s, const char *p, const char *end, unsigned depth0)
{
	unsigned depth = depth0;
	bool is_int;

	for (;;) {
		p = ws(s, p, end);
		if (p == end)
			return fail(s, p, "unexpected end of line");
		switch (*p) {
		case '{':
		case '[': {
			bool obj = *p == '{';
			if (depth >= SL_JSCAN_MAX_DEPTH)
				return fail(s, p, "nesting too deep");
			if (obj)
				s->stack[depth / 8] |= (uint8_t)(1u << (depth % 8));
			else
				s->stack[depth / 8] &= (uint8_t) ~(1u << (depth % 8));
			depth++;
			p = ws(s, p + 1, end);
			if (p < end && *p == (obj ? '}' : ']')) {
				p++;
				depth--;
				break;
			}
			if (obj && !(p = key(s, p, end)))
				return NULL;
			continue;
		}
		case '"':
			p = string(s, p + 1, end, NULL, NULL, NULL);
			break;
		case 't':
			p = literal(s, p, end, "true", 4);
			break;
		case 'f':
			p = literal(s, p, end, "false", 5);
			break;
		case 'n':
			p = literal(s, p, end, "null", 4);
			break;
		default:
			p = number(s, p, end, &is_int);
			break;
		}
		if (!p)
			return NULL;
		/* a value ended: close what it ends */
		for (;;) {
			if (depth == depth0)
				return p;
			bool obj = s->stack[(depth - 1) / 8] >> ((depth - 1) % 8) & 1;
			p = ws(s, p, end);
			if (p == end)
				return fail(s, p, "unexpected end of line");
			if (*p == ',') {
				p++;
				if (obj && !(p = key(s, ws(s, p, end), end)))
					return NULL;
				break;
			}
			if (*p != (obj ? '}' : ']'))
				return fail(s, p,
					    obj ? "expected ',' or '}'" : "expected ',' or ']'");
			p++;
			depth--;
		}
	}
}

/* A wanted member's value at p (after whitespace): validated and recorded in f. */
static const char *take(struct sl_jscan *s, const char *p, const char *end, struct sl_jfield *f)
{
	const char *q;

	f->raw = p;
	f->is_int = false;
	if (p == end)
		return fail(s, p, "unexpected end of line");
	switch (*p) {
	case '"': {
		/* without escapes the decoded text is the raw one: no copy */
		int esc = 0;
		f->kind = SL_JSTRING;
		q = string(s, p + 1, end, NULL, NULL, &esc);
		if (q && !esc) {
			f->str = p + 1;
			f->str_len = (size_t)(q - 1 - (p + 1));
		} else if (q && s->blen + (size_t)(q - p) > s->cap) {
			/* sl_jscan_next() only: the line may be longer than buf */
			q = fail(s, p, "string longer than the buffer");
		} else if (q) {
			f->str = s->buf + s->blen;
			string(s, p + 1, end, s->buf + s->blen, &f->str_len, NULL);
			s->blen += f->str_len;
		}
		break;
	}
	case '{':
	case '[':
		f->kind = *p == '{' ? SL_JOBJECT : SL_JARRAY;
		q = skip(s, p, end, 1);
		break;
	case 't':
		f->kind = SL_JTRUE;
		q = literal(s, p, end, "true", 4);
		break;
	case 'f':
		f->kind = SL_JFALSE;
		q = literal(s, p, end, "false", 5);
		break;
	case 'n':
		f->kind = SL_JNULL;
		q = literal(s, p, end, "null", 4);
		break;
	default:
		f->kind = SL_JNUMBER;
		q = number(s, p, end, &f->is_int);
		break;
	}
	if (q)
		f->raw_len = (size_t)(q - p);
	return q;
}

/* Room in buf and kbuf for a line of len bytes: decoded text never outgrows its source. */
static int fit(struct sl_jscan *s, size_t len)
{
	if (len <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap : 4096;
	while (cap < len)
		cap *= 2;
	char *buf = realloc(s->buf, cap);
	if (!buf)
		return ENOMEM;
	s->buf = buf;
	char *kbuf = realloc(s->kbuf, cap);
	if (!kbuf)
		return ENOMEM;
	s->kbuf = kbuf;
	s->cap = cap;
	return 0;
}

/*
 * One object from line up to end, whitespace around it: the position after
 * its closing brace and the whitespace that follows, or NULL (s->err says
 * why). Escaped strings and keys must fit in buf and kbuf.
 */
static const char *scan(struct sl_jscan *s, const char *line, const char *end,
			struct sl_jfield *out)
{
	const char *p;

	s->blen = 0;
	s->line = line;
	s->err = NULL;
	for (size_t i = 0; i < s->n; i++)
		out[i].kind = SL_JABSENT;

	p = ws(s, line, end);
	if (p == end || *p != '{')
		return fail(s, p, "not a JSON object");
	p = ws(s, p + 1, end);
	if (p < end && *p == '}')
		return ws(s, p + 1, end);
	for (;;) {
		int esc = 0;
		const char *k = p + 1, *q;
		long idx;
		size_t klen = 0;

		if (p == end || *p != '"')
			return fail(s, p, "expected a string key");
		q = string(s, k, end, NULL, NULL, &esc);
		if (!q)
			return NULL;
		if (!esc) {
			idx = lookup(s, k, (size_t)(q - 1 - k));
		} else {
			if ((size_t)(q - k) > s->cap)
				return fail(s, k, "key longer than the buffer"); /* sl_jscan_next() */
			string(s, k, end, s->kbuf, &klen, NULL);
			idx = lookup(s, s->kbuf, klen);
		}
		p = ws(s, q, end);
		if (p == end || *p != ':')
			return fail(s, p, "expected ':'");
		p = ws(s, p + 1, end);
		p = idx < 0 ? skip(s, p, end, 1) : take(s, p, end, &out[idx]);
		if (!p)
			return NULL;
		p = ws(s, p, end);
		if (p < end && *p == ',') {
			p = ws(s, p + 1, end);
			continue;
		}
		if (p < end && *p == '}')
			return ws(s, p + 1, end);
		return fail(s, p, "expected ',' or '}'");
	}
}

int sl_jscan_line(struct sl_jscan *s, const char *line, size_t len, struct sl_jfield *out)
{
	const char *end = line + len, *p;

	if (fit(s, len))
		return ENOMEM;
	p = scan(s, line, end, out);
	if (!p)
		return SL_EMALFORMED;
	if (p != end) {
		fail(s, p, "text after the object");
		return SL_EMALFORMED;
	}
	return 0;
}

int sl_jscan_next(struct sl_jscan *s, const char *line, const char *end, struct sl_jfield *out,
		  size_t *len)
{
	/* a '\n' is no whitespace here: the scan stops at it, and fails before the '}' */
	s->nlws = ' ';
	const char *p = scan(s, line, end, out);
	s->nlws = '\n';
	if (!p || (p < end && *p != '\n'))
		return EAGAIN;
	*len = (size_t)(p - line);
	return 0;
}

size_t sl_jscan_compact(const char *raw, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = raw[i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		out[n++] = c;
		if (c != '"')
			continue;
		/* copy the string through its closing quote, escapes untouched */
		for (i++; i < len; i++) {
			out[n++] = raw[i];
			if (raw[i] == '\\')
				out[n++] = raw[++i];
			else if (raw[i] == '"')
				break;
		}
	}
	return n;
}
