/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/source.c: which landed paths a query's path reads, and
 * the index and skip counters kept in the catalog.
 */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "check.h"
#include "config.h"
#include "qindex.h"

static bool matches(const char *pattern, const char *relpath)
{
	struct sl_path p;
	char err[128];
	if (sl_config_path_parse(pattern, &p, err, sizeof(err))) {
		fprintf(stderr, "bad pattern '%s': %s\n", pattern, err);
		exit(1);
	}
	bool m = sl_qindex_match(&p, relpath);
	sl_config_path_release(&p);
	return m;
}

static void test_design_examples(void)
{
	/* DESIGN §1: "events" reads events/x.json and events/date=.../x.json */
	CHECK(matches("events", "events/x.json"));
	CHECK(matches("events", "events/date=2026-10-04/x.json"));
	CHECK(matches("events", "events/date=2026-10-04/hour=12/x.json"));
	CHECK(!matches("events", "events/sub/x.json"));
	CHECK(!matches("events", "other/x.json"));
	CHECK(!matches("events", "eventsx/x.json"));
}

static void test_ignored_names(void)
{
	CHECK(!matches("events", "events/_SUCCESS"));
	CHECK(!matches("events", "events/.hidden.json"));
	CHECK(!matches("events", "events/_temporary/x.json"));
	CHECK(matches("events", "events/_part=1/x.json")); /* _ with = is a partition */
	CHECK(!matches("events", "events/=1/x.json"));     /* no key */
}

static void test_globs(void)
{
	CHECK(matches("logs/*", "logs/web/a.json"));
	CHECK(matches("logs/*", "logs/web/date=1/a.json"));
	CHECK(!matches("logs/*", "logs/.web/a.json")); /* FNM_PERIOD */
	CHECK(matches("logs/web*", "logs/web2/a.json"));
	CHECK(!matches("logs/web*", "logs/api/a.json"));
	/* a pattern may name the files themselves */
	CHECK(matches("dev/*.json", "dev/bundle1.json"));
	CHECK(!matches("dev/*.json", "dev/bundle1.csv"));
	CHECK(matches("dev/b?.json", "dev/b1.json"));
	CHECK(matches("dev/[ab].json", "dev/a.json"));
	/* a file directly at a folder pattern's level is that file */
	CHECK(matches("dev", "dev"));
}

/* ---- the index and skip counters ---- */

struct env {
	struct sl_catalog *cat;
	struct sl_config *cfg;
	struct sl_qindex *src;
	uint32_t qid;
};

static int env_open(struct env *e, const char *dir)
{
	static const char cfg[] = "{\"queries\":{\"dev\":{\"source\":{\"format\":\"text\","
				  "\"path\":\"dev\"}}}}";
	char err[256];
	struct sl_txn *t;
	int rc;

	memset(e, 0, sizeof(*e));
	if ((rc = sl_catalog_open(dir, SL_CATALOG_CREATE, &e->cat)))
		return rc;
	if ((rc = sl_config_parse(cfg, sizeof(cfg) - 1, "test", &e->cfg, err, sizeof(err))))
		return rc;
	if ((rc = sl_qindex_open(e->cat, e->cfg, &e->src)))
		return rc;
	if ((rc = sl_catalog_read(e->cat, &t)))
		return rc;
	rc = sl_qindex_qid(t, "dev", &e->qid);
	sl_txn_end(t);
	return rc;
}

static void env_close(struct env *e)
{
	sl_qindex_free(e->src);
	sl_config_free(e->cfg);
	sl_catalog_close(e->cat);
}

#define DEV_ID 5000

/* in/dev/ and a landed in/dev/<name> (id, seq, size), indexed as landing does. */
struct landing {
	struct sl_qindex *src;
	const char *name;
	uint64_t id, seq, size;
};

