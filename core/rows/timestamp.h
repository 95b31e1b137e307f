/* SPDX-License-Identifier: MIT */
/*
 * TIMESTAMP and DATE values: parsing the text forms sources carry and
 * formatting the ISO form sinks write. Pure functions, thread-safe.
 */
#ifndef SLUICE_CORE_TIMESTAMP_H
#define SLUICE_CORE_TIMESTAMP_H

#include <stddef.h>
#include <stdint.h>

#define SL_TIMESTAMP_BUFSZ 32 /* enough for sl_timestamp_format() of any int64 */

/*
 * Parses `YYYY-MM-DD[T| ]hh:mm[:ss[.f]][Z|+hh[:]mm|-hh[:]mm]` (len bytes, no
 * NUL needed) into microseconds since the epoch, UTC. No zone means UTC; the
 * fraction has 1 to 9 digits and is truncated to microseconds; the month,
 * day (leap years included), hour 00-23, minute and second 00-59 and the
 * offset (hours 00-18, minutes 00-59) are range-checked; nothing may follow.
 * Returns 0, or SL_EMALFORMED with *us untouched.
 */
int sl_timestamp_parse(const char *s, size_t len, int64_t *us);

/* Parses `YYYY-MM-DD` into days since 1970-01-01. Returns 0 or SL_EMALFORMED. */
int sl_date_parse(const char *s, size_t len, int32_t *days);

/*
 * Writes us as `2026-10-04T12:00:00.000Z` (UTC, milliseconds truncated
 * toward minus infinity) and a NUL into buf; years outside 0000-9999 get a
 * sign and as many digits as they need. Returns the length without the NUL.
 */
size_t sl_timestamp_format(int64_t us, char buf[SL_TIMESTAMP_BUFSZ]);

/* Writes days since the epoch as `2026-10-04` and a NUL. Returns the length. */
size_t sl_date_format(int32_t days, char buf[SL_TIMESTAMP_BUFSZ]);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1-12, day 1-31). */
int64_t sl_timestamp_days_from_civil(int64_t y, unsigned m, unsigned d);

#endif
