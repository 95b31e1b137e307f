/* SPDX-License-Identifier: MIT */
/*
 * A simulated power loss for one process's data dir (LD_PRELOAD; tests only).
 *
 * kill -9 leaves the page cache intact, so it cannot show that what sluice
 * acknowledged was on the disk. This shim keeps, beside the data dir, the
 * image the disk would hold after a power cut: the state made durable by
 * the process's syncs, and nothing else. At the chosen durable operation it
 * "cuts the power": it stops the process (SIGKILL) before that operation
 * runs. tests/integration/powerloss.py then rebuilds the data dir from the
 * image and a new sluice starts on it.
 *
 * The model (strict POSIX, no file-system kindness):
 *   - fsync/fdatasync of a regular file makes its bytes and size durable
 *     (the content is taken after the sync returns);
 *   - a write through an O_DSYNC/O_SYNC descriptor makes that range durable
 *     (LMDB writes its meta page that way: it never uses MDB_WRITEMAP here);
 *   - fsync of a folder makes its entries (name -> file) durable; a name
 *     created, renamed or unlinked is otherwise not;
 *   - syncfs/sync makes everything durable;
 *   - writes are seen through write, pwrite, writev, pwritev, splice (how
 *     libfuse moves a WRITE's payload), copy_file_range and sendfile;
 *   - everything else (write, pwrite, truncate, rename, unlink, mkdir,
 *     writes through a shared mapping, sync_file_range) is lost;
 *   - a file whose name is durable but whose bytes never were is empty.
 * Files are told apart by inode number and birth time (an inode number is
 * reused after an unlink).
 *
 * Environment:
 *   PL_DATA    the data dir (it exists; its state at start is durable)
 *   PL_SHADOW  an empty folder outside it, for the image:
 *                root            the data dir's key
 *                dir/KEY         a folder's durable entries: "TYPE KEY MODE NAME"
 *                ino/KEY         a file's durable bytes
 *                ops.log         one line per durable operation: "N KIND PATH"
 *                cut             the operation at which the power went
 *   PL_CUT     N: lose power at the Nth durable operation (0 or unset: never)
 *   PL_TORN    SEED: at the cut, each page written since its file's last sync
 *              reaches the image or not, by a coin (seeded): a disk's
 *              writeback cut short lands some pages and not others, in no
 *              order. Sizes and folder entries stay as last synced. Unset:
 *              none of them does (the model above).
 *
 * Durable operations are counted in the order they start; the cut stops the
 * process under the lock that every image update takes, so the image is
 * whole, and no later sync can complete, hence no later acknowledgement.
 */
/* the plain and the 64-bit names are both interposed: no redirection */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096
#define NBUCKET 4096

#define REAL(ret, name, ...)                                                                       \
	static ret (*real_##name)(__VA_ARGS__);                                                    \
	static void load_##name(void)                                                              \
	{                                                                                          \
		if (!real_##name)                                                                  \
			*(void **)&real_##name = dlsym(RTLD_NEXT, #name);                          \
	}

REAL(ssize_t, write, int, const void *, size_t)
REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
REAL(ssize_t, pwrite64, int, const void *, size_t, off_t)
REAL(ssize_t, writev, int, const struct iovec *, int)
REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t)
REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t)
REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int)
REAL(ssize_t, splice, int, loff_t *, int, loff_t *, size_t, unsigned)
REAL(ssize_t, copy_file_range, int, loff_t *, int, loff_t *, size_t, unsigned)
REAL(ssize_t, sendfile, int, int, off_t *, size_t)
REAL(ssize_t, sendfile64, int, int, off_t *, size_t)
REAL(int, fsync, int)
REAL(int, fdatasync, int)
REAL(int, syncfs, int)
REAL(void, sync, void)
REAL(int, ftruncate, int, off_t)
REAL(int, ftruncate64, int, off_t)
REAL(int, truncate, const char *, off_t)
REAL(int, truncate64, const char *, off_t)
REAL(int, fallocate, int, int, off_t, off_t)
REAL(int, fallocate64, int, int, off_t, off_t)
REAL(int, open, const char *, int, ...)
REAL(int, open64, const char *, int, ...)
REAL(int, openat, int, const char *, int, ...)
REAL(int, openat64, int, const char *, int, ...)
REAL(void *, mmap, void *, size_t, int, int, int, off_t)
REAL(void *, mmap64, void *, size_t, int, int, int, off_t)

