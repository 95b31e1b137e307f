/* SPDX-License-Identifier: MIT */
/*
 * The outcome of a mount's last config load (at mount, or a reload on
 * SIGHUP), kept in DATA_DIR/config-reload for `sluice status` and the
 * metrics: when the config last loaded, and the error of a refused reload
 * while the old config runs.
 */
#ifndef SLUICE_CORE_CONFIG_RELOAD_H
#define SLUICE_CORE_CONFIG_RELOAD_H

#include <stdint.h>

#define SL_RELOAD_FILE "config-reload"
#define SL_RELOAD_TEMP "config-reload.tmp"

struct sl_reload_state {
	int64_t ok_ms;	   /* CLOCK_REALTIME ms of the last load that took effect */
	char refused[512]; /* the last reload's refusal, "" when it took effect */
};

/*
 * Writes s to DATA_DIR/config-reload (a temp file, fsync, rename, fsync of
 * the folder). 0 or an errno. Any thread.
 *
 * The file: line 1 ok_ms in decimal; line 2, when a reload was refused,
 * its error (one line).
 */
int sl_reload_write(const char *datadir, const struct sl_reload_state *s);

/* Reads it: 0, SL_NOTFOUND (no mount since reloads existed), or an errno. */
int sl_reload_read(const char *datadir, struct sl_reload_state *out);

#endif
