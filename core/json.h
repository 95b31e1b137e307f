/* SPDX-License-Identifier: MIT */
/*
 * JSON: the only user of jansson. Loads sluice.json and renders the JSON
 * files the mount shows.
 */
#ifndef SLUICE_CORE_JSON_H
#define SLUICE_CORE_JSON_H

#include <stddef.h>

#include "land.h"

struct sl_config;

/*
 * Loads and validates DATA_DIR/sluice.json (a missing file is an empty
 * config). On SL_ECONFIG, err holds one line naming the field.
 */
int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen);
void sl_config_free(struct sl_config *c);
/* Number of queries, and the name of query i (borrowed until free). */
size_t sl_config_nqueries(const struct sl_config *c);
const char *sl_config_query_name(const struct sl_config *c, size_t i);

/* Renders status/landing.json into a new malloc'd string (*out, *len). */
int sl_json_landing(const struct sl_land_counters *c, char **out, size_t *len);

#endif
