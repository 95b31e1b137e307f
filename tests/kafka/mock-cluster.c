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
 * Commands, one per line on stdin, each answered "ok" or "error: <why>" on
 * a line of stdout (for the tests' fault injection):
 *   err APIKEY CODE [CODE ...]  the next requests of that ApiKey (0 Produce,
 *                               3 Metadata, 26 EndTxn, ...) fail with these
 *                               error codes, in order
 *   topicerr TOPIC CODE         Metadata answers CODE for TOPIC (0 clears)
 *   down BROKER / up BROKER     a broker (1..BROKERS) stops / resumes serving
 *   slow APIKEY MS COUNT        every broker answers its next COUNT requests
 *                               of that ApiKey MS milliseconds late
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

/* Runs one command line; answers on stdout. */
static void command(rd_kafka_mock_cluster_t *mc, int brokers, char *line)
{
	char *words[66];
	int n = 0;

	for (char *w = strtok(line, " \t\r\n"); w && n < 66; w = strtok(NULL, " \t\r\n"))
		words[n++] = w;
	if (n >= 3 && !strcmp(words[0], "err")) {
		rd_kafka_resp_err_t codes[64];
		for (int i = 2; i < n; i++)
			codes[i - 2] = (rd_kafka_resp_err_t)atoi(words[i]);
		rd_kafka_mock_push_request_errors_array(mc, (int16_t)atoi(words[1]),
							(size_t)(n - 2), codes);
	} else if (n == 3 && !strcmp(words[0], "topicerr")) {
		rd_kafka_mock_topic_set_error(mc, words[1], (rd_kafka_resp_err_t)atoi(words[2]));
	} else if (n == 2 && (!strcmp(words[0], "down") || !strcmp(words[0], "up"))) {
		rd_kafka_resp_err_t e = !strcmp(words[0], "down")
					    ? rd_kafka_mock_broker_set_down(mc, atoi(words[1]))
					    : rd_kafka_mock_broker_set_up(mc, atoi(words[1]));
		if (e) {
			printf("error: %s\n", rd_kafka_err2str(e));
			fflush(stdout);
			return;
		}
	} else if (n == 4 && !strcmp(words[0], "slow")) {
		int ms = atoi(words[2]), count = atoi(words[3]);
		for (int b = 1; b <= brokers; b++)
			for (int i = 0; i < count; i++)
				rd_kafka_mock_broker_push_request_error_rtts(
				    mc, b, (int16_t)atoi(words[1]), 1, RD_KAFKA_RESP_ERR_NO_ERROR, ms);
	} else if (n > 0) {
		printf("error: unknown command '%s'\n", words[0]);
		fflush(stdout);
		return;
	} else {
		return;
	}
	printf("ok\n");
	fflush(stdout);
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
	char line[1024];
	size_t len = 0;
	while (!stop) {
		struct pollfd p = {.fd = 0, .events = POLLIN};
		int n = poll(&p, 1, 500);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0) {
			ssize_t r = read(0, line + len, sizeof line - 1 - len);
			if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
				break;
			if (r < 0)
				continue;
			len += (size_t)r;
			char *nl;
			while ((nl = memchr(line, '\n', len))) {
				*nl = 0;
				command(mc, brokers, line);
				len -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, len);
			}
			if (len == sizeof line - 1)
				len = 0; /* an overlong line: dropped */
		}
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
