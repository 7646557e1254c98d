use super::*;

#[test]
fn shipped_manifests_parse_without_errors() {
    // The kernel manifest leaves node reads to F2FS's tracepoints.
    let kernel_kinds = PROBE_KINDS.len() - 1;
    for (name, text, kinds) in [
        ("kernel", DEFAULT_KERNEL_MANIFEST, kernel_kinds),
        ("sim", SIM_MANIFEST, PROBE_KINDS.len()),
    ] {
        let manifest = Manifest::parse(name, text).unwrap();
        assert!(manifest.errors.is_empty(), "{name}: {:?}", manifest.errors);
        assert_eq!(manifest.probes.len(), kinds, "{name}");
    }
}

#[test]
fn values_decode_into_specs() {
    let arg = parse_value("arg3|slot_queue", At::Entry).unwrap();
    assert_eq!(
        (arg.source, arg.arg, arg.transform),
        (VALUE_ARG, 3, XFORM_SLOT_QUEUE)
    );
    let mem = parse_value("mem(arg0+0x18):u16", At::Entry).unwrap();
    assert_eq!(
        (mem.source, mem.arg, mem.offset, mem.size),
        (VALUE_MEM, 0, 24, 2)
    );
    let constant = parse_value("7", At::Entry).unwrap();
    assert_eq!((constant.source, constant.offset), (VALUE_CONST, 7));
    let ret = parse_value("ret|neg", At::Return).unwrap();
    assert_eq!((ret.source, ret.transform), (VALUE_RET, XFORM_NEG));
    assert!(parse_value("ret", At::Entry).is_err());
    let codes = parse_value("arg2|codes(0=1, 1=2,2=3)", At::Entry).unwrap();
    assert_eq!((codes.transform, codes.codes), (XFORM_CODES, 0x321));
    assert_eq!(
        (0..4).map(|raw| codes.apply(raw)).collect::<Vec<_>>(),
        [1, 2, 3, 0]
    );
    for bad in [
        "codes()",
        "codes(8=1)",
        "codes(0=16)",
        "codes(0=1,0=2)",
        "codes(0:1)",
        "codes(0=1",
    ] {
        let err = parse_value(&format!("arg2|{bad}"), At::Entry).unwrap_err();
        assert!(err.contains("codes"), "{bad}: {err}");
    }
    assert!(parse_value("arg6", At::Entry)
        .unwrap_err()
        .contains("bad argument index"));
    assert_eq!(parse_when("ret < -1").unwrap(), (RET_FILTER_LT, -1));
    assert_eq!(parse_when("ret>=0").unwrap(), (RET_FILTER_GE, 0));
    assert_eq!(parse_when(" ret ").unwrap(), (RET_FILTER_TRUE, 0));
    assert!(parse_when("retx").is_err());
}

#[test]
fn tracepoint_probes_read_fields_and_refuse_what_a_tracepoint_lacks() {
    let text = r#"target = "kernel"

[[probe]]
kind = "convert"
tracepoint = "f2fs/f2fs_node_cache_compress"
nid = "field(nid)"
queue = "field(slot_size)|slot_queue"

[[probe]]
kind = "restore"
tracepoint = "f2fs/f2fs_node_cache_restore"
at = "return"

[[probe]]
kind = "reclaim"
tracepoint = "f2fs/f2fs_node_cache_reclaim"
nid = "arg1"

[[probe]]
kind = "second_chance"
symbol = "f2fs_node_cache_second_chance"
nid = "field(nid)"

[[probe]]
kind = "restore_fail"
symbol = "f"
tracepoint = "f2fs/f2fs_node_cache_restore_fail"
"#;
    let manifest = Manifest::parse("m", text).unwrap();
    assert_eq!(manifest.probes.len(), 1, "{:?}", manifest.errors);
    let probe = &manifest.probes[0];
    assert_eq!(probe.symbol, "f2fs/f2fs_node_cache_compress");
    let point = probe.tracepoint.as_ref().unwrap();
    assert_eq!(
        (point.category.as_str(), point.name.as_str()),
        ("f2fs", "f2fs_node_cache_compress")
    );
    assert_eq!(
        point.fields,
        [
            (SPEC_FIELD_NID, "nid".to_string()),
            (SPEC_FIELD_QUEUE, "slot_size".to_string())
        ]
    );
    assert_eq!(
        probe.spec.fields[SPEC_FIELD_QUEUE].transform,
        XFORM_SLOT_QUEUE
    );
    let errors = manifest.errors.join("\n");
    for said in [
        "m:12: a tracepoint has no return",
        "m:17: a tracepoint's values are field(NAME)",
        "m:22: field(NAME) reads a tracepoint's record",
        "m:27: a probe has a symbol or a tracepoint, not both",
    ] {
        assert!(errors.contains(said), "{said}: {errors}");
    }
    // Offsets and sizes come from the format when the probe attaches.
    let format = Format::parse(
        "name: f2fs_node_cache_compress\nID: 7\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:nid_t nid;\toffset:12;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int slot_size;\toffset:20;\tsize:4;\tsigned:0;\n",
    )
    .unwrap();
    let mut spec = probe.spec;
    point.resolve(&format, &mut spec).unwrap();
    let nid = spec.fields[SPEC_FIELD_NID];
    assert_eq!(
        (nid.source, nid.arg, nid.offset, nid.size),
        (VALUE_MEM, 0, 12, 4)
    );
    assert_eq!(spec.fields[SPEC_FIELD_QUEUE].offset, 20);
    let short =
        Format::parse("name: x\nformat:\n\tfield:nid_t nid;\toffset:8;\tsize:4;\tsigned:0;\n")
            .unwrap();
    let err = point.resolve(&short, &mut spec).unwrap_err().to_string();
    assert!(
        err.contains("has no field \"slot_size\" (it has nid)"),
        "{err}"
    );
}

