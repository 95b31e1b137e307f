/* SPDX-License-Identifier: MIT */
/*
 * The FUSE layer: maps each low-level FUSE request onto one core call.
 *
 * Why the low-level API: catalog ids serve as inode numbers, so no path
 * tree is kept in memory, lookups go straight to LMDB, and no file
 * descriptor is kept per inode (the machine caps open files at 20,000).
 * Landed files are immutable, so their entries and attributes are cached
 * for a day and their pages kept (keep_cache); rendered files (status/) are
 * produced at open and served with direct_io.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "config.h"
#include "engine.h"
#include "err.h"
#include "fs.h"
#include "render.h"
#include "trigger.h"
#include "land.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "reload.h"
#include "smeta.h"
#include "strbuf.h"
#include "view.h"

#define LONG_TIMEOUT 86400.0  /* landed files and folders: immutable or ours */
#define SHORT_TIMEOUT 1.0     /* in-flight entries: a poisoned name may vanish */

/* A name core removed, for the kernel to forget (drained by the notifier). */
struct inval {
	uint64_t parent;
	char *name;
	struct inval *next;
};

struct fs {
	const struct sl_fs_args *args;
	pthread_mutex_t inval_mu;
	pthread_cond_t inval_cv;
	struct inval *invals;      /* pending, newest first */
	bool inval_stop;
	pthread_t inval_thread;
	bool inval_running;
	struct sl_land *land;
	struct fuse_session *se;
	pthread_mutex_t cfg_mu;    /* guards config, smeta.cfg and reload */
	struct sl_config *config;  /* sluice.json, loaded in init, replaced by a reload */
	struct sl_config **old;    /* configs a reload replaced: readers may hold them */
	size_t nold;
	struct sl_reload_state reload; /* the last load's outcome (cfg_mu) */
	int reload_fd[2];          /* SIGHUP's self-pipe: read by the reload thread */
	pthread_t reload_thread;
	bool reload_running;
	struct sl_engine *engine;  /* the queries' threads */
	struct sl_notify *notify;  /* systemd's READY/WATCHDOG/STOPPING; NULL outside systemd */
	struct sl_smeta smeta;     /* out/<q>/_spark_metadata/, set in init */
	char *smeta_root;          /* smeta.root: -o sparkroot or file://<mountpoint> */
	int init_error;            /* errno when init could not open the catalog */
};

/* A rendered file's bytes, made at open. */
struct rendered {
	char *data;
	size_t len;
};

/* What a file handle (fi->fh) points at. */
struct fh {
	struct sl_handle *h;       /* a file of in/ or archive/ */
	struct rendered r;         /* or a rendered file */
	atomic_int refs;           /* 1 for the open + 1 per reply in progress */
	struct fh *prev, *next;    /* in open_fhs */
};

/*
 * Every open handle. An unmount aborts the connection, and the kernel drops
 * the RELEASEs the daemon had not read yet: fs_destroy() (run after the
 * workers stopped) releases what is left here.
 */
static pthread_mutex_t open_fhs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fh *open_fhs;

struct dent {
	char *name;
	struct sl_attr a;
};

struct dirsnap {
	struct dent *v;
	size_t n, cap;
	struct dirsnap *prev, *next; /* in open_dirs, once opened */
};

/* Every open directory handle: fs_destroy() frees those whose RELEASEDIR
 * the unmount dropped, as it does for open_fhs. */
static struct dirsnap *open_dirs;
static void snap_close(struct dirsnap *d);

static struct fh *fh_new(void)
{
	struct fh *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	atomic_init(&f->refs, 1);
	pthread_mutex_lock(&open_fhs_mu);
	f->next = open_fhs;
	if (open_fhs)
		open_fhs->prev = f;
	open_fhs = f;
	pthread_mutex_unlock(&open_fhs_mu);
	return f;
}

static void fh_free(struct fh *f)
{
	if (f->h)
		sl_land_release(f->h);
	free(f->r.data);
	free(f);
}

static void fh_put(struct fh *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	pthread_mutex_lock(&open_fhs_mu);
	if (f->prev)
		f->prev->next = f->next;
	else
		open_fhs = f->next;
	if (f->next)
		f->next->prev = f->prev;
	pthread_mutex_unlock(&open_fhs_mu);
	fh_free(f);
}

/* The handles whose RELEASE never came (see open_fhs), at the unmount. */
static void fh_release_all(void)
{
	pthread_mutex_lock(&open_fhs_mu);
	struct fh *f = open_fhs;
	open_fhs = NULL;
	pthread_mutex_unlock(&open_fhs_mu);
	while (f) {
		struct fh *next = f->next;
		fh_free(f);
		f = next;
	}
}

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static int fs_errno(int rc)
{
	if (rc >= 0)
		return rc;
	switch (rc) {
	case SL_NOTFOUND: return ENOENT;
	case SL_EMAPFULL: return ENOSPC;
	}
	return EIO;
}

/* Fixed folders outside the catalog (in/, out/ and archive/ live in it). */
static bool is_virtual_dir(fuse_ino_t ino)
{
	return ino == SL_ID_ROOT || ino == SL_ID_STATUS;
}

static bool is_catalog_root(fuse_ino_t ino)
{
	return ino == SL_ID_IN || ino == SL_ID_ARCHIVE || ino == SL_ID_OUT;
}

static void fill_stat(const struct sl_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->id;
	st->st_mode = a->mode;
	/*
	 * 1 for folders, as btrfs: tells find(1) not to count subfolders by
	 * link count; 0 for an open file whose name is gone
	 */
	st->st_nlink = a->unlinked ? 0 : 1;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	int64_t atime = a->atime_ns ? a->atime_ns : a->mtime_ns;
	st->st_atim.tv_sec = atime / 1000000000;
	st->st_atim.tv_nsec = atime % 1000000000;
	st->st_ctim.tv_sec = a->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = a->ctime_ns % 1000000000;
}

