/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/codec.c: one frame per compression, round trips, the
 * zstd CLI reading our frames (skipped without the CLI), concatenated and
 * size-less frames, the output limit, corrupt input, streaming in pieces.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "codec.h"

/* Deterministic test bytes: half text-like, half noise. */
static void fill(unsigned char *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = i % 2048 < 1024 ? (unsigned char)("sluice "[i % 7])
				       : (unsigned char)(seed >> 16);
	}
}

/* A frame without a content size, built by hand: raw and RLE blocks. */
struct frame {
	unsigned char b[1 << 16];
	size_t len;
};

static void frame_start(struct frame *f, int window_log)
{
	static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};

	memcpy(f->b, magic, 4);
	f->b[4] = 0x00; /* descriptor: no content size, no checksum */
	f->b[5] = (unsigned char)((window_log - 10) << 3); /* window descriptor */
	f->len = 6;
}

static void frame_block(struct frame *f, int type, const void *data, size_t size, int last)
{
	uint32_t h = (uint32_t)last | (uint32_t)type << 1 | (uint32_t)size << 3;

	f->b[f->len++] = (unsigned char)h;
	f->b[f->len++] = (unsigned char)(h >> 8);
	f->b[f->len++] = (unsigned char)(h >> 16);
	if (type == 0) {
		memcpy(f->b + f->len, data, size);
		f->len += size;
	} else {
		f->b[f->len++] = *(const unsigned char *)data; /* RLE: one byte, size times */
	}
}

static int have_zstd_cli(void) { return system("zstd --version >/dev/null 2>&1") == 0; }

static int write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return errno;
	ok = fwrite(p, 1, n, f) == n;
	return fclose(f) == 0 && ok ? 0 : EIO;
}

static void *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *p;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	p = malloc((size_t)len + 1);
	if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

static void test_round_trip(void)
{
	static const size_t sizes[] = {0, 1, 100, 4096, 300000, 3 << 20};
	unsigned char *src = malloc(3 << 20);

	CHECK(src);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *z = NULL, *d = NULL;
		size_t zlen = 0, dlen = 0;

		fill(src, sizes[i], (uint32_t)i);
		CHECK_OK(sl_codec_compress(src, sizes[i], SL_CODEC_LEVEL_DEFAULT, &z, &zlen));
		CHECK(zlen >= 4 && !memcmp(z, "\x28\xB5\x2F\xFD", 4));
		CHECK_OK(sl_codec_decompress(z, zlen, SIZE_MAX, &d, &dlen));
		CHECK(d != NULL && dlen == sizes[i] && !memcmp(d, src, sizes[i]));
		free(d);
		/* exactly the size fits; one byte less does not */
		CHECK_OK(sl_codec_decompress(z, zlen, sizes[i], &d, &dlen));
		free(d);
		if (sizes[i]) {
			d = (void *)1;
			CHECK(sl_codec_decompress(z, zlen, sizes[i] - 1, &d, &dlen) == EFBIG);
			CHECK(d == (void *)1);
		}
		free(z);
	}
	/* levels: fast negative, high, refused */
	for (int level = -5; level <= 19; level += 12) {
		void *z, *d;
		size_t zlen, dlen;

		fill(src, 10000, 7);
		CHECK_OK(sl_codec_compress(src, 10000, level, &z, &zlen));
		CHECK_OK(sl_codec_decompress(z, zlen, 10000, &d, &dlen));
		CHECK(dlen == 10000 && !memcmp(d, src, 10000));
		free(z);
		free(d);
	}
	{
		void *z = (void *)1;
		size_t zlen = 7;
		CHECK(sl_codec_compress(src, 10, 1000, &z, &zlen) == EINVAL);
		CHECK(z == (void *)1 && zlen == 7);
	}
	free(src);
}

