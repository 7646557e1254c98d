// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope vm-test's xattr passes (test/vm/src/accesses.rs): `xattrpass FILE...` forks, and
 * both processes ask each FILE, in order, for a user xattr it does not have (getxattr(2)). On
 * F2FS each call reads the inode's inline xattr area through f2fs_get_node_page: with the
 * inodes cached and their node pages dropped, the first process to reach a file reads its
 * node page from disk, and the other, arriving while the read is in flight, finds the page
 * locked and waits for it. One fork, so that the two start together: a second process started
 * by the shell began after the first had read every page. Files by name, not by readdir: a
 * readdir reads the inodes ahead.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static int pass(int argc, char **argv)
{
	char value[64];
	int i;

	for (i = 1; i < argc; i++) {
		if (getxattr(argv[i], "user.nodescope", value, sizeof(value)) < 0 &&
		    errno != ENODATA) {
			perror(argv[i]);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int status, failed;
	pid_t child;

	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	failed = pass(argc, argv);
	if (child == 0)
		return failed;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		failed = 1;
	return failed;
}
