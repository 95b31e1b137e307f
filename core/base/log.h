/* SPDX-License-Identifier: MIT */
/*
 * Logging: core never writes to stdout or stderr; it calls sl_log(), whose
 * handler the host installs (stderr in tools, syslog or stderr in fs/).
 */
#ifndef SLUICE_CORE_LOG_H
#define SLUICE_CORE_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum sl_log_level { SL_LOG_ERR = 3, SL_LOG_WARNING = 4, SL_LOG_INFO = 6, SL_LOG_DEBUG = 7 };

typedef void (*sl_log_fn)(enum sl_log_level level, const char *msg, void *ctx);

/*
 * Installs the handler and the most verbose level it wants. Not thread-safe:
 * call before starting threads. fn NULL restores the default (stderr).
 */
void sl_log_set(sl_log_fn fn, enum sl_log_level max_level, void *ctx);

void sl_log(enum sl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The console sink's text (Spark's "Batch: N" blocks). The host decides
 * where it goes (tools: standard output of `sluice run` and of a foreground
 * mount); without a handler each line is logged at SL_LOG_INFO. Installed
 * like sl_log_set(); sl_console_write() is thread-safe and hands each call's
 * text over whole, so that two queries' blocks never interleave.
 */
typedef void (*sl_console_fn)(const char *text, size_t len, void *ctx);
void sl_console_set(sl_console_fn fn, void *ctx);
void sl_console_write(const char *text, size_t len);

#endif
