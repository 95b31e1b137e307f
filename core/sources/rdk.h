/* SPDX-License-Identifier: MIT */
/*
 * librdkafka, loaded when a query first needs it (rdk.c). The Kafka source
 * and sink include this header instead of librdkafka's: their calls
 * rd_kafka_*() go through sl_rdk, a table filled by dlopen(3) and
 * dlsym(3) at the first sl_rdk_load(), so that sluice's binary does not
 * load librdkafka and the libraries it pulls in (OpenSSL, SASL, lz4,
 * curl...) for a data dir without Kafka: a cold start of a command took
 * 24-29 ms with them linked and 11-13 ms without them (`sluice --version`
 * after drop_caches, 4 runs each), and a machine without librdkafka
 * still runs every other source and sink. Kafka's types, constants and
 * macros are librdkafka's own header's.
 */
#ifndef SLUICE_CORE_RDK_H
#define SLUICE_CORE_RDK_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

/*
 * every librdkafka function sluice calls; each also has its macro below.
 * One missing there calls librdkafka itself, which the binary does not
 * link (a link error); one missing here names no member (a compile error).
 */
#define SL_RDK_FUNCS(X) \
	X(rd_kafka_abort_transaction) \
	X(rd_kafka_assign) \
	X(rd_kafka_begin_transaction) \
	X(rd_kafka_commit_transaction) \
	X(rd_kafka_conf_destroy) \
	X(rd_kafka_conf_new) \
	X(rd_kafka_conf_set) \
	X(rd_kafka_conf_set_dr_msg_cb) \
	X(rd_kafka_conf_set_log_cb) \
	X(rd_kafka_conf_set_opaque) \
	X(rd_kafka_consumer_close) \
	X(rd_kafka_consumer_poll) \
	X(rd_kafka_destroy) \
	X(rd_kafka_err2str) \
	X(rd_kafka_error_code) \
	X(rd_kafka_error_destroy) \
	X(rd_kafka_error_is_fatal) \
	X(rd_kafka_error_is_retriable) \
	X(rd_kafka_error_string) \
	X(rd_kafka_flush) \
	X(rd_kafka_header_add) \
	X(rd_kafka_header_cnt) \
	X(rd_kafka_header_get_all) \
	X(rd_kafka_header_get_last) \
	X(rd_kafka_headers_destroy) \
	X(rd_kafka_headers_new) \
	X(rd_kafka_init_transactions) \
	X(rd_kafka_message_destroy) \
	X(rd_kafka_message_errstr) \
	X(rd_kafka_message_headers) \
	X(rd_kafka_message_timestamp) \
	X(rd_kafka_metadata) \
	X(rd_kafka_metadata_destroy) \
	X(rd_kafka_new) \
	X(rd_kafka_opaque) \
	X(rd_kafka_outq_len) \
	X(rd_kafka_poll) \
	X(rd_kafka_producev) \
	X(rd_kafka_purge) \
	X(rd_kafka_query_watermark_offsets) \
	X(rd_kafka_topic_destroy) \
	X(rd_kafka_topic_name) \
	X(rd_kafka_topic_new) \
	X(rd_kafka_topic_partition_list_add) \
	X(rd_kafka_topic_partition_list_destroy) \
	X(rd_kafka_topic_partition_list_new)

struct sl_rdk {
#define SL_RDK_PTR(f) __typeof__(f) *f;
	SL_RDK_FUNCS(SL_RDK_PTR)
#undef SL_RDK_PTR
};

/* Filled by the first sl_rdk_load() that succeeds; read only after it. */
extern struct sl_rdk sl_rdk;

/*
 * Loads librdkafka once (later calls return the first one's result): 0,
 * or SL_ECONFIG with why the library cannot be used in err ("cannot load
 * librdkafka (librdkafka.so.1): ..."). Thread-safe.
 */
int sl_rdk_load(char *err, size_t errlen);

