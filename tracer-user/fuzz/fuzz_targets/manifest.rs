//! Any text given to the probe manifest loader (`--probes FILE`, `nodescope probe`): it may
//! reject it with an error, never panic, and what it accepts names its probes' lines truly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::source::bpf::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(manifest) = Manifest::parse("fuzz.toml", text) {
        let lines = text.lines().count().max(1);
        for probe in &manifest.probes {
            assert!(probe.line >= 1 && probe.line <= lines, "line {}", probe.line);
        }
    }
});
