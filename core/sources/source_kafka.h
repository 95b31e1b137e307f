/* SPDX-License-Identifier: MIT */
/*
 * The source `kafka` (CONNECTORS §7, SPARK-CONNECTORS §1): records of Kafka
 * topics through librdkafka's consumer, read with explicit offsets (assign
 * and seek, one partition at a time), never committing offsets to Kafka
 * nor joining a group. An offset is Spark's JSON {"topic":{"0":23}}, the
 * next offset to read of each partition; offsets/N holds batch N's end.
 *
 * Rows: Spark's columns key, value, topic, partition, offset, timestamp,
 * timestampType (and headers with includeHeaders), key and value as base64
 * text (valueFormat binary, Spark's BINARY in JSON) or UTF-8 text
 * (valueFormat string); with valueFormat json the values are JSON objects
 * decoded with the query's schema and mode.
 *
 * The talking to brokers (metadata, offsets) happens in prepare(), outside
 * any transaction; replay(), latest_offset() and log() copy what it found.
 *
 * Checkpoint entries (core/sources/qlog.h):
 *   's' 0  the initial offsets as Spark's KafkaSourceInitialOffsetWriter
 *          writes them: a NUL byte, "v1\n", the JSON (sources/0/0); written
 *          at the first planning, even when it makes no batch
 *   'b' N  batch N's range: "v1\n<ts_ms>\n<first>\n<begin>\n<end>", begin
 *          every partition of end with the offset its read starts at (a new
 *          partition: its earliest); the last 100 are kept
 *   meta "q.<qid>.klat" / "q.<qid>.kend": the sums of the latest offsets
 *          seen at the last planning and of the last logged end (the
 *          backlog `sluice status` shows, in offsets)
 */
#ifndef SLUICE_CORE_SOURCE_KAFKA_H
#define SLUICE_CORE_SOURCE_KAFKA_H

#include "source.h"

/* The vtable; without librdkafka its open() refuses (load refuses first). */
extern const struct sl_source_ops sl_source_kafka;

#endif