struct pfile {
	uint64_t ino;
	int64_t bsec;
	uint32_t bnsec;
	int in;		/* 1: under the data dir, 0: not */
	uint8_t *dirty; /* one byte per page written since its last sync */
	size_t npages;
	off_t low; /* smallest size since its last sync */
	bool has_low;
	struct pfile *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool active;
static char data[PATH_MAX];
static size_t data_len;
static dev_t data_dev;
static char shadow[PATH_MAX];
static long cut_at, nops;
static uint64_t torn; /* PL_TORN's coin state; 0: no tearing */
static struct pfile *buckets[NBUCKET];

static void die(const char *what)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "powerloss: %s: %s\n", what, strerror(errno));
	load_write();
	real_write(2, msg, (size_t)n);
	abort();
}

/* ---- files: identity and whether they are the data dir's ---- */

static bool ident(int fd, const char *path, int dirfd, struct statx *sx)
{
	if (path)
		return statx(dirfd, path, AT_SYMLINK_NOFOLLOW,
			     STATX_INO | STATX_BTIME | STATX_TYPE | STATX_MODE, sx) == 0;
	return statx(fd, "", AT_EMPTY_PATH,
		     STATX_INO | STATX_BTIME | STATX_TYPE | STATX_MODE | STATX_SIZE, sx) == 0;
}

static void key_of(const struct statx *sx, char *buf, size_t n)
{
	snprintf(buf, n, "%" PRIu64 "-%" PRId64 "-%" PRIu32, (uint64_t)sx->stx_ino,
		 (int64_t)sx->stx_btime.tv_sec, sx->stx_btime.tv_nsec);
}

static bool fd_path_in(int fd)
{
	char link[64], p[PATH_MAX + 16];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, p, sizeof(p) - 1);
	if (n < 0)
		return false;
	p[n] = 0;
	return strncmp(p, data, data_len) == 0 && (p[data_len] == '/' || p[data_len] == 0);
}

/* The record of the file behind fd, with mu held; NULL when it is not ours. */
static struct pfile *lookup(int fd, struct statx *sx)
{
	if (!ident(fd, NULL, 0, sx))
		return NULL;
	if ((dev_t)makedev(sx->stx_dev_major, sx->stx_dev_minor) != data_dev)
		return NULL;
	if (!S_ISREG(sx->stx_mode) && !S_ISDIR(sx->stx_mode))
		return NULL;
	size_t b = (sx->stx_ino * 2654435761u) % NBUCKET;
	for (struct pfile *f = buckets[b]; f; f = f->next)
		if (f->ino == sx->stx_ino && f->bsec == sx->stx_btime.tv_sec &&
		    f->bnsec == sx->stx_btime.tv_nsec)
			return f->in ? f : NULL;
	struct pfile *f = calloc(1, sizeof(*f));
	if (!f)
		die("calloc");
	f->ino = sx->stx_ino;
	f->bsec = sx->stx_btime.tv_sec;
	f->bnsec = sx->stx_btime.tv_nsec;
	f->in = fd_path_in(fd);
	f->next = buckets[b];
	buckets[b] = f;
	return f->in ? f : NULL;
}

