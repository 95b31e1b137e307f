/* SPDX-License-Identifier: MIT */
/*
 * The file source: which landed files a query reads (path matching, at
 * landing time), and (later) planning batches from the query's index.
 */
#ifndef SLUICE_CORE_SOURCE_H
#define SLUICE_CORE_SOURCE_H

#include <stdbool.h>

#include "config.h"

/*
 * Whether the landed file at relpath (relative to in/, '/'-separated) is
 * read by a query whose path is pattern. The pattern's components match the
 * file's leading components with fnmatch(3) (FNM_PATHNAME | FNM_PERIOD);
 * then come any number of `key=value` folders and the file name; or the
 * pattern names the file itself (its last component matching the name). A
 * component starting with '.', or with '_' and holding no '=', is never
 * read (e.g. _SUCCESS, _temporary/).
 */
bool sl_source_match(const struct sl_path *pattern, const char *relpath);

#endif
