/* SPDX-License-Identifier: MIT */
/* sluice run --available-now: every query processes what has landed, then exits. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "datadir.h"
#include "engine.h"
#include "err.h"
#include "config.h"
#include "land.h"
#include "sluice.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice run --available-now DATA_DIR\n"
		"\n"
		"Without a mount, every query of DATA_DIR/sluice.json processes what has\n"
		"landed: its uncommitted batch first, then batches over everything landed when\n"
		"it started (caps respected), whatever its trigger; then sluice exits. Committed\n"
		"output is in the data dir's out/<query>/ (seen through a mount), checkpoints in\n"
		"checkpoint/<query>/. Prints one line per query: '<name>: N batches, N rows'.\n"
		"\n"
		"  --available-now  required: the trigger this command applies\n"
		"Exit codes: 0 ok, 1 a query failed (its error on stderr), 2 misuse, 3 data dir\n"
		"in use, 4 not a sluice data dir or invalid config.\n");
}

static void report(const struct sl_engine_report *r, void *ctx)
{
	bool *failed = ctx;
	if (r->rc) {
		*failed = true;
		die_msg("run", "query '%s' failed: %s", r->query, r->error);
	}
	printf("%s: %" PRIu64 " batches, %" PRIu64 " rows", r->query, r->batches, r->rows);
	if (r->malformed)
		printf(", %" PRIu64 " malformed", r->malformed);
	printf("\n");
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"available-now", no_argument, NULL, 'a'},
						 {NULL, 0, NULL, 0}};
	bool available_now = false, failed = false;
	int c, rc;

	use_stderr_log();
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return SL_EXIT_OK;
		case 'a':
			available_now = true;
			break;
		default:
			usage(stderr);
			return SL_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		die_msg("run", "expected DATA_DIR (see 'sluice run --help')");
		return SL_EXIT_USAGE;
	}
	if (!available_now) {
		die_msg("run", "--available-now is required (other triggers run in a mount)");
		return SL_EXIT_USAGE;
	}
	struct session ss;
	if ((rc = session_open("run", argv[optind], &ss)))
		return rc;
	char err[512];
	if ((rc = sl_engine_check_changes(ss.l, ss.cfg, err, sizeof(err)))) {
		if (rc == SL_ECONFIG || rc == SL_ECORRUPT || rc == SL_EVERSION)
			die_msg("run", "%s", err);
		else
			die_msg("run", "cannot read the checkpoints: %s", sl_strerror(rc));
		session_close(&ss);
		return rc == SL_ECONFIG || rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR
										   : SL_EXIT_FAILURE;
	}
	sl_engine_run_available_now(ss.l, ss.cfg, report, &failed);
	session_close(&ss);
	return failed ? SL_EXIT_FAILURE : SL_EXIT_OK;
}
