/* SPDX-License-Identifier: MIT */
/* Unit tests of core/catalog.c: tables, group commit, map growth, ids. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog.h"
#include "check.h"

static struct sl_catalog *open_new(char *dir, size_t len)
{
	struct sl_catalog *cat = NULL;
	snprintf(dir, len, "%s/catalog", test_dir());
	if (sl_catalog_open(dir, SL_CATALOG_CREATE, &cat))
		return NULL;
	return cat;
}

struct put_arg {
	struct sl_inode ino;
	const char *data;
};

static int put_file(struct sl_txn *t, void *arg)
{
	struct put_arg *p = arg;
	int rc = sl_txn_inode_put(t, &p->ino);
	if (rc == 0)
		rc = sl_txn_dirent_put(t, p->ino.parent, p->ino.name, p->ino.id);
	if (rc == 0 && p->data)
		rc = sl_txn_data_put(t, p->ino.id, p->data, strlen(p->data));
	return rc;
}

static void test_inode_roundtrip(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	struct put_arg p = {.data = "hello"};
	struct sl_inode got;
	struct sl_txn *t;
	const void *d;
	size_t len;
	uint64_t id;

	CHECK(cat);
	p.ino.id = 5000;
	p.ino.parent = SL_ID_IN;
	p.ino.kind = SL_KIND_FILE;
	p.ino.state = SL_STATE_LANDED;
	p.ino.mode = 0100640;
	p.ino.uid = 1001;
	p.ino.gid = 1002;
	p.ino.mtime_ns = 1790000000123456789ll;
	p.ino.size = 5;
	p.ino.seq = 7;
	strcpy(p.ino.name, "caf\xc3\xa9 \t x.json");
	CHECK_OK(sl_catalog_write(cat, put_file, &p));
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_txn_dirent_get(t, SL_ID_IN, "caf\xc3\xa9 \t x.json", &id));
	CHECK(id == 5000);
	CHECK_OK(sl_txn_inode_get(t, id, &got));
	CHECK(got.mode == 0100640 && got.uid == 1001 && got.gid == 1002);
	CHECK(got.mtime_ns == 1790000000123456789ll && got.size == 5 && got.seq == 7);
	CHECK(!strcmp(got.name, p.ino.name) && got.parent == SL_ID_IN);
	CHECK_OK(sl_txn_data_get(t, id, &d, &len));
	CHECK(len == 5 && !memcmp(d, "hello", 5));
	CHECK(sl_txn_dirent_get(t, SL_ID_IN, "other", &id) == SL_NOTFOUND);
	sl_txn_end(t);
	sl_catalog_close(cat);
}

static int collect_names(void *ctx, const char *name, uint64_t id)
{
	char *out = ctx;
	(void)id;
	strcat(out, name);
	strcat(out, ",");
	return 0;
}

static void test_dirent_order_and_scope(void)
{
	char dir[300], names[256] = "";
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	const char *order[] = {"b", "a", "c"};
	struct sl_txn *t;

	CHECK(cat);
	for (int i = 0; i < 3; i++) {
		struct put_arg p = {0};
		p.ino.id = 6000 + i;
		p.ino.parent = 9000;
		p.ino.kind = SL_KIND_FILE;
		strcpy(p.ino.name, order[i]);
		CHECK_OK(sl_catalog_write(cat, put_file, &p));
	}
	/* a sibling folder's children must not leak into the listing */
	struct put_arg q = {0};
	q.ino.id = 6100;
	q.ino.parent = 9001;
	q.ino.kind = SL_KIND_FILE;
	strcpy(q.ino.name, "z");
	CHECK_OK(sl_catalog_write(cat, put_file, &q));
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_txn_dirent_each(t, 9000, NULL, collect_names, names));
	CHECK(!strcmp(names, "a,b,c,"));
	names[0] = 0;
	CHECK_OK(sl_txn_dirent_each(t, 9000, "a", collect_names, names));
	CHECK(!strcmp(names, "b,c,"));
	sl_txn_end(t);
	sl_catalog_close(cat);
}

static int fail_einval(struct sl_txn *t, void *arg)
{
	(void)arg;
	sl_txn_meta_put(t, "poison", 1); /* written, then dropped with the request */
	return EINVAL;
}

static int bump(struct sl_txn *t, void *arg)
{
	(void)arg;
	return sl_txn_meta_add(t, "count", 1);
}

struct writer {
	struct sl_catalog *cat;
	int n;
	int errors;
};

static void *write_loop(void *arg)
{
	struct writer *w = arg;
	for (int i = 0; i < w->n; i++)
		if (sl_catalog_write(w->cat, bump, NULL))
			w->errors++;
	return NULL;
}

