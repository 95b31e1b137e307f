/* SPDX-License-Identifier: MIT */
/*
 * Opening and closing the landing namespace: recovery (recorded files land
 * at their recorded length, unsettled blobs no record names go), the
 * orderly close, and `sluice land` of local files.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "err.h"
#include "land.h"
#include "land_int.h"
#include "log.h"
#include "qindex.h"
#include "temp.h"

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

struct ids {
	uint64_t *v;
	size_t n, cap;
};

static int collect(void *ctx, uint64_t id)
{
	struct ids *ids = ctx;
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		uint64_t *v = realloc(ids->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

struct recover {
	struct sl_land *l;
	struct ids ids;     /* recorded files to land */
	struct ids bad;     /* records whose bytes are gone: dropped */
	int64_t now;
	size_t landed;
};

static int recover_apply(struct sl_txn *t, void *arg)
{
	struct recover *r = arg;
	int rc;

	r->landed = 0;
	for (size_t k = 0; k < r->bad.n; k++)
		if ((rc = land_cancel(t, r->bad.v[k])))
			return rc;
	for (size_t k = 0; k < r->ids.n; k++) {
		struct sl_inode i;
		rc = sl_txn_inode_get(t, r->ids.v[k], &i);
		if (rc == SL_NOTFOUND) {
			rc = sl_txn_pending_del(t, r->ids.v[k]);
			if (rc)
				return rc;
			continue;
		}
		if (rc)
			return rc;
		if (i.state != SL_STATE_RECORDED) {
			if ((rc = sl_txn_pending_del(t, i.id)))
				return rc;
			continue;
		}
		i.landed_ns = r->now;
		if ((rc = land_in_txn(r->l, t, &i)) || (rc = sl_txn_inode_put(t, &i)))
			return rc;
		r->landed++;
	}
	return 0;
}

/* Recorded files land at their last recorded length. */
static int land_recorded(struct sl_land *l)
{
	struct recover r = {.l = l, .now = now_ns()};
	struct sl_txn *t;
	int rc;

	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	rc = sl_txn_pending_each(t, collect, &r.ids);
	/* blob-backed records: cut bytes written after the record */
	for (size_t k = 0; rc == 0 && k < r.ids.n; k++) {
		struct sl_inode i;
		int fd;
		if (sl_txn_inode_get(t, r.ids.v[k], &i) || i.storage != SL_STORE_BLOB ||
		    i.state != SL_STATE_RECORDED)
			continue;
		int e = sl_blob_open(l->blobs, i.id, O_RDWR, &fd);
		if (e == 0) {
			struct stat st;
			if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < i.size)
				e = SL_ECORRUPT; /* cut below its record after the close */
			else if (ftruncate(fd, (off_t)i.size) || fsync(fd))
				e = errno;
			close(fd);
		}
		if (e == SL_ECORRUPT || e == ENOENT) {
			/* one lost file must not keep the mount down: drop its record */
			sl_log(SL_LOG_ERR, "cannot recover '%s' (id %" PRIu64 "): %s: dropped", i.name,
			       i.id, e == ENOENT ? "its blob is gone" : "its blob is short");
			r.ids.v[k] = r.ids.v[--r.ids.n];
			k--;
			rc = collect(&r.bad, i.id);
		} else {
			rc = e;
		}
	}
	sl_txn_end(t);
	if (rc == 0 && (r.ids.n || r.bad.n))
		rc = sl_catalog_write(l->cat, recover_apply, &r);
	if (rc == 0 && r.landed)
		sl_log(SL_LOG_INFO, "recovery landed %zu recorded file(s)", r.landed);
	free(r.ids.v);
	free(r.bad.v);
	return rc;
}

/*
 * Blobs of ids handed out by a process that did not close cleanly, and
 * that no record names, are staged bytes of files that never landed.
 */
