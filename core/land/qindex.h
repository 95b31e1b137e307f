/* SPDX-License-Identifier: MIT */
/*
 * The queries' indexes of landed files: which landed files a query reads
 * (path matching, once, at landing time), each query's backlog, the files
 * a query still holds (unlink answers EBUSY), and the skip counters. The
 * landing fills them in its commits; the file source plans from them.
 * Tables: SL_TABLE_QINDEX, QHOLD and the q.<qid>.* meta keys (catalog.h).
 */
#ifndef SLUICE_CORE_QINDEX_H
#define SLUICE_CORE_QINDEX_H

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
bool sl_qindex_match(const struct sl_path *pattern, const char *relpath);

struct sl_catalog;
struct sl_inode;
struct sl_qindex;
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
 *            "q.<qid>.skipage", "q.<qid>.skipseen": skips not yet reported;
 *            "q.<qid>.skippedage", "q.<qid>.skippedseen": all skips (metrics)
 *
 *   meta     "qgen": the query set landings index with (bumped by each
 *            open with queries and each reload)
 *
 * cfg is borrowed until sl_qindex_free().
 */
int sl_qindex_open(struct sl_catalog *cat, const struct sl_config *cfg,
		    struct sl_qindex **out);
/*
 * A reload: from the commit of this call's write on, landings index with
 * cfg's queries; a query new to the catalog gets its id and its index of
 * every landed file in that same write, and a query cfg no longer names
 * stops holding files (its index and holds stay, for when it comes back).
 * 0, or the write's error: then nothing changed. cfg is borrowed until
 * sl_qindex_free(), as is every config given before (a landing may still
 * read one). One reload at a time; any thread.
 */
int sl_qindex_reload(struct sl_qindex *s, struct sl_catalog *cat, const struct sl_config *cfg);
void sl_qindex_free(struct sl_qindex *s);

/* In the txn that lands file i (state landed, seq set): index it. */
int sl_qindex_landed(struct sl_qindex *s, struct sl_txn *t, const struct sl_inode *i);
/* In the txn that removes landed file i: drop it from every index. */
int sl_qindex_forget(struct sl_txn *t, const struct sl_inode *i);
/*
 * Whether a query of the current config still needs file id (an unlink
 * answers EBUSY); a removed query's holds do not count. s NULL: any hold.
 */
bool sl_qindex_held(struct sl_qindex *s, struct sl_txn *t, uint64_t id);

struct sl_backlog {
	uint64_t files, bytes; /* landed, matched, not yet planned */
};
/*
 * Planning took file id (at seq) out of query qid's index: backlog counters
 * follow. With release, the query stops holding it too (a skip: see sl_qindex_skip).
 */
int sl_qindex_unindex(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id,
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
int sl_qindex_skip(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id, uint64_t size,
		    enum sl_skip why);

struct sl_skips {
	uint64_t age, seen; /* files, by enum sl_skip */
};
/*
 * The skips of query qid not yet reported. With take, they are reset to 0:
 * call it so in the txn that commits the report that shows them.
 */
int sl_qindex_skips(struct sl_txn *t, uint32_t qid, bool take, struct sl_skips *out);

/*
 * Every skip of query qid since this version counted them (never reset):
 * the metrics' sluice_query_skipped_files_total.
 */
int sl_qindex_skips_total(struct sl_txn *t, uint32_t qid, struct sl_skips *out);

/* Whether the file landed at seq is in query qid's index (not planned yet). */
bool sl_qindex_waiting(struct sl_txn *t, uint32_t qid, uint64_t seq);
/* Whether query qid still holds file id (planned and not committed, or waiting). */
bool sl_qindex_holds(struct sl_txn *t, uint32_t qid, uint64_t id);

/* The query's batch that read file id committed: it stops holding it. */
int sl_qindex_release(struct sl_txn *t, uint32_t qid, uint64_t id);

/* The id of the query called name; SL_NOTFOUND before its first start. */
int sl_qindex_qid(struct sl_txn *t, const char *name, uint32_t *qid);
/* The in/-relative path of landed file i into buf; ENOENT when not under in/. */
int sl_qindex_relpath(struct sl_txn *t, const struct sl_inode *i, char *buf, size_t len);
/*
 * The path of file i relative to the fixed folder root (SL_ID_IN,
 * SL_ID_ARCHIVE) into buf; ENOENT when i is not under it.
 */
int sl_qindex_relpath_under(struct sl_txn *t, const struct sl_inode *i, uint64_t root,
			    char *buf, size_t len);
/* The backlog of the query called name; SL_NOTFOUND before its first start. */
int sl_qindex_backlog(struct sl_txn *t, const char *name, struct sl_backlog *out);
/*
 * The landing time (CLOCK_REALTIME, ns) of the oldest file in query qid's
 * backlog; SL_NOTFOUND when the backlog is empty.
 */
int sl_qindex_oldest(struct sl_txn *t, uint32_t qid, int64_t *landed_ns);

#endif