static void mark(struct pfile *f, off_t off, size_t len)
{
	if (len == 0)
		return;
	size_t last = (size_t)((off + (off_t)len - 1) / PAGE);
	if (last >= f->npages) {
		size_t n = f->npages ? f->npages : 64;
		while (n <= last)
			n *= 2;
		uint8_t *d = realloc(f->dirty, n);
		if (!d)
			die("realloc");
		memset(d + f->npages, 0, n - f->npages);
		f->dirty = d;
		f->npages = n;
	}
	memset(f->dirty + off / PAGE, 1, last - (size_t)(off / PAGE) + 1);
}

/* ---- the image ---- */

static void spath(char *buf, size_t n, const char *sub, const char *key)
{
	snprintf(buf, n, "%s/%s/%s", shadow, sub, key);
}

static void put_all(int fd, const void *p, size_t n, off_t off)
{
	load_pwrite();
	while (n) {
		ssize_t w = real_pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("image write");
		}
		p = (const char *)p + w;
		n -= (size_t)w;
		off += w;
	}
}

/* Copies [off, off+len) of the file open as src into its image. */
static void copy_range(int img, int src, off_t off, off_t len)
{
	char buf[65536];
	while (len > 0) {
		ssize_t r =
		    pread(src, buf, len < (off_t)sizeof(buf) ? (size_t)len : sizeof(buf), off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("pread");
		}
		if (r == 0)
			break;
		put_all(img, buf, (size_t)r, off);
		off += r;
		len -= r;
	}
}

static int open_image(const struct statx *sx)
{
	char key[96], p[PATH_MAX + 128];
	key_of(sx, key, sizeof(key));
	spath(p, sizeof(p), "ino", key);
	load_open();
	int img = real_open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (img < 0)
		die("open image");
	return img;
}

static int reopen(int fd)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	load_open();
	int r = real_open(link, O_RDONLY | O_CLOEXEC);
	if (r < 0)
		die("reopen");
	return r;
}

/* The file's bytes as they are now become its durable bytes (with mu held). */
static void sync_file(struct pfile *f, int fd, bool whole)
{
	struct statx sx;
	if (!ident(fd, NULL, 0, &sx))
		die("statx");
	int img = open_image(&sx), src = reopen(fd);
	load_ftruncate();
	off_t size = (off_t)sx.stx_size;
	if (whole) {
		real_ftruncate(img, 0);
		real_ftruncate(img, size);
		copy_range(img, src, 0, size);
	} else {
		if (f->has_low)
			real_ftruncate(img, f->low < size ? f->low : size);
		real_ftruncate(img, size);
		for (size_t i = 0; i < f->npages; i++) {
			if (!f->dirty[i] || (off_t)(i * PAGE) >= size)
				continue;
			size_t j = i;
			while (j < f->npages && f->dirty[j])
				j++;
			copy_range(img, src, (off_t)(i * PAGE), (off_t)((j - i) * PAGE));
			i = j;
		}
	}
	if (f) {
		if (f->npages) /* dirty is NULL until a page is written */
			memset(f->dirty, 0, f->npages);
		f->has_low = false;
	}
	close(img);
	close(src);
}

/* The folder's entries as they are now become durable (with mu held). */
static void sync_dir(int dfd)
{
	struct statx sx, ex;
	char key[96], ekey[96], p[PATH_MAX + 128], tmp[PATH_MAX + 140];
	if (!ident(dfd, NULL, 0, &sx))
		die("statx dir");
	key_of(&sx, key, sizeof(key));
	spath(p, sizeof(p), "dir", key);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	load_openat();
	int d = real_openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d < 0 ? NULL : fdopendir(d);
	if (!dir)
		die("opendir");
	FILE *out = fopen(tmp, "we");
	if (!out)
		die("fopen listing");
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!ident(-1, e->d_name, dirfd(dir), &ex))
			continue; /* gone since */
		char t = S_ISDIR(ex.stx_mode) ? 'd' : S_ISREG(ex.stx_mode) ? 'f' : '?';
		if (t == '?')
			continue;
		key_of(&ex, ekey, sizeof(ekey));
		fprintf(out, "%c %s %o %s\n", t, ekey, ex.stx_mode & 07777, e->d_name);
	}
	closedir(dir);
	if (fflush(out) || fclose(out))
		die("write listing");
	if (rename(tmp, p))
		die("rename listing");
}

