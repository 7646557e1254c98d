// SPDX-License-Identifier: MIT OR Apache-2.0
/* nodescope's Android /data writer (test/vm/src/android_image.rs): `android_data MOUNT RECIPE
 * INDEX` writes the tree RECIPE describes into the F2FS mounted at MOUNT the way Android leaves
 * it: fscrypt v2 keys added with FS_IOC_ADD_ENCRYPTION_KEY, policies set on the directories
 * vold and init set them on, owners, modes and security.selinux labels, file contents. For
 * every entry it writes "INO PATH" to INDEX: the names on disk are ciphertext, so only this
 * side, which knows the plaintext, can tell the host which inode is which file.
 *
 * Recipe lines, fields separated by one space, paths relative to MOUNT:
 *   key NAME HEX                       a 64-byte raw key (128 hex digits)
 *   dir PATH MODE UID GID LABEL [KEY]  mkdir; KEY: set that key's v2 policy on it (empty)
 *   file PATH MODE UID GID LABEL zeros BLOCKS
 *   file PATH MODE UID GID LABEL random LEN SEED
 *   file PATH MODE UID GID LABEL text HEX
 *   file PATH MODE UID GID LABEL sparse BLOCKS EVERY SEED
 *                                      BLOCKS blocks long, one random block in every EVERY
 *                                      written, holes between (no extent maps the file, so a
 *                                      read walks its direct and indirect nodes)
 *   xattr PATH NAME LEN SEED           user.NAME set to LEN random bytes on an entry written
 *                                      before (too long for the inline area: an xattr node)
 * MODE is octal. It prints one summary line: keys, dirs, policies, files, bytes, xattrs.
 *
 * `android_data getxattr NAME PATH...` reads user.NAME of each PATH (the phone trial's
 * launches, as the app's uid: busybox has no getfattr); it fails on the first it cannot read.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fscrypt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_KEYS 8
#define MAX_FIELDS 10
#define RAW_KEY_BYTES 64

struct key {
	char name[32];
	__u8 identifier[FSCRYPT_KEY_IDENTIFIER_SIZE];
};

static struct key keys[MAX_KEYS];
static int nkeys;
static int mount_fd;
static long line_no;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "android_data: recipe line %ld: %s %s: %s\n", line_no, what,
		path ? path : "", strerror(errno));
	exit(1);
}

static void bad_line(const char *why)
{
	fprintf(stderr, "android_data: recipe line %ld: %s\n", line_no, why);
	exit(1);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decode HEX into out (at most max bytes); the byte count, or -1. */
