//! The mechanism's own counters (issue 49): the cover letter's figures come from counters the
//! patch keeps, and an implementation shows them in debugfs as `name value` lines. Whatever its
//! functions are called or inlined into, those totals are exact: each window they are read and
//! sent on as `Counter` events, so the model shows exact totals for the kinds no event tells
//! one by one, and the cache's entries per queue even where no insert or departure is seen.
//!
//! Which file: under `<debugfs>/f2fs/<device>/` (the device as /sys/fs/f2fs names it), the
//! regular file with the most lines that name a counter below; the file's own name is not
//! looked at. Which counter: by the words of its name, the cover letter's vocabulary, first
//! rule that fits (the name lowercased):
//! - `budget`, `_ns` or `latency` but a restore's time, `bytes`, `size`, `charge`: not a count
//!   of a kind (`restore_ns`, `restore_time_ns` -> the restores' summed latency);
//! - `entries`/`entry` with a queue word (`raw`, `256`, `512`, `1024`) -> entries on that queue
//!   now (a gauge);
//! - `second_chance`, `referenced`, `chance`, `rotate` -> second chances, per reason when a
//!   reason word is there (`worker`, `shrinker`, `race`);
//! - `restore`/`decompress` with `nomem` -> restore_nomem; with `fail`, `bad`, `invalid`,
//!   `corrupt` -> restore_fail, per reason by the longest reason name it holds (`slot_size`,
//!   `payload_len`, `lz4_len`, `crc`, `footer`, `inode_checksum`, `node_type`); else restore;
//! - `conver`, `pack` or `compress` (not `decompress`, not `compressed`) with `reject` ->
//!   convert_reject; with `abort`, `discard` or `race` -> convert_abort; with `nomem` or `fail`:
//!   none (not a kind); else convert;
//! - `reclaim`, `evict` -> reclaim, per queue word; `insert`, `attach` -> insert; `forget`,
//!   `detach` -> forget.
//!
//! A kind kept both per queue or reason and as a total sends only the parts, so nothing is
//! counted twice. The first reading is the baseline: the model counts from it.
//!
//! Without such a file, the device's section of F2FS's status file (`<debugfs>/f2fs/status`,
//! which the RFC's debug.c change extends): after the `partition info(<device>)` header, the
//! lines `  - <label>: <items>` that follow a line naming the node cache, each item named
//! `<label>_<its words>` (`  - restores: 5, failures: 1` -> `restores 5`, `restores_failures
//! 1`) and read by the same rules.
use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use tracer_common::{
    files::{self, Symlinks},
    Event, EventKind, Measure, QUEUE_1024, QUEUE_256, QUEUE_512, QUEUE_RAW, RESTORE_FAIL_REASONS,
    SECOND_CHANCE_REASONS,
};

/// A counters file is a few KiB: anything longer is not one.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// At least this many counters of kinds make a counters file.
const MIN_COUNTERS: usize = 3;
/// Where debugfs is mounted on Linux and Android.
pub(crate) const DEBUGFS: &str = "/sys/kernel/debug";

/// What one counter line measures: a kind's events (or a gauge), per queue or reason code.
pub(crate) type Meaning = (Measure, Option<u8>);

