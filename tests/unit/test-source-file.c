/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the source contract (core/sources/source.h) through its
 * first implementation, the file source: latest offset under the
 * maxFilesPerTrigger cap, the log of the range ({"logOffset":K} and
 * sources/0/K), reading partitions, a replay of the same range, commit;
 * the per-file records planning leaves (`sluice files`).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "catalog.h"
#include "check.h"
#include "config.h"
#include "datadir.h"
#include "decode.h"
#include "land.h"
#include "qindex.h"
#include "qlog.h"
#include "source_file.h"

static int put(struct sl_land *l, uint64_t parent, const char *name, const char *data)
{
	struct sl_handle *h;
	struct sl_attr a;
	int rc = sl_land_create(l, parent, name, 0644, 0, 0, O_WRONLY, &h, &a);
	if (rc)
		return rc;
	rc = sl_land_write(h, data, strlen(data), 0);
	if (rc == 0)
		rc = sl_land_flush(h);
	sl_land_release(h);
	return rc;
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

struct step {
	const struct sl_source_ops *ops;
	struct sl_source *s;
	uint64_t batch;
	struct sl_source_range r;
	bool replay;
	int rc_replay;
};

/* A batch's planning transaction, as the engine's: replay, or latest offset then log. */
static int plan_apply(struct sl_txn *t, void *arg)
{
	struct step *st = arg;
	int rc;

	memset(&st->r, 0, sizeof(st->r));
	st->rc_replay = st->ops->replay(st->s, t, st->batch, &st->r);
	if (st->rc_replay == 0 || st->rc_replay != SL_NOTFOUND)
		return st->rc_replay;
	if ((rc = st->ops->latest_offset(st->s, t, &st->r)) || st->r.nparts == 0)
		return rc;
	return st->ops->log(st->s, t, st->batch, 1234, &st->r);
}

static int commit_apply(struct sl_txn *t, void *arg)
{
	struct step *st = arg;
	struct sl_source_metrics m = {0};
	return st->ops->commit_txn(st->s, t, st->batch, &m);
}

static int count_record(void *ctx, uint64_t id, const struct sl_file_record *r)
{
	(void)id;
	(void)r;
	++*(int *)ctx;
	return 0;
}

/* The record of file name under folder dir for qid: its fate and batch, or 0 fate. */
static void record_of(struct sl_land *l, uint32_t qid, uint64_t dir, const char *name,
		      struct sl_file_record *r)
{
	struct sl_txn *t;
	uint64_t id;

	memset(r, 0, sizeof(*r));
	CHECK_OK(sl_catalog_read(sl_land_catalog(l), &t));
	if (sl_txn_dirent_get(t, dir, name, &id) == 0 && sl_file_record_get(t, qid, id, r))
		r->fate = 0;
	sl_txn_end(t);
}

static void test_file_source_contract(void)
{
	static const char cfgtext[] =
		"{\"queries\":{\"dev\":{\"source\":{\"format\":\"json\",\"path\":\"dev\","
		"\"schema\":\"a BIGINT\",\"maxFilesPerTrigger\":2}}}}";
	const char *dir = test_dir();
	struct sl_datadir *d = NULL;
	struct sl_config *cfg = NULL;
	struct sl_land *l = NULL;
	struct sl_attr a;
	char err[256];
	const char *what;
	struct sl_txn *t;
	uint32_t qid;

	CHECK_OK(sl_config_parse(cfgtext, sizeof(cfgtext) - 1, "test", &cfg, err, sizeof(err)));
	CHECK_OK(sl_datadir_open(dir, SL_DATADIR_LOCK | SL_DATADIR_CREATE, &d, &what));
	CHECK_OK(sl_datadir_create(d));
	struct sl_land_opts o = {.config = cfg};
	CHECK_OK(sl_land_open(dir, &o, &l));
	CHECK_OK(sl_land_start(l));
	CHECK_OK(sl_land_mkdir(l, SL_ID_IN, "dev", 0755, 0, 0, &a));
	CHECK_OK(put(l, a.id, "1.json", "{\"a\":1}\n"));
	CHECK_OK(put(l, a.id, "2.json", "{\"a\":2}\n{\"a\":3}\n"));
	CHECK_OK(put(l, a.id, "3.json", "{\"a\":4}\n"));
	settle(l);
	CHECK_OK(sl_catalog_read(sl_land_catalog(l), &t));
	int rc = sl_qindex_qid(t, "dev", &qid);
	sl_txn_end(t);
	CHECK_OK(rc);

	const struct sl_query_config *q = sl_config_query(cfg, 0);
	struct sl_source_args sa = {.l = l, .q = q, .qid = qid, .seq_limit = UINT64_MAX};
	struct step st = {.ops = &sl_source_file};
	CHECK(st.ops->replayable);
	CHECK_OK(st.ops->open(&sa, &st.s));
	CHECK_OK(st.ops->commit(st.s)); /* at start: nothing to clean */

	/* batch 0: the first two files (maxFilesPerTrigger), logOffset 0 */
	CHECK_OK(sl_catalog_write(sl_land_catalog(l), plan_apply, &st));
	CHECK(st.rc_replay == SL_NOTFOUND);
	CHECK(st.r.nparts == 2);
	CHECK(!strcmp(st.r.start, ""));
	CHECK(!strcmp(st.r.end, "{\"logOffset\":0}"));
	CHECK_OK(sl_catalog_read(sl_land_catalog(l), &t));
	const void *v;
	size_t len;
	rc = sl_qlog_get(t, qid, 's', 0, &v, &len);
	bool logged = rc == 0 && len > 3 && !memcmp(v, "v1\n{\"path\":\"in/dev/1.json\"", 26);
	sl_txn_end(t);
	CHECK(logged);
	/* each planned file's record: planned in batch 0, at its path; the third has none */
	struct sl_file_record fr;
	record_of(l, qid, a.id, "2.json", &fr);
	CHECK(fr.fate == SL_FATE_PLANNED && fr.batch == 0 && !strcmp(fr.path, "dev/2.json"));
	CHECK(fr.size == 16 && fr.seq > 0 && fr.landed_ns > 0);
	record_of(l, qid, a.id, "3.json", &fr);
	CHECK(fr.fate == 0);

	struct sl_batch b;
	struct sl_decode_stats ds;
	CHECK_OK(sl_batch_init(&b, &q->source.schema));
	CHECK_OK(sl_decode_stats_init(&ds, q->source.schema.n));
	for (size_t i = 0; i < st.r.nparts; i++)
		CHECK_OK(st.ops->read(st.s, i, &b, &ds, err, sizeof(err)));
	CHECK(b.nrows == 3 && ds.lines == 3);

	/* the same batch planned again (no commit): a replay of the same range */
	CHECK_OK(sl_catalog_write(sl_land_catalog(l), plan_apply, &st));
	CHECK(st.rc_replay == 0 && st.r.replay && st.r.ts_ms == 1234 && st.r.nparts == 2);
	CHECK(!strcmp(st.r.end, "{\"logOffset\":0}"));
	sl_batch_clear(&b);
	sl_decode_stats_reset(&ds);
	for (size_t i = 0; i < st.r.nparts; i++)
		CHECK_OK(st.ops->read(st.s, i, &b, &ds, err, sizeof(err)));
	CHECK(b.nrows == 3);

	/* committed: the next batch takes the third file, after logOffset 0 */
	CHECK_OK(sl_catalog_write(sl_land_catalog(l), commit_apply, &st));
	CHECK_OK(st.ops->commit(st.s));
	st.batch = 1;
	CHECK_OK(sl_catalog_write(sl_land_catalog(l), plan_apply, &st));
	CHECK(st.rc_replay == SL_NOTFOUND && st.r.nparts == 1);
	CHECK(!strcmp(st.r.start, "{\"logOffset\":0}"));
	CHECK(!strcmp(st.r.end, "{\"logOffset\":1}"));
	record_of(l, qid, a.id, "3.json", &fr);
	CHECK(fr.fate == SL_FATE_PLANNED && fr.batch == 1);
	int nrec = 0;
	CHECK_OK(sl_catalog_read(sl_land_catalog(l), &t));
	rc = sl_file_record_each(t, qid, count_record, &nrec);
	sl_txn_end(t);
	CHECK_OK(rc);
	CHECK(nrec == 3);
	char desc[128];
	st.ops->describe(st.s, desc, sizeof(desc));
	CHECK(!strcmp(desc, "FileStreamSource[in/dev]"));

	sl_decode_stats_release(&ds);
	sl_batch_release(&b);
	st.ops->stop(st.s);
	sl_land_close(l);
	sl_datadir_close(d);
	sl_config_free(cfg);
}

int main(void)
{
	test(test_file_source_contract);
	return test_exit();
}
