//! `nodescope probe --discover` on BTF made here: tests/data/btf/*.c compiled with clang -g,
//! turned into base and split BTF by pahole -J (as vmlinux and a module's BTF are), with the
//! kallsyms fixture beside them (LTO, CFI and GCC clone names). Every kind and value the
//! fixture provides must be mapped exactly, and what it leaves out on purpose reported missing.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use nodescope::source::bpf::Manifest;

mod common;

use common::{scratch, NODESCOPE};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/btf")
        .join(name)
}

fn run(tool: &str, args: &[&std::ffi::OsStr]) {
    let output = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|err| {
            panic!("{tool}: {err} (cargo xtask setup installs clang and dwarves)")
        });
    assert!(
        output.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// (base BTF, split BTF) built from the fixture's C files.
fn build_btf(dir: &Path) -> (PathBuf, PathBuf) {
    let mut built = Vec::new();
    for (source, base) in [
        ("vmlinux.c", None),
        ("f2fs_node_cache.c", Some(dir.join("vmlinux.btf"))),
    ] {
        let stem = source.trim_end_matches(".c");
        let object = dir.join(format!("{stem}.o"));
        let btf = dir.join(format!("{stem}.btf"));
        let src = data(source);
        run(
            "clang",
            &[
                "-g".as_ref(),
                "-O0".as_ref(),
                "-c".as_ref(),
                src.as_os_str(),
                "-o".as_ref(),
                object.as_os_str(),
            ],
        );
        let detached = format!("--btf_encode_detached={}", btf.display());
        let base_arg = base.map(|b| format!("--btf_base={}", b.display()));
        let mut args: Vec<&std::ffi::OsStr> = Vec::new();
        if let Some(base_arg) = &base_arg {
            args.push(base_arg.as_ref());
        }
        args.push(detached.as_ref());
        args.push(object.as_os_str());
        run("pahole", &args);
        built.push(btf);
    }
    (built[0].clone(), built[1].clone())
}

fn discover(extra: &[&std::ffi::OsStr], out: &Path) -> (String, String) {
    let kallsyms = data("kallsyms.txt");
    let output = Command::new(NODESCOPE)
        .args(["probe", "--discover", "--kallsyms"])
        .arg(&kallsyms)
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run nodescope");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let manifest = std::fs::read_to_string(out).expect("the manifest was written");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        manifest,
    )
}

