/* SPDX-License-Identifier: MIT */
/* sluice files: per-file state; read-only, takes no lock, works while mounted. */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "config.h"
#include "datadir.h"
#include "err.h"
#include "files.h"
#include "sluice.h"
#include "timestamp.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice files [--json] [--query Q] DATA_DIR [PATH|GLOB]\n"
		   "\n"
		   "Lists the landed files in landing order, and for each query that reads a\n"
		   "file what it did with it: waiting, planned in batch N, committed in batch\n"
		   "N, failed in batch N (the batch that stopped the query names the file),\n"
		   "skipped (by maxFileAge or by the seen set, with the reason), archived or\n"
		   "deleted by cleanSource. Files removed since a query read or skipped them\n"
		   "are listed too, for the query's fileHistory (default 30 days).\n"
		   "Read-only and lock-free: it works while the data dir is mounted. One\n"
		   "line per file and query:\n"
		   "'LANDED SIZE PATH QUERY STATE' (QUERY '-' for a file no query reads).\n"
		   "\n"
		   "PATH|GLOB selects files by their path under in/ (a leading 'in/' is\n"
		   "dropped), component by component with fnmatch(3); a pattern naming a\n"
		   "folder selects every file under it.\n"
		   "\n"
		   "  --query Q     only the files query Q reads, and only its state\n"
		   "  --json        one JSON object per file and line instead: path,\n"
		   "                location, id, landed, size, checksum, mtime, queries\n"
		   "\n"
		   "Exit codes: 0 ok, 1 runtime failure, 2 misuse (an unknown query),\n"
		   "4 not a sluice data dir or invalid config.\n");
}

struct files_opts {
	const char *datadir;
	const char *query;
	const char *glob;
	bool json;
};

/* The options: -1 with o set, or the exit code to return. */
static int parse_args(int argc, char **argv, struct files_opts *o)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"json", no_argument, NULL, 'j'},
						 {"query", required_argument, NULL, 'q'},
						 {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return SL_EXIT_OK;
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->query = optarg;
			break;
		default:
			usage(stderr);
			return SL_EXIT_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		die_msg("files", "expected DATA_DIR [PATH|GLOB] (see 'sluice files --help')");
		return SL_EXIT_USAGE;
	}
	o->datadir = argv[optind];
	o->glob = argc - optind == 2 ? argv[optind + 1] : NULL;
	return -1;
}

/* ---- PATH|GLOB ---- */

#define GLOB_MAX_COMPS 256

struct glob {
	char *buf;
	const char *comps[GLOB_MAX_COMPS];
	size_t n;
};

/* Splits text into components; false for an empty pattern or one with ".." */
static bool glob_init(struct glob *g, const char *text)
{
	char *p, *save = NULL;

	while (!strncmp(text, "./", 2))
		text += 2;
	if (!strcmp(text, "in"))
		text = "";
	else if (!strncmp(text, "in/", 3))
		text += 3;
	g->n = 0;
	if (!(g->buf = strdup(text)))
		return false;
	for (p = strtok_r(g->buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (!strcmp(p, "..") || g->n == GLOB_MAX_COMPS)
			return false;
		if (strcmp(p, "."))
			g->comps[g->n++] = p;
	}
	return true;
}

/*
 * A path matches when its leading components match the pattern's (so a
 * folder selects what is under it); "in/" alone selects everything.
 */
static bool glob_match(void *ctx, const char *path)
{
	const struct glob *g = ctx;
	char comp[4096];
	const char *p = path;

	for (size_t i = 0; i < g->n; i++) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || n >= sizeof(comp))
			return false;
		memcpy(comp, p, n);
		comp[n] = 0;
		if (fnmatch(g->comps[i], comp, 0))
			return false;
		if (!slash)
			return i + 1 == g->n;
		p = slash + 1;
	}
	return true;
}

/* ---- output ---- */

static void json_str(const char *text)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void iso_ns(int64_t ns, char buf[SL_TIMESTAMP_BUFSZ])
{
	sl_timestamp_format(ns / 1000, buf);
}

/* The seen-set key a skip found seen: the path, or its name with fileNameOnly. */
static const char *seen_key(const struct sl_files_entry *e, const struct sl_files_query *q)
{
	const char *slash = strrchr(e->path, '/');
	return q->by_name && slash ? slash + 1 : e->path;
}

