use std::os::unix::fs::{FileExt as _, MetadataExt as _};

use anyhow::anyhow;
use aya::{maps::RingBuf, programs::KProbe};
use tracer_common::{Event, EventKind};

use super::*;

/// The 6.18 format of the eviction tracepoint (this machine's), as tracefs prints it.
const EVICT_FORMAT: &str = "name: mm_filemap_delete_from_page_cache
ID: 601
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;
\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;
\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;

print fmt: \"dev %d:%d ino %lx\", REC->s_dev, REC->s_dev, REC->i_ino
";

const OFFSETS: StructOffsets = StructOffsets {
    sbi_sb: 0,
    sb_s_dev: 16,
    sbi_node_ino: 1240,
};

/// The 6.1 kernel's f2fs symbols (shared/reference/kallsyms_f2fs.txt), the lookup part.
const KALLSYMS_6_1: &str = "\
ffffffffc063daf0 t __get_node_page.part.0\t[f2fs]
ffffffffc063de10 t __get_node_page\t[f2fs]
ffffffffc063ee60 t f2fs_get_node_page_ra\t[f2fs]
ffffffffc063edf0 t f2fs_get_node_page\t[f2fs]
";

#[test]
fn the_lookup_wrapper_is_chosen_with_btf_offsets_and_format_offsets() {
    let plan = plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(plan.lookup_functions, ["f2fs_get_node_page"]);
    assert_eq!(
        plan.evict_tracepoint.as_deref(),
        Some("filemap:mm_filemap_delete_from_page_cache")
    );
    assert!(plan.missing.is_empty(), "{:?}", plan.missing);
    let expected = AccessLayout {
        sbi_sb: 0,
        sb_s_dev: 16,
        sbi_node_ino: 1240,
        evict_ino: 16,
        evict_index: 24,
        evict_dev: 32,
        cache_device: 0,
        time_lookups: 0,
        ..AccessLayout::default()
    };
    assert_eq!(plan.layout, expected);
    assert_eq!(
        plan.render(),
        "node_access  kprobe f2fs_get_node_page\n\
         node_evict   tracepoint filemap:mm_filemap_delete_from_page_cache\n\
         inode_evict  not available\n\
         shrinker     not available\n"
    );
}

/// F2FS's `f2fs__inode` tracepoint class as its TP_STRUCT__entry lays it out on a 64-bit
/// kernel (dev_t dev, ino_t ino, ino_t pino, umode_t mode, loff_t size, unsigned int nlink,
/// blkcnt_t blocks, __u8 advise), as tracefs prints it for `f2fs_evict_inode`.
const INODE_EVICT_FORMAT: &str = "name: f2fs_evict_inode
ID: 1450
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;
\tfield:ino_t pino;\toffset:24;\tsize:8;\tsigned:0;
\tfield:umode_t mode;\toffset:32;\tsize:2;\tsigned:0;
\tfield:loff_t size;\toffset:40;\tsize:8;\tsigned:1;
\tfield:unsigned int nlink;\toffset:48;\tsize:4;\tsigned:0;
\tfield:blkcnt_t blocks;\toffset:56;\tsize:8;\tsigned:0;
\tfield:__u8 advise;\toffset:64;\tsize:1;\tsigned:0;

print fmt: \"dev = (%d,%d), ino = %lu\", REC->dev, REC->dev, REC->ino
";

