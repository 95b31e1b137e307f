/* SPDX-License-Identifier: MIT */
/*
 * Triggers: the engine inside a mount (trigger.c), one thread per query,
 * woken by landings (sl_engine_wake, installed with sl_land_set_wakeup) or
 * its trigger's timer; each runs sl_engine_run_query() (engine.h).
 */
#ifndef SLUICE_CORE_TRIGGER_H
#define SLUICE_CORE_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

struct sl_config;
struct sl_land;
struct sl_engine;

/*
 * Starts one thread per query of cfg. l and cfg are borrowed until
 * sl_engine_stop(). 0 with *out new (end with sl_engine_stop), or an error.
 */
int sl_engine_start(struct sl_land *l, const struct sl_config *cfg, struct sl_engine **out);
/* Stops the threads after their current batch, and frees e. NULL ok. */
void sl_engine_stop(struct sl_engine *e);
/*
 * A reload: halt stops the query threads as sl_engine_stop() does (a batch
 * in progress is abandoned and replays), keeping e; resume starts one
 * thread per query of cfg (borrowed until the next halt or stop). Landings
 * meanwhile are not lost: a query's first run plans its whole backlog.
 * resume: 0, or an error with no query running. The caller serializes
 * them; other calls on e stay valid throughout.
 */
void sl_engine_halt(struct sl_engine *e);
int sl_engine_resume(struct sl_engine *e, const struct sl_config *cfg);
/* Wakes every event-driven query: a file landed. ctx is the engine. */
void sl_engine_wake(void *ctx);

/*
 * How many of e's queries have started, after waiting up to wait_us (<= 0:
 * no wait) for all of them; *total is how many there are. A query has
 * started when the first sl_engine_run_query() of its thread returned: it
 * opened its checkpoint and ran what it found (its backlog at mount time,
 * one batch under processingTime), or failed with its lastError recorded.
 * The wait ends early when the engine stops. Any thread, until
 * sl_engine_stop(). The mount's systemd READY=1 waits for this (fs/notify.c).
 */
size_t sl_engine_started(struct sl_engine *e, int64_t wait_us, size_t *total);

/*
 * Liveness probe for a watchdog: takes the engine's lock, then waits for a
 * round trip through the catalog's commit thread (a request that writes
 * nothing), which every batch commit and every landing goes through. It
 * returns once both answered, with the write's result (an error such as
 * ENOSPC still means they answered), and blocks for as long as either is
 * wedged. It does not see a query thread stuck outside its commits (a
 * decode that never ends). Any thread, until sl_engine_stop().
 */
int sl_engine_probe(struct sl_engine *e);

#endif