static int probe_blobs(struct sl_land *l)
{
	uint64_t lo, hi;
	struct sl_txn *t;
	size_t removed = 0;
	int rc;

	sl_catalog_unsettled(l->cat, &lo, &hi);
	if (lo >= hi)
		return 0;
	if ((rc = sl_catalog_read(l->cat, &t)))
		return rc;
	for (uint64_t id = lo; id < hi && rc == 0; id++) {
		struct sl_inode i;
		int e = sl_blob_exists(l->blobs, id);
		if (e < 0)
			rc = -e;
		if (e <= 0)
			continue;
		int g = sl_txn_inode_get(t, id, &i);
		if (g == 0 && i.storage == SL_STORE_BLOB && i.kind == SL_KIND_FILE)
			continue;
		if (g && g != SL_NOTFOUND) {
			rc = g;
			break;
		}
		rc = sl_blob_unlink(l->blobs, id);
		removed++;
	}
	sl_txn_end(t);
	if (rc == 0) {
		sl_catalog_settle(l->cat, hi);
		if (removed)
			sl_log(SL_LOG_INFO, "removed %zu blob(s) of files that never landed", removed);
	}
	return rc;
}

/*
 * The shared page: `sluice status` reads filesInFlight from the lock file
 * while a mount runs, without a lock and without a commit per change.
 *   OFFSET SIZE MEANING
 *   0      8    magic SL_SHARED_MAGIC
 *   8      8    files in flight (atomic, host order)
 *   16     8*13 landing commits per latency bucket (sl_land_latency_bounds_us)
 *   120    8    their total latency (ns)
 * Both counts are reset by each process that opens the landing.
 */
#define SHARED_LATENCY 16

static void map_shared(struct sl_land *l, const char *datadir)
{
	char path[4096];
	struct stat st;
	void *p;
	int fd;

	l->in_flight = &l->in_flight_local;
	l->latency = l->latency_local;
	snprintf(path, sizeof(path), "%s/lock", datadir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && (st.st_size >= SL_SHARED_SIZE || ftruncate(fd, SL_SHARED_SIZE) == 0)) {
		p = mmap(NULL, SL_SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			l->shared = p;
			*(uint64_t *)p = SL_SHARED_MAGIC;
			l->in_flight = (atomic_ulong *)((char *)p + 8);
			atomic_store(l->in_flight, 0);
			l->latency = (atomic_ulong *)((char *)p + SHARED_LATENCY);
			for (size_t b = 0; b <= SL_LAND_LAT_NBUCKET; b++)
				atomic_store(&l->latency[b], 0);
		}
	}
	close(fd);
}

int sl_land_open(const char *datadir, const struct sl_land_opts *opts, struct sl_land **out)
{
	struct sl_land *l;
	char path[4096];
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return ENOMEM;
	l->by_id = calloc(LAND_NBUCKET, sizeof(*l->by_id));
	l->by_name = calloc(LAND_NBUCKET, sizeof(*l->by_name));
	if (!l->by_id || !l->by_name) {
		rc = ENOMEM;
		goto free_l;
	}
	l->strict = opts && opts->strict;
	if (!(l->datadir = realpath(datadir, NULL))) {
		rc = errno;
		goto free_l;
	}
	map_shared(l, datadir);
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&l->op, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->sweeper_cv, NULL);
	pthread_cond_init(&l->records_cv, NULL);
	l->abandon_ns = SL_TEMP_ABANDON_NS;
	/* tests shorten the hour (not a user option: DESIGN fixes it) */
	const char *ab = getenv("SLUICE_TEMP_ABANDON_MS");
	if (ab && atoll(ab) > 0)
		l->abandon_ns = atoll(ab) * 1000000ll;
	if ((rc = sl_temp_new(opts ? opts->temp : NULL, &l->temp)))
		goto free_l;
	snprintf(path, sizeof(path), "%s/catalog", datadir);
	if ((rc = sl_catalog_open(path, 0, &l->cat)))
		goto free_temp;
	if ((rc = sl_blobs_open(datadir, 0, &l->blobs)))
		goto close_cat;
	/* before recovery: what recovery lands is indexed like any landing */
	if ((rc = sl_qindex_open(l->cat, opts ? opts->config : NULL, &l->sources)))
		goto close_blobs;
	if ((rc = land_recorded(l)) || (rc = probe_blobs(l)))
		goto close_blobs;

	struct sl_txn *t;
	if ((rc = sl_catalog_read(l->cat, &t)))
		goto close_blobs;
	rc = sl_txn_meta_each(t, "refused.", land_load_refused, l);
	sl_txn_end(t);
	if (rc)
		goto close_blobs;
	sl_catalog_set_hooks(l->cat, land_lowest_live, land_counters_apply, l);
	*out = l;
	return 0;

