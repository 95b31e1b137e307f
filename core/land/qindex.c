/* SPDX-License-Identifier: MIT */
/* The file source: matching landed files to a query's path. */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "catalog.h"
#include "err.h"
#include "qindex.h"

/* A component no query reads: hidden, or a _marker that is no key=value. */
static bool ignored(const char *c, size_t n)
{
	return n == 0 || c[0] == '.' || (c[0] == '_' && !memchr(c, '=', n));
}

static bool is_partition(const char *c, size_t n)
{
	const char *eq = memchr(c, '=', n);
	return eq && eq != c; /* key=value with a non-empty key */
}

bool sl_qindex_match(const struct sl_path *pattern, const char *relpath)
{
	char comp[SL_CONFIG_COMPONENT_MAX + 1];
	const char *p = relpath;
	size_t i = 0;

	if (pattern->n == 0)
		return false; /* a source that reads no files (rate) */
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		bool last = !slash;

		if (n > SL_CONFIG_COMPONENT_MAX || ignored(p, n))
			return false;
		memcpy(comp, p, n);
		comp[n] = 0;
		if (i < pattern->n) {
			if (fnmatch(pattern->comps[i], comp, FNM_PATHNAME | FNM_PERIOD))
				return false;
			if (last)
				return i + 1 == pattern->n; /* the pattern names the file */
			i++;
		} else if (!last && !is_partition(p, n)) {
			return false; /* below the path only key=value folders */
		} else if (last) {
			return true;
		}
		p = slash + 1;
	}
}

/* ---- the index filled at landing ---- */

struct query {
	const struct sl_query_config *cfg;
	uint32_t qid;
};

/*
 * The queries of one config. A reload adds a set; the catalog's meta
 * "qgen" names the set its landings index with, so that a landing apply,
 * which may run more than once, depends only on its transaction: one
 * committed before the reload's write uses the old set, one after it the
 * new one (DESIGN "Changes between starts", reload).
 */
struct qset {
	struct query *q;
	size_t n;
	uint64_t gen;      /* the qgen its write set; guarded by sl_qindex.mu */
	bool assigned;     /* gen is set (its write ran); guarded by mu */
	bool dead;         /* its write failed: never used (mu) */
	struct qset *next; /* the set before it */
};

struct sl_qindex {
	pthread_mutex_t mu;
	struct qset *sets; /* newest first; the last is the one opened; freed at free */
};

int sl_qindex_relpath_under(struct sl_txn *t, const struct sl_inode *i, uint64_t root,
			    char *buf, size_t len)
{
	char tmp[4096];
	size_t pos = sizeof(tmp) - 1, n;
	struct sl_inode d = *i;
	int depth = 0, rc;

	tmp[pos] = 0;
	for (;;) {
		n = strlen(d.name);
		if (n + 1 > pos)
			return ENAMETOOLONG;
		pos -= n;
		memcpy(tmp + pos, d.name, n);
		if (d.parent == root)
			break;
		if (d.parent < SL_ID_FIRST || ++depth > 1024)
			return ENOENT; /* under another fixed node (out/, archive/, in/) */
		if ((rc = sl_txn_inode_get(t, d.parent, &d)))
			return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
		tmp[--pos] = '/';
	}
	n = sizeof(tmp) - 1 - pos;
	if (n + 1 > len)
		return ENAMETOOLONG;
	memcpy(buf, tmp + pos, n + 1);
	return 0;
}

int sl_qindex_relpath(struct sl_txn *t, const struct sl_inode *i, char *buf, size_t len)
{
	return sl_qindex_relpath_under(t, i, SL_ID_IN, buf, len);
}

static void qkey(char *buf, size_t len, uint32_t qid, const char *what)
{
	snprintf(buf, len, "q.%u.%s", qid, what);
}