/* function-like: `struct rd_kafka_metadata` and the like keep their names */
#ifndef SL_RDK_SELF
#define rd_kafka_abort_transaction(...) sl_rdk.rd_kafka_abort_transaction(__VA_ARGS__)
#define rd_kafka_assign(...) sl_rdk.rd_kafka_assign(__VA_ARGS__)
#define rd_kafka_begin_transaction(...) sl_rdk.rd_kafka_begin_transaction(__VA_ARGS__)
#define rd_kafka_commit_transaction(...) sl_rdk.rd_kafka_commit_transaction(__VA_ARGS__)
#define rd_kafka_conf_destroy(...) sl_rdk.rd_kafka_conf_destroy(__VA_ARGS__)
#define rd_kafka_conf_new(...) sl_rdk.rd_kafka_conf_new(__VA_ARGS__)
#define rd_kafka_conf_set(...) sl_rdk.rd_kafka_conf_set(__VA_ARGS__)
#define rd_kafka_conf_set_dr_msg_cb(...) sl_rdk.rd_kafka_conf_set_dr_msg_cb(__VA_ARGS__)
#define rd_kafka_conf_set_log_cb(...) sl_rdk.rd_kafka_conf_set_log_cb(__VA_ARGS__)
#define rd_kafka_conf_set_opaque(...) sl_rdk.rd_kafka_conf_set_opaque(__VA_ARGS__)
#define rd_kafka_consumer_close(...) sl_rdk.rd_kafka_consumer_close(__VA_ARGS__)
#define rd_kafka_consumer_poll(...) sl_rdk.rd_kafka_consumer_poll(__VA_ARGS__)
#define rd_kafka_destroy(...) sl_rdk.rd_kafka_destroy(__VA_ARGS__)
#define rd_kafka_err2str(...) sl_rdk.rd_kafka_err2str(__VA_ARGS__)
#define rd_kafka_error_code(...) sl_rdk.rd_kafka_error_code(__VA_ARGS__)
#define rd_kafka_error_destroy(...) sl_rdk.rd_kafka_error_destroy(__VA_ARGS__)
#define rd_kafka_error_is_fatal(...) sl_rdk.rd_kafka_error_is_fatal(__VA_ARGS__)
#define rd_kafka_error_is_retriable(...) sl_rdk.rd_kafka_error_is_retriable(__VA_ARGS__)
#define rd_kafka_error_string(...) sl_rdk.rd_kafka_error_string(__VA_ARGS__)
#define rd_kafka_flush(...) sl_rdk.rd_kafka_flush(__VA_ARGS__)
#define rd_kafka_header_add(...) sl_rdk.rd_kafka_header_add(__VA_ARGS__)
#define rd_kafka_header_cnt(...) sl_rdk.rd_kafka_header_cnt(__VA_ARGS__)
#define rd_kafka_header_get_all(...) sl_rdk.rd_kafka_header_get_all(__VA_ARGS__)
#define rd_kafka_header_get_last(...) sl_rdk.rd_kafka_header_get_last(__VA_ARGS__)
#define rd_kafka_headers_destroy(...) sl_rdk.rd_kafka_headers_destroy(__VA_ARGS__)
#define rd_kafka_headers_new(...) sl_rdk.rd_kafka_headers_new(__VA_ARGS__)
#define rd_kafka_init_transactions(...) sl_rdk.rd_kafka_init_transactions(__VA_ARGS__)
#define rd_kafka_message_destroy(...) sl_rdk.rd_kafka_message_destroy(__VA_ARGS__)
#define rd_kafka_message_errstr(...) sl_rdk.rd_kafka_message_errstr(__VA_ARGS__)
#define rd_kafka_message_headers(...) sl_rdk.rd_kafka_message_headers(__VA_ARGS__)
#define rd_kafka_message_timestamp(...) sl_rdk.rd_kafka_message_timestamp(__VA_ARGS__)
#define rd_kafka_metadata(...) sl_rdk.rd_kafka_metadata(__VA_ARGS__)
#define rd_kafka_metadata_destroy(...) sl_rdk.rd_kafka_metadata_destroy(__VA_ARGS__)
#define rd_kafka_new(...) sl_rdk.rd_kafka_new(__VA_ARGS__)
#define rd_kafka_opaque(...) sl_rdk.rd_kafka_opaque(__VA_ARGS__)
#define rd_kafka_outq_len(...) sl_rdk.rd_kafka_outq_len(__VA_ARGS__)
#define rd_kafka_poll(...) sl_rdk.rd_kafka_poll(__VA_ARGS__)
#define rd_kafka_producev(...) sl_rdk.rd_kafka_producev(__VA_ARGS__)
#define rd_kafka_purge(...) sl_rdk.rd_kafka_purge(__VA_ARGS__)
#define rd_kafka_query_watermark_offsets(...) sl_rdk.rd_kafka_query_watermark_offsets(__VA_ARGS__)
#define rd_kafka_topic_destroy(...) sl_rdk.rd_kafka_topic_destroy(__VA_ARGS__)
#define rd_kafka_topic_name(...) sl_rdk.rd_kafka_topic_name(__VA_ARGS__)
#define rd_kafka_topic_new(...) sl_rdk.rd_kafka_topic_new(__VA_ARGS__)
#define rd_kafka_topic_partition_list_add(...) sl_rdk.rd_kafka_topic_partition_list_add(__VA_ARGS__)
#define rd_kafka_topic_partition_list_destroy(...) sl_rdk.rd_kafka_topic_partition_list_destroy(__VA_ARGS__)
#define rd_kafka_topic_partition_list_new(...) sl_rdk.rd_kafka_topic_partition_list_new(__VA_ARGS__)
#endif

#endif
