/* SPDX-License-Identifier: MIT */
/*
 * The exec sink (sink_exec.h): runs the query's command once per batch that
 * has rows, in write(), so that only a batch whose command exited 0 goes on
 * to commit. The rows are formatted whole first (the JSON or CSV sink's
 * bytes), then fed to the child's stdin while its stdout and stderr are
 * drained, all from one poll loop that also watches the timeout and the
 * unmount. Spawning and the rules for children are core/base/child.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "child.h"
#include "config.h"
#include "err.h"
#include "land.h"
#include "log.h"
#include "sink.h"
#include "sink_exec.h"
#include "strbuf.h"

struct sl_sink {
	const struct sl_query_config *q;
	struct sl_land *l;
	const atomic_bool *stop;
	uint64_t rows;
	char error[400];
	char cwd[4096];     /* DATA_DIR/exec/<query>: the commands' working folder */
};

/*
 * Feeds text to the child's stdin and drains its output until it exits, it
 * times out, or the run must stop. *status is waitpid's; *why says what
 * ended it: 0 exited, 1 timed out, 2 stopped by the unmount.
 */
static void supervise(struct sl_sink *s, struct sl_child *c, const char *text, size_t len,
		      int *status, int *why)
{
	int64_t deadline = sl_child_now_ns() + s->q->exec_timeout_us * 1000, kill_at = 0;
	size_t off = 0;
	pid_t pid = c->pid;

	*why = 0;
	if (len == 0) {
		close(c->in);
		c->in = -1;
	}
	for (;;) {
		if (sl_child_reaped(c, status)) {
			sl_child_stream_drain(c, &c->out);
			sl_child_stream_drain(c, &c->err);
			break;
		}
		int64_t now = sl_child_now_ns();
		if (!kill_at && (now >= deadline || (s->stop && *s->stop))) {
			*why = now >= deadline ? 1 : 2;
			kill(-pid, SIGTERM);
			kill_at = now + SL_CHILD_KILL_GRACE_NS;
		}
		if (kill_at && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill_at = INT64_MAX;
		}
		struct pollfd p[3];
		nfds_t np = 0;
		if (c->in >= 0)
			p[np++] = (struct pollfd){.fd = c->in, .events = POLLOUT};
		if (c->out.fd >= 0)
			p[np++] = (struct pollfd){.fd = c->out.fd, .events = POLLIN};
		if (c->err.fd >= 0)
			p[np++] = (struct pollfd){.fd = c->err.fd, .events = POLLIN};
		poll(p, np, 50);
		for (nfds_t i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == c->in) {
				ssize_t n = write(c->in, text + off, len - off);
				if (n > 0)
					off += (size_t)n;
				/* done, or the child closed its stdin (EPIPE): fine either way */
				if (off == len || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					close(c->in);
					c->in = -1;
				}
			} else if (p[i].fd == c->out.fd) {
				sl_child_stream_read(c, &c->out);
			} else {
				sl_child_stream_read(c, &c->err);
			}
		}
	}
	if (c->in >= 0)
		close(c->in);
	c->in = -1;
	if (c->out.fd >= 0)
		close(c->out.fd);
	if (c->err.fd >= 0)
		close(c->err.fd);
	c->out.fd = c->err.fd = -1;
	if (*why)
		kill(-pid, SIGKILL); /* what of its group is left */
}

