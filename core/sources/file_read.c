/* SPDX-License-Identifier: MIT */
/*
 * The file source's reading: a landed file's bytes (inline, or a blob
 * mapped), decoded on two cores when big, a .zst decompressed on one
 * thread while the other decodes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "codec.h"
#include "config.h"
#include "err.h"
#include "fault.h"
#include "file_int.h"
#include "land.h"
#include "outparts.h"

#define ZST_LIMIT (4ull << 30) /* a compressed input may expand to 4 GiB */
#define SPLIT_MIN (16u << 20)  /* files this big are decoded on both cores */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

/* Line ends in data[0, end): a FAILFAST line found past end is numbered after them. */
static uint64_t lines_before(const char *data, size_t end)
{
	uint64_t n = 0;
	for (const char *c = data; (c = memchr(c, '\n', (size_t)(data + end - c))); c++)
		n++;
	return n;
}

#define PIECE (8u << 20) /* bytes of a mapped file decoded before their pages are dropped */
#define SAMPLE (256u << 10) /* bytes whose line ends estimate a big input's rows */

/*
 * Gives back the whole pages inside [p, p + len), decoded and not read
 * again: a file mapping's come back from the page cache if touched, an
 * anonymous buffer's as zeros. The partial pages at either end stay (a
 * neighbour may still be decoding or writing there).
 */
static void drop_pages(const char *p, size_t len)
{
	uintptr_t from = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t to = ((uintptr_t)p + len) & ~(uintptr_t)4095;
	if (to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}

/* Rows per byte of data (len bytes), from the line ends of its first SAMPLE bytes; 0: unknown. */
static double rows_per_byte(const char *data, size_t len)
{
	return len < 2 * SAMPLE ? 0 : (double)lines_before(data, SAMPLE) / SAMPLE;
}

/*
 * Sizes b's columns for the rows of len more bytes at per rows a byte,
 * with a tenth to spare, so that a big input's columns are allocated once
 * instead of doubled (and copied) a dozen times. A hint: b still grows
 * past it, and a failure here is not one.
 */
static void reserve_for(struct sl_batch *b, double per, size_t len)
{
	size_t est = (size_t)((double)len * per * 1.1);
	if (est)
		(void)sl_batch_reserve(b, b->nrows + (est < len / 2 ? est : len / 2));
}

/* reserve_for() the rows of data, estimated from its own first bytes. */
static void reserve_rows(struct sl_batch *b, const char *data, size_t len)
{
	reserve_for(b, rows_per_byte(data, len), len);
}

/*
 * The last line end in p[0, n) that a piece may be cut after: one with a
 * byte after it in p, and that byte not "\xEF" (a piece's start could be
 * taken for a BOM, which only starts a file). NULL: none.
 */
static const char *last_cut(const char *p, size_t n)
{
	const char *nl = n > 1 ? memrchr(p, '\n', n - 1) : NULL;
	while (nl && (unsigned char)nl[1] == 0xEF)
		nl = nl > p ? memrchr(p, '\n', (size_t)(nl - p)) : NULL;
	return nl;
}

/*
 * sl_decode_file() over bytes [off, off + len) of the file fd, as one call
 * over them would do it, read with pread into one small buffer, decoded
 * and read again: the decoder reads bytes the copy just brought into the
 * cache, and touches no page of a file mapping. Measured on this project's
 * VM (a 196 MB file of wide events, the scanner alone): 0.18-0.21 s with
 * 256 KiB reads against 0.26-0.32 s straight from the mapping; 8 MiB reads
 * 0.24-0.27 s. Cut at line ends, never before "\xEF" (a chunk's start could
 * be taken for a BOM); a line longer than the buffer grows it.
 *
 * A file (cold) that was mostly out of the page cache when its reading
 * began (mincore of its mapping, before anything touched it) is read once
 * per query: its pages are given back to the kernel as they are decoded
 * (a few MiB at a time, POSIX_FADV_DONTNEED; the rest by sl_file_read()
 * once the file is done) instead of evicting the cache's other pages,
 * and the next reads reuse the memory they free. A file found cached stays
 * as it is (another query, or a reader of in/, may want it). On this
 * project's VM a page of memory new to the guest costs its first touch a
 * fault in the host too; reusing the cache's pages spares those. B3's job
 * on its cold 168 MiB file, 6 runs each alternating (/usr/bin/time, 3 s
 * after drop_caches): 1.11 s median against 1.42 s, system time 0.18-0.68
 * s against 0.18-1.24 s; its .zst (26 MB, dropped whole once decompressed)
 * 1.07 against 1.17 s.
 */
#define READ_CHUNK (256u << 10)
#define DROP_EVERY (4u << 20) /* a cold file's decoded bytes are given back in these, aligned */

/*
 * Whether most pages of the file mapping [p, p + len) are out of the page
 * cache (mincore(2)); false where it cannot say.
 */
static bool mostly_uncached(const char *p, size_t len)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)p & ~(pg - 1), to = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);
	size_t pages = (to - from) / pg, in = 0;
	unsigned char *vec = malloc(pages ? pages : 1);
	bool cold = false;

	if (vec && mincore((void *)from, to - from, vec) == 0) {
		for (size_t i = 0; i < pages; i++)
			in += vec[i] & 1;
		cold = in < pages / 2;
	}
	free(vec);
	return cold;
}

