/* SPDX-License-Identifier: MIT */
/*
 * The kafka source of a build without librdkafka (source_kafka.h): load
 * refuses the format, naming the library; this vtable only keeps the
 * engine's table whole and refuses in turn.
 */
#include <errno.h>

#include "source_kafka.h"

static int none_open(const struct sl_source_args *a, struct sl_source **out)
{
	(void)a;
	(void)out;
	return ENOTSUP;
}

static int none_pending(struct sl_txn *t, const struct sl_query_config *q, uint32_t qid,
			struct sl_source_backlog *out)
{
	(void)t;
	(void)q;
	(void)qid;
	*out = (struct sl_source_backlog){.known = false};
	return 0;
}

const struct sl_source_ops sl_source_kafka = {
    .name = "kafka",
    .replayable = true,
    .open = none_open,
    .pending = none_pending,
};
