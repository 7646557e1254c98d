//! `nodescope probe --discover`: find F2FS's functions for each event kind of the probe
//! manifest in the kernel's own BTF and kallsyms, map each value a kind needs to an argument or
//! a struct field offset, and write a manifest `manifest::Manifest` loads. The rules are in
//! rules.rs; what cannot be mapped is listed with the reason. Without BTF only kallsyms names
//! are matched and the probes count calls (no argument is mapped).
pub(crate) mod btf;
pub(crate) mod kallsyms;
pub(crate) mod rules;
pub(crate) mod startup;
pub(crate) mod tracepoints;

use std::fmt::Write as _;

use anyhow::Result;
use tracer_common::EventKind;

use self::{
    btf::{BtfFiles, Function, KernelBtf},
    kallsyms::{Kallsyms, Resolved},
    rules::Context,
};
use super::manifest::{At, PROBE_KINDS};

/// One kind's function, its symbol and its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The C function (BTF's name, or the C name of a kallsyms symbol).
    pub function: String,
    /// `name(param, ...)` when BTF has it.
    pub signature: Option<String>,
    /// What to attach to (may carry an LTO/CFI suffix); for a tracepoint `category/name`.
    pub symbol: String,
    /// A tracepoint of the patch, not a function.
    pub tracepoint: bool,
    pub at: At,
    pub when: Option<String>,
    /// (field, manifest value).
    pub values: Vec<(String, String)>,
    /// (field, why it is not mapped).
    pub unmapped: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Found(Found),
    /// Why no probe is written.
    Missing(String),
}

/// Everything `--discover` found.
#[derive(Clone, Debug)]
pub(crate) struct Discovery {
    /// Where BTF came from, or None (kallsyms names only).
    pub btf: Option<String>,
    pub kallsyms: String,
    /// The node-cache entry type and its members (`name@offset`), when BTF has one.
    pub entry: Option<String>,
    /// The node lookup function with its nid argument (no kind: reported for the user).
    pub node_lookup: Outcome,
    pub kinds: Vec<(EventKind, Outcome)>,
    /// What the user should know about the inputs.
    pub notes: Vec<String>,
}

/// Inputs: F2FS's BTF (None: kallsyms only) and the text of a kallsyms file.
pub(crate) fn discover(
    btf: Option<&BtfFiles>,
    kallsyms_name: &str,
    kallsyms: &str,
) -> Result<Discovery> {
    let symbols = Kallsyms::parse(kallsyms);
    match btf {
        Some(files) => with_btf(files, kallsyms_name, &symbols),
        None => Ok(without_btf(kallsyms_name, &symbols)),
    }
}