static long unhex(const char *hex, unsigned char *out, size_t max)
{
	size_t len = strlen(hex), i;

	if (len % 2 || len / 2 > max)
		return -1;
	for (i = 0; i < len / 2; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return (long)(len / 2);
}

static void add_key(const char *name, const char *hex)
{
	struct {
		struct fscrypt_add_key_arg arg;
		unsigned char raw[RAW_KEY_BYTES];
	} request;
	struct key *key;

	if (nkeys == MAX_KEYS || strlen(name) >= sizeof(key->name))
		bad_line("too many keys or too long a key name");
	memset(&request, 0, sizeof(request));
	request.arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	request.arg.raw_size = RAW_KEY_BYTES;
	if (unhex(hex, request.raw, sizeof(request.raw)) != RAW_KEY_BYTES)
		bad_line("a key must be 128 hex digits");
	if (ioctl(mount_fd, FS_IOC_ADD_ENCRYPTION_KEY, &request) != 0)
		die("FS_IOC_ADD_ENCRYPTION_KEY", name);
	key = &keys[nkeys++];
	strcpy(key->name, name);
	memcpy(key->identifier, request.arg.key_spec.u.identifier, sizeof(key->identifier));
}

static const struct key *find_key(const char *name)
{
	int i;

	for (i = 0; i < nkeys; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	bad_line("unknown key");
	return NULL;
}

/* Android's FBE policy (libfscrypt): AES-256-XTS contents, AES-256-CTS names padded to 16. */
static void set_policy(int fd, const char *path, const struct key *key)
{
	struct fscrypt_policy_v2 policy;

	memset(&policy, 0, sizeof(policy));
	policy.version = FSCRYPT_POLICY_V2;
	policy.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
	policy.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
	policy.flags = FSCRYPT_POLICY_FLAGS_PAD_16;
	memcpy(policy.master_key_identifier, key->identifier, sizeof(key->identifier));
	if (ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, &policy) != 0)
		die("FS_IOC_SET_ENCRYPTION_POLICY", path);
}

/* Owner, mode and label of the new entry fd; its inode number into the index. */
static void finish_entry(int fd, const char *path, char **f, FILE *index)
{
	const char *label = f[5];
	struct stat st;

	if (fchown(fd, (uid_t)strtoul(f[3], NULL, 10), (gid_t)strtoul(f[4], NULL, 10)))
		die("fchown", path);
	if (fchmod(fd, (mode_t)strtoul(f[2], NULL, 8)))
		die("fchmod", path);
	/* libselinux's setfilecon stores the context with its terminating NUL. */
	if (fsetxattr(fd, "security.selinux", label, strlen(label) + 1, 0))
		die("setxattr security.selinux", path);
	if (fstat(fd, &st))
		die("fstat", path);
	fprintf(index, "%llu %s\n", (unsigned long long)st.st_ino, path);
}

static long long write_all(int fd, const char *path, const unsigned char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0)
			die("write", path);
		done += (size_t)n;
	}
	return (long long)len;
}

/* xorshift64*: cheap bytes; the contents are encrypted on disk whatever they are. */
static long long write_random(int fd, const char *path, unsigned long long len, uint64_t state)
{
	unsigned char buf[4096];
	unsigned long long left = len;

	state |= 1;
	while (left) {
		size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf), i;

		for (i = 0; i < n; i += 8) {
			uint64_t word;

			state ^= state >> 12;
			state ^= state << 25;
			state ^= state >> 27;
			word = state * 0x2545f4914f6cdd1dULL;
			memcpy(buf + i, &word, n - i < 8 ? n - i : 8);
		}
		write_all(fd, path, buf, n);
		left -= n;
	}
	return (long long)len;
}

static long long write_content(int fd, const char *path, char **f, int nf)
{
	static unsigned char text[1 << 16];
	static const unsigned char zeros[4096];
	long long bytes = 0;
	unsigned long n;

	if (!strcmp(f[6], "zeros") && nf == 8) {
		for (n = strtoul(f[7], NULL, 10); n; n--)
			bytes += write_all(fd, path, zeros, sizeof(zeros));
		return bytes;
	}
	if (!strcmp(f[6], "random") && nf == 9)
		return write_random(fd, path, strtoull(f[7], NULL, 10), strtoull(f[8], NULL, 10));
	if (!strcmp(f[6], "sparse") && nf == 10) {
		unsigned long blocks = strtoul(f[7], NULL, 10), every = strtoul(f[8], NULL, 10);
		uint64_t seed = strtoull(f[9], NULL, 10);

		if (!every)
			bad_line("sparse: EVERY must be at least 1");
		for (n = 0; n < blocks; n += every) {
			if (lseek(fd, (off_t)n * 4096, SEEK_SET) < 0)
				die("lseek", path);
			bytes += write_random(fd, path, 4096, seed + n);
		}
		if (ftruncate(fd, (off_t)blocks * 4096))
			die("ftruncate", path);
		return bytes;
	}
	if (!strcmp(f[6], "text") && nf == 8) {
		long len = unhex(f[7], text, sizeof(text));

		if (len < 0)
			bad_line("bad text hex");
		return write_all(fd, path, text, (size_t)len);
	}
	bad_line("unknown file content");
	return 0;
}

