/* SPDX-License-Identifier: MIT */
/*
 * The process source (source_process.h): a child speaking CONNECTORS §5's
 * line protocol. prepare() holds the conversation that plans a batch,
 * outside any transaction; replay(), latest_offset() and log() only copy
 * what it found into the range and the checkpoint; read() asks for one
 * partition and turns its JSON array lines into rows under the query's mode.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "catalog.h"
#include "child.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "land.h"
#include "log.h"
#include "qlog.h"
#include "secret.h"
#include "source_process.h"
#include "strbuf.h"
#include "timestamp.h"

#define LINE_MAX_BYTES (64u << 20) /* the longest answer line: longer is garbage */
#define STOP_WAIT_NS 2000000000ll  /* after "stop", before SIGTERM */
#define KEEP_BATCHES 100	   /* 'b' records kept */
#define OFF SL_SOURCE_OFFSET_MAX

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	uint32_t qid;
	const atomic_bool *stop;
	bool fix_end;	 /* availableNow (or `sluice run`): the end is fixed at the first asking */
	bool have_fixed; /* fixed holds it */
	char fixed[OFF]; /* the run's end, canonical */
	char cmd[160];	 /* the command's words, for messages */
	char cwd[4096];	 /* DATA_DIR/process/<query> */
	struct sl_child c; /* the child, when running */
	bool running;	   /* c is a live child that answered init */
	char *rb;	   /* its stdout, read ahead */
	size_t rb_len, rb_pos, rb_cap;
	char error[1024]; /* why the last conversation failed */
	bool commit_due;  /* commit() found an end (due) to send before the child ran */
	char due[OFF];
	char sent[OFF]; /* the last end sent in commit */
	/* the batch prepare() planned */
	bool prepared;
	uint64_t batch; /* its id */
	bool replay;	/* logged by an earlier run */
	bool first;	/* start is the program's initialOffset */
	int64_t ts_ms;	/* replay: its batchTimestampMs */
	char start[OFF], end[OFF];
	char **parts; /* the partitions answer's values, canonical */
	size_t nparts;
	long corrupt; /* index of a _corrupt_record STRING column, or -1 */
	/* options' "@env:NAME" / "@file:/path" values, resolved: masked in log lines */
	char **secrets;
	size_t nsecrets;
};

static void secrets_free(struct sl_source *p)
{
	for (size_t i = 0; i < p->nsecrets; i++)
		sl_secret_free(p->secrets[i]);
	free(p->secrets);
	p->secrets = NULL;
	p->nsecrets = 0;
	p->c.secrets = NULL;
	p->c.nsecrets = 0;
}

/* The value a secret reference names (new), or NULL with p->error set. */
static char *secret_value(struct sl_source *p, const char *path, const char *ref)
{
	char why[300];
	char *v = NULL;

	if (sl_secret_resolve(ref, &v, why, sizeof(why)))
		snprintf(p->error, sizeof(p->error), "process: source.options%s: %s", path, why);
	return v;
}

/*
 * Replaces every string value "@env:NAME" or "@file:/path" in j (options,
 * at any depth) with what it names, keeping the values for masking. path
 * is j's place, for errors. 0, or an errno with p->error set.
 */