static int decode_read(struct sl_decoder *dec, const char *path, int fd, bool cold, uint64_t off,
		       size_t len, struct sl_batch *b, struct sl_decode_stats *st,
		       struct sl_decode_error *derr)
{
	size_t cap = SL_FAULT_SIZE("decode.piece", READ_CHUNK), have = 0, done = 0;
	size_t nrows = b->nrows, arena = b->arena_len;
	uint64_t dropped = off; /* the file's bytes before this were given back (if cold) */
	uint64_t lines0 = st->read_lines;
	char *buf = malloc(cap);
	int rc = buf ? 0 : ENOMEM;

	while (rc == 0 && (done < len || have)) {
		size_t want = cap - have < len - done ? cap - have : len - done;
		if (want) {
			ssize_t r = pread(fd, buf + have, want, (off_t)(off + done));
			if (r <= 0) {
				rc = r < 0 ? errno : SL_ECORRUPT; /* shorter than its record */
				break;
			}
			have += (size_t)r;
			done += (size_t)r;
		}
		size_t cut = have;
		if (done < len) {
			const char *nl = last_cut(buf, have);
			cut = nl ? (size_t)(nl + 1 - buf) : 0;
			if (!cut) {
				if (have < cap)
					continue; /* a short read: read on */
				char *grown = realloc(buf, 2 * cap);
				if (!grown) {
					rc = ENOMEM;
					break;
				}
				buf = grown;
				cap *= 2;
				continue;
			}
		}
		rc = sl_decode_file(dec, path, buf, cut, b, st, derr);
		if (rc == SL_EMALFORMED && derr)
			derr->line += st->read_lines - lines0;
		memmove(buf, buf + cut, have - cut);
		have -= cut;
		/* to a DROP_EVERY boundary: a folio of the cache that a range cuts is not dropped */
		uint64_t to = (off + done - have) & ~(uint64_t)(DROP_EVERY - 1);
		if (cold && to >= dropped + DROP_EVERY) {
			posix_fadvise(fd, (off_t)dropped, (off_t)(to - dropped), POSIX_FADV_DONTNEED);
			dropped = to;
		}
	}
	free(buf);
	if (rc) {
		/* as sl_decode_file(): b as it was on entry */
		b->nrows = nrows;
		b->arena_len = arena;
	}
	return rc;
}

/*
 * sl_decode_file() over data, as one call would do it; when the data may be
 * dropped (a file mapping, or a decompressed buffer read once), piece by
 * piece (cut at line ends), each piece's pages given back once decoded:
 * the strings a batch keeps are copies, so a big input never has to be
 * resident whole (peak RSS: a piece per thread, not the file). A FAILFAST
 * line is numbered from the lines the pieces before it read (st, never
 * NULL here), not by reading pages given back. Only for data that may be
 * cut (cuttable()).
 */
static int decode_pieces(struct sl_decoder *dec, const char *path, const char *data, size_t len,
			 bool mapped, int fd, bool cold, uint64_t off, struct sl_batch *b,
			 struct sl_decode_stats *st, struct sl_decode_error *derr)
{
	size_t pos = 0, piece = SL_FAULT_SIZE("decode.piece", PIECE);
	size_t nrows = b->nrows, arena = b->arena_len;
	uint64_t lines0 = st->read_lines;
	int rc;

