/* SPDX-License-Identifier: MIT */
/* The sluice command: dispatches to cmd_<name>. */
#include <stdio.h>
#include <string.h>

#include "sluice-build.h"
#include "sluice.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"mount", cmd_mount, "mount a data dir and run its queries"},
	{"run", cmd_run, "run every query over what has landed, then exit (--available-now)"},
	{"land", cmd_land, "land local files into a data dir without a mount"},
	{"status", cmd_status, "show landing counters and queries (works while mounted)"},
	{"files", cmd_files, "show each landed file and what each query did with it"},
	{"check", cmd_check, "verify that the catalog and the blobs agree"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice <command> [options]\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'sluice <command> --help' describes a command; 'sluice --version' prints\n"
		   "the version.\n"
		   "Exit codes: 0 ok, 1 runtime failure, 2 misuse, 3 data dir in use,\n"
		   "4 not a sluice data dir or invalid config.\n");
}

int main(int argc, char **argv)
{
	const char *self = strrchr(argv[0], '/');

	self = self ? self + 1 : argv[0];
	/* the data commands: malloc on huge pages (thp.c) */
	if (!strcmp(self, "mount.sluice") ||
	    (argc >= 2 && (!strcmp(argv[1], "mount") || !strcmp(argv[1], "run"))))
		sl_thp_reexec(argv);
	if (!strcmp(self, "mount.sluice"))
		return cmd_mount_helper(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return SL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return SL_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		/* tests read "faults" here to know SLUICE_FAULT points are compiled in */
		printf("sluice %s%s\n", SLUICE_VERSION, SL_FAULTS ? " (faults)" : "");
		return SL_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "sluice: unknown command '%s' (see 'sluice --help')\n", argv[1]);
	return SL_EXIT_USAGE;
}
