//! What /proc/kallsyms says can be probed, with the names LTO and CFI builds give functions:
//! `name.llvm.<hash>` (LTO promoted a static function), `name.cfi` (the body under clang CFI),
//! `name.cfi_jt` (CFI's jump-table stub: only indirect calls pass it), and GCC's clones
//! `name.isra.N`, `name.constprop.N`, `name.part.N`, whose arguments the compiler rewrote.
use std::{collections::HashMap, path::Path};

use anyhow::{Context as _, Result};
use tracer_common::files::{self, Symlinks};

/// The running kernel's symbols.
pub(crate) const PROC_KALLSYMS: &str = "/proc/kallsyms";

/// A kallsyms file is a few MB (5 MB on a Debian 12 kernel with its modules); reading stops
/// here, so that a wrong `--kallsyms` (/dev/zero, a disk image) is an error, not all memory.
pub(crate) const READ_LIMIT: u64 = 64 << 20;

/// A kallsyms file's text: a regular file (procfs's is), so that a FIFO or a device is refused
/// at once instead of blocking or reading forever, of at most [`READ_LIMIT`] bytes.
pub(crate) fn read(path: &Path) -> Result<String> {
    let bytes = files::read_regular(path, Symlinks::Follow, READ_LIMIT)
        .with_context(|| format!("reading {}", path.display()))?;
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

/// The text symbols of a kallsyms file, by the C name before the first dot.
#[derive(Debug, Default)]
pub(crate) struct Kallsyms {
    by_name: HashMap<String, Vec<String>>,
    /// C names of the text symbols tagged `[f2fs]`, in file order.
    f2fs: Vec<String>,
}

/// What a symbol's suffix means for a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    /// The function itself, under its own name.
    Exact,
    /// The same function with the same arguments, renamed by LTO (`.llvm.N`) or CFI (`.cfi`).
    Renamed,
    /// A clone whose arguments the compiler removed or replaced: counts only.
    ArgsRewritten,
    /// A CFI jump-table stub: direct calls never pass it.
    JumpTable,
}

/// The symbol to attach for a C function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// `args_kept` is false for a clone whose arguments the compiler rewrote.
    Attach { symbol: String, args_kept: bool },
    /// Why no symbol can be used.
    Unusable(String),
}

impl Kallsyms {
    pub(crate) fn parse(text: &str) -> Kallsyms {
        let mut symbols = Kallsyms::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(_addr), Some(kind), Some(symbol)) =
                (words.next(), words.next(), words.next())
            else {
                continue;
            };
            if !matches!(kind, "t" | "T") {
                continue;
            }
            let name = c_name(symbol);
            if words.next() == Some("[f2fs]") && !symbols.f2fs.iter().any(|n| n == name) {
                symbols.f2fs.push(name.to_string());
            }
            symbols
                .by_name
                .entry(name.to_string())
                .or_default()
                .push(symbol.to_string());
        }
        symbols
    }

    /// C names of F2FS's functions: those tagged `[f2fs]`, or when F2FS is built in (nothing
    /// tagged), those whose name says f2fs or node_cache.
    pub(crate) fn f2fs_functions(&self) -> Vec<String> {
        if !self.f2fs.is_empty() {
            return self.f2fs.clone();
        }
        let mut names: Vec<String> = self
            .by_name
            .keys()
            .filter(|n| n.contains("f2fs") || n.contains("node_cache"))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// The best symbol for C function `name`: itself, else an LTO/CFI rename (same
    /// arguments), else a compiler clone (counts only); never a CFI jump-table stub.
    pub(crate) fn resolve(&self, name: &str) -> Resolved {
        let Some(symbols) = self.by_name.get(name) else {
            return Resolved::Unusable(
                "in BTF but not in kallsyms: inlined everywhere, or not built".into(),
            );
        };
        let best = symbols.iter().map(|s| variant(name, s)).min();
        let Some(best) = best.filter(|v| *v != Variant::JumpTable) else {
            return Resolved::Unusable(format!(
                "only a CFI jump-table stub ({}): direct calls never pass it",
                symbols.join(", ")
            ));
        };
        let chosen: Vec<&String> = symbols
            .iter()
            .filter(|s| variant(name, s) == best)
            .collect();
        if chosen.len() > 1 {
            let list: Vec<&str> = chosen.iter().map(|s| s.as_str()).collect();
            return Resolved::Unusable(format!(
                "several symbols of the same kind, pick one by hand: {}",
                list.join(", ")
            ));
        }
        Resolved::Attach {
            symbol: chosen[0].clone(),
            args_kept: best != Variant::ArgsRewritten,
        }
    }
}

/// The C name of a symbol: what comes before the first dot (C names have none).
pub(crate) fn c_name(symbol: &str) -> &str {
    symbol.split('.').next().unwrap_or(symbol)
}

fn variant(name: &str, symbol: &str) -> Variant {
    let suffix = &symbol[name.len().min(symbol.len())..];
    if suffix.is_empty() {
        Variant::Exact
    } else if suffix.contains(".cfi_jt") {
        Variant::JumpTable
    } else if [".isra.", ".constprop.", ".part."]
        .iter()
        .any(|clone| suffix.contains(clone))
    {
        Variant::ArgsRewritten
    } else {
        // .llvm.<hash>, .cfi: the very function under another name.
        Variant::Renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "ffff t plain\t[f2fs]\nffff t lto.llvm.123\t[f2fs]\nffff t jt.cfi_jt\t[f2fs]\n\
        ffff t jt\t[f2fs]\nffff t only_jt.cfi_jt\t[f2fs]\nffff t cl.isra.0\t[f2fs]\n\
        ffff t both.part.0\t[f2fs]\nffff t both\t[f2fs]\nffff t two.llvm.1\nffff t two.llvm.2\n\
        ffff d data_sym\t[f2fs]\n";

    #[test]
    fn picks_the_function_over_its_clones_and_stubs() {
        let k = Kallsyms::parse(TEXT);
        let attach = |s: &str, kept| Resolved::Attach {
            symbol: s.into(),
            args_kept: kept,
        };
        assert_eq!(k.resolve("plain"), attach("plain", true));
        assert_eq!(k.resolve("lto"), attach("lto.llvm.123", true));
        assert_eq!(k.resolve("jt"), attach("jt", true));
        assert_eq!(k.resolve("cl"), attach("cl.isra.0", false));
        assert_eq!(k.resolve("both"), attach("both", true));
        assert!(
            matches!(k.resolve("only_jt"), Resolved::Unusable(why) if why.contains("jump-table"))
        );
        assert!(
            matches!(k.resolve("two"), Resolved::Unusable(why) if why.contains("two.llvm.1, two.llvm.2"))
        );
        assert!(
            matches!(k.resolve("data_sym"), Resolved::Unusable(why) if why.contains("not in kallsyms"))
        );
        assert_eq!(
            k.f2fs_functions(),
            ["plain", "lto", "jt", "only_jt", "cl", "both"]
        );
    }
}
