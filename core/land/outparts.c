/* SPDX-License-Identifier: MIT */
/* A query's committed output parts, and a file's bytes (outparts.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "catalog.h"
#include "err.h"
#include "land.h"
#include "outparts.h"

struct child {
	char name[SL_NAME_MAX + 1];
	uint64_t id;
};

/* What a walk of out/<q>/ gathers. */
struct walk {
	struct sl_txn *t;
	uint64_t lo, hi;      /* batches wanted */
	struct sl_out_part *parts;
	size_t nparts, cap;
	struct child *kids;   /* the folder being read */
	size_t nkids, capkids;
	int err;
};

static int add_child(void *ctx, const char *name, uint64_t id)
{
	struct walk *w = ctx;
	if (w->nkids == w->capkids) {
		size_t cap = w->capkids ? w->capkids * 2 : 64;
		struct child *k = realloc(w->kids, cap * sizeof(*k));
		if (!k)
			return (w->err = ENOMEM), 1;
		w->kids = k;
		w->capkids = cap;
	}
	snprintf(w->kids[w->nkids].name, sizeof(w->kids[0].name), "%s", name);
	w->kids[w->nkids++].id = id;
	return 0;
}

bool sl_out_part_name(const char *name, uint64_t *batch, uint64_t *num)
{
	const char *p = name + 5;
	char *end;

	if (strncmp(name, "part-", 5) || *p < '0' || *p > '9')
		return false;
	*batch = strtoull(p, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return false;
	*num = strtoull(end + 1, &end, 10);
	return *end == '.';
}

static int part_cmp(const void *a, const void *b)
{
	const struct sl_out_part *x = a, *y = b;
	if (x->batch != y->batch)
		return x->batch < y->batch ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	return strcmp(x->rel, y->rel);
}

static char *join(const char *dir, const char *name)
{
	size_t d = strlen(dir), n = strlen(name);
	char *s = malloc(d + n + 2);
	if (!s)
		return NULL;
	memcpy(s, dir, d);
	if (d)
		s[d++] = '/';
	memcpy(s + d, name, n + 1);
	return s;
}

/* One folder of the walk: its parts, and its subfolders pushed on dirs (.id set). */
static int walk_dir(struct walk *w, uint64_t id, const char *rel, struct sl_out_part **dirs,
		    size_t *ndirs, size_t *capdirs)
{
	int rc;

	w->nkids = 0;
	if ((rc = sl_txn_dirent_each(w->t, id, NULL, add_child, w)))
		return w->err ? w->err : rc;
	for (size_t i = 0; i < w->nkids; i++) {
		struct sl_inode ino;
		uint64_t b = 0, p = 0;
		if ((rc = sl_txn_inode_get(w->t, w->kids[i].id, &ino)))
			return rc == SL_NOTFOUND ? SL_ECORRUPT : rc;
		bool dir = ino.kind == SL_KIND_DIR;
		if (!dir && (!sl_out_part_name(w->kids[i].name, &b, &p) || b < w->lo || b > w->hi))
			continue;
		struct sl_out_part **v = dir ? dirs : &w->parts;
		size_t *n = dir ? ndirs : &w->nparts, *cap = dir ? capdirs : &w->cap;
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 32;
			struct sl_out_part *g = realloc(*v, c * sizeof(*g));
			if (!g)
				return ENOMEM;
			*v = g;
			*cap = c;
		}
		struct sl_out_part *e = &(*v)[*n];
		*e = (struct sl_out_part){.batch = b, .num = p, .id = w->kids[i].id,
					  .size = ino.size, .mtime_ns = ino.mtime_ns};
		if (!(e->rel = join(rel, w->kids[i].name)))
			return ENOMEM;
		(*n)++;
	}
	return 0;
}

void sl_out_parts_free(struct sl_out_part *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].rel);
	free(v);
}

int sl_out_parts(struct sl_txn *t, uint64_t outdir, uint64_t lo, uint64_t hi,
		 struct sl_out_part **v, size_t *n)
{
	struct walk w = {.t = t, .lo = lo, .hi = hi};
	struct sl_out_part *dirs = NULL; /* folders to read */
	size_t ndirs = 0, capdirs = 0;
	int rc = walk_dir(&w, outdir, "", &dirs, &ndirs, &capdirs);

	for (size_t i = 0; rc == 0 && i < ndirs; i++) /* ndirs grows */
		rc = walk_dir(&w, dirs[i].id, dirs[i].rel, &dirs, &ndirs, &capdirs);
	sl_out_parts_free(dirs, ndirs);
	free(w.kids);
	if (rc) {
		sl_out_parts_free(w.parts, w.nparts);
		return rc;
	}
	if (w.nparts)
		qsort(w.parts, w.nparts, sizeof(w.parts[0]), part_cmp);
	*v = w.parts;
	*n = w.nparts;
	return 0;
}

int sl_land_file_bytes(struct sl_land *l, uint64_t id, char **data, size_t *len, bool *mapped)
{
	struct sl_txn *t;
	struct sl_inode i;
	int rc;

	*mapped = false;
	if ((rc = sl_catalog_read(sl_land_catalog(l), &t)))
		return rc;
	rc = sl_txn_inode_get(t, id, &i);
	if (rc == 0 && i.storage == SL_STORE_INLINE) {
		const void *d;
		size_t n;
		rc = sl_txn_data_get(t, id, &d, &n);
		if (rc == 0 && !(*data = malloc(n ? n : 1)))
			rc = ENOMEM;
		if (rc == 0) {
			memcpy(*data, d, n);
			*len = n;
		}
		sl_txn_end(t);
		return rc;
	}
	sl_txn_end(t);
	if (rc)
		return rc;
	int fd;
	if ((rc = sl_blob_open(sl_land_blobs(l), id, O_RDONLY, &fd)))
		return rc;
	struct stat sb;
	if (i.size > 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= i.size) {
		void *m = mmap(NULL, i.size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			close(fd);
			*data = m;
			*len = i.size;
			*mapped = true;
			return 0;
		}
	}
	char *buf = malloc(i.size ? i.size : 1);
	size_t got = 0;
	if (!buf)
		rc = ENOMEM;
	while (rc == 0 && got < i.size) {
		ssize_t r = pread(fd, buf + got, i.size - got, (off_t)got);
		if (r < 0)
			rc = errno;
		else if (r == 0)
			rc = SL_ECORRUPT; /* shorter than its record */
		else
			got += (size_t)r;
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	*len = i.size;
	return 0;
}