static int resolve_secrets(struct sl_source *p, json_t *j, const char *path)
{
	char sub[256];

	if (json_is_object(j)) {
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v) {
			snprintf(sub, sizeof(sub), "%s.%s", path, k);
			if (json_is_string(v) && sl_secret_is_ref(json_string_value(v))) {
				char *s = secret_value(p, sub, json_string_value(v));
				char **g = s ? realloc(p->secrets, (p->nsecrets + 1) * sizeof(*g)) : NULL;
				if (!g) {
					free(s);
					return s ? ENOMEM : EINVAL;
				}
				p->secrets = g;
				p->secrets[p->nsecrets++] = s;
				if (json_object_set_new(j, k, json_string(s)))
					return ENOMEM;
			} else {
				int rc = resolve_secrets(p, v, sub);
				if (rc)
					return rc;
			}
		}
	} else if (json_is_array(j)) {
		for (size_t i = 0; i < json_array_size(j); i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			int rc = resolve_secrets(p, json_array_get(j, i), sub);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* j's canonical text into out (outlen bytes): 0 or ENAMETOOLONG / ENOMEM. */
static int canon_into(const json_t *j, char *out, size_t outlen)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (!s)
		return ENOMEM;
	size_t n = strlen(s);
	int rc = n < outlen ? 0 : ENAMETOOLONG;
	if (rc == 0)
		memcpy(out, s, n + 1);
	free(s);
	return rc;
}

static int canon(const json_t *j, char *out) { return canon_into(j, out, OFF); }

int sl_process_canonical(const char *text, size_t len, char *out, size_t outlen)
{
	json_t *j = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	if (!j)
		return SL_EMALFORMED;
	int rc = canon_into(j, out, outlen);
	json_decref(j);
	return rc;
}

/* ---- the child ---- */

static void end_child(struct sl_source *p, bool polite)
{
	int status;

	if (!p->running && p->c.pid <= 0)
		return;
	if (polite && p->c.in >= 0) {
		static const char stop[] = "{\"op\":\"stop\"}\n";
		sl_child_write(&p->c, stop, sizeof(stop) - 1, sl_child_now_ns() + 1000000000ll,
			       NULL);
	}
	sl_child_end(&p->c, polite ? STOP_WAIT_NS : 0, &status);
	p->running = false;
	p->rb_len = p->rb_pos = 0;
}

/* The error of a child that went wrong while answering op: it is ended first. */
__attribute__((format(printf, 3, 4))) static int child_fail(struct sl_source *p, const char *op,
							    const char *fmt, ...)
{
	char what[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	end_child(p, false);
	snprintf(p->error, sizeof(p->error), "process: '%s' %s (%s)%s%s", p->cmd, what, op,
		 p->c.last_err[0] ? ": " : "", p->c.last_err);
	return SL_ECOMMAND;
}

/* The child's stdout ended (it closed it or exited): how it ended, as an error. */
static int child_gone(struct sl_source *p, const char *op)
{
	int status = -1;
	char how[96];
	int64_t until = sl_child_now_ns() + 1000000000ll;

	/* it is exiting: give it a moment to be reaped, its stderr drained */
	while (!sl_child_reaped(&p->c, &status) && sl_child_now_ns() < until) {
		struct pollfd pf = {.fd = p->c.err.fd, .events = POLLIN};
		if (p->c.err.fd >= 0 && poll(&pf, 1, 10) > 0)
			sl_child_stream_read(&p->c, &p->c.err);
		else if (p->c.err.fd < 0)
			usleep(10000);
	}
	sl_child_stream_drain(&p->c, &p->c.err);
	if (p->c.pid > 0)
		snprintf(how, sizeof(how), "closed its stdout");
	else
		sl_child_status_text(status, how, sizeof(how));
	return child_fail(p, op, "%s", how);
}

/*
 * The next line of the child's stdout (without its newline), borrowed until
 * the next call, waiting until deadline. 0, or an error with p->error set.
 */
static int next_line(struct sl_source *p, const char *op, int64_t deadline, const char **line,
		     size_t *len)
{
	for (;;) {
		char *nl = p->rb_pos < p->rb_len
			       ? memchr(p->rb + p->rb_pos, '\n', p->rb_len - p->rb_pos)
			       : NULL;
		if (nl) {
			*line = p->rb + p->rb_pos;
			*len = (size_t)(nl - *line);
			p->rb_pos += *len + 1;
			return 0;
		}
		if (p->rb_len - p->rb_pos >= LINE_MAX_BYTES)
			return child_fail(p, op, "answered a line longer than %u bytes",
					  LINE_MAX_BYTES);
		if (p->rb_pos > 0) {
			memmove(p->rb, p->rb + p->rb_pos, p->rb_len - p->rb_pos);
			p->rb_len -= p->rb_pos;
			p->rb_pos = 0;
		}
		if (p->rb_cap - p->rb_len < 65536) {
			size_t cap = p->rb_cap ? p->rb_cap * 2 : 1 << 17;
			char *nb = realloc(p->rb, cap);
			if (!nb)
				return ENOMEM;
			p->rb = nb;
			p->rb_cap = cap;
		}
		ssize_t n = read(p->c.out.fd, p->rb + p->rb_len, p->rb_cap - p->rb_len);
		if (n > 0) {
			p->rb_len += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return child_gone(p, op);
		int64_t now = sl_child_now_ns();
		if (now >= deadline)
			return child_fail(p, op, "timed out after %" PRId64 " s",
					  p->q->source.timeout_us / 1000000);
		if (p->stop && *p->stop) {
			end_child(p, false);
			snprintf(p->error, sizeof(p->error), "process: '%s' stopped by the unmount",
				 p->cmd);
			return ECANCELED;
		}
		struct pollfd pf[2] = {{.fd = p->c.out.fd, .events = POLLIN},
				       {.fd = p->c.err.fd, .events = POLLIN}};
		int64_t ms = (deadline - now) / 1000000 + 1;
		poll(pf, p->c.err.fd >= 0 ? 2 : 1, ms > 100 ? 100 : (int)ms);
		if (pf[1].revents)
			sl_child_stream_read(&p->c, &p->c.err);
	}
}

static int64_t deadline(const struct sl_source *p)
{
	return sl_child_now_ns() + p->q->source.timeout_us * 1000;
}

/* Sends one request line (text without its newline). */
static int send_line(struct sl_source *p, const char *op, const char *text, size_t len)
{
	struct sl_strbuf b = {0};
	int rc;

	sl_strbuf_add(&b, text, len);
	sl_strbuf_addc(&b, '\n');
	if (b.oom) {
		sl_strbuf_release(&b);
		return ENOMEM;
	}
	rc = sl_child_write(&p->c, b.p, b.len, deadline(p), p->stop);
	sl_strbuf_release(&b);
	if (rc == EPIPE)
		return child_gone(p, op);
	if (rc == ETIMEDOUT)
		return child_fail(p, op, "timed out after %" PRId64 " s reading a request",
				  p->q->source.timeout_us / 1000000);
	if (rc == ECANCELED) {
		end_child(p, false);
		snprintf(p->error, sizeof(p->error), "process: '%s' stopped by the unmount",
			 p->cmd);
	}
	return rc;
}

/* The first bytes of a line, for a message: control bytes as '?'. */
static void excerpt(const char *line, size_t len, char *out, size_t outlen)
{
	size_t n = len < outlen - 4 ? len : outlen - 4;
	for (size_t i = 0; i < n; i++)
		out[i] = (unsigned char)line[i] < 0x20 ? '?' : line[i];
	if (n < len)
		memcpy(out + n, "...", 4);
	else
		out[n] = 0;
}

/*
 * An answer that is not what op expects: {"error":"..."} is the program's
 * own error (the child keeps running), anything else is garbage.
 */
static int bad_answer(struct sl_source *p, const char *op, const json_t *j, const char *line,
		      size_t len)
{
	json_t *e = j && json_is_object(j) ? json_object_get(j, "error") : NULL;
	char ex[120];

	if (e) {
		snprintf(p->error, sizeof(p->error), "process: '%s' failed %s: %s", p->cmd, op,
			 json_is_string(e) ? json_string_value(e)
					   : "(an error that is not a string)");
		end_child(p, true);
		return SL_ECOMMAND;
	}
	excerpt(line, len, ex, sizeof(ex));
	return child_fail(p, op, "answered garbage '%s'", ex);
}

/*
 * Sends request text and reads the one-line answer: *ans new (json_decref)
 * and an object holding key, or an error (p->error set).
 */
static int ask(struct sl_source *p, const char *op, const struct sl_strbuf *req, const char *key,
	       json_t **ans)
{
	const char *line;
	size_t len;
	int rc;

	if (req->oom)
		return ENOMEM;
	if ((rc = send_line(p, op, req->p, req->len)) ||
	    (rc = next_line(p, op, deadline(p), &line, &len)))
		return rc;
	json_t *j = json_loadb(line, len, 0, NULL);
	if (!j || !json_is_object(j) || !json_object_get(j, key)) {
		rc = bad_answer(p, op, j, line, len);
		json_decref(j);
		return rc;
	}
	*ans = j;
	return 0;
}

static int start_child(struct sl_source *p)
{
	char extra[96];
	int rc;

	if (p->running)
		return 0;
	snprintf(extra, sizeof(extra), "SLUICE_QUERY=%s", p->q->name);
	const char *const ex[] = {extra};
	char **env = sl_child_env(ex, 1);
	if (!env)
		return ENOMEM;
	rc = sl_child_spawn(&p->c, p->q->source.argv, env, p->cwd, p->q->name);
	sl_child_env_free(env);
	if (rc) {
		snprintf(p->error, sizeof(p->error), "process: cannot start '%s': %s", p->cmd,
			 strerror(rc));
		return rc;
	}
	p->running = true;
	p->rb_len = p->rb_pos = 0;

	/* init: the schema as the config writes it, the options verbatim */
	struct sl_strbuf req = {0}, ddl = {0};
	const struct sl_schema *s = &p->q->source.schema;
	for (size_t i = 0; i < s->n; i++)
		sl_strbuf_addf(&ddl, "%s%s %s", i ? ", " : "", s->cols[i].name,
			       sl_config_type_name(s->cols[i].type));
	json_t *js = json_stringn(ddl.p ? ddl.p : "", ddl.len);
	char *jtext = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
	json_decref(js);
	sl_strbuf_release(&ddl);
	if (!jtext)
		return ENOMEM;
	/* secrets are resolved for the child only, and masked in what it prints */
	secrets_free(p); /* a child started again resolves them again */
	json_t *opts = json_loads(p->q->source.options_json, 0, NULL);
	char *otext = NULL;
	rc = opts ? resolve_secrets(p, opts, "") : ENOMEM;
	if (rc == 0 && !(otext = json_dumps(opts, JSON_COMPACT | JSON_SORT_KEYS)))
		rc = ENOMEM;
	json_decref(opts);
	p->c.secrets = (const char *const *)p->secrets;
	p->c.nsecrets = p->nsecrets;
	if (rc) {
		free(jtext);
		end_child(p, false); /* never told init: not a child to talk to */
		return rc;
	}
	sl_strbuf_addf(&req, "{\"op\":\"init\",\"schema\":%s,\"options\":%s}", jtext, otext);
	explicit_bzero(otext, strlen(otext));
	free(otext);
	free(jtext);
	json_t *ans = NULL;
	rc = ask(p, "init", &req, "ok", &ans);
	if (req.p)
		explicit_bzero(req.p, req.len);
	sl_strbuf_release(&req);
	json_decref(ans);
	return rc;
}

/* An offset answer: canonical into out; null and over-long offsets refused. */
static int offset_answer(struct sl_source *p, const char *op, json_t *ans, char *out)
{
	json_t *o = json_object_get(ans, "offset");
	int rc;

	if (json_is_null(o))
		return child_fail(p, op, "answered a null offset");
	rc = canon(o, out);
	if (rc == ENAMETOOLONG)
		return child_fail(p, op, "answered an offset longer than %d bytes", OFF - 1);
	return rc;
}

static int ask_initial(struct sl_source *p, char *out)
{
	struct sl_strbuf req = {0};
	json_t *ans = NULL;
	int rc;

	sl_strbuf_adds(&req, "{\"op\":\"initialOffset\"}");
	if ((rc = ask(p, "initialOffset", &req, "offset", &ans)) == 0)
		rc = offset_answer(p, "initialOffset", ans, out);
	json_decref(ans);
	sl_strbuf_release(&req);
	return rc;
}

static int ask_latest(struct sl_source *p, const char *start, bool limited, const char *end,
		      char *out)
{
	struct sl_strbuf req = {0};
	json_t *ans = NULL;
	char limit[48] = "null";
	int rc;

	if (limited && p->q->source.max_rows > 0)
		snprintf(limit, sizeof(limit), "{\"maxRows\":%" PRId64 "}", p->q->source.max_rows);
	sl_strbuf_addf(&req, "{\"op\":\"latestOffset\",\"start\":%s,\"limit\":%s,\"end\":%s}",
		       start, limit, end ? end : "null");
	if ((rc = ask(p, "latestOffset", &req, "offset", &ans)) == 0)
		rc = offset_answer(p, "latestOffset", ans, out);
	json_decref(ans);
	sl_strbuf_release(&req);
	return rc;
}

static void parts_free(struct sl_source *p)
{
	for (size_t i = 0; i < p->nparts; i++)
		free(p->parts[i]);
	free(p->parts);
	p->parts = NULL;
	p->nparts = 0;
}

/* partitions (start, end]: the answer's values, canonical, into p->parts. */
static int ask_partitions(struct sl_source *p)
{
	struct sl_strbuf req = {0};
	json_t *ans = NULL, *v;
	size_t i;
	int rc;

	parts_free(p);
	sl_strbuf_addf(&req, "{\"op\":\"partitions\",\"start\":%s,\"end\":%s}", p->start, p->end);
	rc = ask(p, "partitions", &req, "partitions", &ans);
	sl_strbuf_release(&req);
	if (rc)
		return rc;
	json_t *a = json_object_get(ans, "partitions");
	if (!json_is_array(a)) {
		json_decref(ans);
		return child_fail(p, "partitions", "answered partitions that are not an array");
	}
	p->parts = calloc(json_array_size(a) + 1, sizeof(*p->parts));
	if (!p->parts) {
		json_decref(ans);
		return ENOMEM;
	}
	json_array_foreach(a, i, v)
	{
		p->parts[i] = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
		if (!p->parts[i]) {
			json_decref(ans);
			return ENOMEM;
		}
		p->nparts = i + 1;
	}
	json_decref(ans);
	return 0;
}

/* commit (end): the last committed end, when not sent yet in this run. */
static int send_commit(struct sl_source *p, const char *end)
{
	struct sl_strbuf req = {0};
	json_t *ans = NULL;
	int rc;

	if (!strcmp(end, p->sent))
		return 0;
	sl_strbuf_addf(&req, "{\"op\":\"commit\",\"end\":%s}", end);
	rc = ask(p, "commit", &req, "ok", &ans);
	json_decref(ans);
	sl_strbuf_release(&req);
	if (rc == 0)
		snprintf(p->sent, sizeof(p->sent), "%s", end);
	return rc;
}

/* ---- the checkpoint ---- */

/* Entry (kind, n) as text into out (OFF bytes): 0, SL_NOTFOUND or SL_ECORRUPT. */
static int get_text(struct sl_txn *t, uint32_t qid, char kind, uint64_t n, char *out)
{
	const void *v;
	size_t len;
	int rc = sl_qlog_get(t, qid, kind, n, &v, &len);

	if (rc)
		return rc;
	if (len >= OFF)
		return SL_ECORRUPT;
	memcpy(out, v, len);
	out[len] = 0;
	return 0;
}

/* Reads batch record 'b' n into p (replay, first, ts_ms, start, end). */
static int get_batch(struct sl_source *p, struct sl_txn *t, uint64_t n)
{
	const void *v;
	size_t len;
	int rc = sl_qlog_get(t, p->qid, 'b', n, &v, &len);

	if (rc)
		return rc;
	const char *s = v, *end = s + len, *f[5];
	size_t fl[5];
	for (int i = 0; i < 5; i++) {
		const char *nl = i < 4 ? memchr(s, '\n', (size_t)(end - s)) : end;
		if (!nl)
			return SL_ECORRUPT;
		f[i] = s;
		fl[i] = (size_t)(nl - s);
		s = nl + (i < 4);
	}
	if (fl[0] != 2 || memcmp(f[0], "v1", 2) || fl[2] != 1 || fl[3] >= OFF || fl[4] >= OFF ||
	    fl[4] == 0)
		return SL_ECORRUPT;
	char ts[24];
	if (fl[1] == 0 || fl[1] >= sizeof(ts))
		return SL_ECORRUPT;
	memcpy(ts, f[1], fl[1]);
	ts[fl[1]] = 0;
	p->ts_ms = strtoll(ts, NULL, 10);
	p->first = f[2][0] == '1';
	memcpy(p->start, f[3], fl[3]);
	p->start[fl[3]] = 0;
	memcpy(p->end, f[4], fl[4]);
	p->end[fl[4]] = 0;
	return 0;
}

/* What prepare() needs of the checkpoint: batch N, its record, the last end. */
static int read_state(struct sl_source *p, bool *logged, bool *has_last, char *last)
{
	struct sl_txn *t;
	char key[48];
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(p->l), &t)))
		return rc;
	sl_qlog_meta_key(key, sizeof(key), p->qid, "next");
	rc = sl_txn_meta_get(t, key, &p->batch);
	if (rc == 0) {
		rc = get_batch(p, t, p->batch);
		*logged = rc == 0;
		if (rc == SL_NOTFOUND)
			rc = 0;
	}
	if (rc == 0) {
		rc = get_text(t, p->qid, 's', 0, last);
		*has_last = rc == 0;
		if (rc == SL_NOTFOUND)
			rc = 0;
	}
	sl_txn_end(t);
	return rc;
}

