/* SPDX-License-Identifier: MIT */
/* The sink's half of a batch: its parts formatted and made durable (see stage.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "codec.h"
#include "fault.h"
#include "land.h" /* SL_INLINE_MAX only: the stage is given the catalog and blobs */
#include "sink.h"
#include "stage.h"
#include "strbuf.h"

#define SLICE_ROWS 32768 /* rows formatted at a time into a streamed part (~4 MiB of JSON) */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int write_all(int fd, const void *p, size_t len, off_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = pwrite(fd, (const char *)p + done, len - done, off + (off_t)done);
		if (w < 0)
			return errno;
		done += (size_t)w;
	}
	return 0;
}

/* Makes a written blob durable: its bytes, then its name. Closes fd. */
static int sync_blob(struct sl_blobs *blobs, uint64_t id, int fd, int rc)
{
	SL_FAULT("engine.before_part_fsync");
	if (rc == 0)
		rc = SL_FAULT_ERR("blob.fsync");
	if (rc == 0 && fsync(fd))
		rc = errno;
	close(fd);
	if (rc == 0)
		rc = sl_blob_sync_name(blobs, id);
	return rc;
}

/* Writes len bytes as the new blob id, durably. */
static int write_blob(struct sl_blobs *blobs, uint64_t id, const void *data, size_t len)
{
	int fd, rc;

	if ((rc = sl_blob_create(blobs, id, &fd)))
		return rc;
	rc = SL_FAULT_ERR("blob.write");
	if (rc == 0)
		rc = write_all(fd, data, len, 0);
	return sync_blob(blobs, id, fd, rc);
}

/* Keeps the bytes of a small part for the commit, else writes them to its blob. */
static int place(struct sl_blobs *blobs, struct sl_out_part *op, void **data, size_t len)
{
	op->len = len;
	if (len <= SL_INLINE_MAX) {
		op->data = *data; /* the commit copies these */
		*data = NULL;
		return 0;
	}
	return write_blob(blobs, op->id, *data, len);
}

static void spent(struct sl_stage *s)
{
	if (s->spent)
		s->spent(s->spent_ctx);
	s->spent = NULL;
}

/* With partitionBy: every part formatted at once, ids taken as folders appear. */
static int stage_whole(struct sl_stage *s)
{
	struct sl_catalog *cat = s->cat;
	struct sl_part *parts = NULL;
	size_t nparts = 0;
	int rc;

	if ((rc = sl_sink_format(s->q, s->rows, &parts, &nparts))) {
		s->format_failed = true;
		return rc;
	}
	spent(s);
	s->out = calloc(nparts ? nparts : 1, sizeof(*s->out));
	if (!s->out) {
		sl_sink_parts_free(parts, nparts);
		return ENOMEM;
	}
	s->nparts = nparts;
	for (size_t i = 0; i < nparts && rc == 0; i++) {
		struct sl_out_part *op = &s->out[i];
		snprintf(op->dir, sizeof(op->dir), "%s", parts[i].dir);
		if ((rc = sl_sink_part_name(op->name, sizeof(op->name), s->q, s->batch, (uint32_t)i)))
			break;
		op->rows = parts[i].rows;
		op->ndirs = 0;
		for (const char *c = parts[i].dir; *c; c++)
			op->ndirs += *c == '/';
		op->ndirs += parts[i].dir[0] != 0;
		if (op->ndirs > 32) {
			rc = ENAMETOOLONG;
			break;
		}
		for (size_t k = 0; k < op->ndirs && rc == 0; k++)
			rc = sl_catalog_next_id(cat, &op->dir_ids[k]);
		if (rc == 0)
			rc = sl_catalog_next_id(cat, &op->id);
		if (rc == 0)
			rc = place(s->blobs, op, &parts[i].data, parts[i].len);
		free(parts[i].data); /* in its blob now: not held through the commit */
		parts[i].data = NULL;
	}
	sl_sink_parts_free(parts, nparts);
	return rc;
}

