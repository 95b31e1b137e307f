/* SPDX-License-Identifier: MIT */
/* sluice status: read-only counters; takes no lock, works while mounted. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "datadir.h"
#include "err.h"
#include "engine.h"
#include "config.h"
#include "land.h"
#include "metrics.h"
#include "qindex.h"
#include "reload.h"
#include "timestamp.h"
#include "sluice.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice status [--json] [--watch | --prometheus] DATA_DIR\n"
		   "\n"
		   "Prints 'landing files=N bytes=N in_flight=N refused=ERRNO:n,...' (refused=-\n"
		   "when none). Read-only and lock-free: it works while the data dir is mounted;\n"
		   "in_flight counts files created through the running mount, not yet landed.\n"
		   "Then one line per query of sluice.json: '<name> batch=<id or -> rows=<n>\n"
		   "backlog=<files>/<bytes> watermark=<ISO or -> error=<lastError or ->'; a\n"
		   "source that reads no files shows its backlog in its own unit, e.g.\n"
		   "backlog=2:batches (query), backlog=5:lines/300:bytes (socket: spooled,\n"
		   "not committed), backlog=20:offsets (kafka: behind the latest offsets\n"
		   "seen) or backlog=-, unknown (process). After the landing line,\n"
		   "'config reload refused: <error>' when the mount refused its last SIGHUP\n"
		   "reload of sluice.json and runs the old config.\n"
		   "\n"
		   "  --json        one JSON object instead: landing counters, and per query\n"
		   "                source, sink, guarantee, batch, rows, backlog, watermark,\n"
		   "                lastError\n"
		   "  --watch       refresh every second until interrupted; a query draining\n"
		   "                a backlog gets a progress line (files and bytes left,\n"
		   "                rate, ETA); a screen on a terminal, plain lines otherwise\n"
		   "                (with --json: one object per line)\n"
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

/* One query as status shows it, from one read transaction. */
struct qsnap {
	const struct sl_query_config *q;
	struct sl_engine_status es;
	struct sl_engine_backlog eb; /* in the source's units */
	struct sl_backlog b;         /* files and bytes: the file source's, else zero */
};

/* What status shows, as of one read transaction (t NULL: a new data dir). */
struct snap {
	struct sl_land_counters c;
	struct qsnap *qs;
	size_t n;
	int64_t at_ms; /* wall clock when taken */
	char refused[512]; /* the mount's last reload, refused: its error; "" */
};

static int qsnap_read(struct sl_txn *t, const struct sl_query_config *q, struct qsnap *out)
{
	uint32_t qid;
	int rc;

	memset(out, 0, sizeof(*out));
	out->q = q;
	out->eb.known = true;
	out->eb.unit[0] = SL_SOURCE_IS_FILE(q->source.format) ? "files" : NULL;
	if (!t)
		return 0; /* a new data dir */
	if ((rc = sl_engine_backlog(t, q, &out->eb)))
		return rc;
	if (out->eb.unit[0] && !strcmp(out->eb.unit[0], "files"))
		out->b = (struct sl_backlog){.files = out->eb.v[0], .bytes = out->eb.v[1]};
	rc = sl_qindex_qid(t, q->name, &qid);
	if (rc == SL_NOTFOUND)
		return 0; /* never started */
	if (rc == 0)
		rc = sl_engine_status(t, qid, &out->es);
	return rc == SL_NOTFOUND ? 0 : rc;
}

/* Fills s from t (NULL: zeros) and the running mount's shared page. */
static int snap_read(struct snap *s, struct sl_txn *t, const struct sl_config *cfg,
		     const char *datadir)
{
	struct timespec now;
	int rc = 0;

	memset(&s->c, 0, sizeof(s->c));
	sl_land_shared_in_flight(datadir, &s->c.in_flight);
	if (t)
		rc = sl_land_counters_read(t, &s->c);
	struct sl_reload_state reload;
	s->refused[0] = 0;
	if (sl_reload_read(datadir, &reload) == 0)
		memcpy(s->refused, reload.refused, sizeof(s->refused));
	s->n = sl_config_nqueries(cfg);
	for (size_t k = 0; rc == 0 && k < s->n; k++)
		rc = qsnap_read(t, sl_config_query(cfg, k), &s->qs[k]);
	clock_gettime(CLOCK_REALTIME, &now);
	s->at_ms = now.tv_sec * 1000ll + now.tv_nsec / 1000000;
	return rc;
}