/* ---- the contract ---- */

static int process_prepare(struct sl_source *p, char *err, size_t errlen)
{
	bool logged = false, has_last = false;
	char last[OFF];
	int rc;

	p->prepared = false;
	p->error[0] = 0;
	parts_free(p);
	rc = start_child(p);
	if (rc == 0 && p->commit_due) {
		rc = send_commit(p, p->due);
		p->commit_due = false;
	}
	if (rc == 0)
		rc = read_state(p, &logged, &has_last, last);
	if (rc == 0 && logged) {
		/* a replay: the same partitions request as when it was planned */
		p->replay = true;
		if (strcmp(p->start, p->end) != 0 || p->first)
			rc = ask_partitions(p);
	} else if (rc == 0) {
		p->replay = false;
		p->first = !has_last;
		if (has_last)
			memcpy(p->start, last, sizeof(last));
		else
			rc = ask_initial(p, p->start);
		if (rc == 0 && p->fix_end && !p->have_fixed) {
			/* availableNow: what is there now is the run's end */
			rc = ask_latest(p, p->start, false, NULL, p->fixed);
			p->have_fixed = rc == 0;
		}
		if (rc == 0)
			rc = ask_latest(p, p->start, true, p->have_fixed ? p->fixed : NULL, p->end);
		if (rc == 0 && strcmp(p->start, p->end) != 0)
			rc = ask_partitions(p);
	}
	if (rc) {
		if (p->error[0])
			snprintf(err, errlen, "%s", p->error);
		return rc;
	}
	p->prepared = true;
	return 0;
}

