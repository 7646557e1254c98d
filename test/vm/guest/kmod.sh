#!/bin/sh
# nodescope vm-test, the reference module's phase (test/vm/src/kmod_phase.rs): runs as /init. The
# stock build of Debian's F2FS makes the file set; the patched build (our reconstruction of the
# RFC's compressed node cache) then runs the cover letter's two measurements and every failure
# path, and the files are checked against their checksums before and after fsck and a remount.
# Counters come from the module's own <debugfs>/f2fs/<dev>/node_cache; settings:
# /etc/vm-test.conf. The host reads /results (kmod.rs).
. /prelude.sh
. /etc/vm-test.conf
mark boot
mkdir -p /sys/kernel/debug
mount -t debugfs debugfs /sys/kernel/debug
hold_static_keys
load_modules f2fs.ko
find_disks
D=/sys/kernel/debug/f2fs/$DEV

# Inode checksums on, so that restore's inode-checksum validation has something to check.
mkfs.f2fs -f -l vmtest -O extra_attr,inode_checksum /dev/$DEV > $R/mkfs.txt 2>&1 ||
  { fail mkfs.f2fs; finish; }

# The stock build: no knobs; it writes the file set the patched build then reads.
insmod /lib/modules/f2fs-stock.ko 2>> $R/insmod.txt || { fail "insmod stock"; finish; }
mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail "mount stock"; finish; }
[ -e $S/node_compress_threshold ] && echo present > $R/stock_knobs.txt || echo absent > $R/stock_knobs.txt
mark stock_mounted
make_file_set
sync
# Checksums of every file as written, the reference of every later check.
sh /sums > /sums.md5
umount /mnt
rmmod f2fs || { fail "rmmod stock"; finish; }
mark created

insmod /lib/modules/f2fs.ko 2>> $R/insmod.txt || { fail "insmod patched"; finish; }
mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail "mount patched"; finish; }
echo 1 > $S/iostat_enable || fail iostat_enable
mark mounted

# The knobs: present, defaults, and the range checks (the write must fail).
{
  echo "threshold_default $(cat $S/node_compress_threshold)"
  echo "interval_default $(cat $S/node_compress_interval)"
  for v in 101 1000 -1 abc; do
    echo $v > $S/node_compress_threshold 2>/dev/null && echo "threshold_accepted $v"
  done
  for v in 99 30001 0 abc; do
    echo $v > $S/node_compress_interval 2>/dev/null && echo "interval_accepted $v"
  done
  for v in 100 0; do
    echo $v > $S/node_compress_threshold || echo "threshold_refused $v"
  done
  for v in 100 30000 1000; do
    echo $v > $S/node_compress_interval || echo "interval_refused $v"
  done
  echo "threshold_final $(cat $S/node_compress_threshold)"
  echo "interval_final $(cat $S/node_compress_interval)"
} > $R/knobs.txt 2>&1

# A write of a knob's current value changes nothing (issue 50): both knobs rewritten five times
# a period for about six periods, the worker must still pass about once a period (before, every
# interval write restarted the period, and a controller writing often starved the worker).
echo $THRESHOLD > $S/node_compress_threshold; echo 1000 > $S/node_compress_interval
sleep 1.5
passes() { grep '^worker_passes ' $D/node_cache | cut -d' ' -f2; }
p0=$(passes); t0=$(cut -d' ' -f1 /proc/uptime)
n=0
while [ $n -lt 30 ]; do
  echo 1000 > $S/node_compress_interval; echo $THRESHOLD > $S/node_compress_threshold
  sleep 0.2; n=$((n+1))
done
echo "passes $p0 $(passes) seconds $t0 $(cut -d' ' -f1 /proc/uptime) writes $n" > $R/knob_rewrites.txt
echo 0 > $S/node_compress_threshold

# Start-up discovery (issue 32): with no --probes, on a kernel whose device has the knobs,
# stream finds the RFC's probes in BTF and kallsyms and says so; the second start reads them
# from the state directory's cache. probe shows what the sources would use.
mkdir -p /run
for n in 1 2; do
  nodescope stream --json --duration 1 > $R/autodiscover_$n.json 2> $R/autodiscover_$n.err
  echo $? > $R/autodiscover_$n.rc
