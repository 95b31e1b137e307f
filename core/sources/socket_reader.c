/* SPDX-License-Identifier: MIT */
/*
 * The socket source's reader thread (source_socket.h): one TCP connection
 * per query, lines split as Java's BufferedReader.readLine does (\n, \r or
 * \r\n), each stamped with its receive time and spooled in one durable
 * commit per read burst, then the query is woken. Waiting is poll(2) on
 * the socket and an eventfd (stop, kick): no polling loop.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "config.h"
#include "err.h"
#include "fault.h"
#include "land.h"
#include "log.h"
#include "qindex.h"
#include "qlog.h"
#include "source_socket.h"
#include "spool.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define READ_MAX (64 << 10)	  /* bytes per recv(2) */
#define CHUNK_MAX (1 << 20)	  /* a spool commit's chunk, at most about */
#define LINE_MAX_BYTES (64 << 20) /* a longer line is spooled in pieces */
#define ERROR_PREFIX "socket '"	  /* lastError written by the reader starts so */

struct sl_socket_reader {
	struct sl_catalog *cat;
	const struct sl_query_config *q;
	uint32_t qid;
	void (*wake)(void *ctx);
	void *wake_ctx;
	char where[300]; /* host:port, for messages */
	int kick_fd;	 /* eventfd: stop or kick */
	atomic_bool stop;
	pthread_t thread;
	/* the thread's own */
	struct sl_spool_chunk chunk; /* lines read, not yet spooled */
	char *line;		     /* the line being received ... */
	size_t line_len, line_cap;   /* ... its bytes, allocated */
	bool cr;		     /* the last byte was a \r: skip a \n after it */
	uint64_t spool_bytes;	     /* the spool's bytes, as last read or grown */
	char last_error[512];	     /* the last one logged */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

struct error_rec {
	uint32_t qid;
	const char *text; /* NULL: clear the reader's own lastError */
};

static int error_apply(struct sl_txn *t, void *arg)
{
	struct error_rec *e = arg;
	const void *v;
	size_t len;
	int rc;

	if (e->text)
		return sl_qlog_put(t, e->qid, 'e', 0, e->text, strlen(e->text));
	rc = sl_qlog_get(t, e->qid, 'e', 0, &v, &len);
	if (rc == SL_NOTFOUND)
		return 0;
	if (rc == 0 && len >= strlen(ERROR_PREFIX) &&
	    !memcmp(v, ERROR_PREFIX, strlen(ERROR_PREFIX)))
		rc = sl_qlog_del(t, e->qid, 'e', 0);
	return rc;
}

/* Logs a connection problem (once while it stays the same) and keeps it as lastError. */
__attribute__((format(printf, 2, 3))) static void note_error(struct sl_socket_reader *r,
							     const char *fmt, ...)
{
	char text[512];
	va_list ap;
	int n = snprintf(text, sizeof(text), ERROR_PREFIX "%s': ", r->where);

	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(text))
		vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
	va_end(ap);
	if (strcmp(text, r->last_error)) {
		sl_log(SL_LOG_WARNING, "query '%s': %s", r->q->name, text);
		snprintf(r->last_error, sizeof(r->last_error), "%s", text);
	}
	struct error_rec e = {.qid = r->qid, .text = text};
	sl_catalog_write(r->cat, error_apply, &e);
}