/*
 * The current config, and the smeta that reads it. A reload replaces them;
 * the configs it replaced stay until the unmount, so what a reader got
 * stays valid for its request.
 */
static const struct sl_config *config_of(struct fs *fs, struct sl_reload_state *reload)
{
	pthread_mutex_lock(&fs->cfg_mu);
	const struct sl_config *c = fs->config;
	if (reload)
		*reload = fs->reload;
	pthread_mutex_unlock(&fs->cfg_mu);
	return c;
}

static struct sl_smeta *smeta_of(struct fs *fs, struct sl_smeta *buf)
{
	pthread_mutex_lock(&fs->cfg_mu);
	*buf = fs->smeta;
	pthread_mutex_unlock(&fs->cfg_mu);
	return buf;
}

/* A copy of the current smeta, valid for the enclosing block. */
#define SMETA(fs) smeta_of((fs), &(struct sl_smeta){0})

static int render_landing(struct fs *fs, struct rendered *r)
{
	struct sl_land_counters *c = malloc(sizeof(*c));
	int rc;

	if (!c)
		return ENOMEM;
	sl_land_counters(fs->land, c);
	rc = sl_render_landing(c, &r->data, &r->len);
	free(c);
	return rc;
}

/* status/metrics: the landing's counters and every query's figures, as Prometheus text. */
static int render_metrics(struct fs *fs, struct rendered *r)
{
	struct sl_land_counters *c = malloc(sizeof(*c));
	struct sl_land_latency lat;
	struct sl_reload_state reload;
	struct timespec now;
	struct sl_txn *t;
	int rc;

	if (!c)
		return ENOMEM;
	sl_land_counters(fs->land, c);
	sl_land_latency(fs->land, &lat);
	clock_gettime(CLOCK_REALTIME, &now);
	const struct sl_config *cfg = config_of(fs, &reload);
	struct sl_metrics_input in = {.cfg = cfg, .landing = c, .latency = &lat,
				      .now_ms = now.tv_sec * 1000ll + now.tv_nsec / 1000000,
				      .reload = &reload};
	rc = sl_catalog_read(sl_land_catalog(fs->land), &t);
	if (rc == 0) {
		rc = sl_metrics_render(t, &in, &r->data, &r->len);
		sl_txn_end(t);
	}
	free(c);
	return fs_errno(rc);
}

/* The bytes of a rendered fixed node (status/landing.json, status/metrics). */
static int render_virtual(struct fs *fs, fuse_ino_t ino, struct rendered *r)
{
	return ino == SL_ID_METRICS ? render_metrics(fs, r) : render_landing(fs, r);
}

/* Attributes of the fixed nodes outside the catalog. */
static int virtual_attr(struct fs *fs, fuse_ino_t ino, struct sl_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->id = ino;
	a->mtime_ns = a->ctime_ns = 0;
	if (is_virtual_dir(ino)) {
		a->mode = S_IFDIR | 0555;
		return 0;
	}
	if (ino == SL_ID_LANDING_JSON || ino == SL_ID_METRICS) {
		struct rendered r;
		int rc = render_virtual(fs, ino, &r);
		if (rc)
			return rc;
		a->mode = S_IFREG | 0444;
		a->size = r.len;
		free(r.data);
		return 0;
	}
	return ENOENT;
}

static int get_attr(struct fs *fs, fuse_ino_t ino, struct sl_attr *a)
{
	if (sl_smeta_owns(ino))
		return fs_errno(sl_smeta_getattr(SMETA(fs), ino, a));
	if (sl_view_owns(ino))
		return fs_errno(sl_view_getattr(fs->land, ino, a));
	if (ino < SL_ID_FIRST && !is_catalog_root(ino))
		return virtual_attr(fs, ino, a);
	return fs_errno(sl_land_getattr(fs->land, ino, a));
}

/* Which namespace root a catalog id lives under (0 for fixed nodes). */
static uint64_t root_of(struct fs *fs, fuse_ino_t ino)
{
	uint64_t root = 0;
	if (is_catalog_root(ino))
		return ino;
	if (ino < SL_ID_FIRST)
		return 0;
	if (sl_land_root(fs->land, ino, &root))
		return 0;
	return root;
}

static void reply_entry(fuse_req_t req, const struct sl_attr *a, bool cache)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = a->id;
	fill_stat(a, &e.attr);
	if (cache) {
		bool dir = S_ISDIR(a->mode);
		e.entry_timeout = a->landed || dir ? LONG_TIMEOUT : SHORT_TIMEOUT;
		/* folder attributes change as producers work in them */
		e.attr_timeout = a->landed ? LONG_TIMEOUT : dir ? SHORT_TIMEOUT : 0;
	}
	fuse_reply_entry(req, &e);
}

/*
 * core's change callback: queue the name; the notifier thread tells the
 * kernel (a notify must not run inside a request that holds kernel locks).
 */
static void fs_changed(void *ctx, uint64_t parent, const char *name)
{
	struct fs *fs = ctx;
	struct inval *iv = malloc(sizeof(*iv));

	if (!iv || !(iv->name = strdup(name))) {
		free(iv);
		return; /* the entry then expires by its timeout */
	}
	iv->parent = parent;
	pthread_mutex_lock(&fs->inval_mu);
	iv->next = fs->invals;
	fs->invals = iv;
	pthread_cond_signal(&fs->inval_cv);
	pthread_mutex_unlock(&fs->inval_mu);
}

static void *inval_main(void *arg)
{
	struct fs *fs = arg;

	pthread_mutex_lock(&fs->inval_mu);
	for (;;) {
		while (!fs->invals && !fs->inval_stop)
			pthread_cond_wait(&fs->inval_cv, &fs->inval_mu);
		struct inval *list = fs->invals;
		fs->invals = NULL;
		if (!list && fs->inval_stop)
			break;
		pthread_mutex_unlock(&fs->inval_mu);
		while (list) {
			struct inval *next = list->next;
			fuse_lowlevel_notify_inval_entry(fs->se, list->parent, list->name,
							 strlen(list->name));
			free(list->name);
			free(list);
			list = next;
		}
		pthread_mutex_lock(&fs->inval_mu);
	}
	pthread_mutex_unlock(&fs->inval_mu);
	return NULL;
}

