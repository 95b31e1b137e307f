/* SPDX-License-Identifier: MIT */
/*
 * The kafka source's options (CONNECTORS §7, SPARK-CONNECTORS §1.1) and the
 * pure functions behind its offsets: Spark's offset JSON
 * ({"topic":{"0":23,"1":-1}}), the assign JSON ({"topic":[0,1]}) and
 * maxOffsetsPerTrigger's split across partitions (Spark's rateLimit). No
 * jansson and no librdkafka here: load.c hands the options over as values,
 * core/sources/kafka.c talks to the brokers. Thread-safe.
 */
#ifndef SLUICE_CORE_KAFKA_CONF_H
#define SLUICE_CORE_KAFKA_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define SL_KAFKA_EARLIEST (-2) /* in startingOffsets JSON: the partition's earliest offset */
#define SL_KAFKA_LATEST (-1)   /* in startingOffsets JSON: its latest offset */

/* One partition's offset: the next offset to read. */
struct sl_kafka_tpo {
	char *topic;	   /* non-empty */
	int32_t partition; /* >= 0 */
	int64_t offset;	   /* >= 0, or SL_KAFKA_EARLIEST / SL_KAFKA_LATEST in startingOffsets */
};

/* A map of topic-partitions to offsets, sorted by (topic, partition), no duplicates. */
struct sl_kafka_offsets {
	struct sl_kafka_tpo *e;
	size_t n;
};

enum sl_kafka_strategy { SL_KAFKA_ASSIGN, SL_KAFKA_SUBSCRIBE, SL_KAFKA_PATTERN };
enum sl_kafka_start { SL_KAFKA_START_LATEST, SL_KAFKA_START_EARLIEST, SL_KAFKA_START_JSON };
/* valueFormat: what key and value hold */
enum sl_kafka_vformat {
	SL_KAFKA_V_BINARY, /* key, value: the bytes as base64 STRING (Spark's BINARY in JSON) */
	SL_KAFKA_V_STRING, /* key, value: the bytes as UTF-8 text (CAST(value AS STRING)) */
	SL_KAFKA_V_JSON,   /* the value decoded as a JSON object with the query's schema */
};

struct sl_kafka_config {
	enum sl_kafka_strategy strategy;
	char *strategy_text; /* the option's value as written (compat, description) */
	char **topics;	     /* subscribe: the topics, trimmed, none empty */
	size_t ntopics;
	char *pattern;			/* subscribePattern: a POSIX extended regex, whole name */
	struct sl_kafka_offsets assign; /* assign: the partitions (offsets 0) */
	enum sl_kafka_start start;	/* startingOffsets; default latest */
	struct sl_kafka_offsets start_json; /* startingOffsets JSON (-2/-1 allowed) */
	int64_t max_offsets;		    /* maxOffsetsPerTrigger, > 0; 0 when unset */
	int64_t min_offsets;		    /* minOffsetsPerTrigger, > 0; 0 when unset */
	int64_t max_trigger_delay_us;	    /* maxTriggerDelay; default 15 minutes */
	bool fail_on_data_loss;		    /* failOnDataLoss; default true */
	bool include_headers;		    /* includeHeaders; default false */
	enum sl_kafka_vformat vformat;	    /* valueFormat; default binary */
	int64_t poll_timeout_ms;	    /* kafkaConsumer.pollTimeoutMs; default 120000 */
	int64_t fetch_retries;		    /* fetchOffset.numRetries, >= 0; default 3 */
	int64_t fetch_retry_ms;		    /* fetchOffset.retryIntervalMs, > 0; default 1000 */
	char **kv;	      /* kafka.* without the prefix: key, value, key, value ... */
	size_t nkv;	      /* pairs */
	bool group_id;	      /* kafka.group.id was given (Spark warns) */
	char *group_prefix;   /* groupIdPrefix; default "sluice-kafka-source" */
	bool secret;	      /* a kafka.* key holds a password or key */
	char secret_key[128]; /* the first such key, with "kafka." */
};

/* Frees c and everything in it. Accepts NULL. */
void sl_kafka_config_free(struct sl_kafka_config *c);

/* One option as load.c hands it over: its key and value. */
struct sl_kafka_opt {
	const char *key;
	struct sl_config_value v; /* a composite value's str is its JSON text */
};

/*
 * Builds the kafka config from the source's options (every key but format,
 * schema, mode and pollInterval, which load.c reads). 0 with *out new;
 * SL_ECONFIG with *bad the offending key (one of opts' keys, or NULL for
 * the source as a whole) and err one line without the path; ENOMEM.
 * kafka.group.id is accepted (group_id set): the source logs Spark's
 * warning when it runs.
 */
int sl_kafka_config_parse(const struct sl_kafka_opt *opts, size_t n, struct sl_kafka_config **out,
			  const char **bad, char *err, size_t errlen);

/*
 * True when a kafka.* key (without "kafka.") holds a secret: *password*,
 * *secret*, sasl.oauthbearer.config, ssl.key.pem.
 */
bool sl_kafka_key_is_secret(const char *key);

/*
 * Parses Spark's offset JSON (len bytes) into *out (new: release with
 * sl_kafka_offsets_release()), sorted. allow_special admits -2 and -1.
 * 0, SL_ECONFIG with err set, or ENOMEM.
 */
int sl_kafka_offsets_parse(const char *text, size_t len, bool allow_special,
			   struct sl_kafka_offsets *out, char *err, size_t errlen);

/* Parses assign's JSON {"t":[0,1]} into *out (offsets 0), sorted. As above. */
int sl_kafka_assign_parse(const char *text, size_t len, struct sl_kafka_offsets *out, char *err,
			  size_t errlen);

/*
 * Renders o as Spark writes it: {"t":{"0":23,"1":5},"u":{"0":1}}, topics
 * and partitions in order, no spaces, into buf (len bytes). 0, or
 * ENAMETOOLONG when it does not fit.
 */
int sl_kafka_offsets_render(const struct sl_kafka_offsets *o, char *buf, size_t len);

void sl_kafka_offsets_release(struct sl_kafka_offsets *o);
/* A deep copy of from into *to. 0 or ENOMEM. */
int sl_kafka_offsets_copy(struct sl_kafka_offsets *to, const struct sl_kafka_offsets *from);
/* Adds or sets (topic, partition) to offset, keeping the order. 0 or ENOMEM. */
int sl_kafka_offsets_set(struct sl_kafka_offsets *o, const char *topic, int32_t partition,
			 int64_t offset);
/* The entry of (topic, partition), or NULL. */
const struct sl_kafka_tpo *sl_kafka_offsets_find(const struct sl_kafka_offsets *o,
						 const char *topic, int32_t partition);

/*
 * maxOffsetsPerTrigger's split (Spark's rateLimit): from begin towards until
 * (same partitions, same order: begin[i] is until's partition i's start),
 * limit offsets shared in proportion to each partition's size, a share
 * under 1 rounded up (no partition starves), others down; each end capped
 * at until. ends gets n entries. The sum may pass limit by the rounding up.
 */
void sl_kafka_split(int64_t limit, const int64_t *begin, const int64_t *until, size_t n,
		    int64_t *ends);

#endif