/*
 * Without partitionBy: the one part (its id taken), formatted and written
 * SLICE_ROWS rows at a time. A part of one slice is formatted whole (and
 * compressed whole, with its content size); a streamed part that ends up
 * small is read back and kept inline, as a whole one would be.
 */
static int stage_streamed(struct sl_stage *s, struct sl_out_part *op)
{
	const struct sl_batch *b = s->rows;
	bool zstd = s->q->compression == SL_COMPRESSION_ZSTD;
	struct sl_codec_writer *zw = NULL;
	struct sl_strbuf buf = {0};
	size_t total = 0;
	int fd = -1, rc = 0;

	op->rows = b->nrows;
	if (zstd && b->nrows > SLICE_ROWS && (rc = sl_codec_writer_new(SL_SINK_ZSTD_LEVEL, &zw)))
		return rc;
	for (size_t from = 0; rc == 0 && from < b->nrows; from += SLICE_ROWS) {
		size_t to = b->nrows - from > SLICE_ROWS ? from + SLICE_ROWS : b->nrows;
		const void *bytes;
		size_t len;

		buf.len = 0;
		if ((rc = sl_sink_format_rows(s->q, b, from, to, from == 0, &buf))) {
			s->format_failed = true;
			break;
		}
		if (from == 0 && to == b->nrows) { /* one slice: the whole part */
			spent(s);
			if (zstd) {
				void *z;
				if ((rc = sl_codec_compress(buf.p, buf.len, SL_SINK_ZSTD_LEVEL, &z, &len))) {
					s->format_failed = true;
					break;
				}
				sl_strbuf_release(&buf);
				buf.p = z;
				buf.len = len;
			}
			rc = place(s->blobs, op, (void **)&buf.p, buf.len);
			break;
		}
		bytes = buf.p;
		len = buf.len;
		if (zw && (rc = sl_codec_writer_put(zw, buf.p, buf.len, to == b->nrows, &bytes, &len))) {
			s->format_failed = true;
			break;
		}
		if (fd < 0) {
			if ((rc = sl_blob_create(s->blobs, op->id, &fd)))
				break;
			rc = SL_FAULT_ERR("blob.write");
		}
		if (rc == 0)
			rc = write_all(fd, bytes, len, (off_t)total);
		total += len;
	}
	if (fd >= 0) {
		spent(s);
		op->len = total;
		if (rc == 0 && total <= SL_INLINE_MAX) {
			/* compressed to almost nothing: inline, as a part formatted whole */
			op->data = malloc(total ? total : 1);
			ssize_t got = op->data ? pread(fd, op->data, total, 0) : -1;
			rc = !op->data ? ENOMEM : got == (ssize_t)total ? 0 : got < 0 ? errno : EIO;
			close(fd);
			sl_blob_unlink(s->blobs, op->id);
		} else {
			rc = sync_blob(s->blobs, op->id, fd, rc);
		}
	}
	sl_codec_writer_free(zw);
	sl_strbuf_release(&buf);
	return rc;
}

/* A parquet part's bytes as the writer hands them out: into the blob, made at the first. */
struct pq_out {
	struct sl_stage *s;
	struct sl_out_part *op;
	int fd;
	size_t total;
};

static int pq_write(void *ctx, const void *p, size_t len)
{
	struct pq_out *o = ctx;
	int rc;

	if (o->fd < 0) {
		if ((rc = sl_blob_create(o->s->blobs, o->op->id, &o->fd)))
			return rc;
		if ((rc = SL_FAULT_ERR("blob.write")))
			return rc;
	}
	if ((rc = write_all(o->fd, p, len, (off_t)o->total)))
		return rc;
	o->total += len;
	return 0;
}

/*
 * Without partitionBy, parquet: the rows go to the encoder SLICE_ROWS at a
 * time; it writes each row group into the blob as it fills (one is buffered
 * at most), then the footer. A part that ends up small is kept inline.
 */