	/*
	 * a mapped file read with pread instead (decode_read()), when its
	 * descriptor is open; cold: its pages leave the page cache once decoded
	 */
	if (fd >= 0 && len > SL_FAULT_SIZE("decode.piece", READ_CHUNK))
		return decode_read(dec, path, fd, cold, off, len, b, st, derr);
	if (!mapped || len <= piece)
		return sl_decode_file(dec, path, data, len, b, st, derr);
	while (pos < len) {
		size_t cut = len;
		if (len - pos > piece) {
			/* not before "\xEF": a piece's start could be taken for a BOM */
			const char *nl = memchr(data + pos + piece, '\n', len - pos - piece);
			while (nl && nl + 1 < data + len && (unsigned char)nl[1] == 0xEF)
				nl = memchr(nl + 1, '\n', (size_t)(data + len - nl - 1));
			if (nl && nl + 1 < data + len)
				cut = (size_t)(nl + 1 - data);
		}
		rc = sl_decode_file(dec, path, data + pos, cut - pos, b, st, derr);
		if (rc == SL_EMALFORMED && derr)
			derr->line += st->read_lines - lines0;
		if (rc) {
			/* as sl_decode_file(): b as it was on entry */
			b->nrows = nrows;
			b->arena_len = arena;
			return rc;
		}
		drop_pages(data + pos, cut - pos);
		pos = cut;
	}
	return 0;
}

static void *decode_half(void *arg)
{
	struct half *h = arg;
	if (h->into == &h->b)
		reserve_rows(&h->b, h->data, h->len);
	h->rc = decode_pieces(h->dec, h->path, h->data, h->len, h->mapped, h->fd, h->cold, h->off,
			      h->into, &h->st, &h->err);
	return NULL;
}

/* The second decoder, ready for a job on path (made at its first use). */
static int half_prepare(struct sl_source *p, const char *path)
{
	const struct sl_query_config *q = p->q;
	struct half *h = &p->half;
	int rc;

	if (!h->ready) {
		if ((rc = sl_decoder_new(q, &h->dec)))
			return rc;
		uint8_t *used = malloc(q->source.schema.n + 1);
		if (!used || (rc = sl_batch_init(&h->b, &q->source.schema))) {
			free(used);
			sl_decoder_free(h->dec);
			return used ? rc : ENOMEM;
		}
		/* projected as the engine's batch is, for sl_batch_append() */
		sl_config_used_columns(q, used);
		sl_batch_project(&h->b, used);
		free(used);
		if ((rc = sl_decode_stats_init(&h->st, q->source.schema.n))) {
			sl_batch_release(&h->b);
			sl_decoder_free(h->dec);
			return rc;
		}
		h->ready = true;
	}
	sl_batch_clear(&h->b);
	sl_decode_stats_reset(&h->st);
	memset(&h->err, 0, sizeof(h->err));
	h->path = path;
	h->into = &h->b;
	h->mapped = false;
	h->fd = -1;
	h->cold = false;
	h->off = 0;
	h->rc = 0;
	return 0;
}

/*
 * After the second decoder did the part after the cut (this thread the
 * part before, which read before_cut lines, with result rc): its rows
 * after this thread's (appended, or a side of b joined), its counters
 * added, its FAILFAST line numbered in the whole file.
 */
static int join_half(struct half *h, uint64_t before_cut, int rc, struct sl_batch *b,
		     struct sl_decode_stats *st, struct sl_decode_error *derr)
{
	if (rc == 0 && h->rc == SL_EMALFORMED) {
		*derr = h->err;
		derr->line += before_cut;
	}
	if (rc == 0)
		rc = h->rc;
	if (rc == 0) {
		rc = h->into == &h->b ? sl_batch_append(b, &h->b) : sl_batch_side_join(b, h->into);
		st->lines += h->st.lines;
		st->rows += h->st.rows;
		st->malformed += h->st.malformed;
		st->dropped += h->st.dropped;
		st->read_lines += h->st.read_lines;
		for (size_t c = 0; c < st->ncols && c < h->st.ncols; c++)
			st->null_counts[c] += h->st.null_counts[c];
	} else if (h->into != &h->b) {
		sl_batch_side_drop(h->into);
	}
	h->into = &h->b;
	sl_batch_trim(&h->b, 1 << 16);
	return rc;
}

