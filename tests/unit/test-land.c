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
	/* immutable: write opens, truncation, renames and chmod are refused */
	CHECK(sl_land_open_file(l, a.id, O_WRONLY, &h, &landed) == EPERM);
	CHECK(sl_land_open_file(l, a.id, O_RDONLY | O_TRUNC, &h, &landed) == EPERM);
	CHECK(sl_land_rename(l, SL_ID_IN, "a.json", SL_ID_IN, "b.json", 0) == EPERM);
	struct sl_setattr s = {.flags = SL_SET_MODE, .mode = 0600};
	CHECK(sl_land_setattr(l, a.id, NULL, &s, &a) == EPERM);
	s.mode = 0644; /* a no-op succeeds */
	CHECK_OK(sl_land_setattr(l, a.id, NULL, &s, &a));
	sl_land_counters(l, &c);
	CHECK(c.files_landed == 1 && c.bytes_landed == 8 && c.refused[EPERM] == 4);
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

int main(void)
{
	test(test_lands_at_release);
	test(test_rename_lands_and_refuses_landed_target);
	test(test_strict_mode);
	test(test_recovery_after_crash);
	test(test_big_file_blob_and_unlink);
	test(test_second_process_locked_out);
	return test_exit();
}