static void test_group_commit(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	struct writer w[8];
	pthread_t th[8];
	struct sl_txn *t;
	uint64_t count, poison;

	CHECK(cat);
	CHECK_OK(sl_catalog_start(cat));
	uint64_t before = sl_catalog_commits(cat);
	for (int i = 0; i < 8; i++) {
		w[i] = (struct writer){.cat = cat, .n = 100};
		pthread_create(&th[i], NULL, write_loop, &w[i]);
	}
	/* a failing request in the middle of the traffic fails alone */
	CHECK(sl_catalog_write(cat, fail_einval, NULL) == EINVAL);
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		CHECK(w[i].errors == 0);
	}
	uint64_t commits = sl_catalog_commits(cat) - before;
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_txn_meta_get(t, "count", &count));
	CHECK_OK(sl_txn_meta_get(t, "poison", &poison));
	sl_txn_end(t);
	CHECK(count == 800);
	CHECK(poison == 0);
	printf("     800 writes from 8 threads took %llu commits\n", (unsigned long long)commits);
	CHECK(commits < 800); /* concurrent writers shared transactions */
	sl_catalog_close(cat);
}

static int put_big(struct sl_txn *t, void *arg)
{
	uint64_t *id = arg;
	static char blob[1 << 20];
	return sl_txn_data_put(t, *id, blob, sizeof(blob));
}

static void test_map_grows(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	struct sl_txn *t;
	struct stat st;
	char path[400];

	CHECK(cat);
	/* 100 MiB through a 64 MiB initial map */
	for (uint64_t id = 1; id <= 100; id++)
		CHECK_OK(sl_catalog_write(cat, put_big, &id));
	CHECK_OK(sl_catalog_read(cat, &t));
	const void *d;
	size_t len;
	CHECK_OK(sl_txn_data_get(t, 100, &d, &len));
	CHECK(len == 1 << 20);
	sl_txn_end(t);
	sl_catalog_close(cat);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	CHECK(stat(path, &st) == 0 && st.st_size > (64 << 20));
}

/* Puts 96 one-MiB values in one transaction, counting its runs. */
static int put_many(struct sl_txn *t, void *arg)
{
	int *runs = arg;
	static char blob[1 << 20];
	int rc = 0;

	++*runs;
	for (uint64_t id = 1; id <= 96 && rc == 0; id++)
		rc = sl_txn_data_put(t, id, blob, sizeof(blob));
	return rc;
}

/*
 * A commit bigger than the map runs twice (LMDB's MAP_FULL at the put that
 * does not fit, then the group again in a grown map); made room for, once.
 */
static void test_make_room(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	int runs = 0;

	CHECK(cat);
	CHECK_OK(sl_catalog_write(cat, put_many, &runs));
	CHECK(runs == 2); /* 96 MiB did not fit the 64 MiB map */
	sl_catalog_close(cat);

	cat = open_new(dir, sizeof(dir));
	CHECK(cat);
	runs = 0;
	sl_catalog_make_room(cat, 2 * (96u << 20));
	CHECK_OK(sl_catalog_write(cat, put_many, &runs));
	CHECK(runs == 1);
	sl_catalog_make_room(cat, 1 << 20); /* room enough already: nothing to do */
	runs = 0;
	CHECK_OK(sl_catalog_write(cat, put_many, &runs)); /* replaces them: fits */
	CHECK(runs == 1);
	sl_catalog_close(cat);
}

/*
 * The journal's ring (4 MiB) is created at the first start; a catalog whose
 * map is nearly full (a big engine state) grows it for the ring instead of
 * going without the journal.
 */
static void test_journal_on_a_full_map(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));

	CHECK(cat);
	for (uint64_t id = 1; id <= 62; id++) /* 62 MiB of a 64 MiB map */
		CHECK_OK(sl_catalog_write(cat, put_big, &id));
	CHECK_OK(sl_catalog_start(cat));
	CHECK(sl_catalog_journaled(cat));
	uint64_t id = 63;
	CHECK_OK(sl_catalog_write(cat, put_big, &id)); /* too big for a record: two flushes */
	struct put_arg a = {.ino = {.id = 64, .parent = SL_ID_IN, .kind = SL_KIND_FILE},
			    .data = "small"};
	strcpy(a.ino.name, "small");
	CHECK_OK(sl_catalog_write(cat, put_file, &a));
	sl_catalog_close(cat);

	/* a clean close leaves nothing to apply; the ring is kept, the data too */
	CHECK_OK(sl_catalog_open(dir, 0, &cat));
	CHECK_OK(sl_catalog_start(cat));
	CHECK(sl_catalog_journaled(cat));
	struct sl_txn *t;
	const void *d;
	size_t len;
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK_OK(sl_txn_data_get(t, 64, &d, &len));
	CHECK(len == 5 && !memcmp(d, "small", 5));
	CHECK_OK(sl_txn_data_get(t, 62, &d, &len));
	CHECK(len == 1 << 20);
	sl_txn_end(t);
	sl_catalog_close(cat);
}

/* An asynchronous request: its apply gets the struct, its done records rc. */
struct areq {
	atomic_int done;
	int rc;
	size_t size; /* bytes to put under id 7 + size / 1 MiB */
};