/// The manifest without its comment lines.
fn probes_of(manifest: &str) -> String {
    manifest
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

const EXPECTED_WITH_BTF: &str = r#"target = "kernel"

[[probe]]
kind = "node_read"
symbol = "read_node_page"   # read_node_page(page, op_flags)
at = "return"
when = "ret == 0"
nid = "mem(arg0+32):u32"

[[probe]]
kind = "convert"
symbol = "f2fs_node_cache_compress_entry.llvm.7261538125473610823"   # f2fs_node_cache_compress_entry(sbi, entry, clen, slot_size)
nid = "mem(arg1+16):u32"
len = "arg2"
queue = "arg3|slot_queue"

[[probe]]
kind = "convert_reject"
symbol = "f2fs_node_cache_compress_reject"   # f2fs_node_cache_compress_reject(sbi, nid, clen)
nid = "arg1"
len = "arg2"

[[probe]]
kind = "restore"
symbol = "f2fs_node_cache_restore"   # f2fs_node_cache_restore(sbi, entry, page)
at = "return"
when = "ret == 0"
nid = "mem(arg1+16):u32"
len = "mem(arg1+20):u16"
queue = "mem(arg1+28):u8"

[[probe]]
kind = "restore_fail"
symbol = "f2fs_node_cache_restore_fail.isra.0"   # f2fs_node_cache_restore_fail(sbi, entry, reason)

[[probe]]
kind = "reclaim"
symbol = "f2fs_node_cache_reclaim_entry"   # f2fs_node_cache_reclaim_entry(sbi, entry, queue)
nid = "mem(arg1+16):u32"
queue = "arg2"

[[probe]]
kind = "second_chance"
symbol = "f2fs_node_cache_clear_referenced"   # f2fs_node_cache_clear_referenced(sbi, entry, by)
at = "return"
when = "ret"
nid = "mem(arg1+16):u32"
queue = "mem(arg1+28):u8"
reason = "arg2|codes(0=1,1=2,2=3)""#;

#[test]
fn discover_maps_every_kind_and_field_of_the_split_btf_fixture() {
    let dir = scratch("discover");
    let (base, split) = build_btf(dir.path());
    let out = dir.path().join("discovered.toml");
    let (report, manifest) = discover(
        &[
            "--btf".as_ref(),
            split.as_os_str(),
            "--btf-base".as_ref(),
            base.as_os_str(),
        ],
        &out,
    );
    assert_eq!(probes_of(&manifest), EXPECTED_WITH_BTF, "{manifest}");
    // The loader takes it as it is: seven probes, no error.
    let loaded = Manifest::load(&out).unwrap();
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.probes.len(), 7);

    let lines: Vec<&str> = report.lines().collect();
    let has = |want: &str| {
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start_matches("# ").trim_start() == want),
            "report lacks {want:?}:\n{report}"
        )
    };
    has("node-cache entry type: struct node_cache_entry (list@0, nid@16, payload_len@20, slot_size@22, crc@24, queue@28, referenced@29, payload@32)");
    has("node lookup    found   f2fs_get_node_page(sbi, nid) -> f2fs_get_node_page: nid=arg1");
    // Left out on purpose: no abort function; restore_nomem inlined (in BTF, not kallsyms).
    has("convert_abort  missing no F2FS function in BTF named for it (*node_cache* or taking the entry type)");
    has("restore_nomem  missing f2fs_node_cache_restore_nomem: in BTF but not in kallsyms: inlined everywhere, or not built");
    // The .isra clone counts only; every field says why.
    for field in ["dev", "nid", "reason"] {
        has(&format!("unmapped {field}: f2fs_node_cache_restore_fail.isra.0 is a compiler clone whose arguments were rewritten: count only"));
    }
    has("unmapped readahead: readahead is one bit (REQ_RAHEAD) of op_flags; no transform tests a bit");
    // dev is never mapped here (two pointers deep): once per found kind but the clone.
    let dev = lines
        .iter()
        .filter(|l| l.contains("unmapped dev: the device is two pointers away"))
        .count();
    assert_eq!(dev, 6, "{report}");
    // The fixture predates the insert and forget kinds: it has no function for either.
    for kind in ["insert", "forget"] {
        has(&format!("{kind:<14} missing no F2FS function in BTF named for it (*node_cache* or taking the entry type)"));
    }
    has("7 of 11 kinds mapped");
    // F2FS file compression and the base's look-alike are never candidates.
    for decoy in [
        "f2fs_compress_pages",
        "f2fs_decompress_cluster",
        "vfs_restore_compressed",
    ] {
        assert!(!manifest.contains(decoy), "{decoy} in\n{manifest}");
    }
}

#[test]
fn without_btf_discover_matches_kallsyms_names_and_writes_count_only_probes() {
    let dir = scratch("discover-nobtf");
    let out = dir.path().join("discovered.toml");
    let (report, manifest) = discover(&["--no-btf".as_ref()], &out);
    assert!(
        report.starts_with("# nodescope probe --discover: no BTF: kallsyms names only, arguments cannot be mapped, probes count calls"),
        "{report}"
    );
    let expected = [
        ("node_read", "read_node_page"),
        (
            "convert",
            "f2fs_node_cache_compress_entry.llvm.7261538125473610823",
        ),
        ("convert_reject", "f2fs_node_cache_compress_reject"),
        ("restore", "f2fs_node_cache_restore"),
        ("restore_fail", "f2fs_node_cache_restore_fail.isra.0"),
        ("reclaim", "f2fs_node_cache_reclaim_entry"),
        ("second_chance", "f2fs_node_cache_clear_referenced"),
    ];
    let loaded = Manifest::load(&out).unwrap();
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let got: Vec<(&str, &str)> = loaded
        .probes
        .iter()
        .map(|p| (p.kind.name(), p.symbol.as_str()))
        .collect();
    assert_eq!(got, expected, "{manifest}");
    // Count only: no value, no return probe.
    for line in manifest.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            ["target", "[[probe]]", "kind", "symbol", ""]
                .iter()
                .any(|k| line.starts_with(k)),
            "a mapped value without BTF: {line:?}"
        );
    }
    assert!(report.contains("# convert_abort  missing no F2FS symbol in kallsyms named for it"));
    assert!(report.contains("# restore_nomem  missing no F2FS symbol in kallsyms named for it"));
    assert!(
        report.contains("# node lookup    found   f2fs_get_node_page -> f2fs_get_node_page\n"),
        "{report}"
    );
}

