//! Builds tracer-ebpf with its `bench` feature into OUT_DIR: the ring-buffer benchmark's own
//! object (the product's programs plus `bench_burst`), so that the product's object carries
//! no benchmark program.

// The same build as tracer-user's.
#[path = "../tracer-user/build/ebpf.rs"]
mod ebpf;

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=BPF_LINKER");
    ebpf::build(&["bench"])
}