/* Sleeps ms, or until stopped. */
static void pause_ms(struct sl_socket_reader *r, int ms)
{
	struct pollfd p = {.fd = r->kick_fd, .events = POLLIN};
	int64_t until = now_ms() + ms;

	while (!atomic_load(&r->stop)) {
		int64_t left = until - now_ms();
		if (left <= 0)
			break;
		poll(&p, 1, (int)left);
		uint64_t v;
		if (read(r->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
	}
}

static const char *human_ms(int ms, char *buf, size_t len)
{
	if (ms % 1000)
		snprintf(buf, len, "%.1f s", ms / 1000.0);
	else
		snprintf(buf, len, "%d s", ms / 1000);
	return buf;
}

/* Connects to host:port: a socket (>= 0), or -1 with why set. */
static int connect_to(struct sl_socket_reader *r, char *why, size_t whylen)
{
	const struct sl_source_config *c = &r->q->source;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	char port[16];
	int fd = -1, err = 0;

	snprintf(port, sizeof(port), "%lld", (long long)c->port);
	int g = getaddrinfo(c->host, port, &hints, &res);
	if (g) {
		snprintf(why, whylen, "cannot resolve: %s",
			 g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
		return -1;
	}
	for (struct addrinfo *a = res; a && !atomic_load(&r->stop); a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		err = errno;
		if (err == EINPROGRESS) {
			struct pollfd p[2] = {{.fd = fd, .events = POLLOUT},
					      {.fd = r->kick_fd, .events = POLLIN}};
			socklen_t elen = sizeof(err);
			int64_t until = now_ms() + CONNECT_TIMEOUT_MS;
			int n;
			/* a kick (the spool shrank) is no reason to give up: only the stop is */
			while ((n = poll(p, 2,
					 (int)(until - now_ms() > 0 ? until - now_ms() : 0))) > 0 &&
			       !(p[0].revents & (POLLOUT | POLLERR | POLLHUP)) &&
			       !atomic_load(&r->stop)) {
				uint64_t v;
				if (read(r->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					break;
			}
			if (n == 0)
				err = ETIMEDOUT;
			else if (n < 0 || !(p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
				err = ECANCELED; /* stopped */
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen))
				err = errno;
			if (err == 0)
				break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(why, whylen, "cannot connect: %s", strerror(err ? err : ECONNREFUSED));
	return fd;
}

/* Appends s[0..n) to the line being received. */
static int append(struct sl_socket_reader *r, const char *s, size_t n)
{
	if (r->line_len + n > r->line_cap) {
		size_t cap = r->line_cap ? r->line_cap : 256;
		while (cap < r->line_len + n)
			cap *= 2;
		char *p = realloc(r->line, cap);
		if (!p)
			return ENOMEM;
		r->line = p;
		r->line_cap = cap;
	}
	memcpy(r->line + r->line_len, s, n);
	r->line_len += n;
	return 0;
}

/* One complete line (the partial bytes first, then s[0..n)) into the chunk. */
static int emit(struct sl_socket_reader *r, const char *s, size_t n, int64_t ts)
{
	int rc;

	if (r->line_len == 0)
		return sl_spool_chunk_add(&r->chunk, s, n, ts);
	if ((rc = append(r, s, n)) ||
	    (rc = sl_spool_chunk_add(&r->chunk, r->line, r->line_len, ts)))
		return rc;
	r->line_len = 0;
	return 0;
}

/* Keeps s[0..n), the start of a line whose end has not arrived yet. */
static int keep_partial(struct sl_socket_reader *r, const char *s, size_t n, int64_t ts)
{
	int rc;

	if (r->line_len + n > LINE_MAX_BYTES) {
		/* a line that long is spooled in pieces rather than held in memory */
		sl_log(SL_LOG_WARNING,
		       "query '%s': a line from '%s' is longer than %d bytes: "
		       "spooled in pieces",
		       r->q->name, r->where, LINE_MAX_BYTES);
		if ((rc = emit(r, "", 0, ts)))
			return rc;
	}
	return append(r, s, n);
}

/* Splits received bytes into lines: \n, \r or \r\n ends one (readLine's rule). */
static int split(struct sl_socket_reader *r, const char *p, size_t n, int64_t ts)
{
	const char *end = p + n;
	int rc;

	while (p < end) {
		if (r->cr) {
			r->cr = false;
			if (*p == '\n') {
				p++;
				continue;
			}
		}
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		const char *cr = memchr(p, '\r', (size_t)(stop - p));
		if (cr)
			stop = cr;
		if (stop == end)
			return keep_partial(r, p, (size_t)(end - p), ts);
		if ((rc = emit(r, p, (size_t)(stop - p), ts)))
			return rc;
		r->cr = *stop == '\r';
		p = stop + 1;
	}
	return 0;
}

/* Re-reads the spool's size (it shrinks when batches commit). */
static void refresh(struct sl_socket_reader *r)
{
	struct sl_spool_stats st;
	struct sl_txn *t;

	if (sl_catalog_read(r->cat, &t))
		return;
	if (sl_spool_stats(t, r->qid, &st) == 0)
		r->spool_bytes = st.bytes;
	sl_txn_end(t);
}

/*
 * Spools the chunk, retrying with backoff while the catalog fails (a full
 * disk): nothing more is read meanwhile. false when stopped first.
 */
static bool spool(struct sl_socket_reader *r)
{
	int backoff = BACKOFF_MIN_MS;
	char b[32];
	int rc;

	if (r->chunk.nlines == 0)
		return true;
	while ((rc = sl_spool_append(r->cat, r->qid, &r->chunk, NULL))) {
		note_error(r, "cannot spool %u lines: %s (retrying in %s)", r->chunk.nlines,
			   sl_strerror(rc), human_ms(backoff, b, sizeof(b)));
		pause_ms(r, backoff);
		if (atomic_load(&r->stop))
			return false;
		backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
	}
	r->spool_bytes += r->chunk.len;
	sl_spool_chunk_clear(&r->chunk);
	if (r->wake)
		r->wake(r->wake_ctx);
	return true;
}

/*
 * Reads fd until the connection ends (why set) or the reader stops. What
 * was received is spooled before it returns, a last line without its
 * newline included.
 */
static void pump(struct sl_socket_reader *r, int fd, char *buf, char *why, size_t whylen)
{
	uint64_t cap = r->q->source.max_spool_bytes;

	refresh(r);
	while (!atomic_load(&r->stop)) {
		uint64_t held = r->spool_bytes + r->chunk.len + r->line_len;
		/* a line longer than the cap still gets through an empty spool */
		bool room = held < cap || (r->spool_bytes == 0 && r->chunk.len == 0);
		struct pollfd p[2] = {{.fd = r->kick_fd, .events = POLLIN},
				      {.fd = fd, .events = POLLIN}};
		if (poll(p, room ? 2 : 1, -1) < 0 && errno != EINTR) {
			snprintf(why, whylen, "poll: %s", strerror(errno));
			return;
		}
		if (p[0].revents) {
			uint64_t v;
			if (read(r->kick_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
				refresh(r);
			continue; /* the room may have changed */
		}
		if (!room || !p[1].revents)
			continue;
		/* a burst: read what is there, then one commit for all of it */
		for (;;) {
			held = r->spool_bytes + r->chunk.len + r->line_len;
			size_t want = READ_MAX;
			if (held < cap && cap - held < want)
				want = (size_t)(cap - held);
			ssize_t n = recv(fd, buf, want, MSG_DONTWAIT);
			int rc = 0;
			if (n > 0)
				rc = split(r, buf, (size_t)n, now_ms());
			if (rc) {
				snprintf(why, whylen, "cannot keep a line: %s", sl_strerror(rc));
			} else if (n == 0) {
				snprintf(why, whylen, "closed by the peer");
			} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != EINTR) {
				snprintf(why, whylen, "%s", strerror(errno));
			} else if (n > 0 && r->chunk.len < CHUNK_MAX &&
				   r->spool_bytes + r->chunk.len + r->line_len < cap) {
				continue;
			} else if (n < 0 && errno == EINTR) {
				continue;
			}
			break;
		}
		if (why[0]) {
			/* a last line without its newline is a line */
			if (r->line_len)
				emit(r, "", 0, now_ms());
			r->cr = false;
			spool(r);
			return;
		}
		if (!spool(r))
			return;
	}
}

static void *reader_main(void *arg)
{
	struct sl_socket_reader *r = arg;
	int backoff = BACKOFF_MIN_MS;
	char *buf = malloc(READ_MAX);
	char why[256], b[32];

	if (!buf) {
		note_error(r, "cannot start: %s", strerror(ENOMEM));
		return NULL;
	}
	while (!atomic_load(&r->stop)) {
		why[0] = 0;
		int fd = connect_to(r, why, sizeof(why));
		if (fd < 0) {
			if (atomic_load(&r->stop))
				break;
			note_error(r, "%s (retrying in %s)", why, human_ms(backoff, b, sizeof(b)));
			pause_ms(r, backoff);
			backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
			continue;
		}
		sl_log(SL_LOG_INFO, "query '%s': connected to '%s'", r->q->name, r->where);
		r->last_error[0] = 0;
		struct error_rec e = {.qid = r->qid, .text = NULL};
		sl_catalog_write(r->cat, error_apply, &e);
		backoff = BACKOFF_MIN_MS;
		SL_FAULT("socket.connected");
		pump(r, fd, buf, why, sizeof(why));
		close(fd);
		if (atomic_load(&r->stop))
			break;
		/* Spark logs "Stream closed by host:port" and stops; sluice reconnects */
		note_error(r, "connection lost: %s (reconnecting in %s)", why,
			   human_ms(backoff, b, sizeof(b)));
		pause_ms(r, backoff);
		backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
	}
	free(buf);
	return NULL;
}

int sl_socket_reader_start(struct sl_land *l, const struct sl_query_config *q,
			   void (*wake)(void *ctx), void *ctx, struct sl_socket_reader **out)
{
	struct sl_socket_reader *r = calloc(1, sizeof(*r));
	struct sl_txn *t;
	int rc;

	if (!r)
		return ENOMEM;
	r->cat = sl_land_catalog(l);
	r->q = q;
	r->wake = wake;
	r->wake_ctx = ctx;
	atomic_init(&r->stop, false);
	snprintf(r->where, sizeof(r->where), "%s:%lld", q->source.host, (long long)q->source.port);
	if ((rc = sl_catalog_read(r->cat, &t)))
		goto free_r;
	rc = sl_qindex_qid(t, q->name, &r->qid);
	sl_txn_end(t);
	if (rc)
		goto free_r;
	r->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->kick_fd < 0) {
		rc = errno;
		goto free_r;
	}
	if ((rc = pthread_create(&r->thread, NULL, reader_main, r)))
		goto close_fd;
	*out = r;
	return 0;
close_fd:
	close(r->kick_fd);
free_r:
	free(r);
	return rc;
}

void sl_socket_reader_kick(struct sl_socket_reader *r)
{
	uint64_t one = 1;
	if (r && write(r->kick_fd, &one, sizeof(one)) < 0)
		return; /* the counter is full: a kick is pending anyway */
}

void sl_socket_reader_stop(struct sl_socket_reader *r)
{
	if (!r)
		return;
	atomic_store(&r->stop, true);
	sl_socket_reader_kick(r);
	pthread_join(r->thread, NULL);
	close(r->kick_fd);
	sl_spool_chunk_release(&r->chunk);
	free(r->line);
	free(r);
}
