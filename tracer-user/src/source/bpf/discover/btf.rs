//! F2FS's functions and structs as BTF describes them, read with the btf-rs crate: it parses
//! split BTF (a module's /sys/kernel/btf/<module> on top of /sys/kernel/btf/vmlinux), which
//! aya-obj 0.3's `Btf` cannot (it parses one self-contained blob).
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use btf_rs::{Btf, BtfType, Type};

/// Where F2FS's BTF was read from.
#[derive(Clone, Debug)]
pub struct BtfFiles {
    /// vmlinux BTF (the base) or, without a module file, F2FS's own self-contained BTF.
    pub base: PathBuf,
    /// Module BTF, split on top of `base`; None when F2FS is built in.
    pub module: Option<PathBuf>,
}

impl BtfFiles {
    /// This kernel's: vmlinux, plus the f2fs module's when F2FS is a module. None without BTF.
    pub fn this_kernel() -> Option<BtfFiles> {
        let base = PathBuf::from("/sys/kernel/btf/vmlinux");
        let module = PathBuf::from("/sys/kernel/btf/f2fs");
        base.exists().then(|| BtfFiles {
            base,
            module: module.exists().then_some(module),
        })
    }

    pub fn describe(&self) -> String {
        match &self.module {
            Some(module) => format!("{} (split) on {}", module.display(), self.base.display()),
            None => self.base.display().to_string(),
        }
    }
}

/// A parameter or struct member's type, as far as a probe can read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An integer (or enum, or bool) of `size` bytes; `typedefs` names the typedefs on the way
    /// (`nid_t`, `u32`), outermost first; an enum's `enumerators` are its (name, value) pairs.
    Int {
        size: u32,
        typedefs: Vec<String>,
        enumerators: Vec<(String, u32)>,
    },
    /// A pointer to a struct or union of that name (None: to something else).
    Ptr(Option<String>),
    Other,
}

impl Shape {
    pub fn has_typedef(&self, name: &str) -> bool {
        matches!(self, Shape::Int { typedefs, .. } if typedefs.iter().any(|t| t == name))
    }

    pub fn is_int(&self) -> bool {
        matches!(self, Shape::Int { .. })
    }

    /// An enum's (name, value) pairs; empty for anything else.
    pub fn enumerators(&self) -> &[(String, u32)] {
        match self {
            Shape::Int { enumerators, .. } => enumerators,
            _ => &[],
        }
    }

    pub fn points_to(&self, name: &str) -> bool {
        matches!(self, Shape::Ptr(Some(s)) if s == name)
    }
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub shape: Shape,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: Vec<Param>,
    /// It returns a signed integer (0 / -errno, LOCKED_PAGE ...).
    pub returns_signed: bool,
    /// It returns a bool: whether it did what its name says.
    pub returns_bool: bool,
}

impl Function {
    /// `name(a, b, c)`, for comments.
    pub fn signature(&self) -> String {
        let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
        format!("{}({})", self.name, names.join(", "))
    }
}

/// A struct member, anonymous unions and structs flattened into their parent.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    /// Bytes from the start of the outermost struct.
    pub offset: u32,
    pub shape: Shape,
}

/// vmlinux's BTF is a few MiB; a file past this is not BTF.
const MAX_BTF_BYTES: u64 = 256 << 20;

pub struct KernelBtf {
    btf: Btf,
    split: bool,
}

/// This kernel's BTF as [`BtfFiles::this_kernel`] finds it, parsed and shared: vmlinux's is
/// megabytes, and the F2FS planner, the access traces and the trampolines each read it while
/// a source starts. It is kept only while someone holds it (a weak reference here): a parsed
/// vmlinux BTF held for a whole run cost `top` and the daemon enough memory that the kmod VM
/// test's OOM killer chose them under its memory pressure. A caller that plans several things
/// in a row holds one [`SharedBtf`] across them ([`hold_this_kernel`]).
pub(crate) type SharedBtf = std::sync::Arc<(BtfFiles, KernelBtf)>;

pub(crate) fn this_kernel() -> Result<SharedBtf> {
    static SHARED: std::sync::Mutex<std::sync::Weak<(BtfFiles, KernelBtf)>> =
        std::sync::Mutex::new(std::sync::Weak::new());
    let mut shared = SHARED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(btf) = shared.upgrade() {
        return Ok(btf);
    }
    let files = BtfFiles::this_kernel().context("no BTF (/sys/kernel/btf/vmlinux)")?;
    let btf = std::sync::Arc::new((files.clone(), KernelBtf::load(&files)?));
    *shared = std::sync::Arc::downgrade(&btf);
    Ok(btf)
}

/// This kernel's BTF held until the result is dropped, so that what plans meanwhile parses it
/// once; None without BTF (each user then says so itself).
pub(crate) fn hold_this_kernel() -> Option<SharedBtf> {
    this_kernel().ok()
}