/* Adds file i to query q's index and backlog. */
static int index_file(struct sl_txn *t, uint32_t qid, const struct sl_inode *i)
{
	unsigned char ik[12], hk[12];
	char key[48];
	int rc;

	put_be32(ik, qid);
	put_be64(ik + 4, i->seq);
	put_be64(hk, i->id);
	put_be32(hk + 8, qid);
	if ((rc = sl_txn_put(t, SL_TABLE_QINDEX, ik, sizeof(ik), &i->id, 8)) ||
	    (rc = sl_txn_put(t, SL_TABLE_QHOLD, hk, sizeof(hk), "", 0)))
		return rc;
	qkey(key, sizeof(key), qid, "files");
	if ((rc = sl_txn_meta_add(t, key, 1)))
		return rc;
	qkey(key, sizeof(key), qid, "bytes");
	return sl_txn_meta_add(t, key, (int64_t)i->size);
}

/*
 * The set that transaction t indexes with: the one whose write set the
 * qgen t reads; before any (a catalog older than reloads), the opened one.
 */
static int current(struct sl_qindex *s, struct sl_txn *t, const struct qset **out)
{
	uint64_t gen;
	int rc = sl_txn_meta_get(t, "qgen", &gen);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->mu);
	const struct qset *q = s->sets, *found = NULL;
	for (; q; q = q->next) {
		if (!q->dead && q->assigned && q->gen == gen) {
			found = q;
			break;
		}
		if (!q->next)
			found = q; /* the opened set */
	}
	pthread_mutex_unlock(&s->mu);
	*out = found;
	return 0;
}

int sl_qindex_landed(struct sl_qindex *s, struct sl_txn *t, const struct sl_inode *i)
{
	const struct qset *set;
	char path[4096];
	int rc;

	if (!s)
		return 0;
	if ((rc = current(s, t, &set)))
		return rc;
	if (set->n == 0)
		return 0;
	rc = sl_qindex_relpath(t, i, path, sizeof(path));
	if (rc == ENOENT)
		return 0; /* archive/ is read by no query */
	if (rc)
		return rc;
	for (size_t k = 0; k < set->n; k++)
		if (sl_qindex_match(&set->q[k].cfg->source.path, path) &&
		    (rc = index_file(t, set->q[k].qid, i)))
			return rc;
	return 0;
}

int sl_qindex_release(struct sl_txn *t, uint32_t qid, uint64_t id)
{
	unsigned char hk[12];
	put_be64(hk, id);
	put_be32(hk + 8, qid);
	return sl_txn_del(t, SL_TABLE_QHOLD, hk, 12);
}

int sl_qindex_unindex(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id,
		       uint64_t size, bool release)
{
	unsigned char ik[12];
	char key[48];
	int rc;

	put_be32(ik, qid);
	put_be64(ik + 4, seq);
	if ((rc = sl_txn_del(t, SL_TABLE_QINDEX, ik, 12)))
		return rc;
	qkey(key, sizeof(key), qid, "files");
	if ((rc = sl_txn_meta_add(t, key, -1)))
		return rc;
	qkey(key, sizeof(key), qid, "bytes");
	if ((rc = sl_txn_meta_add(t, key, -(int64_t)size)))
		return rc;
	return release ? sl_qindex_release(t, qid, id) : 0;
}

static const char *skip_key(enum sl_skip why)
{
	return why == SL_SKIP_SEEN ? "skipseen" : "skipage";
}

int sl_qindex_skip(struct sl_txn *t, uint32_t qid, uint64_t seq, uint64_t id, uint64_t size,
		    enum sl_skip why)
{
	char key[48];
	int rc;

	if ((rc = sl_qindex_unindex(t, qid, seq, id, size, true)))
		return rc;
	qkey(key, sizeof(key), qid, skip_key(why));
	if ((rc = sl_txn_meta_add(t, key, 1)))
		return rc;
	qkey(key, sizeof(key), qid, why == SL_SKIP_SEEN ? "skippedseen" : "skippedage");
	return sl_txn_meta_add(t, key, 1);
}

int sl_qindex_skips_total(struct sl_txn *t, uint32_t qid, struct sl_skips *out)
{
	char key[48];
	int rc;

	qkey(key, sizeof(key), qid, "skippedage");
	if ((rc = sl_txn_meta_get(t, key, &out->age)))
		return rc;
	qkey(key, sizeof(key), qid, "skippedseen");
	return sl_txn_meta_get(t, key, &out->seen);
}