static void print_json(const struct sl_files *l)
{
	char ts[SL_TIMESTAMP_BUFSZ];

	for (size_t i = 0; i < l->n; i++) {
		const struct sl_files_entry *e = &l->v[i];
		printf("{\"path\":");
		json_str(e->path);
		printf(",\"location\":");
		if (e->location)
			json_str(e->location);
		else
			printf("null");
		iso_ns(e->landed_ns, ts);
		printf(",\"id\":%" PRIu64 ",\"landed\":\"%s\",\"size\":%" PRIu64
		       ",\"checksum\":null,\"mtime\":",
		       e->id, ts, e->size);
		if (e->location) {
			iso_ns(e->mtime_ns, ts);
			printf("\"%s\"", ts);
		} else {
			printf("null");
		}
		printf(",\"queries\":[");
		for (size_t k = 0; k < e->nq; k++) {
			const struct sl_files_query *q = &e->q[k];
			printf("%s{\"name\":", k ? "," : "");
			json_str(q->name);
			printf(",\"state\":\"%s\",\"batch\":", sl_files_state_name(q->state));
			if (q->has_batch)
				printf("%" PRIu64, q->batch);
			else
				printf("null");
			if (q->state == SL_FILES_SKIPPED && q->reason == SL_FILES_MAX_FILE_AGE) {
				printf(",\"reason\":\"maxFileAge\",\"ageClock\":");
				sl_timestamp_format(q->clock_us, ts);
				printf("\"%s\",\"threshold\":", ts);
				sl_timestamp_format(q->threshold_us, ts);
				printf("\"%s\"", ts);
			} else if (q->state == SL_FILES_SKIPPED) {
				printf(",\"reason\":\"alreadySeen\",\"seenKey\":");
				json_str(seen_key(e, q));
			} else if (q->state == SL_FILES_FAILED && q->error) {
				printf(",\"error\":");
				json_str(q->error);
			}
			printf("}");
		}
		printf("]}\n");
	}
}

/* One query's state as the human output says it. */
static void state_text(const struct sl_files_entry *e, const struct sl_files_query *q, char *buf,
		       size_t len)
{
	char batch[40] = "", a[SL_TIMESTAMP_BUFSZ], b[SL_TIMESTAMP_BUFSZ];

	if (q->has_batch)
		snprintf(batch, sizeof(batch), " in batch %" PRIu64, q->batch);
	switch (q->state) {
	case SL_FILES_WAITING:
		snprintf(buf, len, "waiting");
		break;
	case SL_FILES_PLANNED:
		snprintf(buf, len, "planned%s", batch);
		break;
	case SL_FILES_FAILED:
		snprintf(buf, len, "failed%s: %s", batch, q->error ? q->error : "?");
		break;
	case SL_FILES_COMMITTED:
		snprintf(buf, len, "committed%s%s", batch, e->location ? "" : " (since removed)");
		break;
	case SL_FILES_SKIPPED:
		if (q->reason == SL_FILES_MAX_FILE_AGE) {
			sl_timestamp_format(q->clock_us, a);
			sl_timestamp_format(q->threshold_us, b);
			snprintf(buf, len,
				 "skipped by maxFileAge: age %s older than %s (newest planned minus "
				 "maxFileAge)",
				 a, b);
		} else {
			snprintf(buf, len, "skipped by the seen set: %s '%s' already seen",
				 q->by_name ? "name" : "path", seen_key(e, q));
		}
		break;
	case SL_FILES_ARCHIVED:
		if (e->location)
			snprintf(buf, len, "archived by cleanSource after batch %" PRIu64 " to %s",
				 q->batch, e->location);
		else
			snprintf(buf, len,
				 "archived by cleanSource after batch %" PRIu64 " (since removed)",
				 q->batch);
		break;
	case SL_FILES_DELETED:
		snprintf(buf, len, "deleted by cleanSource after batch %" PRIu64, q->batch);
		break;
	}
}

static int width_of(uint64_t v)
{
	int w = 1;
	while (v >= 10) {
		v /= 10;
		w++;
	}
	return w;
}

static void print_plain(const struct sl_files *l)
{
	int wsize = 4, wpath = 4, wq = 5;
	char ts[SL_TIMESTAMP_BUFSZ], state[1200];

	if (l->n == 0)
		return;
	for (size_t i = 0; i < l->n; i++) {
		const struct sl_files_entry *e = &l->v[i];
		int w = width_of(e->size), p = (int)strlen(e->path);
		wsize = w > wsize ? w : wsize;
		wpath = p > wpath ? p : wpath;
		for (size_t k = 0; k < e->nq; k++) {
			int n = (int)strlen(e->q[k].name);
			wq = n > wq ? n : wq;
		}
	}
	printf("%-24s  %*s  %-*s  %-*s  %s\n", "LANDED", wsize, "SIZE", wpath, "PATH", wq, "QUERY",
	       "STATE");
	for (size_t i = 0; i < l->n; i++) {
		const struct sl_files_entry *e = &l->v[i];
		iso_ns(e->landed_ns, ts);
		if (e->nq == 0)
			printf("%-24s  %*" PRIu64 "  %-*s  %-*s  %s\n", ts, wsize, e->size, wpath,
			       e->path, wq, "-", "read by no query");
		for (size_t k = 0; k < e->nq; k++) {
			state_text(e, &e->q[k], state, sizeof(state));
			printf("%-24s  %*" PRIu64 "  %-*s  %-*s  %s\n", ts, wsize, e->size, wpath,
			       e->path, wq, e->q[k].name, state);
		}
	}
}

