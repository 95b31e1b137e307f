/* SPDX-License-Identifier: MIT */
/*
 * TIMESTAMP and DATE text forms: the strict ISO-like grammar of DESIGN §1
 * "Decoding" in, `2026-10-04T12:00:00.000Z` out. Calendar arithmetic is the
 * proleptic Gregorian one (Howard Hinnant's days_from_civil / civil_from_days).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "err.h"
#include "timestamp.h"

#define US_PER_SEC INT64_C(1000000)
#define US_PER_DAY (INT64_C(86400) * US_PER_SEC)

int64_t sl_timestamp_days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;				       /* [0, 399] */
	int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;	       /* [0, 146096] */
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static unsigned month_days(int64_t y, unsigned m)
{
	static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Reads exactly n digits at s[*i]; false when one is missing. */
static bool digits(const char *s, size_t len, size_t *i, unsigned n, unsigned *v)
{
	unsigned x = 0;

	if (len - *i < n)
		return false;
	for (unsigned k = 0; k < n; k++) {
		unsigned char c = (unsigned char)s[*i + k];
		if (c < '0' || c > '9')
			return false;
		x = x * 10 + (c - '0');
	}
	*i += n;
	*v = x;
	return true;
}

/* YYYY-MM-DD at s[*i]: the date's days since the epoch. */
static bool date_part(const char *s, size_t len, size_t *i, int64_t *days)
{
	unsigned y, m, d;

	if (!digits(s, len, i, 4, &y) || *i >= len || s[(*i)++] != '-' ||
	    !digits(s, len, i, 2, &m) || *i >= len || s[(*i)++] != '-' || !digits(s, len, i, 2, &d))
		return false;
	if (m < 1 || m > 12 || d < 1 || d > month_days(y, m))
		return false;
	*days = sl_timestamp_days_from_civil(y, m, d);
	return true;
}

int sl_date_parse(const char *s, size_t len, int32_t *days)
{
	size_t i = 0;
	int64_t v;

	if (!date_part(s, len, &i, &v) || i != len)
		return SL_EMALFORMED;
	*days = (int32_t)v;
	return 0;
}

int sl_timestamp_parse(const char *s, size_t len, int64_t *us)
{
	size_t i = 0;
	int64_t days, frac = 0, offset = 0;
	unsigned hh, mi, ss = 0;

	if (!date_part(s, len, &i, &days) || i >= len || (s[i] != 'T' && s[i] != ' '))
		return SL_EMALFORMED;
	i++;
	if (!digits(s, len, &i, 2, &hh) || i >= len || s[i++] != ':' ||
	    !digits(s, len, &i, 2, &mi) || hh > 23 || mi > 59)
		return SL_EMALFORMED;
	if (i < len && s[i] == ':') {
		i++;
		if (!digits(s, len, &i, 2, &ss) || ss > 59)
			return SL_EMALFORMED;
		if (i < len && s[i] == '.') {
			unsigned n = 0;
			i++;
			while (i < len && s[i] >= '0' && s[i] <= '9') {
				if (n < 6)
					frac = frac * 10 + (s[i] - '0');
				n++;
				i++;
			}
			if (n < 1 || n > 9)
				return SL_EMALFORMED;
			for (; n < 6; n++)
				frac *= 10;
		}
	}
	if (i < len && s[i] == 'Z') {
		i++;
	} else if (i < len && (s[i] == '+' || s[i] == '-')) {
		int sign = s[i++] == '-' ? -1 : 1;
		unsigned oh, om;
		if (!digits(s, len, &i, 2, &oh))
			return SL_EMALFORMED;
		if (i < len && s[i] == ':')
			i++;
		if (!digits(s, len, &i, 2, &om) || oh > 18 || om > 59)
			return SL_EMALFORMED;
		offset = sign * ((int64_t)oh * 3600 + om * 60) * US_PER_SEC;
	}
	if (i != len)
		return SL_EMALFORMED;
	/* years 0000-9999 keep this far inside int64 */
	*us = days * US_PER_DAY + ((int64_t)hh * 3600 + mi * 60 + ss) * US_PER_SEC + frac - offset;
	return 0;
}

static size_t format_date(int64_t days, char *buf)
{
	int64_t y;
	unsigned m, d;

	civil_from_days(days, &y, &m, &d);
	if (y >= 0 && y <= 9999)
		return (size_t)snprintf(buf, SL_TIMESTAMP_BUFSZ, "%04" PRId64 "-%02u-%02u", y, m,
					d);
	return (size_t)snprintf(buf, SL_TIMESTAMP_BUFSZ, "%+05" PRId64 "-%02u-%02u", y, m, d);
}

size_t sl_timestamp_format(int64_t us, char buf[SL_TIMESTAMP_BUFSZ])
{
	/* floor division, so that times before 1970 read forward */
	int64_t days = us / US_PER_DAY, rem = us % US_PER_DAY;
	if (rem < 0) {
		rem += US_PER_DAY;
		days--;
	}
	size_t n = format_date(days, buf);
	int64_t ms = rem / 1000, sec = ms / 1000;
	n += (size_t)snprintf(buf + n, SL_TIMESTAMP_BUFSZ - n, "T%02d:%02d:%02d.%03dZ",
			      (int)(sec / 3600), (int)(sec / 60 % 60), (int)(sec % 60),
			      (int)(ms % 1000));
	return n;
}

size_t sl_date_format(int32_t days, char buf[SL_TIMESTAMP_BUFSZ]) { return format_date(days, buf); }
