#!/bin/sh
# nodescope's Android /data image (test/vm/src/android_image.rs): format the test disk with
# Android's mkfs features, mount it with a phone's userdata options, let android_data write the
# recipe's tree (fscrypt v2 keys and policies, owners, labels, contents) and the inode index,
# unmount (a clean checkpoint) and hand the index back.
. /prelude.sh
load_modules
find_disks
. /etc/android-image.conf
mark mkfs
mkfs.f2fs $MKFS_ARGS /dev/$DEV > $R/mkfs.txt 2>&1 || { fail "mkfs.f2fs $MKFS_ARGS failed"; finish; }
mount -t f2fs -o $MOUNT_OPTIONS /dev/$DEV /mnt 2> $R/mount.txt ||
  { fail "mount -o $MOUNT_OPTIONS failed: $(cat $R/mount.txt)"; finish; }
# Every warning of the mount (quotas that would not turn on, a feature the kernel lacks).
dmesg | grep "F2FS-fs ($DEV)" > $R/mount_log.txt
grep -q -i "fail\|cannot\|error" $R/mount_log.txt && fail "the mount complained: $(cat $R/mount_log.txt)"
mark write
android_data /mnt /etc/android.recipe $R/android.index > $R/android_data.txt 2>&1
echo $? > $R/android_data.rc
mark written
df -k /mnt > $R/df.txt
umount /mnt || fail "umount failed"
mark unmounted
finish