/* r from the prepared batch. */
static void fill_range(struct sl_source *p, struct sl_source_range *r)
{
	bool nothing = !strcmp(p->start, p->end) && !(p->replay && p->first);

	if (p->first)
		r->start[0] = 0; /* Spark's startOffset of a query's first batch: null */
	else
		memcpy(r->start, p->start, OFF);
	memcpy(r->end, nothing && !p->replay ? p->start : p->end, OFF);
	/* an empty partitions answer still moves the offset: one partition of nothing */
	r->nparts = nothing ? 0 : p->nparts > 0 ? p->nparts : 1;
}

static int process_replay(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			  struct sl_source_range *r)
{
	(void)t;
	if (!p->prepared || !p->replay || batch != p->batch)
		return SL_NOTFOUND;
	fill_range(p, r);
	r->replay = true;
	r->ts_ms = p->ts_ms;
	return 0;
}

static int process_latest_offset(struct sl_source *p, struct sl_txn *t, struct sl_source_range *r)
{
	(void)t;
	if (!p->prepared)
		return EINVAL; /* the engine calls prepare() first */
	fill_range(p, r);
	return 0;
}

static int process_log(struct sl_source *p, struct sl_txn *t, uint64_t batch, int64_t ts_ms,
		       struct sl_source_range *r)
{
	struct sl_strbuf rec = {0};
	int rc;

