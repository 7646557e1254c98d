//! Any text given as Android's packages.list (`--packages FILE`): malformed lines are skipped,
//! nothing panics, and every app uid named in the text gets a name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::model::{classify, Packages};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let packages = Packages::parse(&text);
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_), Some(uid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(uid) = uid.parse::<u32>() {
            let named = packages.app_name(uid);
            assert_eq!(named.is_some(), (10_000..=19_999).contains(&(uid % 100_000)));
            classify(&packages, uid, "fuzz");
        }
    }
});
