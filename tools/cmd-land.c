/* SPDX-License-Identifier: MIT */
/* sluice land: lands local files into a data dir, without a mount. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "datadir.h"
#include "err.h"
#include "config.h"
#include "land.h"
#include "sluice.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice land DATA_DIR FILE... [--to DIR]\n"
		"\n"
		"Lands each FILE in DATA_DIR's in/ (in/DIR with --to, created when missing),\n"
		"with the same semantics as a landing through the mount: durable, immutable,\n"
		"keeping the file's name, mode and mtime. A folder, a temporary name or a name\n"
		"already in in/ is refused; DIR may not leave in/.\n"
		"\n"
		"  --to DIR   a folder under in/\n"
		"Exit codes: 0 ok, 1 a file could not land, 2 misuse, 3 data dir in use,\n"
		"4 not a sluice data dir or invalid config.\n");
}

static bool leaves_in(const char *to)
{
	if (to[0] == '/')
		return true;
	for (const char *p = to; *p;) {
		size_t n = strcspn(p, "/");
		if ((n == 2 && !strncmp(p, "..", 2)))
			return true;
		p += n;
		p += *p == '/';
	}
	return false;
}

int cmd_land(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"to", required_argument, NULL, 't'},
						 {NULL, 0, NULL, 0}};
	const char *to = NULL;
	int c, rc, failed = 0;

	use_stderr_log();
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return SL_EXIT_OK;
		case 't':
			to = optarg;
			break;
		default:
			usage(stderr);
			return SL_EXIT_USAGE;
		}
	}
	if (argc - optind < 2) {
		die_msg("land", "expected DATA_DIR and at least one FILE (see 'sluice land --help')");
		return SL_EXIT_USAGE;
	}
	if (to && leaves_in(to)) {
		die_msg("land", "--to '%s' leaves in/", to);
		return SL_EXIT_USAGE;
	}
	struct session ss;
	if ((rc = session_open("land", argv[optind], &ss)))
		return rc;
	for (int i = optind + 1; i < argc; i++) {
		rc = sl_land_local(ss.l, argv[i], to);
		if (rc == 0)
			continue;
		failed++;
		if (rc == EINVAL)
			die_msg("land", "cannot land '%s': a temporary name never lands", argv[i]);
		else if (rc == EEXIST)
			die_msg("land", "cannot land '%s': that name already exists in in/",
				argv[i]);
		else if (rc == EISDIR)
			die_msg("land", "cannot land '%s': it is a folder", argv[i]);
		else
			die_msg("land", "cannot land '%s': %s", argv[i], sl_strerror(rc));
	}
	session_close(&ss);
	return failed ? SL_EXIT_FAILURE : SL_EXIT_OK;
}
