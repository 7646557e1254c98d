//! The probe's access-trace part: the `--accesses` plan, and each planned probe tried.
use serde::Serialize;

use super::PROBE_RING_BYTES;
use crate::source::bpf::{
    self,
    f2fs::{
        access::{self, AccessPlan},
        attach::AttachOutcome,
    },
    trampoline::FunctionHook,
};

/// The access traces' plan and, when BPF works, each planned probe tried (attached, then
/// detached when the object is dropped).
#[derive(Debug, Serialize)]
pub(crate) struct AccessProbe {
    pub plan: AccessPlan,
    pub outcomes: Vec<AttachOutcome>,
    /// Why nothing was tried, when loading the object failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub(super) fn access_probe(bpf_works: bool) -> AccessProbe {
    let plan = access::plan_this_kernel(FunctionHook::Auto, false);
    // The trampolines detach when the result is dropped, with the object.
    let tried = bpf_works.then(|| {
        bpf::load(PROBE_RING_BYTES)
            .and_then(|mut ebpf| access::attach(&mut ebpf, &plan, &[]))
            .map(|attached| attached.outcomes)
    });
    let (outcomes, error) = match tried {
        Some(Ok(outcomes)) => (outcomes, None),
        Some(Err(err)) => (Vec::new(), Some(format!("{err:#}"))),
        None => (Vec::new(), None),
    };
    AccessProbe {
        plan,
        outcomes,
        error,
    }
}
