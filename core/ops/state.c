/* SPDX-License-Identifier: MIT */
/* Operator state in the qstate table: storage keys, long keys, counters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "err.h"
#include "kmap.h"
#include "state.h"

static size_t lead_len(const struct sl_state_space *sp, const unsigned char *rk, size_t rklen)
{
	if (!sp->lead_payload || rklen == 0)
		return 0;
	size_t n = rk[0] ? 1 + sp->lead_payload : 1;
	return n <= rklen ? n : rklen;
}

void sl_state_skey(const struct sl_state_space *sp, const void *rk, size_t rklen,
		   struct sl_state_skey *out)
{
	put_be32(out->k, sp->qid);
	out->k[4] = (unsigned char)sp->op;
	if (!sl_state_key_hashed(sp, rklen)) {
		if (rklen) /* no group columns: an empty key, maybe NULL */
			memcpy(out->k + 5, rk, rklen);
		out->len = 5 + rklen;
		out->hashed = false;
		return;
	}
	size_t lead = lead_len(sp, rk, rklen);
	memcpy(out->k + 5, rk, lead);
	out->k[5 + lead] = 0x02;
	put_be64(out->k + 6 + lead, sl_kmap_hash(rk, rklen, 0x51ce));
	put_be64(out->k + 14 + lead, sl_kmap_hash(rk, rklen, 0xfeed5eed));
	out->len = 22 + lead;
	out->hashed = true;
}

/* Splits a hashed entry's value into the operator's bytes and the row key. */
static int split(const void *v, size_t vlen, size_t *oplen, const void **rk, size_t *rklen)
{
	uint32_t n;
	if (vlen < 4)
		return SL_ECORRUPT;
	memcpy(&n, (const char *)v + vlen - 4, 4);
	if (n > vlen - 4)
		return SL_ECORRUPT;
	*oplen = n;
	*rk = (const char *)v + n;
	*rklen = vlen - 4 - n;
	return 0;
}

int sl_state_get(struct sl_txn *t, const struct sl_state_space *sp, const void *rk, size_t rklen,
		 const void **val, size_t *vlen)
{
	struct sl_state_skey k;
	const void *v;
	size_t len;
	int rc;

	sl_state_skey(sp, rk, rklen, &k);
	if ((rc = sl_txn_get(t, SL_TABLE_QSTATE, k.k, k.len, &v, &len)))
		return rc;
	if (k.hashed) {
		size_t oplen, flen;
		const void *full;
		if ((rc = split(v, len, &oplen, &full, &flen)))
			return rc;
		if (flen != rklen || memcmp(full, rk, rklen))
			return SL_ECORRUPT; /* two keys share 128 bits of hash */
		len = oplen;
	}
	*val = v;
	*vlen = len;
	return 0;
}

int sl_state_put(struct sl_txn *t, const struct sl_state_space *sp, const void *rk, size_t rklen,
		 const void *val, size_t vlen)
{
	struct sl_state_skey k;
	sl_state_skey(sp, rk, rklen, &k);
	if (!k.hashed) /* callers put in key order */
		return sl_txn_put_ascending(t, SL_TABLE_QSTATE, k.k, k.len, val, vlen);
	size_t total = vlen + rklen + 4;
	unsigned char *buf = malloc(total);
	if (!buf)
		return ENOMEM;
	uint32_t n = (uint32_t)vlen;
	memcpy(buf, val, vlen);
	memcpy(buf + vlen, rk, rklen);
	memcpy(buf + vlen + rklen, &n, 4);
	int rc = sl_txn_put(t, SL_TABLE_QSTATE, k.k, k.len, buf, total);
	free(buf);
	return rc;
}

size_t sl_state_entry_bytes(size_t rklen, size_t vlen)
{
	if (rklen <= SL_STATE_KEY_INLINE)
		return 5 + rklen + vlen;
	return 5 + 17 + 17 + vlen + rklen + 4; /* at most: a 16-byte lead */
}

