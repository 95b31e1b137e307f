/* SPDX-License-Identifier: MIT */
/* The checkpoint log's keys, and intents carried out after a commit (see qlog.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "codec.h"
#include "err.h"
#include "qlog.h"

static void log_key(unsigned char k[13], uint32_t qid, char kind, uint64_t n)
{
	put_be32(k, qid);
	k[4] = (unsigned char)kind;
	put_be64(k + 5, n);
}

int sl_qlog_put(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void *v,
		size_t len)
{
	unsigned char k[13];
	log_key(k, qid, kind, n);
	return sl_txn_put(t, SL_TABLE_QLOG, k, sizeof(k), v, len);
}

int sl_qlog_get(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void **data,
		size_t *len)
{
	unsigned char k[13];
	log_key(k, qid, kind, n);
	return sl_txn_get(t, SL_TABLE_QLOG, k, sizeof(k), data, len);
}

int sl_qlog_get_text(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, char *buf,
		     size_t len)
{
	const void *v;
	size_t vlen;
	int rc = sl_qlog_get(t, qid, kind, n, &v, &vlen);

	if (rc)
		return rc;
	if (vlen >= len)
		return SL_ECORRUPT;
	memcpy(buf, v, vlen);
	buf[vlen] = 0;
	return 0;
}

int sl_qlog_del(struct sl_txn *t, uint32_t qid, char kind, uint64_t n)
{
	unsigned char k[13];
	log_key(k, qid, kind, n);
	return sl_txn_del(t, SL_TABLE_QLOG, k, sizeof(k));
}

struct each_entry {
	int (*fn)(void *ctx, uint64_t n, size_t len);
	void *ctx;
};

static int each_entry_cb(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct each_entry *e = ctx;
	(void)val;
	if (klen != 13)
		return SL_ECORRUPT;
	return e->fn(e->ctx, get_be64((const unsigned char *)key + 5), vlen);
}

int sl_qlog_each(struct sl_txn *t, uint32_t qid, char kind,
		 int (*fn)(void *ctx, uint64_t n, size_t len), void *ctx)
{
	struct each_entry e = {.fn = fn, .ctx = ctx};
	unsigned char prefix[5];
	put_be32(prefix, qid);
	prefix[4] = (unsigned char)kind;
	return sl_txn_each(t, SL_TABLE_QLOG, prefix, 5, each_entry_cb, &e);
}

void sl_qlog_meta_key(char *buf, size_t len, uint32_t qid, const char *what)
{
	snprintf(buf, len, "q.%u.%s", qid, what);
}

struct intents {
	uint64_t batches[64];
	size_t n;
};

static int collect_intent(void *ctx, uint64_t n, size_t len)
{
	struct intents *in = ctx;
	(void)len;
	in->batches[in->n++] = n;
	return in->n == 64 ? 1 : 0;
}

static int intent_del_apply(struct sl_txn *t, void *arg)
{
	const uint64_t *a = arg; /* qid, kind, batch */
	return sl_qlog_del(t, (uint32_t)a[0], (char)a[1], a[2]);
}

int sl_qlog_each_intent(struct sl_catalog *cat, uint32_t qid, char kind,
			int (*act)(void *ctx, const uint64_t *ids, size_t n), void *ctx)
{
	struct intents in;
	int rc;

	do {
		struct sl_txn *t;
		in.n = 0;
		if ((rc = sl_catalog_read(cat, &t)))
			return rc;
		rc = sl_qlog_each(t, qid, kind, collect_intent, &in);
		sl_txn_end(t);
		if (rc < 0 || rc > 1)
			return rc;
		for (size_t k = 0; k < in.n; k++) {
			const void *v;
			size_t len;
			uint64_t *ids = NULL;
			if ((rc = sl_catalog_read(cat, &t)))
				return rc;
			rc = sl_qlog_get(t, qid, kind, in.batches[k], &v, &len);
			if (rc == 0 && (len % 8 || !(ids = malloc(len ? len : 1))))
				rc = len % 8 ? SL_ECORRUPT : ENOMEM;
			if (rc == 0)
				memcpy(ids, v, len);
			sl_txn_end(t);
			if (rc == 0)
				rc = act(ctx, ids, len / 8);
			free(ids);
			uint64_t a[3] = {qid, (uint64_t)kind, in.batches[k]};
			if (rc == 0)
				rc = sl_catalog_write_freeing(cat, intent_del_apply, a);
			if (rc)
				return rc;
		}
	} while (in.n == 64);
	return 0;
}

#define PACK_HDR 10

int sl_qlog_put_packed(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, const void *v,
		       size_t len)
{
	void *z;
	size_t zlen;
	int rc;

	if (len < SL_QLOG_PACK_MIN)
		return sl_qlog_put(t, qid, kind, n, v, len);
	if ((rc = sl_codec_compress(v, len, 3, &z, &zlen)))
		return rc;
	unsigned char *p = malloc(PACK_HDR + zlen);
	if (!p) {
		free(z);
		return ENOMEM;
	}
	p[0] = 0;
	p[1] = 'Z';
	put_be64(p + 2, len);
	memcpy(p + PACK_HDR, z, zlen);
	free(z);
	rc = sl_qlog_put(t, qid, kind, n, p, PACK_HDR + zlen);
	free(p);
	return rc;
}

static bool packed(const void *v, size_t len)
{
	const unsigned char *p = v;
	return len >= PACK_HDR && p[0] == 0 && p[1] == 'Z';
}

size_t sl_qlog_unpacked_size(const void *v, size_t len)
{
	return packed(v, len) ? (size_t)get_be64((const unsigned char *)v + 2) : len;
}

int sl_qlog_unpack(const void *v, size_t len, char **out, size_t *outlen)
{
	if (!packed(v, len)) {
		if (!(*out = malloc(len ? len : 1)))
			return ENOMEM;
		memcpy(*out, v, len);
		*outlen = len;
		return 0;
	}
	size_t want = sl_qlog_unpacked_size(v, len);
	void *raw;
	int rc = sl_codec_decompress((const char *)v + PACK_HDR, len - PACK_HDR, want, &raw, outlen);
	if (rc)
		return rc == SL_EMALFORMED ? SL_ECORRUPT : rc;
	if (*outlen != want) {
		free(raw);
		return SL_ECORRUPT;
	}
	*out = raw;
	return 0;
}
