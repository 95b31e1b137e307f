/* SPDX-License-Identifier: MIT */
/*
 * sluice mount, and mount.sluice for /etc/fstab. Start-up order: check the
 * mountpoint and /dev/fuse, take the data dir lock, validate sluice.json,
 * open/recover/close the catalog, and only then mount and daemonize, so every
 * error a user can cause is reported before the parent exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "datadir.h"
#include "engine.h"
#include "err.h"
#include "fs.h"
#include "config.h"
#include "land.h"
#include "sluice.h"
#include "temp.h"

struct mount_opts {
	struct sl_fs_args fs;
	char *fuse_opts;   /* what goes to libfuse, comma-separated */
	bool fake;         /* mount.sluice -f: check, don't mount */
	bool helper;       /* called as mount.sluice */
	char *real_mnt;    /* the mountpoint, resolved by realpath(3) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice mount DATA_DIR MOUNTPOINT [-f] [-d] [-o OPT[,OPT...]]\n"
		"\n"
		"Mounts DATA_DIR at MOUNTPOINT: in/ is the landing tree (a file lands when it\n"
		"is closed at its final name, durably, and is immutable from then on), and\n"
		"status/landing.json counts landings. Unmount with 'fusermount3 -u MOUNTPOINT'.\n"
		"SIGHUP re-reads sluice.json without an unmount (a refused change keeps the\n"
		"old config running: see 'sluice status').\n"
		"\n"
		"  -f, --foreground  stay in the foreground (log to stderr)\n"
		"  -d            trace FUSE requests (implies -f)\n"
		"  -o land=close   a file lands at its last close at a final name, or at\n"
		"                its rename to one (the default)\n"
		"  -o land=rename  strict mode: creating a final name directly is refused\n"
		"                (EPERM); only a rename of a temporary file lands\n"
		"  -o temp=GLOB[:GLOB...]  replace the temporary-name patterns (default\n"
		"                '%s')\n"
		"  -o sparkroot=URI  the URI readers see the mount at, for the paths of\n"
		"                out/<query>/_spark_metadata (default file://MOUNTPOINT)\n"
		"  -o OPT        any other option goes to libfuse (allow_other, ...);\n"
		"                mounts are nosuid,nodev unless -o suid or -o dev\n"
		"\n"
		"For /etc/fstab, see 'mount.sluice --help'.\n"
		"Exit codes: 0 ok, 1 runtime failure, 2 misuse, 3 data dir in use,\n"
		"4 not a sluice data dir or invalid config.\n",
		SL_TEMP_DEFAULT);
}

static void helper_usage(FILE *f)
{
	fprintf(f,
		"usage: mount.sluice DATA_DIR MOUNTPOINT [-sfnvr] [-o OPT[,OPT...]] [-t TYPE] [-N NS]\n"
		"\n"
		"The mount(8) helper for /etc/fstab: 'DATA_DIR MOUNTPOINT sluice defaults 0 0'.\n"
		"Mounts like 'sluice mount' and returns once the mount answers.\n"
		"\n"
		"  -f            check DATA_DIR and the options, don't mount (mount -f)\n"
		"  -s -n -v -r   accepted from mount(8), ignored\n"
		"  -t TYPE, -N NS  accepted from mount(8), ignored\n"
		"  -o OPT        sluice's options (land=close, land=rename, temp=GLOB[:GLOB...],\n"
		"                sparkroot=URI);\n"
		"                fstab's own (auto, noauto, nofail, user, users, nouser, _netdev,\n"
		"                defaults, x-*, comment=*) are dropped; the rest goes to libfuse,\n"
		"                which refuses what it does not know\n"
		"\n"
		"Exit codes: 0 ok, 1 runtime failure, 2 misuse, 3 data dir in use,\n"
		"4 not a sluice data dir or invalid config.\n");
}

static bool helper_drops(const char *o)
{
	static const char *drop[] = {"auto", "noauto", "nofail", "user", "users",
				     "nouser", "_netdev", "defaults"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!strcmp(o, drop[i]))
			return true;
	return !strncmp(o, "x-", 2) || !strncmp(o, "comment=", 8);
}

static int append(char **list, const char *o)
{
	size_t n = *list ? strlen(*list) : 0;
	char *s = realloc(*list, n + strlen(o) + 2);
	if (!s)
		return ENOMEM;
	if (n)
		s[n++] = ',';
	strcpy(s + n, o);
	*list = s;
	return 0;
}

/* Takes sluice's own options out of an -o list; the rest goes to libfuse. */
static int parse_o(struct mount_opts *m, char *list)
{
	char *save = NULL;

	for (char *o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strncmp(o, "land=", 5)) {
			if (!strcmp(o + 5, "rename"))
				m->fs.strict = true;
			else if (!strcmp(o + 5, "close"))
				m->fs.strict = false;
			else {
				die_msg("mount", "invalid option '%s': land= takes rename or close", o);
				return SL_EXIT_USAGE;
			}
		} else if (!strncmp(o, "temp=", 5)) {
			struct sl_temp *t;
			if (sl_temp_new(o + 5, &t)) {
				die_msg("mount", "invalid option '%s': an empty pattern", o);
				return SL_EXIT_USAGE;
			}
			sl_temp_free(t);
			m->fs.temp = o + 5;
		} else if (!strncmp(o, "sparkroot=", 10)) {
			char *uri = o + 10;
			size_t n = strlen(uri);
			if (n == 0) {
				die_msg("mount", "invalid option '%s': sparkroot= takes a URI", o);
				return SL_EXIT_USAGE;
			}
			while (n > 0 && uri[n - 1] == '/')
				uri[--n] = 0; /* "hdfs://nn/x/" is "hdfs://nn/x" */
			m->fs.spark_root = uri;
		} else if (m->helper && helper_drops(o)) {
			continue;
		} else if (append(&m->fuse_opts, o)) {
			die_msg("mount", "out of memory");
			return SL_EXIT_FAILURE;
		}
	}
	return 0;
}