done
nodescope probe > $R/autodiscover_probe.txt 2>&1
cp /run/nodescope/probes-*.toml $R/discovered.toml 2>/dev/null
mark autodiscover_done

# snap NAME: the module's counters and iostat's node reads now.
snap() {
  cat $D/node_cache > $R/nc_$1.txt
  cp /proc/fs/f2fs/$DEV/iostat_info $R/iostat_$1.txt
}
# cold: page cache and every shrinker, so the node cache starts empty (the shrinker reclaims it).
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; echo 3 > /proc/sys/vm/drop_caches; }
# settle: wait until the worker stops converting (two passes in a row without a conversion).
# Second chances count too: a first pass over a just-read cache only hands those out.
settle() {
  last=-1; still=0; n=0
  while [ $still -lt 3 ] && [ $n -lt $1 ]; do
    sleep 1
    now=$(grep -E '^(conversions|second_chance_worker) ' $D/node_cache | cut -d' ' -f2 | tr '\n' ' ')
    if [ "$now" = "$last" ]; then still=$((still+1)); else still=0; fi
    last=$now; n=$((n+1))
  done
}
threshold() { echo $1 > $S/node_compress_threshold || fail "threshold $1"; }
interval() { echo $1 > $S/node_compress_interval || fail "interval $1"; }

# Every event exact (issue 32): one stream, with the probes it discovers, over the three
# measurements below; its cumulative counts against the module's over the same span (the
# snaps exact_start and exact_end, taken while the stream runs).
# It also serves OpenMetrics, scraped at the span's end: the counters must be the stream's.
ip link set lo up
nodescope stream --json --openmetrics 127.0.0.1:9464 > $R/exact.json 2> $R/exact.err &
EXACT=$!
wait_for $EXACT "the exact stream" "grep -q 'nodescope stream: ready' $R/exact.err" 60
# Beside it over the same span (issue 30): two of the module's functions, hooked by BPF
# trampolines, whose counts must be the module's too (kmod_phase/functions.rs).
nodescope stream --json --probes /etc/rfc-functions.toml > $R/functions.json 2> $R/functions.err &
FUNCS=$!
wait_for $FUNCS "the functions stream" "grep -q 'nodescope stream: ready' $R/functions.err" 60
snap exact_start

# 1. Equal node count: the whole file set in the cache, all raw, then compressed.
threshold 0; interval 100; echo 0 > $D/node_cache_budget
cold
snap equal_start
sh /replay-all
snap equal_off
threshold $THRESHOLD
settle 120
snap equal_on
mark equal_done

# 2. About 3 MiB of attributed memory: the file set populates the cache under the budget
# (compression off, then on at the RFC's threshold), then one replay of the 16,384 small files
# in manifest order (a fixed shuffle: kmod_phase.rs says why), the budget held throughout. The
# worker runs every 100 ms, from the population to the end: at 1000 ms it converts at most 256
# blocks a second, and a cat replay brings in 16,676 nodes in about ten seconds here, so the
# budget would hold mostly raw entries. One interval for the whole run, so that one what-if
# point is its prediction. Before the replay the page cache is dropped (not the node cache):
# every file's read then looks up its inode.
for mode in off on; do
  threshold 0; interval 100
  cold
  # Recorded from the emptied cache on, for `report --compare` (issue 32): the cover letter's
  # off/on table from two recordings, every entry's arrival and departure seen.
  # Both with their lookups timed (issue 51: report --compare's latency rows); the off run's
  # access trace is also the what-if's below.
  nodescope record -o $R/budget_$mode.nsr --lookup-latency > /dev/null 2> $R/record_$mode.err &
  REC=$!
  wait_for $REC "record $mode" "grep -q 'nodescope record: ready' $R/record_$mode.err" 60
  snap budget_${mode}_start
  echo $BUDGET > $D/node_cache_budget
  [ $mode = on ] && threshold $THRESHOLD
  sh /replay-all
  [ $mode = on ] && settle 60
  sync; echo 1 > /proc/sys/vm/drop_caches
  snap budget_${mode}_before
  sh /replay-manifest
  snap budget_${mode}_after
  # The recording's span ends as the exact stream's does: the worker stopped and a pass's time
  # to finish, so that its report can be held to the module's counters (kmod_phase/recorded.rs).
  threshold 0
  sleep 2
  snap budget_${mode}_end
  kill -INT $REC
  wait $REC
  echo $? > $R/record_$mode.rc
  nodescope report --json $R/budget_$mode.nsr > $R/report_$mode.json 2> $R/report_$mode.err
  mark budget_${mode}_done
