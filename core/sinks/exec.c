/* SPDX-License-Identifier: MIT */
/*
 * The exec sink (sink_exec.h): runs the query's command once per batch that
 * has rows, in write(), so that only a batch whose command exited 0 goes on
 * to commit. The rows are formatted whole first (the JSON or CSV sink's
 * bytes), then fed to the child's stdin while its stdout and stderr are
 * drained, all from one poll loop that also watches the timeout and the
 * unmount.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "config.h"
#include "err.h"
#include "land.h"
#include "log.h"
#include "sink.h"
#include "sink_exec.h"
#include "strbuf.h"

#define KILL_GRACE_NS 2000000000ll /* SIGTERM, then SIGKILL this much later */

extern char **environ;

struct sl_sink {
	const struct sl_query_config *q;
	struct sl_land *l;
	const volatile bool *stop;
	uint64_t rows;
	char error[400];
	char last_err[240]; /* the child's last stderr line */
	char cwd[4096];     /* DATA_DIR/exec/<query>: the commands' working folder */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The child's environment: ours without the service manager's, plus the batch's. */
static char **child_env(const struct sl_query_config *q, uint64_t batch)
{
	static const char *const modes[] = {"append", "update", "complete"};
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 4, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *e = environ[i];
		if (!strncmp(e, "NOTIFY_SOCKET=", 14) || !strncmp(e, "WATCHDOG_", 9) ||
		    !strncmp(e, "SLUICE_QUERY=", 13) || !strncmp(e, "SLUICE_BATCH_ID=", 16) ||
		    !strncmp(e, "SLUICE_OUTPUT_MODE=", 19))
			continue;
		env[k++] = (char *)e; /* borrowed: only the three below are ours */
	}
	if (asprintf(&env[k], "SLUICE_QUERY=%s", q->name) < 0 ||
	    asprintf(&env[k + 1], "SLUICE_BATCH_ID=%" PRIu64, batch) < 0 ||
	    asprintf(&env[k + 2], "SLUICE_OUTPUT_MODE=%s", modes[q->output_mode]) < 0) {
		for (int i = 0; i < 3; i++)
			if (env[k + i] && strncmp(env[k + i], "SLUICE_", 7) == 0)
				free(env[k + i]);
		free(env);
		return NULL;
	}
	env[k + 3] = NULL;
	return env;
}

static void child_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], "SLUICE_QUERY=", 13) || !strncmp(env[i], "SLUICE_BATCH_ID=", 16) ||
		    !strncmp(env[i], "SLUICE_OUTPUT_MODE=", 19))
			free(env[i]);
	free(env);
}

/*
 * In the child, between fork and exec: only async-signal-safe calls. The
 * pipes become 0, 1, 2, every other descriptor is closed.
 */
static void child(const struct sl_sink *s, pid_t parent, int in, int out, int err, char **env)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127); /* sluice died before the death signal was set */
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	syscall(SYS_close_range, 3u, ~0u, 0u);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (chdir(s->cwd) != 0)
		_exit(127);
	execvpe(s->q->exec_argv[0], s->q->exec_argv, env);
	/* the last stderr line, which lastError shows: no strerror() here */
	const char *msg = errno == ENOENT	 ? "sluice: cannot run the command: not found\n"
			  : errno == EACCES ? "sluice: cannot run the command: permission denied\n"
					    : "sluice: cannot run the command\n";
	ssize_t w = write(2, msg, strlen(msg));
	(void)w;
	_exit(127);
}

/* One of the child's output streams: lines go to the log; stderr's last one is kept. */
struct stream {
	int fd;
	bool is_err;
	char buf[1024];
	size_t len;
};

static void stream_line(struct sl_sink *s, struct stream *st, const char *line, size_t n)
{
	if (n == 0)
		return;
	/* a warning, so that `sluice run` shows it: it is the user's own output */
	sl_log(SL_LOG_WARNING, "query '%s': %s: %.*s", s->q->name, s->q->exec_argv[0], (int)n,
	       line);
	if (st->is_err) {
		size_t k = n < sizeof(s->last_err) - 1 ? n : sizeof(s->last_err) - 1;
		memcpy(s->last_err, line, k);
		s->last_err[k] = 0;
	}
}

/* Reads what fd has: 1 something, 0 nothing now, -1 at its end (a last line logged). */
static int stream_read(struct sl_sink *s, struct stream *st)
{
	ssize_t n = read(st->fd, st->buf + st->len, sizeof(st->buf) - st->len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		stream_line(s, st, st->buf, st->len); /* a last line without a newline */
		st->len = 0;
		return -1;
	}
	st->len += (size_t)n;
	size_t start = 0;
	for (size_t i = 0; i < st->len; i++) {
		if (st->buf[i] == '\n') {
			stream_line(s, st, st->buf + start, i - start);
			start = i + 1;
		}
	}
	if (start == 0 && st->len == sizeof(st->buf)) {
		stream_line(s, st, st->buf, st->len); /* a line too long: cut */
		start = st->len;
	}
	memmove(st->buf, st->buf + start, st->len - start);
	st->len -= start;
	return 1;
}

