/* SPDX-License-Identifier: MIT */
/* sluice status: read-only counters; takes no lock, works while mounted. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "datadir.h"
#include "err.h"
#include "engine.h"
#include "config.h"
#include "land.h"
#include "metrics.h"
#include "qindex.h"
#include "timestamp.h"
#include "sluice.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice status [--prometheus] DATA_DIR\n"
		   "\n"
		   "Prints 'landing files=N bytes=N in_flight=N refused=ERRNO:n,...' (refused=-\n"
		   "when none). Read-only and lock-free: it works while the data dir is mounted;\n"
		   "in_flight counts files created through the running mount, not yet landed.\n"
		   "Then one line per query of sluice.json: '<name> batch=<id or -> rows=<n>\n"
		   "backlog=<files>/<bytes> watermark=<ISO or -> error=<lastError or ->'.\n"
		   "\n"
		   "  --prometheus  print the metrics of the mount's status/metrics instead,\n"
		   "                in Prometheus's text format\n"
		   "\n"
		   "Exit codes: 0 ok, 1 runtime failure, 2 misuse, 4 not a sluice data dir.\n");
}

struct refusal {
	char name[24];
	uint64_t n;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct refusal *)a)->name, ((const struct refusal *)b)->name);
}

/* " refused=EBUSY:n,EPERM:n" by errno name, as the catalog keys sort, or "-" */
static void print_refused(const struct sl_land_counters *c)
{
	struct refusal v[SL_ERRNO_MAX];
	size_t n = 0;

	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		if (!c->refused[e])
			continue;
		const char *name = sl_errno_name(e);
		if (name)
			snprintf(v[n].name, sizeof(v[n].name), "%s", name);
		else
			snprintf(v[n].name, sizeof(v[n].name), "E%d", e);
		v[n++].n = c->refused[e];
	}
	qsort(v, n, sizeof(v[0]), by_name);
	printf(" refused=");
	for (size_t k = 0; k < n; k++)
		printf("%s%s:%" PRIu64, k ? "," : "", v[k].name, v[k].n);
	printf("%s\n", n ? "" : "-");
}

/* "<name> batch=<id or -> rows=<n> backlog=<files>/<bytes> watermark=<ISO or -> error=<..>" */
static int print_query(struct sl_txn *t, const struct sl_query_config *q)
{
	const char *name = q->name;
	char wm[SL_TIMESTAMP_BUFSZ] = "-";
	struct sl_engine_status es = {0};
	struct sl_backlog b = {0};
	uint32_t qid;
	char batch[24] = "-";
	int rc = t ? sl_qindex_backlog(t, name, &b) : SL_NOTFOUND;

	if (rc && rc != SL_NOTFOUND)
		return rc;
	if (rc == 0 && (rc = sl_qindex_qid(t, name, &qid)) == 0 &&
	    (rc = sl_engine_status(t, qid, &es)))
		return rc;
	if (es.has_batch)
		snprintf(batch, sizeof(batch), "%" PRIu64, es.batch);
	if (q->has_watermark)
		sl_timestamp_format(es.wm_ms * 1000, wm);
	printf("%s batch=%s rows=%" PRIu64 " backlog=%" PRIu64 "/%" PRIu64
	       " watermark=%s error=%s\n",
	       name, batch, es.rows, b.files, b.bytes, wm, es.error[0] ? es.error : "-");
	return 0;
}

/*
 * The metrics status/metrics shows, from the catalog (t, NULL for a new data
 * dir) and the running mount's shared page.
 */
static int print_metrics(struct sl_txn *t, const struct sl_config *cfg, const char *datadir,
			 const struct sl_land_counters *c)
{
	struct sl_land_latency lat;
	struct timespec now;
	char *text;
	size_t len;
	int rc;

	/* best effort, as in_flight: a lock file that cannot be read shows zeros */
	sl_land_shared_latency(datadir, &lat);
	clock_gettime(CLOCK_REALTIME, &now);
	struct sl_metrics_input in = {.cfg = cfg, .landing = c, .latency = &lat,
				      .now_ms = now.tv_sec * 1000ll + now.tv_nsec / 1000000};
	if ((rc = sl_metrics_render(t, &in, &text, &len)))
		return rc;
	fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

/* The options: -1 with *datadir and *prometheus set, or the exit code to return. */
static int parse_args(int argc, char **argv, const char **datadir, bool *prometheus)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"prometheus", no_argument, NULL, 'p'},
						 {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return SL_EXIT_OK;
		}
		if (c == 'p') {
			*prometheus = true;
			continue;
		}
		usage(stderr);
		return SL_EXIT_USAGE;
	}
	if (argc - optind != 1) {
		die_msg("status", "expected DATA_DIR (see 'sluice status --help')");
		return SL_EXIT_USAGE;
	}
	*datadir = argv[optind];
	return -1;
}