/*
 * Calls file(f, fd) for each regular file under the folder dfd and, when
 * dirs, makes each folder's entries durable first (with mu held).
 */
static void walk_tree(int dfd, bool dirs, void (*file)(struct pfile *f, int fd))
{
	load_openat();
	if (dirs)
		sync_dir(dfd);
	int d = real_openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d < 0 ? NULL : fdopendir(d);
	if (!dir)
		die("opendir");
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int fd = real_openat(dirfd(dir), e->d_name,
				     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		struct statx sx;
		if (ident(fd, NULL, 0, &sx)) {
			if (S_ISDIR(sx.stx_mode))
				walk_tree(fd, dirs, file);
			else if (S_ISREG(sx.stx_mode))
				file(lookup(fd, &sx), fd);
		}
		close(fd);
	}
	closedir(dir);
}

static void sync_whole(struct pfile *f, int fd)
{
	sync_file(f, fd, true);
}

static void sync_all(void)
{
	load_open();
	int d = real_open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		die("open data dir");
	walk_tree(d, true, sync_whole); /* syncfs: everything under the data dir */
	close(d);
}

/* PL_TORN's coin (xorshift64). */
static bool coin(void)
{
	torn ^= torn << 13;
	torn ^= torn >> 7;
	torn ^= torn << 17;
	return torn >> 63;
}

/*
 * At the cut (mu held): a coin for each page of f written since its last
 * sync, within both its synced size and its size now; heads, the page
 * reaches f's image. A file never synced has no image and gets none.
 */
static void tear_file(struct pfile *f, int fd)
{
	struct statx sx;
	char key[96], p[PATH_MAX + 128];
	if (!f || !f->npages || !ident(fd, NULL, 0, &sx))
		return;
	key_of(&sx, key, sizeof(key));
	spath(p, sizeof(p), "ino", key);
	load_open();
	int img = real_open(p, O_RDWR | O_CLOEXEC);
	if (img < 0)
		return;
	struct stat ist;
	if (fstat(img, &ist))
		die("fstat image");
	off_t lim = ist.st_size < (off_t)sx.stx_size ? ist.st_size : (off_t)sx.stx_size;
	int src = reopen(fd);
	for (size_t i = 0; i < f->npages && (off_t)(i * PAGE) < lim; i++)
		if (f->dirty[i] && coin()) {
			off_t off = (off_t)(i * PAGE);
			copy_range(img, src, off, lim - off < PAGE ? lim - off : PAGE);
		}
	close(img);
	close(src);
}

/* Counts a durable operation about to start; at the chosen one, the power goes. */
static void durable_op(const char *kind, int fd)
{
	char link[64], p[PATH_MAX + 1] = "?", line[PATH_MAX + 64];
	nops++;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (fd >= 0) {
		ssize_t n = readlink(link, p, sizeof(p) - 1);
		p[n > 0 ? n : 1] = 0;
	}
	int n = snprintf(line, sizeof(line), "%ld %s %s\n", nops, kind, p);
	char lp[PATH_MAX + 16];
	snprintf(lp, sizeof(lp), "%s/ops.log", shadow);
	load_open();
	load_write();
	int log = real_open(lp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (log >= 0) {
		real_write(log, line, (size_t)n);
		close(log);
	}
	if (cut_at > 0 && nops == cut_at) {
		if (torn) {
			load_open();
			int dfd = real_open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0)
				die("open data dir");
			walk_tree(dfd, false, tear_file);
			close(dfd);
		}
		char c[PATH_MAX + 16];
		snprintf(c, sizeof(c), "%s/cut", shadow);
		FILE *o = fopen(c, "we");
		if (o) {
			fprintf(o, "%ld\n", nops);
			fclose(o);
		}
		kill(getpid(), SIGKILL);
		for (;;)
			pause();
	}
}