/* Spark's URIs of the parts: under -o sparkroot, or file:// and the mountpoint. */
static int smeta_init(struct fs *fs)
{
	struct sl_strbuf b = {0};

	if (fs->args->spark_root) {
		sl_strbuf_adds(&b, fs->args->spark_root);
	} else {
		sl_strbuf_adds(&b, "file://");
		sl_smeta_uri_encode(&b, fs->args->mountpoint);
	}
	sl_strbuf_addc(&b, 0);
	if (b.oom) {
		sl_strbuf_release(&b);
		return ENOMEM;
	}
	fs->smeta_root = b.p;
	fs->smeta = (struct sl_smeta){.l = fs->land, .cfg = fs->config, .root = fs->smeta_root};
	return 0;
}

/* ---- reload on SIGHUP ---- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* How many of a's queries b does not name. */
static size_t missing(const struct sl_config *a, const struct sl_config *b)
{
	size_t n = 0;

	for (size_t i = 0; i < sl_config_nqueries(a); i++) {
		const char *name = sl_config_query(a, i)->name;
		bool found = false;
		for (size_t j = 0; !found && j < sl_config_nqueries(b); j++)
			found = !strcmp(name, sl_config_query(b, j)->name);
		n += !found;
	}
	return n;
}

/* The reload's outcome, for status/metrics, `sluice status` and systemd. */
static void reload_done(struct fs *fs, const char *refused)
{
	char status[600];
	int rc;

	pthread_mutex_lock(&fs->cfg_mu);
	if (refused)
		snprintf(fs->reload.refused, sizeof(fs->reload.refused), "%s", refused);
	else {
		fs->reload.refused[0] = 0;
		fs->reload.ok_ms = now_ms();
	}
	struct sl_reload_state st = fs->reload;
	pthread_mutex_unlock(&fs->cfg_mu);
	if ((rc = sl_reload_write(fs->args->datadir, &st)))
		sl_log(SL_LOG_WARNING, "cannot write '%s/%s': %s", fs->args->datadir,
		       SL_RELOAD_FILE, sl_strerror(rc));
	if (refused)
		snprintf(status, sizeof(status), "config reload refused: %s", refused);
	else
		snprintf(status, sizeof(status), "mounted, config reloaded");
	sl_notify_reloaded(fs->notify, status);
}

/*
 * Re-reads sluice.json. Refused (invalid, or a change a checkpoint cannot
 * survive, DESIGN "Changes between starts"): logged, recorded, the old
 * config runs on. Taken: the queries stop (a batch in progress replays),
 * landing indexes with the new queries (new ones index what landed,
 * removed ones stop holding files), then the new queries start.
 */
static void fs_reload(struct fs *fs)
{
	struct sl_config *cfg = NULL;
	char err[512], why[600];
	int rc;

	sl_notify_reloading(fs->notify);
	rc = sl_config_load(fs->args->datadir, &cfg, err, sizeof(err));
	if (rc == SL_ECONFIG)
		snprintf(why, sizeof(why), "invalid config: %s", err);
	else if (rc)
		snprintf(why, sizeof(why), "cannot load config: %s", sl_strerror(rc));
	else if ((rc = sl_engine_check_changes(fs->land, cfg, err, sizeof(err))))
		snprintf(why, sizeof(why), "%s",
			 rc == SL_ECONFIG || rc == SL_ECORRUPT || rc == SL_EVERSION
				 ? err
				 : sl_strerror(rc));
	if (rc) {
		sl_log(SL_LOG_ERR, "config reload refused, the old config runs: %s", why);
		sl_config_free(cfg);
		reload_done(fs, why);
		return;
	}
	struct sl_config **old = realloc(fs->old, (fs->nold + 1) * sizeof(*old));
	if (!old) {
		sl_log(SL_LOG_ERR, "config reload refused, the old config runs: out of memory");
		sl_config_free(cfg);
		reload_done(fs, "out of memory");
		return;
	}
	fs->old = old;
	const struct sl_config *prev = config_of(fs, NULL);
	size_t added = missing(cfg, prev), removed = missing(prev, cfg);

	sl_engine_halt(fs->engine);
	if ((rc = sl_land_reload(fs->land, cfg))) {
		snprintf(why, sizeof(why), "cannot index the new queries: %s", sl_strerror(rc));
		sl_log(SL_LOG_ERR, "config reload refused, the old config runs: %s", why);
		sl_config_free(cfg);
		cfg = NULL;
	} else {
		pthread_mutex_lock(&fs->cfg_mu);
		fs->old[fs->nold++] = fs->config;
		fs->config = cfg;
		fs->smeta.cfg = cfg;
		pthread_mutex_unlock(&fs->cfg_mu);
	}
	int src = sl_engine_resume(fs->engine, config_of(fs, NULL));
	if (src)
		sl_log(SL_LOG_ERR, "cannot start the queries: %s", sl_strerror(src));
	if (!cfg) {
		reload_done(fs, why);
		return;
	}
	sl_log(SL_LOG_INFO, "config reloaded: %zu queries (added %zu, removed %zu)",
	       sl_config_nqueries(cfg), added, removed);
	reload_done(fs, NULL);
}

/* Waits for SIGHUP's bytes; several pending make one reload. 'q': unmount. */
static void *reload_main(void *arg)
{
	struct fs *fs = arg;
	char buf[64];

	(void)pthread_setname_np(pthread_self(), "sl-reload");
	for (;;) {
		ssize_t n = read(fs->reload_fd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || memchr(buf, 'q', (size_t)n))
			break;
		fs_reload(fs);
	}
	return NULL;
}

/*
 * SIGHUP's handler writes to the self-pipe: a handler may do little, and
 * the reload takes locks and threads. File scope because a handler has no
 * argument; -1 outside sl_fs_main.
 */