/* Runs the command over text; 0 when it exited 0, else SL_ECOMMAND or ECANCELED (error set). */
static int run_command(struct sl_sink *s, uint64_t batch, const char *text, size_t len)
{
	static const char *const modes[] = {"append", "update", "complete"};
	struct sl_child c = {.log_out = true};
	char extra[3][128], how[96];
	int status = 0, why = 0, rc;
	sigset_t pipe_set, old_set;

	snprintf(extra[0], sizeof(extra[0]), "SLUICE_QUERY=%s", s->q->name);
	snprintf(extra[1], sizeof(extra[1]), "SLUICE_BATCH_ID=%" PRIu64, batch);
	snprintf(extra[2], sizeof(extra[2]), "SLUICE_OUTPUT_MODE=%s", modes[s->q->output_mode]);
	const char *const ex[] = {extra[0], extra[1], extra[2]};
	char **env = sl_child_env(ex, 3);
	if (!env)
		return ENOMEM;
	/* a child that closes its stdin must not kill us with SIGPIPE */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
	rc = sl_child_spawn(&c, s->q->exec_argv, env, s->cwd, s->q->name);
	c.log_out = true;
	if (rc == 0)
		supervise(s, &c, text, len, &status, &why);
	/* a SIGPIPE our writes raised stays pending: take it before unblocking */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	sl_child_env_free(env);
	if (rc)
		return rc;

	const char *cmd = s->q->exec_argv[0];
	const char *sep = c.last_err[0] ? ": " : "";
	if (why == 2) {
		snprintf(s->error, sizeof(s->error), "exec: '%s' stopped by the unmount", cmd);
		return ECANCELED;
	}
	if (why == 1) {
		snprintf(s->error, sizeof(s->error), "exec: '%s' timed out after %" PRId64 " s%s%s",
			 cmd, s->q->exec_timeout_us / 1000000, sep, c.last_err);
		return SL_ECOMMAND;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	sl_child_status_text(status, how, sizeof(how));
	snprintf(s->error, sizeof(s->error), "exec: '%s' %s%s%s", cmd, how, sep, c.last_err);
	return SL_ECOMMAND;
}

static int exec_write(struct sl_sink *s, uint64_t batch, const struct sl_batch *rows,
		      void (*spent)(void *ctx), void *spent_ctx)
{
	struct sl_query_config fmt = *s->q; /* the JSON or CSV sink's bytes */
	struct sl_strbuf text = {0};
	int rc = 0;

	s->error[0] = 0;
	s->rows = rows->nrows;
	fmt.sink_format = s->q->exec_csv ? SL_SINK_CSV : SL_SINK_JSON;
	fmt.compression = SL_COMPRESSION_NONE;
	fmt.npartition_by = 0;
	if (rows->nrows > 0)
		rc = sl_sink_format_rows(&fmt, rows, 0, rows->nrows, s->q->exec_csv, &text);
	if (spent)
		spent(spent_ctx);
	if (rc == EINVAL)
		snprintf(s->error, sizeof(s->error), "exec: the rows cannot be written as %s",
			 s->q->exec_csv ? "csv (a window column?)" : "json");
	if (rc == 0 && rows->nrows > 0)
		rc = run_command(s, batch, text.p, text.len);
	sl_strbuf_release(&text);
	return rc;
}

static int exec_commit(struct sl_sink *s, struct sl_txn *t, struct sl_sink_result *res)
{
	(void)t;
	res->rows = s->rows;
	res->done_ns = sl_child_now_ns();
	return 0;
}

static int exec_end(struct sl_sink *s, bool committed, bool *format_failed)
{
	(void)s;
	(void)committed;
	if (format_failed)
		*format_failed = false;
	return 0;
}

static int exec_settle(struct sl_sink *s)
{
	(void)s;
	return 0; /* a batch cut short runs its command again: nothing to settle */
}

static const char *exec_error(const struct sl_sink *s)
{
	return s->error;
}

static void exec_describe(const struct sl_sink *s, char *buf, size_t len)
{
	snprintf(buf, len, "ExecSink[%s]", s->q->exec_argv[0]);
}

/*
 * The working folder, DATA_DIR/exec/<query>. Not DATA_DIR itself (CONNECTORS
 * says DATA_DIR): a file a command leaves there would make the data dir
 * one sluice no longer recognises.
 */
static int make_cwd(struct sl_sink *s)
{
	return sl_child_workdir(sl_land_datadir(s->l), "exec", s->q->name, s->cwd, sizeof(s->cwd));
}

static int exec_open(const struct sl_sink_args *a, struct sl_sink **out)
{
	struct sl_sink *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return ENOMEM;
	s->q = a->q;
	s->l = a->l;
	s->stop = a->stop;
	if ((rc = make_cwd(s))) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void exec_close(struct sl_sink *s)
{
	free(s);
}

const struct sl_sink_ops sl_sink_exec = {
	.name = "exec",
	.guarantee = SL_SINK_AT_LEAST_ONCE,
	.open = exec_open,
	.write = exec_write,
	.commit = exec_commit,
	.end = exec_end,
	.settle = exec_settle,
	.error = exec_error,
	.describe = exec_describe,
	.close = exec_close,
};
