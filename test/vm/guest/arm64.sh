# nodescope vm-test, the arm64 run's own phases (test/vm/src/arm64.rs): sourced by guest.sh
# (OWN_PHASES) after the names, glob, sync and fallback phases, with its functions and $R, $DEV.
# Android's conventions hold here: tracefs only (at $T), /data/system/packages.list, app uids.

# Start `nodescope record -o $R/$1.nsr` (more arguments go to nodescope); like the x86 record
# phase, it counts once its file has a header.
record_start() {
  RN=$1; shift
  nodescope record -o $R/$RN.nsr "$@" > $R/record_$RN.out 2> $R/record_$RN.err &
  RP=$!
  wait_for $RP "record $RN" "[ -s $R/$RN.nsr ]"
}

record_stop() {
  kill -INT $RP
  wait $RP
  echo $? > $R/record_$RN.rc
}

# Two apps' readers, as Android runs them: com.example.reader as uid 10123 (user 0), then the
# same package for user 10 (uid 1010123), each over 16 cold directories of its own. The stream
# and a recording watch both; iostat is copied between them (apps_mid).
apps_phase() {
  cold
  record_start apps || return 1
  stream_start apps || { record_stop; return 1; }
  su u0_a123 -c 'sh /replay-app-0' 2>> $R/apps_su.err || fail "su u0_a123 failed"
  snap apps_mid
  su u10_a123 -c 'sh /replay-app-1' 2>> $R/apps_su.err || fail "su u10_a123 failed"
  stream_stop
  record_stop
}

# The RFC probe's nid argument: nodescope's kprobe on f2fs_get_node_page (restore, its nid from
# arg1, which the object built for aarch64 reads from x1) and its kretprobe (convert, the
# entry's nid), recorded, against a kprobe_events hist trigger keyed on x1, armed before
# nodescope attaches and read after it stopped.
rfc_nid_phase() {
  cold
  echo 'p:nodescope_nid f2fs_get_node_page nid=%x1:u32' >> $T/kprobe_events ||
    { fail "kprobe_events: cannot add the nid probe"; return 1; }
  echo 'hist:keys=nid:size=8192' > $T/events/kprobes/nodescope_nid/trigger ||
    { fail "kprobe_events: cannot add the nid hist trigger"; return 1; }
  mark rfc_start
  record_start rfc --probes /rfc-probes.toml && { sh /replay-variant; record_stop; }
  mark rfc_done
  cat $T/events/kprobes/nodescope_nid/hist > $R/rfc_nid_hist.txt
  echo '!hist:keys=nid:size=8192' > $T/events/kprobes/nodescope_nid/trigger
  echo '-:nodescope_nid' >> $T/kprobe_events
}

apps_phase
rfc_nid_phase
# guest.sh's: every node lookup by the lookup program, on arm64's BPF trampolines (6.0+).
accesses_phase
umount /mnt || fail umount