static int reload_signal_fd = -1;

static void on_sighup(int sig)
{
	int saved = errno;
	ssize_t w = write(reload_signal_fd, "h", 1);
	(void)sig, (void)w; /* full: a reload is pending already */
	errno = saved;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	struct sl_land_opts o = {.strict = fs->args->strict, .temp = fs->args->temp};
	int rc;

	/* write_buf: WRITE payloads arrive by splice */
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	/*
	 * libfuse splices a request only when its pipe holds max_write plus a
	 * 4 KiB header; pipes stop at /proc/sys/fs/pipe-max-size (1 MiB by
	 * default), so a 1 MiB max_write would quietly turn splicing off.
	 */
	if (conn->max_write > (1u << 20) - 4096)
		conn->max_write = (1u << 20) - 4096;
	/* landing needs every write to reach us before FLUSH: write-through */
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= FUSE_CAP_ATOMIC_O_TRUNC & conn->capable;
	/*
	 * With asynchronous direct I/O a short read returns to the reader while
	 * its other READs are still queued, so RELEASE could free a rendered
	 * file under them; rendered files are small, read them in order.
	 */
	conn->want &= ~(unsigned)FUSE_CAP_ASYNC_DIO;

	/* the catalog is opened here, after the fork of fuse_daemonize() */
	char err[512];
	rc = sl_config_load(fs->args->datadir, &fs->config, err, sizeof(err));
	if (rc == SL_ECONFIG)
		sl_log(SL_LOG_ERR, "invalid config: %s", err);
	o.config = fs->config;
	if (rc == 0)
		rc = sl_land_open(fs->args->datadir, &o, &fs->land);
	if (rc == 0 && (rc = sl_land_start(fs->land))) {
		sl_land_close(fs->land);
		fs->land = NULL;
	}
	if (rc == 0) {
		pthread_mutex_init(&fs->inval_mu, NULL);
		pthread_cond_init(&fs->inval_cv, NULL);
		fs->inval_running = pthread_create(&fs->inval_thread, NULL, inval_main, fs) == 0;
		if (fs->inval_running)
			sl_land_set_change(fs->land, fs_changed, fs);
	}
	if (rc == 0)
		rc = smeta_init(fs);
	if (rc == 0 && (rc = sl_engine_start(fs->land, fs->config, &fs->engine)) == 0)
		sl_land_set_wakeup(fs->land, sl_engine_wake, fs->engine);
	if (rc) {
		sl_log(SL_LOG_ERR, "cannot open catalog of '%s': %s", fs->args->datadir,
		       sl_strerror(rc));
		fs->init_error = fs_errno(rc);
		fuse_session_exit(fs->se);
		return;
	}
	fs->reload.ok_ms = now_ms();
	/* a refusal of the last mount's reloads is history: this config loaded */
	if ((rc = sl_reload_write(fs->args->datadir, &fs->reload)))
		sl_log(SL_LOG_WARNING, "cannot write '%s/%s': %s", fs->args->datadir,
		       SL_RELOAD_FILE, sl_strerror(rc));
	fs->reload_running = pthread_create(&fs->reload_thread, NULL, reload_main, fs) == 0;
	if (!fs->reload_running)
		sl_log(SL_LOG_WARNING, "cannot start the reload thread: SIGHUP is ignored");
	/* READY=1 waits on a thread of its own: this INIT is not answered yet */
	if ((rc = sl_notify_start(fs->notify, fs->args->mountpoint, fs->engine))) {
		sl_log(SL_LOG_ERR, "cannot start systemd notifications: %s", sl_strerror(rc));
		fs->init_error = rc;
		fuse_session_exit(fs->se);
	}
}

