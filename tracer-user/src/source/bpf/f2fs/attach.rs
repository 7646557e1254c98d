//! Attaching the F2FS programs the planner chose: their tracepoint layouts and settings go into
//! TP_LAYOUT and CONFIG first, then each program is loaded and attached.
use crate::source::bpf::ObjectMaps as _;
use anyhow::{Context as _, Result};
use aya::{
    maps::Array,
    programs::{kprobe::KProbeLinkId, trace_point::TracePointLinkId, KProbe, TracePoint},
    Ebpf,
};
use serde::Serialize;
use tracer_common::maps;
use tracer_common::{
    TracepointLayout, CONFIG_JOURNAL_ARGS, CONFIG_NODE_READ_EVENTS, CONFIG_RAHEAD_BIT,
    TP_SUBMIT_PAGE_BIO,
};

use super::{
    counters,
    planner::{Attachment, Part, Plan, Target, REFUSED},
};
use crate::source::bpf;

/// What happened when one attachment was tried.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AttachOutcome {
    pub what: &'static str,
    pub target: String,
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The program that tells the counters a comm changed (exec, prctl(PR_SET_NAME)), and where.
pub(crate) const PROG_TASK_RENAME: &str = "f2fs_task_rename";
const RENAME_TRACEPOINT: (&str, &str) = ("task", "task_rename");

/// The program that tells the counters some task's credentials changed (setuid and its kin,
/// exec), and where.
pub(crate) const PROG_COMMIT_CREDS: &str = "f2fs_commit_creds";
const CREDS_FUNCTION: &str = "commit_creds";

/// Write the settings, then load and attach every chosen program, and the rename program the
/// counters' comms rely on. A choice the kernel refuses (the verifier, or a program whose
/// record reads reach past this tracepoint's record) is rejected in `plan` with the kernel's
/// reason and the part's next variant is tried, so the plan ends as what really attached. An
/// attachment that fails everywhere is reported, not fatal: the caller decides what it can
/// live without. `node_read_events`: node reads also go through the ring buffer as events
/// (else they are counted only, and the counts-only fast program may take them).
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    plan: &mut Plan,
    node_read_events: bool,
) -> Result<Vec<AttachOutcome>> {
    write_config(ebpf, CONFIG_RAHEAD_BIT, u32::from(plan.rahead_bit))?;
    write_config(ebpf, CONFIG_JOURNAL_ARGS, plan.journal_args.pack())?;
    write_config(ebpf, CONFIG_NODE_READ_EVENTS, u32::from(node_read_events))?;
    let rahead_bit =
        page_bio_layout(plan).map_or(u32::from(plan.rahead_bit), |l| u32::from(l.rahead_bit));
    let renames = attach_rename(ebpf);
    // Before the slot tables say so: a slot may keep its task's uid only while every
    // credential change is seen.
    let creds = attach_creds(ebpf);
    counters::init_slots(ebpf, rahead_bit, creds.attached)?;
    let mut outcomes = vec![renames, creds];
    for part in plan.parts_mut() {
        outcomes.extend(attach_part(ebpf, part, node_read_events)?);
    }
    Ok(outcomes)
}

/// Attach the part's chosen variant, or the first of its fallbacks the kernel takes: the
/// outcomes of the variant that attached (or of the last one tried, when none did).
fn attach_part(
    ebpf: &mut Ebpf,
    part: &mut Part,
    node_read_events: bool,
) -> Result<Vec<AttachOutcome>> {
    let mut outcomes = Vec::new();
    while let Some(choice) = part.chosen.clone() {
        if choice.counts_only && node_read_events {
            part.refuse_chosen("counts only, and node reads are wanted as events");
            continue;
        }
        if let Some((slot, layout)) = choice.layout {
            write_layout(ebpf, slot, layout)?;
        }
        outcomes.clear();
        let mut links = Vec::new();
        let mut refusal = None;
        for attachment in &choice.attachments {
            let result = attach_one(ebpf, attachment);
            let target = attachment.target.to_string();
            match result {
                Ok(link) => {
                    links.push(link);
                    outcomes.push(AttachOutcome::of(part.what, target, Ok(())));
                }
                Err(err) => {
                    refusal = Some(format!("{REFUSED}: {err:#}"));
                    outcomes.push(AttachOutcome::of(part.what, target, Err(err)));
                    break;
                }
            }
        }
        let Some(why) = refusal else {
            return Ok(outcomes);
        };
        for link in links {
            link.detach(ebpf);
        }
        if part.fallbacks.is_empty() {
            // The last variant: its outcome stays as the error the caller reports.
            part.refuse_chosen(&why);
            return Ok(outcomes);
        }
        log::info!(
            "{}: {} {why}; trying the next variant",
            part.what,
            choice.variant
        );
        part.refuse_chosen(&why);
    }
    Ok(outcomes)
}