	if (r->nparts == 0) {
		/* a no-data batch repeats the last end */
		memcpy(p->end, p->start, OFF);
		p->first = false;
		memcpy(r->end, p->start, OFF);
		memcpy(r->start, p->start, OFF);
	}
	sl_strbuf_addf(&rec, "v1\n%" PRId64 "\n%d\n%s\n%s", ts_ms, p->first ? 1 : 0, p->start,
		       p->end);
	rc = rec.oom ? ENOMEM : sl_qlog_put(t, p->qid, 'b', batch, rec.p, rec.len);
	sl_strbuf_release(&rec);
	if (rc == 0 && batch >= KEEP_BATCHES)
		rc = sl_qlog_del(t, p->qid, 'b', batch - KEEP_BATCHES);
	if (rc == 0)
		rc = sl_qlog_put(t, p->qid, 's', 0, p->end, strlen(p->end));
	return rc;
}

/* One value of a row into column col: false when it has the wrong type. */
static bool set_value(struct sl_batch *b, size_t row, size_t col, enum sl_type type,
		      const json_t *v, int *rc)
{
	*rc = 0;
	if (json_is_null(v))
		return true;
	switch (type) {
	case SL_TYPE_STRING:
		if (!json_is_string(v))
			return false;
		*rc = sl_batch_set_str(b, row, col, json_string_value(v), json_string_length(v));
		return true;
	case SL_TYPE_BIGINT:
		if (!json_is_integer(v))
			return false;
		sl_batch_set_int(b, row, col, json_integer_value(v));
		return true;
	case SL_TYPE_INT:
		if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
		    json_integer_value(v) > INT32_MAX)
			return false;
		sl_batch_set_int(b, row, col, json_integer_value(v));
		return true;
	case SL_TYPE_DOUBLE:
		if (!json_is_number(v))
			return false;
		sl_batch_set_double(b, row, col, json_number_value(v));
		return true;
	case SL_TYPE_BOOLEAN:
		if (!json_is_boolean(v))
			return false;
		sl_batch_set_int(b, row, col, json_is_true(v));
		return true;
	case SL_TYPE_TIMESTAMP: {
		int64_t us;
		if (json_is_integer(v)) {
			us = json_integer_value(v); /* epoch microseconds */
		} else if (!json_is_string(v) ||
			   sl_timestamp_parse(json_string_value(v), json_string_length(v), &us)) {
			return false;
		}
		sl_batch_set_int(b, row, col, us);
		return true;
	}
	case SL_TYPE_DATE: {
		int32_t days;
		if (!json_is_string(v) ||
		    sl_date_parse(json_string_value(v), json_string_length(v), &days))
			return false;
		sl_batch_set_int(b, row, col, days);
		return true;
	}
	case SL_TYPE_WINDOW:
		return false;
	}
	return false;
}

