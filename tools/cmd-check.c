/* SPDX-License-Identifier: MIT */
/* sluice check: verifies that the catalog and the blobs agree. */
#include <getopt.h>
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
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	struct sl_check_report r;
	struct session ss;
	int c, rc;

	use_stderr_log();
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return SL_EXIT_OK;
		}
		usage(stderr);
		return SL_EXIT_USAGE;
	}
	if (argc - optind != 1) {
		die_msg("check", "expected DATA_DIR (see 'sluice check --help')");
		return SL_EXIT_USAGE;
	}
	if ((rc = session_open("check", argv[optind], &ss)))
		return rc;
	rc = sl_check(ss.l, argv[optind], print_problem, NULL, &r);
	session_close(&ss);
	if (rc) {
		die_msg("check", "cannot read the catalog: %s", sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	printf("check: %" PRIu64 " files, %" PRIu64 " folders, %" PRIu64 " blobs: %s\n", r.files,
	       r.folders, r.blobs, r.problems ? "problems found" : "consistent");
	return r.problems ? SL_EXIT_FAILURE : SL_EXIT_OK;
}
