/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/land.c without a mount: landing at release and at
 * rename, immutability, and recovery after a crash (a forked child that
 * _exits mid-work stands in for kill -9).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "catalog.h"
#include "check.h"
#include "datadir.h"
#include "land.h"

static struct sl_land *open_land(const char *dir, const struct sl_land_opts *o,
				 struct sl_datadir **d)
{
	struct sl_land *l = NULL;
	const char *what;

	if (sl_datadir_open(dir, SL_DATADIR_LOCK | SL_DATADIR_CREATE, d, &what))
		return NULL;
	if (sl_datadir_create(*d)) {
		sl_datadir_close(*d);
		return NULL;
	}
	if (sl_land_open(dir, o, &l) || sl_land_start(l)) {
		sl_datadir_close(*d);
		return NULL;
	}
	return l;
}

static int put(struct sl_land *l, uint64_t parent, const char *name, const char *data,
	       size_t len, bool release)
{
	struct sl_handle *h;
	struct sl_attr a;
	int rc = sl_land_create(l, parent, name, 0644, 0, 0, O_WRONLY, &h, &a);
	if (rc)
		return rc;
	for (size_t off = 0; off < len && rc == 0; off += 4096)
		rc = sl_land_write(h, data + off, len - off < 4096 ? len - off : 4096, (off_t)off);
	if (rc == 0)
		rc = sl_land_flush(h);
	if (release)
		sl_land_release(h);
	return rc;
}

static int read_all(struct sl_land *l, uint64_t parent, const char *name, char *buf,
		    size_t cap, size_t *len)
{
	struct sl_handle *h;
	struct sl_attr a;
	bool landed;
	int rc = sl_land_lookup(l, parent, name, &a);
	if (rc)
		return rc;
	if ((rc = sl_land_open_file(l, a.id, O_RDONLY, &h, &landed)))
		return rc;
	rc = sl_land_read(h, buf, cap, 0, len);
	sl_land_release(h);
	return rc;
}

static int count_blobs(const char *dir)
{
	char cmd[512];
	int n = -1;
	snprintf(cmd, sizeof(cmd), "find '%s/blobs' -type f | wc -l", dir);
	FILE *p = popen(cmd, "r");
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* Lets publishes (async after release) commit. */
static void settle(struct sl_land *l)
{
	struct sl_land_counters c;
	for (int i = 0; i < 500; i++) {
		sl_land_counters(l, &c);
		if (c.in_flight == 0)
			return;
		usleep(2000);
	}
}

static void test_lands_at_release(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_land_counters c;
	struct sl_handle *h;
	struct sl_attr a;
	char buf[64];
	size_t n;
	bool landed;

	CHECK(l);
	CHECK_OK(put(l, SL_ID_IN, "a.json", "{\"x\":1}\n", 8, true));
	settle(l);
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "a.json", &a));
	CHECK(a.landed && a.size == 8);
	CHECK_OK(read_all(l, SL_ID_IN, "a.json", buf, sizeof(buf), &n));
	CHECK(n == 8 && !memcmp(buf, "{\"x\":1}\n", 8));
	/* immutable bytes and name: write opens, truncation and renames are refused */
	CHECK(sl_land_open_file(l, a.id, O_WRONLY, &h, &landed) == EPERM);
	CHECK(sl_land_open_file(l, a.id, O_RDONLY | O_TRUNC, &h, &landed) == EPERM);
	CHECK(sl_land_rename(l, SL_ID_IN, "a.json", SL_ID_IN, "b.json", 0) == EPERM);
	struct sl_setattr s = {.flags = SL_SET_SIZE, .size = 3};
	CHECK(sl_land_setattr(l, a.id, NULL, &s, &a) == EPERM);
	s.size = 8; /* a no-op succeeds */
	CHECK_OK(sl_land_setattr(l, a.id, NULL, &s, &a));
	/* mode, owner and times may change (install, cp -p, unzip set them late) */
	s = (struct sl_setattr){.flags = SL_SET_MODE | SL_SET_MTIME | SL_SET_ATIME, .mode = 04750,
				.mtime_ns = 981173106000000000ll, .atime_ns = 7};
	CHECK_OK(sl_land_setattr(l, a.id, NULL, &s, &a));
	CHECK(a.landed && (a.mode & 07777) == 04750 && a.mtime_ns == 981173106000000000ll);
	/* a chown clears the set-id bits */
	s = (struct sl_setattr){.flags = SL_SET_GID, .gid = 5};
	CHECK_OK(sl_land_setattr(l, a.id, NULL, &s, &a));
	CHECK((a.mode & 07777) == 0750 && a.gid == 5);
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 1 && c.bytes_landed == 8 && c.refused[EPERM] == 4);
	sl_land_close(l);
	/* durably */
	CHECK_OK(sl_land_open(dir, NULL, &l));
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "a.json", &a));
	CHECK((a.mode & 07777) == 0750 && a.gid == 5 && a.mtime_ns == 981173106000000000ll &&
	      a.atime_ns == 7 && a.size == 8);
	sl_land_close(l);
	sl_datadir_close(d);
}

