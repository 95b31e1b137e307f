/* SPDX-License-Identifier: MIT */
/*
 * out/<query>/_spark_metadata/: Spark's file sink log (SPARK-NOTES §2.6-2.8)
 * for the append-mode queries, rendered read-only from the catalog, so that
 * Spark's readers list committed parts only. Its nodes are view nodes
 * (view.h's id layout, kinds 12-14).
 */
#ifndef SLUICE_CORE_SMETA_H
#define SLUICE_CORE_SMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "land.h"
#include "strbuf.h"

#define SL_SMETA_NAME "_spark_metadata"

struct sl_config;

/* What rendering needs; every pointer is borrowed for the life of the mount. */
struct sl_smeta {
	struct sl_land *l;
	const struct sl_config *cfg; /* which queries are append-mode file sinks */
	const char *root;            /* the URI of the mount, no trailing '/': "file:///mnt" */
};

/* Whether id is a node of some out/<q>/_spark_metadata/ (the folder included). */
bool sl_smeta_owns(uint64_t id);

/*
 * The _spark_metadata entry of folder dir: 0 and *out when dir is out/<q>/
 * of an append-mode query of the config, ENOENT when it is not, or an error.
 * One catalog read; never renders a file.
 */
int sl_smeta_entry(const struct sl_smeta *sm, uint64_t dir, struct sl_attr *out);

/*
 * Same contracts as sl_view_lookup/getattr/list/read. Only the latest
 * N.compact and the batches after it exist. A file's size is its rendered
 * length (getattr renders it); listings give size 0, the size coming with
 * the getattr. *data is new: free().
 */
int sl_smeta_lookup(const struct sl_smeta *sm, uint64_t parent, const char *name,
		    struct sl_attr *out);
int sl_smeta_getattr(const struct sl_smeta *sm, uint64_t id, struct sl_attr *out);
int sl_smeta_list(const struct sl_smeta *sm, uint64_t dir,
		  int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx);
int sl_smeta_read(const struct sl_smeta *sm, uint64_t id, char **data, size_t *len);

/*
 * Appends path percent-encoded as Hadoop's Path.toUri (java.net.URI's
 * multi-argument constructor) does: A-Za-z0-9 _-!.~'()* ,;:$&+= / @ and
 * bytes >= 0x80 stay, every other byte becomes %XX (upper-case hex).
 * Out of memory sets out->oom.
 */
void sl_smeta_uri_encode(struct sl_strbuf *out, const char *path);

/* One entry of a log file (Spark's SinkFileStatus; action "add"). */
struct sl_smeta_status {
	const char *path;      /* the URI, already encoded; borrowed */
	uint64_t size;         /* bytes */
	int64_t mtime_ms;      /* modificationTime, ms since the epoch */
	uint32_t replication;  /* blockReplication */
	uint64_t block_size;   /* blockSize, bytes */
};

/*
 * Appends a log file as Spark serializes it: "v1", then "\n" and one JSON
 * object per entry, no trailing newline. Out of memory sets out->oom.
 */
void sl_smeta_serialize(struct sl_strbuf *out, const struct sl_smeta_status *v, size_t n);

#endif