/* "<files>/<bytes>" for the file source, "<n>:<unit>[/<n>:<unit>]" for others, "-" unknown. */
static void backlog_text(const struct sl_engine_backlog *b, char *buf, size_t len)
{
	if (!b->known || !b->unit[0]) {
		snprintf(buf, len, b->known ? "0/0" : "-");
	} else if (!strcmp(b->unit[0], "files")) {
		snprintf(buf, len, "%" PRIu64 "/%" PRIu64, b->v[0], b->v[1]);
	} else {
		int n = snprintf(buf, len, "%" PRIu64 ":%s", b->v[0], b->unit[0]);
		if (b->unit[1] && n > 0 && (size_t)n < len)
			snprintf(buf + n, len - (size_t)n, "/%" PRIu64 ":%s", b->v[1], b->unit[1]);
	}
}

/* "<name> batch=<id or -> rows=<n> backlog=<see backlog_text> watermark=<ISO or -> error=<..>" */
static void print_query(const struct qsnap *x)
{
	char wm[SL_TIMESTAMP_BUFSZ] = "-";
	char batch[24] = "-", backlog[96];

	if (x->es.has_batch)
		snprintf(batch, sizeof(batch), "%" PRIu64, x->es.batch);
	if (x->q->has_watermark)
		sl_timestamp_format(x->es.wm_ms * 1000, wm);
	backlog_text(&x->eb, backlog, sizeof(backlog));
	printf("%s batch=%s rows=%" PRIu64 " backlog=%s watermark=%s error=%s\n", x->q->name,
	       batch, x->es.rows, backlog, wm, x->es.error[0] ? x->es.error : "-");
}

static void print_plain(const struct snap *s)
{
	printf("landing files=%" PRIu64 " bytes=%" PRIu64 " in_flight=%" PRIu64,
	       s->c.files_landed, s->c.bytes_landed, s->c.in_flight);
	print_refused(&s->c);
	if (s->refused[0])
		printf("config reload refused: %s\n", s->refused);
	for (size_t k = 0; k < s->n; k++)
		print_query(&s->qs[k]);
}

/* A JSON string literal of text. */
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

/* --json: one object, on one line. */
static void print_json(const struct snap *s)
{
	char ts[SL_TIMESTAMP_BUFSZ];
	bool first = true;

	sl_timestamp_format(s->at_ms * 1000, ts);
	printf("{\"timestamp\":\"%s\",\"landing\":{\"filesLanded\":%" PRIu64
	       ",\"bytesLanded\":%" PRIu64 ",\"filesInFlight\":%" PRIu64
	       ",\"tempAbandoned\":%" PRIu64 ",\"refused\":{",
	       ts, s->c.files_landed, s->c.bytes_landed, s->c.in_flight, s->c.temp_abandoned);
	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		if (!s->c.refused[e])
			continue;
		const char *name = sl_errno_name(e);
		printf("%s\"", first ? "" : ",");
		if (name)
			printf("%s", name);
		else
			printf("E%d", e);
		printf("\":%" PRIu64, s->c.refused[e]);
		first = false;
	}
	printf("}}");
	if (s->refused[0]) {
		printf(",\"configReloadRefused\":");
		json_str(s->refused);
	}
	printf(",\"queries\":[");
	for (size_t k = 0; k < s->n; k++) {
		const struct qsnap *x = &s->qs[k];
		printf("%s{\"name\":", k ? "," : "");
		json_str(x->q->name);
		printf(",\"source\":\"%s\",\"sink\":\"%s\",\"guarantee\":\"%s\",\"batch\":",
		       sl_config_source_name(x->q->source.format),
		       sl_config_sink_name(x->q->sink_format), sl_engine_guarantee(x->q));
		if (x->es.has_batch)
			printf("%" PRIu64, x->es.batch);
		else
			printf("null");
		printf(",\"rows\":%" PRIu64 ",\"backlog\":", x->es.rows);
		if (!x->eb.known) {
			printf("null");
		} else if (!x->eb.unit[0]) {
			printf("{\"files\":0,\"bytes\":0}");
		} else {
			printf("{\"%s\":%" PRIu64, x->eb.unit[0], x->eb.v[0]);
			if (x->eb.unit[1])
				printf(",\"%s\":%" PRIu64, x->eb.unit[1], x->eb.v[1]);
			putchar('}');
		}
		if (x->eb.metric[0]) {
			printf(",\"metrics\":{");
			for (int k = 0; k < 2 && x->eb.metric[k]; k++)
				printf("%s\"%s\":%" PRIu64, k ? "," : "", x->eb.metric[k], x->eb.mv[k]);
			putchar('}');
		}
		printf(",\"watermark\":");
		if (x->q->has_watermark) {
			sl_timestamp_format(x->es.wm_ms * 1000, ts);
			printf("\"%s\"", ts);
		} else {
			printf("null");
		}
		printf(",\"lastError\":");
		if (x->es.error[0])
			json_str(x->es.error);
		else
			printf("null");
		printf("}");
	}
	printf("]}\n");
}

