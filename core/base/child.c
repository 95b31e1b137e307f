/* SPDX-License-Identifier: MIT */
/*
 * Children (child.h): spawning a command under CONNECTORS' rules, reading
 * its output streams line by line into the log, writing to its stdin
 * without SIGPIPE, and ending it (SIGTERM to its group, SIGKILL 2 s later).
 * Shared by the exec sink and the process source.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "log.h"

extern char **environ;

int sl_child_workdir(const char *datadir, const char *kind, const char *query, char *buf,
		     size_t len)
{
	int n = snprintf(buf, len, "%s/%s", datadir, kind);

	if (n < 0 || (size_t)n >= len)
		return ENAMETOOLONG;
	if (mkdir(buf, 0700) && errno != EEXIST)
		return errno;
	n = snprintf(buf + n, len - (size_t)n, "/%s", query);
	if (n < 0 || strlen(buf) >= len - 1)
		return ENAMETOOLONG;
	if (mkdir(buf, 0700) && errno != EEXIST)
		return errno;
	return 0;
}

int64_t sl_child_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Whether e ("NAME=value") sets one of extra's names. */
static bool set_by(const char *e, const char *const *extra, size_t nextra)
{
	for (size_t i = 0; i < nextra; i++) {
		const char *eq = strchr(extra[i], '=');
		size_t n = eq ? (size_t)(eq - extra[i]) + 1 : strlen(extra[i]);
		if (!strncmp(e, extra[i], n))
			return true;
	}
	return false;
}

char **sl_child_env(const char *const *extra, size_t nextra)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + nextra + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *e = environ[i];
		if (!strncmp(e, "NOTIFY_SOCKET=", 14) || !strncmp(e, "WATCHDOG_", 9) ||
		    set_by(e, extra, nextra))
			continue;
		if (!(env[k++] = strdup(e)))
			goto env_free;
	}
	for (size_t i = 0; i < nextra; i++)
		if (!(env[k++] = strdup(extra[i])))
			goto env_free;
	return env;
env_free:
	sl_child_env_free(env);
	return NULL;
}

void sl_child_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/*
 * In the child, between fork and exec: only async-signal-safe calls. The
 * pipes become 0, 1, 2, every other descriptor is closed.
 */
static void child(char *const *argv, char **env, const char *cwd, pid_t parent, int in, int out,
		  int err)
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
	if (chdir(cwd) != 0)
		_exit(127);
	execvpe(argv[0], argv, env);
	/* the last stderr line, which lastError shows: no strerror() here */
	const char *msg = errno == ENOENT   ? "sluice: cannot run the command: not found\n"
			  : errno == EACCES ? "sluice: cannot run the command: permission denied\n"
					    : "sluice: cannot run the command\n";
	ssize_t w = write(2, msg, strlen(msg));
	(void)w;
	_exit(127);
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int sl_child_spawn(struct sl_child *c, char *const *argv, char **env, const char *cwd,
		   const char *query)
{
	int pin[2], pout[2], perr[2];
	pid_t pid, self = getpid();

	c->pid = 0;
	if (pipe2(pin, O_CLOEXEC))
		return errno;
	if (pipe2(pout, O_CLOEXEC)) {
		int e = errno;
		close(pin[0]), close(pin[1]);
		return e;
	}
	if (pipe2(perr, O_CLOEXEC)) {
		int e = errno;
		close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]);
		return e;
	}
	pid = fork();
	if (pid == 0)
		child(argv, env, cwd, self, pin[0], pout[1], perr[1]);
	int fork_err = errno;
	close(pin[0]), close(pout[1]), close(perr[1]);
	if (pid < 0) {
		close(pin[1]), close(pout[0]), close(perr[0]);
		return fork_err;
	}
	setpgid(pid, pid); /* also from here: no race with kill(-pid) */
	c->pid = pid;
	c->in = pin[1];
	c->out = (struct sl_child_stream){.fd = pout[0]};
	c->err = (struct sl_child_stream){.fd = perr[0], .is_err = true};
	c->query = query;
	c->prog = argv[0];
	c->last_err[0] = 0; /* c->secrets stay as the caller set them */
	set_nonblock(c->in);
	set_nonblock(c->out.fd);
	set_nonblock(c->err.fd);
	return 0;
}

/*
 * line (n bytes) with each secret replaced by *** into out (cap bytes, NUL
 * ended); its length.
 */
static size_t masked(const struct sl_child *c, const char *line, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < cap;) {
		size_t hit = 0;
		for (size_t k = 0; k < c->nsecrets && !hit; k++) {
			size_t m = strlen(c->secrets[k]);
			if (m && m <= n - i && !memcmp(line + i, c->secrets[k], m))
				hit = m;
		}
		if (hit) {
			for (const char *r = "***"; *r && o + 1 < cap; r++)
				out[o++] = *r;
			i += hit;
		} else {
			out[o++] = line[i++];
		}
	}
	out[o] = 0;
	return o;
}