/* A file's decoding counters as they were before it, to start it over. */
struct stats_mark {
	struct sl_decode_stats s;
	uint64_t *nulls;
};

static int stats_mark(const struct sl_decode_stats *st, struct stats_mark *m)
{
	m->s = *st;
	m->nulls = malloc((st->ncols ? st->ncols : 1) * sizeof(*m->nulls));
	if (!m->nulls)
		return ENOMEM;
	if (st->ncols)
		memcpy(m->nulls, st->null_counts, st->ncols * sizeof(*m->nulls));
	return 0;
}

static void stats_back(struct sl_decode_stats *st, struct stats_mark *m)
{
	uint64_t *counts = st->null_counts;
	*st = m->s;
	st->null_counts = counts;
	if (st->ncols)
		memcpy(counts, m->nulls, st->ncols * sizeof(*counts));
}

/* Whether a file of q can be decoded in pieces cut at line ends (no CSV header to share). */
static bool cuttable(const struct sl_query_config *q)
{
	return !(q->source.format == SL_SOURCE_CSV && q->source.header);
}

/*
 * Decodes data[0, cut) into b on this thread and data[cut, len) into
 * h->into on another (half_prepare() done); returns this thread's result,
 * the other's is h->rc. *ran false: no thread could be had, nothing done.
 */
static int run_halves(struct sl_source *p, struct sl_decoder *dec, const char *path,
		      const char *data, size_t len, size_t cut, bool mapped, int fd, bool cold,
		      struct sl_batch *b, struct sl_decode_stats *st, struct sl_decode_error *derr,
		      bool *ran)
{
	struct half *h = &p->half;
	pthread_t th;

	h->data = data + cut;
	h->len = len - cut;
	h->mapped = mapped;
	h->fd = fd;
	h->cold = cold;
	h->off = cut;
	*ran = pthread_create(&th, NULL, decode_half, h) == 0;
	if (!*ran)
		return 0;
	int rc = decode_pieces(dec, path, data, cut, mapped, fd, cold, 0, b, st, derr);
	pthread_join(th, NULL);
	/*
	 * Decoded strings are copies: the file's pages can leave this process
	 * before the halves are joined (they stay in the page cache).
	 */
	if (mapped)
		madvise((void *)data, len, MADV_DONTNEED);
	return rc;
}

/*
 * Decodes one file, the second half of a big one on another thread, as one
 * sl_decode_file() would: rows in order, counters summed, a FAILFAST line
 * numbered in the whole file. Only where a line end cuts the file cleanly
 * (no csv header to share).
 *
 * The second half's rows go straight into b, past room left for the first
 * half's (both estimated from the file's first line ends, with a sixth to
 * spare), and are moved down to meet them when both are done: never copied
 * into memory of their own first (on this project's VM a page's first
 * touch is what a big batch costs most). A half that outgrows its room has
 * the file decoded again, the second half into a batch of its own,
 * appended (as when the rows cannot be estimated).
 */
static int decode_split(struct sl_source *p, struct sl_decoder *dec, const char *path,
			const char *data, size_t len, bool mapped, int fd, bool cold, struct sl_batch *b,
			struct sl_decode_stats *st, struct sl_decode_error *derr)
{
	struct half *h = &p->half;
	const char *nl = len >= SPLIT_MIN ? memchr(data + len / 2, '\n', len - len / 2) : NULL;
	size_t cut = nl ? (size_t)(nl - data) + 1 : 0;
	bool ran;
	int rc;

