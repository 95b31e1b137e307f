/* SPDX-License-Identifier: MIT */
/*
 * Triggers: the engine inside a mount, one thread per query. Event-driven
 * (no trigger): run while the backlog is not empty, then sleep until a
 * landing wakes it (a query source: until a query commits; a socket source:
 * until its reader spools lines; another source that reads no files: until
 * its pollInterval); processingTime: one batch per interval; availableNow
 * and once: run at mount time, then finish. A FAILFAST query stops with its
 * lastError while the others go on; other errors retry with capped backoff.
 * The mount learns when every query's first run has returned
 * (sl_engine_started) and probes the engine for its watchdog (sl_engine_probe).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "trigger.h"
#include "err.h"
#include "land.h"
#include "log.h"
#include "source_socket.h"

#define BACKOFF_MAX_S 60

struct qthread {
	struct sl_engine *e;
	const struct sl_query_config *q;
	pthread_t thread;
	bool started;
	uint64_t spools;       /* spool commits of its socket reader (guarded by e->mu) */
};

struct sl_engine {
	struct sl_land *l;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t started_cv; /* nstarted grew (sl_engine_started waits on it) */
	uint64_t wakes;        /* landings so far (guarded by mu) */
	uint64_t commits;      /* runs that committed a batch (guarded by mu): wake query sources */
	size_t nstarted;       /* queries whose first run returned (guarded by mu) */
	atomic_bool stop;
	struct qthread *threads;
	size_t n;
};

static void deadline_in(struct timespec *ts, int64_t us)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += us / 1000000;
	ts->tv_nsec += (us % 1000000) * 1000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* What wakes a waiting query besides the stop and its timeout. */
enum wake_on { ON_NOTHING, ON_LANDING, ON_COMMIT, ON_SPOOL };

/* The count a query waiting on `on` compares with what it has seen. */
static uint64_t wake_count(const struct sl_engine *e, const struct qthread *t, enum wake_on on)
{
	return on == ON_COMMIT ? e->commits : on == ON_SPOOL ? t->spools : e->wakes;
}

/*
 * Sleeps until woken by what `on` names (a landing; another query's
 * commit; t's socket reader spooling lines), the stop, or us pass. *seen
 * is the count of those already seen.
 */
static void wait_for(struct sl_engine *e, struct qthread *t, uint64_t *seen, enum wake_on on,
		     int64_t us)
{
	struct timespec ts;

	pthread_mutex_lock(&e->mu);
	if (us > 0)
		deadline_in(&ts, us);
	while (!e->stop && !(on != ON_NOTHING && wake_count(e, t, on) != *seen)) {
		if (us > 0) {
			if (pthread_cond_timedwait(&e->cv, &e->mu, &ts) == ETIMEDOUT)
				break;
		} else {
			pthread_cond_wait(&e->cv, &e->mu);
		}
	}
	if (on != ON_NOTHING)
		*seen = wake_count(e, t, on);
	pthread_mutex_unlock(&e->mu);
}

/*
 * How long an idle query waits for new data before it runs again anyway,
 * so that parts its sink.retention age expires leave out/ without a new
 * batch (the run's start expires them): a twentieth of the age, between
 * 1 s and 60 s; 0 (until woken) without an age.
 */
static int64_t retention_tick(const struct sl_query_config *q)
{
	int64_t us = q->retention_age_us / 20;
	if (q->retention_age_us <= 0)
		return 0;
	return us < 1000000 ? 1000000 : us > 60000000 ? 60000000 : us;
}

