// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope vm-test's xattr pass (test/vm/src/accesses.rs): `xattrpass DIR...` asks every
 * entry of each DIR, in readdir order, for a user xattr it does not have (getxattr(2)). On
 * F2FS each call reads the inode's inline xattr area through f2fs_get_node_page: with the
 * inodes cached and their node pages dropped, one node lookup per file that reads from disk.
 * Two passes over the same directories at once meet on the same node pages: a lookup that
 * finds its page locked under the other pass's read waits for it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

static int pass_dir(const char *dir)
{
	char path[4096], value[64];
	struct dirent *entry;
	DIR *stream;

	stream = opendir(dir);
	if (!stream) {
		perror(dir);
		return 1;
	}
	while ((entry = readdir(stream))) {
		if (entry->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
		if (getxattr(path, "user.nodescope", value, sizeof(value)) < 0 &&
		    errno != ENODATA) {
			perror(path);
			closedir(stream);
			return 1;
		}
	}
	closedir(stream);
	return 0;
}

int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		if (pass_dir(argv[i]))
			return 1;
	return 0;
}