impl KernelBtf {
    pub fn load(files: &BtfFiles) -> Result<KernelBtf> {
        // `--btf`, `--btf-base`: regular files only (a FIFO is refused, never waited on), at
        // most MAX_BTF_BYTES.
        let read = |path: &std::path::Path| {
            tracer_common::files::read_regular(
                path,
                tracer_common::files::Symlinks::Follow,
                MAX_BTF_BYTES,
            )
            .map_err(anyhow::Error::new)
        };
        let base = read(&files.base)
            .and_then(|bytes| Ok(Btf::from_bytes(&bytes)?))
            .with_context(|| format!("reading BTF {}", files.base.display()))?;
        match &files.module {
            Some(module) => Ok(KernelBtf {
                btf: read(module)
                    .and_then(|bytes| Ok(Btf::from_split_bytes(&bytes, &base)?))
                    .with_context(|| {
                        format!(
                            "reading split BTF {} on {}",
                            module.display(),
                            files.base.display()
                        )
                    })?,
                split: true,
            }),
            None => Ok(KernelBtf {
                btf: base,
                split: false,
            }),
        }
    }

    /// F2FS's types: the module's split section, or everything when F2FS is built in.
    fn own_types(&self) -> Result<Vec<Type>> {
        let mut iter = match (self.split, self.btf.split()) {
            (true, Some(section)) => section.type_iter(),
            _ => self.btf.base().type_iter(),
        };
        let mut types = Vec::new();
        while let Some(ty) = fallible_next(&mut iter)? {
            types.push(ty);
        }
        Ok(types)
    }

    /// Every function of F2FS's BTF (of all of vmlinux when F2FS is built in).
    pub fn functions(&self) -> Result<Vec<Function>> {
        let mut functions = Vec::new();
        for ty in self.own_types()? {
            if let Type::Func(func) = ty {
                functions.extend(self.function_of(&func)?);
            }
        }
        Ok(functions)
    }

    /// The function called `name`, if BTF describes one.
    pub fn function(&self, name: &str) -> Option<Function> {
        let types = self.btf.resolve_types_by_name(name).ok()?;
        types.into_iter().find_map(|ty| match ty {
            Type::Func(func) => self.function_of(&func).ok().flatten(),
            _ => None,
        })
    }

    /// The parameters of the function pointer typedef `name` (a raw tracepoint's
    /// `btf_trace_<event>`: its first is the probe's data pointer), if BTF has it.
    pub fn typedef_params(&self, name: &str) -> Option<usize> {
        let types = self.btf.resolve_types_by_name(name).ok()?;
        types.into_iter().find_map(|ty| {
            let Type::Typedef(typedef) = ty else {
                return None;
            };
            let Ok(Type::Ptr(ptr)) = self.btf.resolve_chained_type(&typedef) else {
                return None;
            };
            match self.btf.resolve_chained_type(&ptr) {
                Ok(Type::FuncProto(proto)) => Some(proto.parameters.len()),
                _ => None,
            }
        })
    }

    /// The BTF type id of the function called `name`, and whether it is in the module's split
    /// section (else in the base: vmlinux, or F2FS's own BTF when built in). Split ids continue
    /// the base's numbering, as the kernel's `attach_btf_id` wants them.
    pub fn function_type_id(&self, name: &str) -> Option<(u32, bool)> {
        let is_func = |id: &u32| matches!(self.btf.resolve_type_by_id(*id), Ok(Type::Func(_)));
        if self.split {
            let split = self.btf.split()?;
            if let Some(id) = split
                .resolve_ids_by_name(name)
                .ok()?
                .into_iter()
                .find(is_func)
            {
                return Some((id, true));
            }
        }
        let ids = self.btf.base().resolve_ids_by_name(name).ok()?;
        ids.into_iter().find(is_func).map(|id| (id, false))
    }

    fn function_of(&self, func: &btf_rs::Func) -> Result<Option<Function>> {
        let name = self.btf.resolve_name(func).context("a function's name")?;
        let Ok(Type::FuncProto(proto)) = self.btf.resolve_chained_type(func) else {
            return Ok(None);
        };
        let params = proto
            .parameters
            .iter()
            .filter(|p| !p.is_variadic())
            .map(|p| Param {
                name: self.btf.resolve_name(p).unwrap_or_default(),
                shape: self.shape_of(p.get_type_id()),
            })
            .collect();
        Ok(Some(Function {
            name,
            params,
            returns_signed: self
                .return_int(proto.return_type_id())
                .is_some_and(|int| int.is_signed()),
            returns_bool: self
                .return_int(proto.return_type_id())
                .is_some_and(|int| int.is_bool()),
        }))
    }