/*
 * With allow_other, other users reach the files: the kernel must check their
 * permissions, so default_permissions comes along (DESIGN, security). Set-id
 * files and device nodes mean nothing in a landing zone: nosuid and nodev
 * unless `-o suid` or `-o dev` says otherwise.
 */
static int enforce_permissions(struct mount_opts *m)
{
	bool other = false, perms = false, suid = false, dev = false;
	char *copy = m->fuse_opts ? strdup(m->fuse_opts) : NULL, *save = NULL;
	int rc = 0;

	if (m->fuse_opts && !copy)
		return ENOMEM;
	for (char *o = copy ? strtok_r(copy, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save)) {
		other |= !strcmp(o, "allow_other");
		perms |= !strcmp(o, "default_permissions");
		suid |= !strcmp(o, "suid") || !strcmp(o, "nosuid");
		dev |= !strcmp(o, "dev") || !strcmp(o, "nodev");
	}
	free(copy);
	if (other && !perms)
		rc = append(&m->fuse_opts, "default_permissions");
	if (rc == 0 && !suid)
		rc = append(&m->fuse_opts, "nosuid");
	if (rc == 0 && !dev)
		rc = append(&m->fuse_opts, "nodev");
	return rc;
}

static int check_mountpoint(const char *mnt)
{
	struct statfs sfs;
	struct stat st;

	/* statfs always reaches the file system: cached attributes hide a dead mount */
	if (statfs(mnt, &sfs) && errno == ENOTCONN) {
		die_msg("mount",
			"mountpoint '%s' is left dead by a crashed daemon: run "
			"'fusermount3 -u %s' first",
			mnt, mnt);
		return SL_EXIT_FAILURE;
	}
	if (stat(mnt, &st)) {
		if (errno == ENOTCONN)
			die_msg("mount",
				"mountpoint '%s' is left dead by a crashed daemon: run "
				"'fusermount3 -u %s' first",
				mnt, mnt);
		else
			die_msg("mount", "mountpoint '%s': %s", mnt, strerror(errno));
		return errno == ENOTCONN ? SL_EXIT_FAILURE : SL_EXIT_USAGE;
	}
	if (!S_ISDIR(st.st_mode)) {
		die_msg("mount", "mountpoint '%s' is not a folder", mnt);
		return SL_EXIT_USAGE;
	}
	return 0;
}

/* libfuse changes to / before serving: keep paths absolute. New string. */
static char *absolute(const char *path)
{
	char cwd[4096], *s;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	s = malloc(strlen(cwd) + strlen(path) + 2);
	if (s)
		sprintf(s, "%s/%s", cwd, path);
	return s;
}