static void test_rename_lands_and_refuses_landed_target(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_attr a;

	CHECK(l);
	CHECK_OK(put(l, SL_ID_IN, ".x.json.AbC123", "data\n", 5, true));
	settle(l);
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, ".x.json.AbC123", &a));
	CHECK(!a.landed); /* a temp name never lands */
	CHECK_OK(sl_land_rename(l, SL_ID_IN, ".x.json.AbC123", SL_ID_IN, "x.json", 0));
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "x.json", &a));
	CHECK(a.landed); /* released already: landed when rename returned */
	CHECK(sl_land_lookup(l, SL_ID_IN, ".x.json.AbC123", &a) == ENOENT);
	CHECK_OK(put(l, SL_ID_IN, "y.part", "other\n", 6, true));
	CHECK(sl_land_rename(l, SL_ID_IN, "y.part", SL_ID_IN, "x.json", 0) == EPERM);
	CHECK(sl_land_rename(l, SL_ID_IN, "y.part", SL_ID_IN, "x.json", RENAME_NOREPLACE) ==
	      EEXIST);
	CHECK(sl_land_rename(l, SL_ID_IN, "y.part", SL_ID_IN, "z", RENAME_EXCHANGE) == EINVAL);
	sl_land_close(l);
	sl_datadir_close(d);
}

static void test_strict_mode(void)
{
	const char *dir = test_dir();
	struct sl_land_opts o = {.strict = true};
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, &o, &d);
	struct sl_attr a;

	CHECK(l);
	CHECK(put(l, SL_ID_IN, "direct.json", "x", 1, true) == EPERM);
	CHECK_OK(put(l, SL_ID_IN, "up.json.filepart", "x", 1, true));
	CHECK_OK(sl_land_rename(l, SL_ID_IN, "up.json.filepart", SL_ID_IN, "up.json", 0));
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "up.json", &a));
	CHECK(a.landed);
	sl_land_close(l);
	sl_datadir_close(d);
}

/*
 * The child writes and _exits without closing anything: its recorded file
 * must land at the recorded length, the rest must leave no trace.
 */
static void test_recovery_after_crash(void)
{
	const char *dir = test_dir();
	static char big[200000];
	struct sl_datadir *d;
	struct sl_land *l;
	struct sl_attr a;
	char buf[64];
	size_t n;
	int status;

	/* create the data dir first so the child and parent agree */
	CHECK((l = open_land(dir, NULL, &d)));
	sl_land_close(l);
	sl_datadir_close(d);
	memset(big, 'b', sizeof(big));
	pid_t pid = fork();
	if (pid == 0) {
		struct sl_handle *h;
		l = open_land(dir, NULL, &d);
		if (!l)
			_exit(2);
		/* closed (FLUSH) once, then more bytes that nobody flushed */
		if (put(l, SL_ID_IN, "rec.json", "abc", 3, false))
			_exit(3);
		/* a big temp file staged in a blob, and a big unflushed final one */
		if (put(l, SL_ID_IN, ".big.tmp", big, sizeof(big), false))
			_exit(4);
		struct sl_attr x;
		if (sl_land_create(l, SL_ID_IN, "never.json", 0644, 0, 0, O_WRONLY, &h, &x) ||
		    sl_land_write(h, big, sizeof(big), 0))
			_exit(5);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(count_blobs(dir) == 2); /* the two staged blobs the child left */
	CHECK((l = open_land(dir, NULL, &d)));
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "rec.json", &a));
	CHECK(a.landed && a.size == 3);
	CHECK_OK(read_all(l, SL_ID_IN, "rec.json", buf, sizeof(buf), &n));
	CHECK(n == 3 && !memcmp(buf, "abc", 3));
	CHECK(sl_land_lookup(l, SL_ID_IN, ".big.tmp", &a) == ENOENT);
	CHECK(sl_land_lookup(l, SL_ID_IN, "never.json", &a) == ENOENT);
	CHECK(count_blobs(dir) == 0); /* no leaked blob */
	sl_land_close(l);
	sl_datadir_close(d);
}

