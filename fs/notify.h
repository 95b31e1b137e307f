/* SPDX-License-Identifier: MIT */
/*
 * systemd's service protocol for the mount (sd_notify(3), Type=notify-reload):
 * READY=1 once the mount answers and every query has started, WATCHDOG=1
 * while the engine answers a probe, RELOADING=1 ... READY=1 around a reload
 * of sluice.json, STOPPING=1 when the unmount begins.
 * Without NOTIFY_SOCKET in the environment nothing is sent and no thread
 * runs; built without libsystemd (-Dsystemd=disabled) every call is a no-op.
 */
#ifndef SLUICE_FS_NOTIFY_H
#define SLUICE_FS_NOTIFY_H

#include <stdbool.h>

struct sl_engine;
struct sl_notify;

/*
 * 0 with *out new (end with sl_notify_close) when systemd asked for
 * notifications (NOTIFY_SOCKET is set), 0 with *out NULL when it did not
 * (then every other call is a no-op), ENOMEM. Call after the fork of
 * fuse_daemonize(): the messages name the process that sends them.
 */
int sl_notify_open(struct sl_notify **out);

/*
 * Starts the thread that sends READY=1 once statfs(mountpoint) answers from
 * this FUSE mount (so the kernel has our INIT reply) and sl_engine_started()
 * counts every query, then WATCHDOG=1 every half WATCHDOG_USEC after each
 * sl_engine_probe() of e returned. mountpoint and e are borrowed until
 * sl_notify_close(). 0 or an errno (n NULL: 0). Call once.
 */
int sl_notify_start(struct sl_notify *n, const char *mountpoint, struct sl_engine *e);

/*
 * A reload of sluice.json (Type=notify-reload): RELOADING=1 with
 * MONOTONIC_USEC when it begins, READY=1 with a STATUS= line (status,
 * borrowed for the call) when it ended, taken or refused. Nothing is sent
 * before the first READY=1: a reload then is part of the start. NULL ok.
 */
void sl_notify_reloading(struct sl_notify *n);
void sl_notify_reloaded(struct sl_notify *n, const char *status);

/* Sends STOPPING=1: the unmount has begun. NULL ok. */
void sl_notify_stopping(struct sl_notify *n);

/* Stops and joins the thread (before e stops), then frees n. NULL ok. */
void sl_notify_close(struct sl_notify *n);

/*
 * True when stderr is connected to the journal (JOURNAL_STREAM names its
 * device and inode, systemd.exec(5)): log lines then start with their
 * priority, "<3>" for errors (sd-daemon(3)), which journald strips and keeps.
 */
bool sl_notify_stderr_is_journal(void);

#endif