/// f2fs_submit_page_bio's layout, when the plan takes node reads from it (the chosen variant
/// or a fallback: they share the tracepoint's flag bits).
fn page_bio_layout(plan: &Plan) -> Option<TracepointLayout> {
    plan.node_reads
        .chosen
        .iter()
        .chain(&plan.node_reads.fallbacks)
        .filter_map(|c| c.layout)
        .find(|(slot, _)| *slot == TP_SUBMIT_PAGE_BIO)
        .map(|(_, layout)| layout)
}

fn write_layout(ebpf: &mut Ebpf, slot: u32, layout: TracepointLayout) -> Result<()> {
    let map = ebpf.named_map_mut(maps::TP_LAYOUT)?;
    let mut layouts: Array<_, TracepointLayout> = Array::try_from(map)?;
    layouts.set(slot, layout, 0).context("writing TP_LAYOUT")
}

pub(crate) fn write_config(ebpf: &mut Ebpf, index: u32, value: u32) -> Result<()> {
    let map = ebpf.named_map_mut(maps::CONFIG)?;
    let mut config: Array<_, u32> = Array::try_from(map)?;
    config.set(index, value, 0).context("writing CONFIG")
}

/// Without it a process's comm in the counters stays the one it had at its first I/O on each
/// CPU (`sh`, not the `cat` it exec'd): reported, like any other attachment.
fn attach_rename(ebpf: &mut Ebpf) -> AttachOutcome {
    let (category, name) = RENAME_TRACEPOINT;
    let result = program(ebpf, PROG_TASK_RENAME).and_then(|program| {
        let tp: &mut TracePoint = program.try_into()?;
        bpf::load_once(tp.fd().is_ok(), || tp.load())?;
        tp.attach(category, name)?;
        Ok(())
    });
    AttachOutcome::of("comm_renames", format!("{category}:{name}"), result)
}