__attribute__((constructor)) static void init(void)
{
	const char *d = getenv("PL_DATA"), *s = getenv("PL_SHADOW"), *c = getenv("PL_CUT");
	char p[PATH_MAX + 16];
	struct stat st;

	if (!d || !s)
		return;
	/* our children (exec, process) are not part of the experiment */
	unsetenv("LD_PRELOAD");
	if (!realpath(d, data) || !realpath(s, shadow) || stat(data, &st))
		die("PL_DATA/PL_SHADOW");
	data_len = strlen(data);
	data_dev = st.st_dev;
	cut_at = c ? atol(c) : 0;
	const char *t = getenv("PL_TORN");
	torn = t ? strtoull(t, NULL, 10) * 0x9E3779B97F4A7C15ull + 1 : 0;
	snprintf(p, sizeof(p), "%s/ino", shadow);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/dir", shadow);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/root", shadow);
	if (access(p, F_OK)) {
		/* the data dir as it is at start counts as durable */
		struct statx sx;
		char key[96];
		if (statx(AT_FDCWD, data, 0, STATX_INO | STATX_BTIME, &sx))
			die("statx data dir");
		pthread_mutex_lock(&mu);
		sync_all();
		pthread_mutex_unlock(&mu);
		key_of(&sx, key, sizeof(key));
		FILE *o = fopen(p, "we");
		if (!o)
			die("root");
		fprintf(o, "%s\n", key);
		fclose(o);
	}
	active = true;
}

/* ---- the intercepted calls ---- */

/* Before a write: whether it is durable by itself (O_DSYNC), counted as such. */
static bool before_write(int fd)
{
	if (!active)
		return false;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || !(fl & (O_DSYNC | O_SYNC)))
		return false;
	struct statx sx;
	pthread_mutex_lock(&mu);
	bool ours = lookup(fd, &sx) != NULL;
	if (ours)
		durable_op("dsync-write", fd);
	pthread_mutex_unlock(&mu);
	return ours;
}

static void after_write(int fd, off_t off, ssize_t n, bool dsync)
{
	struct statx sx;
	if (!active || n <= 0)
		return;
	pthread_mutex_lock(&mu);
	struct pfile *f = lookup(fd, &sx);
	if (f && S_ISREG(sx.stx_mode)) {
		if (off < 0)
			off = lseek(fd, 0, SEEK_CUR) - n;
		mark(f, off, (size_t)n);
		if (dsync) {
			int img = open_image(&sx), src = reopen(fd);
			copy_range(img, src, off, n);
			close(img);
			close(src);
		}
	}
	pthread_mutex_unlock(&mu);
}

ssize_t write(int fd, const void *b, size_t n)
{
	load_write();
	bool ds = before_write(fd);
	ssize_t r = real_write(fd, b, n);
	after_write(fd, -1, r, ds);
	return r;
}

#define PWRITE(name, ...)                                                                          \
	{                                                                                          \
		load_##name();                                                                     \
		bool ds = before_write(fd);                                                        \
		ssize_t r = real_##name(__VA_ARGS__);                                              \
		after_write(fd, off, r, ds);                                                       \
		return r;                                                                          \
	}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off) PWRITE(pwrite, fd, b, n, off) ssize_t
    pwrite64(int fd, const void *b, size_t n, off_t off) PWRITE(pwrite64, fd, b, n, off) ssize_t
    pwritev(int fd, const struct iovec *v, int c, off_t off) PWRITE(pwritev, fd, v, c, off) ssize_t
    pwritev64(int fd, const struct iovec *v, int c, off_t off)
	PWRITE(pwritev64, fd, v, c, off) ssize_t
    pwritev2(int fd, const struct iovec *v, int c, off_t off, int fl)
	PWRITE(pwritev2, fd, v, c, off, fl) ssize_t
    pwritev64v2(int fd, const struct iovec *v, int c, off_t off, int fl)
	PWRITE(pwritev64v2, fd, v, c, off, fl)

	    ssize_t writev(int fd, const struct iovec *v, int c)
{
	load_writev();
	bool ds = before_write(fd);
	ssize_t r = real_writev(fd, v, c);
	after_write(fd, -1, r, ds);
	return r;
}