/* After the child exited: what its streams hold now, without waiting on grandchildren. */
static void stream_drain(struct sl_sink *s, struct stream *st, bool open)
{
	while (open) {
		int r = stream_read(s, st);
		if (r < 0)
			return; /* its last line is logged */
		if (r == 0)
			break;
	}
	stream_line(s, st, st->buf, st->len);
	st->len = 0;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/*
 * Feeds text to the child's stdin and drains its output until it exits, it
 * times out, or the run must stop. *status is waitpid's; *why says what
 * ended it: 0 exited, 1 timed out, 2 stopped by the unmount.
 */
static int supervise(struct sl_sink *s, pid_t pid, int in, int out, int err, const char *text,
		     size_t len, int *status, int *why)
{
	struct stream so = {.fd = out}, se = {.fd = err, .is_err = true};
	int64_t deadline = mono_ns() + s->q->exec_timeout_us * 1000, kill_at = 0;
	size_t off = 0;
	bool out_open = true, err_open = true;

	*why = 0;
	set_nonblock(in);
	set_nonblock(out);
	set_nonblock(err);
	if (len == 0) {
		close(in);
		in = -1;
	}
	for (;;) {
		if (waitpid(pid, status, WNOHANG) == pid) {
			stream_drain(s, &so, out_open);
			stream_drain(s, &se, err_open);
			break;
		}
		int64_t now = mono_ns();
		if (!kill_at && (now >= deadline || (s->stop && *s->stop))) {
			*why = now >= deadline ? 1 : 2;
			kill(-pid, SIGTERM);
			kill_at = now + KILL_GRACE_NS;
		}
		if (kill_at && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill_at = INT64_MAX;
		}
		struct pollfd p[3];
		nfds_t np = 0;
		if (in >= 0)
			p[np++] = (struct pollfd){.fd = in, .events = POLLOUT};
		if (out_open)
			p[np++] = (struct pollfd){.fd = out, .events = POLLIN};
		if (err_open)
			p[np++] = (struct pollfd){.fd = err, .events = POLLIN};
		poll(p, np, 50);
		for (nfds_t i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == in) {
				ssize_t n = write(in, text + off, len - off);
				if (n > 0)
					off += (size_t)n;
				/* done, or the child closed its stdin (EPIPE): fine either way */
				if (off == len || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					close(in);
					in = -1;
				}
			} else if (p[i].fd == out) {
				out_open = stream_read(s, &so) >= 0;
			} else {
				err_open = stream_read(s, &se) >= 0;
			}
		}
	}
	if (in >= 0)
		close(in);
	if (*why)
		kill(-pid, SIGKILL); /* what of its group is left */
	return 0;
}

/* Runs the command over text; 0 when it exited 0, else SL_ECOMMAND or ECANCELED (error set). */
static int run_command(struct sl_sink *s, uint64_t batch, const char *text, size_t len)
{
	int pin[2], pout[2], perr[2], status = 0, why = 0;
	char **env = child_env(s->q, batch);
	sigset_t pipe_set, old_set;
	pid_t pid;

	if (!env)
		return ENOMEM;
	if (pipe2(pin, O_CLOEXEC)) {
		child_env_free(env);
		return errno;
	}
	if (pipe2(pout, O_CLOEXEC)) {
		int e = errno;
		close(pin[0]), close(pin[1]);
		child_env_free(env);
		return e;
	}
	if (pipe2(perr, O_CLOEXEC)) {
		int e = errno;
		close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]);
		child_env_free(env);
		return e;
	}
	/* a child that closes its stdin must not kill us with SIGPIPE */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
	s->last_err[0] = 0;
	pid_t self = getpid();
	pid = fork();
	if (pid == 0)
		child(s, self, pin[0], pout[1], perr[1], env);
	int fork_err = errno;
	close(pin[0]), close(pout[1]), close(perr[1]);
	if (pid < 0) {
		close(pin[1]), close(pout[0]), close(perr[0]);
		child_env_free(env);
		pthread_sigmask(SIG_SETMASK, &old_set, NULL);
		return fork_err;
	}
	setpgid(pid, pid); /* also from here: no race with kill(-pid) */
	supervise(s, pid, pin[1], pout[0], perr[0], text, len, &status, &why);
	close(pout[0]), close(perr[0]);
	/* a SIGPIPE our writes raised stays pending: take it before unblocking */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	child_env_free(env);

	const char *cmd = s->q->exec_argv[0];
	const char *sep = s->last_err[0] ? ": " : "";
	if (why == 2) {
		snprintf(s->error, sizeof(s->error), "exec: '%s' stopped by the unmount", cmd);
		return ECANCELED;
	}
	if (why == 1) {
		snprintf(s->error, sizeof(s->error), "exec: '%s' timed out after %" PRId64 " s%s%s",
			 cmd, s->q->exec_timeout_us / 1000000, sep, s->last_err);
		return SL_ECOMMAND;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(s->error, sizeof(s->error), "exec: '%s' exited with status %d%s%s", cmd,
			 WEXITSTATUS(status), sep, s->last_err);
	else
		snprintf(s->error, sizeof(s->error), "exec: '%s' killed by signal %d (%s)%s%s", cmd,
			 WTERMSIG(status), strsignal(WTERMSIG(status)), sep, s->last_err);
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
	res->done_ns = mono_ns();
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
 * The working folder, made when missing. Not DATA_DIR itself (CONNECTORS
 * says DATA_DIR): a file a command leaves there would make the data dir
 * one sluice no longer recognises.
 */
static int make_cwd(struct sl_sink *s)
{
	int n = snprintf(s->cwd, sizeof(s->cwd), "%s/exec", sl_land_datadir(s->l));

	if (n < 0 || (size_t)n >= sizeof(s->cwd))
		return ENAMETOOLONG;
	if (mkdir(s->cwd, 0700) && errno != EEXIST)
		return errno;
	n = snprintf(s->cwd + n, sizeof(s->cwd) - (size_t)n, "/%s", s->q->name);
	if (n < 0 || strlen(s->cwd) >= sizeof(s->cwd) - 1)
		return ENAMETOOLONG;
	if (mkdir(s->cwd, 0700) && errno != EEXIST)
		return errno;
	return 0;
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
