#!/bin/sh
# nodescope vm-test, the foreign variants' phase (issue 49; test/vm/src/foreign_phase.rs): runs
# as /init in Debian's stock 6.12 kernel and loads, in turn, each variant of the reference
# module that looks like an implementation nodescope has never seen (no tracepoints, other
# names, inlined functions; kmod/patches/6.12-variants/6.12-foreign-*.patch). For each: the file
# set, then one `nodescope stream` and one `nodescope record` with no flags over a workload that
# makes every kind of event (conversions and rejects, restores, every restore failure and nomem,
# reclaims by the shrinker and the budget, second chances, forgets), between two readings of the
# module's counters; `nodescope top` with no flags in tmux, captured. The counters stay the
# ground truth: their file, fault and budget controls are named per variant in
# /etc/vm-test.conf (FOREIGN, and NC_<v>, FAULT_<v>, BUDGET_<v>).
. /prelude.sh
. /etc/vm-test.conf
mark boot
mount_tracing
load_modules f2fs.ko
find_disks
mkdir -p /run /dev/pts
mount -t devpts devpts /dev/pts
ip link set lo up
export TERM=xterm-256color
mark modules_loaded

threshold() { echo $1 > $S/node_compress_threshold || fail "$V: threshold $1"; }
interval() { echo $1 > $S/node_compress_interval || fail "$V: interval $1"; }
counters() { cat $D/$NC > $VR/nc_$1.txt; }
# settle: until the worker stops converting (three seconds in a row without a conversion or a
# worker's second chance), $1 seconds at most.
settle() {
  last=-1; still=0; n=0
  while [ $still -lt 3 ] && [ $n -lt $1 ]; do
    sleep 1
    now=$(grep -E '^(conversions|second_chance_worker) ' $D/$NC | cut -d' ' -f2 | tr '\n' ' ')
    if [ "$now" = "$last" ]; then still=$((still+1)); else still=0; fi
    last=$now; n=$((n+1))
  done
}
top_capture() { tmux -S /tmp/top.sock capture-pane -p > $VR/top_screen_$1.txt 2>> $VR/tmux.err; }

foreign() {
  V=$1
  VR=$R/$V
  mkdir -p $VR
  eval "NC=\$NC_$(echo $V | tr - _)"
  eval "FAULT=\$FAULT_$(echo $V | tr - _)"
  eval "BUDGETF=\$BUDGET_$(echo $V | tr - _)"
  insmod /lib/modules/f2fs-$V.ko 2>> $VR/insmod.txt || { fail "$V: insmod"; return 1; }
  mkfs.f2fs -f -l vmtest -O extra_attr,inode_checksum /dev/$DEV > $VR/mkfs.txt 2>&1 ||
    { fail "$V: mkfs.f2fs"; return 1; }
  mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $VR/mount.txt || { fail "$V: mount"; return 1; }
  D=/sys/kernel/debug/f2fs/$DEV
  [ -e $D/$NC ] || { fail "$V: no $D/$NC"; return 1; }
  ls $D > $VR/debugfs_files.txt
  grep '\[f2fs\]' /proc/kallsyms | cut -f1 | awk '{print $3}' | sort > $VR/kallsyms.txt
  echo 1 > $S/iostat_enable || fail "$V: iostat_enable"
  make_file_set
  sync
  threshold 0; interval 100
  cold
  nodescope probe > $VR/probe.txt 2>&1 || fail "$V: nodescope probe"
  mark ${V}_created

  # The stream and the recording, both with no flags: what they find by themselves.
  nodescope stream --json > $VR/exact.json 2> $VR/exact.err &
  SP=$!
  wait_for $SP "$V: stream" "grep -q 'nodescope stream: ready' $VR/exact.err" 120
  nodescope record -o $VR/run.nsr > /dev/null 2> $VR/record.err &
  RP=$!
  wait_for $RP "$V: record" "grep -q 'nodescope record: ready' $VR/record.err" 120
  tmux -S /tmp/top.sock new-session -d -x 140 -y 45 \
    "nodescope top 2> $VR/top.err; echo \$? > $VR/top.rc" 2>> $VR/tmux.err || fail "$V: tmux"
  wait_for $$ "$V: top" "[ -e $VR/top.rc ] || tmux -S /tmp/top.sock capture-pane -p | grep -q 'source bpf'" 120
  counters start
  mark ${V}_start

  # Raw entries, then conversions (and rejects: the shaped files' direct nodes do not fit).
  sh /replay-all
  threshold $THRESHOLD
  settle 60
  # Restores: the page cache dropped, not the node cache; every file read again.
  echo 1 > /proc/sys/vm/drop_caches
  sh /replay-all
  top_capture 1
  # Every restore failure the fault control makes, and one nomem, each taken by a read.
  d=0
  for f in slot_size payload_len payload truncate crc; do
    echo 1 > /proc/sys/vm/drop_caches
    echo "$f 1" > $D/$FAULT || fail "$V: arm $f"
    cat /mnt/t/d-$d/f-0 > /dev/null || fail "$V: read after $f"
    d=$((d+1))
  done
  for f in footer inode_checksum node_type; do
    threshold 0
    cold
    sh /replay-small
    echo "$f 1" > $D/$FAULT || fail "$V: arm $f"
    threshold $THRESHOLD
    n=0
    until grep -q '^none' $D/$FAULT || [ $n -gt 100 ]; do sleep 0.2; n=$((n+1)); done
    settle 30
    echo 1 > /proc/sys/vm/drop_caches
    sh /replay-small
  done
  echo 1 > /proc/sys/vm/drop_caches
  echo "nomem 1" > $D/$FAULT || fail "$V: arm nomem"
  j=1
  while [ $j -lt $NFILES ] && grep -q '^nomem' $D/$FAULT; do
    cat /mnt/t/d-$d/f-$j > /dev/null 2>&1 || cat /mnt/t/d-$d/f-$j > /dev/null
    j=$((j+1))
  done
  # Reclaims: the budget's, then the shrinker's; second chances by both.
  echo $BUDGET > $D/$BUDGETF || fail "$V: budget"
  sh /replay-all
  echo 0 > $D/$BUDGETF
  settle 30
  echo 2 > /proc/sys/vm/drop_caches
  sh /replay-all
  top_capture 2
  echo 3 > /proc/sys/vm/drop_caches
  # Forgets: nodes freed (after this the replays would miss the removed files: a listing).
  rm -r /mnt/t/d-1 /mnt/shaped/b-512-0
  sync
  ls -lR /mnt > /dev/null
  top_capture 3
  # The span ends with the worker off and a pass's time to finish.
  threshold 0
  sleep 2
  counters end
  mark ${V}_end
  kill -TERM $SP $RP
  wait $SP
  echo $? > $VR/exact.rc
  wait $RP
  echo $? > $VR/record.rc
  tmux -S /tmp/top.sock send-keys q
  n=0
  until [ -e $VR/top.rc ] || [ $n -gt 100 ]; do sleep 0.1; n=$((n+1)); done
  tmux -S /tmp/top.sock kill-server 2>/dev/null
  nodescope report --json $VR/run.nsr > $VR/report.json 2> $VR/report.err
  echo $? > $VR/report.rc
  umount /mnt || fail "$V: umount"
  rmmod f2fs 2>> $VR/insmod.txt || fail "$V: rmmod"
  mark ${V}_done
}

for v in $FOREIGN; do
  foreign $v
done
dmesg > $R/dmesg.txt
mark done
finish