/* libfuse moves WRITE payloads into the blob by splice (FUSE_CAP_SPLICE_READ) */
ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t n, unsigned fl)
{
	load_splice();
	off_t off = out_off ? *out_off : -1;
	bool ds = before_write(out);
	ssize_t r = real_splice(in, in_off, out, out_off, n, fl);
	after_write(out, off, r, ds);
	return r;
}

ssize_t copy_file_range(int in, loff_t *in_off, int out, loff_t *out_off, size_t n, unsigned fl)
{
	load_copy_file_range();
	off_t off = out_off ? *out_off : -1;
	bool ds = before_write(out);
	ssize_t r = real_copy_file_range(in, in_off, out, out_off, n, fl);
	after_write(out, off, r, ds);
	return r;
}

ssize_t sendfile(int out, int in, off_t *in_off, size_t n)
{
	load_sendfile();
	bool ds = before_write(out);
	ssize_t r = real_sendfile(out, in, in_off, n);
	after_write(out, -1, r, ds);
	return r;
}

ssize_t sendfile64(int out, int in, off_t *in_off, size_t n)
{
	load_sendfile64();
	bool ds = before_write(out);
	ssize_t r = real_sendfile64(out, in, in_off, n);
	after_write(out, -1, r, ds);
	return r;
}

static int do_sync(int fd, int (*real)(int), const char *kind)
{
	struct statx sx;
	if (!active)
		return real(fd);
	pthread_mutex_lock(&mu);
	bool ours = lookup(fd, &sx) != NULL;
	if (ours)
		durable_op(kind, fd);
	pthread_mutex_unlock(&mu);
	int r = real(fd);
	if (r == 0 && ours) {
		pthread_mutex_lock(&mu);
		struct pfile *f = lookup(fd, &sx);
		if (f && S_ISDIR(sx.stx_mode))
			sync_dir(fd);
		else if (f)
			sync_file(f, fd, false);
		pthread_mutex_unlock(&mu);
	}
	return r;
}

int fsync(int fd)
{
	load_fsync();
	return do_sync(fd, real_fsync, "fsync");
}

int fdatasync(int fd)
{
	load_fdatasync();
	return do_sync(fd, real_fdatasync, "fdatasync");
}

static bool same_fs(int fd)
{
	struct stat st;
	return fd < 0 || (fstat(fd, &st) == 0 && st.st_dev == data_dev);
}

int syncfs(int fd)
{
	load_syncfs();
	if (!active || !same_fs(fd))
		return real_syncfs(fd);
	pthread_mutex_lock(&mu);
	durable_op("syncfs", fd);
	pthread_mutex_unlock(&mu);
	int r = real_syncfs(fd);
	if (r == 0) {
		pthread_mutex_lock(&mu);
		sync_all();
		pthread_mutex_unlock(&mu);
	}
	return r;
}

void sync(void)
{
	load_sync();
	if (!active) {
		real_sync();
		return;
	}
	pthread_mutex_lock(&mu);
	durable_op("sync", -1);
	pthread_mutex_unlock(&mu);
	real_sync();
	pthread_mutex_lock(&mu);
	sync_all();
	pthread_mutex_unlock(&mu);
}

