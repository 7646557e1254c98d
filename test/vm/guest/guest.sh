#!/bin/sh
# nodescope vm-test, guest side: runs as /init in a busybox initramfs. It measures and writes
# files into /results; at the end /results goes as a tar onto the disk with serial "results",
# and the host checks everything (test/vm/src/check.rs). Settings: /etc/vm-test.conf.
. /prelude.sh
. /etc/vm-test.conf
mark boot
# Android mounts no debugfs (ANDROID=1, the arm64 run): its CP count comes from sysfs (snap).
mount_tracing
load_modules
find_disks
mark modules_loaded

# MKFS_ON_HOST=1: the host formatted the disk (the arm64 guest has no mkfs.f2fs).
[ "$MKFS_ON_HOST" = 1 ] || mkfs.f2fs -f -l vmtest /dev/$DEV > $R/mkfs.txt 2>&1 || { fail mkfs.f2fs; finish; }
# No background GC: its reads (by f2fs_gc-*) are real but have nothing to do with the replays,
# and under a slow TCG run it wakes up in the middle of them.
mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail mount; finish; }

echo $DEV > $R/dev.txt
echo 1 > $S/iostat_enable || fail iostat_enable
cat $S/readdir_ra > $R/readdir_ra.txt 2>&1
nodescope stream --plan > $R/plan.txt 2>&1
nodescope probe > $R/probe.txt 2>&1
echo $? > $R/probe.rc
# The tracepoints' formats as this kernel has them: the layouts the planner and the programs
# meet (tracer-user/tests/data/formats keeps copies).
mkdir -p $R/formats
for e in f2fs_submit_folio_bio f2fs_submit_page_bio f2fs_submit_read_bio f2fs_submit_folio_write \
    f2fs_submit_page_write f2fs_write_checkpoint f2fs_iostat; do
  [ -e $T/events/f2fs/$e/format ] && cp $T/events/f2fs/$e/format $R/formats/format_$e.txt
done
mark mounted

# The RFC's file set: 256 dirs x 64 small files, 32 zero-filled shaped files, a sentinel.
make_file_set
sync
mark created

cold
stream_start names && { sh /replay-names; stream_stop; }
cold
# With the device as its image: node reads split by node type (test/vm/src/check/node_types.rs).
stream_start glob --image /dev/$DEV && { sh /replay-glob; stream_stop; }
# Checkpoints: two small changes, each synced (F2FS mounts lazytime: the replays dirtied no inode).
stream_start sync && {
  echo one > /mnt/cp-1; sync
  echo two > /mnt/cp-2; sync
  stream_stop
}
# The fallback probes, on a part of the file set.
for v in $VARIANTS; do
  cold
  stream_start variant_$v --node-reads $v && { sh /replay-variant; stream_stop; }