fn with_btf(files: &BtfFiles, kallsyms_name: &str, symbols: &Kallsyms) -> Result<Discovery> {
    let btf = KernelBtf::load(files)?;
    let functions = btf.functions()?;
    // An entry type is F2FS's only if an F2FS function takes it: with F2FS built in, all of
    // vmlinux's structs are searched, and some elsewhere have crc, slot and len members too.
    let mut entry_types = btf.structs_with(&rules::ENTRY_WORDS)?;
    entry_types.retain(|name| {
        functions.iter().any(|f| {
            (f.name.contains("f2fs") || f.name.contains("node_cache"))
                && f.params.iter().any(|p| p.shape.points_to(name))
        })
    });
    // Two candidate entry types would make every mem() a guess: use none and say so.
    let entry = match entry_types.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let entry_note = match entry_types.as_slice() {
        [] => None,
        [one] => Some(describe_struct(&btf, one)),
        many => Some(format!(
            "several candidates, none used: {}",
            many.join(", ")
        )),
    };
    let found = |kind: EventKind, candidates: Vec<&Function>| -> Outcome {
        pick(kind, candidates, |function| {
            let context = Context {
                btf: &btf,
                function,
                entry: entry.as_deref(),
                kind,
            };
            probe_for(kind, function, symbols, |field| context.map(field))
        })
    };
    let by_names = |names: &[&str]| -> Vec<&Function> {
        names
            .iter()
            .filter_map(|n| functions.iter().find(|f| f.name == *n))
            .collect()
    };
    let in_scope = |f: &&Function| {
        f.name.contains("node_cache")
            || entry
                .as_deref()
                .is_some_and(|e| f.params.iter().any(|p| p.shape.points_to(e)))
    };
    let kinds = PROBE_KINDS
        .iter()
        .map(|&kind| {
            if kind == EventKind::NodeRead {
                return (kind, found(kind, by_names(&rules::NODE_READ_FUNCTIONS)));
            }
            let (one_event, passes): (Vec<&Function>, Vec<&Function>) = functions
                .iter()
                .filter(in_scope)
                .filter(|f| rules::rfc_kind_of_function(&f.name) == Some(kind))
                .partition(|f| rules::concerns_one_entry(f, entry.as_deref()));
            if one_event.is_empty() && !passes.is_empty() {
                return (kind, Outcome::Missing(not_one_event(&passes)));
            }
            (kind, found(kind, one_event))
        })
        .collect();
    // The lookup: the first of the known names this kernel can probe.
    let lookups = by_names(&rules::NODE_LOOKUP_FUNCTIONS);
    let attachable: Vec<&Function> = lookups
        .iter()
        .copied()
        .filter(|f| matches!(symbols.resolve(&f.name), Resolved::Attach { .. }))
        .take(1)
        .collect();
    let node_lookup = if lookups.is_empty() {
        Outcome::Missing(format!(
            "no function named {} in BTF",
            rules::NODE_LOOKUP_FUNCTIONS.join(", ")
        ))
    } else {
        let chosen = if attachable.is_empty() {
            lookups
        } else {
            attachable
        };
        found(EventKind::NodeRead, chosen)
    };
    let mut notes = Vec::new();
    if !functions.iter().any(|f| f.name.contains("f2fs")) {
        notes.push(
            "no F2FS function in this BTF: F2FS is neither built in nor loaded (modprobe f2fs), \
             or its module has no BTF"
                .to_string(),
        );
    }
    Ok(Discovery {
        btf: Some(files.describe()),
        kallsyms: kallsyms_name.to_string(),
        entry: entry_note,
        node_lookup: restrict_to_nid(node_lookup),
        kinds,
        notes,
    })
}

/// The node lookup is reported with its nid only, entered (no return filter).
fn restrict_to_nid(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Found(mut found) => {
            found.values.retain(|(field, _)| field == "nid");
            found.unmapped.retain(|(field, _)| field == "nid");
            found.at = At::Entry;
            found.when = None;
            Outcome::Found(found)
        }
        missing => missing,
    }
}

fn describe_struct(btf: &KernelBtf, name: &str) -> String {
    let members: Vec<String> = btf
        .members(name)
        .iter()
        .map(|m| format!("{}@{}", m.name, m.offset))
        .collect();
    format!("struct {name} ({})", members.join(", "))
}

/// One candidate makes a probe; none or several do not (several are listed).
/// Why functions named for a kind are not its probe: each handles many entries at once.
fn not_one_event(passes: &[&Function]) -> String {
    let signatures: Vec<String> = passes.iter().map(|f| f.signature()).collect();
    format!(
        "{} named for it, but takes no node-cache entry, nid or node page: a pass over many \
         entries, whose calls are not its events",
        signatures.join(", ")
    )
}

fn pick(
    kind: EventKind,
    candidates: Vec<&Function>,
    probe: impl Fn(&Function) -> Outcome,
) -> Outcome {
    match candidates.as_slice() {
        [] => Outcome::Missing(match kind {
            EventKind::NodeRead => format!(
                "no function named {} in BTF",
                rules::NODE_READ_FUNCTIONS.join(" or ")
            ),
            _ => "no F2FS function in BTF named for it (*node_cache* or taking the entry type)"
                .into(),
        }),
        [one] => probe(one),
        many => {
            let names: Vec<&str> = many.iter().map(|f| f.name.as_str()).collect();
            Outcome::Missing(format!(
                "several candidates, pick one by hand: {}",
                names.join(", ")
            ))
        }
    }
}