bool sl_qindex_waiting(struct sl_txn *t, uint32_t qid, uint64_t seq)
{
	unsigned char ik[12];
	const void *v;
	size_t len;

	put_be32(ik, qid);
	put_be64(ik + 4, seq);
	return sl_txn_get(t, SL_TABLE_QINDEX, ik, sizeof(ik), &v, &len) == 0;
}

bool sl_qindex_holds(struct sl_txn *t, uint32_t qid, uint64_t id)
{
	unsigned char hk[12];
	const void *v;
	size_t len;

	put_be64(hk, id);
	put_be32(hk + 8, qid);
	return sl_txn_get(t, SL_TABLE_QHOLD, hk, sizeof(hk), &v, &len) == 0;
}

int sl_qindex_skips(struct sl_txn *t, uint32_t qid, bool take, struct sl_skips *out)
{
	static const enum sl_skip whys[] = {SL_SKIP_AGE, SL_SKIP_SEEN};
	uint64_t n[2];
	char key[48];
	int rc;

	for (size_t i = 0; i < 2; i++) {
		qkey(key, sizeof(key), qid, skip_key(whys[i]));
		if ((rc = sl_txn_meta_get(t, key, &n[i])))
			return rc;
		if (take && n[i] && (rc = sl_txn_meta_put(t, key, 0)))
			return rc;
	}
	out->age = n[0];
	out->seen = n[1];
	return 0;
}

struct holders {
	uint32_t qids[64];
	size_t n;
};

static int collect_holder(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct holders *h = ctx;
	(void)val, (void)vlen;
	if (klen != 12)
		return SL_ECORRUPT;
	if (h->n < 64)
		h->qids[h->n++] = get_be32((const unsigned char *)key + 8);
	return h->n == 64 ? 1 : 0;
}

int sl_qindex_forget(struct sl_txn *t, const struct sl_inode *i)
{
	unsigned char hk[12], ik[12];
	struct holders h;
	char key[48];
	int rc;

	do {
		h.n = 0;
		put_be64(hk, i->id);
		rc = sl_txn_each(t, SL_TABLE_QHOLD, hk, 8, collect_holder, &h);
		if (rc < 0 || (rc > 1))
			return rc;
		for (size_t k = 0; k < h.n; k++) {
			put_be32(hk + 8, h.qids[k]);
			put_be32(ik, h.qids[k]);
			put_be64(ik + 4, i->seq);
			if ((rc = sl_txn_del(t, SL_TABLE_QHOLD, hk, 12)) ||
			    (rc = sl_txn_del(t, SL_TABLE_QINDEX, ik, 12)))
				return rc;
			qkey(key, sizeof(key), h.qids[k], "files");
			if ((rc = sl_txn_meta_add(t, key, -1)))
				return rc;
			qkey(key, sizeof(key), h.qids[k], "bytes");
			if ((rc = sl_txn_meta_add(t, key, -(int64_t)i->size)))
				return rc;
		}
	} while (h.n == 64);
	return 0;
}

/* Stops the walk (1) at a hold of a configured query; ctx is the set. */
static int configured_holder(void *ctx, const void *key, size_t klen, const void *val,
			     size_t vlen)
{
	const struct qset *set = ctx;
	(void)val, (void)vlen;
	if (klen != 12)
		return SL_ECORRUPT;
	uint32_t qid = get_be32((const unsigned char *)key + 8);
	for (size_t k = 0; k < set->n; k++)
		if (set->q[k].qid == qid)
			return 1;
	return 0;
}

static int any_entry(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	(void)ctx, (void)key, (void)klen, (void)val, (void)vlen;
	return 1;
}

bool sl_qindex_held(struct sl_qindex *s, struct sl_txn *t, uint64_t id)
{
	const struct qset *set;
	unsigned char hk[8];

	put_be64(hk, id);
	if (!s)
		return sl_txn_each(t, SL_TABLE_QHOLD, hk, 8, any_entry, NULL) == 1;
	if (current(s, t, &set))
		return true; /* unreadable: keep the file */
	return sl_txn_each(t, SL_TABLE_QHOLD, hk, 8, configured_holder, (void *)set) != 0;
}

