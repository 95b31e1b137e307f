/* SPDX-License-Identifier: MIT */
/*
 * Triggers: the engine inside a mount (trigger.c), one thread per query,
 * woken by landings (sl_engine_wake, installed with sl_land_set_wakeup) or
 * its trigger's timer; each runs sl_engine_run_query() (engine.h).
 */
#ifndef SLUICE_CORE_TRIGGER_H
#define SLUICE_CORE_TRIGGER_H

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
/* Wakes every event-driven query: a file landed. ctx is the engine. */
void sl_engine_wake(void *ctx);

#endif