done
nodescope report --compare $R/budget_off.nsr $R/budget_on.nsr > $R/compare.txt 2>&1
nodescope report --compare $R/budget_off.nsr $R/budget_on.nsr --json > $R/compare.json 2>> $R/compare.txt
# The what-if (issue 32): the off run's trace replayed at the on run's settings and budget,
# against what the module then did (its node reads are a check, kmod_phase/whatif.rs). No
# --device: whatif finds the recording's device from its events' number (issue 31).
timeout 600 nodescope whatif $R/budget_off.nsr --budget $((BUDGET / 1024))KiB \
  --threshold $THRESHOLD --interval 100 --json > $R/whatif.json 2> $R/whatif.err
echo $? > $R/whatif.rc
echo 0 > $D/node_cache_budget

# 2b. The simulator's procedure (sim/src/scenario/vm_replay.rs), for its figures beside the
# module's: the cache populated with no budget and left to settle (every conversion done), the
# page cache dropped, then the simulator's budget of 3 MiB imposed on the full cache (the
# sentinel's read is the insert that holds it: the sim squeezes at this point), released, and
# the 16,384 small files read once in creation order. The replay's misses then enter the cache
# without displacing what the budget kept.
for mode in off on; do
  threshold 0; interval 100
  cold
  [ $mode = on ] && threshold $THRESHOLD
  sh /replay-small
  cat /mnt/shaped/* > /dev/null
  [ $mode = on ] && settle 120
  sync; echo 1 > /proc/sys/vm/drop_caches
  snap released_${mode}_full
  echo $SIM_BUDGET > $D/node_cache_budget
  cat /mnt/sentinel > /dev/null
  echo 0 > $D/node_cache_budget
  snap released_${mode}_before
  sh /replay-small
  snap released_${mode}_after
  mark released_${mode}_done
done

# Non-inode nodes restore (issue 50): a sparse file whose one block (3000) takes an inode, an
# indirect and a direct node, all nearly empty. Read from disk into the cache (a read used to
# set the entry's node type from the page before its data was there), converted, then read
# through restores: none may fail.
threshold 0; interval 100
dd if=/dev/urandom of=/mnt/sparse bs=4k count=1 seek=3000 2> $R/sparse.txt || fail "sparse file"
sync
cold
cat /mnt/sparse > /dev/null
threshold $THRESHOLD
settle 60
threshold 0
echo 1 > /proc/sys/vm/drop_caches
snap sparse_before
cat /mnt/sparse > /dev/null || fail "sparse read"
snap sparse_after
rm /mnt/sparse
mark sparse_done

# 3. Every failure path. Conversion faults tamper with the block a conversion compresses
# (its CRC then matches, the node checks do not); restore faults with the stored object.
cold
sh /replay-all
for f in footer inode_checksum node_type; do
  echo "$f 1" > $D/node_cache_fault || fail "arm $f"
  threshold $THRESHOLD
  n=0
  until grep -q '^none' $D/node_cache_fault || [ $n -gt 100 ]; do sleep 0.2; n=$((n+1)); done
  threshold 0
done
threshold $THRESHOLD
settle 120
snap faults_converted
# A restore of each kind: drop the page cache only (data pages, not the node cache), then
# read one file of a directory, whose inode block is compressed now.
d=0
for f in slot_size payload_len payload truncate crc; do
  echo 1 > /proc/sys/vm/drop_caches
  echo "$f 1" > $D/node_cache_fault || fail "arm $f"
  cat /mnt/t/d-$d/f-0 > /dev/null || fail "read after $f fault"
  d=$((d+1))
done
# nomem: the raw buffer cannot be had; the lookup fails, the compressed copy stays, a retry
# restores it. Files are read until the fault is taken; each read's exit code and the two
# counters after it go to nomem_trace.txt.
echo 1 > /proc/sys/vm/drop_caches
echo "nomem 1" > $D/node_cache_fault || fail "arm nomem"
echo "armed $(grep -E '^(restores|restore_nomem|forgets|inserts|raw_hits) ' $D/node_cache | tr '\n' ' ') $(grep 'fs node' /proc/fs/f2fs/$DEV/iostat_info | head -1)" >> $R/nomem_trace.txt
j=1; failed=
while [ $j -lt $NFILES ] && grep -q '^nomem' $D/node_cache_fault; do
  f=/mnt/t/d-$d/f-$j
  cat $f > /dev/null 2>> $R/nomem_read.txt
  rc=$?
  [ $rc = 0 ] || failed=$f
  echo "$f rc=$rc $(grep -E '^(restores|restore_nomem|forgets|inserts|raw_hits) ' $D/node_cache | tr '\n' ' ') $(grep 'fs node' /proc/fs/f2fs/$DEV/iostat_info | head -1)" >> $R/nomem_trace.txt
  j=$((j+1))
done
echo "${failed:-none}" > $R/nomem_failed.txt
grep '^restores ' $D/node_cache > $R/nomem_restores_before.txt
if [ -n "$failed" ]; then
  cat $failed > /dev/null 2>> $R/nomem_read.txt && echo ok > $R/nomem_retry.txt || echo failed > $R/nomem_retry.txt
else
  echo "not needed" > $R/nomem_retry.txt
fi
grep '^restores ' $D/node_cache > $R/nomem_restores_after.txt
# Every directory listed (a directory's inode block holds its inline dentries) and every file
# against its checksum, read through restores (conversion faults included).
echo 1 > /proc/sys/vm/drop_caches
ls -laR /mnt > $R/ls_mounted.txt 2>&1 || fail "ls -R"
md5sum -c /sums.md5 > $R/md5_mounted.txt 2>&1 && echo ok > $R/files_mounted.txt || echo bad > $R/files_mounted.txt
snap faults_done
mark faults_done
# The exact stream's span ends: the worker off and a pass's time to finish, so that nothing
# happens between the last snap and the stream's stop.
threshold 0
sleep 2
snap exact_end
wget -q -O $R/metrics.txt http://127.0.0.1:9464/metrics || fail "scraping /metrics"
kill -TERM $EXACT $FUNCS
wait $EXACT
echo $? > $R/exact.rc
wait $FUNCS
echo $? > $R/functions.rc

# 4. The controller on the module's real knobs (issue 32), on this kernel's PSI: a tmpfs takes
# all but HEADROOM_MB of the available memory and the file set is read through what is left,
# as the stock kernels' VM test does with a knob directory of its own. Windows an hour apart:
# only the PSI trigger wakes it to act. Then SIGTERM restores; someone else's write stops it
# and is left alone; after SIGKILL `tune --restore` puts the originals back.
tune_start() {
  nodescope tune --device $DEV --decision-period $2 --poll 0.1 --psi-goal $TUNE_PSI_GOAL \
    --audit $R/$1.jsonl 2> $R/$1.err &
  TP=$!
  wait_for $TP $1 "grep -q '\"start\"' $R/$1.jsonl 2>/dev/null" 30
}
knobs_now() { echo "$(cat $S/node_compress_threshold) $(cat $S/node_compress_interval)"; }
threshold $THRESHOLD; interval $INTERVAL
knobs_now > $R/knobs_before_tune.txt
tune_start tune 3600
mark tune_started
cold
cp /proc/pressure/memory $R/psi_before.txt
mkdir -p /hog
mount -t tmpfs -o size=100% hog /hog
avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
dd if=/dev/zero of=/hog/fill bs=1M count=$((avail - HEADROOM_MB)) 2> $R/hog.txt
grep -E '^(MemAvailable|Shmem):' /proc/meminfo >> $R/hog.txt
sh /replay-all
knobs_now > $R/knobs_under_pressure.txt
cp /proc/pressure/memory $R/psi_after.txt
kill -TERM $TP
wait $TP
echo $? > $R/tune.rc
knobs_now | tr ' ' '\n' > $R/knobs_after.txt
# Someone else's write: the next window sees it, stops tuning and leaves it.
tune_start tune_external 2
echo 40 > $S/node_compress_threshold
n=0
while kill -0 $TP 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done
kill -0 $TP 2>/dev/null && { fail "tune did not stop after an external write"; kill -TERM $TP; }
wait $TP
echo $? > $R/tune_external.rc
knobs_now > $R/knobs_after_external.txt
# SIGKILL after a step under pressure; then tune --restore.
threshold $THRESHOLD
tune_start tune_kill 3600
cold
sh /replay-all
n=0
until grep -q '"decision"' $R/tune_kill.jsonl || [ $n -gt 600 ]; do sleep 0.1; n=$((n+1)); done
kill -KILL $TP
wait $TP
knobs_now > $R/knobs_after_kill.txt
# The same kill is recovered both ways: what it left (its claim's state file, the knobs as it
# left them) is kept, `tune --restore` puts the originals back, then the leftovers are put back
# as they were and the next `tune` must restore the originals at its start.
mkdir -p /tmp/left && cp /run/nodescope/*.state /tmp/left/
nodescope tune --restore --device $DEV > $R/tune_restore.txt 2>&1
echo $? > $R/tune_restore.rc
knobs_now > $R/knobs_after_restore.txt
cp /tmp/left/*.state /run/nodescope/
set -- $(cat $R/knobs_after_kill.txt); threshold $1; interval $2
tune_start tune_next 3600
knobs_now > $R/knobs_after_next.txt
kill -TERM $TP
wait $TP
echo $? > $R/tune_next.rc
knobs_now > $R/knobs_after_next_term.txt
rm -f /hog/fill
mark tune_done

# 4b. Static settings against the controller (issue 32, point 4), on one workload: the cache
# emptied, a hog of $ARRIVING_MB arrives on top of a tmpfs that leaves $GRID_HEADROOM_MB free
# (measured with the tune phase's 40 MB: the shrinker then drains the compressed queues too and
# no setting differs), and the file set is read twice (the second pass is served by what the
# first left). The module's counters and iostat around each run, attributed memory sampled
# every 0.5 s. The controller is `nodescope daemon --tune` from the RFC's settings on this
# kernel's PSI with the tune phase's goal; it and `top` start before the hog arrives (their
# eBPF maps need memory the hog would not leave).
rm -f /hog/fill
cold
avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
base_mb=$((avail - GRID_HEADROOM_MB - ARRIVING_MB))
dd if=/dev/zero of=/hog/fill bs=1M count=$base_mb 2> $R/grid_hog.txt
grep -E '^(MemAvailable|Shmem):' /proc/meminfo >> $R/grid_hog.txt
sample_memory() {
  while :; do
    read up idle < /proc/uptime
    echo "$up $(grep '^attributed_bytes ' $D/node_cache | cut -d' ' -f2)"
    sleep 0.5
  done
}
# top in tmux (issue 32, point 6): `nodescope top` with no flags during one static run, its
# screen captured after each of the two passes and after one more pass (top_restores).
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
export TERM=xterm-256color
top_start() {
  tmux -S /tmp/top.sock new-session -d -x 140 -y 45 \
    "nodescope top 2> $R/top.err; echo \$? > $R/top.rc" 2>> $R/tmux.err || fail "tmux new-session"
  wait_for $$ top "[ -e $R/top.rc ] || tmux -S /tmp/top.sock capture-pane -p | grep -q 'source bpf'" 60
}
top_capture() { tmux -S /tmp/top.sock capture-pane -p > $R/top_screen_$1.txt 2>> $R/tmux.err; }
# After the run's end snap, with the arriving hog gone: the cache settles and one more pass
# reads the file set, a further chance for the restores panel to have a latency to show (under
# the grid's pressure a run restores a few entries, in the 00:19 run of 2026-12-04 ten, and a CI
# run once none; the extra pass then restored three).
top_restores() {
  settle 60
  sh /replay-all
  top_capture 3
}
top_stop() {
  tmux -S /tmp/top.sock send-keys q
  n=0
  until [ -e $R/top.rc ] || [ $n -gt 100 ]; do sleep 0.1; n=$((n+1)); done
  tmux -S /tmp/top.sock kill-server 2>/dev/null
}
grid_run() {
  sample_memory > $R/grid_$1_memory.txt &
  SP=$!
  snap grid_$1_start
  dd if=/dev/zero of=/hog/fill bs=1M seek=$base_mb count=$ARRIVING_MB conv=notrunc 2>> $R/grid_hog.txt
  sh /replay-all
  [ -n "$2" ] && top_capture 1
  sh /replay-all
  [ -n "$2" ] && top_capture 2
  snap grid_$1_end
  kill $SP
  wait $SP 2>/dev/null
  truncate -s $((base_mb * 1048576)) /hog/fill
}
for point in $GRID; do
  t=${point%/*}; i=${point#*/}
  threshold $t; interval $i
  cold
  top=; [ $point = $TOP_AT ] && { top=1; top_start; }
  grid_run static_${t}_$i $top
  [ -n "$top" ] && { top_restores; top_stop; }
