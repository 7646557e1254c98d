//! Attaching the F2FS programs the planner chose: their tracepoint layouts and settings go into
//! TP_LAYOUT and CONFIG first, then each program is loaded and attached.
use crate::source::bpf::ObjectMaps as _;
use anyhow::{Context as _, Result};
use aya::{
    maps::Array,
    programs::{KProbe, TracePoint},
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
    planner::{Attachment, Plan, Target},
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

/// Write the layouts and settings, then load and attach every chosen program, and the rename
/// program the counters' comms rely on. An attachment that fails is reported, not fatal: the
/// caller decides what it can live without. `node_read_events`: node reads also go through
/// the ring buffer as events (else they are counted only).
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    plan: &Plan,
    node_read_events: bool,
) -> Result<Vec<AttachOutcome>> {
    write_layouts(ebpf, plan)?;
    write_config(ebpf, CONFIG_NODE_READ_EVENTS, u32::from(node_read_events))?;
    let page_bio = page_bio_layout(plan);
    let fast = !node_read_events && page_bio.is_some_and(|l| l.is_mainline_page_bio());
    let rahead_bit = page_bio.map_or(u32::from(plan.rahead_bit), |l| u32::from(l.rahead_bit));
    let renames = attach_rename(ebpf);
    // Before the slot tables say so: a slot may keep its task's uid only while every
    // credential change is seen.
    let creds = attach_creds(ebpf);
    counters::init_slots(ebpf, fast, rahead_bit, creds.attached)?;
    let mut outcomes = vec![renames, creds];
    for part in plan.parts() {
        let Some(choice) = &part.chosen else {
            continue;
        };
        for attachment in &choice.attachments {
            let result = attach_one(ebpf, attachment);
            outcomes.push(AttachOutcome::of(
                part.what,
                attachment.target.to_string(),
                result,
            ));
        }
    }
    Ok(outcomes)
}

/// f2fs_submit_page_bio's layout, when the plan takes node reads from it.
fn page_bio_layout(plan: &Plan) -> Option<TracepointLayout> {
    plan.parts()
        .iter()
        .filter_map(|part| part.chosen.as_ref().and_then(|c| c.layout))
        .find(|(slot, _)| *slot == TP_SUBMIT_PAGE_BIO)
        .map(|(_, layout)| layout)
}

fn write_layouts(ebpf: &mut Ebpf, plan: &Plan) -> Result<()> {
    let map = ebpf.named_map_mut(maps::TP_LAYOUT)?;
    let mut layouts: Array<_, TracepointLayout> = Array::try_from(map)?;
    for part in plan.parts() {
        if let Some((slot, layout)) = part.chosen.as_ref().and_then(|c| c.layout) {
            layouts.set(slot, layout, 0).context("writing TP_LAYOUT")?;
        }
    }
    write_config(ebpf, CONFIG_RAHEAD_BIT, u32::from(plan.rahead_bit))?;
    write_config(ebpf, CONFIG_JOURNAL_ARGS, plan.journal_args.pack())
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

fn attach_one(ebpf: &mut Ebpf, attachment: &Attachment) -> Result<()> {
    let program = program(ebpf, attachment.program)?;
    match &attachment.target {
        Target::Tracepoint { category, name } => {
            let tp: &mut TracePoint = program.try_into()?;
            bpf::load_once(tp.fd().is_ok(), || tp.load())?;
            tp.attach(category, name)?;
        }
        Target::Kprobe { function } | Target::Kretprobe { function } => {
            bpf::arch::ensure_registers_match(&attachment.target.to_string())?;
            let kp: &mut KProbe = program.try_into()?;
            bpf::load_once(kp.fd().is_ok(), || kp.load())?;
            kp.attach(function, 0)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::planner::{
        PROG_CHECKPOINT, PROG_JOURNAL_ENTRY, PROG_META_WRITE, PROG_PAGE_BIO, PROG_RA_ENTRY,
        PROG_RA_RETURN, PROG_READ_BIO, PROG_READ_NODE_ENTRY, PROG_READ_NODE_RETURN, PROG_WRITE,
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
}
