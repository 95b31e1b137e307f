/*
 * sluice-kafka-mock: hosts librdkafka's mock cluster for the test suite and
 * the benchmarks, in a process of its own (never inside sluice, which tests
 * kill).
 *
 *   sluice-kafka-mock [-b BROKERS] [TOPIC:PARTITIONS ...]
 *
 * Starts a mock cluster of BROKERS brokers (default 3), creates each TOPIC
 * with PARTITIONS partitions (replication factor 1 less than or equal to
 * BROKERS), prints the bootstrap.servers list on one line of stdout, and
 * serves until stdin reaches end of file or SIGTERM/SIGINT arrives. Topics
 * not named here are created on first use (auto creation, 4 partitions; the
 * mock's own default).
 *
 * Exit: 0 after a clean stop, 1 when the cluster cannot start, 2 on usage.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: sluice-kafka-mock [-b BROKERS] [TOPIC:PARTITIONS ...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	int brokers = 3, opt;
	while ((opt = getopt(argc, argv, "b:h")) != -1) {
		if (opt == 'b') {
			brokers = atoi(optarg);
			if (brokers < 1 || brokers > 16)
				return usage();
		} else {
			return usage();
		}
	}

	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	/* the handle only owns the cluster's bookkeeping; keep it quiet */
	if (rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "sluice-kafka-mock: %s\n", err);
		return 1;
	}
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "sluice-kafka-mock: %s\n", err);
		return 1;
	}
	rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "sluice-kafka-mock: cannot start a mock cluster\n");
		rd_kafka_destroy(rk);
		return 1;
	}

	for (int i = optind; i < argc; i++) {
		char *colon = strrchr(argv[i], ':');
		int parts = colon ? atoi(colon + 1) : 0;
		if (!colon || colon == argv[i] || parts < 1) {
			rd_kafka_mock_cluster_destroy(mc);
			rd_kafka_destroy(rk);
			return usage();
		}
		*colon = '\0';
		rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, argv[i], parts, 1);
		if (e) {
			fprintf(stderr, "sluice-kafka-mock: topic %s: %s\n", argv[i], rd_kafka_err2str(e));
			rd_kafka_mock_cluster_destroy(mc);
			rd_kafka_destroy(rk);
			return 1;
		}
	}

	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
	fflush(stdout);

	/* serve until stdin closes (the test's end of the pipe) or a signal */
	while (!stop) {
		struct pollfd p = {.fd = 0, .events = POLLIN};
		int n = poll(&p, 1, 500);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0) {
			char buf[256];
			ssize_t r = read(0, buf, sizeof buf);
			if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
				break;
		}
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
