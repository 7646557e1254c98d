// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope vm-bench's node lookup loop (test/vm/src/bench_lookups.rs): `lookuploop FILE N`
 * asks FILE for a user xattr it does not have N times with fgetxattr(2) and prints
 * "calls N ns T", T the loop's CLOCK_MONOTONIC nanoseconds. On F2FS each call reads the
 * inode's inline xattr area through f2fs_get_node_page (the page is cached after the first),
 * so the loop is N node lookups and little else: what a hook on the lookup costs shows as
 * time added per call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char value[64];
	long calls, i;
	long long start;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: lookuploop FILE CALLS\n");
		return 2;
	}
	calls = atol(argv[2]);
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	start = now_ns();
	for (i = 0; i < calls; i++) {
		if (fgetxattr(fd, "user.nodescope", value, sizeof(value)) >= 0 ||
		    errno != ENODATA) {
			perror("fgetxattr: expected ENODATA");
			return 1;
		}
	}
	printf("calls %ld ns %lld\n", calls, now_ns() - start);
	return 0;
}
