// SPDX-License-Identifier: MIT
/*
 * gen2: the second event generator of contrib/bench/run (B16, B17): wide
 * events of 25 top-level fields, of which B3's job reads four. Writes N
 * JSON Lines events to stdout, the same bytes for the same arguments
 * (fixed seed, no clock, no locale). One line (wrapped here):
 *
 *   {"event_id":"e0000000042-9f3a","session_id":"s3f09c2a1","event_type":"add_to_cart",
 *    "user_name":"J\u00f6rg \ud83d\ude00","user_id":"u01234",
 *    "page_url":"https:\/\/shop.example\/p\/1234?ref=mail&q=caf\u00e9",
 *    "referrer":null,"ip":"10.1.2.3","user_agent":"Mozilla/5.0 (...)",
 *    "device":{"os":"android","model":"Pixel 7","screen":{"w":1080,"h":2400},
 *              "app":{"ver":"3.14.2","build":4411}},
 *    "geo":{"country":"DE","city":"München","lat":48.137,"lon":11.575},
 *    "tags":["promo","web"],"items":[{"sku":"SKU-0042","qty":2,"price":1999},...],
 *    "amount_cents":12345,"currency":"EUR","experiments":[{"id":7,"arm":"b"},...],
 *    "flags":{"beta":true,"vip":false},"score":0.4821,"retries":0,"consent":true,
 *    "comment":"line one\nline \"two\" \u00bfqu\u00e9? \ud83d\udce6","trace_id":"<32 hex>",
 *    "received_at":"2026-10-04T00:00:01.112Z","event_time":"2026-10-04T00:00:00.840Z",
 *    "version":3}
 *
 * event_id, user_id, amount_cents and event_time follow gen.c's rules
 * (unique event_id, ~5% byte-for-byte re-sends of one of the last 4,096
 * events, 50,000 users, 1..999,999 cents, RATE events per second of event
 * time with +-2 s of jitter and ~1% late by up to 40 minutes); the read
 * fields sit among the others, event_time near the end. The rest carry
 * nested objects, arrays of strings and of objects, \uXXXX escapes with
 * surrogate pairs, \n \" \/ escapes, raw UTF-8, null, booleans and
 * doubles. 1,000,000 lines are 983,222,177 bytes.
 *
 * Build: cc -O2 -o gen2 gen2.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 4096   /* re-sends pick among the last RING events sent */
