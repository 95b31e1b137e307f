/* SPDX-License-Identifier: MIT */
/* Helpers shared by the subcommands. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "datadir.h"
#include "err.h"
#include "config.h"
#include "land.h"
#include "log.h"
#include "sluice.h"

void die_msg(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sluice: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void log_line(enum sl_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "sluice: %s%s\n", level <= SL_LOG_ERR ? "error: " : "", msg);
}

/* The console sink's blocks: standard output, flushed whole. */
static void console_stdout(const char *text, size_t len, void *ctx)
{
	(void)ctx;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
}

void use_stderr_log(void)
{
	sl_log_set(log_line, SL_LOG_WARNING, NULL);
	sl_console_set(console_stdout, NULL);
}

int open_datadir(const char *cmd, const char *path, unsigned flags, struct sl_datadir **out,
		 struct sl_config **cfgp)
{
	struct sl_config *cfg;
	const char *what = NULL;
	char err[512];
	int rc;

	rc = sl_datadir_open(path, flags, out, &what);
	switch (rc) {
	case 0:
		break;
	case SL_ELOCKED:
		die_msg(cmd, "data dir '%s' is in use by another sluice process", path);
		return SL_EXIT_BUSY;
	case SL_ENOTSLUICE:
		die_msg(cmd, "'%s' is not a sluice data dir (it holds '%s')", path,
			what ? what : "?");
		return SL_EXIT_DATADIR;
	default:
		die_msg(cmd, "cannot open data dir '%s': %s", path, sl_strerror(rc));
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	rc = sl_config_load(path, &cfg, err, sizeof(err));
	if (rc) {
		if (rc == SL_ECONFIG)
			die_msg(cmd, "invalid config: %s", err);
		else
			die_msg(cmd, "cannot load config: %s", sl_strerror(rc));
		sl_datadir_close(*out);
		*out = NULL;
		return rc == SL_ECONFIG ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	if ((flags & SL_DATADIR_CREATE) && (rc = sl_datadir_create(*out))) {
		if (rc == SL_ECORRUPT || rc == SL_EVERSION)
			die_msg(cmd, "cannot open data dir '%s': %s", path, sl_strerror(rc));
		else
			die_msg(cmd, "cannot create data dir '%s': %s", path, sl_strerror(rc));
		sl_config_free(cfg);
		sl_datadir_close(*out);
		*out = NULL;
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	if (cfgp)
		*cfgp = cfg;
	else
		sl_config_free(cfg);
	return 0;
}

int datadir_arg(const char *cmd, int argc, char **argv, void (*usage)(FILE *f),
		const char **datadir)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return SL_EXIT_OK;
		}
		usage(stderr);
		return SL_EXIT_USAGE;
	}
	if (argc - optind != 1) {
		die_msg(cmd, "expected DATA_DIR (see 'sluice %s --help')", cmd);
		return SL_EXIT_USAGE;
	}
	*datadir = argv[optind];
	return -1;
}

int session_open(const char *cmd, const char *path, struct session *s)
{
	int rc;

	memset(s, 0, sizeof(*s));
	rc = open_datadir(cmd, path, SL_DATADIR_LOCK | SL_DATADIR_CREATE, &s->d, &s->cfg);
	if (rc)
		return rc;
	struct sl_land_opts lo = {.config = s->cfg};
	rc = sl_land_open(path, &lo, &s->l);
	if (rc) {
		die_msg(cmd, "cannot open catalog of '%s': %s", path, sl_strerror(rc));
		sl_config_free(s->cfg);
		sl_datadir_close(s->d);
		memset(s, 0, sizeof(*s));
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	return 0;
}

void session_close(struct session *s)
{
	sl_land_close(s->l);
	sl_config_free(s->cfg);
	sl_datadir_close(s->d);
	memset(s, 0, sizeof(*s));
}