int sl_qindex_qid(struct sl_txn *t, const char *name, uint32_t *qid)
{
	const void *v;
	size_t len;
	int rc = sl_txn_get(t, SL_TABLE_QUERIES, name, strlen(name), &v, &len);
	if (rc)
		return rc;
	if (len != 4)
		return SL_ECORRUPT;
	*qid = get_be32(v);
	return 0;
}

int sl_qindex_backlog(struct sl_txn *t, const char *name, struct sl_backlog *out)
{
	char key[48];
	uint32_t qid;
	int rc = sl_qindex_qid(t, name, &qid);

	if (rc)
		return rc;
	qkey(key, sizeof(key), qid, "files");
	if ((rc = sl_txn_meta_get(t, key, &out->files)))
		return rc;
	qkey(key, sizeof(key), qid, "bytes");
	return sl_txn_meta_get(t, key, &out->bytes);
}

/* The first entry of a query's index: its oldest landing (keys sort by seq). */
static int first_id(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	(void)key;
	(void)klen;
	if (vlen != 8)
		return SL_ECORRUPT;
	memcpy(ctx, val, 8);
	return 1;
}

int sl_qindex_oldest(struct sl_txn *t, uint32_t qid, int64_t *landed_ns)
{
	unsigned char prefix[4];
	struct sl_inode i;
	uint64_t id = 0;
	int rc;

	put_be32(prefix, qid);
	rc = sl_txn_each(t, SL_TABLE_QINDEX, prefix, sizeof(prefix), first_id, &id);
	if (rc == 0)
		return SL_NOTFOUND;
	if (rc != 1) /* first_id stops the walk with 1 */
		return rc;
	if ((rc = sl_txn_inode_get(t, id, &i)))
		return rc;
	*landed_ns = i.landed_ns;
	return 0;
}

struct build {
	struct sl_txn *t;
	const struct query *q;
	uint64_t from; /* index files landed at this seq and later */
};

static int build_one(void *ctx, uint64_t seq, uint64_t id)
{
	struct build *b = ctx;
	struct sl_inode i;
	char path[4096];
	int rc;

	if (seq < b->from)
		return 0;
	if ((rc = sl_txn_inode_get(b->t, id, &i)))
		return rc == SL_NOTFOUND ? 0 : rc;
	rc = sl_qindex_relpath(b->t, &i, path, sizeof(path));
	if (rc == ENOENT)
		return 0;
	if (rc)
		return rc;
	if (!sl_qindex_match(&b->q->cfg->source.path, path))
		return 0;
	return index_file(b->t, b->q->qid, &i);
}

/*
 * Gives each query its id; a new query indexes every landed file at once.
 * The write names its set in meta "qgen" (see struct qset).
 */
/*
 * A query the config leaves out stops holding files, and landings skip it:
 * meta "q.<qid>.gone" keeps the first seq it missed (plus 1, 0 meaning
 * present), so that when it comes back by name, catch_up() indexes what
 * landed meanwhile (its checkpoint goes on where it stopped).
 */
struct known {
	uint32_t *qids;
	size_t n, cap;
	int rc;
};

static int collect_qid(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct known *k = ctx;
	(void)key, (void)klen;
	if (vlen != 4)
		return SL_ECORRUPT;
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		uint32_t *v = realloc(k->qids, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		k->qids = v;
		k->cap = cap;
	}
	k->qids[k->n++] = get_be32(val);
	return 0;
}

static int mark_gone(struct sl_txn *t, const struct qset *set)
{
	struct known k = {0};
	uint64_t seq, gone;
	char key[48];
	int rc;

	if ((rc = sl_txn_meta_get(t, "seq", &seq)))
		return rc;
	rc = sl_txn_each(t, SL_TABLE_QUERIES, "", 0, collect_qid, &k);
	for (size_t i = 0; rc == 0 && i < k.n; i++) {
		bool in = false;
		for (size_t j = 0; !in && j < set->n; j++)
			in = set->q[j].qid == k.qids[i];
		if (in)
			continue;
		qkey(key, sizeof(key), k.qids[i], "gone");
		if ((rc = sl_txn_meta_get(t, key, &gone)) == 0 && gone == 0)
			rc = sl_txn_meta_put(t, key, seq + 2); /* seq + 1 is the next landing */
	}
	free(k.qids);
	return rc;
}

