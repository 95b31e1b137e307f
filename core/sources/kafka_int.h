/* SPDX-License-Identifier: MIT */
/*
 * The kafka source's state, shared by its planning (kafka.c) and its
 * reading (kafka_read.c). Never included outside core/sources/.
 */
#ifndef SLUICE_CORE_KAFKA_INT_H
#define SLUICE_CORE_KAFKA_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "decode.h"
#include "kafka_conf.h"
#include "source.h"

#define OFF SL_SOURCE_OFFSET_MAX

struct rd_kafka_s; /* librdkafka's rd_kafka_t */

/* One read: a topic-partition's range [from, until). */
struct part {
	char *topic;
	int32_t partition;
	int64_t from, until;
};

struct sl_source {
	struct sl_land *l;
	const struct sl_query_config *q;
	const struct sl_kafka_config *kc;
	uint32_t qid;
	const atomic_bool *stop;
	bool ignore_caps;	/* trigger once: one batch takes everything */
	bool fix_end;		/* availableNow or `sluice run`: the end is fixed at first */
	struct rd_kafka_s *rk;	/* the consumer: assign + seek, never a group member */
	struct sl_decoder *dec; /* valueFormat json */
	char **secrets;		/* resolved @env:/@file: values, masked in messages */
	size_t nsecrets;
	char error[1024];
	/* what prepare() found */
	bool prepared;
	uint64_t batch;	    /* the batch it planned */
	bool replay;	    /* logged by an earlier run */
	bool first;	    /* no batch before it */
	bool write_initial; /* 's' 0 is to be written */
	int64_t ts_ms;	    /* replay: batchTimestampMs */
	char initial[OFF];  /* the initial offsets' JSON */
	char last_end[OFF]; /* the last logged end, or "" */
	char begin[OFF], end[OFF];
	struct part *parts;
	size_t nparts;
	struct sl_kafka_offsets latest; /* latest offsets at the last asking */
	char latest_text[OFF];		/* the same as JSON, or "" (progress latestOffset) */
	bool have_fixed;
	struct sl_kafka_offsets fixed; /* availableNow: the run's end */
	int64_t last_trigger_ms;       /* minOffsetsPerTrigger: when a batch last fired */
	uint64_t lost;		       /* failOnDataLoss false: offsets this batch skipped */
};

/* Now, monotonic, in ms. */
int64_t sl_kafka_now_ms(void);

/* p->error from a format, secrets masked. */
void sl_kafka_seterr(struct sl_source *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* [*lo, *hi): a partition's earliest and latest offsets. 0, or EIO with p->error set. */
int sl_kafka_watermarks(struct sl_source *p, const char *topic, int32_t part, int64_t *lo,
			int64_t *hi);

/*
 * Data loss (Spark's reportDataLoss) of n offsets, described by fmt: with
 * failOnDataLoss SL_EDATALOSS and p->error naming it; without, logged,
 * counted in p->lost, and 0.
 */
int sl_kafka_data_loss(struct sl_source *p, uint64_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* read (partition): the contract's read() (kafka_read.c). */
int sl_kafka_read(struct sl_source *p, size_t part, struct sl_batch *b, struct sl_decode_stats *st,
		  char *err, size_t errlen);

#endif