/* The zstd CLI reads our frame, sees one frame, and restores the bytes. */
static void test_cli_reads_frame(void)
{
	char zpath[256], cmd[700], opath[256], lpath[256];
	unsigned char src[50000];
	void *z, *back;
	size_t zlen, blen;
	const char *dir;

	if (!have_zstd_cli()) {
		printf("     (zstd CLI missing: check skipped)\n");
		return;
	}
	dir = test_dir();
	fill(src, sizeof(src), 3);
	CHECK_OK(sl_codec_compress(src, sizeof(src), SL_CODEC_LEVEL_DEFAULT, &z, &zlen));
	snprintf(zpath, sizeof(zpath), "%s/x.zst", dir);
	snprintf(opath, sizeof(opath), "%s/x", dir);
	snprintf(lpath, sizeof(lpath), "%s/list", dir);
	CHECK_OK(write_file(zpath, z, zlen));
	free(z);
	snprintf(cmd, sizeof(cmd), "zstd -q -dc '%s' > '%s'", zpath, opath);
	CHECK(system(cmd) == 0);
	back = read_file(opath, &blen);
	CHECK(back && blen == sizeof(src) && !memcmp(back, src, blen));
	free(back);
	snprintf(cmd, sizeof(cmd), "zstd -lv '%s' > '%s' 2>&1", zpath, lpath);
	CHECK(system(cmd) == 0);
	back = read_file(lpath, &blen);
	CHECK(back);
	((char *)back)[blen] = 0;
	if (!strstr(back, "Zstandard Frames: 1\n") || !strstr(back, "Check: XXH64")) {
		fprintf(stderr, "zstd -lv said:\n%s\n", (char *)back);
		free(back);
		CHECK(0);
	}
	free(back);
	/* and we read what the CLI writes from a pipe: no content size */
	snprintf(cmd, sizeof(cmd), "cat '%s' | zstd -q -c > '%s'", opath, zpath);
	CHECK(system(cmd) == 0);
	z = read_file(zpath, &zlen);
	CHECK(z);
	CHECK_OK(sl_codec_decompress(z, zlen, sizeof(src), &back, &blen));
	CHECK(blen == sizeof(src) && !memcmp(back, src, blen));
	free(back);
	free(z);
}

static void test_concatenated_frames(void)
{
	unsigned char a[20000], b[777], both[sizeof(a) + sizeof(b)];
	unsigned char *cat;
	void *za, *zb, *d;
	size_t la, lb, dlen;
	struct frame f;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	memcpy(both, a, sizeof(a));
	memcpy(both + sizeof(a), b, sizeof(b));
	CHECK_OK(sl_codec_compress(a, sizeof(a), 1, &za, &la));
	CHECK_OK(sl_codec_compress(b, sizeof(b), 1, &zb, &lb));
	/* frame a, a skippable frame, a size-less frame, frame b */
	frame_start(&f, 10);
	frame_block(&f, 0, "raw!", 4, 1);
	cat = malloc(la + 12 + f.len + lb);
	CHECK(cat);
	memcpy(cat, za, la);
	memcpy(cat + la, "\x50\x2A\x4D\x18\x04\x00\x00\x00skip", 12);
	memcpy(cat + la + 12, f.b, f.len);
	memcpy(cat + la + 12 + f.len, zb, lb);
	CHECK_OK(sl_codec_decompress(cat, la + 12 + f.len + lb, SIZE_MAX, &d, &dlen));
	CHECK(dlen == sizeof(a) + 4 + sizeof(b));
	CHECK(!memcmp(d, a, sizeof(a)) && !memcmp((char *)d + sizeof(a), "raw!", 4));
	CHECK(!memcmp((char *)d + sizeof(a) + 4, b, sizeof(b)));
	free(d);
	/* the first frame declares its size, but the limit counts every frame */
	CHECK(sl_codec_decompress(cat, la + 12 + f.len + lb, sizeof(a) + 4, &d, &dlen) == EFBIG);
	free(cat);
	free(za);
	free(zb);
}

static void test_frame_without_size(void)
{
	struct frame f;
	unsigned char raw[1000], want[1000 + 3000];
	void *d;
	size_t dlen;

	fill(raw, sizeof(raw), 9);
	frame_start(&f, 12); /* 4 KiB window */
	frame_block(&f, 0, raw, sizeof(raw), 0);
	frame_block(&f, 1, "z", 3000, 1);
	memcpy(want, raw, sizeof(raw));
	memset(want + sizeof(raw), 'z', 3000);
	CHECK_OK(sl_codec_decompress(f.b, f.len, SIZE_MAX, &d, &dlen));
	CHECK(dlen == sizeof(want) && !memcmp(d, want, dlen));
	free(d);
	CHECK_OK(sl_codec_decompress(f.b, f.len, sizeof(want), &d, &dlen));
	free(d);
	CHECK(sl_codec_decompress(f.b, f.len, sizeof(want) - 1, &d, &dlen) == EFBIG);
}