done
threshold $THRESHOLD; interval $INTERVAL
cold
knobs_now > $R/knobs_before_daemon.txt
nodescope daemon --tune --psi-goal $TUNE_PSI_GOAL --audit $R/daemon_tune.jsonl \
  > $R/daemon.out 2> $R/daemon.err &
DP=$!
wait_for $DP "daemon --tune" "grep -q '\"start\"' $R/daemon_tune.jsonl 2>/dev/null" 60
grid_run controller
knobs_now > $R/knobs_daemon_end.txt
kill -TERM $DP
wait $DP
echo $? > $R/daemon_tune.rc
knobs_now > $R/knobs_after_daemon.txt
rm -f /hog/fill
umount /hog
mark grid_done

# 4c. A memory cgroup (issue 50): the file set read inside a cgroup whose memory.max (MEMCG_MB)
# is below the cache's size (compression off: about 65 MiB of raw node pages, charged to the
# cgroup that read them). F2FS's shrinker is not memcg-aware, so the cgroup's reclaim never
# calls it; what the module does then, and whether the cgroup runs out of memory, is recorded.
mkdir -p /sys/fs/cgroup
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>> $R/memcg.txt
echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2>> $R/memcg.txt
mkdir -p /sys/fs/cgroup/nc
echo $((MEMCG_MB * 1048576)) > /sys/fs/cgroup/nc/memory.max 2>> $R/memcg.txt
threshold 0
cold
snap memcg_start
sh -c 'echo $$ > /sys/fs/cgroup/nc/cgroup.procs && exec sh /replay-all' > /dev/null 2> $R/memcg_replay.err
echo $? > $R/memcg_replay.rc
snap memcg_end
cat /sys/fs/cgroup/nc/memory.events > $R/memcg_events.txt 2>> $R/memcg.txt
echo "current $(cat /sys/fs/cgroup/nc/memory.current) peak $(cat /sys/fs/cgroup/nc/memory.peak 2>/dev/null)" >> $R/memcg.txt
grep -E '^(anon|file|file_mapped|active_file|inactive_file|unevictable|slab) ' /sys/fs/cgroup/nc/memory.stat >> $R/memcg.txt
mark memcg_done