/*
 * The metrics status/metrics shows, from the catalog (t, NULL for a new data
 * dir) and the running mount's shared page.
 */
static int print_metrics(struct sl_txn *t, const struct sl_config *cfg, const char *datadir,
			 const struct sl_land_counters *c)
{
	struct sl_land_latency lat;
	struct sl_reload_state reload;
	struct timespec now;
	char *text;
	size_t len;
	int rc;

	/* best effort, as in_flight: a lock file that cannot be read shows zeros */
	sl_land_shared_latency(datadir, &lat);
	clock_gettime(CLOCK_REALTIME, &now);
	struct sl_metrics_input in = {.cfg = cfg, .landing = c, .latency = &lat,
				      .now_ms = now.tv_sec * 1000ll + now.tv_nsec / 1000000};
	/* as the mount last showed it; never mounted since reloads exist: left out */
	if (sl_reload_read(datadir, &reload) == 0)
		in.reload = &reload;
	if ((rc = sl_metrics_render(t, &in, &text, &len)))
		return rc;
	fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

/* ---- --watch ---- */

static volatile sig_atomic_t quit;

static void on_quit(int sig)
{
	(void)sig;
	quit = 1;
}

/* A query's drain between refreshes: how far it is through its backlog, how fast. */
struct drain {
	uint64_t peak_files, peak_bytes; /* the backlog since it was last empty */
	uint64_t prev_files;
	int64_t prev_ms;
	double rate; /* files per second the backlog shrinks by (smoothed), or 0 */
};

static void drain_update(struct drain *d, const struct qsnap *x, int64_t now_ms)
{
	if (x->b.files == 0) {
		*d = (struct drain){.prev_ms = now_ms};
		return;
	}
	if (x->b.files > d->peak_files)
		d->peak_files = x->b.files;
	if (x->b.bytes > d->peak_bytes)
		d->peak_bytes = x->b.bytes;
	if (d->prev_ms && now_ms > d->prev_ms) {
		double r = ((double)d->prev_files - (double)x->b.files) * 1000.0 /
			   (double)(now_ms - d->prev_ms);
		if (r < 0)
			r = 0; /* landings outpace it: no estimate */
		d->rate = d->rate > 0 ? 0.7 * d->rate + 0.3 * r : r;
	}
	d->prev_files = x->b.files;
	d->prev_ms = now_ms;
}

static void human_bytes(uint64_t n, char *out, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* "  [#####-----]  50%  N files (B) left  R files/s  ETA S s", or plain key=value. */
static void print_drain(const struct qsnap *x, const struct drain *d, bool tty)
{
	int pct = d->peak_files ? (int)(100 * (d->peak_files - x->b.files) / d->peak_files) : 0;
	char eta[32] = "-", left[32];

	if (d->rate > 0)
		snprintf(eta, sizeof(eta), "%.0fs", (double)x->b.files / d->rate);
	if (!tty) {
		printf("%s left=%" PRIu64 "/%" PRIu64 " done=%d%% rate=%.1f eta=%s\n", x->q->name,
		       x->b.files, x->b.bytes, pct, d->rate, eta);
		return;
	}
	char bar[21];
	for (int i = 0; i < 20; i++)
		bar[i] = i < pct / 5 ? '#' : '-';
	bar[20] = 0;
	human_bytes(x->b.bytes, left, sizeof(left));
	printf("  [%s] %3d%%  %" PRIu64 " files (%s) left  %.1f files/s  ETA %s\n", bar, pct,
	       x->b.files, left, d->rate, eta);
}

/* One refresh: a screen on a terminal, else the plain lines after a timestamp line. */
static void print_watch(const struct snap *s, struct drain *dr, const char *datadir, bool tty)
{
	char ts[SL_TIMESTAMP_BUFSZ];

	sl_timestamp_format(s->at_ms * 1000, ts);
	if (tty)
		printf("\033[H\033[J%s  %s  (Ctrl-C quits)\n", datadir, ts);
	else
		printf("at %s\n", ts);
	printf("landing files=%" PRIu64 " bytes=%" PRIu64 " in_flight=%" PRIu64,
	       s->c.files_landed, s->c.bytes_landed, s->c.in_flight);
	print_refused(&s->c);
	if (s->refused[0])
		printf("config reload refused: %s\n", s->refused);
	for (size_t k = 0; k < s->n; k++) {
		drain_update(&dr[k], &s->qs[k], s->at_ms);
		print_query(&s->qs[k]);
		if (s->qs[k].b.files)
			print_drain(&s->qs[k], &dr[k], tty);
	}
	fflush(stdout);
}

/* The catalog, read-only; SL_NOTFOUND while the data dir has none yet. */
static int open_catalog(const char *datadir, struct sl_catalog **cat)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/catalog", datadir);
	if (stat(path, &st) != 0)
		return errno == ENOENT ? SL_NOTFOUND : errno;
	return sl_catalog_open(path, SL_CATALOG_RDONLY | SL_CATALOG_RANDOM, cat);
}

/* One snapshot: from the catalog when there is one (cat may be NULL: a new data dir). */
static int take(struct sl_catalog *cat, struct snap *s, const struct sl_config *cfg,
		const char *datadir)
{
	struct sl_txn *t = NULL;
	int rc;

	if (cat && (rc = sl_catalog_read(cat, &t)))
		return rc;
	rc = snap_read(s, t, cfg, datadir);
	sl_txn_end(t);
	return rc;
}

static int watch(struct sl_catalog **cat, struct snap *s, const struct sl_config *cfg,
		 const char *datadir, bool json)
{
	size_t n = sl_config_nqueries(cfg);
	struct drain *dr = calloc(n ? n : 1, sizeof(*dr));
	bool tty = isatty(STDOUT_FILENO);
	struct sigaction sa = {.sa_handler = on_quit};
	int rc = 0;

	if (!dr)
		return ENOMEM;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_DFL); /* `| head` ends it */
	while (!quit && rc == 0) {
		if (!*cat && (rc = open_catalog(datadir, cat)) == SL_NOTFOUND)
			rc = 0; /* not mounted yet: zeros until it is */
		if (rc == 0 && (rc = take(*cat, s, cfg, datadir)) == 0) {
			if (json)
				print_json(s);
			else
				print_watch(s, dr, datadir, tty);
			fflush(stdout);
		}
		for (int i = 0; i < 10 && !quit && rc == 0; i++) {
			struct timespec tenth = {0, 100000000};
			nanosleep(&tenth, NULL);
		}
	}
	free(dr);
	return rc;
}

