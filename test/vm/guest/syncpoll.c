// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope's phone trial, its sync phase (test/vm/src/kmod_phase/phone.rs): `syncpoll PERIOD_MS
 * ROUNDS NAME PATH...` reads user.NAME of every PATH once a round, ROUNDS rounds, each round
 * starting PERIOD_MS after the one before (absolute deadlines, so a slow round does not push
 * the rest later), as a backup or sync agent rescans the apps' shared preferences. On F2FS each
 * getxattr(2) reads the inode's node page and the xattr node's through f2fs_get_node_page, so
 * every round touches the same node blocks again. It prints "rounds R late L": rounds that
 * ended after the next one's start.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

static void add_ms(struct timespec *t, long ms)
{
	t->tv_sec += ms / 1000;
	t->tv_nsec += (ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

static int after(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

int main(int argc, char **argv)
{
	static char value[4096];
	struct timespec next, now;
	char name[256];
	long period, rounds, round, late = 0;
	int i;

	if (argc < 5 || (period = atol(argv[1])) <= 0 || (rounds = atol(argv[2])) <= 0 ||
	    snprintf(name, sizeof(name), "user.%s", argv[3]) >= (int)sizeof(name)) {
		fprintf(stderr, "usage: syncpoll PERIOD_MS ROUNDS NAME PATH...\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (round = 0; round < rounds; round++) {
		for (i = 4; i < argc; i++) {
			if (getxattr(argv[i], name, value, sizeof(value)) < 0) {
				fprintf(stderr, "syncpoll: getxattr %s %s: %s\n", argv[i], name,
					strerror(errno));
				return 1;
			}
		}
		add_ms(&next, period);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (after(&now, &next))
			late++;
		else
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	printf("rounds %ld late %ld\n", rounds, late);
	return 0;
}
