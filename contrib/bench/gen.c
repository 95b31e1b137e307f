// SPDX-License-Identifier: MIT
/*
 * gen: the event generator of contrib/bench/run (B3, B4, B9).
 * Writes N JSON Lines events to stdout, the same bytes for the same
 * arguments (fixed seed, no clock, no locale):
 *
 *   {"event_id":"e0000000042-9f3a","user_id":"u01234",
 *    "amount_cents":12345,"event_time":"2026-10-04T00:00:00.840Z",
 *    "device":{"os":"android","app":{"ver":"3.14.2"}},
 *    "tags":["promo","web"]}
 *
 * - event_id: unique per event; ~5% of the lines re-send an event among the
 *   last 4,096 sent, byte for byte (same event_id, same event_time);
 * - user_id: one of 50,000 keys, uniformly;
 * - amount_cents: 1..999,999 (BIGINT);
 * - event_time: ISO-8601 UTC with milliseconds, advancing RATE events per
 *   second of event time from START, with +-2 s of jitter; ~1% of the events
 *   are late by up to 40 minutes;
 * - device (a nested object) and tags (an array): columns the benchmark's
 *   schema does not name.
 * 1,000,000 lines are about 176 MB.
 *
 * Build: cc -O2 -o gen gen.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 4096      /* re-sends pick among the last RING events sent */
#define USERS 50000    /* distinct user_id values */
#define LINE_MAX 512

static uint64_t rng_state;

/* splitmix64: small, fast, and the same everywhere */
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [0, n) (the modulo bias is irrelevant here) */
static uint64_t below(uint64_t n)
{
	return rnd() % n;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gen [-s SEED] [-r RATE] [-t START] N\n"
		"\n"
		"Writes N JSON Lines events to stdout (see the comment at the top of gen.c).\n"
		"  -s SEED   PRNG seed (default 2026)\n"
		"  -r RATE   events per second of event time (default 50: 1,000,000 events\n"
		"            span about 5.6 hours)\n"
		"  -t START  event time of the first event, epoch seconds (default\n"
		"            1791072000, 2026-10-04T00:00:00Z)\n");
}

/* Formats epoch milliseconds as 2026-10-04T00:00:00.840Z. */
static int fmt_time(char *buf, size_t len, int64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
			tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			(int)(ms % 1000));
}

int main(int argc, char **argv)
{
	static const char *const os[] = {"android", "ios", "linux", "windows", "macos"};
	static const char *const tag[] = {"promo", "web", "mobile", "retry", "gift", "eu", "us"};
	static char ring[RING][LINE_MAX];
	static int ring_len[RING];
	uint64_t seed = 2026, n, sent = 0;
	double rate = 50;
	int64_t start = 1791072000;
	int c;

	while ((c = getopt(argc, argv, "s:r:t:h")) != -1) {
		switch (c) {
		case 's':
			seed = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			rate = strtod(optarg, NULL);
			break;
		case 't':
			start = strtoll(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 1 || !(rate > 0)) {
		usage(stderr);
		return 2;
	}
	n = strtoull(argv[optind], NULL, 10);
	rng_state = seed;

	static char obuf[1 << 20];
	setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));

	for (uint64_t i = 0; i < n; i++) {
		if (sent > 0 && below(100) < 5) {
			/* a re-send of a recent event, byte for byte */
			uint64_t k = sent - 1 - below(sent < RING ? sent : RING);
			fwrite(ring[k % RING], 1, (size_t)ring_len[k % RING], stdout);
			continue;
		}
		char ts[64], line[LINE_MAX];
		int64_t ms = start * 1000 + (int64_t)((double)i * 1000.0 / rate);
		ms += (int64_t)below(4001) - 2000; /* +-2 s of jitter */
		if (below(100) == 0)
			ms -= (int64_t)below(40 * 60 * 1000 + 1); /* late by up to 40 min */
		fmt_time(ts, sizeof(ts), ms);
		uint64_t r = rnd();
		int ntags = (int)(r % 3), len;
		len = snprintf(line, sizeof(line),
			       "{\"event_id\":\"e%010" PRIu64 "-%04x\",\"user_id\":\"u%05u\","
			       "\"amount_cents\":%" PRIu64 ",\"event_time\":\"%s\","
			       "\"device\":{\"os\":\"%s\",\"app\":{\"ver\":\"%u.%u.%u\"}},\"tags\":[",
			       sent, (unsigned)((r >> 8) & 0xffff), (unsigned)below(USERS),
			       1 + below(999999), ts, os[(r >> 24) % 5], (unsigned)((r >> 40) % 5),
			       (unsigned)((r >> 44) % 20), (unsigned)((r >> 48) % 10));
		for (int t = 0; t < ntags; t++)
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s\"%s\"",
					t ? "," : "", tag[below(7)]);
		len += snprintf(line + len, sizeof(line) - (size_t)len, "]}\n");
		memcpy(ring[sent % RING], line, (size_t)len);
		ring_len[sent % RING] = len;
		sent++;
		fwrite(line, 1, (size_t)len, stdout);
	}
	if (fflush(stdout) || ferror(stdout)) {
		perror("gen: stdout");
		return 1;
	}
	return 0;
}