static void fs_destroy(void *userdata)
{
	struct fs *fs = userdata;
	/* a reload in progress ends first: it uses all of the below */
	if (fs->reload_running) {
		ssize_t w = write(fs->reload_fd[1], "q", 1);
		(void)w; /* a full pipe has a byte to wake the thread already */
		pthread_join(fs->reload_thread, NULL);
		fs->reload_running = false;
	}
	/* the notifier probes the engine: it goes before the engine does */
	sl_notify_close(fs->notify);
	fs->notify = NULL;
	/* the engine first: its batches write through the catalog */
	sl_engine_stop(fs->engine);
	fs->engine = NULL;
	if (fs->land) {
		sl_land_set_wakeup(fs->land, NULL, NULL);
		sl_land_set_change(fs->land, NULL, NULL);
	}
	if (fs->inval_running) {
		pthread_mutex_lock(&fs->inval_mu);
		fs->inval_stop = true;
		pthread_cond_signal(&fs->inval_cv);
		pthread_mutex_unlock(&fs->inval_mu);
		pthread_join(fs->inval_thread, NULL);
		fs->inval_running = false;
	}
	fh_release_all();
	while (open_dirs) /* the workers have stopped: no lock needed */
		snap_close(open_dirs);
	sl_land_close(fs->land);
	fs->land = NULL;
	sl_config_free(fs->config);
	fs->config = NULL;
	for (size_t k = 0; k < fs->nold; k++)
		sl_config_free(fs->old[k]);
	free(fs->old);
	fs->old = NULL;
	fs->nold = 0;
	free(fs->smeta_root);
	fs->smeta_root = NULL;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	static const struct {
		const char *name;
		fuse_ino_t ino;
	} top[] = {{"in", SL_ID_IN},		 {"out", SL_ID_OUT},
		   {"checkpoint", SL_ID_CHECKPOINT}, {"status", SL_ID_STATUS},
		   {"archive", SL_ID_ARCHIVE}};
	struct fs *fs = fs_of(req);
	struct sl_attr a;
	int rc = ENOENT;

	if (parent == SL_ID_ROOT) {
		for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
			if (!strcmp(name, top[i].name))
				rc = get_attr(fs, top[i].ino, &a);
	} else if (parent == SL_ID_STATUS) {
		if (!strcmp(name, "landing.json"))
			rc = virtual_attr(fs, SL_ID_LANDING_JSON, &a);
		else if (!strcmp(name, "metrics"))
			rc = virtual_attr(fs, SL_ID_METRICS, &a);
		else
			rc = fs_errno(sl_view_lookup(fs->land, parent, name, &a));
	} else if (sl_smeta_owns(parent)) {
		rc = fs_errno(sl_smeta_lookup(SMETA(fs), parent, name, &a));
	} else if (sl_view_owns(parent)) {
		rc = fs_errno(sl_view_lookup(fs->land, parent, name, &a));
	} else if (!strcmp(name, SL_SMETA_NAME) &&
		   (rc = fs_errno(sl_smeta_entry(SMETA(fs), parent, &a))) != ENOENT) {
		/* out/<q>/_spark_metadata (a view node), or the error: replied below */
	} else {
		rc = fs_errno(sl_land_lookup(fs->land, parent, name, &a));
		if (rc == ENOENT && root_of(fs, parent) == SL_ID_IN) {
			/* in/ changes only through this mount: negative entries hold */
			struct fuse_entry_param e = {.ino = 0, .entry_timeout = LONG_TIMEOUT};
			fuse_reply_entry(req, &e);
			return;
		}
		if (rc == 0) {
			reply_entry(req, &a, true);
			return;
		}
	}
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	/* fixed nodes outside in/: no long caching, core may change them */
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = a.id;
	fill_stat(&a, &e.attr);
	e.entry_timeout = SHORT_TIMEOUT;
	e.attr_timeout = a.id == SL_ID_LANDING_JSON || a.id == SL_ID_METRICS || sl_view_owns(a.id)
				 ? 0
				 : SHORT_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct sl_attr a;
	struct stat st;
	int rc;

	(void)fi;
	rc = get_attr(fs, ino, &a);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	fill_stat(&a, &st);
	fuse_reply_attr(req, &st,
			a.landed ? LONG_TIMEOUT : S_ISDIR(a.mode) ? SHORT_TIMEOUT : 0);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct sl_setattr s = {0};
	struct sl_attr a;
	struct stat st;
	int rc;

	if (root_of(fs, ino) != SL_ID_IN) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (to_set & FUSE_SET_ATTR_MODE) {
		s.flags |= SL_SET_MODE;
		s.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		s.flags |= SL_SET_UID;
		s.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		s.flags |= SL_SET_GID;
		s.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		s.flags |= SL_SET_SIZE;
		s.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		s.flags |= SL_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		s.flags |= SL_SET_MTIME;
		s.mtime_ns = attr->st_mtim.tv_sec * 1000000000ll + attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		s.flags |= SL_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		s.flags |= SL_SET_ATIME;
		s.atime_ns = attr->st_atim.tv_sec * 1000000000ll + attr->st_atim.tv_nsec;
	}
	s.caller = fuse_req_ctx(req)->uid;
	rc = sl_land_setattr(fs->land, ino, fi ? ((struct fh *)fi->fh)->h : NULL, &s, &a);
	if (rc) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	fill_stat(&a, &st);
	fuse_reply_attr(req, &st, a.landed ? LONG_TIMEOUT : 0);
}