/* 4-byte RLE blocks of 128 KiB each: a bomb without a declared size. */
static void test_bomb_limit(void)
{
	struct frame *f = malloc(sizeof(*f));
	void *z, *d = (void *)1;
	size_t zlen, dlen = 5;
	unsigned char *zeros;

	CHECK(f);
	frame_start(f, 17);
	for (int i = 0; i < 4000; i++) /* 500 MiB from 16 KB */
		frame_block(f, 1, "\0", 128 << 10, i == 3999);
	CHECK(sl_codec_decompress(f->b, f->len, 1 << 20, &d, &dlen) == EFBIG);
	CHECK(d == (void *)1 && dlen == 5);
	free(f);

	/* a declared size over the limit is refused before decoding */
	zeros = calloc(1, 8 << 20);
	CHECK(zeros);
	CHECK_OK(sl_codec_compress(zeros, 8 << 20, 1, &z, &zlen));
	free(zeros);
	CHECK(zlen < 4096);
	CHECK(sl_codec_decompress(z, zlen, 1 << 20, &d, &dlen) == EFBIG);
	CHECK(sl_codec_decompress(z, zlen, 0, &d, &dlen) == EFBIG);
	free(z);

	/* a window beyond 128 MiB is refused as too large */
	frame_start(f = malloc(sizeof(*f)), 31);
	frame_block(f, 0, "x", 1, 1);
	CHECK(sl_codec_decompress(f->b, f->len, SIZE_MAX, &d, &dlen) == EFBIG);
	free(f);
}