const MIXED: &str = r#"target = "kernel"

[[probe]]
kind = "convert"
symbol = "f2fs_good"
nid = "arg1"

[[probe]]
kind = "restore"
symbol = "f2fs_bad_arg"
nid = "arg9"

[[probe]]
kind = "reclaim"
symbol = "f2fs_bad_ret"
at = "entry"
when = "ret == 0"

[[probe]]
kind = "compress_all_the_things"
symbol = "x"

[[probe]]
kind = "convert"
symbol = "f2fs_duplicate"
"#;

#[test]
fn invalid_probes_are_reported_with_their_line_and_the_rest_survive() {
    let manifest = Manifest::parse("mixed.toml", MIXED).unwrap();
    assert_eq!(manifest.probes.len(), 1);
    assert_eq!(manifest.probes[0].symbol, "f2fs_good");
    assert_eq!(manifest.probes[0].line, 4);
    assert_eq!(manifest.errors.len(), 4, "{:#?}", manifest.errors);
    assert!(manifest.errors[0].starts_with("mixed.toml:11: bad argument index \"9\""));
    assert!(manifest.errors[1].starts_with("mixed.toml:17: `when` tests the return value"));
    assert!(manifest.errors[2].starts_with("mixed.toml:20: unknown kind"));
    assert!(
        manifest.errors[3].starts_with("mixed.toml:24: kind convert is already mapped at line 4")
    );
}

#[test]
fn a_malformed_file_names_its_line() {
    let err = Manifest::parse("broken.toml", "target = \"kernel\"\n\n[[probe]\nkind = 1\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("broken.toml: line 3:"), "{err}");
    let err = Manifest::parse(
        "typo.toml",
        "target = \"kernel\"\n[[probe]]\nkind = \"convert\"\nsymbol = \"f\"\nnidd = \"arg1\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("typo.toml: line 5:"), "{err}");
    assert!(err.contains("nidd"), "{err}");
}

/// A 1 MB manifest of 20,000 probes (all but the first a repeated kind): every error names
/// its own line, and the parse takes a linear pass (it took 15 s when every probe's line
/// was counted from the start).
#[test]
fn a_megabyte_manifest_names_every_line_in_one_pass() {
    let mut text = String::from("target = \"kernel\"\n");
    for _ in 0..20_000 {
        text.push_str(
            "\n[[probe]]\nkind = \"restore\"\nsymbol = \"f2fs_restore_compressed_node\"\n",
        );
        text.push_str(&format!("# {}\n", "x".repeat(20)));
    }
    assert!(text.len() > 1_000_000, "{}", text.len());
    let started = std::time::Instant::now();
    let manifest = Manifest::parse("big.toml", &text).unwrap();
    eprintln!("1 MB manifest parsed in {:?}", started.elapsed());
    assert_eq!(manifest.probes.len(), 1);
    assert_eq!(manifest.probes[0].line, 4);
    assert_eq!(manifest.errors.len(), 19_999);
    assert_eq!(
        manifest.errors[19_998],
        "big.toml:99999: kind restore is already mapped at line 4"
    );
}
