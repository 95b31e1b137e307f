/* SPDX-License-Identifier: MIT */
/*
 * The parquet format of the file sink: a query's output rows as Parquet
 * parts (core/sinks/parquet.h does the encoding), columns as q->out's
 * without the partition columns, whose values are in the folder names.
 */
#include <errno.h>
#include <stdlib.h>

#include "parquet.h"
#include "sink.h"
#include "strbuf.h"

int sl_sink_pq_open(const struct sl_query_config *q, sl_pq_write_fn fn, void *ctx,
		    struct sl_pq_writer **w)
{
	struct sl_column *cols = calloc(q->out.n, sizeof(*cols));
	size_t *src = calloc(q->out.n, sizeof(*src));
	struct sl_pq_opts o = {
	    .codec = q->compression,
	    .row_group_bytes = (size_t)q->row_group_bytes,
	    .zstd_level = SL_SINK_ZSTD_LEVEL,
	};
	size_t n = 0;
	int rc = ENOMEM;

	if (cols && src) {
		for (size_t c = 0; c < q->out.n; c++) {
			if (sl_sink_partition_col(q, c))
				continue; /* its value is in the folder name */
			cols[n] = q->out.cols[c];
			src[n++] = c;
		}
		rc = sl_pq_open(cols, src, n, &o, fn, ctx, w);
	}
	free(cols);
	free(src);
	return rc;
}

static int to_buf(void *ctx, const void *p, size_t len)
{
	struct sl_strbuf *b = ctx;
	sl_strbuf_add(b, p, len);
	return b->oom ? ENOMEM : 0;
}

int sl_sink_pq_part(const struct sl_query_config *q, const struct sl_batch *b, const size_t *idx,
		    size_t n, void **data, size_t *len)
{
	struct sl_strbuf out = {0};
	struct sl_pq_writer *w;
	int rc;

	if ((rc = sl_sink_pq_open(q, to_buf, &out, &w)))
		return rc;
	if (n && (rc = sl_pq_add_rows(w, b, idx, n))) {
		sl_pq_abort(w);
		sl_strbuf_release(&out);
		return rc;
	}
	if ((rc = sl_pq_close(w))) {
		sl_strbuf_release(&out);
		return rc;
	}
	*data = out.p;
	*len = out.len;
	return 0;
}