static void test_big_file_blob_and_unlink(void)
{
	const char *dir = test_dir();
	static char big[300000], back[300000];
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_attr a;
	size_t n;

	CHECK(l);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	CHECK_OK(put(l, SL_ID_IN, "big.bin", big, sizeof(big), true));
	settle(l);
	CHECK_OK(sl_land_lookup(l, SL_ID_IN, "big.bin", &a));
	CHECK(a.landed && a.size == sizeof(big));
	CHECK_OK(read_all(l, SL_ID_IN, "big.bin", back, sizeof(back), &n));
	CHECK(n == sizeof(big) && !memcmp(big, back, n));
	CHECK(count_blobs(dir) == 1);
	/* no query holds it: a landed file may be deleted, and its blob goes */
	CHECK_OK(sl_land_unlink(l, SL_ID_IN, "big.bin"));
	CHECK(sl_land_lookup(l, SL_ID_IN, "big.bin", &a) == ENOENT);
	CHECK(count_blobs(dir) == 0);
	sl_land_close(l);
	sl_datadir_close(d);
}

static void test_second_process_locked_out(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d, *d2;
	const char *what;

	CHECK_OK(sl_datadir_open(dir, SL_DATADIR_LOCK | SL_DATADIR_CREATE, &d, &what));
	CHECK_OK(sl_datadir_create(d));
	pid_t pid = fork();
	if (pid == 0)
		_exit(sl_datadir_open(dir, SL_DATADIR_LOCK, &d2, &what) == SL_ELOCKED ? 0 : 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	sl_datadir_close(d);
	/* a folder holding something else is not ours */
	const char *other = test_dir();
	char path[300];
	snprintf(path, sizeof(path), "%s/notes.txt", other);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fclose(f);
	CHECK(sl_datadir_open(other, SL_DATADIR_LOCK | SL_DATADIR_CREATE, &d, &what) ==
	      SL_ENOTSLUICE);
}

/* From the RELEASE on a file is landed for every caller, before its commit. */
static void test_sealed_at_release(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_land_counters c;
	struct sl_handle *h, *w;
	struct sl_attr a;
	bool landed;

	CHECK(l);
	for (int k = 0; k < 50; k++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d.json", k);
		CHECK_OK(sl_land_create(l, SL_ID_IN, name, 0600, 0, 0, O_WRONLY, &h, &a));
		CHECK_OK(sl_land_write(h, "l1\n", 3, 0));
		CHECK_OK(sl_land_flush(h));
		/* a second writer opened before the release joins the landing */
		bool join = k % 2;
		if (join)
			CHECK_OK(sl_land_open_file(l, a.id, O_WRONLY | O_APPEND, &w, &landed));
		sl_land_release(h);
		if (!join) {
			/* no commit has to have happened: the release decides */
			CHECK(sl_land_open_file(l, a.id, O_WRONLY | O_APPEND, &w, &landed) == EPERM);
			CHECK(sl_land_open_file(l, a.id, O_RDONLY | O_TRUNC, &w, &landed) == EPERM);
			struct sl_setattr t = {.flags = SL_SET_SIZE, .size = 0};
			CHECK(sl_land_setattr(l, a.id, NULL, &t, &a) == EPERM);
		} else {
			CHECK_OK(sl_land_write(w, "l2\n", 3, 3));
			CHECK_OK(sl_land_flush(w));
			sl_land_release(w);
		}
		/* mode and times still change, and stick */
		struct sl_setattr s = {.flags = SL_SET_MODE | SL_SET_MTIME, .mode = 0644,
				       .mtime_ns = 1000000000ll * k};
		CHECK_OK(sl_land_setattr(l, a.id, NULL, &s, &a));
	}
	settle(l);
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 50 && c.in_flight == 0 && c.bytes_landed == 50 * 3 + 25 * 3);
	sl_land_close(l);
	CHECK_OK(sl_land_open(dir, NULL, &l));
	for (int k = 0; k < 50; k++) {
		char name[32], buf[16];
		size_t n;
		snprintf(name, sizeof(name), "f%d.json", k);
		CHECK_OK(sl_land_lookup(l, SL_ID_IN, name, &a));
		CHECK(a.landed && (a.mode & 07777) == 0644 && a.mtime_ns == 1000000000ll * k);
		CHECK_OK(read_all(l, SL_ID_IN, name, buf, sizeof(buf), &n));
		CHECK(n == (k % 2 ? 6u : 3u) && !memcmp(buf, "l1\nl2\n", n));
	}
	sl_land_close(l);
	sl_datadir_close(d);
}

