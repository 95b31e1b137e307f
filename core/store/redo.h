/* SPDX-License-Identifier: MIT */
/*
 * Redo records: the key-value changes of one catalog transaction, sealed
 * with its transaction id and a checksum, so that a transaction whose
 * record is durable can be applied again after a power loss (catalog.c,
 * "the journal"). A torn or stale record fails sl_redo_open().
 *
 * A record is a header (magic, checksum, sequence, txnid, payload length;
 * big-endian 64-bit words) followed by its operations, each
 * kind (1 byte), table (1 byte), key length and value length (4 bytes
 * each), key, value.
 */
#ifndef SLUICE_STORE_REDO_H
#define SLUICE_STORE_REDO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

#define SL_REDO_HDR 40

enum sl_redo_kind { SL_REDO_PUT = 1, SL_REDO_DEL = 2 };

struct sl_redo {
	struct sl_strbuf b; /* SL_REDO_HDR bytes of header room, then the payload */
	size_t max;         /* the whole record's limit */
	bool over;          /* an operation did not fit (or no memory): no record */
};

/* Starts an empty record of at most max bytes (the buffer kept from a last use). */
void sl_redo_reset(struct sl_redo *r, size_t max);
void sl_redo_free(struct sl_redo *r);

/* Appends one operation; on failure sets r->over (the record is then unusable). */
void sl_redo_add(struct sl_redo *r, enum sl_redo_kind kind, unsigned table, const void *key,
		 size_t klen, const void *val, size_t vlen);

/* Whether r holds operations and none was lost. */
static inline bool sl_redo_usable(const struct sl_redo *r)
{
	return !r->over && r->b.len > SL_REDO_HDR;
}

/* Writes the header: r->b.p[0, r->b.len) is then the record. */
void sl_redo_seal(struct sl_redo *r, uint64_t seq, uint64_t txnid);

struct sl_redo_rec {
	uint64_t seq, txnid;
	const unsigned char *ops;
	size_t len;
};

/* Whether the n bytes at p begin with a whole, untorn record. */
bool sl_redo_open(const void *p, size_t n, struct sl_redo_rec *out);

/*
 * Calls fn for each operation of rec (val NULL for a deletion); stops at
 * fn's first non-zero return, which it returns; EINVAL for a malformed one.
 */
int sl_redo_each(const struct sl_redo_rec *rec,
		 int (*fn)(void *ctx, enum sl_redo_kind kind, unsigned table, const void *key,
			   size_t klen, const void *val, size_t vlen),
		 void *ctx);

#endif