/* ---- the command ---- */

struct status_opts {
	const char *datadir;
	bool prometheus, json, watch;
};

/* The options: -1 with o set, or the exit code to return. */
static int parse_args(int argc, char **argv, struct status_opts *o)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"prometheus", no_argument, NULL, 'p'},
						 {"json", no_argument, NULL, 'j'},
						 {"watch", no_argument, NULL, 'w'},
						 {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return SL_EXIT_OK;
		case 'p':
			o->prometheus = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'w':
			o->watch = true;
			break;
		default:
			usage(stderr);
			return SL_EXIT_USAGE;
		}
	}
	if (o->prometheus && (o->json || o->watch)) {
		die_msg("status", "--prometheus goes with neither --json nor --watch");
		return SL_EXIT_USAGE;
	}
	if (argc - optind != 1) {
		die_msg("status", "expected DATA_DIR (see 'sluice status --help')");
		return SL_EXIT_USAGE;
	}
	o->datadir = argv[optind];
	return -1;
}

/* Prints what o asks for; cat may be NULL (a new data dir). */
static int show(struct sl_catalog **cat, const struct sl_config *cfg, const struct status_opts *o)
{
	struct snap s = {0};
	struct sl_txn *t = NULL;
	int rc;

	s.qs = calloc(sl_config_nqueries(cfg) ? sl_config_nqueries(cfg) : 1, sizeof(*s.qs));
	if (!s.qs)
		return ENOMEM;
	if (o->watch) {
		rc = watch(cat, &s, cfg, o->datadir, o->json);
	} else if (o->prometheus) {
		struct sl_land_counters *c = calloc(1, sizeof(*c));
		rc = c ? 0 : ENOMEM;
		if (rc == 0 && *cat)
			rc = sl_catalog_read(*cat, &t);
		if (rc == 0) {
			sl_land_shared_in_flight(o->datadir, &c->in_flight);
			if (t)
				rc = sl_land_counters_read(t, c);
		}
		if (rc == 0)
			rc = print_metrics(t, cfg, o->datadir, c);
		sl_txn_end(t);
		free(c);
	} else if ((rc = take(*cat, &s, cfg, o->datadir)) == 0) {
		if (o->json)
			print_json(&s);
		else
			print_plain(&s);
	}
	free(s.qs);
	return rc;
}