/* Mutations: allowed in in/; archive/ allows unlink and rmdir only. */
static int writable(struct fs *fs, fuse_ino_t parent, bool removal)
{
	uint64_t root = root_of(fs, parent);
	if (root == SL_ID_IN || (removal && root == SL_ID_ARCHIVE))
		return 0;
	return EROFS;
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct fs *fs = fs_of(req);
	int rc = writable(fs, parent, false);

	(void)name, (void)mode, (void)rdev;
	if (rc == 0) {
		rc = EPERM;
		sl_land_refused(fs->land, rc);
	}
	fuse_reply_err(req, rc);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct sl_attr a;
	int rc = writable(fs, parent, false);

	if (rc == 0)
		rc = fs_errno(sl_land_mkdir(fs->land, parent, name, mode, ctx->uid, ctx->gid, &a));
	if (rc)
		fuse_reply_err(req, rc);
	else
		reply_entry(req, &a, true);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	int rc = writable(fs, parent, true);

	if (rc == 0)
		rc = fs_errno(sl_land_unlink(fs->land, parent, name));
	fuse_reply_err(req, rc);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	int rc = writable(fs, parent, true);

	if (rc == 0)
		rc = fs_errno(sl_land_rmdir(fs->land, parent, name));
	fuse_reply_err(req, rc);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link;
	fs_mknod(req, parent, name, 0, 0);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino;
	/* EPERM: OpenSSH's sftp-server then falls back to rename */
	fs_mknod(req, newparent, newname, 0, 0);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs *fs = fs_of(req);
	int rc = writable(fs, parent, false);

	if (rc == 0)
		rc = writable(fs, newparent, false);
	if (rc == 0)
		rc = fs_errno(sl_land_rename(fs->land, parent, name, newparent, newname, flags));
	fuse_reply_err(req, rc);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fh *f;
	struct sl_attr a;
	int rc = writable(fs, parent, false);

	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	f = fh_new();
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = fs_errno(sl_land_create(fs->land, parent, name, mode, ctx->uid, ctx->gid, fi->flags,
				     &f->h, &a));
	if (rc) {
		fh_put(f);
		fuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	/*
	 * Direct I/O for writers: the kernel hands us the writer's own pages
	 * instead of copying them into its cache first, so the bytes are copied
	 * once (into the blob), as natively. Landed files are cached instead.
	 */
	fi->direct_io = 1;
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = a.id;
	fill_stat(&a, &e.attr);
	e.entry_timeout = SHORT_TIMEOUT;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		fh_put(f); /* interrupted: the kernel will not release it */
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	bool landed = false;
	struct fh *f;
	int rc;

	if (is_virtual_dir(ino)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	f = fh_new();
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == SL_ID_LANDING_JSON || ino == SL_ID_METRICS) {
		rc = wr || (fi->flags & O_TRUNC) ? EROFS : render_virtual(fs, ino, &f->r);
		fi->direct_io = 1;
	} else if (sl_smeta_owns(ino)) {
		rc = wr || (fi->flags & O_TRUNC)
			     ? EROFS
			     : fs_errno(sl_smeta_read(SMETA(fs), ino, &f->r.data, &f->r.len));
		fi->direct_io = 1;
	} else if (sl_view_owns(ino)) {
		rc = wr || (fi->flags & O_TRUNC)
			     ? EROFS
			     : fs_errno(sl_view_read(fs->land, ino, &f->r.data, &f->r.len));
		fi->direct_io = 1;
	} else {
		uint64_t root = root_of(fs, ino);
		if (root != SL_ID_IN && (wr || (fi->flags & O_TRUNC)))
			rc = EROFS;
		else
			rc = fs_errno(sl_land_open_file(fs->land, ino, fi->flags, &f->h, &landed));
		/* landed bytes never change: let the kernel keep its cache */
		fi->keep_cache = landed;
		fi->direct_io = !landed && (wr || (fi->flags & O_TRUNC));
	}
	if (rc) {
		fh_put(f);
		fuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fh_put(f); /* interrupted: the kernel will not release it */
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fh *f = (struct fh *)fi->fh;
	size_t n = 0;
	char *buf;
	int rc, fd;

	(void)ino;
	if (!f->h) {
		if ((size_t)off < f->r.len)
			n = f->r.len - (size_t)off < size ? f->r.len - (size_t)off : size;
		/*
		 * The reply reaches the reader before fuse_reply_buf() returns,
		 * so a RELEASE may come in meanwhile: hold the bytes until then.
		 */
		atomic_fetch_add(&f->refs, 1);
		fuse_reply_buf(req, n ? f->r.data + off : NULL, n);
		fh_put(f);
		return;
	}
	fd = sl_land_read_fd(f->h);
	if (fd >= 0) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = fd;
		bv.buf[0].pos = off;
		fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = sl_land_read(f->h, buf, size, off, &n);
	if (rc)
		fuse_reply_err(req, fs_errno(rc));
	else
		fuse_reply_buf(req, buf, n);
	free(buf);
}

static void fs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fh *f = (struct fh *)fi->fh;
	size_t size = fuse_buf_size(in);
	ssize_t n;
	int fd = -1, rc;

	(void)ino;
	if (!f->h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	rc = sl_land_write_fd(f->h, size, off, fuse_req_ctx(req)->uid, &fd);
	if (rc) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	if (fd >= 0) {
		struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
		out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		out.buf[0].fd = fd;
		out.buf[0].pos = off;
		/* both bufvecs advance: a short copy is retried to learn its errno */
		size_t done = 0;
		n = 0;
		while (done < size) {
			n = fuse_buf_copy(&out, in, 0);
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		if (done < size && n == 0)
			n = -EIO;
		rc = sl_land_write_done(f->h, n < 0 ? 0 : size, off, n < 0 ? (int)-n : 0);
	} else {
		char *buf = malloc(size ? size : 1);
		struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		out.buf[0].mem = buf;
		n = fuse_buf_copy(&out, in, 0);
		rc = n < 0 ? (int)-n : sl_land_write(f->h, buf, (size_t)n, off);
		size = n < 0 ? 0 : (size_t)n;
		free(buf);
	}
	if (rc)
		fuse_reply_err(req, fs_errno(rc));
	else
		fuse_reply_write(req, size);
}

static void flush_replied(void *ctx, int rc)
{
	fuse_reply_err(ctx, fs_errno(rc));
}

/*
 * A FLUSH that records a file is answered from the catalog's commit thread
 * once its group is durable: the worker goes back to libfuse at once, so
 * the producers waiting on a group are not bounded by the worker count.
 */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fh *f = (struct fh *)fi->fh;
	bool pending = false;
	int rc = 0;

	(void)ino;
	if (f->h)
		rc = sl_land_flush_async(f->h, flush_replied, req, &pending);
	if (!pending)
		fuse_reply_err(req, fs_errno(rc));
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fh_put((struct fh *)fi->fh);
	fuse_reply_err(req, 0);
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fh *f = (struct fh *)fi->fh;
	(void)ino, (void)datasync;
	fuse_reply_err(req, f->h ? fs_errno(sl_land_fsync(f->h)) : 0);
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct fh *f = (struct fh *)fi->fh;
	(void)ino;
	fuse_reply_err(req, f->h ? fs_errno(sl_land_fallocate(f->h, mode, off, len)) : EROFS);
}

static int snap_add(void *ctx, const char *name, const struct sl_attr *a)
{
	struct dirsnap *d = ctx;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 32;
		struct dent *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].name = strdup(name);
	if (!d->v[d->n].name)
		return ENOMEM;
	d->v[d->n++].a = *a;
	return 0;
}

static void snap_free(struct dirsnap *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	free(d->v);
	free(d);
}

/* Unlinks an opened snapshot from open_dirs and frees it. */
static void snap_close(struct dirsnap *d)
{
	pthread_mutex_lock(&open_fhs_mu);
	if (d->prev)
		d->prev->next = d->next;
	else
		open_dirs = d->next;
	if (d->next)
		d->next->prev = d->prev;
	pthread_mutex_unlock(&open_fhs_mu);
	snap_free(d);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct dirsnap *d = calloc(1, sizeof(*d));
	struct sl_attr a;
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = get_attr(fs, ino, &a);
	if (rc == 0 && !S_ISDIR(a.mode))
		rc = ENOTDIR;
	if (rc == 0)
		rc = snap_add(d, ".", &a);
	if (rc == 0 && ino != SL_ID_ROOT) {
		struct sl_attr up;
		rc = get_attr(fs, SL_ID_ROOT, &up);
		if (rc == 0)
			rc = snap_add(d, "..", &up);
	}
	if (rc == 0 && ino == SL_ID_ROOT) {
		static const fuse_ino_t kids[] = {SL_ID_IN, SL_ID_OUT, SL_ID_CHECKPOINT,
						  SL_ID_STATUS, SL_ID_ARCHIVE};
		static const char *names[] = {"in", "out", "checkpoint", "status", "archive"};
		rc = snap_add(d, "..", &a);
		for (size_t i = 0; i < 5 && rc == 0; i++) {
			struct sl_attr k;
			rc = get_attr(fs, kids[i], &k);
			if (rc == 0)
				rc = snap_add(d, names[i], &k);
		}
	} else if (rc == 0 && ino == SL_ID_STATUS) {
		struct sl_attr k;
		rc = virtual_attr(fs, SL_ID_LANDING_JSON, &k);
		if (rc == 0)
			rc = snap_add(d, "landing.json", &k);
		if (rc == 0)
			rc = virtual_attr(fs, SL_ID_METRICS, &k);
		if (rc == 0)
			rc = snap_add(d, "metrics", &k);
		if (rc == 0)
			rc = fs_errno(sl_view_list(fs->land, ino, snap_add, d));
	} else if (rc == 0 && sl_smeta_owns(ino)) {
		rc = fs_errno(sl_smeta_list(SMETA(fs), ino, snap_add, d));
	} else if (rc == 0 && sl_view_owns(ino)) {
		rc = fs_errno(sl_view_list(fs->land, ino, snap_add, d));
	} else if (rc == 0 && !is_virtual_dir(ino)) {
		rc = fs_errno(sl_land_list(fs->land, ino, snap_add, d));
		struct sl_attr k;
		int src = rc ? rc : fs_errno(sl_smeta_entry(SMETA(fs), ino, &k));
		if (rc == 0 && src == 0)
			rc = snap_add(d, SL_SMETA_NAME, &k);
		else if (rc == 0 && src != ENOENT)
			rc = src;
	}
	if (rc) {
		snap_free(d);
		fuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)d;
	pthread_mutex_lock(&open_fhs_mu);
	d->next = open_dirs;
	if (open_dirs)
		open_dirs->prev = d;
	open_dirs = d;
	pthread_mutex_unlock(&open_fhs_mu);
	if (fuse_reply_open(req, fi) == -ENOENT)
		snap_close(d);
}

static void readdir_common(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
			   bool plus)
{
	struct dirsnap *d = (struct dirsnap *)fi->fh;
	char *buf = malloc(size);
	size_t pos = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < d->n; i++) {
		struct dent *e = &d->v[i];
		size_t need;
		if (plus) {
			struct fuse_entry_param p;
			memset(&p, 0, sizeof(p));
			p.ino = e->a.id;
			fill_stat(&e->a, &p.attr);
			bool dot = !strcmp(e->name, ".") || !strcmp(e->name, "..");
			if (!dot && e->a.id >= SL_ID_FIRST) {
				p.entry_timeout = e->a.landed || S_ISDIR(e->a.mode) ? LONG_TIMEOUT
										   : SHORT_TIMEOUT;
				p.attr_timeout = e->a.landed ? LONG_TIMEOUT : 0;
			}
			need = fuse_add_direntry_plus(req, buf + pos, size - pos, e->name, &p,
						      (off_t)i + 1);
		} else {
			struct stat st;
			fill_stat(&e->a, &st);
			need = fuse_add_direntry(req, buf + pos, size - pos, e->name, &st,
						 (off_t)i + 1);
		}
		if (need > size - pos)
			break;
		pos += need;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	readdir_common(req, size, off, fi, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)ino;
	readdir_common(req, size, off, fi, true);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	snap_close((struct dirsnap *)fi->fh);
	fuse_reply_err(req, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct statvfs sv;

	(void)ino;
	if (statvfs(fs->args->datadir, &sv)) {
		fuse_reply_err(req, errno);
		return;
	}
	sv.f_namemax = SL_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.destroy = fs_destroy,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.open = fs_open,
	.read = fs_read,
	.write_buf = fs_write_buf,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.statfs = fs_statfs,
	.create = fs_create,
	.fallocate = fs_fallocate,
	/* no xattr callbacks: ENOSYS, so the kernel stops asking */
};

/* ---- logging and the main loop ---- */

static void log_stderr(enum sl_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "sluice: %s%s\n", level <= SL_LOG_ERR ? "error: " : "", msg);
}

/* stderr connected to journald: the level as sd-daemon(3)'s "<N>" prefix. */
static void log_journal(enum sl_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "<%d>%s\n", (int)level, msg);
}