# 5. Unmount, fsck, remount, and the checksums once more, from disk. The unmounts race two
# readers (issue 50): the F2FS status file (its node cache section) and the counters file, each
# read in a loop; after the checksums, UNMOUNT_CYCLES more mounts, each with the worker on and
# the directories listed, unmounted under the same readers. dmesg must then show no oops.
reader() {
  ( n=0; trap "echo \$n > $R/reads_$1.txt; exit 0" TERM
    while :; do cat $2 > /dev/null 2>&1 && n=$((n+1)); done ) &
}
readers_start() {
  reader status /sys/kernel/debug/f2fs/status; RD1=$!
  reader counters $D/node_cache; RD2=$!
}
readers_stop() { kill -TERM $RD1 $RD2; wait $RD1 $RD2; }
threshold 0
readers_start
sleep 1
umount /mnt || fail umount
readers_stop
fsck.f2fs -f /dev/$DEV > $R/fsck.txt 2>&1
echo $? > $R/fsck.rc
mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail remount; finish; }
md5sum -c /sums.md5 > $R/md5_remounted.txt 2>&1 && echo ok > $R/files_remounted.txt || echo bad > $R/files_remounted.txt
umount /mnt
cycle=0
readers_start
while [ $cycle -lt $UNMOUNT_CYCLES ]; do
  mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail "mount cycle $cycle"; break; }
  threshold $THRESHOLD; interval 100
  ls -R /mnt > /dev/null
  sleep 0.3
  umount /mnt || { fail "umount cycle $cycle"; break; }
  cycle=$((cycle+1))
done
readers_stop
echo $cycle > $R/unmount_cycles.txt
rmmod f2fs 2>> $R/insmod.txt && echo ok > $R/rmmod.txt || echo failed > $R/rmmod.txt
dmesg > $R/dmesg.txt
mark done
finish