/// Inode evictions: the offsets from F2FS's format file, the line in the plan; refused with
/// the reason when lookups are not traced (the devices come from them) or the format lacks a
/// field, and the rest of the plan kept.
#[test]
fn inode_evictions_take_their_offsets_from_f2fs_format_file() {
    let base = || plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    let with = with_inode_evictions(base(), Ok(INODE_EVICT_FORMAT.into()));
    assert_eq!(
        with.inode_evict_tracepoint.as_deref(),
        Some("f2fs:f2fs_evict_inode")
    );
    assert_eq!(
        (with.layout.inode_evict_dev, with.layout.inode_evict_ino),
        (8, 16)
    );
    assert!(with.missing.is_empty(), "{:?}", with.missing);
    assert!(with
        .render()
        .contains("\ninode_evict  tracepoint f2fs:f2fs_evict_inode\n"));

    let no_ino = INODE_EVICT_FORMAT.replace("ino_t ino;", "ino_t inode;");
    let without = with_inode_evictions(base(), Ok(no_ino));
    assert_eq!(without.inode_evict_tracepoint, None);
    assert_eq!(
        without.missing,
        ["inode_evict: f2fs_evict_inode has no field `ino`"]
    );
    assert_eq!(without.lookup_functions, ["f2fs_get_node_page"]);

    let absent = with_inode_evictions(base(), Err(anyhow!("reading .../format: not found")));
    assert_eq!(
        absent.missing,
        ["inode_evict: reading .../format: not found"]
    );

    let no_lookups = with_inode_evictions(
        plan("", true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())),
        Ok(INODE_EVICT_FORMAT.into()),
    );
    assert_eq!(no_lookups.inode_evict_tracepoint, None);
    assert!(no_lookups
        .missing
        .contains(&"inode_evict: the devices are learnt from node lookups".to_string()));
}

/// 6.12's `vmscan:mm_shrink_slab_start` (the same on 6.1 and 6.18), as tracefs prints it.
const SHRINK_SLAB_START_FORMAT: &str = "name: mm_shrink_slab_start
ID: 631
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:struct shrinker * shr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * shrink;\toffset:16;\tsize:8;\tsigned:0;
\tfield:int nid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long nr_objects_to_shrink;\toffset:32;\tsize:8;\tsigned:1;
\tfield:unsigned long gfp_flags;\toffset:40;\tsize:8;\tsigned:0;
\tfield:unsigned long cache_items;\toffset:48;\tsize:8;\tsigned:0;
\tfield:unsigned long long delta;\toffset:56;\tsize:8;\tsigned:0;
\tfield:unsigned long total_scan;\toffset:64;\tsize:8;\tsigned:0;
\tfield:int priority;\toffset:72;\tsize:4;\tsigned:1;
";

/// F2FS's shrinker: the tracepoint's offsets and F2FS's scan function's address (the CFI
/// jump-table entry first where there is one), the plan's line; each missing fact named, the
/// rest of the plan kept.
#[test]
fn the_shrinker_takes_f2fs_scan_function_and_the_format_offsets() {
    let kallsyms = format!("{KALLSYMS_6_1}ffffffffc0653680 t f2fs_shrink_scan\t[f2fs]\n");
    let with = with_shrinker(
        plan_untimed(),
        &kallsyms,
        Ok(SHRINK_SLAB_START_FORMAT.into()),
    );
    assert_eq!(
        with.shrinker_tracepoint.as_deref(),
        Some("vmscan:mm_shrink_slab_start (f2fs_shrink_scan)")
    );
    let l = with.layout;
    assert_eq!(
        (
            l.shrink_fn,
            l.shrink_items,
            l.shrink_total,
            l.shrink_priority
        ),
        (16, 48, 64, 72)
    );
    assert_eq!(l.shrink_scan_fn, 0xffff_ffff_c065_3680);
    assert!(with.missing.is_empty(), "{:?}", with.missing);
    assert!(with
        .render()
        .ends_with("shrinker     tracepoint vmscan:mm_shrink_slab_start (f2fs_shrink_scan)\n"));

    let cfi = format!("{kallsyms}ffffffffc0660010 t f2fs_shrink_scan.cfi_jt\t[f2fs]\n");
    let with = with_shrinker(plan_untimed(), &cfi, Ok(SHRINK_SLAB_START_FORMAT.into()));
    assert_eq!(with.layout.shrink_scan_fn, 0xffff_ffff_c066_0010);

    let hidden = "0000000000000000 t f2fs_shrink_scan\t[f2fs]\n";
    let without = with_shrinker(plan_untimed(), hidden, Ok(SHRINK_SLAB_START_FORMAT.into()));
    assert_eq!(without.shrinker_tracepoint, None);
    assert_eq!(without.layout.shrink_scan_fn, 0);
    assert_eq!(
        without.missing,
        ["shrinker: f2fs_shrink_scan's address is hidden in /proc/kallsyms (root, kptr_restrict)"]
    );

    let absent = with_shrinker(
        plan_untimed(),
        KALLSYMS_6_1,
        Ok(SHRINK_SLAB_START_FORMAT.into()),
    );
    assert_eq!(
        absent.missing,
        [
            "shrinker: none of f2fs_shrink_scan.cfi_jt, f2fs_shrink_scan in /proc/kallsyms (is \
          f2fs loaded?)"
        ]
    );

    let narrow = SHRINK_SLAB_START_FORMAT.replace(
        "int priority;\toffset:72;\tsize:4",
        "int priority;\toffset:72;\tsize:8",
    );
    let narrow = with_shrinker(plan_untimed(), &kallsyms, Ok(narrow));
    assert_eq!(
        narrow.missing,
        ["shrinker: mm_shrink_slab_start: field `priority` is 8 bytes, expected 4"]
    );
    assert_eq!(narrow.layout.shrink_scan_fn, 0);

    let no_lookups = with_shrinker(
        plan("", true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())),
        &kallsyms,
        Ok(SHRINK_SLAB_START_FORMAT.into()),
    );
    assert_eq!(no_lookups.shrinker_tracepoint, None);
    assert!(no_lookups
        .missing
        .contains(&"shrinker: recorded with the node lookups only".to_string()));
}