    /// Names of F2FS's structs whose members match `wanted`: for each group, some member name
    /// contains one of its words.
    pub fn structs_with(&self, wanted: &[&[&str]]) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for ty in self.own_types()? {
            let Type::Struct(st) = ty else { continue };
            let members: Vec<String> = st
                .members
                .iter()
                .filter_map(|m| self.btf.resolve_name(m).ok())
                .collect();
            let has = |words: &[&str]| members.iter().any(|m| words.iter().any(|w| m.contains(w)));
            if wanted.iter().all(|words| has(words)) {
                names.push(self.btf.resolve_name(&st).unwrap_or_default());
            }
        }
        names.retain(|n| !n.is_empty());
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// The members of struct `name` (the definition with the most members: a forward
    /// declaration has none), anonymous members flattened.
    pub fn members(&self, name: &str) -> Vec<Member> {
        let Ok(types) = self.btf.resolve_types_by_name(name) else {
            return Vec::new();
        };
        let best = types
            .into_iter()
            .filter_map(|t| match t {
                Type::Struct(s) | Type::Union(s) => Some(s),
                _ => None,
            })
            .max_by_key(|s| s.members.len());
        let mut out = Vec::new();
        if let Some(st) = best {
            self.flatten(&st, 0, &mut out);
        }
        out
    }

    fn flatten(&self, st: &btf_rs::Struct, base: u32, out: &mut Vec<Member>) {
        for member in &st.members {
            if member.bitfield_size().is_some_and(|bits| bits > 0) {
                continue; // a bit field: no byte offset to read
            }
            let offset = base + member.bit_offset() / 8;
            let name = self.btf.resolve_name(member).unwrap_or_default();
            if name.is_empty() {
                if let Ok(Type::Struct(inner) | Type::Union(inner)) =
                    self.btf.resolve_chained_type(member)
                {
                    self.flatten(&inner, offset, out);
                }
                continue;
            }
            out.push(Member {
                name,
                offset,
                shape: self.shape_of(member.get_type_id()),
            });
        }
    }

    fn shape_of(&self, id: Option<u32>) -> Shape {
        let mut typedefs = Vec::new();
        let Some(mut ty) = id.and_then(|id| self.btf.resolve_type_by_id(id).ok()) else {
            return Shape::Other;
        };
        // Bounded: a malformed chain must not loop.
        for _ in 0..16 {
            match &ty {
                Type::Typedef(td) => {
                    typedefs.push(self.btf.resolve_name(td).unwrap_or_default());
                }
                Type::Const(_) | Type::Volatile(_) | Type::Restrict(_) | Type::TypeTag(_) => {}
                Type::Int(int) => {
                    return Shape::Int {
                        size: int.size() as u32,
                        typedefs,
                        enumerators: Vec::new(),
                    }
                }
                Type::Enum(e) => {
                    let enumerators = e
                        .members
                        .iter()
                        .map(|m| (self.btf.resolve_name(m).unwrap_or_default(), m.val()))
                        .collect();
                    return Shape::Int {
                        size: e.size() as u32,
                        typedefs,
                        enumerators,
                    };
                }
                Type::Ptr(ptr) => return Shape::Ptr(self.pointee_struct(ptr)),
                _ => return Shape::Other,
            }
            let Some(next) = ty
                .as_btf_type()
                .and_then(|t| self.btf.resolve_chained_type(t).ok())
            else {
                return Shape::Other;
            };
            ty = next;
        }
        Shape::Other
    }

    fn pointee_struct(&self, ptr: &btf_rs::Ptr) -> Option<String> {
        for ty in self.btf.chained_type_iter(ptr).take(16) {
            match &ty {
                Type::Struct(s) | Type::Union(s) => return self.btf.resolve_name(s).ok(),
                Type::Fwd(f) => return self.btf.resolve_name(f).ok(),
                Type::Typedef(_) | Type::Const(_) | Type::Volatile(_) | Type::TypeTag(_) => {}
                _ => return None,
            }
        }
        None
    }

    /// The integer type a function returns (through typedefs and const), if it is one.
    fn return_int(&self, id: u32) -> Option<btf_rs::Int> {
        if id == 0 {
            return None;
        }
        let mut ty = self.btf.resolve_type_by_id(id).ok();
        for _ in 0..16 {
            match ty {
                Some(Type::Int(int)) => return Some(int),
                Some(Type::Typedef(ref td)) => ty = self.btf.resolve_chained_type(td).ok(),
                Some(Type::Const(ref c)) => ty = self.btf.resolve_chained_type(c).ok(),
                _ => return None,
            }
        }
        None
    }
}

fn fallible_next(iter: &mut btf_rs::TypeIter<'_>) -> Result<Option<Type>> {
    use fallible_iterator::FallibleIterator as _;
    iter.next().context("walking BTF types")
}

#[cfg(test)]
mod typedef_tests {
    use super::*;

    /// This machine's kernel (6.18) passes `prev_state` to `sched_switch`'s raw tracepoint:
    /// the probe's data, preempt, prev, next, prev_state. No such typedef: None.
    #[test]
    fn sched_switch_has_five_parameters_on_this_kernel() {
        let base = PathBuf::from("/sys/kernel/btf/vmlinux");
        if !base.exists() {
            test_skip::skip("no /sys/kernel/btf/vmlinux");
            return;
        }
        let btf = KernelBtf::load(&BtfFiles { base, module: None }).unwrap();
        assert_eq!(btf.typedef_params("btf_trace_sched_switch"), Some(5));
        assert_eq!(btf.typedef_params("btf_trace_no_such_event"), None);
    }
}
