/* SPDX-License-Identifier: MIT */
/*
 * The zstd codec: one frame per compressed buffer, and a bounded streaming
 * decoder that the whole-buffer decompression is built on. zstd's
 * value-or-error size_t results become errno / SL_E* codes here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "codec.h"
#include "err.h"
#include "fault.h"

/* Maps a zstd error result to our codes: memory, resource limits, bad data. */
static int zerr(size_t r)
{
	switch (ZSTD_getErrorCode(r)) {
	case ZSTD_error_memory_allocation:
		return ENOMEM;
	case ZSTD_error_frameParameter_windowTooLarge:
		return EFBIG;
	case ZSTD_error_parameter_outOfBound:
	case ZSTD_error_parameter_unsupported:
		return EINVAL;
	default:
		return SL_ECORRUPT;
	}
}

int sl_codec_compress(const void *src, size_t len, int level, void **out, size_t *outlen)
{
	ZSTD_CCtx *cctx;
	size_t bound, r;
	void *dst, *shrunk;
	int rc = 0;

	bound = ZSTD_compressBound(len);
	if (ZSTD_isError(bound) || bound == 0)
		return EFBIG;
	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
		return EINVAL;
	cctx = ZSTD_createCCtx();
	if (!cctx)
		return ENOMEM;
	dst = malloc(bound);
	if (!dst) {
		rc = ENOMEM;
		goto cctx_free;
	}
	r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	/* one call over the whole input: one frame, with its content size */
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(cctx, dst, bound, src, len);
	if (ZSTD_isError(r)) {
		rc = zerr(r);
		free(dst);
		goto cctx_free;
	}
	shrunk = realloc(dst, r);
	*out = shrunk ? shrunk : dst;
	*outlen = r;
cctx_free:
	ZSTD_freeCCtx(cctx);
	return rc;
}

struct sl_codec_stream {
	ZSTD_DStream *ds;
	size_t limit;	 /* most output bytes accepted */
	size_t produced; /* output bytes so far */
	bool boundary;	 /* the last call ended a frame and flushed it */
	bool any_frame;	 /* at least one frame was completed */
	int err;	 /* sticky error, 0 while healthy */
};

int sl_codec_stream_new(size_t limit, struct sl_codec_stream **out)
{
	struct sl_codec_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->ds = ZSTD_createDStream();
	if (!s->ds) {
		free(s);
		return ENOMEM;
	}
	/* the default window limit (2^27), stated: larger windows are refused as EFBIG */
	if (ZSTD_isError(ZSTD_DCtx_setParameter(s->ds, ZSTD_d_windowLogMax, 27))) {
		ZSTD_freeDStream(s->ds);
		free(s);
		return EINVAL;
	}
	s->limit = limit;
	s->boundary = true;
	*out = s;
	return 0;
}

void sl_codec_stream_free(struct sl_codec_stream *s)
{
	if (!s)
		return;
	ZSTD_freeDStream(s->ds);
	free(s);
}

int sl_codec_stream_read(struct sl_codec_stream *s, struct sl_codec_in *in,
			 struct sl_codec_out *out)
{
	if (s->err)
		return s->err;
	while (out->pos < out->len) {
		size_t room = out->len - out->pos, allowed = s->limit - s->produced, r;
		ZSTD_inBuffer zin = {in->ptr, in->len, in->pos};
		ZSTD_outBuffer zout;

		/* offer at most one byte beyond the limit, so that crossing it shows */
		if (allowed < SIZE_MAX && room > allowed + 1)
			room = allowed + 1;
		zout.dst = (char *)out->ptr + out->pos;
		zout.size = room;
		zout.pos = 0;
		r = ZSTD_decompressStream(s->ds, &zout, &zin);
		if (ZSTD_isError(r))
			return s->err = zerr(r);
		if (zin.pos == in->pos && zout.pos == 0)
			return 0; /* no input left and nothing held back */
		in->pos = zin.pos;
		out->pos += zout.pos;
		s->produced += zout.pos;
		if (s->produced > s->limit)
			return s->err = EFBIG;
		/* 0 means a frame ended and all of it was flushed */
		s->boundary = r == 0;
		if (r == 0)
			s->any_frame = true;
		if (zin.pos == zin.size && zout.pos < zout.size)
			return 0; /* input consumed, and zstd holds nothing more */
	}
	return 0;
}

int sl_codec_stream_end(const struct sl_codec_stream *s)
{
	if (s->err)
		return s->err;
	return s->boundary && s->any_frame ? 0 : SL_ECORRUPT;
}

