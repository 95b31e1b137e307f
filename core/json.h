/* SPDX-License-Identifier: MIT */
/*
 * JSON: the only user of jansson. Loads sluice.json and renders the JSON
 * files the mount shows.
 */
#ifndef SLUICE_CORE_JSON_H
#define SLUICE_CORE_JSON_H

#include <stddef.h>

#include "config.h"
#include "land.h"

/*
 * Loads and validates DATA_DIR/sluice.json; a missing file is an empty
 * config. Returns 0 with *out new (free it with sl_config_free), SL_ECONFIG
 * with one line in err starting with the field path (e.g.
 * "queries.dev.source.schema: unknown type 'NOTATYPE'"; a syntax error reads
 * "PATH:LINE:COLUMN: message"), or ENOMEM. Nothing is logged. Thread-safe.
 */
int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen);

/*
 * The same from the text of a sluice.json in memory (len bytes, no NUL
 * needed); origin names the document in syntax errors. For fuzzers, and for
 * re-reading the config a checkpoint was written with.
 */
int sl_config_parse(const char *text, size_t len, const char *origin, struct sl_config **out,
		    char *err, size_t errlen);

/* Renders status/landing.json into a new malloc'd string (*out, *len). */
int sl_json_landing(const struct sl_land_counters *c, char **out, size_t *len);

#endif
