#![no_std]
#![no_main]

mod access;
#[cfg(feature = "bench")]
mod bench;
mod checkpoint_anatomy;
mod counters;
mod f2fs;
mod footprint;
mod hello;
mod maps;
mod rfc;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 4] = *b"GPL\0";