static int land_apply(struct sl_txn *t, void *arg)
{
	struct landing *a = arg;
	struct sl_inode d = {.id = DEV_ID, .parent = SL_ID_IN, .kind = SL_KIND_DIR,
			     .mode = S_IFDIR | 0755, .name = "dev"};
	struct sl_inode f = {.id = a->id, .parent = DEV_ID, .kind = SL_KIND_FILE,
			     .state = SL_STATE_LANDED, .mode = S_IFREG | 0644, .size = a->size,
			     .landed_ns = 1, .seq = a->seq};
	int rc;

	snprintf(f.name, sizeof(f.name), "%s", a->name);
	if ((rc = sl_txn_inode_put(t, &d)) || (rc = sl_txn_dirent_put(t, SL_ID_IN, "dev", DEV_ID)) ||
	    (rc = sl_txn_inode_put(t, &f)) || (rc = sl_txn_dirent_put(t, DEV_ID, f.name, f.id)) ||
	    (rc = sl_txn_landed_put(t, a->seq, a->id)) || (rc = sl_txn_meta_put(t, "seq", a->seq)))
		return rc;
	return sl_qindex_landed(a->src, t, &f);
}

struct skipping {
	uint32_t qid;
	uint64_t id, seq, size;
	enum sl_skip why;
};

static int skip_apply(struct sl_txn *t, void *arg)
{
	struct skipping *s = arg;
	return sl_qindex_skip(t, s->qid, s->seq, s->id, s->size, s->why);
}

struct taking {
	uint32_t qid;
	struct sl_skips got;
};

static int take_apply(struct sl_txn *t, void *arg)
{
	struct taking *k = arg;
	return sl_qindex_skips(t, k->qid, true, &k->got);
}

static int peek(struct sl_catalog *cat, uint32_t qid, struct sl_skips *out, uint64_t held_id,
		bool *held, struct sl_backlog *bl)
{
	struct sl_txn *t;
	int rc = sl_catalog_read(cat, &t);
	if (rc)
		return rc;
	rc = sl_qindex_skips(t, qid, false, out);
	*held = sl_qindex_held(NULL, t, held_id);
	if (rc == 0)
		rc = sl_qindex_backlog(t, "dev", bl);
	sl_txn_end(t);
	return rc;
}

/*
 * DESIGN §1: a skip (maxFileAge, or a seen key) makes the file deletable and
 * counts in the next progress report, also when no batch runs at the time
 * of the skip, and after a restart; taking the counts resets them.
 */
static void test_skips_counted_until_taken(void)
{
	const char *dir = test_dir();
	struct env e;
	struct sl_skips sk;
	struct sl_backlog bl;
	bool held;

	CHECK_OK(env_open(&e, dir));
	struct landing a = {.src = e.src, .name = "a.txt", .id = 5001, .seq = 1, .size = 10};
	struct landing b = {.src = e.src, .name = "b.txt", .id = 5002, .seq = 2, .size = 20};
	struct landing c = {.src = e.src, .name = "c.txt", .id = 5003, .seq = 3, .size = 40};
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &a));
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &b));
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &c));
	CHECK_OK(peek(e.cat, e.qid, &sk, a.id, &held, &bl));
	CHECK(held && bl.files == 3 && bl.bytes == 70);
	CHECK(sk.age == 0 && sk.seen == 0);

	struct skipping s1 = {.qid = e.qid, .id = a.id, .seq = a.seq, .size = a.size,
			      .why = SL_SKIP_AGE};
	struct skipping s2 = {.qid = e.qid, .id = b.id, .seq = b.seq, .size = b.size,
			      .why = SL_SKIP_SEEN};
	CHECK_OK(sl_catalog_write(e.cat, skip_apply, &s1));
	CHECK_OK(sl_catalog_write(e.cat, skip_apply, &s2));
	CHECK_OK(peek(e.cat, e.qid, &sk, a.id, &held, &bl));
	CHECK(!held && bl.files == 1 && bl.bytes == 40); /* deletable, out of the backlog */
	CHECK(sk.age == 1 && sk.seen == 1);              /* looking takes nothing */

	/* durable: a restart finds them */
	uint32_t qid = e.qid;
	env_close(&e);
	CHECK_OK(env_open(&e, dir));
	CHECK(e.qid == qid);
	CHECK_OK(peek(e.cat, e.qid, &sk, b.id, &held, &bl));
	CHECK(!held && sk.age == 1 && sk.seen == 1);

	/* the report that shows them takes them: counted once */
	struct taking k = {.qid = e.qid};
	CHECK_OK(sl_catalog_write(e.cat, take_apply, &k));
	CHECK(k.got.age == 1 && k.got.seen == 1);
	CHECK_OK(sl_catalog_write(e.cat, take_apply, &k));
	CHECK(k.got.age == 0 && k.got.seen == 0);
	CHECK_OK(peek(e.cat, e.qid, &sk, c.id, &held, &bl));
	CHECK(held && bl.files == 1 && sk.age == 0 && sk.seen == 0);
	env_close(&e);
}