/* user.NAME of PATH (relative to MOUNT) set to LEN random bytes. */
static void set_user_xattr(const char *path, const char *name, unsigned long len,
			   uint64_t state)
{
	static unsigned char value[4096];
	char full[256];
	size_t i;
	int fd;

	if (len > sizeof(value) || snprintf(full, sizeof(full), "user.%s", name) >= (int)sizeof(full))
		bad_line("xattr: too long a value or name");
	state |= 1;
	for (i = 0; i < len; i++) {
		state ^= state >> 12;
		state ^= state << 25;
		state ^= state >> 27;
		value[i] = (unsigned char)((state * 0x2545f4914f6cdd1dULL) >> 56);
	}
	fd = openat(mount_fd, path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		die("open", path);
	if (fsetxattr(fd, full, value, len, 0))
		die("setxattr", path);
	close(fd);
}

/* `getxattr NAME PATH...`: each PATH's user.NAME must be readable. */
static int get_user_xattrs(int argc, char **argv)
{
	static char value[4096];
	char full[256];
	int i;

	if (argc < 3 || snprintf(full, sizeof(full), "user.%s", argv[2]) >= (int)sizeof(full)) {
		fprintf(stderr, "usage: android_data getxattr NAME PATH...\n");
		return 2;
	}
	for (i = 3; i < argc; i++) {
		if (getxattr(argv[i], full, value, sizeof(value)) < 0) {
			fprintf(stderr, "android_data: getxattr %s %s: %s\n", argv[i], full,
				strerror(errno));
			return 1;
		}
	}
	return 0;
}

static int split(char *line, char **f)
{
	int n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		if (n == MAX_FIELDS)
			bad_line("too many fields");
		f[n++] = tok;
	}
	return n;
}

int main(int argc, char **argv)
{
	long dirs = 0, policies = 0, files = 0, xattrs = 0;
	long long bytes = 0;
	char *line = NULL, *f[MAX_FIELDS];
	size_t cap = 0;
	FILE *recipe, *index;

	if (argc >= 2 && !strcmp(argv[1], "getxattr"))
		return get_user_xattrs(argc, argv);
	if (argc != 4) {
		fprintf(stderr, "usage: android_data MOUNT RECIPE INDEX\n");
		return 2;
	}
	mount_fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	recipe = fopen(argv[2], "r");
	index = fopen(argv[3], "w");
	if (mount_fd < 0 || !recipe || !index) {
		perror("android_data: opening MOUNT, RECIPE or INDEX");
		return 1;
	}
	while (getline(&line, &cap, recipe) > 0) {
		int nf, fd;

		line_no++;
		nf = split(line, f);
		if (nf == 3 && !strcmp(f[0], "key")) {
			add_key(f[1], f[2]);
		} else if ((nf == 6 || nf == 7) && !strcmp(f[0], "dir")) {
			if (mkdirat(mount_fd, f[1], 0700))
				die("mkdir", f[1]);
			fd = openat(mount_fd, f[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
			if (fd < 0)
				die("open", f[1]);
			if (nf == 7) {
				set_policy(fd, f[1], find_key(f[6]));
				policies++;
			}
			finish_entry(fd, f[1], f, index);
			close(fd);
			dirs++;
		} else if (nf >= 8 && !strcmp(f[0], "file")) {
			fd = openat(mount_fd, f[1], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
			if (fd < 0)
				die("create", f[1]);
			bytes += write_content(fd, f[1], f, nf);
			finish_entry(fd, f[1], f, index);
			close(fd);
			files++;
		} else if (nf == 5 && !strcmp(f[0], "xattr")) {
			set_user_xattr(f[1], f[2], strtoul(f[3], NULL, 10), strtoull(f[4], NULL, 10));
			xattrs++;
		} else {
			bad_line("unknown record");
		}
	}
	if (fclose(index))
		die("closing the index", argv[3]);
	printf("android_data keys=%d dirs=%ld policies=%ld files=%ld bytes=%lld xattrs=%ld\n", nkeys,
	       dirs, policies, files, bytes, xattrs);
	return 0;
}