/* A temp-named folder renamed to a final name lands its files together. */
static void test_folder_bundle(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_land_counters c;
	struct sl_handle *last, *open_w;
	struct sl_attr st, sub, a;
	static char big[200000];

	CHECK(l);
	memset(big, 'x', sizeof(big));
	CHECK_OK(sl_land_mkdir(l, SL_ID_IN, ".stage", 0755, 0, 0, &st));
	CHECK_OK(sl_land_mkdir(l, st.id, "sub", 0755, 0, 0, &sub));
	for (int k = 0; k < 10; k++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d.json", k);
		CHECK_OK(put(l, k % 2 ? sub.id : st.id, name, big, k < 3 ? sizeof(big) : 10, true));
	}
	CHECK_OK(put(l, st.id, "x.tmp", "t", 1, true)); /* stays temporary */
	/* flushed, not released: joins the bundle and holds it */
	CHECK_OK(sl_land_create(l, st.id, "last.json", 0644, 0, 0, O_WRONLY, &last, &a));
	CHECK_OK(sl_land_write(last, "abc", 3, 0));
	CHECK_OK(sl_land_flush(last));
	/* written after its flush: lands on its own, at its release */
	CHECK_OK(sl_land_create(l, st.id, "open.json", 0644, 0, 0, O_WRONLY, &open_w, &a));
	CHECK_OK(sl_land_write(open_w, "o", 1, 0));
	settle(l);
	CHECK_OK(sl_land_rename(l, SL_ID_IN, ".stage", SL_ID_IN, "b1", 0));
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 0);
	/* released members are sealed */
	CHECK_OK(sl_land_lookup(l, st.id, "f0.json", &a));
	struct sl_handle *h;
	bool landed;
	CHECK(sl_land_open_file(l, a.id, O_WRONLY, &h, &landed) == EPERM);
	sl_land_release(last);
	for (int i = 0; i < 500 && c.files_landed < 11; i++) {
		usleep(2000);
		sl_land_counters(l, &c);
	}
	CHECK(c.files_landed == 11); /* the ten and last.json, together */
	CHECK_OK(sl_land_flush(open_w));
	sl_land_release(open_w);
	settle(l);
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 12);
	CHECK(sl_land_lookup(l, st.id, "x.tmp", &a) == 0 && !a.landed);
	sl_land_close(l);

	/* all released: the rename itself lands them, durably, before it returns */
	CHECK_OK(sl_land_open(dir, NULL, &l));
	CHECK_OK(sl_land_start(l));
	CHECK_OK(sl_land_mkdir(l, SL_ID_IN, "b2.partial", 0755, 0, 0, &st));
	for (int k = 0; k < 10; k++) {
		char name[32];
		snprintf(name, sizeof(name), "g%d.json", k);
		CHECK_OK(put(l, st.id, name, big, sizeof(big), true)); /* >= 8 blobs: one syncfs */
	}
	CHECK_OK(sl_land_rename(l, SL_ID_IN, "b2.partial", SL_ID_IN, "b2", 0));
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 22);
	/* a folder holding landed files keeps its name */
	CHECK(sl_land_rename(l, SL_ID_IN, "b2", SL_ID_IN, "b3", 0) == EPERM);
	sl_land_close(l);
	sl_datadir_close(d);
}

/* Only storage errors poison; reads stop at st_size. */
static void test_errors_and_fallocate(void)
{
	const char *dir = test_dir();
	struct sl_datadir *d;
	struct sl_land *l = open_land(dir, NULL, &d);
	struct sl_handle *h;
	struct sl_attr a;
	char buf[256];
	size_t n;

	CHECK(l);
	CHECK_OK(sl_land_create(l, SL_ID_IN, "f.json", 0644, 0, 0, O_RDWR, &h, &a));
	CHECK_OK(sl_land_write(h, "hello", 5, 0));
	/* past EOF without a size change: reads still stop at 5 */
	CHECK_OK(sl_land_fallocate(h, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
	struct sl_setattr s = {.flags = SL_SET_SIZE, .size = 100000}; /* a blob now */
	CHECK_OK(sl_land_setattr(l, a.id, h, &s, &a));
	s.size = 5;
	CHECK_OK(sl_land_setattr(l, a.id, h, &s, &a));
	CHECK_OK(sl_land_fallocate(h, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
	CHECK_OK(sl_land_read(h, buf, sizeof(buf), 0, &n));
	CHECK(n == 5);
	/* an impossible size fails that call, not the file */
	s.size = 1ull << 62;
	CHECK(sl_land_setattr(l, a.id, h, &s, &a) != 0);
	CHECK(sl_land_write(h, "x", 1, (off_t)(1ll << 62)) != 0);
	CHECK_OK(sl_land_write(h, " world", 6, 5));
	CHECK_OK(sl_land_flush(h));
	sl_land_release(h);
	settle(l);
	CHECK_OK(read_all(l, SL_ID_IN, "f.json", buf, sizeof(buf), &n));
	CHECK(n == 11 && !memcmp(buf, "hello world", 11));
	sl_land_close(l);
	sl_datadir_close(d);
}

int main(void)
{
	test(test_lands_at_release);
	test(test_rename_lands_and_refuses_landed_target);
	test(test_strict_mode);
	test(test_recovery_after_crash);
	test(test_big_file_blob_and_unlink);
	test(test_second_process_locked_out);
	test(test_sealed_at_release);
	test(test_folder_bundle);
	test(test_errors_and_fallocate);
	return test_exit();
}