static int run_mount(struct mount_opts *m)
{
	struct sl_config *cfg;
	struct sl_datadir *d;
	struct sl_land *l;
	int fd, rc;

	if ((rc = check_mountpoint(m->fs.mountpoint)))
		return rc;
	/* the paths out/<q>/_spark_metadata names: no symlink, no '..' */
	char *real = realpath(m->fs.mountpoint, NULL);
	if (!real) {
		die_msg("mount", "mountpoint '%s': %s", m->fs.mountpoint, strerror(errno));
		return SL_EXIT_USAGE;
	}
	free(m->real_mnt);
	m->real_mnt = real;
	m->fs.mountpoint = real;
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		die_msg("mount", "cannot open '/dev/fuse': %s (is the fuse module loaded?)",
			strerror(errno));
		return SL_EXIT_FAILURE;
	}
	close(fd);
	rc = open_datadir("mount", m->fs.datadir, SL_DATADIR_LOCK | SL_DATADIR_CREATE, &d, &cfg);
	if (rc)
		return rc;
	/* open, recover and close: the daemon reopens after its fork */
	struct sl_land_opts lo = {.strict = m->fs.strict, .temp = m->fs.temp, .config = cfg};
	rc = sl_land_open(m->fs.datadir, &lo, &l);
	char err[512];
	if (rc == 0 && (rc = sl_engine_check_changes(l, cfg, err, sizeof(err)))) {
		/* a change the checkpoint cannot survive: refused before mounting */
		sl_land_close(l);
		sl_config_free(cfg);
		sl_datadir_close(d);
		if (rc == SL_ECONFIG || rc == SL_ECORRUPT || rc == SL_EVERSION) {
			die_msg("mount", "%s", err);
			return SL_EXIT_DATADIR;
		}
		die_msg("mount", "cannot read the checkpoints: %s", sl_strerror(rc));
		return SL_EXIT_FAILURE;
	}
	sl_config_free(cfg);
	if (rc) {
		die_msg("mount", "cannot open catalog of '%s': %s", m->fs.datadir,
			sl_strerror(rc));
		sl_datadir_close(d);
		return rc == SL_ECORRUPT || rc == SL_EVERSION ? SL_EXIT_DATADIR : SL_EXIT_FAILURE;
	}
	sl_land_close(l);
	if (m->fake) {
		sl_datadir_close(d);
		return SL_EXIT_OK;
	}
	if (enforce_permissions(m)) {
		die_msg("mount", "out of memory");
		sl_datadir_close(d);
		return SL_EXIT_FAILURE;
	}
	m->fs.opts = m->fuse_opts;
	rc = sl_fs_main(&m->fs);
	sl_datadir_close(d);
	return rc;
}

static int mount_paths(struct mount_opts *m, const char *datadir, const char *mnt)
{
	char *d = absolute(datadir), *p = absolute(mnt);
	int rc = SL_EXIT_FAILURE;

	if (d && p) {
		m->fs.datadir = d;
		m->fs.mountpoint = p;
		rc = run_mount(m);
	} else {
		die_msg("mount", "cannot resolve paths: %s", strerror(errno));
	}
	free(d);
	free(p);
	free(m->real_mnt);
	free(m->fuse_opts);
	return rc;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"foreground", no_argument, NULL, 'f'},
						 {NULL, 0, NULL, 0}};
	struct mount_opts m = {0};
	int c, rc;

	use_stderr_log();
	while ((c = getopt_long(argc, argv, "fdo:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			sl_fs_print_help();
			return SL_EXIT_OK;
		case 'f':
			m.fs.foreground = true;
			break;
		case 'd':
			m.fs.foreground = m.fs.debug = true;
			break;
		case 'o':
			if ((rc = parse_o(&m, optarg)))
				return rc;
			break;
		default:
			usage(stderr);
			return SL_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		die_msg("mount", "expected DATA_DIR and MOUNTPOINT (see 'sluice mount --help')");
		return SL_EXIT_USAGE;
	}
	return mount_paths(&m, argv[optind], argv[optind + 1]);
}

int cmd_mount_helper(int argc, char **argv)
{
	struct mount_opts m = {.helper = true};
	const char *pos[2];
	int npos = 0, rc;

	use_stderr_log();
	/* mount(8) calls: mount.sluice SPEC DIR [-sfnvr] [-N NS] [-o OPTS] [-t TYPE] */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			helper_usage(stdout);
			return SL_EXIT_OK;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "-t") || !strcmp(a, "-N")) {
			if (i + 1 >= argc) {
				die_msg("mount", "option '%s' needs a value", a);
				return SL_EXIT_USAGE;
			}
			if (!strcmp(a, "-o") && (rc = parse_o(&m, argv[i + 1])))
				return rc;
			i++;
		} else if (a[0] == '-' && a[1]) {
			for (const char *f = a + 1; *f; f++) {
				if (*f == 'f')
					m.fake = true;
				else if (!strchr("snvr", *f)) {
					die_msg("mount", "unknown option '-%c'", *f);
					return SL_EXIT_USAGE;
				}
			}
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			die_msg("mount", "unexpected argument '%s'", a);
			return SL_EXIT_USAGE;
		}
	}
	if (npos != 2) {
		die_msg("mount", "expected DATA_DIR and MOUNTPOINT");
		return SL_EXIT_USAGE;
	}
	return mount_paths(&m, pos[0], pos[1]);
}
