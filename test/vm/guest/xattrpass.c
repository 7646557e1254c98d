// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope vm-test's xattr pass (test/vm/src/accesses.rs): `xattrpass FILE...` asks each FILE,
 * in order, for a user xattr it does not have (getxattr(2)). On F2FS each call reads the
 * inode's inline xattr area through f2fs_get_node_page: with the inodes cached and their node
 * pages dropped, one node lookup per file that reads from disk. Two passes over the same files
 * at once meet on the same node pages: a lookup that finds its page locked under the other
 * pass's read waits for it. Files by name, not by readdir: a readdir reads the inodes ahead.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/xattr.h>

int main(int argc, char **argv)
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
