/* SPDX-License-Identifier: MIT */
/* sluice check: verifies that the catalog and the blobs agree. */
#include <inttypes.h>
#include <stdio.h>

#include "check.h"
#include "err.h"
#include "sluice.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice check DATA_DIR\n"
		   "\n"
		   "Verifies that the catalog and the blobs agree: every name points at a record\n"
		   "that points back, every file has its bytes (inline, or a blob as long as its\n"
		   "record says), every blob is named by a record. Opening the data dir first\n"
		   "recovers what a crash left, as a mount would. Prints one line per problem,\n"
		   "then a summary. Takes the data dir's lock.\n"
		   "Exit codes: 0 consistent, 1 problems found, 2 misuse, 3 data dir in use,\n"
		   "4 not a sluice data dir or invalid config.\n");
}

static void print_problem(void *ctx, const char *line)
{
	(void)ctx;
	printf("problem: %s\n", line);
}

int cmd_check(int argc, char **argv)
{
	struct sl_check_report r;
	struct session ss;
	int rc;

	use_stderr_log();
	const char *datadir;
	if ((rc = datadir_arg("check", argc, argv, usage, &datadir)) >= 0)
		return rc;
	if ((rc = session_open("check", datadir, &ss)))
		return rc;
	rc = sl_check(ss.l, datadir, print_problem, NULL, &r);
	session_close(&ss);
	if (rc) {
		die_msg("check", "cannot read the catalog: %s", sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	printf("check: %" PRIu64 " files, %" PRIu64 " folders, %" PRIu64 " blobs: %s\n", r.files,
	       r.folders, r.blobs, r.problems ? "problems found" : "consistent");
	return r.problems ? SL_EXIT_FAILURE : SL_EXIT_OK;
}
