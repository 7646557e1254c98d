#!/bin/sh
# nodescope vm-kmod, the phone trial (test/vm/src/kmod_phase/phone.rs): runs as /init. The
# cover letter's Android trial with the reference module on a copy of the project's Android
# image (fscrypt, SELinux labels, the 18 apps' files), per trial: a fresh mount (unmount, page
# cache dropped, mount: the node cache is per mount, so it starts empty), a seed pass launching
# the 18 apps (each the app's uid reading its files: /launch-N), pre-pressure normalisation,
# memory pressure held 30 s, release, measured passes 1 and 2, a sync phase (/sync), the
# original policy put back,
# then the offline audit (unmount, fsck.f2fs, every file's checksum). Settings:
# /etc/phone.conf. The host reads /results (phone.rs).
. /prelude.sh
. /etc/phone.conf
mark boot
mkdir -p /sys/kernel/debug
mount -t debugfs debugfs /sys/kernel/debug
hold_static_keys
load_modules
find_disks
D=/sys/kernel/debug/f2fs/$DEV
mkdir -p /run /hog /sys/fs/cgroup
mount -t tmpfs -o size=100% hog /hog
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>> $R/cgroup.txt || fail "cgroup2"
ip link set lo up

phone_mount() {
  mount -t f2fs -o $MOUNT_OPTIONS /dev/$DEV /mnt 2>> $R/mount.txt || return 1
  android_data /mnt /etc/keys.recipe /tmp/keys.index >> $R/keys.txt 2>&1 || return 1
  echo 1 > $S/iostat_enable
}
phone_mount || { fail "mount: $(cat $R/mount.txt $R/keys.txt)"; finish; }
# The apps' files made big enough for direct and indirect nodes, and xattrs for xattr nodes
# (the image's labels and contexts fit the inline area): /etc/extra.recipe, written once.
android_data /mnt /etc/extra.recipe /tmp/extra.index > $R/extra.txt 2>&1 ||
  { fail "extra recipe: $(cat $R/extra.txt)"; finish; }
sync
# Every file's checksum as it is now: the reference of each trial's audit.
sumall() { find /mnt/data -type f | sort | xargs md5sum; }
mark extra_written
sumall > /sums.md5 2> $R/sums_err.txt
wc -l < /sums.md5 > $R/sums_count.txt
umount /mnt || { fail "first umount"; finish; }
mark prepared

snap() {
  cat $D/node_cache > $R/nc_$1.txt
  cp /proc/fs/f2fs/$DEV/iostat_info $R/iostat_$1.txt
  grep -E '^(MemFree|MemAvailable|Cached|Active\(file\)|Inactive\(file\)|SReclaimable):' /proc/meminfo > $R/meminfo_$1.txt
}
knobs_now() { echo "$(cat $S/node_compress_threshold) $(cat $S/node_compress_interval)"; }
# The normalisation's wait: $1 seconds in every trial, whatever the setting; it prints the
# seconds after which the worker's counters stopped changing (or $1). It waited only until they
# stood still for 3 s before: an off trial's worker is quiet at once, an on trial's never within
# 20 s, so the off trials reached the pressure about 16 s sooner than the on trials, and the
# what-if, which replays an off trial's timeline at the on settings, converted less before it.
settle() {
  last=-1; changed=0; n=0
  while [ $n -lt $1 ]; do
    sleep 1
    n=$((n+1))
    now=$(grep -E '^(conversions|second_chance_worker) ' $D/node_cache | cut -d' ' -f2 | tr '\n' ' ')
    [ "$now" = "$last" ] || changed=$n
    last=$now
  done
  echo $changed
}
sample_memory() {
  while :; do
    read up idle < /proc/uptime
    echo "$up $(grep '^attributed_bytes ' $D/node_cache | cut -d' ' -f2)"
    sleep 0.5
  done
}
# One pass: the 18 launches in order, each its app's uid; counters after each.
launch_pass() {
  n=0
  for user in $APP_USERS; do
    su $user -c "sh /launch-$n" 2>> $R/${1}_launch.err || fail "$1: launch $n ($user) failed"
    snap ${1}_app$n
    n=$((n + 1))
  done
}
total_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
# 1 GiB is to the phone's memory as this is to the guest's.
PRESSURE_MB=$((total_mb * 1024 / PHONE_MEMORY_MB))
PAGE_CACHE_MB=$((total_mb * PAGE_CACHE_EIGHTHS / 8))
echo "memtotal_mb $total_mb pressure_mb $PRESSURE_MB headroom_mb $HEADROOM_MB page_cache_mb $PAGE_CACHE_MB" > $R/pressure.txt