/*
 * One row line: appended under the query's mode. 0, SL_EMALFORMED
 * (FAILFAST, why set) or ENOMEM.
 */
static int add_row(struct sl_source *p, const json_t *a, const char *line, size_t len,
		   struct sl_batch *b, struct sl_decode_stats *st, char *why, size_t whylen)
{
	const struct sl_schema *s = &p->q->source.schema;
	size_t want = s->n - (p->corrupt >= 0), row, arena = b->arena_len, k = 0;
	bool bad = false;
	int rc;

	st->lines++;
	if ((rc = sl_batch_add_row(b, &row)))
		return rc;
	if (json_array_size(a) != want) {
		bad = true;
		snprintf(why, whylen, "expected %zu values, got %zu", want, json_array_size(a));
	} else {
		for (size_t c = 0; c < s->n; c++) {
			if ((long)c == p->corrupt)
				continue;
			const json_t *v = json_array_get(a, k++);
			if (!set_value(b, row, c, s->cols[c].type, v, &rc)) {
				if (!bad)
					snprintf(why, whylen, "column '%s': expected %s",
						 s->cols[c].name,
						 sl_config_type_name(s->cols[c].type));
				bad = true;
				sl_batch_set_null(b, row, c);
			}
			if (rc)
				return rc;
		}
	}
	if (bad) {
		st->malformed++;
		if (p->q->source.mode == SL_MODE_FAILFAST)
			return SL_EMALFORMED;
		if (p->q->source.mode == SL_MODE_DROPMALFORMED) {
			sl_batch_drop_last(b);
			b->arena_len = arena;
			st->dropped++;
			return 0;
		}
		if (p->corrupt >= 0 &&
		    (rc = sl_batch_set_str(b, row, (size_t)p->corrupt, line, len)))
			return rc;
	}
	st->rows++;
	for (size_t c = 0; c < s->n && c < st->ncols; c++)
		if (s->cols[c].not_null && sl_batch_is_null(b, row, c))
			st->null_counts[c]++;
	return 0;
}