/// The meaning of a counter's name, if it has one (the module doc's rules).
pub(crate) fn meaning_of(name: &str) -> Option<Meaning> {
    let name = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    let restores = has(&["restore", "decompress"]);
    if has(&["budget", "bytes", "size", "charge"]) && !has(&["slot_size"]) {
        return None;
    }
    if name.ends_with("_ns") || has(&["latency", "time"]) {
        return restores.then_some((Measure::RestoreNs, None));
    }
    if has(&["entries", "entry"]) {
        return queue_word(&name).map(|q| (Measure::Entries, Some(q)));
    }
    let kind = |kind| Measure::Events(kind);
    if has(&["second_chance", "referenced", "chance", "rotate"]) {
        return Some((
            kind(EventKind::SecondChance),
            reason_word(&name, &SECOND_CHANCE_REASONS),
        ));
    }
    if restores {
        if has(&["nomem"]) {
            return Some((kind(EventKind::RestoreNomem), None));
        }
        if has(&["fail", "bad", "invalid", "corrupt"]) {
            return Some((
                kind(EventKind::RestoreFail),
                reason_word(&name, &RESTORE_FAIL_REASONS),
            ));
        }
        return Some((kind(EventKind::Restore), None));
    }
    if has(&["conver", "pack"]) || (has(&["compress"]) && !has(&["compressed"])) {
        if has(&["reject"]) {
            return Some((kind(EventKind::ConvertReject), None));
        }
        if has(&["abort", "discard", "race"]) {
            return Some((kind(EventKind::ConvertAbort), None));
        }
        if has(&["nomem", "fail"]) {
            return None;
        }
        return Some((kind(EventKind::Convert), None));
    }
    if has(&["reclaim", "evict"]) {
        return Some((kind(EventKind::Reclaim), queue_word(&name)));
    }
    if has(&["insert", "attach"]) {
        return Some((kind(EventKind::Insert), None));
    }
    if has(&["forget", "detach"]) {
        return Some((kind(EventKind::Forget), None));
    }
    None
}

/// The queue a name names by a word of its own (`reclaim_256`, `entries raw`).
fn queue_word(name: &str) -> Option<u8> {
    let words: Vec<&str> = name.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    [
        ("raw", QUEUE_RAW),
        ("256", QUEUE_256),
        ("512", QUEUE_512),
        ("1024", QUEUE_1024),
    ]
    .into_iter()
    .find(|(word, _)| words.contains(word))
    .map(|(_, queue)| queue)
}

/// The reason a name holds, the longest that fits (`payload_len` before a shorter one).
fn reason_word(name: &str, reasons: &[(u8, &str)]) -> Option<u8> {
    reasons
        .iter()
        .filter(|(_, reason)| name.contains(reason))
        .max_by_key(|(_, reason)| reason.len())
        .map(|(code, _)| *code)
}