static void log_syslog(enum sl_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	syslog((int)level, "%s", msg);
}

/*
 * libfuse writes one message in several calls; this gathers them into one
 * sluice line. libfuse's log function takes no context, hence the one piece
 * of file-scope state in fs/.
 */
static struct {
	pthread_mutex_t mu;
	char buf[1024];
	size_t len;
	enum fuse_log_level level;
} fuse_line = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fuse_log_line(enum fuse_log_level level, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&fuse_line.mu);
	if (fuse_line.len == 0 || level < fuse_line.level)
		fuse_line.level = level;
	if (fuse_line.len < sizeof(fuse_line.buf) - 1) {
		int n = vsnprintf(fuse_line.buf + fuse_line.len, sizeof(fuse_line.buf) - fuse_line.len,
				  fmt, ap);
		if (n > 0)
			fuse_line.len += (size_t)n;
		if (fuse_line.len > sizeof(fuse_line.buf) - 1)
			fuse_line.len = sizeof(fuse_line.buf) - 1;
	}
	char *nl;
	while ((nl = memchr(fuse_line.buf, '\n', fuse_line.len))) {
		*nl = 0;
		if (nl > fuse_line.buf)
			sl_log(fuse_line.level <= FUSE_LOG_ERR ? SL_LOG_ERR
			       : fuse_line.level <= FUSE_LOG_WARNING ? SL_LOG_WARNING
								     : SL_LOG_INFO,
			       "%s", fuse_line.buf);
		size_t rest = fuse_line.len - (size_t)(nl + 1 - fuse_line.buf);
		memmove(fuse_line.buf, nl + 1, rest);
		fuse_line.len = rest;
	}
	pthread_mutex_unlock(&fuse_line.mu);
}