close_blobs:
	sl_qindex_free(l->sources);
	sl_blobs_close(l->blobs);
close_cat:
	sl_catalog_close(l->cat);
free_temp:
	sl_temp_free(l->temp);
free_l:
	if (l->shared)
		munmap(l->shared, SL_SHARED_SIZE);
	free(l->by_id);
	free(l->by_name);
	free(l->datadir);
	free(l);
	return rc;
}

int sl_land_reload(struct sl_land *l, const struct sl_config *cfg)
{
	return sl_qindex_reload(l->sources, l->cat, cfg);
}

/*
 * Counts (once) and logs the temp-named files released longer than
 * abandon_ns ago and never renamed: the upload that never finished.
 */
static void *sweeper_main(void *arg)
{
	struct sl_land *l = arg;
	int64_t every = l->abandon_ns / 4;

	if (every > 60ll * 1000000000ll)
		every = 60ll * 1000000000ll;
	if (every < 10000000)
		every = 10000000;
	pthread_mutex_lock(&l->mu);
	while (!l->sweeper_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t at = ts.tv_sec * 1000000000ll + ts.tv_nsec + every;
		ts.tv_sec = at / 1000000000;
		ts.tv_nsec = at % 1000000000;
		pthread_cond_timedwait(&l->sweeper_cv, &l->mu, &ts);
		if (l->sweeper_stop)
			break;
		int64_t now = land_now_ns();
		size_t found = 0;
		for (size_t b = 0; b < LAND_NBUCKET; b++)
			for (struct node *n = l->by_name[b]; n; n = n->name_next) {
				if (!n->named || n->landed || n->publishing || n->writers ||
				    n->abandoned || !n->released_ns ||
				    now - n->released_ns < l->abandon_ns)
					continue;
				n->abandoned = true;
				found++;
				sl_log(SL_LOG_WARNING,
				       "'%s' (id %" PRIu64 "): temporary file released %" PRId64
				       " s ago and never renamed: counted in tempAbandoned",
				       n->name, n->id, (now - n->released_ns) / 1000000000);
			}
		l->temp_abandoned_new += found;
		if (found) {
			/* the counter rides a commit, so status shows it at once */
			pthread_mutex_unlock(&l->mu);
			land_commit_now(l);
			pthread_mutex_lock(&l->mu);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int sl_land_start(struct sl_land *l)
{
	int rc = sl_catalog_start(l->cat);

	if (rc == 0)
		l->sweeper_running = pthread_create(&l->sweeper, NULL, sweeper_main, l) == 0;
	return rc;
}

void sl_land_set_wakeup(struct sl_land *l, void (*fn)(void *ctx), void *ctx)
{
	l->on_land = fn;
	l->on_land_ctx = ctx;
}

void sl_land_close(struct sl_land *l)
{
	if (!l)
		return;
	if (l->sweeper_running) {
		pthread_mutex_lock(&l->mu);
		l->sweeper_stop = true;
		pthread_cond_signal(&l->sweeper_cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->sweeper, NULL);
	}
	/*
	 * Publishes still queued hold nodes: let them commit before the nodes
	 * go (a forced commit takes the lazy requests along).
	 */
	for (int i = 0; atomic_load(&l->publishing) && i < 5000; i++) {
		land_commit_now(l);
		if (atomic_load(&l->publishing))
			usleep(1000);
	}
	land_drop_nodes(l);
	/* every id handed out is accounted for now */
	sl_catalog_settle(l->cat, UINT64_MAX);
	sl_catalog_close(l->cat);
	sl_qindex_free(l->sources);
	sl_blobs_close(l->blobs);
	sl_temp_free(l->temp);
	land_dir_times_free(l);
	pthread_rwlock_destroy(&l->op);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->sweeper_cv);
	pthread_cond_destroy(&l->records_cv);
	if (l->shared) {
		atomic_store(l->in_flight, 0);
		munmap(l->shared, SL_SHARED_SIZE);
	}
	free(l->by_id);
	free(l->by_name);
	free(l->datadir);
	free(l);
}

const char *sl_land_datadir(const struct sl_land *l)
{
	return l->datadir;
}

/* ---- sluice land ---- */

struct mkdir_p {
	uint64_t parent;
	struct sl_inode ino;
};

static int mkdir_p_apply(struct sl_txn *t, void *arg)
{
	struct mkdir_p *m = arg;
	int rc = sl_txn_inode_put(t, &m->ino);
	if (rc)
		return rc;
	return sl_txn_dirent_put(t, m->ino.parent, m->ino.name, m->ino.id);
}

/* Resolves (creating) folder `to` under in/; EINVAL when it leaves in/. */
static int resolve_to(struct sl_land *l, const char *to, uint64_t *dir)
{
	char *copy, *save = NULL;
	uint64_t cur = SL_ID_IN;
	int rc = 0;

	if (!to || !*to) {
		*dir = cur;
		return 0;
	}
	if (to[0] == '/')
		return EINVAL;
	copy = strdup(to);
	if (!copy)
		return ENOMEM;
	for (char *c = strtok_r(copy, "/", &save); c && rc == 0; c = strtok_r(NULL, "/", &save)) {
		struct sl_txn *t;
		struct sl_inode i;
		uint64_t id;
		if (!strcmp(c, ".") || !strcmp(c, "..") || strlen(c) > SL_NAME_MAX) {
			rc = EINVAL;
			break;
		}
		if ((rc = sl_catalog_read(l->cat, &t)))
			break;
		rc = sl_txn_dirent_get(t, cur, c, &id);
		if (rc == 0)
			rc = sl_txn_inode_get(t, id, &i);
		sl_txn_end(t);
		if (rc == 0) {
			if (i.kind != SL_KIND_DIR)
				rc = ENOTDIR;
			cur = id;
			continue;
		}
		if (rc != SL_NOTFOUND)
			break;
		struct mkdir_p m = {0};
		if ((rc = sl_catalog_next_id(l->cat, &m.ino.id)))
			break;
		m.ino.parent = cur;
		m.ino.kind = SL_KIND_DIR;
		m.ino.mode = S_IFDIR | 0755;
		m.ino.uid = getuid();
		m.ino.gid = getgid();
		m.ino.mtime_ns = m.ino.ctime_ns = now_ns();
		strcpy(m.ino.name, c);
		rc = sl_catalog_write(l->cat, mkdir_p_apply, &m);
		cur = m.ino.id;
	}
	free(copy);
	if (rc == 0)
		*dir = cur;
	return rc;
}

static int copy_fd(int in, int out, uint64_t size)
{
	char buf[1 << 16];
	uint64_t done = 0;

	while (done < size) {
		ssize_t r = read(in, buf, sizeof(buf));
		if (r < 0)
			return errno;
		if (r == 0)
			return EIO; /* shrank while copying */
		for (ssize_t w = 0; w < r;) {
			ssize_t n = write(out, buf + w, (size_t)(r - w));
			if (n < 0)
				return errno;
			w += n;
		}
		done += (uint64_t)r;
	}
	return 0;
}

int sl_land_local(struct sl_land *l, const char *src, const char *to)
{
	struct rec r;
	struct stat st;
	char *copy, *name;
	int in, out = -1, rc;

	copy = strdup(src);
	if (!copy)
		return ENOMEM;
	name = basename(copy);
	memset(&r, 0, sizeof(r));
	if (strlen(name) > SL_NAME_MAX) {
		rc = ENAMETOOLONG;
		goto free_copy;
	}
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || sl_temp_match(l->temp, name)) {
		rc = EINVAL;
		goto free_copy;
	}
	strcpy(r.ino.name, name);
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = errno;
		goto free_copy;
	}
	if (fstat(in, &st)) {
		rc = errno;
		goto close_in;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = EISDIR;
		goto close_in;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = EINVAL;
		goto close_in;
	}
	if ((rc = resolve_to(l, to, &r.ino.parent)))
		goto close_in;
	{
		struct sl_txn *t;
		uint64_t other;
		bool temp = false;
		if ((rc = sl_catalog_read(l->cat, &t)))
			goto close_in;
		rc = sl_txn_dirent_get(t, r.ino.parent, name, &other) == 0 ? EEXIST : 0;
		if (rc == 0) {
			/* a temp folder in --to makes the whole path temporary */
			uint64_t p = r.ino.parent;
			struct sl_inode d;
			while (rc == 0 && p != SL_ID_IN && !temp) {
				rc = sl_txn_inode_get(t, p, &d);
				temp = rc == 0 && sl_temp_match(l->temp, d.name);
				p = d.parent;
			}
			if (rc == 0 && temp)
				rc = EINVAL;
		}
		sl_txn_end(t);
		if (rc)
			goto close_in;
	}
	if ((rc = sl_catalog_next_id(l->cat, &r.ino.id)))
		goto close_in;
	r.ino.kind = SL_KIND_FILE;
	r.ino.mode = S_IFREG | (st.st_mode & 07777);
	r.ino.uid = st.st_uid;
	r.ino.gid = st.st_gid;
	r.ino.mtime_ns = st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	r.ino.ctime_ns = now_ns();
	r.ino.size = (uint64_t)st.st_size;
	r.ino.landed_ns = now_ns();
	r.land = true;
	r.excl = true;
	r.l = l;
	if (r.ino.size <= SL_INLINE_MAX) {
		r.ino.storage = SL_STORE_INLINE;
		r.data = malloc(r.ino.size ? r.ino.size : 1);
		if (!r.data) {
			rc = ENOMEM;
			goto close_in;
		}
		ssize_t got = pread(in, r.data, r.ino.size, 0);
		if (got != (ssize_t)r.ino.size) {
			rc = got < 0 ? errno : EIO;
			goto close_in;
		}
	} else {
		r.ino.storage = SL_STORE_BLOB;
		if ((rc = sl_blob_create(l->blobs, r.ino.id, &out)))
			goto close_in;
		rc = copy_fd(in, out, r.ino.size);
		if (rc == 0 && fsync(out))
			rc = errno;
		if (rc == 0)
			rc = sl_blob_sync_name(l->blobs, r.ino.id);
		if (rc)
			goto unlink_blob;
	}
	int64_t start = land_mono_ns();
	rc = sl_catalog_write(l->cat, land_rec_apply, &r);
	if (rc == 0) {
		land_latency_observe(l, start);
		goto close_in;
	}
unlink_blob:
	if (out >= 0)
		sl_blob_unlink(l->blobs, r.ino.id);
close_in:
	if (out >= 0)
		close(out);
	close(in);
free_copy:
	free(r.data);
	free(copy);
	return rc;
}

int sl_land_shared_in_flight(const char *datadir, uint64_t *out)
{
	uint64_t page[2];
	char path[4096];
	int fd;

	*out = 0;
	snprintf(path, sizeof(path), "%s/lock", datadir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	if (pread(fd, page, sizeof(page), 0) == sizeof(page) && page[0] == SL_SHARED_MAGIC)
		*out = page[1];
	close(fd);
	return 0;
}

int sl_land_shared_latency(const char *datadir, struct sl_land_latency *out)
{
	uint64_t page[SHARED_LATENCY / 8 + SL_LAND_LAT_NBUCKET + 1];
	char path[4096];
	int fd;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/lock", datadir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	if (pread(fd, page, sizeof(page), 0) == sizeof(page) && page[0] == SL_SHARED_MAGIC) {
		memcpy(out->count, page + SHARED_LATENCY / 8, sizeof(out->count));
		out->sum_ns = page[SHARED_LATENCY / 8 + SL_LAND_LAT_NBUCKET];
	}
	close(fd);
	return 0;
}

struct sl_catalog *sl_land_catalog(struct sl_land *l)
{
	return l->cat;
}

struct sl_blobs *sl_land_blobs(struct sl_land *l)
{
	return l->blobs;
}