# trial NAME THRESHOLD INTERVAL [controller]
trial() {
  name=$1
  mark ${name}_start
  sync; echo 3 > /proc/sys/vm/drop_caches
  phone_mount || { fail "$name: mount"; return; }
  knobs_now > $R/${name}_knobs_found.txt
  echo $2 > $S/node_compress_threshold || fail "$name: threshold $2"
  echo $3 > $S/node_compress_interval || fail "$name: interval $3"
  nodescope stream --json --window 1 > $R/${name}_stream.jsonl 2> $R/${name}_stream.err &
  ST=$!
  nodescope record -o $R/${name}.nsr --lookup-latency > /dev/null 2> $R/${name}_record.err &
  RC=$!
  wait_for $ST "$name stream" "grep -q 'nodescope stream: ready' $R/${name}_stream.err" 60
  wait_for $RC "$name record" "grep -q 'nodescope record: ready' $R/${name}_record.err" 60
  DP=
  if [ "$4" = controller ]; then
    nodescope daemon --tune --psi-goal $TUNE_PSI_GOAL --audit $R/${name}_daemon.jsonl \
      > $R/${name}_daemon.out 2> $R/${name}_daemon.err &
    DP=$!
    wait_for $DP "$name daemon" "grep -q '\"start\"' $R/${name}_daemon.jsonl 2>/dev/null" 60
  fi
  sample_memory > $R/${name}_memory.txt &
  SM=$!
  snap ${name}_start
  launch_pass ${name}_seed
  snap ${name}_seed
  mark ${name}_seeded
  # Pre-pressure normalisation: dirty nodes written back, NORMALISE_S for the worker (the same
  # wait in every trial, see settle), the phone's other
  # page cache put back (PAGE_CACHE_MB of the block device read through the page cache: its
  # system files, the mapped APKs and libraries, which a phone's reclaim takes from as well),
  # then all free memory but the pressure and a headroom held by a tmpfs (the apps' data
  # pages stay, as on a phone).
  sync
  settle $NORMALISE_S > $R/${name}_settle.txt
  dd if=/dev/$DEV of=/dev/null bs=1M count=$PAGE_CACHE_MB 2> $R/${name}_hog.txt
  free=$(awk '/^MemFree:/ {print int($2 / 1024)}' /proc/meminfo)
  base=$((free - PRESSURE_MB - HEADROOM_MB))
  if [ $base -lt 0 ]; then
    fail "$name: $free MB free after the page cache, below the pressure and headroom"
    base=0
  fi
  dd if=/dev/zero of=/hog/base bs=1M count=$base 2>> $R/${name}_hog.txt
  echo "free_before $free base $base free_after $(awk '/^MemFree:/ {print int($2 / 1024)}' /proc/meminfo)" >> $R/${name}_hog.txt
  snap ${name}_normalised
  mark ${name}_normalised
  # Memory pressure: allocated, held for PRESSURE_S, released. The allocation takes the free
  # memory but the headroom (kswapd, woken by it, does a small part of the reclaim); the phone's
  # allocation finds no memory free and reclaims its size, which the hold asks of the root
  # cgroup once (memory.reclaim: the kernel's own reclaim, page cache and every shrinker,
  # F2FS's included, in proportion, no OOM killer). Earlier versions reclaimed from a guest
  # whose page cache was the apps' files alone (54 to 79 MB): every reclaim scanned the node
  # cache's shrinker past its whole count, and every trial lost every entry.
  dd if=/dev/zero of=/hog/pressure bs=1M count=$PRESSURE_MB 2>> $R/${name}_hog.txt
  snap ${name}_allocated
  read up0 idle < /proc/uptime
  echo ${PRESSURE_MB}M > /sys/fs/cgroup/memory.reclaim 2>> $R/${name}_reclaim.txt
  echo "memory.reclaim rc $?" >> $R/${name}_reclaim.txt
  snap ${name}_reclaimed
  read up1 idle < /proc/uptime
  sleep $(awk "BEGIN { s = $PRESSURE_S - ($up1 - $up0); print (s > 0 ? s : 0) }")
  snap ${name}_held
  rm -f /hog/pressure
  snap ${name}_released
  mark ${name}_released
  launch_pass ${name}_pass1
  snap ${name}_pass1
  launch_pass ${name}_pass2
  snap ${name}_pass2
  mark ${name}_passes_done
  # The sync phase: after an idle wait, an agent (root) reads every app's shared preferences'
  # xattrs, round after round (/sync: its wait, syncpoll's period and rounds from phone.rs),
  # the same node blocks again and again, while the phone is otherwise idle.
  sh /sync > $R/${name}_sync.txt 2> $R/${name}_sync.err || fail "$name: the sync phase"
  snap ${name}_synced
  mark ${name}_synced
  kill $SM; wait $SM 2>/dev/null
  if [ -n "$DP" ]; then
    knobs_now > $R/${name}_knobs_daemon_end.txt
    kill -TERM $DP; wait $DP; echo $? > $R/${name}_daemon.rc
  fi
  # The original policy put back (as the knobs were found at the mount); nothing is flushed.
  set -- $(cat $R/${name}_knobs_found.txt)
  echo $1 > $S/node_compress_threshold || fail "$name: restoring threshold $1"
  echo $2 > $S/node_compress_interval || fail "$name: restoring interval $2"
  knobs_now > $R/${name}_knobs_restored.txt
  sleep 2
  snap ${name}_final
  kill -INT $ST $RC
  wait $ST; echo $? > $R/${name}_stream.rc
  wait $RC; echo $? > $R/${name}_record.rc
  rm -f /hog/base
  sync
  nodescope report --json --image /dev/$DEV $R/${name}.nsr > $R/${name}_report.json 2> $R/${name}_report.err
  echo $? > $R/${name}_report.rc
  # The offline audit: fsck of the unmounted device. The launches never write a file, so
  # every file's checksum is taken once, after the last trial (a trial's damage stays on disk).
  umount /mnt || fail "$name: umount"
  fsck.f2fs -f /dev/$DEV > $R/${name}_fsck.txt 2>&1
  echo $? > $R/${name}_fsck.rc
  mark ${name}_done
}