/* A query committed a batch: a query source reading it may have work. */
static void committed(void *ctx)
{
	struct sl_engine *e = ctx;

	pthread_mutex_lock(&e->mu);
	e->commits++;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* A socket reader spooled lines: wakes its query. ctx is the query's thread. */
static void spool_wake(void *ctx)
{
	struct qthread *t = ctx;
	pthread_mutex_lock(&t->e->mu);
	t->spools++;
	pthread_cond_broadcast(&t->e->cv);
	pthread_mutex_unlock(&t->e->mu);
}

/* The query's first run returned: count it for sl_engine_started(). */
static void mark_started(struct sl_engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->nstarted++;
	pthread_cond_broadcast(&e->started_cv);
	pthread_mutex_unlock(&e->mu);
}

/* An idle process source's wait (sl_engine_limits.idle): its child stays up. */
struct idle {
	struct qthread *t;
	uint64_t *seen;
	bool *counted;
};

static bool idle_wait(void *ctx)
{
	struct idle *i = ctx;

	if (!*i->counted) {
		*i->counted = true;
		mark_started(i->t->e);
	}
	wait_for(i->t->e, i->t, i->seen, ON_NOTHING, i->t->q->source.poll_interval_us);
	return !i->t->e->stop;
}

static void *query_main(void *arg)
{
	struct qthread *t = arg;
	struct sl_engine *e = t->e;
	const struct sl_query_config *q = t->q;
	struct sl_engine_limits lim = {.seq_limit = UINT64_MAX, .stop = &e->stop,
				       .committed = committed, .committed_ctx = e};
	int64_t backoff_us = 1000000;
	bool counted = false;  /* in nstarted */
	uint64_t seen;
	bool sock = q->source.format == SL_SOURCE_SOCKET;
	enum wake_on on = SL_SOURCE_IS_FILE(q->source.format)	? ON_LANDING
			  : q->source.format == SL_SOURCE_QUERY ? ON_COMMIT
			  : sock				? ON_SPOOL
								: ON_NOTHING;

	pthread_mutex_lock(&e->mu);
	seen = wake_count(e, t, on);
	pthread_mutex_unlock(&e->mu);
	/*
	 * A socket query connects only when it runs on: availableNow and once
	 * drain what the spool holds, as `sluice run --available-now` does.
	 */
	if (sock && q->trigger != SL_TRIGGER_AVAILABLE_NOW && q->trigger != SL_TRIGGER_ONCE) {
		int rc = sl_socket_reader_start(e->l, q, spool_wake, t, &lim.reader);
		if (rc)
			sl_log(SL_LOG_ERR, "query '%s': cannot start its socket reader: %s", q->name,
			       sl_strerror(rc));
	}
	if (q->trigger == SL_TRIGGER_ONCE) {
		sl_log(SL_LOG_WARNING, "query '%s': trigger once is deprecated: use availableNow",
		       q->name);
		lim.max_batches = 1;
		lim.ignore_caps = true;
	}
	if (q->trigger == SL_TRIGGER_PROCESSING_TIME)
		lim.max_batches = 1;
	struct idle idle = {.t = t, .seen = &seen, .counted = &counted};
	if (q->trigger == SL_TRIGGER_NONE &&
	    (q->source.format == SL_SOURCE_PROCESS || q->source.format == SL_SOURCE_KAFKA)) {
		/*
		 * no respawn of the program (no new Kafka client) every
		 * pollInterval: the run waits, open
		 */
		lim.idle = idle_wait;
		lim.idle_ctx = &idle;
	}
	while (!e->stop) {
		struct sl_engine_report r = {.query = q->name};
		int rc = sl_engine_run_query(e->l, q, &lim, &r);

		if (!counted) {
			counted = true;
			mark_started(e);
		}
		if (rc == ECANCELED)
			break; /* the unmount abandoned the batch: it replays at the next start */
		if (rc == SL_EMALFORMED || rc == ENOTSUP || rc == SL_ECONFIG || rc == SL_EDATALOSS) {
			/* stopped: lastError stays until a change the checkpoint survives */
			sl_log(SL_LOG_ERR, "query '%s' stopped: %s", q->name, r.error);
			break;
		}
		if (rc) {
			sl_log(SL_LOG_ERR, "query '%s': %s (retrying in %lld s)", q->name, r.error,
			       (long long)(backoff_us / 1000000));
			wait_for(e, t, &seen, ON_NOTHING, backoff_us);
			if (backoff_us < BACKOFF_MAX_S * 1000000ll)
				backoff_us *= 2;
			continue;
		}
		backoff_us = 1000000;
		if (q->trigger == SL_TRIGGER_AVAILABLE_NOW || q->trigger == SL_TRIGGER_ONCE)
			break; /* ran at mount time: finished */
		if (q->trigger == SL_TRIGGER_PROCESSING_TIME)
			wait_for(e, t, &seen, ON_NOTHING,
				 q->trigger_interval_us > 0 ? q->trigger_interval_us : 1);
		else if (SL_SOURCE_IS_FILE(q->source.format))
			wait_for(e, t, &seen, ON_LANDING, retention_tick(q));
		else if (on != ON_NOTHING) /* its upstream's commit, or its reader's spool */
			wait_for(e, t, &seen, on, retention_tick(q));
		else /* no landing wakes it: ask the source again every pollInterval */
			wait_for(e, t, &seen, ON_NOTHING, q->source.poll_interval_us);
	}
	sl_socket_reader_stop(lim.reader);
	return NULL;
}

void sl_engine_wake(void *ctx)
{
	struct sl_engine *e = ctx;
	pthread_mutex_lock(&e->mu);
	e->wakes++;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* Starts one thread per query of cfg; e->threads is empty, e->stop false. */
static int start_threads(struct sl_engine *e, const struct sl_config *cfg)
{
	size_t n = sl_config_nqueries(cfg);
	struct qthread *threads = calloc(n ? n : 1, sizeof(*threads));
	int rc = 0;

	if (!threads)
		return ENOMEM;
	pthread_mutex_lock(&e->mu);
	e->threads = threads;
	e->n = n;
	e->nstarted = 0;
	pthread_mutex_unlock(&e->mu);
	for (size_t k = 0; k < n && rc == 0; k++) {
		threads[k].e = e;
		threads[k].q = sl_config_query(cfg, k);
		rc = pthread_create(&threads[k].thread, NULL, query_main, &threads[k]);
		threads[k].started = rc == 0;
	}
	return rc;
}

/* Stops and joins the query threads; e stays, with no query. */
static void stop_threads(struct sl_engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->cv);
	pthread_cond_broadcast(&e->started_cv);
	pthread_mutex_unlock(&e->mu);
	for (size_t k = 0; k < e->n; k++)
		if (e->threads[k].started)
			pthread_join(e->threads[k].thread, NULL);
	pthread_mutex_lock(&e->mu);
	free(e->threads);
	e->threads = NULL;
	e->n = e->nstarted = 0;
	pthread_mutex_unlock(&e->mu);
}

int sl_engine_start(struct sl_land *l, const struct sl_config *cfg, struct sl_engine **out)
{
	struct sl_engine *e = calloc(1, sizeof(*e));
	int rc;

	if (!e)
		return ENOMEM;
	e->l = l;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&e->cv, &ca);
	pthread_cond_init(&e->started_cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = start_threads(e, cfg))) {
		sl_engine_stop(e);
		return rc;
	}
	*out = e;
	return 0;
}