	/* a cut before "\xEF" could be taken for a BOM, which only starts a file */
	if (!cuttable(p->q))
		return sl_decode_file(dec, path, data, len, b, st, derr);
	double per = rows_per_byte(data, len);
	if (!nl || cut >= len || (unsigned char)data[cut] == 0xEF) {
		reserve_for(b, per, len);
		return decode_pieces(dec, path, data, len, mapped, fd, cold, 0, b, st, derr);
	}
	if ((rc = half_prepare(p, path)))
		return rc;
	uint64_t lines0 = st->read_lines;
	size_t row0 = b->nrows, arena0 = b->arena_len, saved;
	size_t room1 = row0 + SL_FAULT_SIZE("decode.side_first", (size_t)(per * cut * 7 / 6) + 1024);
	size_t room2 = room1 + SL_FAULT_SIZE("decode.side_second",
					     (size_t)(per * (len - cut) * 7 / 6) + 1024);
	struct sl_batch side;
	struct stats_mark mark;
	if (per && room2 - row0 < len / 2 && sl_batch_reserve(b, room2) == 0 &&
	    sl_batch_side_begin(b, room1, room2, &side) == 0) {
		if (stats_mark(st, &mark) == 0) {
			h->into = &side;
			sl_batch_cap(b, room1, &saved);
			rc = run_halves(p, dec, path, data, len, cut, mapped, fd, cold, b, st, derr, &ran);
			bool over = sl_batch_uncap(b, saved) || side.full;
			if (ran && !over) {
				free(mark.nulls);
				return join_half(h, st->read_lines - lines0, rc, b, st, derr);
			}
			/* a half outgrew its room (or no thread): the file again, appended */
			b->nrows = row0;
			b->arena_len = arena0;
			stats_back(st, &mark);
			free(mark.nulls);
			memset(derr, 0, sizeof(*derr));
		}
		h->into = &h->b;
		sl_batch_side_drop(&side);
		if ((rc = half_prepare(p, path)))
			return rc;
	}
	reserve_for(b, per, len); /* all of it: a second half is appended to b */
	rc = run_halves(p, dec, path, data, len, cut, mapped, fd, cold, b, st, derr, &ran);
	if (!ran)
		return decode_pieces(dec, path, data, len, mapped, fd, cold, 0, b, st, derr);
	return join_half(h, st->read_lines - lines0, rc, b, st, derr);
}

/*
 * A big .zst file: decompressed on a second thread while this one decodes
 * what has arrived, up to its last line end; once all of it is there, the
 * rest is cut in two at a line end and the second thread decodes the
 * latter part. Decompression and decoding overlap instead of following
 * each other, and the result is sl_decode_file()'s over the whole. The
 * buffer's pages go as they are decoded, as a mapped file's do: the
 * decompressed file is not resident whole beside the batch it becomes.
 */
#define ZPIECE (8u << 20) /* decompressed bytes this thread waits for before decoding */

struct zpipe {
	const char *src;  /* the compressed file */
	size_t srclen;
	char *buf;        /* size + 1 bytes (see sl_codec_decompress_into) */
	size_t size;      /* what the frame headers declare */
	struct half *h;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t avail;     /* bytes of buf decompressed so far */
	bool done;        /* decompression over, with zrc */
	int zrc;
	bool tail_set;    /* the decoder said where the tail starts (size: none) */
	bool stop;        /* the decoder gave up: no tail, stop decompressing */
	size_t tail_from;
};

/* Decompression's progress: n bytes are there (ECANCELED once the decoder gave up). */
static int zpipe_progress(void *ctx, size_t n)
{
	struct zpipe *z = ctx;
	pthread_mutex_lock(&z->mu);
	z->avail = n;
	bool stop = z->stop;
	pthread_cond_broadcast(&z->cv);
	pthread_mutex_unlock(&z->mu);
	return stop ? ECANCELED : 0;
}

static void *zpipe_main(void *arg)
{
	struct zpipe *z = arg;
	int rc = sl_codec_decompress_into(z->src, z->srclen, z->buf, z->size, zpipe_progress, z);

	pthread_mutex_lock(&z->mu);
	z->done = true;
	z->zrc = rc;
	pthread_cond_broadcast(&z->cv);
	while (!z->tail_set)
		pthread_cond_wait(&z->cv, &z->mu);
	size_t from = z->tail_from;
	pthread_mutex_unlock(&z->mu);
	struct half *h = z->h;
	if (rc == 0 && from < z->size) {
		h->data = z->buf + from;
		h->len = z->size - from;
		h->mapped = true; /* read once: its pages go as it is decoded */
		decode_half(h);
	}
	return NULL;
}

/* Tells the second thread where its tail starts (z->size: none, stop). */
static void zpipe_tail(struct zpipe *z, size_t from, bool stop)
{
	pthread_mutex_lock(&z->mu);
	z->tail_from = from;
	z->tail_set = true;
	z->stop = stop;
	pthread_cond_broadcast(&z->cv);
	pthread_mutex_unlock(&z->mu);
}