static int process_read(struct sl_source *p, size_t part, struct sl_batch *b,
			struct sl_decode_stats *st, char *err, size_t errlen)
{
	struct sl_strbuf req = {0};
	const char *line;
	size_t len;
	uint64_t n = 0;
	int rc;

	if (part >= p->nparts)
		return 0; /* the one partition of an empty partitions answer */
	p->error[0] = 0;
	if (!p->running) {
		snprintf(err, errlen, "process: '%s' is not running", p->cmd);
		return SL_ECOMMAND;
	}
	sl_strbuf_addf(&req, "{\"op\":\"read\",\"partition\":%s}", p->parts[part]);
	rc = req.oom ? ENOMEM : send_line(p, "read", req.p, req.len);
	sl_strbuf_release(&req);
	/* the deadline is per line: a long partition is fine while rows keep coming */
	while (rc == 0 && (rc = next_line(p, "read", deadline(p), &line, &len)) == 0) {
		json_t *j = json_loadb(line, len, 0, NULL);
		if (j && json_is_array(j)) {
			char why[160];
			n++;
			rc = add_row(p, j, line, len, b, st, why, sizeof(why));
			json_decref(j);
			if (rc == SL_EMALFORMED) {
				end_child(p, false);
				snprintf(p->error, sizeof(p->error),
					 "process: '%s': malformed row %" PRIu64
					 " of partition %zu: %s (mode FAILFAST)",
					 p->cmd, n, part, why);
			}
			continue;
		}
		json_t *e = j && json_is_object(j) ? json_object_get(j, "end") : NULL;
		if (e && json_is_integer(e) && (uint64_t)json_integer_value(e) == n &&
		    json_object_size(j) == 1) {
			json_decref(j);
			break;
		}
		if (e && json_is_integer(e)) {
			char ex[80];
			excerpt(line, len, ex, sizeof(ex));
			rc = child_fail(p, "read",
					"ended a partition of %" PRIu64 " rows with '%s'", n, ex);
		} else {
			rc = bad_answer(p, "read", j, line, len);
		}
		json_decref(j);
	}
	if (rc && p->error[0])
		snprintf(err, errlen, "%s", p->error);
	return rc;
}

