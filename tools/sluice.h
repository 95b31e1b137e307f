/* SPDX-License-Identifier: MIT */
/* What the subcommands share: exit codes and data dir opening. */
#ifndef SLUICE_TOOLS_SLUICE_H
#define SLUICE_TOOLS_SLUICE_H

#include <stdio.h>

struct sl_datadir;

/* Exit codes, shared by every command (DESIGN §1). */
enum sl_exit {
	SL_EXIT_OK = 0,
	SL_EXIT_FAILURE = 1, /* a runtime failure: a file or a query failed */
	SL_EXIT_USAGE = 2,   /* misuse */
	SL_EXIT_BUSY = 3,    /* the data dir is in use */
	SL_EXIT_DATADIR = 4, /* not a sluice data dir, or an invalid config */
};

int cmd_mount(int argc, char **argv);
int cmd_mount_helper(int argc, char **argv); /* called as mount.sluice */
int cmd_land(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_files(int argc, char **argv);
/*
 * Starts the process again, once, with glibc's malloc on transparent huge
 * pages (thp.c); returns when it does not (SLUICE_THP=0, no THP, or after
 * the restart, with the user's environment put back). Call first in main.
 */
void sl_thp_reexec(char **argv);

/* Prints "sluice: <cmd>: <message>" on stderr. */
void die_msg(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The arguments of a command that takes only --help and DATA_DIR: -1 with
 * *datadir set, or the exit code to return (0 after --help, misuse).
 */
int datadir_arg(const char *cmd, int argc, char **argv, void (*usage)(FILE *f),
		const char **datadir);

struct sl_config;

/*
 * Opens (locking, creating) a data dir and loads its sluice.json into *cfg
 * (new: sl_config_free; cfg may be NULL to only validate). Returns 0 or an
 * exit code, having printed one line.
 */
int open_datadir(const char *cmd, const char *path, unsigned flags, struct sl_datadir **out,
		 struct sl_config **cfg);

struct sl_land;

/* A data dir opened for work: locked, its config loaded, its catalog open. */
struct session {
	struct sl_datadir *d;
	struct sl_config *cfg;
	struct sl_land *l;
};

/*
 * Opens (locking, creating) the data dir, loads its config and opens its
 * catalog (recovering). Returns 0 or an exit code, having printed one line.
 */
int session_open(const char *cmd, const char *path, struct session *s);
void session_close(struct session *s);

/* Installs the stderr log handler for core. */
void use_stderr_log(void);

#endif