struct probe {
	uint64_t id;             /* held? */
	uint64_t seq;            /* waiting in the indexes of "dev" and "new"? */
	bool held, dev_waits, new_waits;
	struct sl_backlog dev;
};

static int probe(struct env *e, struct probe *p)
{
	struct sl_txn *t;
	uint32_t nq;
	int rc = sl_catalog_read(e->cat, &t);

	if (rc)
		return rc;
	p->held = sl_qindex_held(e->src, t, p->id);
	p->dev_waits = sl_qindex_waiting(t, e->qid, p->seq);
	p->new_waits = sl_qindex_qid(t, "new", &nq) == 0 && sl_qindex_waiting(t, nq, p->seq);
	rc = sl_qindex_backlog(t, "dev", &p->dev);
	sl_txn_end(t);
	return rc;
}

static struct sl_config *parse(const char *json)
{
	struct sl_config *c = NULL;
	char err[256];
	if (sl_config_parse(json, strlen(json), "test", &c, err, sizeof(err))) {
		fprintf(stderr, "bad config: %s\n", err);
		exit(1);
	}
	return c;
}

/*
 * A reload (issue 16 item 7): a removed query stops holding its files and
 * misses what lands while it is gone; back by name, it indexes what it
 * missed, once; a new query indexes everything landed.
 */
static void test_reload(void)
{
	const char *dir = test_dir();
	struct sl_config *other = parse("{\"queries\":{\"other\":{\"source\":{\"format\":"
					"\"text\",\"path\":\"elsewhere\"}}}}");
	struct sl_config *both = parse("{\"queries\":{\"dev\":{\"source\":{\"format\":"
				       "\"text\",\"path\":\"dev\"}},\"new\":{\"source\":{"
				       "\"format\":\"text\",\"path\":\"dev\"}}}}");
	struct env e;
	struct probe p;

	CHECK_OK(env_open(&e, dir));
	struct landing a = {.src = e.src, .name = "a", .id = 6001, .seq = 1, .size = 10};
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &a));
	p = (struct probe){.id = 6001, .seq = 1};
	CHECK_OK(probe(&e, &p));
	CHECK(p.held && p.dev_waits);

	CHECK_OK(sl_qindex_reload(e.src, e.cat, other));
	p = (struct probe){.id = 6001, .seq = 1};
	CHECK_OK(probe(&e, &p));
	CHECK(!p.held);     /* dev is gone: its hold does not count */
	CHECK(p.dev_waits); /* but its index stays, for when it comes back */
	struct landing b = {.src = e.src, .name = "b", .id = 6002, .seq = 2, .size = 20};
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &b));
	p = (struct probe){.id = 6002, .seq = 2};
	CHECK_OK(probe(&e, &p));
	CHECK(!p.held && !p.dev_waits);

	CHECK_OK(sl_qindex_reload(e.src, e.cat, both));
	p = (struct probe){.id = 6002, .seq = 2};
	CHECK_OK(probe(&e, &p));
	CHECK(p.held && p.dev_waits && p.new_waits); /* caught up; new indexed it */
	CHECK(p.dev.files == 2 && p.dev.bytes == 30); /* a once, b once */
	p = (struct probe){.id = 6001, .seq = 1};
	CHECK_OK(probe(&e, &p));
	CHECK(p.held && p.new_waits);
	struct landing c = {.src = e.src, .name = "c", .id = 6003, .seq = 3, .size = 5};
	CHECK_OK(sl_catalog_write(e.cat, land_apply, &c));
	p = (struct probe){.id = 6003, .seq = 3};
	CHECK_OK(probe(&e, &p));
	CHECK(p.dev_waits && p.new_waits && p.dev.files == 3);

	env_close(&e); /* frees every set; the configs are ours */
	sl_config_free(other);
	sl_config_free(both);
}

int main(void)
{
	test(test_design_examples);
	test(test_ignored_names);
	test(test_globs);
	test(test_skips_counted_until_taken);
	test(test_reload);
	return test_exit();
}