/// Without it the programs read the task's uid at every count (`SlotTable::uid_follows_creds`
/// stays 0): the counts are the same, each costs one more helper call.
fn attach_creds(ebpf: &mut Ebpf) -> AttachOutcome {
    let result = program(ebpf, PROG_COMMIT_CREDS).and_then(|program| {
        let kp: &mut KProbe = program.try_into()?;
        bpf::load_once(kp.fd().is_ok(), || kp.load())?;
        kp.attach(CREDS_FUNCTION, 0)?;
        Ok(())
    });
    AttachOutcome::of("uid_changes", format!("kprobe:{CREDS_FUNCTION}"), result)
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut aya::programs::Program> {
    ebpf.program_mut(name)
        .with_context(|| format!("program {name} missing from the object"))
}

impl AttachOutcome {
    /// What attaching `what` to `target` came to.
    pub(crate) fn of(what: &'static str, target: String, result: Result<()>) -> AttachOutcome {
        AttachOutcome {
            what,
            target,
            attached: result.is_ok(),
            error: result.err().map(|e| format!("{e:#}")),
        }
    }
}

/// The programs that count node reads, node writes and checkpoints.
const COUNTING_PROGRAMS: [&str; 6] = [
    super::planner::PROG_PAGE_BIO,
    super::planner::PROG_PAGE_BIO_FAST,
    super::planner::PROG_READ_BIO,
    super::planner::PROG_READ_NODE_RETURN,
    super::planner::PROG_WRITE,
    super::planner::PROG_CHECKPOINT,
];

/// Runs of the counting programs the kernel skipped (its recursion guard), per program that
/// had any: each one a count lost, said at the end of a run.
pub(crate) fn missed_counting_runs(ebpf: &Ebpf) -> Vec<(&'static str, u64)> {
    COUNTING_PROGRAMS
        .iter()
        .filter_map(|&name| match counters::missed_runs(ebpf, name) {
            Ok(Some(missed)) if missed > 0 => Some((name, missed)),
            Ok(_) => None,
            Err(err) => {
                log::warn!("{err:#}");
                None
            }
        })
        .collect()
}

/// One attached program, to be detached again when its variant is refused as a whole.
pub(crate) enum Link {
    Tracepoint(&'static str, TracePointLinkId),
    Kprobe(&'static str, KProbeLinkId),
}

impl Link {
    fn detach(self, ebpf: &mut Ebpf) {
        let result = match self {
            Link::Tracepoint(name, id) => {
                program(ebpf, name).and_then(|p| Ok(<&mut TracePoint>::try_from(p)?.detach(id)?))
            }
            Link::Kprobe(name, id) => {
                program(ebpf, name).and_then(|p| Ok(<&mut KProbe>::try_from(p)?.detach(id)?))
            }
        };
        if let Err(err) = result {
            log::warn!("detaching a refused variant's program: {err:#}");
        }
    }
}

pub(crate) fn attach_one(ebpf: &mut Ebpf, attachment: &Attachment) -> Result<Link> {
    let program = program(ebpf, attachment.program)?;
    Ok(match &attachment.target {
        Target::Tracepoint { category, name } => {
            let tp: &mut TracePoint = program.try_into()?;
            bpf::load_once(tp.fd().is_ok(), || tp.load())?;
            Link::Tracepoint(attachment.program, tp.attach(category, name)?)
        }
        Target::Kprobe { function } | Target::Kretprobe { function } => {
            bpf::arch::ensure_registers_match(&attachment.target.to_string())?;
            let kp: &mut KProbe = program.try_into()?;
            bpf::load_once(kp.fd().is_ok(), || kp.load())?;
            Link::Kprobe(attachment.program, kp.attach(function, 0)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::planner::{
        Choice, PROG_CHECKPOINT, PROG_JOURNAL_ENTRY, PROG_META_WRITE, PROG_PAGE_BIO,
        PROG_PAGE_BIO_FAST, PROG_RA_ENTRY, PROG_RA_RETURN, PROG_READ_BIO, PROG_READ_NODE_ENTRY,
        PROG_READ_NODE_RETURN, PROG_WRITE,
    };
    use super::*;
    use crate::system;

    #[test]
    fn f2fs_programs_pass_the_verifier() {
        if !system::is_root() {
            test_skip::skip("needs root to load eBPF programs");
            return;
        }
        let mut ebpf = bpf::load(64 * 1024).expect("load the object");
        for name in [
            PROG_PAGE_BIO,
            PROG_PAGE_BIO_FAST,
            PROG_READ_BIO,
            PROG_WRITE,
            PROG_CHECKPOINT,
            PROG_META_WRITE,
            PROG_TASK_RENAME,
        ] {
            let tp: &mut TracePoint = ebpf.program_mut(name).unwrap().try_into().unwrap();
            tp.load().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        for name in [
            PROG_READ_NODE_ENTRY,
            PROG_READ_NODE_RETURN,
            PROG_RA_ENTRY,
            PROG_RA_RETURN,
            PROG_JOURNAL_ENTRY,
            // Its attachment is tested in the VM (the uid phase): this kernel has no kprobes.
            PROG_COMMIT_CREDS,
        ] {
            let kp: &mut KProbe = ebpf.program_mut(name).unwrap().try_into().unwrap();
            kp.load().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
    }

    /// The rename program runs on this kernel (no F2FS needed): every comm change stamps
    /// TASK_CHANGES with a new time, which is what makes the counters read a comm again.
    #[test]
    fn a_rename_stamps_task_changes_with_a_new_time() {
        if !system::is_root() {
            test_skip::skip("needs root");
            return;
        }
        // A fresh machine may have it unmounted; the sources mount it too (source::open).
        system::ensure_tracefs().expect("tracefs mounted");
        let mut ebpf = bpf::load(64 * 1024).expect("load the object");
        let outcome = attach_rename(&mut ebpf);
        assert!(outcome.attached, "{outcome:?}");
        assert_eq!(outcome.target, "task:task_rename");
        let stamp = |ebpf: &Ebpf| -> u64 {
            let changes: Array<_, u64> =
                Array::try_from(ebpf.map(maps::TASK_CHANGES).unwrap()).unwrap();
            changes.get(&0, 0).unwrap()
        };
        let rename = |name: &std::ffi::CStr| {
            // A thread of its own: the test runner's threads keep their names.
            let name = name.to_owned();
            std::thread::spawn(move || {
                // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call.
                let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
                assert_eq!(rc, 0);
            })
            .join()
            .unwrap();
        };
        rename(c"ns-rename-1");
        let first = stamp(&ebpf);
        assert_ne!(first, 0, "no rename seen");
        rename(c"ns-rename-2");
        let second = stamp(&ebpf);
        assert!(second > first, "second rename {second} not after {first}");
    }

    /// A tracepoint of this kernel whose record ends exactly at `bytes` (the end of its last
    /// field, which is what the kernel holds a program's context reads to), if it has one.
    fn host_tracepoint_of(bytes: u16) -> Option<(String, String)> {
        let (tracefs, _) = system::ensure_tracefs().expect("tracefs mounted");
        let events = tracefs.join("events");
        let mut found: Vec<(String, String)> = Vec::new();
        for category in std::fs::read_dir(&events).ok()?.flatten() {
            let Ok(points) = std::fs::read_dir(category.path()) else {
                continue;
            };
            for point in points.flatten() {
                let Ok(text) = std::fs::read_to_string(point.path().join("format")) else {
                    continue;
                };
                let Ok(format) = crate::source::bpf::format::Format::parse(&text) else {
                    continue;
                };
                if format.record_end() == bytes {
                    let name = |e: &std::fs::DirEntry| e.file_name().to_string_lossy().into_owned();
                    found.push((name(&category), name(&point)));
                }
            }
        }
        found.sort();
        found.into_iter().next()
    }

    fn page_bio_choice(program: &'static str, counts_only: bool, at: &(String, String)) -> Choice {
        Choice {
            variant: format!("{}:{}", at.0, at.1),
            attachments: vec![Attachment {
                program,
                target: Target::Tracepoint {
                    category: at.0.clone(),
                    name: at.1.clone(),
                },
            }],
            layout: Some((TP_SUBMIT_PAGE_BIO, TracepointLayout::MAINLINE_PAGE_BIO)),
            caveat: None,
            counts_only,
        }
    }

    /// 7.x's f2fs_submit_folio_bio record is 52 bytes; the constant-offset program reads up to
    /// 56 (`type` at 52). The kernel refuses it there (EACCES at attach, not at load), so the
    /// plan must move on to the program that reads the record through the copy: here on a
    /// tracepoint of this kernel whose record is 52 bytes too. On 0c34983 the one node-read
    /// program held both paths, so every layout got the 56-byte reads and nothing attached.
    #[test]
    fn a_program_reading_past_the_record_is_refused_and_the_next_variant_attaches() {
        if !system::is_root() {
            test_skip::skip("needs root to load eBPF programs");
            return;
        }
        let at = host_tracepoint_of(52).expect("a tracepoint with a 52-byte record here");
        let mut part = Part {
            what: "node_reads",
            chosen: Some(page_bio_choice(PROG_PAGE_BIO_FAST, true, &at)),
            rejected: Vec::new(),
            fallbacks: vec![page_bio_choice(PROG_PAGE_BIO, false, &at)],
        };
        let mut ebpf = bpf::load(64 * 1024).expect("load the object");
        let outcomes = attach_part(&mut ebpf, &mut part, false).unwrap();
        let chosen = part.chosen.as_ref().expect("a variant attached");
        assert_eq!(chosen.attachments[0].program, PROG_PAGE_BIO, "{part:?}");
        assert!(outcomes.iter().all(|o| o.attached), "{outcomes:?}");
        assert_eq!(part.rejected.len(), 1, "{:?}", part.rejected);
        let why = &part.rejected[0];
        assert!(
            why.contains(REFUSED) && why.contains("ermission denied"),
            "{why}"
        );
        assert!(part.fallbacks.is_empty());
        // The kernel's count of skipped runs reads for a loaded program, not for another.
        assert_eq!(
            counters::missed_runs(&ebpf, PROG_PAGE_BIO).unwrap(),
            Some(0)
        );
        assert_eq!(counters::missed_runs(&ebpf, PROG_READ_BIO).unwrap(), None);
    }

    /// Every layout the project knows, each node-read program the planner would choose for it
    /// first, attached in this kernel to a tracepoint whose record is as long as that layout's
    /// (so the kernel's own check of the program's reads against the record is what decides):
    /// a new layout whose record is shorter than a program reads fails here, not on a user's
    /// machine.
    #[test]
    fn the_first_choice_attaches_for_every_known_layout() {
        if !system::is_root() {
            test_skip::skip("needs root to load eBPF programs");
            return;
        }
        use super::super::planner::tests::known_layouts;
        let mut checked = 0;
        for (label, view) in known_layouts() {
            let plan = super::super::planner::plan(&view, None);
            let Some(chosen) = plan.node_reads.chosen.as_ref() else {
                panic!(
                    "{label}: no node-read variant: {:?}",
                    plan.node_reads.rejected
                );
            };
            let super::super::planner::Target::Tracepoint { name, .. } =
                &chosen.attachments[0].target
            else {
                continue;
            };
            let text = &view.formats[name.as_str()];
            let end = crate::source::bpf::format::Format::parse(text)
                .unwrap()
                .record_end();
            let at = host_tracepoint_of(end)
                .unwrap_or_else(|| panic!("{label}: no tracepoint of {end} bytes here"));
            let mut part = plan.node_reads.clone();
            for choice in std::iter::once(part.chosen.as_mut().unwrap()).chain(&mut part.fallbacks)
            {
                for attachment in &mut choice.attachments {
                    attachment.target = Target::Tracepoint {
                        category: at.0.clone(),
                        name: at.1.clone(),
                    };
                }
            }
            let mut ebpf = bpf::load(64 * 1024).expect("load the object");
            let outcomes = attach_part(&mut ebpf, &mut part, false).unwrap();
            assert!(
                outcomes.iter().all(|o| o.attached)
                    && part.rejected.len() == plan.node_reads.rejected.len(),
                "{label}: {} on a {end}-byte record: {outcomes:?} {:?}",
                chosen.attachments[0].program,
                part.rejected
            );
            checked += 1;
        }
        assert!(checked >= 3, "only {checked} layouts checked");
    }

    /// Every tracepoint variant of every known layout, each of its programs on its own (the
    /// fast one, the copying one, f2fs_submit_read_bio's, which metadata-cache kernels use),
    /// attached to a tracepoint of this kernel whose record is as long: none reads past it.
    #[test]
    fn every_tracepoint_choice_attaches_for_every_known_layout() {
        if !system::is_root() {
            test_skip::skip("needs root to load eBPF programs");
            return;
        }
        use super::super::planner::{tests::known_layouts, NodeReadVariant};
        let mut checked = 0;
        for (label, view) in known_layouts() {
            for variant in [
                NodeReadVariant::PageBio,
                NodeReadVariant::FolioBio,
                NodeReadVariant::ReadBio,
            ] {
                let plan = super::super::planner::plan(&view, Some(variant));
                let part = &plan.node_reads;
                for choice in part.chosen.iter().chain(&part.fallbacks) {
                    let Target::Tracepoint { name, .. } = &choice.attachments[0].target else {
                        continue;
                    };
                    let end = crate::source::bpf::format::Format::parse(&view.formats[name])
                        .unwrap()
                        .record_end();
                    let at = host_tracepoint_of(end)
                        .unwrap_or_else(|| panic!("{label}: no tracepoint of {end} bytes here"));
                    let program = choice.attachments[0].program;
                    let mut one = Part {
                        what: "node_reads",
                        chosen: Some(page_bio_choice(program, choice.counts_only, &at)),
                        rejected: Vec::new(),
                        fallbacks: Vec::new(),
                    };
                    one.chosen.as_mut().unwrap().layout = choice.layout;
                    let mut ebpf = bpf::load(64 * 1024).expect("load the object");
                    let outcomes = attach_part(&mut ebpf, &mut one, false).unwrap();
                    assert!(
                        outcomes.iter().all(|o| o.attached) && one.rejected.is_empty(),
                        "{label} {name}: {program} on a {end}-byte record: {:?}",
                        one.rejected
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 8, "only {checked} choices checked");
    }
}
