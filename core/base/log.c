/* SPDX-License-Identifier: MIT */
/* The process-wide log sink that hosts install with sl_log_set(). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

static sl_console_fn console_fn;
static void *console_ctx;
static pthread_mutex_t console_mu = PTHREAD_MUTEX_INITIALIZER;

void sl_console_set(sl_console_fn fn, void *ctx)
{
	console_fn = fn;
	console_ctx = ctx;
}

void sl_console_write(const char *text, size_t len)
{
	pthread_mutex_lock(&console_mu);
	if (console_fn) {
		console_fn(text, len, console_ctx);
	} else {
		/* the log: a line at a time */
		for (size_t at = 0; at < len;) {
			const char *nl = memchr(text + at, '\n', len - at);
			size_t n = nl ? (size_t)(nl - text - at) : len - at;
			sl_log(SL_LOG_INFO, "%.*s", (int)n, text + at);
			at += n + 1;
		}
	}
	pthread_mutex_unlock(&console_mu);
}
