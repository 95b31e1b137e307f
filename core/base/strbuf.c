/* SPDX-License-Identifier: MIT */
/* A growable byte buffer with a sticky out-of-memory flag. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "strbuf.h"

void sl_strbuf_grow(struct sl_strbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->oom || b->cap - b->len >= more)
		return;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < more) {
		if (cap > SIZE_MAX / 2) {
			b->oom = true;
			return;
		}
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

void sl_strbuf_addf(struct sl_strbuf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true; /* an encoding error: nothing sensible to append */
		return;
	}
	if ((size_t)n < sizeof(small)) {
		sl_strbuf_add(b, small, (size_t)n);
		return;
	}
	sl_strbuf_grow(b, (size_t)n + 1);
	if (b->oom)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sl_strbuf_release(struct sl_strbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}
