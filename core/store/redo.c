/* SPDX-License-Identifier: MIT */
/* Redo records of catalog transactions (redo.h). */
#include <errno.h>
#include <string.h>

#include "bytes.h"
#include "redo.h"
#include "siphash.h"

#define REDO_MAGIC 0x736c7265646f3031ull /* "slredo01" */
#define OP_HDR 10

/* not a secret: the checksum tells a torn record, not a forged one */
static const uint8_t sum_key[16] = "sluice redo sum";

void sl_redo_reset(struct sl_redo *r, size_t max)
{
	static const char room[SL_REDO_HDR];
	r->b.len = 0;
	r->b.oom = false;
	sl_strbuf_add(&r->b, room, sizeof(room));
	r->max = max;
	r->over = r->b.oom || max < SL_REDO_HDR;
}

void sl_redo_free(struct sl_redo *r)
{
	sl_strbuf_release(&r->b);
	memset(r, 0, sizeof(*r));
}

void sl_redo_add(struct sl_redo *r, enum sl_redo_kind kind, unsigned table, const void *key,
		 size_t klen, const void *val, size_t vlen)
{
	unsigned char op[OP_HDR];

	if (r->over)
		return;
	if (table > 255 || klen > UINT32_MAX || vlen > UINT32_MAX ||
	    OP_HDR + klen + vlen > r->max - r->b.len) {
		r->over = true;
		return;
	}
	op[0] = (unsigned char)kind;
	op[1] = (unsigned char)table;
	put_be32(op + 2, (uint32_t)klen);
	put_be32(op + 6, (uint32_t)vlen);
	sl_strbuf_grow(&r->b, OP_HDR + klen + vlen); /* one realloc at most */
	sl_strbuf_add(&r->b, op, OP_HDR);
	sl_strbuf_add(&r->b, key, klen);
	sl_strbuf_add(&r->b, val, vlen);
	r->over = r->b.oom;
}

static uint64_t sum_of(const unsigned char *rec, size_t len)
{
	uint8_t out[8];
	/* everything after the magic and the sum: sequence, txnid, length, payload */
	sl_siphash(sum_key, rec + 16, len - 16, out, 8);
	return get_be64(out);
}

void sl_redo_seal(struct sl_redo *r, uint64_t seq, uint64_t txnid)
{
	unsigned char *h = (unsigned char *)r->b.p;
	put_be64(h, REDO_MAGIC);
	put_be64(h + 16, seq);
	put_be64(h + 24, txnid);
	put_be64(h + 32, r->b.len - SL_REDO_HDR);
	put_be64(h + 8, sum_of(h, r->b.len));
}

bool sl_redo_open(const void *p, size_t n, struct sl_redo_rec *out)
{
	const unsigned char *b = p;
	if (n < SL_REDO_HDR || get_be64(b) != REDO_MAGIC)
		return false;
	uint64_t len = get_be64(b + 32);
	if (len > n - SL_REDO_HDR || get_be64(b + 8) != sum_of(b, SL_REDO_HDR + (size_t)len))
		return false;
	out->seq = get_be64(b + 16);
	out->txnid = get_be64(b + 24);
	out->ops = b + SL_REDO_HDR;
	out->len = (size_t)len;
	return true;
}

int sl_redo_each(const struct sl_redo_rec *rec,
		 int (*fn)(void *ctx, enum sl_redo_kind kind, unsigned table, const void *key,
			   size_t klen, const void *val, size_t vlen),
		 void *ctx)
{
	const unsigned char *p = rec->ops, *end = rec->ops + rec->len;
	while (p < end) {
		if ((size_t)(end - p) < OP_HDR)
			return EINVAL;
		unsigned kind = p[0], table = p[1];
		size_t klen = get_be32(p + 2), vlen = get_be32(p + 6);
		if (klen > (size_t)(end - p) - OP_HDR || vlen > (size_t)(end - p) - OP_HDR - klen)
			return EINVAL;
		if (kind != SL_REDO_PUT && kind != SL_REDO_DEL)
			return EINVAL;
		const unsigned char *k = p + OP_HDR;
		int rc = fn(ctx, (enum sl_redo_kind)kind, table, k, klen,
			    kind == SL_REDO_PUT ? k + klen : NULL, vlen);
		if (rc)
			return rc;
		p += OP_HDR + klen + vlen;
	}
	return 0;
}
