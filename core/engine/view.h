/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint view: checkpoint/<query>/{offsets/N, commits/N,
 * sources/0/K, metadata}, rendered from the catalog. Its nodes have
 * synthetic ids (the tag SL_VIEW_TAG), stable for a given (query, entry).
 */
#ifndef SLUICE_CORE_VIEW_H
#define SLUICE_CORE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "land.h"

#define SL_VIEW_TAG (1ull << 62)
#define SL_VIEW_N_MAX ((1u << 28) - 1)

/*
 * A view node's id: SL_VIEW_TAG | qid << 32 | kind << 28 | n (n <=
 * SL_VIEW_N_MAX). Kinds 1-11 are this view's (view.c), 12-14
 * out/<q>/_spark_metadata/'s (smeta.c).
 */
static inline uint64_t sl_view_id(uint32_t qid, unsigned kind, uint64_t n)
{
	return SL_VIEW_TAG | (uint64_t)qid << 32 | (uint64_t)kind << 28 | n;
}

static inline unsigned sl_view_kind(uint64_t id)
{
	return (unsigned)(id >> 28) & 0xf;
}

static inline uint32_t sl_view_qid(uint64_t id)
{
	return (uint32_t)(id >> 32) & 0x3fffffff;
}

static inline uint64_t sl_view_n(uint64_t id)
{
	return id & SL_VIEW_N_MAX;
}

/*
 * Also status/<query>.json and .jsonl: sl_view_lookup and sl_view_list
 * answer for SL_ID_STATUS (status/landing.json stays the caller's).
 */

/* Whether id is a node of the view (checkpoint/ itself included). */
bool sl_view_owns(uint64_t id);
/* Same contracts as sl_land_lookup/getattr/list: 0, ENOENT, an error. */
int sl_view_lookup(struct sl_land *l, uint64_t parent, const char *name, struct sl_attr *out);
int sl_view_getattr(struct sl_land *l, uint64_t id, struct sl_attr *out);
int sl_view_list(struct sl_land *l, uint64_t dir,
		 int (*fn)(void *ctx, const char *name, const struct sl_attr *a), void *ctx);
/* The bytes of view file id (new: free()). */
int sl_view_read(struct sl_land *l, uint64_t id, char **data, size_t *len);

#endif