/* A query back in the config: index the files landed while it was gone. */
static int catch_up(struct sl_txn *t, const struct query *q)
{
	uint64_t gone;
	char key[48];
	int rc;

	qkey(key, sizeof(key), q->qid, "gone");
	if ((rc = sl_txn_meta_get(t, key, &gone)) || gone == 0)
		return rc;
	struct build b = {.t = t, .q = q, .from = gone - 1};
	if ((rc = sl_txn_landed_each(t, build_one, &b)))
		return rc;
	return sl_txn_meta_put(t, key, 0);
}

struct assign {
	struct sl_qindex *s;
	struct qset *set; /* the set this write is for */
};

static int assign_apply(struct sl_txn *t, void *arg)
{
	struct sl_qindex *s = ((struct assign *)arg)->s;
	struct qset *set = ((struct assign *)arg)->set;
	uint64_t gen;
	int rc;

	for (size_t k = 0; k < set->n; k++) {
		struct query *q = &set->q[k];
		const char *name = q->cfg->name;
		rc = sl_qindex_qid(t, name, &q->qid);
		if (rc == 0) {
			if ((rc = catch_up(t, q)))
				return rc;
			continue;
		}
		if (rc != SL_NOTFOUND)
			return rc;
		uint64_t next;
		unsigned char v[4];
		if ((rc = sl_txn_meta_get(t, "next_qid", &next)))
			return rc;
		q->qid = (uint32_t)next + 1;
		put_be32(v, q->qid);
		if ((rc = sl_txn_meta_put(t, "next_qid", q->qid)) ||
		    (rc = sl_txn_put(t, SL_TABLE_QUERIES, name, strlen(name), v, 4)))
			return rc;
		struct build b = {.t = t, .q = q};
		if ((rc = sl_txn_landed_each(t, build_one, &b)))
			return rc;
	}
	if ((rc = mark_gone(t, set)))
		return rc;
	if ((rc = sl_txn_meta_get(t, "qgen", &gen)) || (rc = sl_txn_meta_put(t, "qgen", gen + 1)))
		return rc;
	/* the landings after this one in its commit read the new qgen: same thread */
	pthread_mutex_lock(&s->mu);
	set->gen = gen + 1;
	set->assigned = true;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static struct qset *qset_new(const struct sl_config *cfg)
{
	struct qset *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	set->n = cfg ? sl_config_nqueries(cfg) : 0;
	set->q = calloc(set->n ? set->n : 1, sizeof(*set->q));
	if (!set->q) {
		free(set);
		return NULL;
	}
	for (size_t k = 0; k < set->n; k++)
		set->q[k].cfg = sl_config_query(cfg, k);
	return set;
}

int sl_qindex_open(struct sl_catalog *cat, const struct sl_config *cfg, struct sl_qindex **out)
{
	struct sl_qindex *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	if (!(s->sets = qset_new(cfg))) {
		sl_qindex_free(s);
		return ENOMEM;
	}
	struct assign a = {s, s->sets};
	rc = s->sets->n ? sl_catalog_write(cat, assign_apply, &a) : 0;
	if (rc) {
		sl_qindex_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int sl_qindex_reload(struct sl_qindex *s, struct sl_catalog *cat, const struct sl_config *cfg)
{
	struct qset *set = qset_new(cfg);
	int rc;

	if (!set)
		return ENOMEM;
	/* listed before the write: the landings of its commit look it up */
	pthread_mutex_lock(&s->mu);
	set->next = s->sets;
	s->sets = set;
	pthread_mutex_unlock(&s->mu);
	struct assign a = {s, set};
	rc = sl_catalog_write(cat, assign_apply, &a);
	if (rc) {
		/* kept until free: a lookup may still hold it; its gen is never read */
		pthread_mutex_lock(&s->mu);
		set->dead = true;
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

void sl_qindex_free(struct sl_qindex *s)
{
	if (!s)
		return;
	while (s->sets) {
		struct qset *next = s->sets->next;
		free(s->sets->q);
		free(s->sets);
		s->sets = next;
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}