#define USERS 50000 /* distinct user_id values */
#define LINE_MAX 4096

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
	fprintf(f, "usage: gen2 [-s SEED] [-r RATE] [-t START] N\n"
		   "\n"
		   "Writes N wide JSON Lines events to stdout (see the comment at the top of gen2.c).\n"
		   "  -s SEED   PRNG seed (default 2026)\n"
		   "  -r RATE   events per second of event time (default 50)\n"
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

#define PICK(a) (a[below(sizeof(a) / sizeof(a[0]))])

int main(int argc, char **argv)
{
	static const char *const os[] = {"android", "ios", "linux", "windows", "macos"};
	static const char *const model[] = {"Pixel 7", "iPhone 14", "ThinkPad X1", "Galaxy S23",
					    "MacBook Air"};
	static const char *const type[] = {"view", "click", "add_to_cart", "checkout", "search",
					   "login"};
	/* JSON text: escapes as they appear in the line */
	static const char *const name[] = {
		"J\\u00f6rg M\\u00fcller", "\\u5f20\\u4f1f",	 "Zo\\u00eb \\ud83d\\ude00",
		"Ana Mar\\u00eda",	   "\\u0418\\u0432\\u0430\\u043d", "plain name",
		"O\\u2019Brien \\ud83c\\udf40", "Fran\\u00e7oise"};
	static const char *const city[] = {"München", "Zürich", "Paris", "東京", "São Paulo",
					   "Kraków", "Austin"};
	static const char *const country[] = {"DE", "CH", "FR", "JP", "BR", "PL", "US"};
	static const char *const tag[] = {"promo", "web", "mobile", "retry", "gift", "eu", "us"};
	static const char *const comment[] = {
		"", "fast delivery please", "line one\\nline \\\"two\\\"",
		"\\u00bfqu\\u00e9 tal? \\ud83d\\udce6\\ud83d\\ude9a", "tab\\there \\/ slash",
		"gift wrap \\ud83c\\udf81, no invoice"};
	static const char *const ua[] = {
		"Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) "
		"Chrome/120.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 "
		"(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"};
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
		char ts[64], rts[64], line[LINE_MAX];
		size_t cap = sizeof(line);
		int64_t ms = start * 1000 + (int64_t)((double)i * 1000.0 / rate);
		ms += (int64_t)below(4001) - 2000; /* +-2 s of jitter */
		if (below(100) == 0)
			ms -= (int64_t)below(40 * 60 * 1000 + 1); /* late by up to 40 min */
		fmt_time(ts, sizeof(ts), ms);
		fmt_time(rts, sizeof(rts), ms + 50 + (int64_t)below(3000));
		uint64_t r = rnd();
		unsigned user = (unsigned)below(USERS);
		unsigned ci = (unsigned)below(sizeof(city) / sizeof(city[0]));
		int len = snprintf(
			line, cap,
			"{\"event_id\":\"e%010" PRIu64 "-%04x\",\"session_id\":\"s%08" PRIx64 "\","
			"\"event_type\":\"%s\",\"user_name\":\"%s\",\"user_id\":\"u%05u\","
			"\"page_url\":\"https:\\/\\/shop.example\\/p\\/%u?ref=mail&q=caf\\u00e9\","
			"\"referrer\":%s,\"ip\":\"10.%u.%u.%u\",\"user_agent\":\"%s\","
			"\"device\":{\"os\":\"%s\",\"model\":\"%s\",\"screen\":{\"w\":%u,\"h\":%u},"
			"\"app\":{\"ver\":\"%u.%u.%u\",\"build\":%u}},"
			"\"geo\":{\"country\":\"%s\",\"city\":\"%s\",\"lat\":%.3f,\"lon\":%.3f},"
			"\"tags\":[",
			sent, (unsigned)((r >> 8) & 0xffff), below(1ull << 32), PICK(type), PICK(name),
			user, (unsigned)below(100000),
			below(3) ? "null" : "\"https:\\/\\/search.example\\/?q=shoes\"",
			(unsigned)below(256), (unsigned)below(256), (unsigned)below(256), PICK(ua),
			os[(r >> 24) % 5], PICK(model), 720 + (unsigned)below(1200),
			1280 + (unsigned)below(1600), (unsigned)((r >> 40) % 5),
			(unsigned)((r >> 44) % 20), (unsigned)((r >> 48) % 10),
			1000 + (unsigned)below(9000), country[ci], city[ci],
			-60.0 + (double)below(120000) / 1000.0, -170.0 + (double)below(340000) / 1000.0);
		int ntags = (int)below(4);
		for (int t = 0; t < ntags; t++)
			len += snprintf(line + len, cap - (size_t)len, "%s\"%s\"", t ? "," : "",
					PICK(tag));
		len += snprintf(line + len, cap - (size_t)len, "],\"items\":[");
		int nitems = 1 + (int)below(3);
		for (int t = 0; t < nitems; t++)
			len += snprintf(line + len, cap - (size_t)len,
					"%s{\"sku\":\"SKU-%04u\",\"qty\":%u,\"price\":%u}",
					t ? "," : "", (unsigned)below(10000), 1 + (unsigned)below(5),
					99 + (unsigned)below(50000));
		len += snprintf(line + len, cap - (size_t)len,
				"],\"amount_cents\":%" PRIu64 ",\"currency\":\"EUR\",\"experiments\":[",
				1 + below(999999));
		int nexp = (int)below(3);
		for (int t = 0; t < nexp; t++)
			len += snprintf(line + len, cap - (size_t)len, "%s{\"id\":%u,\"arm\":\"%c\"}",
					t ? "," : "", (unsigned)below(50), (char)('a' + below(3)));
		len += snprintf(line + len, cap - (size_t)len,
				"],\"flags\":{\"beta\":%s,\"vip\":%s},\"score\":%.4f,\"retries\":%u,"
				"\"consent\":%s,\"comment\":\"%s\",\"trace_id\":\"%016" PRIx64
				"%016" PRIx64 "\",\"received_at\":\"%s\",\"event_time\":\"%s\","
				"\"version\":%u}\n",
				below(2) ? "true" : "false", below(10) ? "false" : "true",
				(double)below(10000) / 10000.0, (unsigned)below(3),
				below(2) ? "true" : "false", PICK(comment), rnd(), rnd(), rts, ts,
				1 + (unsigned)below(3));
		memcpy(ring[sent % RING], line, (size_t)len);
		ring_len[sent % RING] = len;
		sent++;
		fwrite(line, 1, (size_t)len, stdout);
	}
	if (fflush(stdout) || ferror(stdout)) {
		perror("gen2: stdout");
		return 1;
	}
	return 0;
}