static int stage_parquet(struct sl_stage *s, struct sl_out_part *op)
{
	const struct sl_batch *b = s->rows;
	struct pq_out o = {.s = s, .op = op, .fd = -1};
	struct sl_pq_writer *w;
	int rc;

	op->rows = b->nrows;
	if ((rc = sl_sink_pq_open(s->q, pq_write, &o, &w))) {
		s->format_failed = true;
		return rc;
	}
	for (size_t from = 0; rc == 0 && from < b->nrows; from += SLICE_ROWS) {
		size_t to = b->nrows - from > SLICE_ROWS ? from + SLICE_ROWS : b->nrows;
		rc = sl_pq_add(w, b, from, to);
	}
	if (rc == 0) {
		rc = sl_pq_close(w);
	} else {
		sl_pq_abort(w);
	}
	spent(s);
	if (rc && o.fd < 0)
		s->format_failed = true; /* nothing was written: the encoder's error */
	if (o.fd < 0)
		return rc;
	op->len = o.total;
	if (rc == 0 && o.total <= SL_INLINE_MAX) {
		op->data = malloc(o.total ? o.total : 1);
		ssize_t got = op->data ? pread(o.fd, op->data, o.total, 0) : -1;
		rc = !op->data ? ENOMEM : got == (ssize_t)o.total ? 0 : got < 0 ? errno : EIO;
		close(o.fd);
		sl_blob_unlink(s->blobs, op->id);
		return rc;
	}
	return sync_blob(s->blobs, op->id, o.fd, rc);
}

static void finish(struct sl_stage *s, int rc)
{
	pthread_mutex_lock(&s->mu);
	s->rc = rc;
	s->done_ns = now_ns();
	s->done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void *stage_main(void *arg)
{
	struct sl_stage *s = arg;
	bool pq = s->q->sink_format == SL_SINK_PARQUET;
	finish(s, pq ? stage_parquet(s, &s->out[0]) : stage_streamed(s, &s->out[0]));
	return NULL;
}

int sl_stage_start(struct sl_stage *s)
{
	int rc = 0;

	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	bool empty_snapshot = s->rows->nrows == 0 && s->q->sink_format == SL_SINK_PARQUET &&
			      s->q->output_mode == SL_OUTPUT_COMPLETE;
	if (s->q->npartition_by || empty_snapshot) {
		finish(s, rc = stage_whole(s));
		return rc;
	}
	if (s->rows->nrows == 0) {
		spent(s);
		finish(s, 0);
		return 0;
	}
	s->out = calloc(1, sizeof(*s->out));
	if (!s->out)
		rc = ENOMEM;
	s->nparts = rc ? 0 : 1;
	if (rc == 0)
		rc = sl_sink_part_name(s->out[0].name, sizeof(s->out[0].name), s->q, s->batch, 0);
	if (rc == 0)
		rc = sl_catalog_next_id(s->cat, &s->out[0].id);
	if (rc == 0 && pthread_create(&s->thread, NULL, stage_main, s) == 0) {
		s->threaded = true;
		return 0;
	}
	if (rc == 0) /* no thread to be had: here, then */
		rc = s->q->sink_format == SL_SINK_PARQUET ? stage_parquet(s, &s->out[0])
							  : stage_streamed(s, &s->out[0]);
	finish(s, rc);
	return rc;
}

int sl_stage_wait(struct sl_stage *s)
{
	pthread_mutex_lock(&s->mu);
	while (!s->done)
		pthread_cond_wait(&s->cv, &s->mu);
	int rc = s->rc;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void sl_stage_end(struct sl_stage *s, bool committed)
{
	if (s->threaded)
		pthread_join(s->thread, NULL);
	s->threaded = false;
	for (size_t i = 0; i < s->nparts; i++) {
		if (!committed && !s->out[i].data && s->out[i].id)
			sl_blob_unlink(s->blobs, s->out[i].id);
		free(s->out[i].data);
	}
	free(s->out);
	s->out = NULL;
	s->nparts = 0;
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}