/// The shrinker program on this kernel: hooked to the superblock shrinker's scan function
/// (`super_cache_scan`, every mounted file system has one; this machine has no F2FS), a
/// `drop_caches` of the slab caches calls it at priority 0 at least once, and each call is one
/// event with its count and one count in the kernel; another function's address keeps none.
#[test]
fn the_shrinker_program_keeps_the_calls_of_one_scan_function() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    let (root, _) = system::ensure_tracefs().expect("tracefs mounted");
    let format = std::fs::read_to_string(root.join("events/vmscan/mm_shrink_slab_start/format"))
        .expect("the shrinker tracepoint exists");
    let kallsyms = kallsyms::read(Path::new(kallsyms::PROC_KALLSYMS)).expect("kallsyms");
    let superblocks = kallsyms
        .replace(" super_cache_scan\n", " f2fs_shrink_scan\n")
        .lines()
        .filter(|line| line.ends_with(" f2fs_shrink_scan"))
        .map(|line| format!("{line}\n"))
        .collect::<String>();
    assert_eq!(
        superblocks.lines().count(),
        1,
        "super_cache_scan in kallsyms"
    );
    let calls = |kallsyms: &str| {
        let lookups = plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
        let mut plan = with_shrinker(lookups, kallsyms, Ok(format.clone()));
        assert!(plan.missing.is_empty(), "{:?}", plan.missing);
        // The shrinker's program alone: no lookup function is hooked on this kernel.
        plan.lookup_functions.clear();
        plan.evict_tracepoint = None;
        let mut ebpf = bpf::load(64 * 1024).expect("load the object");
        let outcomes = attach(&mut ebpf, &plan, &[]).unwrap().outcomes;
        assert!(outcomes.iter().all(|o| o.attached), "{outcomes:?}");
        std::fs::write("/proc/sys/vm/drop_caches", "2").expect("drop the slab caches");
        let counted = counts(&ebpf).unwrap().shrinker_scans;
        let mut ring = RingBuf::try_from(ebpf.take_map(maps::EVENTS).unwrap()).unwrap();
        let mut events = Vec::new();
        while let Some(item) = ring.next() {
            events.push(Event::from_bytes(&item).unwrap());
        }
        (counted, events)
    };
    let (counted, events) = calls(&superblocks);
    assert!(counted >= 1, "no call of super_cache_scan by drop_caches");
    assert_eq!(events.len() as u64, counted);
    for event in &events {
        assert_eq!(event.kind(), Some(EventKind::ShrinkerScan));
        assert_eq!(event.dev, 0);
        assert_eq!(event.reason, 0, "drop_caches shrinks at priority 0");
    }
    let elsewhere = "ffffffff80000010 t f2fs_shrink_scan\n";
    assert_eq!(calls(elsewhere), (0, Vec::new()));
}

