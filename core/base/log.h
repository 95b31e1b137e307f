/* SPDX-License-Identifier: MIT */
/*
 * Logging: core never writes to stdout or stderr; it calls sl_log(), whose
 * handler the host installs (stderr in tools, syslog or stderr in fs/).
 */
#ifndef SLUICE_CORE_LOG_H
#define SLUICE_CORE_LOG_H

#include <stdarg.h>

enum sl_log_level { SL_LOG_ERR = 3, SL_LOG_WARNING = 4, SL_LOG_INFO = 6, SL_LOG_DEBUG = 7 };

typedef void (*sl_log_fn)(enum sl_log_level level, const char *msg, void *ctx);

/*
 * Installs the handler and the most verbose level it wants. Not thread-safe:
 * call before starting threads. fn NULL restores the default (stderr).
 */
void sl_log_set(sl_log_fn fn, enum sl_log_level max_level, void *ctx);

void sl_log(enum sl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