int sl_codec_decompress(const void *src, size_t len, size_t limit, void **out, size_t *outlen)
{
	struct sl_codec_stream *s;
	struct sl_codec_in in = {src, len, 0};
	struct sl_codec_out o = {NULL, 0, 0};
	unsigned long long declared;
	size_t cap, hard;
	int rc;

	/* the buffer never needs more than limit + 1 bytes: one more means EFBIG */
	hard = limit < SIZE_MAX ? limit + 1 : SIZE_MAX;
	declared = len ? ZSTD_getFrameContentSize(src, len) : ZSTD_CONTENTSIZE_ERROR;
	if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN)
		cap = len < SIZE_MAX / 4 ? len * 4 : SIZE_MAX;
	else if (declared > limit)
		return EFBIG; /* the first frame alone says it is too large */
	else
		cap = (size_t)declared + 1; /* + 1: a next frame shows at once */
	if (cap < 256)
		cap = 256;
	if (cap > hard)
		cap = hard;
	rc = sl_codec_stream_new(limit, &s);
	if (rc)
		return rc;
	for (;;) {
		if (o.pos == o.len) {
			size_t ncap = o.len == 0 ? cap : (o.len < hard / 2 ? o.len * 2 : hard);
			void *p;

			if (ncap <= o.len) {
				rc = EFBIG; /* unreachable: the stream stops at limit + 1 */
				goto fail;
			}
			p = realloc(o.ptr, ncap);
			if (!p) {
				rc = ENOMEM;
				goto fail;
			}
			o.ptr = p;
			o.len = ncap;
		}
		rc = sl_codec_stream_read(s, &in, &o);
		if (rc)
			goto fail;
		if (o.pos < o.len)
			break; /* room left: the stream took all it could */
	}
	rc = in.pos < in.len ? SL_ECORRUPT : sl_codec_stream_end(s);
	if (rc)
		goto fail;
	sl_codec_stream_free(s);
	*out = o.ptr;
	*outlen = o.pos;
	return 0;
fail:
	free(o.ptr);
	sl_codec_stream_free(s);
	return rc;
}

int sl_codec_content_size(const void *src, size_t len, unsigned long long *size)
{
	const char *p = src;
	unsigned long long total = 0;

	if (len == 0)
		return ENOENT;
	while (len) {
		unsigned long long n = ZSTD_getFrameContentSize(p, len);
		size_t flen = ZSTD_findFrameCompressedSize(p, len);
		if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR ||
		    ZSTD_isError(flen) || flen == 0 || total + n < total)
			return ENOENT;
		total += n;
		p += flen;
		len -= flen;
	}
	*size = total;
	return 0;
}

int sl_codec_decompress_into(const void *src, size_t len, void *buf, size_t size,
			     int (*progress)(void *ctx, size_t n), void *ctx)
{
	size_t feed = SL_FAULT_SIZE("zst.feed", 1u << 20); /* compressed bytes per step */
	struct sl_codec_out out = {buf, size + 1, 0};
	struct sl_codec_stream *s;
	int rc = sl_codec_stream_new(size, &s);

	for (size_t fed = 0; rc == 0 && fed < len;) {
		struct sl_codec_in in = {(const char *)src + fed, len - fed < feed ? len - fed : feed, 0};
		/* the room never runs out before the limit does: the step's input is all taken */
		rc = sl_codec_stream_read(s, &in, &out);
		fed += in.pos;
		if (rc == 0 && progress)
			rc = progress(ctx, out.pos);
	}
	if (rc == 0)
		rc = sl_codec_stream_end(s);
	if (rc == 0 && out.pos != size)
		rc = SL_ECORRUPT; /* fewer bytes than the headers said */
	if (rc == EFBIG && out.pos > size)
		rc = SL_ECORRUPT; /* more */
	sl_codec_stream_free(s);
	return rc;
}

struct sl_codec_writer {
	ZSTD_CCtx *cctx;
	char *buf; /* the last call's compressed bytes */
	size_t cap;
};

int sl_codec_writer_new(int level, struct sl_codec_writer **out)
{
	struct sl_codec_writer *w;
	size_t r;

	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
		return EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ENOMEM;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx) {
		free(w);
		return ENOMEM;
	}
	r = ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
	if (ZSTD_isError(r)) {
		sl_codec_writer_free(w);
		return zerr(r);
	}
	*out = w;
	return 0;
}

void sl_codec_writer_free(struct sl_codec_writer *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cctx);
	free(w->buf);
	free(w);
}

int sl_codec_writer_put(struct sl_codec_writer *w, const void *src, size_t len, bool end,
			const void **out, size_t *outlen)
{
	ZSTD_inBuffer in = {src, len, 0};
	ZSTD_outBuffer o = {w->buf, w->cap, 0};
	size_t bound = ZSTD_compressBound(len);

	if (ZSTD_isError(bound))
		return EFBIG;
	for (;;) {
		/* room for all of it at once, as zstd's bound, plus a block it may hold */
		if (o.size - o.pos < bound + ZSTD_CStreamOutSize()) {
			size_t cap = o.pos + bound + ZSTD_CStreamOutSize();
			char *p = realloc(w->buf, cap);
			if (!p)
				return ENOMEM;
			w->buf = p;
			w->cap = cap;
			o.dst = p;
			o.size = cap;
		}
		size_t left = ZSTD_compressStream2(w->cctx, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
		if (ZSTD_isError(left))
			return zerr(left);
		if (in.pos == in.size && (!end || left == 0))
			break;
	}
	*out = w->buf;
	*outlen = o.pos;
	return 0;
}