/* "subtype=sluice,fsname=PATH" with PATH's commas and backslashes escaped. */
static char *fsname_opt(const char *datadir)
{
	char *s = malloc(strlen(datadir) * 2 + 32), *p;

	if (!s)
		return NULL;
	p = s + sprintf(s, "subtype=sluice,fsname=");
	for (const char *c = datadir; *c; c++) {
		if (*c == ',' || *c == '\\')
			*p++ = '\\';
		*p++ = *c;
	}
	*p = 0;
	return s;
}

void sl_fs_print_help(void)
{
	printf("libfuse options (-o):\n");
	fuse_lowlevel_help();
}

int sl_fs_main(const struct sl_fs_args *args)
{
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc;
	struct fs fs = {.args = args, .reload_fd = {-1, -1}};
	struct sigaction hup = {.sa_handler = on_sighup, .sa_flags = SA_RESTART}, old_hup;
	int rc = 1;

	/*
	 * under systemd the journal keeps info lines too, as syslog does; so
	 * does stderr under -d, whose trace is libfuse's info lines
	 */
	if (sl_notify_stderr_is_journal())
		sl_log_set(log_journal, SL_LOG_INFO, NULL);
	else
		sl_log_set(log_stderr, args->debug ? SL_LOG_INFO : SL_LOG_WARNING, NULL);
	fuse_set_log_func(fuse_log_line);
	/* /proc/mounts shows "DATA_DIR MOUNTPOINT fuse.sluice" */
	char *fsname = fsname_opt(args->datadir);
	if (!fsname || fuse_opt_add_arg(&fa, "sluice") || fuse_opt_add_arg(&fa, "-o") ||
	    fuse_opt_add_arg(&fa, fsname) ||
	    (args->opts && *args->opts &&
	     (fuse_opt_add_arg(&fa, "-o") || fuse_opt_add_arg(&fa, args->opts))) ||
	    (args->debug && fuse_opt_add_arg(&fa, "-d"))) {
		free(fsname);
		sl_log(SL_LOG_ERR, "out of memory");
		return 1;
	}
	pthread_mutex_init(&fs.cfg_mu, NULL);
	fs.se = fuse_session_new(&fa, &fs_ops, sizeof(fs_ops), &fs);
	if (!fs.se) {
		rc = 2; /* libfuse said why: an unknown or invalid option */
		goto free_args;
	}
	/*
	 * SIGHUP reloads sluice.json: ours before libfuse's, which would unmount
	 * and which leaves a signal alone when it has a handler already
	 */
	if (pipe2(fs.reload_fd, O_CLOEXEC)) {
		sl_log(SL_LOG_ERR, "cannot make a pipe: %s", strerror(errno));
		goto destroy;
	}
	(void)fcntl(fs.reload_fd[1], F_SETFL, O_NONBLOCK);
	reload_signal_fd = fs.reload_fd[1];
	sigemptyset(&hup.sa_mask);
	if (sigaction(SIGHUP, &hup, &old_hup) || fuse_set_signal_handlers(fs.se)) {
		sl_log(SL_LOG_ERR, "cannot install signal handlers");
		goto destroy;
	}
	if (fuse_session_mount(fs.se, args->mountpoint)) {
		sl_log(SL_LOG_ERR, "cannot mount '%s'", args->mountpoint);
		goto remove_handlers;
	}
	if (!args->foreground) {
		openlog("sluice", LOG_PID, LOG_DAEMON);
		sl_log_set(log_syslog, SL_LOG_INFO, NULL);
		sl_console_set(NULL, NULL); /* stdout is gone: the console sink logs */
	}
	if (fuse_daemonize(args->foreground)) {
		sl_log(SL_LOG_ERR, "cannot daemonize");
		goto unmount;
	}
	/* after the fork: systemd takes notifications from its main process */
	if (sl_notify_open(&fs.notify)) {
		sl_log(SL_LOG_ERR, "out of memory");
		goto unmount;
	}
	lc = fuse_loop_cfg_create();
	if (!lc) {
		sl_log(SL_LOG_ERR, "out of memory");
		goto unmount;
	}
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_idle_threads(lc, 10);
	/*
	 * A FLUSH no longer holds its worker while its group commits (it is
	 * answered from the commit thread), but an fsync, a rename or a
	 * RELEASE that seals still does: with libfuse's default of 10 workers,
	 * producers past the tenth waited in the kernel and missed the group
	 * (measured when FLUSH held one: 16 producers 0.35 flushes per file
	 * with 10, 0.23 with 64; 32 producers 0.33 and 0.17).
	 */
	fuse_loop_cfg_set_max_threads(lc, 64);
	/* a positive value is the signal that ended the loop: a clean stop */
	rc = fuse_session_loop_mt(fs.se, lc) < 0 ? 1 : 0;
	sl_notify_stopping(fs.notify);
	fuse_loop_cfg_destroy(lc);
	if (fs.init_error)
		rc = 1;
unmount:
	fuse_session_unmount(fs.se);
remove_handlers:
	fuse_remove_signal_handlers(fs.se);
	sigaction(SIGHUP, &old_hup, NULL);
destroy:
	fuse_session_destroy(fs.se);
	reload_signal_fd = -1;
	if (fs.reload_fd[0] >= 0) {
		close(fs.reload_fd[0]);
		close(fs.reload_fd[1]);
	}
	sl_notify_close(fs.notify); /* when no INIT came, fs_destroy did not run */
free_args:
	fuse_opt_free_args(&fa);
	free(fsname);
	pthread_mutex_destroy(&fs.cfg_mu);
	return rc;
}
