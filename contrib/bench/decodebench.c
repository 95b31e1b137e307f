// SPDX-License-Identifier: MIT
/*
 * decodebench: B4 of contrib/bench/run. Decodes a JSON Lines file of gen.c
 * events with the 4-column schema
 *   event_id STRING, user_id STRING, amount_cents BIGINT, event_time TIMESTAMP
 * and computes count(*), sum(amount_cents) and, as a check that both sides
 * converted the same values, sum(event_time) and the total length of the
 * two strings. Two ways, one per run:
 *   sluice   sluice's decoder (core/decode.h): one sl_decode_file() call over
 *            the whole file into one batch, as the engine does per file;
 *   jansson  json_loadb() per line, then the four fields by name, strings
 *            checked, event_time converted with sl_timestamp_parse() (the
 *            parser sluice's decoder uses), like sluice's PERMISSIVE rules.
 * The file is read into memory before the clock starts; the clock stops
 * after the sums. Prints one line:
 *   mode=M rows=N malformed=N sum_amount=N sum_time=N str_bytes=N elapsed_s=S
 *
 * Build (see contrib/bench/run):
 *   cc -O2 -I core/<each layer> -I BUILD -o decodebench decodebench.c \
 *      BUILD/core/libsluice-<each layer, top first>.a -llmdb -ljansson -lzstd -lpthread
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "batch.h"
#include "config.h"
#include "decode.h"
#include "timestamp.h"

#define SCHEMA "event_id STRING, user_id STRING, amount_cents BIGINT, event_time TIMESTAMP"

struct result {
	uint64_t rows, malformed, str_bytes;
	int64_t sum_amount;
	uint64_t sum_time; /* wraps around: a checksum */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *read_file(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "decodebench: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t done = 0;
	if (!buf) {
		fprintf(stderr, "decodebench: out of memory\n");
		exit(1);
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
		if (n <= 0) {
			fprintf(stderr, "decodebench: read %s: %s\n", path,
				n ? strerror(errno) : "short read");
			exit(1);
		}
		done += (size_t)n;
	}
	close(fd);
	buf[done] = 0;
	*len = done;
	return buf;
}

static void run_sluice(const char *data, size_t len, struct result *r)
{
	struct sl_query_config q;
	struct sl_decoder *d;
	struct sl_batch b;
	struct sl_decode_stats st;
	char err[256];

	memset(&q, 0, sizeof(q));
	q.source.format = SL_SOURCE_JSON;
	q.source.sep = ',';
	q.source.mode = SL_MODE_PERMISSIVE;
	if (sl_config_schema_parse(SCHEMA, &q.source.schema, err, sizeof(err))) {
		fprintf(stderr, "decodebench: schema: %s\n", err);
		exit(1);
	}
	if (sl_decoder_new(&q, &d) || sl_batch_init(&b, &q.source.schema) ||
	    sl_decode_stats_init(&st, q.source.schema.n)) {
		fprintf(stderr, "decodebench: out of memory\n");
		exit(1);
	}
	int rc = sl_decode_file(d, "events/x.json", data, len, &b, &st, NULL);
	if (rc) {
		fprintf(stderr, "decodebench: sl_decode_file: error %d\n", rc);
		exit(1);
	}
	r->rows = b.nrows;
	r->malformed = st.malformed;
	for (size_t i = 0; i < b.nrows; i++) {
		if (!sl_batch_is_null(&b, i, 2))
			r->sum_amount += b.cols[2].cells[i].i;
		if (!sl_batch_is_null(&b, i, 3))
			r->sum_time += (uint64_t)b.cols[3].cells[i].i;
		if (!sl_batch_is_null(&b, i, 0))
			r->str_bytes += b.cols[0].cells[i].s.len;
		if (!sl_batch_is_null(&b, i, 1))
			r->str_bytes += b.cols[1].cells[i].s.len;
	}
	sl_decode_stats_release(&st);
	sl_batch_release(&b);
	sl_decoder_free(d);
	sl_config_schema_release(&q.source.schema);
}

static void run_jansson(const char *data, size_t len, struct result *r)
{
	const char *p = data, *end = data + len;
	json_error_t jerr;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *next = nl ? nl + 1 : end;
		if (n && p[n - 1] == '\r')
			n--;
		if (n == 0) {
			p = next;
			continue;
		}
		json_t *o = json_loadb(p, n, 0, &jerr);
		r->rows++;
		if (!o || !json_is_object(o)) {
			r->malformed++;
			json_decref(o);
			p = next;
			continue;
		}
		bool bad = false;
		json_t *v = json_object_get(o, "event_id");
		if (json_is_string(v))
			r->str_bytes += json_string_length(v);
		else if (v && !json_is_null(v))
			bad = true;
		v = json_object_get(o, "user_id");
		if (json_is_string(v))
			r->str_bytes += json_string_length(v);
		else if (v && !json_is_null(v))
			bad = true;
		v = json_object_get(o, "amount_cents");
		if (json_is_integer(v))
			r->sum_amount += json_integer_value(v);
		else if (v && !json_is_null(v))
			bad = true;
		v = json_object_get(o, "event_time");
		if (json_is_string(v)) {
			int64_t us;
			if (sl_timestamp_parse(json_string_value(v), json_string_length(v), &us) == 0)
				r->sum_time += (uint64_t)us;
			else
				bad = true;
		} else if (v && !json_is_null(v)) {
			bad = true;
		}
		r->malformed += bad;
		json_decref(o);
		p = next;
	}
}

int main(int argc, char **argv)
{
	struct result r = {0};
	size_t len;

	if (argc != 3 || (strcmp(argv[1], "sluice") && strcmp(argv[1], "jansson"))) {
		fprintf(stderr, "usage: decodebench sluice|jansson FILE\n");
		return 2;
	}
	char *data = read_file(argv[2], &len);
	double t0 = now();
	if (!strcmp(argv[1], "sluice"))
		run_sluice(data, len, &r);
	else
		run_jansson(data, len, &r);
	double t1 = now();
	printf("mode=%s rows=%" PRIu64 " malformed=%" PRIu64 " sum_amount=%" PRId64
	       " sum_time=%" PRIu64 " str_bytes=%" PRIu64 " elapsed_s=%.6f\n",
	       argv[1], r.rows, r.malformed, r.sum_amount, r.sum_time, r.str_bytes, t1 - t0);
	free(data);
	return 0;
}
