#!/bin/sh
# nodescope vm-test, the variant modules' phase (test/vm/src/variants_phase.rs): runs as
# /init in Debian's stock 6.12 kernel and loads each variant module (Debian's F2FS reshaped like
# another kernel family's attach points: kmod/patches/6.12-variants) in turn. For each: its
# tracepoint formats and f2fs symbols as the kernel shows them, `nodescope probe --json`, and
# one stream (--accesses) over a small workload (cold reads, new files, a sync) between
# snapshots of iostat and debugfs, while kprobe_events hist triggers count the variant's node
# lookups and journal entries (armed before nodescope attaches, read after it stopped).
# Settings (/etc/vm-test.conf): NDIRS, NFILES, VARIANTS (short names), and per variant
# LOOKUPS_<n> (its lookup functions) and JOURNAL_<n> (the registers of `type` and `alloc`).
. /prelude.sh
. /etc/vm-test.conf
mark boot
mount_tracing
load_modules f2fs.ko
find_disks
mark modules_loaded

# arm NAME FUNCTION [FETCHARGS [FILTER]]: a kprobe event on FUNCTION with a hist trigger that
# counts its hits (those FILTER lets through).
arm() {
  echo "p:$1 $2 $3" >> $T/kprobe_events || { fail "$V: kprobe_events $2"; return 1; }
  echo "hist:keys=common_type${4:+ if $4}" > $T/events/kprobes/$1/trigger ||
    { fail "$V: hist trigger on $2"; return 1; }
}
# disarm NAME FILE [FILTER]: the hist into FILE, then the trigger and the event removed.
disarm() {
  cat $T/events/kprobes/$1/hist > $2
  echo "!hist:keys=common_type${3:+ if $3}" > $T/events/kprobes/$1/trigger
  echo "-:$1" >> $T/kprobe_events
}

variant() {
  V=$1
  VR=$R/$V
  mkdir -p $VR
  eval "lookups=\$LOOKUPS_$(echo $V | tr - _)"
  eval "set -- \$JOURNAL_$(echo $V | tr - _)"
  jfilter="jalloc != 0 && jtype <= 1"
  insmod /lib/modules/f2fs-$V.ko 2>> $VR/insmod.txt || { fail "$V: insmod"; return 1; }
  mark ${V}_loaded
  for e in f2fs_submit_page_bio f2fs_submit_folio_bio f2fs_submit_page_write \
           f2fs_submit_folio_write f2fs_write_checkpoint; do
    [ -e $T/events/f2fs/$e/format ] && cp $T/events/f2fs/$e/format $VR/$e.format
  done
  grep '\[f2fs\]' /proc/kallsyms |
    grep -E ' (read_node_[a-z_]*|f2fs_get_[a-z_]*node[a-z_]*|f2fs_get_inode[a-z_]*|f2fs_get_xnode[a-z_]*|f2fs_ra_node_page|f2fs_lookup_journal_in_cursum)(\.[a-z0-9.]*)?	' \
    > $VR/kallsyms.txt
  mkfs.f2fs -f -l vmtest /dev/$DEV > $VR/mkfs.txt 2>&1 || { fail "$V: mkfs.f2fs"; return 1; }
  # noatime: the cold reads dirty no inode, so the checkpoint after the new files has few
  # dirty NAT entries, and they go into the journal (hundreds would go to NAT blocks).
  mount -t f2fs -o background_gc=off,noatime /dev/$DEV /mnt 2>> $VR/mount.txt ||
    { fail "$V: mount"; return 1; }
  echo 1 > $S/iostat_enable || fail "$V: iostat_enable"
  nodescope probe --json > $VR/probe.json 2> $VR/probe.err || fail "$V: nodescope probe --json"
  nodescope stream --plan --accesses > $VR/plan.txt 2>&1
  make_small_files
  sync
  mark ${V}_created
  n=0
  for fn in $lookups; do arm nsv_lookup_$n $fn && n=$((n+1)); done
  arm nsv_journal f2fs_lookup_journal_in_cursum "jtype=$1:u32 jalloc=$2:u32" "$jfilter"
  cold
  # A cold read of every file (inode lookups, node reads), then new files and a sync (node
  # writes, a checkpoint, NAT entries into the journal).
  stream_start $V --accesses && {
    sh /replay-names
    i=0
    while [ $i -lt 8 ]; do echo "$V $i" > /mnt/new-$i; i=$((i+1)); done
    sync
    stream_stop
  }
  n=0
  for fn in $lookups; do disarm nsv_lookup_$n $VR/lookup_$fn.hist; n=$((n+1)); done
  disarm nsv_journal $VR/journal.hist "$jfilter"
  # The node-read kprobe fallback (read_node_page or its successor), where the variant renames
  # it: a second cold read under `--node-reads kprobe`.
  if echo " $KPROBE_READS " | grep -q " $V "; then
    cold
    stream_start ${V}_kprobe --node-reads kprobe && { sh /replay-names; stream_stop; }
  fi
  umount /mnt || fail "$V: umount"
  rmmod f2fs || { fail "$V: rmmod"; return 1; }
  mark ${V}_unloaded
}

for v in $VARIANTS; do variant $v || break; done
dmesg > $R/dmesg.txt
finish