static void shrink(int fd, off_t len)
{
	struct statx sx;
	if (!active)
		return;
	pthread_mutex_lock(&mu);
	struct pfile *f = lookup(fd, &sx);
	if (f && S_ISREG(sx.stx_mode) && (!f->has_low || len < f->low)) {
		f->low = len;
		f->has_low = true;
	}
	pthread_mutex_unlock(&mu);
}

int ftruncate(int fd, off_t len)
{
	load_ftruncate();
	shrink(fd, len);
	return real_ftruncate(fd, len);
}

int ftruncate64(int fd, off_t len)
{
	load_ftruncate64();
	shrink(fd, len);
	return real_ftruncate64(fd, len);
}

static void shrink_path(const char *path, off_t len)
{
	if (!active)
		return;
	load_open();
	int fd = real_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		shrink(fd, len);
		close(fd);
	}
}

int truncate(const char *path, off_t len)
{
	load_truncate();
	shrink_path(path, len);
	return real_truncate(path, len);
}

int truncate64(const char *path, off_t len)
{
	load_truncate64();
	shrink_path(path, len);
	return real_truncate64(path, len);
}

static void punched(int fd, int mode, off_t off, off_t len)
{
	struct statx sx;
	if (!active || !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
		return;
	pthread_mutex_lock(&mu);
	struct pfile *f = lookup(fd, &sx);
	if (f && S_ISREG(sx.stx_mode))
		mark(f, off, (size_t)len);
	pthread_mutex_unlock(&mu);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	load_fallocate();
	int r = real_fallocate(fd, mode, off, len);
	if (r == 0)
		punched(fd, mode, off, len);
	return r;
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
	load_fallocate64();
	int r = real_fallocate64(fd, mode, off, len);
	if (r == 0)
		punched(fd, mode, off, len);
	return r;
}

static int opened(int fd, int flags)
{
	if (fd >= 0 && (flags & O_TRUNC))
		shrink(fd, 0);
	return fd;
}

#define MODE_ARG                                                                                   \
	mode_t mode = 0;                                                                           \
	if (flags & (O_CREAT | __O_TMPFILE)) {                                                     \
		va_list ap;                                                                        \
		va_start(ap, flags);                                                               \
		mode = va_arg(ap, mode_t);                                                         \
		va_end(ap);                                                                        \
	}

int open(const char *path, int flags, ...)
{
	MODE_ARG
	load_open();
	return opened(real_open(path, flags, mode), flags);
}

int open64(const char *path, int flags, ...)
{
	MODE_ARG
	load_open64();
	return opened(real_open64(path, flags, mode), flags);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG
	load_openat();
	return opened(real_openat(dirfd, path, flags, mode), flags);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG
	load_openat64();
	return opened(real_openat64(dirfd, path, flags, mode), flags);
}

/* Writes through a shared mapping are not modelled (they are lost): said in ops.log. */
static void mapped(int fd, int prot, int flags)
{
	struct statx sx;
	if (!active || fd < 0 || !(prot & PROT_WRITE) || !(flags & MAP_SHARED))
		return;
	pthread_mutex_lock(&mu);
	if (lookup(fd, &sx)) {
		char link[64], p[PATH_MAX + 1] = "?", line[PATH_MAX + 32];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, p, sizeof(p) - 1);
		p[n > 0 ? n : 1] = 0;
		int m = snprintf(line, sizeof(line), "0 mmap-shared %s\n", p);
		char lp[PATH_MAX + 16];
		snprintf(lp, sizeof(lp), "%s/ops.log", shadow);
		load_open();
		load_write();
		int log = real_open(lp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (log >= 0) {
			real_write(log, line, (size_t)m);
			close(log);
		}
	}
	pthread_mutex_unlock(&mu);
}

void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	load_mmap();
	mapped(fd, prot, flags);
	return real_mmap(a, n, prot, flags, fd, off);
}

void *mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	load_mmap64();
	mapped(fd, prot, flags);
	return real_mmap64(a, n, prot, flags, fd, off);
}
