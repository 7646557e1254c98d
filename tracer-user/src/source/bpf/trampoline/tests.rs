use std::{io::Read as _, os::unix::fs::FileExt as _};

use aya::maps::{Array, PerCpuArray, RingBuf};
use tracer_common::{maps, AccessLayout, Event, EventKind, ACCESS_COUNT_LOOKUPS};

use super::*;
use crate::{source::bpf::ObjectMaps as _, system};

#[test]
fn a_vmlinux_function_is_found_in_the_base_and_a_missing_one_is_said() {
    let Some(files) = BtfFiles::this_kernel() else {
        test_skip::skip("no /sys/kernel/btf/vmlinux");
        return;
    };
    let btf = KernelBtf::load(&files).expect("this kernel's BTF");
    let target = BtfTarget::find(&btf, &files, "vfs_read").expect("vfs_read in BTF");
    assert_eq!(target.function, "vfs_read");
    assert!(target.type_id > 0);
    if files.module.is_none() {
        assert_eq!(target.module, None);
    }
    let missing = BtfTarget::find(&btf, &files, "no_such_function_here").unwrap_err();
    assert_eq!(
        missing.to_string(),
        "BTF describes no function no_such_function_here"
    );
}

/// The hand loader end to end on this kernel: f2fs_node_access_fentry on vfs_read, with the
/// layout pointed at `file->f_inode` (a readable pointer, so every call is counted), shares
/// the ring buffer and the counters aya created. This thread's 100 reads are 100 events with
/// its tid (other threads and processes read too; their events are not counted).
#[test]
fn an_fentry_program_loaded_by_hand_counts_every_call_of_its_function() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    let Some(files) = BtfFiles::this_kernel() else {
        test_skip::skip("no /sys/kernel/btf/vmlinux");
        return;
    };
    let btf = KernelBtf::load(&files).expect("this kernel's BTF");
    let f_inode = btf
        .members("file")
        .into_iter()
        .find(|m| m.name == "f_inode")
        .expect("struct file has f_inode")
        .offset;
    let mut ebpf = crate::source::bpf::load(4 << 20).expect("load the object");
    let layout = AccessLayout {
        sbi_sb: f_inode,
        ..AccessLayout::default()
    };
    let mut layouts: Array<_, AccessLayout> =
        Array::try_from(ebpf.named_map_mut(maps::ACCESS_LAYOUT).unwrap()).unwrap();
    layouts.set(0, layout, 0).unwrap();
    let mut programs = TracingPrograms::new(crate::source::bpf::object(), &ebpf, &[]).unwrap();
    let target = BtfTarget::find(&btf, &files, "vfs_read").unwrap();
    let link = match programs.attach("f2fs_node_access_fentry", &target, Hook::Entry) {
        Ok(link) => link,
        // Some kernels refuse every tracing program (this project's CI host, a Firecracker
        // guest, refuses aya's own FEntry::load the same way, with an empty verifier log).
        Err(err) if format!("{err:#}").contains("Operation not permitted") => {
            test_skip::skip("this kernel refuses BPF tracing programs (EPERM)");
            return;
        }
        Err(err) => panic!("the fentry program loads and attaches: {err:#}"),
    };
    assert!(link.program_id().unwrap() > 0);

    let file = std::fs::File::open("/proc/self/stat").unwrap();
    let mut buf = [0u8; 64];
    for _ in 0..100 {
        // pread is not vfs_read; read(2) is.
        let _bytes = (&file).read(&mut buf).unwrap();
        let _ = file.read_at(&mut buf, 0);
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    drop(link);

    let counts: PerCpuArray<_, u64> =
        PerCpuArray::try_from(ebpf.named_map(maps::ACCESS_COUNTS).unwrap()).unwrap();
    let lookups: u64 = counts.get(&ACCESS_COUNT_LOOKUPS, 0).unwrap().iter().sum();
    assert!(
        lookups >= 100,
        "counted {lookups} calls, this thread made 100"
    );
    let mut ring = RingBuf::try_from(ebpf.take_named_map(maps::EVENTS).unwrap()).unwrap();
    let mut ours = 0;
    while let Some(item) = ring.next() {
        let event = Event::from_bytes(&item).expect("a whole event");
        if event.pid == tid && event.kind == EventKind::NodeAccess as u8 {
            ours += 1;
        }
    }
    assert_eq!(ours, 100, "events with this thread's tid");
}

#[test]
fn an_unknown_module_has_no_btf_object() {
    if !system::is_root() {
        test_skip::skip("needs root");
        return;
    }
    assert!(find_kernel_btf("no_such_module").unwrap().is_none());
}

#[test]
fn trampolines_are_used_where_the_kernel_has_them_and_when_allowed() {
    let why = |hook, machine, release| usable(hook, machine, release).unwrap_err().to_string();
    assert!(usable(FunctionHook::Auto, "x86_64", "6.12.118+deb12-amd64").is_ok());
    assert!(usable(FunctionHook::Auto, "x86_64", "5.5.0").is_ok());
    assert!(usable(FunctionHook::Auto, "aarch64", "6.1.0-57-arm64").is_ok());
    assert_eq!(
        why(FunctionHook::Auto, "aarch64", "5.15.148-android13"),
        "aarch64 has BPF trampolines from 6.0; this kernel is 5.15.148-android13"
    );
    assert_eq!(
        why(FunctionHook::Auto, "x86_64", "5.4.0"),
        "x86_64 has BPF trampolines from 5.5; this kernel is 5.4.0"
    );
    assert_eq!(
        why(FunctionHook::Auto, "riscv64", "6.12.0"),
        "BPF trampolines are used on x86_64 and arm64 only, not riscv64"
    );
    assert_eq!(
        why(FunctionHook::Kprobe, "x86_64", "6.12.0"),
        "not asked for (--function-hook kprobe)"
    );
}