fn probe_for(
    kind: EventKind,
    function: &Function,
    symbols: &Kallsyms,
    map: impl Fn(&str) -> rules::Mapping,
) -> Outcome {
    let (symbol, args_kept) = match symbols.resolve(&function.name) {
        Resolved::Attach { symbol, args_kept } => (symbol, args_kept),
        Resolved::Unusable(why) => return Outcome::Missing(format!("{}: {why}", function.name)),
    };
    let mut found = Found {
        function: function.name.clone(),
        signature: Some(function.signature()),
        symbol: symbol.clone(),
        tracepoint: false,
        at: At::Entry,
        when: None,
        values: Vec::new(),
        unmapped: Vec::new(),
    };
    for field in rules::fields_of(kind) {
        let mapping = if args_kept {
            map(field)
        } else {
            Err(format!(
                "{symbol} is a compiler clone whose arguments were rewritten: count only"
            ))
        };
        match mapping {
            Ok(value) => found.values.push((field.to_string(), value)),
            Err(why) => found.unmapped.push((field.to_string(), why)),
        }
    }
    // Success is told by the return value: 0 (restore: 0 or -errno; a node read: 0 when it
    // submitted the read, LOCKED_PAGE on a cache hit).
    if args_kept
        && function.returns_signed
        && matches!(kind, EventKind::Restore | EventKind::NodeRead)
    {
        found.at = At::Return;
        found.when = Some("ret == 0".into());
    }
    // A bool says whether it did what its name says: `second_chance(e)` tests REFERENCED and
    // gives the chance only when it was set, so a call is an event only when it returns true.
    if args_kept && function.returns_bool {
        found.at = At::Return;
        found.when = Some("ret".into());
    }
    Outcome::Found(found)
}

fn without_btf(kallsyms_name: &str, symbols: &Kallsyms) -> Discovery {
    let names = symbols.f2fs_functions();
    let found = |kind: EventKind, candidates: Vec<&String>| -> Outcome {
        match candidates.as_slice() {
            [] => Outcome::Missing("no F2FS symbol in kallsyms named for it".into()),
            [one] => probe_without_btf(kind, one, symbols),
            many => {
                let list: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                Outcome::Missing(format!(
                    "several candidates, pick one by hand: {}",
                    list.join(", ")
                ))
            }
        }
    };
    let kinds = PROBE_KINDS
        .iter()
        .map(|&kind| {
            let candidates: Vec<&String> = if kind == EventKind::NodeRead {
                names
                    .iter()
                    .filter(|n| rules::NODE_READ_FUNCTIONS.contains(&n.as_str()))
                    .collect()
            } else {
                names
                    .iter()
                    .filter(|n| {
                        n.contains("node_cache") && rules::rfc_kind_of_function(n) == Some(kind)
                    })
                    .collect()
            };
            (kind, found(kind, candidates))
        })
        .collect();
    let lookup: Vec<&String> = rules::NODE_LOOKUP_FUNCTIONS
        .iter()
        .filter_map(|l| names.iter().find(|n| n == l))
        .take(1)
        .collect();
    Discovery {
        btf: None,
        kallsyms: kallsyms_name.to_string(),
        entry: None,
        node_lookup: restrict_to_nid(found(EventKind::NodeRead, lookup)),
        kinds,
        notes: Vec::new(),
    }
}

