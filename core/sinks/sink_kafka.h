/* SPDX-License-Identifier: MIT */
/*
 * The kafka sink (CONNECTORS.md §7; librdkafka). Each output row becomes
 * one record: Spark's input columns (value, key, topic, partition, headers)
 * when the rows have a value column, else the row whole as its JSON Lines
 * text; option keyColumn names a column whose text becomes the key. Every
 * record carries the headers sluice.query (the query's checkpoint id) and
 * sluice.batch (the batch id).
 *
 * sl_sink_kafka is at-least-once, as Spark: a batch's records are produced
 * and flushed in write(), so a batch retried or replayed after a crash is
 * produced again.
 *
 * sl_sink_kafka_txn (option transactional) is exactly-once for
 * read_committed consumers: one Kafka transaction per batch, under the
 * stable transactional.id "sluice-<query id>" (init_transactions fences a
 * zombie and aborts what it left open, before any recovery read). Before
 * batch N produces, the end offsets of the topic's partitions are recorded
 * durably in the catalog (checkpoint log kind 'k', batch N: "P:O" pairs,
 * space-separated); the transaction commits in write(), before the batch's
 * catalog commit, which drops the record. A replay of N that finds the
 * record reads those partitions from the recorded offsets to their last
 * stable offset with read_committed, and when a record tagged (query, N)
 * is there, the batch commits without producing again. Shutdown aborts an
 * open transaction.
 */
#ifndef SLUICE_CORE_SINK_KAFKA_H
#define SLUICE_CORE_SINK_KAFKA_H

#include "sink_ops.h"

/* The kafka sink's vtables: at-least-once, and transactional (exactly-once). */
extern const struct sl_sink_ops sl_sink_kafka;
extern const struct sl_sink_ops sl_sink_kafka_txn;

struct sl_query_config;

/*
 * Checks q's kafka.* options against librdkafka (the property names, and
 * the values that are not @env:/@file: references) without connecting:
 * 0, or SL_ECONFIG with err naming the field
 * ("queries.q.sink.kafka.lingr.ms: No such configuration property ..."),
 * or ENOMEM. Run where a start refuses a config (exit 4).
 */
int sl_sink_kafka_check(const struct sl_query_config *q, char *err, size_t errlen);

#endif
