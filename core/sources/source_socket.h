/* SPDX-License-Identifier: MIT */
/*
 * The `socket` source (CONNECTORS §4, Spark's TextSocketMicroBatchStream),
 * made durable: inside a mount a reader thread per query (socket_reader.c)
 * connects to host:port, splits what it receives into lines and spools
 * them in group commits (spool.h); the source reads batches from the spool
 * only, so that `sluice run --available-now` and an availableNow query
 * drain it without connecting, and a replay after a crash reads the same
 * lines. The offset is the count of lines spooled, a bare integer.
 *
 * Checkpoint entries (qlog.h): 'l' spool chunks (spool.h); 'b' batch N's
 * range ("<ts_ms> <start> <end>", start "-" before the first batch), the
 * last 100 kept; meta "q.<qid>.send" the last logged end plus one (0: none
 * yet), and the spool's own (spool.h).
 */
#ifndef SLUICE_CORE_SOURCE_SOCKET_H
#define SLUICE_CORE_SOURCE_SOCKET_H

#include "source.h"

struct sl_land;
struct sl_query_config;

extern const struct sl_source_ops sl_source_socket;

/* A mount's reader of one socket query: its connection and spool writer. */
struct sl_socket_reader;

/*
 * Starts q's reader thread: it connects to q's host and port (again with
 * capped backoff whenever the connection fails or drops, each failure
 * logged and kept as the query's lastError), spools every line it
 * receives, and calls wake(ctx) after each spool commit. It stops reading
 * while the spool holds maxSpoolBytes (the sender's TCP window fills)
 * until sl_socket_reader_kick() says the spool shrank. l and q are
 * borrowed until sl_socket_reader_stop(). 0 with *out new, or an error.
 */
int sl_socket_reader_start(struct sl_land *l, const struct sl_query_config *q,
			   void (*wake)(void *ctx), void *ctx, struct sl_socket_reader **out);

/* The spool shrank (a batch committed and trimmed): read again. Any thread. */
void sl_socket_reader_kick(struct sl_socket_reader *r);

/*
 * Stops the thread (a line read but not spooled yet is dropped: it was
 * never counted) and frees r. NULL ok.
 */
void sl_socket_reader_stop(struct sl_socket_reader *r);

#endif
