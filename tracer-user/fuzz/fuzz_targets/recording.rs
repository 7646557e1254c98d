//! Any bytes given to the recording reader: it may reject them, never panic, and what it
//! returns must re-encode consistently.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::record::reader::read_all;

fuzz_target!(|data: &[u8]| {
    if let Ok(contents) = read_all(data) {
        let events = contents.events().count();
        let announced: usize = contents
            .items
            .iter()
            .filter_map(|item| match item {
                nodescope::record::reader::Item::Events(events) => Some(events.len()),
                _ => None,
            })
            .sum();
        assert_eq!(events, announced);
        if let Some(damage) = &contents.damage {
            assert!(damage.offset as usize <= data.len());
        }
    }
});
