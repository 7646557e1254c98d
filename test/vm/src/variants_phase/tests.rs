use super::*;

#[test]
fn the_guest_config_names_each_variants_lookups_and_journal_registers() {
    let config = guest_config();
    assert!(config.contains("VARIANTS=\"folio node-folio cp-charmsg journal-sbi\"\n"));
    assert!(config.contains(
        "LOOKUPS_node_folio=\"f2fs_get_node_folio f2fs_get_inode_folio f2fs_get_xnode_folio\"\n"
    ));
    assert!(config.contains("JOURNAL_journal_sbi=\"%dx %r8\"\n"));
    assert!(config.contains("JOURNAL_folio=\"%si %cx\"\n"));
    assert!(config.contains("KPROBE_READS=\"node-folio\"\n"));
}

#[test]
fn guest_errors_are_told_apart_by_variant() {
    assert!(is_about("node-folio: insmod", "node-folio"));
    assert!(is_about(
        "stream node-folio_kprobe exited early",
        "node-folio"
    ));
    assert!(is_about("stream folio not ready after 60 s", "folio"));
    assert!(!is_about("stream node-folio_kprobe exited early", "folio"));
    assert!(!is_about("node-folio: insmod", "folio"));
}

#[test]
fn test_data_is_compared_without_ids_and_addresses() {
    assert_eq!(
        normal_format("name: x\nID: 1234\nformat:\n"),
        normal_format("name: x\nID: 99\nformat:\n")
    );
    assert_eq!(
        normal_kallsyms("ffffffffc0a00000 t read_node_folio\t[f2fs]\n"),
        normal_kallsyms("ffffffffc0b11110 t read_node_folio\t[f2fs]\n")
    );
    let mut problems = Vec::new();
    judge(
        &Figures {
            attributed: 3,
            iostat: 3,
            writes: 2,
            write_delta: 2,
            checkpoints: 1,
            cp_delta: 1,
            journal: 4,
            journal_hist: Some(4),
            accesses: Some(9),
            lookups: Some(9),
        },
        &mut problems,
    );
    assert!(problems.is_empty(), "{problems:?}");
    judge(
        &Figures {
            journal_hist: Some(5),
            ..Figures::default()
        },
        &mut problems,
    );
    assert_eq!(problems.len(), 5, "{problems:?}");
}

#[test]
fn lookups_must_be_attached_by_fentry_as_the_ready_line_says() {
    let err = "nodescope stream: ready (attached: task:task_rename, kprobe:commit_creds, \
               fentry f2fs_get_node_folio, kprobe f2fs_get_inode_folio (fentry refused: EPERM), \
               tracepoint filemap:mm_filemap_delete_from_page_cache)\n";
    let attached = accesses::attached_targets(err);
    assert_eq!(attached.len(), 5);
    assert_eq!(attached[2], "fentry f2fs_get_node_folio");
    assert!(accesses::on_trampolines(err, &["f2fs_get_node_folio"]).is_empty());
    assert_eq!(
        accesses::on_trampolines(err, &["f2fs_get_node_folio", "f2fs_get_inode_folio"]),
        ["f2fs_get_inode_folio not attached by fentry (attached: \
             [\"kprobe f2fs_get_inode_folio (fentry refused: EPERM)\"])"]
    );
    assert_eq!(
        accesses::on_trampolines("no ready line", &["f2fs_get_node_page"]),
        ["f2fs_get_node_page not attached by fentry (attached: [])"]
    );
}
