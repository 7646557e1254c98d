/* nodescope vm-test helper (test/vm/src/uidswitch.rs): one process reads every file of one
 * directory as root, copies iostat_info, changes its uid with a raw setresuid (no exec, no
 * rename: only the commit_creds kprobe tells the counters), waits past a stream interval, then
 * reads every file of a second directory.
 * usage: uidswitch UID IOSTAT_INFO MID_COPY DIR_AS_ROOT DIR_AS_UID */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int read_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { perror(dir); return -1; }
    struct dirent *e;
    char path[4096], buf[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); closedir(d); return -1; }
        while (read(fd, buf, sizeof buf) > 0) {}
        close(fd);
    }
    closedir(d);
    return 0;
}

static int copy(const char *from, const char *to) {
    char buf[65536];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) { perror("copy"); return -1; }
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n) { perror(to); return -1; }
    close(in);
    close(out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: uidswitch UID IOSTAT_INFO MID_COPY DIR_AS_ROOT DIR_AS_UID\n");
        return 2;
    }
    long uid = atol(argv[1]);
    if (read_dir(argv[4]) || copy(argv[2], argv[3])) return 1;
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) { perror("setresuid"); return 1; }
    sleep(3);
    return read_dir(argv[5]) ? 1 : 0;
}
