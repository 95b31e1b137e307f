/* SPDX-License-Identifier: MIT */
/*
 * Children: the commands sinks and sources run (exec, process), under the
 * rules of CONNECTORS "Commands and secrets": every other descriptor closed
 * (close_range), their own process group, PR_SET_PDEATHSIG, no NOTIFY_SOCKET
 * or WATCHDOG_*, stdout and stderr read line by line into the log, the last
 * stderr line kept for lastError, SIGTERM to the group then SIGKILL 2 s later.
 * A child is used by one thread at a time.
 */
#ifndef SLUICE_CORE_CHILD_H
#define SLUICE_CORE_CHILD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SL_CHILD_KILL_GRACE_NS 2000000000ll /* SIGTERM, then SIGKILL this much later */

/* One of a child's output streams, read line by line. */
struct sl_child_stream {
	int fd;		/* our end; -1 once closed */
	bool is_err;	/* stderr: its last line is kept */
	char buf[1024]; /* a line not yet ended */
	size_t len;	/* bytes in buf */
};

struct sl_child {
	pid_t pid;		    /* 0: not running (or reaped) */
	int in;			    /* its stdin (our end), -1 once closed */
	struct sl_child_stream out; /* its stdout */
	struct sl_child_stream err; /* its stderr */
	const char *query;	    /* the query's name, for log lines; borrowed */
	const char *prog;	    /* argv[0], for log lines and errors; borrowed */
	bool log_out;	    /* stdout lines go to the log (exec); else the caller reads out.fd */
	char last_err[240]; /* its last stderr line, "" when none */
	/* secrets the child was given: shown as *** in log lines and last_err; borrowed */
	const char *const *secrets;
	size_t nsecrets;
};

/*
 * The working folder DATADIR/<kind>/<query> of a query's commands into buf
 * (len bytes), made (0700) when missing. 0 or an errno.
 */
int sl_child_workdir(const char *datadir, const char *kind, const char *query, char *buf,
		     size_t len);

/* Monotonic time in ns. */
int64_t sl_child_now_ns(void);

/*
 * The environment of a child: ours without NOTIFY_SOCKET, WATCHDOG_* and the
 * variables extra sets, then extra's "NAME=value" strings (copied). NULL on
 * ENOMEM; free with sl_child_env_free().
 */
char **sl_child_env(const char *const *extra, size_t nextra);
void sl_child_env_free(char **env);

/*
 * Starts argv (argv[0] looked up in PATH) in cwd with env and pipes on its
 * stdin, stdout and stderr, all non-blocking on our side. query and prog are
 * borrowed for the child's life. 0 with c filled, or an errno (c untouched
 * but for pid 0). A program that cannot be run exits 127 with a last stderr
 * line saying why.
 */
int sl_child_spawn(struct sl_child *c, char *const *argv, char **env, const char *cwd,
		   const char *query);

/*
 * Reads what st has now: 1 something, 0 nothing now, -1 at its end (the
 * stream is closed). Complete lines go to the log (stderr's: its last kept),
 * unless st is out and !c->log_out.
 */
int sl_child_stream_read(struct sl_child *c, struct sl_child_stream *st);

/* After the child exited: what st holds now, without waiting on grandchildren. */
void sl_child_stream_drain(struct sl_child *c, struct sl_child_stream *st);

/*
 * Writes len bytes of buf to the child's stdin before deadline (monotonic
 * ns), draining its stderr meanwhile. 0, EPIPE when the child closed its
 * stdin or died, ETIMEDOUT, ECANCELED when *stop was set (stop may be NULL).
 * Never raises SIGPIPE.
 */
int sl_child_write(struct sl_child *c, const char *buf, size_t len, int64_t deadline_ns,
		   const atomic_bool *stop);

/*
 * Whether the child exited: true with *status (waitpid's) once it has, and
 * c->pid 0. Non-blocking.
 */
bool sl_child_reaped(struct sl_child *c, int *status);

/*
 * Ends the child: waits up to wait_ns for it to exit by itself (after its
 * stdin is closed), then SIGTERM to its group, SIGKILL 2 s later, and reaps
 * it; stderr is drained and every pipe closed. *status is waitpid's (or -1
 * when it was already reaped). Accepts a child that never started.
 */
void sl_child_end(struct sl_child *c, int64_t wait_ns, int *status);

/*
 * Describes how a child ended into buf: "exited with status N",
 * "killed by signal N (name)".
 */
void sl_child_status_text(int status, char *buf, size_t len);

#endif