/*
 * Decodes the .zst file src whose frames declare size bytes. Returns as
 * decode_split() does, with *zfail set when the error is the
 * decompression's (corrupt, truncated, too big), or EAGAIN when no thread
 * could be had (nothing done: decode it whole).
 */
static int decode_zst(struct sl_source *p, struct sl_decoder *dec, const char *path, const char *src,
		      size_t srclen, size_t size, struct sl_batch *b, struct sl_decode_stats *st,
		      struct sl_decode_error *derr, bool *zfail)
{
	struct zpipe z = {.src = src, .srclen = srclen, .size = size, .h = &p->half};
	pthread_t th;
	int rc;

	if ((rc = half_prepare(p, path)))
		return rc;
	if (!(z.buf = malloc(size + 1)))
		return ENOMEM;
	pthread_mutex_init(&z.mu, NULL);
	pthread_cond_init(&z.cv, NULL);
	if (pthread_create(&th, NULL, zpipe_main, &z)) {
		rc = EAGAIN;
		goto out;
	}
	size_t piece = SL_FAULT_SIZE("zst.piece", ZPIECE);
	size_t pos = 0, want = piece;
	uint64_t lines0 = st->read_lines; /* + the lines before pos */
	/*
	 * A test build's knob: pieces of at most piece bytes and, after that
	 * many, a wait for the whole: where each part starts is then the same
	 * in every run, whatever the decompressor's speed.
	 */
	size_t hold = SL_FAULT_SIZE("zst.hold_after", 0), npieces = 0;
	for (;;) {
		pthread_mutex_lock(&z.mu);
		while (!z.done && z.avail < want)
			pthread_cond_wait(&z.cv, &z.mu);
		size_t avail = z.avail;
		bool done = z.done;
		int zrc = z.zrc;
		pthread_mutex_unlock(&z.mu);
		if (done && zrc) {
			*zfail = true;
			rc = zrc;
			zpipe_tail(&z, size, true);
			break;
		}
		if (done && (!hold || npieces >= hold || size - pos <= piece)) {
			/* all there: the rest in two, the latter for the second thread */
			size_t cut = size;
			if (size - pos >= 2 * piece) {
				const char *mid = z.buf + pos + (size - pos) / 2;
				const char *nl = memchr(mid, '\n', (size_t)(z.buf + size - mid));
				if (nl && nl + 1 < z.buf + size && (unsigned char)nl[1] != 0xEF)
					cut = (size_t)(nl + 1 - z.buf);
			}
			zpipe_tail(&z, cut, false);
			uint64_t before = st->read_lines - lines0;
			rc = decode_pieces(dec, path, z.buf + pos, cut - pos, true, -1, false, 0, b, st,
					   derr);
			if (rc == SL_EMALFORMED)
				derr->line += before;
			pthread_join(th, NULL);
			if (cut < size)
				rc = join_half(z.h, st->read_lines - lines0, rc, b, st, derr);
			goto out;
		}
		/* the complete lines that arrived, not cut before "\xEF" (a BOM's first byte) */
		if (hold && avail > pos + piece)
			avail = pos + piece;
		const char *end = last_cut(z.buf + pos, avail - pos);
		if (!end) {
			want = avail + 1; /* a long line: wait for its end */
			hold = done ? 0 : hold; /* (the knob's cap: no end to wait for) */
			continue;
		}
		/* the first piece's lines estimate the file's: b gets them all in the end */
		if (pos == 0 && avail >= 2 * SAMPLE)
			reserve_rows(b, z.buf, size);
		rc = sl_decode_file(dec, path, z.buf + pos, (size_t)(end + 1 - z.buf) - pos, b, st, derr);
		if (rc) {
			if (rc == SL_EMALFORMED)
				derr->line += st->read_lines - lines0;
			zpipe_tail(&z, size, true);
			break;
		}
		/* decoded: the strings kept are copies, the decompressor writes past avail */
		drop_pages(z.buf + pos, (size_t)(end + 1 - z.buf) - pos);
		pos = (size_t)(end + 1 - z.buf);
		want = ++npieces == hold ? SIZE_MAX : pos + piece;
	}
	pthread_join(th, NULL);
out:
	pthread_cond_destroy(&z.cv);
	pthread_mutex_destroy(&z.mu);
	free(z.buf);
	return rc;
}

