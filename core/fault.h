/* SPDX-License-Identifier: MIT */
/*
 * Fault points: SL_FAULT("name") compiles to nothing unless the build sets
 * -Dfaults=true. Then SLUICE_FAULT="name:N" makes the process _exit(86) at
 * the Nth pass of that point.
 */
#ifndef SLUICE_CORE_FAULT_H
#define SLUICE_CORE_FAULT_H

#include "sluice-build.h"

#if SL_FAULTS
void sl_fault_hit(const char *name);
#define SL_FAULT(name) sl_fault_hit(name)
#else
#define SL_FAULT(name) ((void)0)
#endif

#endif