int cmd_status(int argc, char **argv)
{
	struct status_opts o = {0};
	struct sl_datadir *d = NULL;
	struct sl_config *cfg = NULL;
	struct sl_catalog *cat = NULL;
	const char *what;
	char err[512];
	int rc;

	use_stderr_log();
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	rc = sl_datadir_open(o.datadir, 0, &d, &what);
	bool fresh = rc == SL_NOTFOUND; /* a new data dir: nothing landed yet */
	if (fresh)
		rc = 0;
	if (rc == SL_ENOTSLUICE) {
		die_msg("status", "'%s' is not a sluice data dir (it holds '%s')", o.datadir,
			what ? what : "?");
		return SL_EXIT_DATADIR;
	}
	if (rc) {
		die_msg("status", "cannot open data dir '%s': %s", o.datadir, sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	rc = sl_config_load(o.datadir, &cfg, err, sizeof(err));
	struct sl_reload_state reload;
	if (rc == SL_ECONFIG && sl_reload_read(o.datadir, &reload) == 0 && reload.refused[0]) {
		/*
		 * A mount refused this sluice.json and runs its old config: show
		 * the landing and the refusal (the queries' lines need a config)
		 */
		die_msg("status", "invalid config: %s", err);
		rc = sl_config_new(&cfg);
	}
	if (rc) {
		die_msg("status", "invalid config: %s", rc == SL_ECONFIG ? err : sl_strerror(rc));
		sl_datadir_close(d);
		return rc == SL_ECONFIG ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	if (!fresh && (rc = open_catalog(o.datadir, &cat))) {
		die_msg("status", "cannot open catalog of '%s': %s", o.datadir, sl_strerror(rc));
		sl_config_free(cfg);
		sl_datadir_close(d);
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	/*
	 * In flight before the catalog: a file leaves it only once its landing
	 * committed, so in_flight=0 means files= counts every closed file.
	 */
	rc = show(&cat, cfg, &o);
	if (cat)
		sl_catalog_close(cat);
	sl_config_free(cfg);
	sl_datadir_close(d);
	if (rc) {
		die_msg("status", "cannot read catalog: %s", sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	return SL_EXIT_OK;
}
