/* SPDX-License-Identifier: MIT */
/*
 * The file source: which landed files a query reads (path matching, at
 * landing time), and (later) planning batches from the query's index.
 */
#ifndef SLUICE_CORE_SOURCE_H
#define SLUICE_CORE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/*
 * Whether the landed file at relpath (relative to in/, '/'-separated) is
 * read by a query whose path is pattern. The pattern's components match the
 * file's leading components with fnmatch(3) (FNM_PATHNAME | FNM_PERIOD);
 * then come any number of `key=value` folders and the file name; or the
 * pattern names the file itself (its last component matching the name). A
 * component starting with '.', or with '_' and holding no '=', is never
 * read (e.g. _SUCCESS, _temporary/).
 */
bool sl_source_match(const struct sl_path *pattern, const char *relpath);

struct sl_catalog;
struct sl_inode;
struct sl_sources;
struct sl_txn;

/*
 * The queries of a config as landing sees them: each query has an id
 * (assigned at its first start, kept by name) and an index of the landed
 * files it reads and has not planned yet, filled in the very transaction
 * that lands a file. A query new to the catalog builds its index in one
 * scan of the landed files. Catalog layouts (integers big-endian):
 *
 *   queries  key: name               value: qid u32
 *   qindex   key: qid u32 | seq u64  value: file id u64
 *   qhold    key: id u64 | qid u32   value: empty (the query still needs it)
 *   meta     "q.<qid>.files", "q.<qid>.bytes": backlog counters;
 *            "q.<qid>.skipage", "q.<qid>.skipseen": skips not yet reported
 *
 * cfg is borrowed until sl_sources_free().
 */
int sl_sources_open(struct sl_catalog *cat, const struct sl_config *cfg,
		    struct sl_sources **out);
void sl_sources_free(struct sl_sources *s);

/* In the txn that lands file i (state landed, seq set): index it. */
int sl_sources_landed(struct sl_sources *s, struct sl_txn *t, const struct sl_inode *i);
/* In the txn that removes landed file i: drop it from every index. */
int sl_sources_forget(struct sl_txn *t, const struct sl_inode *i);
/* Whether some query still needs file id (an unlink answers EBUSY). */
bool sl_sources_held(struct sl_txn *t, uint64_t id);

struct sl_backlog {
	uint64_t files, bytes; /* landed, matched, not yet planned */
};
/*
 * Planning took file id (at seq) out of query qid's index: backlog counters
 * follow. With release, the query stops holding it too (a skip: see sl_sources_skip).
 */
int sl_sources_unindex(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id,
		       uint64_t size, bool release);
/*
 * Why a file leaves a query's index unread (DESIGN §1 maxFileAge and
 * fileNameOnly): each is a counter of the progress report.
 */
enum sl_skip {
	SL_SKIP_AGE,  /* older than the newest planned minus maxFileAge: skippedByMaxFileAge */
	SL_SKIP_SEEN, /* its seen-set key was seen already: skippedAlreadySeen */
};

/*
 * File id (at seq, size bytes) leaves query qid's index unread: the backlog
 * follows, the query stops holding it (it can be deleted), and the skip is
 * counted for the query's next progress report in this same txn. So a skip
 * is counted once whether or not a batch runs now, and a durable skip stays
 * counted across a restart.
 */
int sl_sources_skip(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id, uint64_t size,
		    enum sl_skip why);

struct sl_skips {
	uint64_t age, seen; /* files, by enum sl_skip */
};
/*
 * The skips of query qid not yet reported. With take, they are reset to 0:
 * call it so in the txn that commits the report that shows them.
 */
int sl_sources_skips(struct sl_txn *t, uint32_t qid, bool take, struct sl_skips *out);

/* The query's batch that read file id committed: it stops holding it. */
int sl_sources_release(struct sl_txn *t, uint32_t qid, uint64_t id);

/* The id of the query called name; SL_NOTFOUND before its first start. */
int sl_sources_qid(struct sl_txn *t, const char *name, uint32_t *qid);
/* The in/-relative path of landed file i into buf; ENOENT when not under in/. */
int sl_sources_relpath(struct sl_txn *t, const struct sl_inode *i, char *buf, size_t len);
/* The backlog of the query called name; SL_NOTFOUND before its first start. */
int sl_sources_backlog(struct sl_txn *t, const char *name, struct sl_backlog *out);

#endif
