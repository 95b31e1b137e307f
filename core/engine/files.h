/* SPDX-License-Identifier: MIT */
/*
 * Per-file state (`sluice files`): every landed file, where it is now, and
 * for each query that reads it what the query did with it, from one read
 * transaction. Read-only: works on a mounted data dir.
 */
#ifndef SLUICE_CORE_FILES_H
#define SLUICE_CORE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_config;
struct sl_txn;

enum sl_files_state {
	SL_FILES_WAITING,   /* in the query's backlog (or the query never started) */
	SL_FILES_PLANNED,   /* in batch `batch`, which has not committed yet */
	SL_FILES_FAILED,    /* in batch `batch`, whose error (`error`) names it */
	SL_FILES_COMMITTED, /* read by batch `batch`, committed */
	SL_FILES_SKIPPED,   /* left unread: `reason` */
	SL_FILES_ARCHIVED,  /* committed in batch `batch`, moved to archive/ by cleanSource */
	SL_FILES_DELETED,   /* committed in batch `batch`, deleted by cleanSource */
};

enum sl_files_reason {
	SL_FILES_NO_REASON,
	SL_FILES_MAX_FILE_AGE, /* older than the newest planned minus maxFileAge */
	SL_FILES_ALREADY_SEEN, /* its seen-set key was seen already */
};

/* One query's view of a file. */
struct sl_files_query {
	const char *name;             /* the query's; borrowed from the config */
	enum sl_files_state state;
	enum sl_files_reason reason;  /* SL_FILES_SKIPPED only */
	bool has_batch;               /* false: batch unknown (planned by an older version) */
	uint64_t batch;
	int64_t clock_us;             /* skipped by age: the file's age clock (us) ... */
	int64_t threshold_us;         /* ... and the threshold it was below (us) */
	bool by_name;                 /* skipped as seen: keyed by name (fileNameOnly) */
	const char *error;            /* SL_FILES_FAILED: lastError; borrowed until sl_files_free() */
};

/* A landed file. */
struct sl_files_entry {
	uint64_t id;                  /* the file's id (its inode number in the mount) */
	uint64_t seq;                 /* landing sequence number: the list's order */
	uint64_t size;                /* bytes */
	int64_t landed_ns;            /* landing time, CLOCK_REALTIME */
	int64_t mtime_ns;             /* the producer's mtime; 0 once removed */
	char *path;                   /* in/-relative path it landed at */
	char *location;               /* where it is now ("in/..", "archive/.."), NULL: removed */
	size_t nq;
	struct sl_files_query *q;     /* the queries that read it, in config order */
};

struct sl_files {
	struct sl_files_entry *v;     /* in landing order */
	size_t n;
	char (*errors)[512];          /* the queries' lastErrors, that entries point into */
};

struct sl_files_filter {
	const char *query;                            /* only files this query reads; NULL: all */
	bool (*match)(void *ctx, const char *path);   /* on the in/-relative path; NULL: all */
	void *ctx;
};

/*
 * Lists the landed files of the catalog, read in t (a read txn), as the
 * queries of cfg see them: every file landed and still in in/ or archive/,
 * and every file a query planned or skipped that was removed since. With
 * f->query, only files that query reads. *out is new (sl_files_free()).
 * 0, ENOMEM, SL_ECORRUPT or a catalog error.
 */
int sl_files_list(struct sl_txn *t, const struct sl_config *cfg, const struct sl_files_filter *f,
		  struct sl_files **out);
void sl_files_free(struct sl_files *l);

/* "waiting", "planned", ...: the state's name as `sluice files` prints it. */
const char *sl_files_state_name(enum sl_files_state s);

#endif