void sl_engine_halt(struct sl_engine *e)
{
	stop_threads(e);
}

int sl_engine_resume(struct sl_engine *e, const struct sl_config *cfg)
{
	int rc;

	pthread_mutex_lock(&e->mu);
	e->stop = false;
	pthread_mutex_unlock(&e->mu);
	if ((rc = start_threads(e, cfg)))
		stop_threads(e); /* all or nothing: the caller says why */
	return rc;
}

size_t sl_engine_started(struct sl_engine *e, int64_t wait_us, size_t *total)
{
	struct timespec ts;
	size_t n;

	pthread_mutex_lock(&e->mu);
	if (wait_us > 0)
		deadline_in(&ts, wait_us);
	while (wait_us > 0 && !e->stop && e->nstarted < e->n)
		if (pthread_cond_timedwait(&e->started_cv, &e->mu, &ts) == ETIMEDOUT)
			break;
	n = e->nstarted;
	*total = e->n;
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* Writes nothing: the probe only needs the commit thread to answer. */
static int probe_apply(struct sl_txn *t, void *arg)
{
	(void)t, (void)arg;
	return 0;
}

int sl_engine_probe(struct sl_engine *e)
{
	/* a thread that never lets go of the engine's lock wedges every query */
	pthread_mutex_lock(&e->mu);
	pthread_mutex_unlock(&e->mu);
	return sl_catalog_write(sl_land_catalog(e->l), probe_apply, NULL);
}

void sl_engine_stop(struct sl_engine *e)
{
	if (!e)
		return;
	stop_threads(e);
	pthread_cond_destroy(&e->started_cv);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}