static void stream_line(struct sl_child *c, struct sl_child_stream *st, const char *line, size_t n)
{
	char safe[sizeof(st->buf) + 1];

	if (n == 0)
		return;
	if (c->nsecrets) {
		n = masked(c, line, n, safe, sizeof(safe));
		line = safe;
	}
	/* a warning, so that `sluice run` shows it: it is the user's own output */
	sl_log(SL_LOG_WARNING, "query '%s': %s: %.*s", c->query, c->prog, (int)n, line);
	if (st->is_err) {
		size_t k = n < sizeof(c->last_err) - 1 ? n : sizeof(c->last_err) - 1;
		memcpy(c->last_err, line, k);
		c->last_err[k] = 0;
	}
}

int sl_child_stream_read(struct sl_child *c, struct sl_child_stream *st)
{
	if (st->fd < 0)
		return -1;
	ssize_t n = read(st->fd, st->buf + st->len, sizeof(st->buf) - st->len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		stream_line(c, st, st->buf, st->len); /* a last line without a newline */
		st->len = 0;
		close(st->fd);
		st->fd = -1;
		return -1;
	}
	st->len += (size_t)n;
	size_t start = 0;
	for (size_t i = 0; i < st->len; i++) {
		if (st->buf[i] == '\n') {
			stream_line(c, st, st->buf + start, i - start);
			start = i + 1;
		}
	}
	if (start == 0 && st->len == sizeof(st->buf)) {
		stream_line(c, st, st->buf, st->len); /* a line too long: cut */
		start = st->len;
	}
	memmove(st->buf, st->buf + start, st->len - start);
	st->len -= start;
	return 1;
}

void sl_child_stream_drain(struct sl_child *c, struct sl_child_stream *st)
{
	while (st->fd >= 0) {
		int r = sl_child_stream_read(c, st);
		if (r < 0)
			return; /* its last line is logged */
		if (r == 0)
			break;
	}
	stream_line(c, st, st->buf, st->len);
	st->len = 0;
}

int sl_child_write(struct sl_child *c, const char *buf, size_t len, int64_t deadline_ns,
		   const atomic_bool *stop)
{
	sigset_t pipe_set, old_set;
	size_t off = 0;
	int rc = 0;

	if (c->in < 0)
		return EPIPE;
	/* a child that closed its stdin must not kill us with SIGPIPE */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
	while (off < len) {
		ssize_t n = write(c->in, buf + off, len - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rc = EPIPE;
			break;
		}
		int64_t now = sl_child_now_ns();
		if (now >= deadline_ns) {
			rc = ETIMEDOUT;
			break;
		}
		if (stop && *stop) {
			rc = ECANCELED;
			break;
		}
		struct pollfd p[2] = {{.fd = c->in, .events = POLLOUT},
				      {.fd = c->err.fd, .events = POLLIN}};
		int64_t ms = (deadline_ns - now) / 1000000 + 1;
		poll(p, c->err.fd >= 0 ? 2 : 1, ms > 100 ? 100 : (int)ms);
		if (p[1].revents)
			sl_child_stream_read(c, &c->err);
	}
	/* a SIGPIPE our writes raised stays pending: take it before unblocking */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	return rc;
}

bool sl_child_reaped(struct sl_child *c, int *status)
{
	if (c->pid <= 0)
		return true;
	if (waitpid(c->pid, status, WNOHANG) != c->pid)
		return false;
	c->pid = 0;
	return true;
}

void sl_child_end(struct sl_child *c, int64_t wait_ns, int *status)
{
	int64_t now = sl_child_now_ns(), term_at = now + wait_ns, kill_at = 0;
	pid_t pid = c->pid;

	*status = -1;
	if (c->in >= 0) {
		close(c->in);
		c->in = -1;
	}
	while (c->pid > 0 && !sl_child_reaped(c, status)) {
		now = sl_child_now_ns();
		if (!kill_at && now >= term_at) {
			kill(-c->pid, SIGTERM);
			kill_at = now + SL_CHILD_KILL_GRACE_NS;
		} else if (kill_at && now >= kill_at) {
			kill(-c->pid, SIGKILL);
			kill_at = INT64_MAX;
		}
		struct pollfd p[2];
		nfds_t np = 0;
		if (c->out.fd >= 0)
			p[np++] = (struct pollfd){.fd = c->out.fd, .events = POLLIN};
		if (c->err.fd >= 0)
			p[np++] = (struct pollfd){.fd = c->err.fd, .events = POLLIN};
		if (np == 0 || poll(p, np, 10) <= 0) {
			if (np == 0)
				usleep(10000);
			continue;
		}
		for (nfds_t i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			struct sl_child_stream *st = p[i].fd == c->out.fd ? &c->out : &c->err;
			if (st == &c->out && !c->log_out) {
				char junk[4096]; /* what it says after the conversation: dropped */
				ssize_t n = read(st->fd, junk, sizeof(junk));
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					close(st->fd);
					st->fd = -1;
				}
			} else {
				sl_child_stream_read(c, st);
			}
		}
	}
	if (kill_at && pid > 0)
		kill(-pid, SIGKILL); /* what of its group is left */
	sl_child_stream_drain(c, &c->err);
	if (c->log_out)
		sl_child_stream_drain(c, &c->out);
	if (c->out.fd >= 0)
		close(c->out.fd);
	if (c->err.fd >= 0)
		close(c->err.fd);
	c->out.fd = c->err.fd = -1;
}

void sl_child_status_text(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "ended");
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "stopped");
}