/// Timed lookups (issue 51): a return program beside each entry, the layout's flag set, and
/// the page lock's slow path found by name (the newer first); without one, said why.
#[test]
fn timed_lookups_add_the_return_and_the_page_lock_wait() {
    let kallsyms =
        format!("{KALLSYMS_6_1}ffffffff81234560 T __lock_page\nffffffff81234000 T __folio_lock\n");
    let timed = with_timing(
        plan(&kallsyms, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())),
        &kallsyms,
    );
    assert!(timed.timed);
    assert_eq!(timed.layout.time_lookups, 1);
    assert_eq!(timed.lock_wait.as_deref(), Some("__folio_lock"));
    assert!(timed.missing.is_empty(), "{:?}", timed.missing);
    assert_eq!(
        timed.render(),
        "node_access  kprobe f2fs_get_node_page\n             \
         timed: kretprobe on each + waits kprobe __folio_lock\n\
         node_evict   tracepoint filemap:mm_filemap_delete_from_page_cache\n\
         inode_evict  not available\n\
         shrinker     not available\n"
    );
    let no_lock = with_timing(
        plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())),
        KALLSYMS_6_1,
    );
    assert_eq!(no_lock.lock_wait, None);
    assert_eq!(no_lock.missing.len(), 1);
    assert!(no_lock.missing[0].contains("counts as a hit"));
    // Nothing to time without a lookup function.
    let none = with_timing(plan("", true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())), "");
    assert!(!none.timed);
    assert_eq!(none.layout.time_lookups, 0);
}

/// 6.12's block request tracepoints (their format files' first fields).
const BLOCK_RQ_ISSUE: &str = "name: block_rq_issue
ID: 1234
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
";

/// Issue 51: the disk reads' device time from the block request tracepoints, at their format
/// files' offsets; a format without `sector` leaves it out, said why.
#[test]
fn device_time_takes_the_block_tracepoints_offsets() {
    let timed = || {
        with_timing(
            plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into())),
            KALLSYMS_6_1,
        )
    };
    let plan = with_device_time(
        timed(),
        Ok(BLOCK_RQ_ISSUE.into()),
        Ok(BLOCK_RQ_ISSUE.replace("block_rq_issue", "block_rq_complete")),
    );
    assert!(plan.device_time);
    let l = plan.layout;
    assert_eq!(
        (
            l.time_device,
            l.block_issue_dev,
            l.block_issue_sector,
            l.block_complete_dev,
            l.block_complete_sector
        ),
        (1, 8, 16, 8, 16)
    );
    assert!(plan
        .render()
        .contains("device time tracepoints block:block_rq_issue"));
    let without = with_device_time(
        timed(),
        Ok(BLOCK_RQ_ISSUE.into()),
        Ok(BLOCK_RQ_ISSUE.replace("sector_t sector", "sector_t first")),
    );
    assert!(!without.device_time);
    assert_eq!(without.layout.time_device, 0);
    assert!(
        without
            .missing
            .iter()
            .any(|m| m.contains("no field `sector`")),
        "{:?}",
        without.missing
    );
    // Untimed: nothing to add the device time to.
    let untimed = with_device_time(
        plan_untimed(),
        Ok(BLOCK_RQ_ISSUE.into()),
        Ok(BLOCK_RQ_ISSUE.into()),
    );
    assert!(!untimed.device_time);
}

fn plan_untimed() -> AccessPlan {
    plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()))
}