done
# Access traces (issue 13, test/vm/src/accesses.rs): nodescope record --accesses over the RFC
# file-set replay; its node_access events against a kprobe_events hist trigger on the lookup
# function nodescope chose, armed before nodescope attaches and read after it has stopped. The
# recording stays in /results for the host's whatif on this disk's image. Defined here, before
# the arm64 run's own phases, which run it too (its lookups on BPF trampolines).
accesses_phase() {
  # Timed lookups (issue 51): --lookup-latency traces the lookups as --accesses does, each
  # with its time and outcome.
  nodescope stream --plan --lookup-latency > $R/accesses_plan.txt 2>&1
  fns=$(lookup_functions $R/accesses_plan.txt)
  [ -n "$fns" ] || { fail "accesses: no node lookup function (see accesses_plan.txt)"; return 1; }
  cold
  probe_calls nodescope_access common_type '' $fns ||
    { fail "kprobe_events: cannot count $fns"; return 1; }
  # F2FS's inode evictions counted by their own tracepoint's hist trigger, as the lookups are.
  echo 'hist:keys=common_type' > $T/events/f2fs/f2fs_evict_inode/trigger ||
    fail "hist trigger on f2fs:f2fs_evict_inode"
  nodescope record --lookup-latency -o $R/accesses.nsr > $R/accesses_record.out 2> $R/accesses_record.err &
  AP=$!
  wait_for $AP "record --accesses" "[ -s $R/accesses.nsr ]"
  mark accesses_start
  sh /replay-names
  # Every node page dropped (node_evict), then the last directories again: the trace whatif
  # replays on the host has pressure and reuse.
  cold
  sh /replay-tail
  # Two passes over the same inodes' xattrs at once (xattrpass forks), the inodes kept and
  # their node pages dropped (drop_caches 1): each lookup reads its inode's node page, and one
  # that finds it locked under the other pass's read waits for it (the waited outcome, issue 51).
  sync
  echo 1 > /proc/sys/vm/drop_caches
  # The page lock's slow path counted meanwhile: how often a task waited for a locked page.
  echo "p:nodescope_folio_lock __folio_lock" >> $T/kprobe_events &&
    echo 'hist:keys=common_pid' > $T/events/kprobes/nodescope_folio_lock/trigger ||
    fail "kprobe_events: cannot count __folio_lock"
  # Their reads throttled (cgroup v2 io.max, 100 reads a second) so that the other pass
  # arrives while one is in flight: unthrottled, a read under TCG ended before the other
  # process was even woken, and no lookup ever waited.
  grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts || mount -t cgroup2 cgroup2 /sys/fs/cgroup
  echo +io > /sys/fs/cgroup/cgroup.subtree_control &&
    mkdir -p /sys/fs/cgroup/xattrpass &&
    echo "$(cat /sys/block/$DEV/dev) riops=100" > /sys/fs/cgroup/xattrpass/io.max ||
    fail "io.max for the xattr passes"
  sh -c 'echo $$ > /sys/fs/cgroup/xattrpass/cgroup.procs && exec sh /xattr-tail' ||
    fail "xattrpass"
  cat $T/events/kprobes/nodescope_folio_lock/hist > $R/xattr_folio_lock_hist.txt
  echo '!hist:keys=common_pid' > $T/events/kprobes/nodescope_folio_lock/trigger
  echo '-:nodescope_folio_lock' >> $T/kprobe_events
  # Every unused inode evicted (drop_caches 2): inode_evict events, one per f2fs_evict_inode.
  sync
  echo 2 > /proc/sys/vm/drop_caches
  kill -INT $AP
  wait $AP
  echo $? > $R/accesses_record.rc
  probe_hists nodescope_access > $R/accesses_hist.txt
  probe_remove nodescope_access common_type
  cat $T/events/f2fs/f2fs_evict_inode/hist > $R/inode_evict_hist.txt
  echo '!hist:keys=common_type' > $T/events/f2fs/f2fs_evict_inode/trigger
  nodescope report --json $R/accesses.nsr > $R/accesses_report.json 2> $R/accesses_report.err
  mark accesses_done
}
# A run with phases of its own (the arm64 run: test/vm/guest/arm64.sh) ends with them.
[ -n "$OWN_PHASES" ] && { . $OWN_PHASES; finish; }
# A recording of the kernel source on part of the file set, for the host to report and export
# to Perfetto (the export's per-app counts must equal the report's, on real kernel events).
cold
nodescope record -o $R/variant.nsr > $R/record.out 2> $R/record.err &
RP=$!
wait_for $RP record "[ -s $R/variant.nsr ]"
mark record_start
sh /replay-variant
kill -INT $RP
wait $RP
echo $? > $R/record.rc
mark record_done
# The RFC probes on a real kernel function: restore -> f2fs_get_node_page at entry and
# convert -> its return (manifest /rfc-probes.toml), by fentry and fentry + fexit where the
# kernel has BPF trampolines (else kprobe and kretprobe), counted against a
# kprobe_events hist trigger on the same function that is armed before nodescope attaches and
# read after it has stopped.
# 6.16 removed f2fs_get_node_page: there the same probes go on f2fs_get_inode_folio (6.15's
# inode lookup, which the replay's opens call; the same first two arguments, sbi and nid).
cold
RFC_FN=f2fs_get_node_page
grep -qw f2fs_get_node_page /proc/kallsyms || RFC_FN=f2fs_get_inode_folio
sed "s/f2fs_get_node_page/$RFC_FN/" /rfc-probes.toml > /tmp/rfc-probes.toml
echo $RFC_FN > $R/rfc_function.txt
if probe_calls nodescope_check common_type '' $RFC_FN; then
  stream_start rfc --probes /tmp/rfc-probes.toml && { sh /replay-variant; stream_stop; }
  probe_hists nodescope_check > $R/rfc_hist.txt
  probe_remove nodescope_check common_type
