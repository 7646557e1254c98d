// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope vm-test's xattr passes (test/vm/src/accesses.rs): `xattrpass FILE...` forks, and
 * both processes ask each FILE, in order, for a user xattr it does not have (getxattr(2)),
 * meeting at a pipe before each file so that both ask for it at once. On F2FS each call reads
 * the inode's inline xattr area through f2fs_get_node_page: with the inodes cached and their
 * node pages dropped, the first process to get there reads the node page from disk, and the
 * other finds the page locked under that read and waits for it. Without the meeting the second
 * process trailed the first and only ever found pages already read. Files by name, not by
 * readdir: a readdir reads the inodes ahead.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

/* Tell the other process this one is at the next file, and wait until it is too. */
static int meet(int tell, int hear)
{
	char byte = 0;

	return write(tell, &byte, 1) == 1 && read(hear, &byte, 1) == 1 ? 0 : -1;
}

static int pass(int argc, char **argv, int tell, int hear)
{
	char value[64];
	int i;

	for (i = 1; i < argc; i++) {
		if (meet(tell, hear)) {
			perror("meet");
			return 1;
		}
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
	int to_child[2], to_parent[2], status, failed;
	pid_t child;

	if (pipe(to_child) || pipe(to_parent)) {
		perror("pipe");
		return 1;
	}
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0)
		return pass(argc, argv, to_parent[1], to_child[0]);
	failed = pass(argc, argv, to_child[1], to_parent[0]);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		failed = 1;
	return failed;
}