#[test]
fn a_partial_clone_is_never_the_lookup_function() {
    let kallsyms = "ffffffffc063daf0 t __get_node_page.part.0\t[f2fs]\n\
                    ffffffffc063edf0 T f2fs_get_node_folio\t[f2fs]\n";
    let plan = plan(kallsyms, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(plan.lookup_functions, ["f2fs_get_node_folio"]);
    let inner_only = "ffffffffc063daf0 t __get_node_folio\t[f2fs]\n";
    let plan = super::plan(inner_only, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(plan.lookup_functions, ["__get_node_folio"]);
}

/// The lookup entry points of 6.15 and later (and of the node-folio variant module).
const FOLIO_LOOKUPS: [&str; 3] = [
    "f2fs_get_node_folio",
    "f2fs_get_inode_folio",
    "f2fs_get_xnode_folio",
];

/// 6.16 and later (and 6.15 beside f2fs_get_node_page): inode and xattr-node lookups have entry
/// points of their own that never pass through f2fs_get_node_folio; each is traced, and the
/// inner __get_node_folio (which all of them call) is not, or every lookup would count twice.
#[test]
fn every_lookup_entry_point_is_traced_and_the_inner_one_is_not() {
    let kallsyms = "ffffffffc0641000 t __get_node_folio\t[f2fs]\n\
                    ffffffffc0642000 T f2fs_get_node_folio\t[f2fs]\n\
                    ffffffffc0643000 T f2fs_get_inode_folio\t[f2fs]\n\
                    ffffffffc0644000 T f2fs_get_xnode_folio\t[f2fs]\n\
                    ffffffffc0645000 T f2fs_get_node_page_ra\t[f2fs]\n";
    let plan = plan(kallsyms, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(plan.lookup_functions, FOLIO_LOOKUPS);
    assert!(plan.render().starts_with(
        "node_access  kprobe f2fs_get_node_folio + kprobe f2fs_get_inode_folio + \
         kprobe f2fs_get_xnode_folio\n"
    ));
}

#[test]
fn each_missing_fact_is_named_and_evictions_need_lookups() {
    let plan = plan(KALLSYMS_6_1, false, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert!(plan.lookup_functions.is_empty());
    assert_eq!(plan.evict_tracepoint, None);
    assert_eq!(
        plan.missing,
        [
            "node_access: kprobes not available (CONFIG_KPROBES)",
            "node_evict: the node inode is learnt from node lookups",
        ]
    );

    let plan = super::plan("", true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(
        plan.missing[0],
        "node_access: none of f2fs_get_node_page, f2fs_get_node_folio, f2fs_get_inode_page, \
         f2fs_get_inode_folio, f2fs_get_xnode_page, f2fs_get_xnode_folio, __get_node_page, \
         __get_node_folio in /proc/kallsyms (is f2fs loaded?)"
    );

    let no_btf = Err(anyhow!("no BTF (/sys/kernel/btf/vmlinux)"));
    let plan = super::plan(KALLSYMS_6_1, true, no_btf, Ok(EVICT_FORMAT.into()));
    assert_eq!(
        plan.missing[0],
        "node_access: the device and node inode need F2FS's BTF: no BTF (/sys/kernel/btf/vmlinux)"
    );

    let narrow = EVICT_FORMAT.replace(
        "field:dev_t s_dev;\toffset:32;\tsize:4",
        "field:dev_t s_dev;\toffset:32;\tsize:8",
    );
    let plan = super::plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(narrow));
    assert!(!plan.lookup_functions.is_empty());
    assert_eq!(
        plan.missing,
        ["node_evict: mm_filemap_delete_from_page_cache: field `s_dev` is 8 bytes, expected 4"]
    );
}

#[test]
fn the_lookup_program_passes_the_verifier() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    let mut ebpf = bpf::load(64 * 1024).expect("load the object");
    let kp: &mut KProbe = ebpf.program_mut(PROG_ACCESS).unwrap().try_into().unwrap();
    kp.load().expect("the verifier accepts f2fs_node_access");
}

/// A CPU's batch of lookups, as the lookup program leaves it: `len` records of (nid, ts).
fn batch_of(len: u32, first_nid: u32) -> AccessBatch {
    let mut batch = AccessBatch {
        magic: 0,
        len,
        first_ts_ns: 1_000,
        busy: 0,
        last_tgid: 0,
        tick_jiffies: 0,
        tick_ts_ns: 0,
        records: [tracer_common::AccessRecord::default(); tracer_common::ACCESS_BATCH_RECORDS],
    };
    for (i, record) in batch.records[..len as usize].iter_mut().enumerate() {
        let i = i as u32;
        *record = tracer_common::AccessRecord {
            ts_ns: 1_000 + u64::from(i),
            pid: 42,
            tgid: 41,
            dev: 0x80_0011,
            nid: first_nid + i,
            ..Default::default()
        };
    }
    batch
}

/// The flush program, run in the kernel on each CPU whose batch waits, sends exactly that
/// batch's lookups, in order, once; it leaves a batch whose append it interrupted (`busy`),
/// and CPUs with an empty batch are not asked.
#[test]
fn flushing_sends_each_waiting_batch_once_and_leaves_a_busy_one() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    let mut ebpf = bpf::load(64 * 1024).expect("load the object");
    load_flush(&mut ebpf).expect("the verifier accepts f2fs_access_flush");
    let cpus = aya::util::nr_cpus().expect("possible CPUs");
    let mut values: Vec<AccessBatch> = (0..cpus).map(|_| batch_of(0, 0)).collect();
    values[0] = batch_of(3, 100);
    let busy_cpu = cpus.checked_sub(1).filter(|&cpu| cpu > 0);
    if let Some(cpu) = busy_cpu {
        values[cpu] = batch_of(2, 500);
        values[cpu].busy = 1;
    }
    {
        let map = ebpf.named_map_mut(maps::ACCESS_BATCH).unwrap();
        let mut batches: PerCpuArray<_, AccessBatch> = PerCpuArray::try_from(map).unwrap();
        let per_cpu = aya::maps::PerCpuValues::try_from(values).unwrap();
        batches.set(0, per_cpu, 0).unwrap();
    }
    let asked = flush_batches(&ebpf).expect("flush runs on each CPU");
    assert_eq!(asked, 1 + usize::from(busy_cpu.is_some()));
    // Asked again: CPU 0's batch went out and is empty; the busy one is asked again.
    assert_eq!(
        flush_batches(&ebpf).unwrap(),
        usize::from(busy_cpu.is_some())
    );

    let mut ring = RingBuf::try_from(ebpf.take_map(maps::EVENTS).unwrap()).unwrap();
    let mut nids = Vec::new();
    while let Some(item) = ring.next() {
        let batch = AccessBatch::from_bytes(&item).expect("a batch record");
        for event in batch.events() {
            assert_eq!(event.kind(), Some(EventKind::NodeAccess));
            assert_eq!((event.dev, event.pid, event.tgid), (0x80_0011, 42, 41));
            assert_eq!(event.ts_ns, 1_000 + u64::from(event.nid - 100));
            nids.push(event.nid);
        }
    }
    assert_eq!(nids, [100, 101, 102]);
}

/// The kernel's dev_t encoding (MKDEV: major << 20 | minor) of a file's device.
fn kernel_dev(meta: &std::fs::Metadata) -> u32 {
    let dev = meta.dev();
    (libc::major(dev) << 20) | libc::minor(dev)
}

/// Real evictions on this kernel: pages of a watched inode leave the page cache when the file
/// is truncated; each is one node_evict (nid = page index) and one count, and a neighbour
/// file's pages are not.
#[test]
fn truncating_a_watched_inode_gives_one_eviction_per_page() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    // As root, a fresh machine's unmounted tracefs is mounted rather than the test skipped.
    let (root, _) = system::ensure_tracefs().expect("tracefs mounted");
    let format_path = root.join("events/filemap/mm_filemap_delete_from_page_cache/format");
    let format = std::fs::read_to_string(&format_path).expect("the eviction tracepoint exists");
    let mut layout = AccessLayout::default();
    evict_offsets(&format, &mut layout).expect("this kernel's format has the fields");
    let plan = AccessPlan {
        lookup_functions: Vec::new(),
        lookup_hook: "kprobe",
        fentry_targets: Vec::new(),
        evict_tracepoint: Some(format!("{EVICT_CATEGORY}:{EVICT_TRACEPOINT}")),
        inode_evict_tracepoint: None,
        shrinker_tracepoint: None,
        missing: Vec::new(),
        timed: false,
        lock_wait: None,
        device_time: false,
        switch_state: false,
        layout,
    };

    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let watched = std::fs::File::create(dir.path().join("watched")).unwrap();
    let neighbour = std::fs::File::create(dir.path().join("neighbour")).unwrap();
    let page = vec![0x5a_u8; 4096];
    // Pages 0, 2, 4 and 6 apart: four single-page folios.
    for index in [0u64, 2, 4, 6] {
        watched.write_at(&page, index * 4096).unwrap();
        neighbour.write_at(&page, index * 4096).unwrap();
    }
    watched.sync_all().unwrap();
    neighbour.sync_all().unwrap();
    let meta = watched.metadata().unwrap();
    let dev = kernel_dev(&meta);

    let mut ebpf = bpf::load(64 * 1024).expect("load the object");
    let outcomes = attach(&mut ebpf, &plan, &[]).unwrap().outcomes;
    assert!(outcomes.iter().all(|o| o.attached), "{outcomes:?}");
    watch_inode(&mut ebpf, dev, meta.ino() as u32).unwrap();
    watched.set_len(0).unwrap();
    neighbour.set_len(0).unwrap();

    let counted = counts(&ebpf).unwrap();
    assert_eq!((counted.lookups, counted.evictions), (0, 4));
    let mut ring = RingBuf::try_from(ebpf.take_map(maps::EVENTS).unwrap()).unwrap();
    let mut nids = Vec::new();
    while let Some(item) = ring.next() {
        let event = Event::from_bytes(&item).unwrap();
        assert_eq!(event.kind(), Some(EventKind::NodeEvict));
        assert_eq!(event.dev, dev);
        nids.push(event.nid);
    }
    nids.sort_unstable();
    assert_eq!(nids, [0, 2, 4, 6]);
}

/// The node-folio variant module (tests/data/variants, saved by the VM phase): its three
/// lookup entry points, as the kernel's kallsyms lists them.
#[test]
fn the_node_folio_variant_traces_its_three_lookup_entry_points() {
    let kallsyms = include_str!("../../../../../tests/data/variants/6.12-node-folio/kallsyms.txt");
    let plan = plan(kallsyms, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    assert_eq!(plan.lookup_functions, FOLIO_LOOKUPS);
}

#[test]
fn the_plan_names_fentry_when_every_function_has_a_btf_id_and_says_why_not_otherwise() {
    let plan = super::plan(KALLSYMS_6_1, true, Ok(OFFSETS), Ok(EVICT_FORMAT.into()));
    let target = BtfTarget {
        function: "f2fs_get_node_page".into(),
        type_id: 123_456,
        module: Some("f2fs".into()),
    };
    let with = with_fentry(plan.clone(), Ok(vec![target.clone()]));
    assert_eq!(with.lookup_hook, "fentry");
    assert_eq!(with.fentry_targets, [target]);
    assert!(with
        .render()
        .starts_with("node_access  fentry f2fs_get_node_page\n"));
    let without = with_fentry(plan, Err(anyhow!("not asked for (--function-hook kprobe)")));
    assert_eq!(without.lookup_hook, "kprobe");
    assert!(without
        .render()
        .starts_with("node_access  kprobe f2fs_get_node_page\n"));
    assert_eq!(
        without.missing,
        ["node_access: fentry: not asked for (--function-hook kprobe); kprobes instead"]
    );
}