/* ---- the command ---- */

/* The catalog, read-only; SL_NOTFOUND while the data dir has none yet. */
static int open_catalog(const char *datadir, struct sl_catalog **cat)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/catalog", datadir);
	if (stat(path, &st) != 0)
		return errno == ENOENT ? SL_NOTFOUND : errno;
	return sl_catalog_open(path, SL_CATALOG_RDONLY, cat);
}

static bool has_query(const struct sl_config *cfg, const char *name)
{
	for (size_t k = 0; k < sl_config_nqueries(cfg); k++)
		if (!strcmp(sl_config_query(cfg, k)->name, name))
			return true;
	return false;
}

/* Lists and prints what o asks for; cat NULL: a new data dir (nothing landed). */
static int show(struct sl_catalog *cat, const struct sl_config *cfg, const struct files_opts *o,
		struct glob *g)
{
	struct sl_files_filter f = {.query = o->query, .match = g ? glob_match : NULL, .ctx = g};
	struct sl_files *l = NULL;
	struct sl_txn *t = NULL;
	int rc;

	if (!cat)
		return 0;
	if ((rc = sl_catalog_read(cat, &t)))
		return rc;
	rc = sl_files_list(t, cfg, &f, &l);
	sl_txn_end(t);
	if (rc)
		return rc;
	if (o->json)
		print_json(l);
	else
		print_plain(l);
	sl_files_free(l);
	return 0;
}

int cmd_files(int argc, char **argv)
{
	struct files_opts o = {0};
	struct sl_datadir *d = NULL;
	struct sl_config *cfg = NULL;
	struct sl_catalog *cat = NULL;
	struct glob g = {0};
	const char *what;
	char err[512];
	int rc, ret = SL_EXIT_OK;

	use_stderr_log();
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	if (o.glob && !glob_init(&g, o.glob)) {
		free(g.buf);
		die_msg("files", "invalid PATH|GLOB '%s' (a path under in/, no '..')", o.glob);
		return SL_EXIT_USAGE;
	}
	rc = sl_datadir_open(o.datadir, 0, &d, &what);
	bool fresh = rc == SL_NOTFOUND; /* a new data dir: nothing landed yet */
	if (fresh)
		rc = 0;
	if (rc == SL_ENOTSLUICE) {
		die_msg("files", "'%s' is not a sluice data dir (it holds '%s')", o.datadir,
			what ? what : "?");
		ret = SL_EXIT_DATADIR;
		goto glob_free;
	}
	if (rc) {
		die_msg("files", "cannot open data dir '%s': %s", o.datadir, sl_strerror(rc));
		ret = SL_EXIT_FAILURE;
		goto glob_free;
	}
	if ((rc = sl_config_load(o.datadir, &cfg, err, sizeof(err)))) {
		die_msg("files", "invalid config: %s", rc == SL_ECONFIG ? err : sl_strerror(rc));
		ret = rc == SL_ECONFIG ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
		goto datadir_close;
	}
	if (o.query && !has_query(cfg, o.query)) {
		die_msg("files", "unknown query '%s' (not in %s/sluice.json)", o.query, o.datadir);
		ret = SL_EXIT_USAGE;
		goto config_free;
	}
	if (!fresh && (rc = open_catalog(o.datadir, &cat)) && rc != SL_NOTFOUND) {
		die_msg("files", "cannot open catalog of '%s': %s", o.datadir, sl_strerror(rc));
		ret = rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
		goto config_free;
	}
	if ((rc = show(cat, cfg, &o, o.glob ? &g : NULL))) {
		die_msg("files", "cannot read catalog: %s", sl_strerror(rc));
		ret = SL_EXIT_FAILURE;
	}
	sl_catalog_close(cat);
config_free:
	sl_config_free(cfg);
datadir_close:
	sl_datadir_close(d);
glob_free:
	free(g.buf);
	return ret;
}
