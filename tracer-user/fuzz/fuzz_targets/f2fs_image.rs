//! Any image given to the F2FS reader (a user may point the simulator at any image): it may
//! reject it with an error, never panic, hang or allocate without bound.
//!
//! The input is an image in `sim::f2fs::sparse`'s compact form (an image is tens of megabytes
//! of mostly zeros, too big to mutate), written to a sparse memory file and loaded the way the
//! simulator loads one (`NodeSet::load`: superblock, checkpoint, NAT, every node block).
//! `seeds/sparse_image.py` turns a real image into this form.
#![no_main]

use std::{fs::File, os::fd::FromRawFd as _, path::PathBuf, sync::OnceLock};

use libfuzzer_sys::fuzz_target;
use sim::f2fs::sparse::{write_image, MAX_BLOCKS};

/// The image lives in one anonymous memory file (nothing left behind when the fuzzer stops),
/// opened by the reader through its /proc/self/fd path, as any image file is.
fn image() -> &'static (File, PathBuf) {
    static IMAGE: OnceLock<(File, PathBuf)> = OnceLock::new();
    IMAGE.get_or_init(|| {
        // SAFETY: memfd_create reads a NUL-terminated name and returns a new descriptor (or -1),
        // which the File below owns from then on.
        let fd = unsafe { libc::memfd_create(c"nodescope-fuzz-f2fs".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        (file, PathBuf::from(format!("/proc/self/fd/{fd}")))
    })
}

fuzz_target!(|data: &[u8]| {
    let (file, path) = image();
    if !write_image(data, file).expect("writing the fuzz image") {
        return;
    }
    if let Ok(nodes) = sim::nodes::NodeSet::load(path) {
        assert!(nodes.len() <= MAX_BLOCKS as usize);
    }
});
