/* SPDX-License-Identifier: MIT */
/*
 * `sluice check`: the catalog and the blobs agree. Every name points at a
 * record that points back; every blob-backed file has its blob, as long as
 * its record says; every small file has its inline bytes; every blob is
 * named by a record (an unnamed one in the unsettled id range is an orphan
 * the next start removes); pending records are recorded files.
 */
#ifndef SLUICE_CORE_CHECK_H
#define SLUICE_CORE_CHECK_H

#include <stdint.h>

struct sl_land;

struct sl_check_report {
	uint64_t files, folders, blobs;
	uint64_t problems;       /* things that are wrong */
	uint64_t orphans;        /* unnamed blobs the next start removes */
};

/* fn gets one line per problem found. Returns 0 (see report) or an error. */
int sl_check(struct sl_land *l, const char *datadir, void (*fn)(void *ctx, const char *line),
	     void *ctx, struct sl_check_report *out);

#endif