static int process_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			   struct sl_source_backlog *out)
{
	(void)t;
	(void)q;
	(void)qid;
	/* the program knows its backlog, sluice does not */
	*out = (struct sl_source_backlog){.known = false};
	return 0;
}

static int process_commit_txn(struct sl_source *p, struct sl_txn *t, uint64_t batch,
			      struct sl_source_metrics *m)
{
	char end[OFF];
	const void *v;
	size_t len;
	int rc;

	(void)m;
	if ((rc = sl_qlog_get(t, p->qid, 'b', batch, &v, &len)))
		return rc;
	/* the end is the record's last line */
	const char *s = v, *nl = s + len;
	while (nl > s && nl[-1] != '\n')
		nl--;
	len = (size_t)(s + len - nl);
	if (len == 0 || len >= OFF)
		return SL_ECORRUPT;
	memcpy(end, nl, len);
	end[len] = 0;
	return sl_qlog_put(t, p->qid, 's', 1, end, len);
}

static int process_commit(struct sl_source *p)
{
	struct sl_txn *t;
	char end[OFF];
	int rc;

	if ((rc = sl_catalog_read(sl_land_catalog(p->l), &t)))
		return rc;
	rc = get_text(t, p->qid, 's', 1, end);
	sl_txn_end(t);
	if (rc == SL_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (!p->running) {
		/*
		 * At start: sent with the first request, once the engine has
		 * checked the config against the checkpoint (a changed command
		 * must not run).
		 */
		memcpy(p->due, end, OFF);
		p->commit_due = true;
		return 0;
	}
	p->error[0] = 0;
	rc = send_commit(p, end);
	if (rc && p->error[0])
		sl_log(SL_LOG_ERR, "query '%s': %s", p->q->name, p->error);
	return rc;
}

static void process_describe(const struct sl_source *p, char *buf, size_t len)
{
	snprintf(buf, len, "ProcessSource[%s]", p->cmd);
}

/* DATA_DIR/process/<query>, made when missing: the command's working folder. */
static int make_cwd(struct sl_source *p)
{
	return sl_child_workdir(sl_land_datadir(p->l), "process", p->q->name, p->cwd,
				sizeof(p->cwd));
}

static int process_open(const struct sl_source_args *a, struct sl_source **out)
{
	struct sl_source *p = calloc(1, sizeof(*p));
	const struct sl_source_config *c = &a->q->source;
	size_t off = 0;
	int rc;

	if (!p)
		return ENOMEM;
	p->l = a->l;
	p->q = a->q;
	p->qid = a->qid;
	p->stop = a->stop;
	p->c.in = p->c.out.fd = p->c.err.fd = -1;
	p->fix_end = a->seq_limit != UINT64_MAX || a->q->trigger == SL_TRIGGER_AVAILABLE_NOW ||
		     a->q->trigger == SL_TRIGGER_ONCE;
	for (size_t i = 0; i < c->argc && off < sizeof(p->cmd); i++) {
		int n =
		    snprintf(p->cmd + off, sizeof(p->cmd) - off, "%s%s", i ? " " : "", c->argv[i]);
		off += n > 0 ? (size_t)n : 0;
	}
	if (off >= sizeof(p->cmd))
		memcpy(p->cmd + sizeof(p->cmd) - 4, "...", 4);
	p->corrupt = -1;
	for (size_t i = 0; i < c->schema.n; i++)
		if (!strcmp(c->schema.cols[i].name, "_corrupt_record") &&
		    c->schema.cols[i].type == SL_TYPE_STRING)
			p->corrupt = (long)i;
	if ((rc = make_cwd(p))) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void process_stop(struct sl_source *p)
{
	if (!p)
		return;
	end_child(p, true);
	parts_free(p);
	secrets_free(p);
	free(p->rb);
	free(p);
}

const struct sl_source_ops sl_source_process = {
    .name = "process",
    .replayable = true,
    .open = process_open,
    .prepare = process_prepare,
    .replay = process_replay,
    .latest_offset = process_latest_offset,
    .log = process_log,
    .read = process_read,
    .pending = process_pending,
    .commit_txn = process_commit_txn,
    .commit = process_commit,
    .describe = process_describe,
    .stop = process_stop,
};
