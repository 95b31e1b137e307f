/* SPDX-License-Identifier: MIT */
/*
 * The zstd codec: the only module that includes zstd.h. Compresses a buffer
 * into one frame (the sink's parts) and decompresses landed `.zst` files,
 * whole or streamed, with an output limit against decompression bombs.
 * Every function is thread-safe; a stream is used by one thread at a time.
 */
#ifndef SLUICE_CORE_CODEC_H
#define SLUICE_CORE_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#define SL_CODEC_LEVEL_DEFAULT 3 /* zstd's own default level */

/*
 * Compresses len bytes at src (len may be 0) into exactly one zstd frame
 * that records its content size and carries a checksum, at level (zstd's
 * range, negative levels included; SL_CODEC_LEVEL_DEFAULT when unsure).
 * Returns 0 with *out new (free(3) it) holding *outlen bytes; EINVAL for a
 * level zstd refuses; EFBIG when len is beyond what zstd can bound; ENOMEM.
 * On failure *out and *outlen are untouched.
 */
int sl_codec_compress(const void *src, size_t len, int level, void **out, size_t *outlen);

/*
 * Decompresses the len bytes at src: one or more concatenated zstd frames
 * (with or without a content size in their headers; skippable frames yield
 * nothing) that must end exactly at a frame boundary. limit is the largest
 * output accepted, in bytes (SIZE_MAX for none). Returns 0 with *out new
 * (free(3) it; never NULL, even for 0 bytes) holding *outlen bytes;
 * EFBIG when the output would exceed limit or a frame needs a window beyond
 * 128 MiB (zstd's default, as its CLI without --long); SL_ECORRUPT when the
 * input is not zstd, is empty (as the zstd CLI, no frame is an error), is
 * truncated, holds trailing garbage, or fails its checksum; ENOMEM. On
 * failure *out and *outlen are untouched.
 */
int sl_codec_decompress(const void *src, size_t len, size_t limit, void **out, size_t *outlen);

/*
 * Streaming decompression, for inputs too large to hold. Spans are
 * caller-owned and advanced by the callee, as zstd's ZSTD_inBuffer: ptr and
 * len describe the buffer, pos is how much of it is consumed (in) or filled
 * (out).
 */
struct sl_codec_in {
	const void *ptr; /* compressed bytes */
	size_t len;	 /* bytes at ptr */
	size_t pos;	 /* bytes consumed, <= len */
};

struct sl_codec_out {
	void *ptr;  /* room for decompressed bytes */
	size_t len; /* bytes of room at ptr */
	size_t pos; /* bytes written, <= len */
};

struct sl_codec_stream;

/* A new decoder accepting at most limit output bytes in all (SIZE_MAX: none). 0 or ENOMEM. */
int sl_codec_stream_new(size_t limit, struct sl_codec_stream **out);
/* Frees a decoder. Accepts NULL. */
void sl_codec_stream_free(struct sl_codec_stream *s);

/*
 * Decompresses from in into out until in is consumed or out is full,
 * advancing in->pos and out->pos. Call again with more room when out came
 * back full, even with no new input (zstd may hold decoded bytes), and with
 * the rest of the input. Returns 0, EFBIG past the limit (out may then hold
 * one byte beyond it), SL_ECORRUPT for invalid input, or ENOMEM; after an
 * error the stream only returns that error.
 */
int sl_codec_stream_read(struct sl_codec_stream *s, struct sl_codec_in *in,
			 struct sl_codec_out *out);

/*
 * Called once the input is exhausted: 0 when it ended at a frame boundary
 * after at least one frame and every decoded byte was handed out, else
 * SL_ECORRUPT (truncated or empty input), or the error the stream holds.
 */
int sl_codec_stream_end(const struct sl_codec_stream *s);

/*
 * The decompressed size the frame headers of the len bytes at src declare,
 * summed over their frames: 0 with *size, or ENOENT when a frame does not
 * say (the zstd CLI reading a pipe) or the input is not zstd frames.
 */
int sl_codec_content_size(const void *src, size_t len, unsigned long long *size);

/*
 * Decompresses the len bytes at src, whose frames declare size bytes in
 * all, into buf (room for size + 1 bytes: one more shows a file longer than
 * its headers say), calling progress(ctx, n) whenever the first n bytes of
 * buf are final; a nonzero return from it stops the work and is returned.
 * Returns 0 once exactly size bytes were made; SL_ECORRUPT when the input
 * is not valid zstd, is truncated, or makes more or fewer bytes than its
 * headers say; EFBIG for a window beyond 128 MiB; ENOMEM.
 */
int sl_codec_decompress_into(const void *src, size_t len, void *buf, size_t size,
			     int (*progress)(void *ctx, size_t n), void *ctx);

/*
 * Streaming compression, for a part written a slice at a time: the slices
 * given in order become one zstd frame with a checksum, as
 * sl_codec_compress() makes of their concatenation, except that the frame
 * header records no content size (the total is not known up front) unless
 * the first call ends the frame.
 */
struct sl_codec_writer;

/* A new compressor at level. 0, EINVAL (a level zstd refuses) or ENOMEM. */
int sl_codec_writer_new(int level, struct sl_codec_writer **out);
/* Frees a compressor. Accepts NULL. */
void sl_codec_writer_free(struct sl_codec_writer *w);

/*
 * Compresses the len bytes at src, the frame's last when end is true (len
 * may be 0). *out and *outlen get the compressed bytes made by this call
 * (maybe none until the end), owned by w until its next call. Returns 0,
 * EFBIG (beyond what zstd can bound) or ENOMEM; after an error w is only
 * good for freeing.
 */
int sl_codec_writer_put(struct sl_codec_writer *w, const void *src, size_t len, bool end,
			const void **out, size_t *outlen);

#endif