fn probe_without_btf(kind: EventKind, name: &str, symbols: &Kallsyms) -> Outcome {
    let symbol = match symbols.resolve(name) {
        Resolved::Attach { symbol, .. } => symbol,
        Resolved::Unusable(why) => return Outcome::Missing(format!("{name}: {why}")),
    };
    Outcome::Found(Found {
        function: name.to_string(),
        signature: None,
        symbol,
        tracepoint: false,
        at: At::Entry,
        when: None,
        values: Vec::new(),
        unmapped: rules::fields_of(kind)
            .iter()
            .map(|f| {
                (
                    f.to_string(),
                    "no BTF: argument positions unknown (count only)".into(),
                )
            })
            .collect(),
    })
}

impl Discovery {
    /// The report, every line a TOML comment (so report + manifest is one valid file).
    pub(crate) fn report(&self) -> String {
        let mut out = String::new();
        let btf = match &self.btf {
            Some(btf) => format!("BTF {btf}"),
            None => {
                "no BTF: kallsyms names only, arguments cannot be mapped, probes count calls".into()
            }
        };
        let _ = writeln!(
            out,
            "# nodescope probe --discover: {btf}; kallsyms {}",
            self.kallsyms
        );
        for note in &self.notes {
            let _ = writeln!(out, "# note: {note}");
        }
        if let Some(entry) = &self.entry {
            let _ = writeln!(out, "# node-cache entry type: {entry}");
        }
        let _ = writeln!(out, "# {}", line_for("node lookup", &self.node_lookup));
        for (kind, outcome) in &self.kinds {
            let _ = writeln!(out, "# {}", line_for(kind.name(), outcome));
            if let Outcome::Found(found) = outcome {
                for (field, why) in &found.unmapped {
                    let _ = writeln!(out, "#   {:<14} unmapped {field}: {why}", "");
                }
            }
        }
        let mapped = self.found().count();
        let _ = writeln!(out, "# {mapped} of {} kinds mapped", self.kinds.len());
        out
    }

    pub(crate) fn found(&self) -> impl Iterator<Item = (EventKind, &Found)> {
        self.kinds
            .iter()
            .filter_map(|(kind, outcome)| match outcome {
                Outcome::Found(found) => Some((*kind, found)),
                Outcome::Missing(_) => None,
            })
    }

    /// The manifest: the report as comments, then one probe per found kind.
    pub(crate) fn manifest(&self) -> String {
        let mut out = self.report();
        out.push_str(
            "# Written by `nodescope probe --discover`: check each symbol and value by hand \
             (README, \"Discovering the RFC's functions\").\n\
             # node_read also comes from F2FS's tracepoints: `stream` and `top` count both \
             (the probes discovered at start leave it out).\n\
             target = \"kernel\"\n",
        );
        for (kind, found) in self.found() {
            let _ = write!(
                out,
                "\n[[probe]]\nkind = \"{}\"\n{} = \"{}\"",
                kind.name(),
                if found.tracepoint {
                    "tracepoint"
                } else {
                    "symbol"
                },
                found.symbol
            );
            if let Some(signature) = &found.signature {
                let _ = write!(out, "   # {signature}");
            }
            out.push('\n');
            if found.at == At::Return {
                out.push_str("at = \"return\"\n");
            }
            if let Some(when) = &found.when {
                let _ = writeln!(out, "when = \"{when}\"");
            }
            for (field, value) in &found.values {
                let _ = writeln!(out, "{field} = \"{value}\"");
            }
        }
        out
    }
}

fn line_for(label: &str, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Found(found) => {
            let values: Vec<String> = found
                .values
                .iter()
                .map(|(f, v)| format!("{f}={v}"))
                .collect();
            let at = match (&found.at, &found.when) {
                (At::Return, Some(when)) if when == "ret" => " at return, when true".into(),
                (At::Return, Some(when)) => format!(" at return, {when}"),
                (At::Return, None) => " at return".into(),
                _ => String::new(),
            };
            format!(
                "{label:<14} found   {} -> {}{at}{}{}",
                found.signature.as_deref().unwrap_or(&found.function),
                found.symbol,
                if values.is_empty() { "" } else { ": " },
                values.join(" ")
            )
        }
        Outcome::Missing(why) => format!("{label:<14} missing {why}"),
    }
}