static void test_corrupt(void)
{
	unsigned char src[5000], *bad;
	void *z, *d = (void *)1;
	size_t zlen, dlen = 3;

	fill(src, sizeof(src), 5);
	CHECK_OK(sl_codec_compress(src, sizeof(src), 3, &z, &zlen));
	bad = malloc(zlen + 8);
	CHECK(bad);
	/* empty, not zstd, truncated, trailing garbage, bad checksum */
	CHECK(sl_codec_decompress("", 0, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	CHECK(sl_codec_decompress("plain text\n", 11, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	CHECK(sl_codec_decompress(z, 3, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	CHECK(sl_codec_decompress(z, zlen - 1, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	CHECK(sl_codec_decompress(z, zlen / 2, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	memcpy(bad, z, zlen);
	memcpy(bad + zlen, "garbage!", 8);
	CHECK(sl_codec_decompress(bad, zlen + 8, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	memcpy(bad, z, zlen);
	bad[zlen - 1] ^= 0x55;
	CHECK(sl_codec_decompress(bad, zlen, SIZE_MAX, &d, &dlen) == SL_ECORRUPT);
	CHECK(d == (void *)1 && dlen == 3);
	free(bad);
	free(z);
}

/* Streamed one input byte at a time into a 7-byte buffer: same bytes. */
static void test_stream_pieces(void)
{
	unsigned char src[40000], out[7], *got = malloc(2 * sizeof(src));
	void *z1, *z2;
	size_t l1, l2, total = 0;
	struct sl_codec_stream *s;
	unsigned char *cat;

	CHECK(got);
	fill(src, sizeof(src), 11);
	CHECK_OK(sl_codec_compress(src, sizeof(src), 3, &z1, &l1));
	CHECK_OK(sl_codec_compress(src, sizeof(src), 9, &z2, &l2));
	cat = malloc(l1 + l2);
	CHECK(cat);
	memcpy(cat, z1, l1);
	memcpy(cat + l1, z2, l2);
	CHECK_OK(sl_codec_stream_new(SIZE_MAX, &s));
	CHECK(sl_codec_stream_end(s) == SL_ECORRUPT); /* nothing yet */
	for (size_t i = 0; i < l1 + l2; i++) {
		struct sl_codec_in in = {cat + i, 1, 0};
		do {
			struct sl_codec_out o = {out, sizeof(out), 0};
			CHECK_OK(sl_codec_stream_read(s, &in, &o));
			CHECK(total + o.pos <= 2 * sizeof(src));
			memcpy(got + total, out, o.pos);
			total += o.pos;
			if (o.pos < o.len && in.pos == in.len)
				break;
		} while (1);
		if (i == l1 - 2)
			CHECK(sl_codec_stream_end(s) == SL_ECORRUPT); /* mid-frame */
	}
	CHECK_OK(sl_codec_stream_end(s));
	CHECK(total == 2 * sizeof(src));
	CHECK(!memcmp(got, src, sizeof(src)) && !memcmp(got + sizeof(src), src, sizeof(src)));
	sl_codec_stream_free(s);
	sl_codec_stream_free(NULL);

	/* a limit in the stream: the error is sticky */
	CHECK_OK(sl_codec_stream_new(100, &s));
	{
		struct sl_codec_in in = {z1, l1, 0};
		unsigned char big[1000];
		struct sl_codec_out o = {big, sizeof(big), 0};
		CHECK(sl_codec_stream_read(s, &in, &o) == EFBIG);
		CHECK(o.pos == 101);
		CHECK(sl_codec_stream_read(s, &in, &o) == EFBIG);
		CHECK(sl_codec_stream_end(s) == EFBIG);
	}
	sl_codec_stream_free(s);
	free(cat);
	free(z1);
	free(z2);
	free(got);
}

/*
 * The streaming compressor: slices of any size, empty ones included, make
 * one frame (with a checksum, the zstd CLI says) that restores their
 * concatenation; a refused level is EINVAL.
 */
static void test_writer_slices(void)
{
	static const size_t slices[] = {1, 1000, 65536, 1 << 20, 5 << 20};
	size_t total = 5 << 20;
	unsigned char *src = malloc(total);
	struct sl_codec_writer *w;

	CHECK(src);
	fill(src, total, 11);
	for (size_t k = 0; k < sizeof(slices) / sizeof(slices[0]); k++) {
		size_t n = k == 0 ? 4000 : total; /* 4000 one-byte slices */
		unsigned char *z = NULL;
		size_t zlen = 0;
		CHECK_OK(sl_codec_writer_new(SL_CODEC_LEVEL_DEFAULT, &w));
		for (size_t from = 0; from < n; from += slices[k]) {
			size_t len = from + slices[k] < n ? slices[k] : n - from;
			bool end = from + len == n;
			const void *out;
			size_t outlen;
			bool apart = k % 2 == 0; /* the end with the last bytes, or alone */
			CHECK_OK(sl_codec_writer_put(w, src + from, len, end && !apart, &out, &outlen));
			if (end && apart) {
				z = realloc(z, zlen + outlen + 1);
				memcpy(z + zlen, out, outlen);
				zlen += outlen;
				CHECK_OK(sl_codec_writer_put(w, "", 0, true, &out, &outlen));
			}
			z = realloc(z, zlen + outlen + 1);
			CHECK(z);
			memcpy(z + zlen, out, outlen);
			zlen += outlen;
		}
		sl_codec_writer_free(w);
		void *d;
		size_t dlen;
		CHECK_OK(sl_codec_decompress(z, zlen, n, &d, &dlen));
		CHECK(dlen == n && !memcmp(d, src, n));
		free(d);
		if (k == 3 && have_zstd_cli()) {
			char zpath[256], lpath[256], cmd[600];
			const char *dir = test_dir();
			snprintf(zpath, sizeof(zpath), "%s/w.zst", dir);
			snprintf(lpath, sizeof(lpath), "%s/list", dir);
			CHECK_OK(write_file(zpath, z, zlen));
			snprintf(cmd, sizeof(cmd), "zstd -lv '%s' > '%s' 2>&1", zpath, lpath);
			CHECK(system(cmd) == 0);
			size_t llen;
			char *list = read_file(lpath, &llen);
			CHECK(list);
			list[llen] = 0;
			CHECK(strstr(list, "Zstandard Frames: 1\n") && strstr(list, "Check: XXH64"));
			free(list);
		}
		free(z);
	}
	CHECK(sl_codec_writer_new(1000, &w) == EINVAL);
	sl_codec_writer_free(NULL);
	free(src);
}

struct steps {
	size_t calls, last;
	bool grew; /* every call saw at least as many bytes as the one before */
	size_t stop_at; /* 0: never stop */
};

static int count_steps(void *ctx, size_t n)
{
	struct steps *st = ctx;
	st->grew = st->grew && n >= st->last;
	st->last = n;
	st->calls++;
	return st->stop_at && st->calls == st->stop_at ? ECANCELED : 0;
}

/*
 * Decompressing into a buffer of the declared size: the sizes the headers
 * declare (summed over frames; unknown from a pipe), the bytes, progress
 * that only grows, a stop from it, and a file longer, shorter or cut short
 * against its headers refused.
 */
static void test_decompress_into(void)
{
	size_t n = 3 << 20;
	unsigned char *src = malloc(n), *buf = malloc(n + 1);
	void *z, *z2, *zz;
	size_t zlen, z2len;
	unsigned long long size;

	CHECK(src && buf);
	fill(src, n, 5);
	CHECK_OK(sl_codec_compress(src, n, SL_CODEC_LEVEL_DEFAULT, &z, &zlen));
	CHECK_OK(sl_codec_content_size(z, zlen, &size));
	CHECK(size == n);
	struct steps st = {.grew = true};
	CHECK_OK(sl_codec_decompress_into(z, zlen, buf, n, count_steps, &st));
	CHECK(!memcmp(buf, src, n) && st.grew && st.last == n && st.calls >= 1);
	/* two frames: sizes summed, bytes joined */
	CHECK_OK(sl_codec_compress(src, 1000, SL_CODEC_LEVEL_DEFAULT, &z2, &z2len));
	CHECK((zz = malloc(zlen + z2len)));
	memcpy(zz, z, zlen);
	memcpy((char *)zz + zlen, z2, z2len);
	CHECK_OK(sl_codec_content_size(zz, zlen + z2len, &size));
	CHECK(size == n + 1000);
	unsigned char *big = malloc(n + 1001);
	CHECK(big);
	CHECK_OK(sl_codec_decompress_into(zz, zlen + z2len, big, n + 1000, NULL, NULL));
	CHECK(!memcmp(big, src, n) && !memcmp(big + n, src, 1000));
	/* headers that lie: one byte less or more than said; a file cut short */
	CHECK(sl_codec_decompress_into(z, zlen, buf, n - 1, NULL, NULL) == SL_ECORRUPT);
	CHECK(sl_codec_decompress_into(zz, zlen + z2len, big, n + 1000 + 1, NULL, NULL) ==
	      SL_ECORRUPT);
	CHECK(sl_codec_decompress_into(z, zlen / 2, buf, n, NULL, NULL) == SL_ECORRUPT);
	CHECK(sl_codec_decompress_into("not zstd at all", 15, buf, n, NULL, NULL) == SL_ECORRUPT);
	/* the progress callback stops it */
	st = (struct steps){.grew = true, .stop_at = 1};
	CHECK(sl_codec_decompress_into(z, zlen, buf, n, count_steps, &st) == ECANCELED);
	CHECK(st.calls == 1);
	/* a frame without its size (as from a pipe), and nothing: unknown */
	struct sl_codec_writer *w;
	const void *wout;
	size_t wlen;
	CHECK_OK(sl_codec_writer_new(SL_CODEC_LEVEL_DEFAULT, &w));
	unsigned char frame[2048];
	size_t flen;
	CHECK_OK(sl_codec_writer_put(w, src, 1000, false, &wout, &wlen));
	memcpy(frame, wout, flen = wlen);
	CHECK_OK(sl_codec_writer_put(w, "", 0, true, &wout, &wlen));
	CHECK(flen + wlen <= sizeof(frame));
	memcpy(frame + flen, wout, wlen);
	CHECK(sl_codec_content_size(frame, flen + wlen, &size) == ENOENT);
	sl_codec_writer_free(w);
	CHECK(sl_codec_content_size("", 0, &size) == ENOENT);
	free(big);
	free(zz);
	free(z2);
	free(z);
	free(buf);
	free(src);
}

int main(void)
{
	test(test_round_trip);
	test(test_cli_reads_frame);
	test(test_concatenated_frames);
	test(test_frame_without_size);
	test(test_bomb_limit);
	test(test_corrupt);
	test(test_stream_pieces);
	test(test_writer_slices);
	test(test_decompress_into);
	return test_exit();
}
