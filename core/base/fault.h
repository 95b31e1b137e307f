/* SPDX-License-Identifier: MIT */
/*
 * Fault points, compiled to nothing unless the build sets -Dfaults=true:
 * - SL_FAULT("name"): SLUICE_FAULT="name:N" makes the process _exit(86) at
 *   the Nth pass of that point;
 * - SL_FAULT_ERR("name"): SLUICE_FAULT_ERR="name:N:ERRNO" (ERRNO a name such
 *   as ENOSPC, or a number) makes the Nth pass return that errno, which the
 *   caller treats as the failure of the call it guards (a write, an fsync,
 *   a commit); every other pass returns 0;
 * - SL_FAULT_SIZE("name", dflt): SLUICE_FAULT_SIZE="name:N[,name:N...]"
 *   makes a size N instead of dflt (a piece size small enough for a test
 *   to reach every boundary); dflt in builds without fault points.
 */
#ifndef SLUICE_CORE_FAULT_H
#define SLUICE_CORE_FAULT_H

#include "sluice-build.h"

#if SL_FAULTS
#include <stddef.h>
void sl_fault_hit(const char *name);
int sl_fault_err(const char *name);
size_t sl_fault_size(const char *name, size_t dflt);
#define SL_FAULT(name) sl_fault_hit(name)
#define SL_FAULT_ERR(name) sl_fault_err(name)
#define SL_FAULT_SIZE(name, dflt) sl_fault_size(name, dflt)
#else
#define SL_FAULT(name) ((void)0)
#define SL_FAULT_ERR(name) 0
#define SL_FAULT_SIZE(name, dflt) (dflt)
#endif

#endif