void sl_file_half_release(struct half *h)
{
	if (!h->ready)
		return;
	sl_decoder_free(h->dec);
	sl_batch_release(&h->b);
	sl_decode_stats_release(&h->st);
	h->ready = false;
}

/* Reads and decodes file part of the batch into b; FAILFAST stops at the first bad line. */
int sl_file_read(struct sl_source *p, size_t part, struct sl_batch *b,
		 struct sl_decode_stats *st, char *err, size_t errlen)
{
	struct sl_decode_error derr;
	const struct planned *f = &p->files[part];
	char *data = NULL;
	size_t len = 0;
	bool mapped = false;
	int rc;

	if ((rc = sl_land_file_bytes(p->l, f->id, &data, &len, &mapped))) {
		snprintf(err, errlen, "cannot read 'in/%.300s': %s", f->path, sl_strerror(rc));
		return rc;
	}
	memset(&derr, 0, sizeof(derr));
	bool zst = ends_with(f->path, ".zst"), zfail = false;
	unsigned long long zsize;
	/*
	 * A big plain blob is read with pread (decode_read()); the mapping
	 * serves only to find where to cut it, and is not read ahead: with
	 * pread, MADV_WILLNEED on it measured slower (B3 cold, whole process,
	 * 6 runs each alternating: 1.15 s median against 0.97). Anything
	 * decoded or decompressed from the mapping is read ahead at once, so
	 * that the disk works while the decoders do.
	 */
	int fd = -1;
	if (mapped && !zst && cuttable(p->q) && len > SL_FAULT_SIZE("decode.piece", READ_CHUNK) &&
	    sl_blob_open(sl_land_blobs(p->l), f->id, O_RDONLY, &fd))
		fd = -1;
	/* before anything touches the mapping (and reads ahead around it) */
	bool cold = (fd >= 0 || (zst && mapped)) && mostly_uncached(data, len);
	if (mapped && fd < 0)
		madvise(data, len, MADV_WILLNEED);
	rc = EAGAIN;
	if (zst && sl_codec_content_size(data, len, &zsize) == 0 && zsize >= SPLIT_MIN &&
	    zsize <= ZST_LIMIT && cuttable(p->q))
		rc = decode_zst(p, p->dec, f->path, data, len, (size_t)zsize, b, st, &derr, &zfail);
	if (rc == EAGAIN && zst) {
		void *plain;
		size_t plen;
		rc = sl_codec_decompress(data, len, ZST_LIMIT, &plain, &plen);
		if (mapped)
			munmap(data, len);
		else
			free(data);
		mapped = false;
		data = rc ? NULL : plain;
		len = rc ? 0 : plen;
		zfail = rc != 0;
		if (rc == 0)
			rc = EAGAIN;
	}
	if (zfail) {
		snprintf(err, errlen, "cannot decompress 'in/%.300s': %s", f->path,
			 rc == SL_ECORRUPT ? "not valid zstd data (corrupt or truncated)"
			 : rc == EFBIG	   ? "it expands beyond 4 GiB"
					   : sl_strerror(rc));
		/* bad input, not a passing failure: the query stops, no retry */
		if (rc == SL_ECORRUPT || rc == EFBIG)
			rc = SL_EMALFORMED;
		if (mapped)
			munmap(data, len);
		else
			free(data);
		return rc;
	}
	if (rc == EAGAIN)
		rc = decode_split(p, p->dec, f->path, data, len, mapped, fd, cold, b, st, &derr);
	if (mapped)
		munmap(data, len);
	else
		free(data);
	/*
	 * A cold file leaves the cache whole, now that its mapping is gone: a
	 * .zst read from it, and what the touches of a plain file's mapping
	 * (where to cut it, its rows' estimate) read ahead.
	 */
	if (cold && (fd >= 0 || sl_blob_open(sl_land_blobs(p->l), f->id, O_RDONLY, &fd) == 0))
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (fd >= 0)
		close(fd);
	if (rc == SL_EMALFORMED)
		snprintf(err, errlen, "'in/%.300s' line %" PRIu64 ": %s", f->path, derr.line,
			 derr.reason);
	else if (rc)
		snprintf(err, errlen, "cannot decode 'in/%.300s': %s", f->path, sl_strerror(rc));
	return rc;
}