else
  fail "kprobe_events: cannot set up the $RFC_FN counter"
fi
# Churn: CHURN short-lived processes (a subshell each), each reading the inode node block of
# a file of its own, cold: more processes than the kernel's counter map holds (8,192), so
# without pruning the later ones' reads would be lost to COUNT_FAILS. Two loops, one per vCPU.
# Opening the file is what reads its inode block: the subshell opens it and exits, with no
# exec (a `cat` each made this phase 100 s of the 6.12 run under TCG).
churn() {
  i=$1
  while [ $i -lt $CHURN ]; do
    ( : < /mnt/t/d-$((i / NFILES))/f-$((i % NFILES)) )
    i=$((i+2))
  done
}
cold
stream_start churn && {
  churn 0 & C0=$!
  churn 1 & C1=$!
  wait $C0 $C1
  stream_stop
}
# probe --discover (issue 17, test/vm/src/discover.rs): the kernel's own BTF and kallsyms
# make a manifest; it and the hand-written /discover-hand.toml are streamed side by side over
# the same replay, and the host wants equal counts per kind.
discover_phase() {
  ls /sys/kernel/btf > $R/discover_btf.txt 2>&1
  nodescope probe --discover -o $R/discovered.toml > $R/discover.txt 2> $R/discover.err ||
    { fail "probe --discover failed (see discover.err)"; return 1; }
  # What a person writes for this kernel: 6.16 renamed read_node_page to read_node_folio
  # (same arguments, folio->index where page->index was).
  READ_FN=read_node_page
  grep -qw read_node_page /proc/kallsyms || READ_FN=read_node_folio
  sed "s/read_node_page/$READ_FN/" /discover-hand.toml > /tmp/discover-hand.toml
  cold
  for m in hand gen; do
    f=/tmp/discover-hand.toml; [ $m = gen ] && f=$R/discovered.toml
    nodescope stream --json --window 1 --probes $f > $R/stream_discover_$m.jsonl \
      2> $R/stream_discover_$m.err &
    echo $! > $R/discover_$m.pid
  done
  for m in hand gen; do
    wait_for $(cat $R/discover_$m.pid) "discover stream $m" \
      "grep -q 'nodescope stream: ready' $R/stream_discover_$m.err 2>/dev/null"
  done
  snap discover_before
  mark discover_start
  sh /replay-variant
  snap discover_after
  for m in hand gen; do kill -INT $(cat $R/discover_$m.pid); done
  for m in hand gen; do wait $(cat $R/discover_$m.pid); echo $? > $R/stream_discover_$m.rc; done
  mark discover_done
}
discover_phase
# The daemon (issue 20, test/vm/src/daemon.rs): the kernel source in one headless process and
# a `stream --connect` client on its socket over one cold replay; the client's node reads must
# be iostat's, exactly, as a direct stream's are.
daemon_phase() {
  cold
  nodescope daemon --source bpf --window 1 --socket /daemon/daemon.sock > $R/daemon.out \
    2> $R/daemon.err &
  DP=$!
  wait_for $DP daemon "grep -q 'daemon: ready' $R/daemon.err 2>/dev/null" || return 1
  stream_start daemon --connect /daemon/daemon.sock || { kill -TERM $DP; wait $DP; return 1; }
  sh /replay-variant
  snap daemon_after
  kill -TERM $DP
  wait $DP
  echo $? > $R/daemon.rc
  wait $SP
  echo $? > $R/stream_daemon.rc
  mark daemon_done
}
daemon_phase
# A uid change without exec (test/vm/src/uidswitch.rs): one process reads a cold directory as
# root, changes its uid with a raw setresuid and reads another; each half must be counted under
# its own uid (the counter slots keep a uid until commit_creds says some task's changed).
uid_phase() {
  cold
  stream_start uid || return 1
  uidswitch $UID_SWITCH /proc/fs/f2fs/$DEV/iostat_info $R/iostat_uid_mid.txt /mnt/t/d-1 /mnt/t/d-2
  echo $? > $R/uidswitch.rc
  stream_stop
}
uid_phase
accesses_phase
# One access trace across unmounts (test/vm/src/remount.rs): the lookup program caches each
# CPU's device per f2fs_sb_info, and a new mount may be given the address a freed one had.
# Under one `record --accesses`: read on /mnt and unmount it; mount a second F2FS (a loop
# device), read on it and unmount it; mount /mnt again and read. A kprobe_events hist keyed
# on the lookup's sbi argument, read and cleared between the parts (when no F2FS is mounted),
# is the kernel's count of each part's lookups and says whether an address came back.
remount_part() {
  probe_hists nodescope_sbi > $R/remount_hist_$1.txt
  probe_clear nodescope_sbi sbi
}
remount_phase() {
  fns=$(lookup_functions $R/accesses_plan.txt)
  [ -n "$fns" ] || { fail "remount: no node lookup function"; return 1; }
  dd if=/dev/zero of=/tmp/second.img bs=1M count=0 seek=128 2> /dev/null
  mkfs.f2fs -f -l second /tmp/second.img > $R/remount_mkfs.txt 2>&1 || { fail "remount: mkfs.f2fs"; return 1; }
  LOOP=$(losetup -f) && losetup $LOOP /tmp/second.img || { fail "remount: losetup"; return 1; }
  echo $LOOP > $R/remount_loop.txt
  mkdir -p /second
  mount -t f2fs $LOOP /second || { fail "remount: mount $LOOP"; return 1; }
  for i in $(seq 1 $REMOUNT_FILES); do echo $i > /second/f-$i; done
  umount /second
  probe_calls nodescope_sbi sbi 'sbi=$arg1:x64' $fns ||
    { fail "kprobe_events: cannot key $fns on their sbi"; return 1; }
  cold
  nodescope record --accesses -o $R/remount.nsr > $R/remount_record.out 2> $R/remount_record.err &
  RMP=$!
  wait_for $RMP "record --accesses (remount)" "[ -s $R/remount.nsr ]"
  sh /replay-variant
  umount /mnt || fail "remount: umount /mnt"
  remount_part 1
  mount -t f2fs $LOOP /second || fail "remount: mount $LOOP again"
  cat /second/f-* > /dev/null
  umount /second || fail "remount: umount /second"
  remount_part 2
  mount -t f2fs -o background_gc=off /dev/$DEV /mnt || { fail "remount: mount /mnt again"; finish; }
  # A new mount starts with iostat off; the phases after this one read it.
  echo 1 > $S/iostat_enable || fail "remount: iostat_enable"
  sh /replay-variant
  kill -INT $RMP
  wait $RMP
  echo $? > $R/remount_record.rc
  remount_part 3
  probe_remove nodescope_sbi sbi
  losetup -d $LOOP
  rm -f /tmp/second.img
  nodescope report --json $R/remount.nsr > $R/remount_report.json 2> $R/remount_report.err
}
remount_phase
# Node types beyond inodes (test/vm/src/check/node_types.rs): a file with direct nodes and an
# indirect one, read cold under `stream --image /dev/$DEV`; the host knows its nodes from the
# disk's image. Written as runs of 32 blocks with 32-block holes between: a file written in
# one go is one extent, which the inode's largest-extent field maps whole, and reading it
# then reads no direct node at all (seen: 2 node reads for 16 MiB).
types_phase() {
  k=0
  while [ $k -lt $((TYPES_FILE_BLOCKS / 64)) ]; do
    dd if=/dev/zero of=/mnt/$TYPES_FILE bs=4096 seek=$((k * 64)) count=32 conv=notrunc 2> /dev/null
    k=$((k + 1))
  done
  sync
  cold
  stream_start types --image /dev/$DEV && { cat /mnt/$TYPES_FILE > /dev/null; stream_stop; }
}
types_phase
# Checkpoint anatomy (issue 19, test/vm/src/cp_anatomy.rs): each of seed 002's fsstress mixes
# under nodescope record, between snapshots of iostat and debugfs taken on a clean file system.
cp_anatomy_phase() {
  for mix in $CPANAT_MIXES; do
    rm -rf /mnt/fss; sync
    nodescope record -o $R/cpanat_$mix.nsr > $R/cpanat_$mix.out 2> $R/cpanat_$mix.err &
    CP=$!
    wait_for $CP "cp-anatomy $mix: record" "[ -s $R/cpanat_$mix.nsr ]"
    snap cpanat_${mix}_before
    mark cpanat_${mix}_start
    nodescope fsstress /mnt/fss --mix $mix $CPANAT_ARGS > $R/cpanat_$mix.fsstress 2>&1 ||
      fail "cp-anatomy $mix: fsstress failed"
    sync
    snap cpanat_${mix}_after
    kill -INT $CP
    wait $CP
    echo $? > $R/cpanat_$mix.rc
    mark cpanat_${mix}_done
  done
  rm -rf /mnt/fss; sync
}
cp_anatomy_phase
# The controller under real memory pressure. The RFC is not applied here, so nodescope tune
# steers a knob directory of its own (the RFC's defaults, 25 % and 1000 ms) on this kernel's
# PSI, windows an hour apart (none falls in this phase): only the PSI trigger it arms (root, no
# budget) can wake it to act. A tmpfs takes all but HEADROOM_MB of the available memory and the
# file set is read through what is left; the goal is low (TUNE_PSI_GOAL %) because reclaiming
# clean page cache stalls little, even here.
K=/knobs/$DEV
mkdir -p $K /hog
echo 25 > $K/node_compress_threshold
echo 1000 > $K/node_compress_interval
nodescope tune --sysfs-root /knobs --device $DEV --decision-period 3600 --poll 0.1 \
  --psi-goal $TUNE_PSI_GOAL \
  --audit $R/tune.jsonl 2> $R/tune.err &
TP=$!
wait_for $TP tune "grep -q '\"start\"' $R/tune.jsonl 2>/dev/null" 30
mark tune_started
cold
cp /proc/pressure/memory $R/psi_before.txt
mark pressure_start
mount -t tmpfs -o size=100% hog /hog
avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
dd if=/dev/zero of=/hog/fill bs=1M count=$((avail - HEADROOM_MB)) 2> $R/hog.txt
grep -E '^(MemAvailable|Shmem):' /proc/meminfo >> $R/hog.txt
mark hog_full
sh /replay-names
mark replay_1
sh /replay-names
cp /proc/pressure/memory $R/psi_after.txt
mark pressure_done
kill -TERM $TP
wait $TP
echo $? > $R/tune.rc
cat $K/node_compress_threshold $K/node_compress_interval > $R/knobs_after.txt
rm -f /hog/fill
umount /hog
umount /mnt || fail umount
finish