for t in $TRIALS; do
  case $t in
    off*) trial $t 0 $INTERVAL ;;
    on*) trial $t $THRESHOLD $INTERVAL ;;
    static_*) set -- $(echo $t | tr '_' ' '); trial $t $2 $3 ;;
    controller*) trial $t $THRESHOLD $INTERVAL controller ;;
  esac
done
mark trials_done
phone_mount || fail "mount for the checksums"
sumall > /tmp/sums.now 2>> $R/sums_err.txt
cmp -s /sums.md5 /tmp/sums.now && echo ok > $R/files.txt || echo bad > $R/files.txt
umount /mnt
mark audited
# The what-if: each off trial's recording at the on trials' settings, on the device. Its
# pressure takes the share of the cache the recorded kernel's took (--budget recorded): per entry
# its shrinker scanned, one of the pages it held, in the shrinker's effective count. The lookups
# are timed, so demand reads no lookup made (an unhooked lookup function's) are lookups too.
phone_mount || fail "mount for the what-if"
k=1
while [ -e $R/off$k.nsr ]; do
  timeout 900 nodescope whatif $R/off$k.nsr --device /dev/$DEV --threshold $THRESHOLD \
    --interval $INTERVAL --budget recorded --json > $R/whatif$k.json 2> $R/whatif$k.err
  echo $? > $R/whatif$k.rc
  k=$((k + 1))
done
# The same, given the inodes on<k>'s kernel evicted (its recording's inode_evict events): the
# node cache's model alone, without the kernel's choice of how many inodes to reclaim.
k=1
while [ -e $R/off$k.nsr ] && [ -e $R/on${k}_report.json ]; do
  n=$(sed -n 's/.*"inode_evictions": *\([0-9]*\).*/\1/p' $R/on${k}_report.json | head -n 1)
  timeout 900 nodescope whatif $R/off$k.nsr --device /dev/$DEV --threshold $THRESHOLD \
    --interval $INTERVAL --budget recorded --inode-evictions ${n:-0} --json \
    > $R/whatif_given$k.json 2> $R/whatif_given$k.err
  echo $? > $R/whatif_given$k.rc
  k=$((k + 1))
done
k=1
while [ -e $R/off$k.nsr ] && [ -e $R/on$k.nsr ]; do
  nodescope report --compare $R/off$k.nsr $R/on$k.nsr > $R/compare$k.txt 2>&1
  nodescope report --compare $R/off$k.nsr $R/on$k.nsr --json > $R/compare$k.json 2>> $R/compare$k.txt
  k=$((k + 1))
done
umount /mnt
dmesg > $R/dmesg.txt
mark done
finish