struct walk {
	const struct sl_state_space *sp;
	int (*fn)(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
		  const void *val, size_t vlen);
	void *ctx;
	int err;
};

static bool is_hashed(const struct sl_state_space *sp, const unsigned char *rk, size_t rklen)
{
	size_t lead = lead_len(sp, rk, rklen);
	if (sp->raw)
		return false;
	return rklen == lead + 17 && rk[lead] == 0x02;
}

static int walk_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct walk *w = ctx;
	const unsigned char *rk = (const unsigned char *)key + 5;
	size_t rklen = klen - 5;

	if (klen < 5) {
		w->err = SL_ECORRUPT;
		return 1;
	}
	if (is_hashed(w->sp, rk, rklen)) {
		size_t oplen;
		const void *full;
		size_t flen;
		if ((w->err = split(val, vlen, &oplen, &full, &flen)))
			return 1;
		return w->fn(w->ctx, key, klen, full, flen, val, oplen);
	}
	return w->fn(w->ctx, key, klen, rk, rklen, val, vlen);
}

int sl_state_each(struct sl_txn *t, const struct sl_state_space *sp, const void *rkp,
		  size_t plen,
		  int (*fn)(void *ctx, const void *skey, size_t sklen, const void *rk, size_t rklen,
			    const void *val, size_t vlen),
		  void *ctx)
{
	unsigned char prefix[5 + 32];
	struct walk w = {.sp = sp, .fn = fn, .ctx = ctx};

	if (plen > 32)
		return EINVAL;
	put_be32(prefix, sp->qid);
	prefix[4] = (unsigned char)sp->op;
	if (plen)
		memcpy(prefix + 5, rkp, plen);
	int rc = sl_txn_each(t, SL_TABLE_QSTATE, prefix, 5 + plen, walk_cb, &w);
	return w.err ? w.err : rc;
}

int sl_state_del_raw(struct sl_txn *t, const void *skey, size_t sklen)
{
	return sl_txn_del(t, SL_TABLE_QSTATE, skey, sklen);
}

int sl_state_evict_add(struct sl_state_evict *ev, const void *k, size_t len)
{
	uint32_t n = (uint32_t)len;
	sl_strbuf_add(&ev->keys, &n, sizeof(n));
	sl_strbuf_add(&ev->keys, k, len);
	return ev->keys.oom ? ENOMEM : 0;
}

int sl_state_evict_apply(const struct sl_state_evict *ev, struct sl_txn *t)
{
	for (size_t off = 0; off < ev->keys.len;) {
		uint32_t n;
		memcpy(&n, ev->keys.p + off, sizeof(n));
		int rc = sl_state_del_raw(t, ev->keys.p + off + sizeof(n), n);
		if (rc)
			return rc;
		off += sizeof(n) + n;
	}
	return 0;
}

static void counter_keys(const struct sl_state_space *sp, char rows[48], char bytes[48])
{
	snprintf(rows, 48, "q.%u.state.%c.rows", sp->qid, sp->op);
	snprintf(bytes, 48, "q.%u.state.%c.bytes", sp->qid, sp->op);
}

int sl_state_counters(struct sl_txn *t, const struct sl_state_space *sp, uint64_t *rows,
		      uint64_t *bytes)
{
	char r[48], b[48];
	int rc;
	counter_keys(sp, r, b);
	if ((rc = sl_txn_meta_get(t, r, rows)))
		return rc;
	return sl_txn_meta_get(t, b, bytes);
}

int sl_state_set_counters(struct sl_txn *t, const struct sl_state_space *sp, uint64_t rows,
			  uint64_t bytes)
{
	char r[48], b[48];
	int rc;
	counter_keys(sp, r, b);
	if ((rc = sl_txn_meta_put(t, r, rows)))
		return rc;
	return sl_txn_meta_put(t, b, bytes);
}

int sl_state_skey_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = memcmp(a, b, n);
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}
