/* SPDX-License-Identifier: MIT */
/*
 * systemd's service protocol for the mount (notify.h): one thread that says
 * READY=1 when the mount answers and every query has started, then pings the
 * watchdog after each probe of the engine. libsystemd's sd_notify() does the
 * sending; a build without it (-Dsystemd=disabled) compiles the sends out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "sluice-build.h"
#if SL_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "log.h"
#include "notify.h"
#include "trigger.h"

#define FUSE_MAGIC 0x65735546       /* statfs f_type of every FUSE mount */
#define POLL_US 20000               /* between two looks at the mountpoint */
#define START_TICK_US 1000000       /* between two "still starting" messages */
#define START_EXTEND_US 5000000     /* EXTEND_TIMEOUT_USEC each tick promises */

struct sl_notify {
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* stop was set */
	bool stop;                 /* guarded by mu: close asks the thread to end */
	bool running;              /* the thread was created (joined at close) */
	pthread_t thread;
	const char *mountpoint;    /* borrowed from the mount's args */
	struct sl_engine *e;       /* borrowed until close */
	uint64_t watchdog_us;      /* WATCHDOG_USEC for this process; 0: none */
	bool ready;                /* guarded by mu: READY=1 was sent */
};

#if SL_HAVE_SYSTEMD
static void send_text(const char *text)
{
	/* a lost message is systemd's to time out on: nothing to do here */
	(void)sd_notify(0, text);
}

static uint64_t watchdog_interval(void)
{
	uint64_t us = 0;
	/* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is us */
	return sd_watchdog_enabled(0, &us) > 0 ? us : 0;
}
#else
static void send_text(const char *text)
{
	(void)text;
}

static uint64_t watchdog_interval(void)
{
	return 0;
}
#endif

static void send_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* send_text() of a printf format; the messages are short lines of ours. */
static void send_fmt(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len >= 0 && (size_t)len < sizeof(buf))
		send_text(buf);
}

/* Sleeps us, or less when close asks the thread to end; true when it did. */
static bool sleep_for(struct sl_notify *n, int64_t us)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += us / 1000000;
	ts.tv_nsec += (us % 1000000) * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&n->mu);
	while (!n->stop)
		if (pthread_cond_timedwait(&n->cv, &n->mu, &ts) == ETIMEDOUT)
			break;
	stop = n->stop;
	pthread_mutex_unlock(&n->mu);
	return stop;
}

/*
 * Waits until the mountpoint answers as a FUSE mount. statfs always reaches
 * the daemon, and the kernel holds it until our INIT reply: when it returns
 * FUSE's magic, the mount serves requests. False when close came first.
 */
static bool wait_mounted(struct sl_notify *n)
{
	struct statfs sfs;

	for (;;) {
		if (statfs(n->mountpoint, &sfs) == 0 && sfs.f_type == FUSE_MAGIC)
			return true;
		if (sleep_for(n, POLL_US))
			return false;
	}
}

/*
 * Waits until every query has started (sl_engine_started). A first run over
 * a big backlog can outlast TimeoutStartSec=, so each second the engine
 * answers a probe extends the start timeout (EXTEND_TIMEOUT_USEC): a start
 * that progresses goes on, a wedged one still times out.
 */
static bool wait_started(struct sl_notify *n, size_t *total)
{
	size_t k, last = SIZE_MAX;

	while ((k = sl_engine_started(n->e, START_TICK_US, total)) < *total) {
		pthread_mutex_lock(&n->mu);
		bool stop = n->stop;
		pthread_mutex_unlock(&n->mu);
		if (stop)
			return false;
		(void)sl_engine_probe(n->e);
		if (k != last)
			send_fmt("STATUS=starting: %zu of %zu queries started", k, *total);
		last = k;
		send_fmt("EXTEND_TIMEOUT_USEC=%d", START_EXTEND_US);
	}
	return true;
}

static void *notify_main(void *arg)
{
	struct sl_notify *n = arg;
	size_t total = 0;

	/* named, so that ps -T and the tests can tell it is there */
	(void)pthread_setname_np(pthread_self(), "sl-notify");
	if (!wait_mounted(n) || !wait_started(n, &total))
		return NULL;
	pthread_mutex_lock(&n->mu);
	send_fmt("READY=1\nSTATUS=mounted, %zu queries started", total);
	n->ready = true;
	pthread_mutex_unlock(&n->mu);
	if (!n->watchdog_us)
		return NULL;
	/* half the interval, as sd_watchdog_enabled(3) advises */
	while (!sleep_for(n, (int64_t)(n->watchdog_us / 2))) {
		(void)sl_engine_probe(n->e); /* blocks while the engine is wedged */
		send_text("WATCHDOG=1");
	}
	return NULL;
}

int sl_notify_open(struct sl_notify **out)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	struct sl_notify *n;

	*out = NULL;
	if (!sock || !*sock)
		return 0;
	if (!SL_HAVE_SYSTEMD) {
		sl_log(SL_LOG_WARNING,
		       "NOTIFY_SOCKET is set but sluice was built without libsystemd: "
		       "no READY=1 will be sent");
		return 0;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return ENOMEM;
	pthread_mutex_init(&n->mu, NULL);
	pthread_cond_init(&n->cv, NULL);
	n->watchdog_us = watchdog_interval();
	*out = n;
	return 0;
}

int sl_notify_start(struct sl_notify *n, const char *mountpoint, struct sl_engine *e)
{
	int rc;

	if (!n)
		return 0;
	n->mountpoint = mountpoint;
	n->e = e;
	rc = pthread_create(&n->thread, NULL, notify_main, n);
	n->running = rc == 0;
	return rc;
}

void sl_notify_reloading(struct sl_notify *n)
{
	struct timespec ts;

	if (!n)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&n->mu);
	if (n->ready) /* a reload before READY=1 is part of the start */
		send_fmt("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading sluice.json",
			 (unsigned long long)ts.tv_sec * 1000000ull +
				 (unsigned long long)ts.tv_nsec / 1000);
	pthread_mutex_unlock(&n->mu);
}

void sl_notify_reloaded(struct sl_notify *n, const char *status)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	if (n->ready)
		send_fmt("READY=1\nSTATUS=%s", status);
	pthread_mutex_unlock(&n->mu);
}

void sl_notify_stopping(struct sl_notify *n)
{
	if (n)
		send_text("STOPPING=1\nSTATUS=unmounting");
}

void sl_notify_close(struct sl_notify *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	n->stop = true;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
	if (n->running)
		pthread_join(n->thread, NULL);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}

bool sl_notify_stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char *end;

	if (!js || !*js)
		return false;
	/* "DEVICE:INODE" of the stream systemd connected (systemd.exec(5)) */
	errno = 0;
	dev = strtoull(js, &end, 10);
	if (errno || *end != ':')
		return false;
	ino = strtoull(end + 1, &end, 10);
	if (errno || *end)
		return false;
	if (fstat(STDERR_FILENO, &st))
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}
