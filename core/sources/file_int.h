/* SPDX-License-Identifier: MIT */
/*
 * The file source's state, shared by its planning (file.c) and its reading
 * (file_read.c). Never included outside core/sources/.
 */
#ifndef SLUICE_CORE_FILE_INT_H
#define SLUICE_CORE_FILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "decode.h"
#include "source.h"
#include "source_file.h"
#include "strbuf.h"

struct sl_catalog;
struct sl_txn;

/* A seen-set key: query id u32 | 0x00 | SipHash-128 (file.c). */
#define SL_SEEN_KEY_LEN 21

/* A file of the batch (or skipped by its planning). */
struct planned {
	uint64_t id, seq, size;
	int64_t landed_ms;  /* the file's landing time, for sources/0/K */
	int64_t landed_ns;  /* the same in ns, for its record ('f') */
	int64_t clock_us;   /* its age clock (landing time or mtime) */
	bool seen;          /* skipped: its seen-set key was seen (else: too old) */
	unsigned char seen_key[SL_SEEN_KEY_LEN];
	char path[4096];    /* in/-relative */
};

/*
 * A big file is decoded in two halves on two threads (split at a line
 * end): the second half's decoder, rows and counters, kept between batches.
 */
struct half {
	struct sl_decoder *dec;
	struct sl_batch b;
	struct sl_batch *into; /* where the job's rows go: &b, or a side of the caller's batch */
	struct sl_decode_stats st;
	struct sl_decode_error err;
	bool ready;
	/* the job */
	const char *path, *data;
	size_t len;
	bool mapped; /* data is a file mapping: decoded pieces leave the process */
	int fd;       /* the mapped file, read with pread instead (or -1) */
	bool cold;    /* fd's pages are given back to the kernel once decoded */
	uint64_t off; /* data's offset in it */
	int rc;
};

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	uint64_t seq_limit;      /* availableNow: what landed at start */
	bool ignore_caps;        /* trigger once: one batch takes everything */
	bool started;            /* commit() ran once (at start) */
	struct sl_decoder *dec;  /* decoding's first thread (the query's) */
	struct half half;        /* decoding's second thread */
	/* the batch: reset by each planning or replay */
	uint64_t k;              /* its sources/0/K */
	struct planned *files;   /* its files, in order (partition i is files[i]) */
	size_t n, cap;
	/* scratch for the index walk; skips are counted in the catalog (sl_qindex_skip) */
	struct planned *skip;
	size_t nskip, capskip;
	uint64_t total_bytes, maxts;
	struct sl_txn *t;        /* the planning txn, during the index walk */
	uint64_t purged;         /* the seen set's purge threshold (biased), as of planning */
	uint8_t seen_hash[16];   /* the catalog's seen-set hash key */
	struct sl_file_record rec; /* scratch */
	int rc;
};

/* The seen-set key of text (tlen bytes) for query qid under hash key hk. */
void sl_file_seen_key(const uint8_t hk[16], uint32_t qid, const char *text, size_t tlen,
		      unsigned char out[SL_SEEN_KEY_LEN]);

/*
 * History segments (file_hist.c): records added to h are written as one
 * segment of query qid by sl_hist_flush() (nothing when h is empty), which
 * empties h; sl_hist_prune() drops the segments written before before_ms.
 */
struct sl_hist {
	struct sl_strbuf raw;
	uint32_t count;
};
void sl_hist_add(struct sl_hist *h, uint64_t id, const struct sl_file_record *r);
int sl_hist_flush(struct sl_txn *t, uint32_t qid, struct sl_hist *h, int64_t now_ms);
void sl_hist_release(struct sl_hist *h);
int sl_hist_prune(struct sl_txn *t, uint32_t qid, int64_t before_ms);
int sl_hist_each(struct sl_txn *t, uint32_t qid,
		 int (*fn)(void *ctx, uint64_t id, const struct sl_file_record *r), void *ctx);
int64_t sl_hist_now_ms(void);

/*
 * Brings the catalog to format 2 (a format 1 catalog is migrated in one
 * write) and fills key with its seen-set hash key (made at the first start).
 */
int sl_file_upgrade(struct sl_catalog *cat, uint8_t key[16]);

/* Reads and decodes file part of the batch (file_read.c); see sl_source_ops.read. */
int sl_file_read(struct sl_source *s, size_t part, struct sl_batch *b,
		 struct sl_decode_stats *st, char *err, size_t errlen);

/* Frees the second decoding thread's decoder and rows. */
void sl_file_half_release(struct half *h);

#endif