int cmd_status(int argc, char **argv)
{
	struct sl_land_counters *c = NULL;
	struct sl_datadir *d = NULL;
	struct sl_config *cfg = NULL;
	struct sl_catalog *cat;
	struct sl_txn *t;
	const char *what;
	char path[4096];
	int rc;

	use_stderr_log();
	const char *datadir;
	bool prometheus = false;
	if ((rc = parse_args(argc, argv, &datadir, &prometheus)) >= 0)
		return rc;
	rc = sl_datadir_open(datadir, 0, &d, &what);
	bool fresh = rc == SL_NOTFOUND; /* a new data dir: nothing landed yet */
	if (fresh)
		rc = 0;
	if (rc == SL_ENOTSLUICE) {
		die_msg("status", "'%s' is not a sluice data dir (it holds '%s')", datadir,
			what ? what : "?");
		return SL_EXIT_DATADIR;
	}
	if (rc) {
		die_msg("status", "cannot open data dir '%s': %s", datadir, sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	char err[512];
	rc = sl_config_load(datadir, &cfg, err, sizeof(err));
	if (rc) {
		die_msg("status", "invalid config: %s", rc == SL_ECONFIG ? err : sl_strerror(rc));
		sl_datadir_close(d);
		return rc == SL_ECONFIG ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	if (fresh) {
		struct sl_land_counters *zero = calloc(1, sizeof(*zero));
		rc = zero ? 0 : ENOMEM;
		if (zero && prometheus)
			rc = print_metrics(NULL, cfg, datadir, zero);
		else if (zero)
			printf("landing files=0 bytes=0 in_flight=0 refused=-\n");
		for (size_t k = 0; zero && !prometheus && k < sl_config_nqueries(cfg); k++)
			print_query(NULL, sl_config_query(cfg, k));
		free(zero);
		sl_config_free(cfg);
		if (rc) {
			die_msg("status", "cannot render metrics: %s", sl_strerror(rc));
			return SL_EXIT_FAILURE;
		}
		return SL_EXIT_OK;
	}
	snprintf(path, sizeof(path), "%s/catalog", datadir);
	rc = sl_catalog_open(path, SL_CATALOG_RDONLY | SL_CATALOG_RANDOM, &cat);
	if (rc) {
		die_msg("status", "cannot open catalog of '%s': %s", datadir, sl_strerror(rc));
		sl_config_free(cfg);
		sl_datadir_close(d);
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	/*
	 * In flight before the catalog: a file leaves it only once its landing
	 * committed, so in_flight=0 means files= counts every closed file.
	 */
	if (!(c = calloc(1, sizeof(*c)))) {
		rc = ENOMEM;
		goto close_cat;
	}
	sl_land_shared_in_flight(datadir, &c->in_flight);
	rc = sl_catalog_read(cat, &t);
	if (rc == 0) {
		rc = sl_land_counters_read(t, c);
		if (rc == 0 && prometheus) {
			rc = print_metrics(t, cfg, datadir, c);
		} else if (rc == 0) {
			printf("landing files=%" PRIu64 " bytes=%" PRIu64 " in_flight=%" PRIu64,
			       c->files_landed, c->bytes_landed, c->in_flight);
			print_refused(c);
		}
		for (size_t k = 0; rc == 0 && !prometheus && k < sl_config_nqueries(cfg); k++)
			rc = print_query(t, sl_config_query(cfg, k));
		sl_txn_end(t);
	}
	free(c);
close_cat:
	sl_catalog_close(cat);
	sl_config_free(cfg);
	sl_datadir_close(d);
	if (rc) {
		die_msg("status", "cannot read catalog: %s", sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	return SL_EXIT_OK;
}