/// `name value` lines (one word, then an unsigned integer); other lines are skipped.
pub(crate) fn parse(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (name, value) = (parts.next()?, parts.next()?);
            if parts.next().is_some() || !name.chars().next()?.is_ascii_alphabetic() {
                return None;
            }
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Each device's node-cache counters in F2FS's status file, named as the module doc says.
pub(crate) fn parse_status(text: &str) -> BTreeMap<String, Vec<(String, u64)>> {
    let mut devices: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    let mut device: Option<String> = None;
    let mut in_section = false;
    for line in text.lines() {
        if let Some(at) = line.find("partition info(") {
            let rest = &line[at + "partition info(".len()..];
            device = rest.split(')').next().map(str::to_string);
            in_section = false;
            continue;
        }
        let Some(device) = &device else { continue };
        let trimmed = line.trim_start();
        if !trimmed.starts_with('-') {
            in_section = line.to_ascii_lowercase().contains("node cache");
            continue;
        }
        if !in_section {
            continue;
        }
        let Some((label, items)) = trimmed.trim_start_matches('-').split_once(':') else {
            continue;
        };
        let label = words_joined(label);
        let counters = devices.entry(device.clone()).or_default();
        for item in items.split(',') {
            let words: Vec<&str> = item
                .split(|c: char| c.is_whitespace() || c == ':')
                .filter(|w| !w.is_empty())
                .collect();
            let Some((value, names)) = words.split_last() else {
                continue;
            };
            let Ok(value) = value.parse::<u64>() else {
                continue;
            };
            let name = if names.is_empty() {
                label.clone()
            } else {
                format!("{label}_{}", names.join("_"))
            };
            counters.push((name, value));
        }
    }
    devices
}

fn words_joined(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join("_")
}

/// The lines of a file that mean something, parts kept over their total.
fn mapped(lines: &[(String, u64)]) -> Vec<(String, Meaning)> {
    let meant: Vec<(String, Meaning)> = lines
        .iter()
        .filter_map(|(name, _)| meaning_of(name).map(|m| (name.clone(), m)))
        .collect();
    let parts: Vec<Measure> = meant
        .iter()
        .filter(|(_, (_, sub))| sub.is_some())
        .map(|(_, (m, _))| *m)
        .collect();
    let has_parts = |measure: Measure| parts.contains(&measure);
    let mut kept: Vec<(String, Meaning)> = Vec::new();
    for (name, meaning) in meant {
        let total_beside_parts = meaning.1.is_none() && has_parts(meaning.0);
        // Two lines of one meaning: the first is kept (a file of ours has none).
        if !total_beside_parts && !kept.iter().any(|(_, m)| *m == meaning) {
            kept.push((name, meaning));
        }
    }
    kept
}

/// One device's counters file.
#[derive(Clone, Debug)]
pub(crate) struct CounterFile {
    /// The device number as the events carry it.
    pub dev: u32,
    pub path: PathBuf,
    /// The device's section of F2FS's status file (its name there), not a file of its own.
    section: Option<String>,
    /// (line name, what it measures), in the file's order.
    pub lines: Vec<(String, Meaning)>,
    /// Each line's value when last sent, and at the first reading.
    last: BTreeMap<String, u64>,
    first: BTreeMap<String, u64>,
}

impl CounterFile {
    /// The kinds it counts (gauges and time sums aside).
    pub(crate) fn kinds(&self) -> Vec<EventKind> {
        let mut kinds: Vec<EventKind> = self
            .lines
            .iter()
            .filter_map(|(_, (m, _))| match m {
                Measure::Events(kind) => Some(*kind),
                _ => None,
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// What it counted of `kind` since its first reading (its parts summed).
    pub(crate) fn counted(&self, kind: EventKind) -> u64 {
        self.lines
            .iter()
            .filter(|(_, (m, _))| *m == Measure::Events(kind))
            .filter_map(|(name, _)| {
                let first = self.first.get(name)?;
                Some(self.last.get(name)?.saturating_sub(*first))
            })
            .sum()
    }

    /// Read it now: a `Counter` event for every line that changed since the last reading (all of
    /// them the first time), stamped `ts_ns`.
    pub(crate) fn sample(&mut self, ts_ns: u64) -> std::io::Result<Vec<Event>> {
        let bytes = files::read_regular(&self.path, Symlinks::Refuse, MAX_FILE_BYTES)?;
        let text = String::from_utf8_lossy(&bytes);
        let values: BTreeMap<String, u64> = match &self.section {
            None => parse(&text).into_iter().collect(),
            Some(device) => parse_status(&text)
                .remove(device)
                .unwrap_or_default()
                .into_iter()
                .collect(),
        };
        let mut events = Vec::new();
        for (name, (measure, sub)) in &self.lines {
            let Some(&value) = values.get(name) else {
                continue;
            };
            if self.last.get(name) == Some(&value) {
                continue;
            }
            self.last.insert(name.clone(), value);
            self.first.entry(name.clone()).or_insert(value);
            events.push(Event::counter(ts_ns, self.dev, *measure, *sub, value));
        }
        Ok(events)
    }
}

/// The counters of every F2FS device here with the RFC's knobs, under debugfs; and what was
/// found missing.
pub(crate) fn find_for_rfc_devices() -> (Vec<CounterFile>, Vec<String>) {
    let devices: Vec<(String, u32)> = crate::system::f2fs_devices(Path::new("/sys/fs/f2fs"))
        .into_iter()
        .filter(|d| d.node_compress_threshold || d.node_compress_interval)
        .filter_map(|d| {
            super::f2fs::areas::device_of(&d.name)
                .ok()
                .map(|(dev, _)| (d.name, dev))
        })
        .collect();
    find(Path::new(DEBUGFS), &devices)
}

/// The counters file of each device in `devices` (name, number) under `debugfs`, and what was
/// found missing, one line each.
pub(crate) fn find(debugfs: &Path, devices: &[(String, u32)]) -> (Vec<CounterFile>, Vec<String>) {
    let root = debugfs.join("f2fs");
    if !files::is_real_dir(&root) {
        return (
            Vec::new(),
            vec![format!(
                "no {} (debugfs not mounted, or F2FS built without CONFIG_F2FS_STAT_FS)",
                root.display()
            )],
        );
    }
    let mut found = Vec::new();
    let mut notes = Vec::new();
    for (device, dev) in devices {
        match best_file(&root.join(device)) {
            Some((path, lines)) => {
                log::info!(
                    "{device}: the node cache's counters in {} ({} lines)",
                    path.display(),
                    lines.len()
                );
                found.push(CounterFile {
                    dev: *dev,
                    path,
                    section: None,
                    lines,
                    last: BTreeMap::new(),
                    first: BTreeMap::new(),
                })
            }
            None => match status_section(&root, device) {
                Some(file) => found.push(CounterFile { dev: *dev, ..file }),
                None => notes.push(format!(
                    "{device}: no counters file in {}, and no node cache section in {}",
                    root.join(device).display(),
                    root.join(STATUS).display()
                )),
            },
        }
    }
    (found, notes)
}

/// F2FS's status file, under `<debugfs>/f2fs`.
const STATUS: &str = "status";

/// The device's section of the status file, when it names enough counters of kinds.
fn status_section(root: &Path, device: &str) -> Option<CounterFile> {
    let path = root.join(STATUS);
    let bytes = files::read_regular(&path, Symlinks::Refuse, MAX_FILE_BYTES).ok()?;
    let counters = parse_status(&String::from_utf8_lossy(&bytes)).remove(device)?;
    let lines = mapped(&counters);
    let kinds = lines
        .iter()
        .filter(|(_, (m, _))| matches!(m, Measure::Events(_)))
        .count();
    (kinds >= MIN_COUNTERS).then(|| {
        log::info!(
            "{device}: the node cache's counters in {}'s section ({} lines)",
            path.display(),
            lines.len()
        );
        CounterFile {
            dev: 0,
            path,
            section: Some(device.to_string()),
            lines,
            last: BTreeMap::new(),
            first: BTreeMap::new(),
        }
    })
}

/// The regular file in `dir` with the most counters of kinds, if it has enough.
fn best_file(dir: &Path) -> Option<(PathBuf, Vec<(String, Meaning)>)> {
    if !files::is_real_dir(dir) {
        return None;
    }
    type Candidate = (usize, PathBuf, Vec<(String, Meaning)>);
    let mut best: Option<Candidate> = None;
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let Ok(bytes) = files::read_regular(&path, Symlinks::Refuse, MAX_FILE_BYTES) else {
            continue;
        };
        let lines = mapped(&parse(&String::from_utf8_lossy(&bytes)));
        let kinds = lines
            .iter()
            .filter(|(_, (m, _))| matches!(m, Measure::Events(_)))
            .count();
        if kinds >= MIN_COUNTERS && best.as_ref().is_none_or(|(n, _, _)| kinds > *n) {
            best = Some((kinds, path, lines));
        }
    }
    best.map(|(_, path, lines)| (path, lines))
}

#[cfg(test)]
mod tests {
    use tracer_common::{
        Decoded, RESTORE_FAIL_CRC, RESTORE_FAIL_PAYLOAD_LEN, SECOND_CHANCE_BY_RACE,
    };

    use super::*;

    /// The reference module's counters file (kmod/README.md), as its debugfs prints it.
    const MODULE: &str = "inserts 10\nraw_hits 4\nconversions 7\nconvert_rejects 2\n\
        convert_aborts 1\nconvert_nomem 0\nrestores 3\nrestore_ns 4500\nrestore_fail_slot_size 0\n\
        restore_fail_payload_len 1\nrestore_fail_lz4_len 0\nrestore_fail_crc 0\n\
        restore_fail_footer 0\nrestore_fail_inode_checksum 0\nrestore_fail_node_type 0\n\
        restore_fails 1\nrestore_nomem 0\nreclaim_raw 2\nreclaim_256 1\nreclaim_512 0\n\
        reclaim_1024 0\nreclaims 3\nbudget_reclaims 1\nsecond_chance_worker 5\n\
        second_chance_shrinker 1\nsecond_chance_race 1\nsecond_chances 7\nworker_passes 9\n\
        shrinker_calls 2\nforgets 1\nentries_raw 3\nentries_256 2\nentries_512 0\n\
        entries_1024 0\nentries 5\nentry_size 48\nentry_charge 88\nentry_bytes 440\n\
        raw_bytes 12288\nslot_bytes 512\nfixed_size 99\nfixed_bytes 19960\n\
        attributed_bytes 33200\n";

    #[test]
    fn every_kind_of_the_modules_file_is_read_once() {
        let lines = mapped(&parse(MODULE));
        let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "inserts",
                "conversions",
                "convert_rejects",
                "convert_aborts",
                "restores",
                "restore_ns",
                "restore_fail_slot_size",
                "restore_fail_payload_len",
                "restore_fail_lz4_len",
                "restore_fail_crc",
                "restore_fail_footer",
                "restore_fail_inode_checksum",
                "restore_fail_node_type",
                "restore_nomem",
                "reclaim_raw",
                "reclaim_256",
                "reclaim_512",
                "reclaim_1024",
                "second_chance_worker",
                "second_chance_shrinker",
                "second_chance_race",
                "forgets",
                "entries_raw",
                "entries_256",
                "entries_512",
                "entries_1024",
            ]
        );
        let meaning = |name: &str| lines.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(
            meaning("restore_fail_payload_len"),
            (
                Measure::Events(EventKind::RestoreFail),
                Some(RESTORE_FAIL_PAYLOAD_LEN)
            )
        );
        assert_eq!(
            meaning("second_chance_race"),
            (
                Measure::Events(EventKind::SecondChance),
                Some(SECOND_CHANCE_BY_RACE)
            )
        );
        assert_eq!(
            meaning("reclaim_256"),
            (Measure::Events(EventKind::Reclaim), Some(QUEUE_256))
        );
        assert_eq!(meaning("entries_raw"), (Measure::Entries, Some(QUEUE_RAW)));
        assert_eq!(meaning("restore_ns"), (Measure::RestoreNs, None));
    }

    #[test]
    fn another_authors_words_mean_the_same() {
        for (name, meaning) in [
            (
                "compressions",
                Some((Measure::Events(EventKind::Convert), None)),
            ),
            (
                "pack_rejected",
                Some((Measure::Events(EventKind::ConvertReject), None)),
            ),
            (
                "decompress_bad_crc",
                Some((
                    Measure::Events(EventKind::RestoreFail),
                    Some(RESTORE_FAIL_CRC),
                )),
            ),
            (
                "referenced_rotations",
                Some((Measure::Events(EventKind::SecondChance), None)),
            ),
            (
                "evictions_512",
                Some((Measure::Events(EventKind::Reclaim), Some(QUEUE_512))),
            ),
            ("detaches", Some((Measure::Events(EventKind::Forget), None))),
            ("compressed_entries", None),
            ("convert_nomem", None),
            ("raw_hits", None),
            ("attributed_bytes", None),
        ] {
            assert_eq!(meaning_of(name), meaning, "{name}");
        }
    }

    /// The reference module's section of the status file (kmod's debug.c), after another
    /// device's block.
    const STATUS_TEXT: &str = "\n=====[ partition info(vdc). #0, RW, CP: Good]=====\n\
        [SB: 1] [CP: 2] [SIT: 2] [NAT: 4] [SSA: 2] [MAIN: 500(OverProv:32 Resv:16)]\n\
        \n=====[ partition info(vdb). #1, RW, CP: Good]=====\n\
        Utilization: 3% (1234 valid blocks)\n  - Node: 40 (Inode: 30, Other: 10)\n\
        \nNode cache: threshold 25%, interval 100 ms\n\
          - entries: raw 7, 256 9, 512 0, 1024 2\n\
          - conversions: 40, rejects: 3, aborts: 1\n\
          - restores: 12, failures: 2, nomem: 0\n\
          - reclaims: raw 5, 256 6, 512 0, 1024 1\n\
          - second chances: worker 8, shrinker 2, race 1\n";

    #[test]
    fn a_devices_section_of_the_status_file_reads_as_counters() {
        let devices = parse_status(STATUS_TEXT);
        assert!(!devices.contains_key("vdc"), "no node cache section there");
        let lines = mapped(&devices["vdb"]);
        let meaning = |name: &str| {
            lines
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} in {lines:?}"))
                .1
        };
        assert_eq!(
            meaning("conversions"),
            (Measure::Events(EventKind::Convert), None)
        );
        assert_eq!(
            meaning("conversions_rejects"),
            (Measure::Events(EventKind::ConvertReject), None)
        );
        assert_eq!(
            meaning("restores_failures"),
            (Measure::Events(EventKind::RestoreFail), None)
        );
        assert_eq!(
            meaning("restores_nomem"),
            (Measure::Events(EventKind::RestoreNomem), None)
        );
        assert_eq!(
            meaning("second_chances_race"),
            (
                Measure::Events(EventKind::SecondChance),
                Some(SECOND_CHANCE_BY_RACE)
            )
        );
        assert_eq!(
            meaning("entries_1024"),
            (Measure::Entries, Some(QUEUE_1024))
        );
        let values: BTreeMap<String, u64> = devices["vdb"].iter().cloned().collect();
        assert_eq!(
            (values["conversions_aborts"], values["reclaims_1024"]),
            (1, 1)
        );
        // Found and sampled when the device has no counters file of its own.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("f2fs/vdb")).unwrap();
        fs::write(dir.path().join("f2fs/status"), STATUS_TEXT).unwrap();
        let (mut found, notes) = find(dir.path(), &[("vdb".into(), 9), ("vdd".into(), 10)]);
        assert_eq!(found.len(), 1, "{notes:?}");
        assert!(notes[0].contains("no node cache section"), "{notes:?}");
        let first = found[0].sample(1).unwrap();
        assert_eq!(first.len(), lines.len());
        assert!(first.iter().all(|e| e.dev == 9));
        assert_eq!(
            found[0].kinds().len(),
            8,
            "all but insert, forget and node_read"
        );
    }

    #[test]
    fn only_changed_lines_are_sent_again() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("f2fs/vdb");
        fs::create_dir_all(&device).unwrap();
        fs::write(device.join("stats"), MODULE).unwrap();
        fs::write(device.join("fault"), "none 0\n").unwrap();
        let (mut found, notes) = find(dir.path(), &[("vdb".into(), 7), ("vdc".into(), 8)]);
        assert_eq!(found.len(), 1);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let file = &mut found[0];
        assert_eq!(file.path, device.join("stats"));
        let first = file.sample(5).unwrap();
        assert_eq!(first.len(), file.lines.len());
        fs::write(
            device.join("stats"),
            MODULE.replace("conversions 7", "conversions 9"),
        )
        .unwrap();
        let second = file.sample(6).unwrap();
        assert_eq!(second.len(), 1);
        let Decoded::Counter(reading) = second[0].decode() else {
            panic!("{:?}", second[0]);
        };
        assert_eq!(
            (reading.measure, reading.sub, reading.value, second[0].dev),
            (Measure::Events(EventKind::Convert), None, 9, 7)
        );
    }
}