#[test]
fn discover_without_output_prints_a_manifest_the_loader_accepts() {
    let output = Command::new(NODESCOPE)
        .args(["probe", "--discover", "--no-btf", "--kallsyms"])
        .arg(data("kallsyms.txt"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let manifest = Manifest::parse("stdout", &text).unwrap();
    assert_eq!(manifest.probes.len(), 7);
    assert!(manifest.errors.is_empty());
}

#[test]
fn a_missing_btf_file_is_one_clear_error() {
    let output = Command::new(NODESCOPE)
        .args([
            "probe",
            "--discover",
            "--btf",
            "/nonexistent/f2fs.btf",
            "--kallsyms",
        ])
        .arg(data("kallsyms.txt"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("reading BTF /nonexistent/f2fs.btf"),
        "{stderr}"
    );
}

#[test]
fn f2fs_built_in_one_self_contained_btf_maps_the_same() {
    let dir = scratch("discover-builtin");
    let (_, _) = build_btf(dir.path());
    // F2FS built into the kernel: its types and functions are in vmlinux's own BTF.
    let builtin = dir.path().join("builtin.btf");
    let detached = format!("--btf_encode_detached={}", builtin.display());
    let object = dir.path().join("f2fs_node_cache.o");
    run("pahole", &[detached.as_ref(), object.as_os_str()]);
    let out = dir.path().join("discovered.toml");
    let (_, manifest) = discover(&["--btf".as_ref(), builtin.as_os_str()], &out);
    assert_eq!(probes_of(&manifest), EXPECTED_WITH_BTF, "{manifest}");
}

#[test]
fn a_kernel_without_f2fs_gets_a_note_and_nothing_mapped() {
    let dir = scratch("discover-nof2fs");
    let (base, _) = build_btf(dir.path());
    let out = dir.path().join("discovered.toml");
    let (report, manifest) = discover(&["--btf".as_ref(), base.as_os_str()], &out);
    assert!(
        report.contains("\n# note: no F2FS function in this BTF: F2FS is neither built in nor loaded (modprobe f2fs), or its module has no BTF\n"),
        "{report}"
    );
    assert!(report.contains("# node lookup    missing no function named f2fs_get_node_page, f2fs_get_node_folio, __get_node_page, __get_node_folio in BTF\n"), "{report}");
    assert!(report.contains("# 0 of 11 kinds mapped\n"), "{report}");
    // vfs_restore_compressed is the kernel's, not F2FS's: never a restore probe.
    assert_eq!(probes_of(&manifest), "target = \"kernel\"");
}

/// `--accesses` reads sbi->sb->s_dev and sbi->node_ino_num at offsets BTF gives: the fixture's
/// split BTF (f2fs_sb_info) on its base (super_block) gives exactly the C layout's.
#[test]
fn access_offsets_come_from_split_btf() {
    use nodescope::source::bpf::{struct_offsets, BtfFiles, KernelBtf, StructOffsets};
    let dir = scratch("access-btf");
    let (base, module) = build_btf(dir.path());
    let btf = KernelBtf::load(&BtfFiles {
        base,
        module: Some(module),
    })
    .unwrap();
    let offsets = struct_offsets(&btf).unwrap();
    assert_eq!(
        offsets,
        StructOffsets {
            sbi_sb: 0,
            sb_s_dev: 16,
            sbi_node_ino: 80,
        }
    );
}
