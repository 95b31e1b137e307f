/* SPDX-License-Identifier: MIT */
/*
 * A growable byte buffer with a sticky out-of-memory flag (git's strbuf,
 * simplified): text is appended without a check per call and oom is tested
 * once at the end. Appending is inline: the sink formats rows with it.
 */
#ifndef SLUICE_CORE_STRBUF_H
#define SLUICE_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Zero-initialise it. p is NULL until the first append; no NUL is kept. */
struct sl_strbuf {
	char *p;
	size_t len, cap;
	bool oom; /* an append failed for want of memory: the contents stop there */
};

/* Makes room for more bytes, or sets oom. */
void sl_strbuf_grow(struct sl_strbuf *b, size_t more);

static inline void sl_strbuf_add(struct sl_strbuf *b, const void *s, size_t n)
{
	if (b->cap - b->len < n)
		sl_strbuf_grow(b, n);
	if (b->oom || n == 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void sl_strbuf_addc(struct sl_strbuf *b, char c) { sl_strbuf_add(b, &c, 1); }

static inline void sl_strbuf_adds(struct sl_strbuf *b, const char *s)
{
	sl_strbuf_add(b, s, strlen(s));
}

/* Appends printf-style text. */
void sl_strbuf_addf(struct sl_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees the bytes; the struct is left empty. */
void sl_strbuf_release(struct sl_strbuf *b);

#endif
