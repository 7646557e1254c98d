//! A test that cannot run its assertions on this machine (no root, no PSI, no F2FS...) calls
//! [`skip`] and returns. libtest has no run-time skip: such a test passes, and its output is
//! hidden. So each skip is also written, one line, to the file `cargo xtask test` names in
//! [`LOG_ENV`]; xtask counts those tests as skipped, not passed, and prints why.
use std::io::Write as _;

/// The environment variable naming the file skips are appended to.
pub const LOG_ENV: &str = "NODESCOPE_SKIP_LOG";

/// Say that the running test is skipped, and why. The test's name is its thread's (libtest
/// names each test thread after the test).
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("a test");
    let line = format!("{name}\t{reason}\n");
    eprintln!("SKIPPED {name}: {reason}");
    let Some(path) = std::env::var_os(LOG_ENV) else {
        return;
    };
    // One write of one short line with O_APPEND: lines of tests running in parallel do not
    // interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(err) = written {
        panic!("recording the skip in {}: {err}", path.to_string_lossy());
    }
}

/// The skips in a log written by [`skip`]: (test, reason) pairs.
pub fn parse_log(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| line.split_once('\t'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_logged_with_the_tests_name_and_reason() {
        let dir = std::env::temp_dir().join(format!("test-skip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips");
        let _ = std::fs::remove_file(&log);
        // The only test of this crate: nothing else reads the variable meanwhile.
        std::env::set_var(LOG_ENV, &log);
        std::thread::Builder::new()
            .name("some::test_name".into())
            .spawn(|| skip("needs root"))
            .unwrap()
            .join()
            .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(parse_log(&text), [("some::test_name", "needs root")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