static void areq_done(void *arg, int rc)
{
	struct areq *a = arg;
	a->rc = rc;
	atomic_store(&a->done, 1);
}

static int hold_commit(struct sl_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL); /* the next two queue up */
	return 0;
}

static int put_sized(struct sl_txn *t, void *arg)
{
	struct areq *a = arg;
	static char bytes[1 << 20];
	return sl_txn_data_put(t, 7 + a->size / (1 << 20), bytes, a->size);
}

/*
 * A commit that cannot be written (the file cannot grow: RLIMIT_FSIZE here,
 * a full disk in life) fails only the request too big for it: the small one
 * that shared its group is committed on its own.
 */
static void test_failed_write_spares_the_group(void)
{
	char dir[300], path[400];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	struct areq hold = {0}, big = {.size = 1 << 20}, small = {.size = 5};
	struct rlimit old, lim;
	struct stat st;
	struct sl_txn *t;
	const void *d;
	size_t len;

	CHECK(cat);
	/* zeros written ahead of the pages would leave the big commit room */
	setenv("SLUICE_ZERO_AHEAD", "0", 1);
	CHECK_OK(sl_catalog_start(cat));
	unsetenv("SLUICE_ZERO_AHEAD");
	CHECK_OK(sl_catalog_write(cat, bump, NULL));
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	CHECK(stat(path, &st) == 0);
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size + (256 << 10); /* room for a small commit, not 1 MiB */
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	/* big and small queue up behind hold and share the next group */
	CHECK_OK(sl_catalog_write_async(cat, hold_commit, &hold, areq_done));
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	CHECK_OK(sl_catalog_write_async(cat, put_sized, &big, areq_done));
	CHECK_OK(sl_catalog_write_async(cat, put_sized, &small, areq_done));
	for (int i = 0; i < 500 && !(atomic_load(&big.done) && atomic_load(&small.done)); i++)
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, oldsig);
	CHECK(atomic_load(&big.done) && atomic_load(&small.done));
	CHECK(big.rc != 0);
	CHECK(small.rc == 0);
	CHECK_OK(sl_catalog_read(cat, &t));
	CHECK(sl_txn_data_get(t, 7, &d, &len) == 0 && len == 5);
	CHECK(sl_txn_data_get(t, 8, &d, &len) == SL_NOTFOUND);
	sl_txn_end(t);
	/* with room again, the big one commits */
	CHECK_OK(sl_catalog_write(cat, put_sized, &big));
	sl_catalog_close(cat);
}

static void test_ids_survive_reopen(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir));
	uint64_t a, b, lo, hi;

	CHECK(cat);
	CHECK_OK(sl_catalog_next_id(cat, &a));
	CHECK(a >= SL_ID_FIRST);
	sl_catalog_close(cat); /* not settled: as after a crash */
	CHECK_OK(sl_catalog_open(dir, 0, &cat));
	sl_catalog_unsettled(cat, &lo, &hi);
	CHECK(lo <= a && a < hi); /* the id of the "crashed" process is unsettled */
	CHECK_OK(sl_catalog_next_id(cat, &b));
	CHECK(b > a); /* ids are never reused */
	/*
	 * the ids reserved and never handed out go back at a close: the next
	 * start probes the ids handed out and not settled (b), not the rest
	 * of the reserved range
	 */
	sl_catalog_close(cat);
	CHECK_OK(sl_catalog_open(dir, 0, &cat));
	sl_catalog_unsettled(cat, &lo, &hi);
	CHECK(lo <= b && hi == b + 1);
	uint64_t c;
	CHECK_OK(sl_catalog_next_id(cat, &c));
	CHECK(c > b);
	/* settled, then closed: nothing to probe */
	sl_catalog_settle(cat, c + 1);
	sl_catalog_close(cat);
	CHECK_OK(sl_catalog_open(dir, 0, &cat));
	sl_catalog_unsettled(cat, &lo, &hi);
	CHECK(lo == hi && hi == c + 1);
	CHECK_OK(sl_catalog_next_id(cat, &b));
	CHECK(b > c);
	sl_catalog_close(cat);
}

static void test_readonly_refuses_writes(void)
{
	char dir[300];
	struct sl_catalog *cat = open_new(dir, sizeof(dir)), *ro;

	CHECK(cat);
	sl_catalog_close(cat);
	CHECK_OK(sl_catalog_open(dir, SL_CATALOG_RDONLY, &ro));
	CHECK(sl_catalog_write(ro, bump, NULL) == EROFS);
	sl_catalog_close(ro);
	CHECK(sl_catalog_open("/nonexistent/catalog", 0, &ro) != 0);
}

int main(void)
{
	test(test_inode_roundtrip);
	test(test_dirent_order_and_scope);
	test(test_group_commit);
	test(test_map_grows);
	test(test_make_room);
	test(test_journal_on_a_full_map);
	test(test_failed_write_spares_the_group);
	test(test_ids_survive_reopen);
	test(test_readonly_refuses_writes);
	return test_exit();
}
