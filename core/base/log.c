/* SPDX-License-Identifier: MIT */
/* The process-wide log sink that hosts install with sl_log_set(). */
#include <stdio.h>

#include "log.h"

/*
 * The one piece of process-wide state in core besides fault points: the log
 * handler belongs to the host process, like libfuse's fuse_set_log_func().
 */
static sl_log_fn log_fn;
static void *log_ctx;
static enum sl_log_level log_max = SL_LOG_WARNING;

void sl_log_set(sl_log_fn fn, enum sl_log_level max_level, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
	log_max = max_level;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, buf, log_ctx);
	else
		fprintf(stderr, "sluice: %s\n", buf);
}
