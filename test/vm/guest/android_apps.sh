#!/bin/sh
# Apps reading their own data on the encrypted image (test/vm/src/android_image/apps.rs): the
# cached Android image mounted as a phone mounts /data, its keys added again (a new mount has
# an empty keyring), then each app's reader, as the app's uid through su, cats its files and
# shared preferences by their plaintext names. The stream must give each app exactly the node
# reads iostat counts over its turn.
. /prelude.sh
load_modules
find_disks
mount_tracing
. /etc/android-image.conf
mount -t f2fs -o $MOUNT_OPTIONS /dev/$DEV /mnt 2> $R/mount.txt ||
  { fail "mount -o $MOUNT_OPTIONS failed: $(cat $R/mount.txt)"; finish; }
android_data /mnt /etc/keys.recipe /tmp/keys.index > $R/keys.txt 2>&1 || fail "adding the keys: $(cat $R/keys.txt)"
echo 1 > $S/iostat_enable || fail iostat_enable
cold
stream_start apps || finish
n=0
for user in $APP_USERS; do
  su $user -c "sh /read-app-$n" 2>> $R/apps_su.err || fail "su $user failed"
  snap apps_$n
  n=$((n + 1))
done
stream_stop
umount /mnt || fail "umount failed"
finish
