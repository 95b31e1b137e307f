/* SPDX-License-Identifier: MIT */
/*
 * The FUSE layer's one entry point: mount DATA_DIR at a mountpoint and
 * serve until unmounted. tools/cmd-mount.c is its only caller.
 */
#ifndef SLUICE_FS_FS_H
#define SLUICE_FS_FS_H

#include <stdbool.h>

struct sl_fs_args {
	const char *datadir;
	const char *mountpoint; /* absolute, symlinks resolved */
	bool foreground;   /* -f: stay in the foreground, log to stderr */
	bool debug;        /* -d: libfuse's request trace */
	const char *opts;  /* -o list after sluice's own options were taken out */
	bool strict;       /* -o land=rename */
	const char *temp;  /* -o temp=GLOB:GLOB, NULL for the default */
	const char *spark_root; /* -o sparkroot=URI without a trailing '/', NULL: file:// */
};

/*
 * Mounts and serves until unmounted. Every error a user can cause (an
 * unknown option, a mount that fails) is reported on stderr before the
 * daemon detaches. Returns the process exit code: 0, 1 (runtime failure)
 * or 2 (misuse, e.g. an unknown -o option).
 */
int sl_fs_main(const struct sl_fs_args *args);

/* Prints libfuse's own option help (after sluice's). */
void sl_fs_print_help(void);

#endif
