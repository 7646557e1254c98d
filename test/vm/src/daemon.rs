//! The VM test's daemon phase (issue 20; guest.sh: daemon_phase): `nodescope daemon` on the
//! kernel source, a `stream --connect` client on its socket, one cold replay. Here: the
//! client's lines (the daemon's windows, as it served them) attribute exactly iostat's "fs
//! node" reads, as a direct stream does, lose no counter increment, and both processes end
//! with status 0 (the daemon on SIGTERM, the client on the daemon's end message).
use std::{fs, path::Path};

use super::results::{expect, Phase};

/// Check the phase; returns the VM line's `daemon=<attributed>/<iostat>` part.
pub fn check(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> String {
    let Some(phase) = Phase::load_or_fail(dir, "daemon", failures) else {
        return "daemon=?".to_string();
    };
    lines.push(format!("  daemon   {}", phase.summary()));
    let daemon_rc = fs::read_to_string(dir.join("daemon.rc")).unwrap_or_default();
    let client_note = fs::read_to_string(dir.join("stream_daemon.err")).unwrap_or_default();
    // The client's lines: the daemon's windows, as it served them.
    phase.expect_exact("daemon", failures);
    expect(
        failures,
        phase.rc == Some(0),
        format!("daemon: stream --connect exit status {:?}", phase.rc),
    );
    expect(
        failures,
        daemon_rc.trim() == "0",
        format!("daemon: exit status {:?} on SIGTERM", daemon_rc.trim()),
    );
    expect(
        failures,
        client_note.contains("the daemon stopped (SIGTERM)"),
        "daemon: the client did not see the daemon's end message".to_string(),
    );
    format!("daemon={}/{}", phase.reads(), phase.iostat_delta)
}
