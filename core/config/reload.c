/* SPDX-License-Identifier: MIT */
/* DATA_DIR/config-reload: the outcome of the mount's last config load. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "reload.h"

int sl_reload_write(const char *datadir, const struct sl_reload_state *s)
{
	char tmp[4096], path[4096], buf[700];
	int fd, n, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s/%s", datadir, SL_RELOAD_TEMP);
	snprintf(path, sizeof(path), "%s/%s", datadir, SL_RELOAD_FILE);
	n = snprintf(buf, sizeof(buf), "%" PRId64 "\n%s%s", s->ok_ms, s->refused,
		     s->refused[0] ? "\n" : "");
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd))
		rc = errno ? errno : EIO;
	if (close(fd) && !rc)
		rc = errno;
	if (!rc && rename(tmp, path))
		rc = errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	int dfd = open(datadir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd))
			rc = errno;
		close(dfd);
	}
	return rc;
}

int sl_reload_read(const char *datadir, struct sl_reload_state *out)
{
	char path[4096], line[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", datadir, SL_RELOAD_FILE);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? SL_NOTFOUND : errno;
	memset(out, 0, sizeof(*out));
	if (fgets(line, sizeof(line), f))
		out->ok_ms = strtoll(line, NULL, 10);
	if (fgets(out->refused, sizeof(out->refused), f))
		out->refused[strcspn(out->refused, "\n")] = 0;
	fclose(f);
	return 0;
}
