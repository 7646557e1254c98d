//! Types shared between the kernel-side eBPF programs (tracer-ebpf), the simulator and
//! userspace. Everything here is `#[repr(C)]`, plain old data and `no_std`, so the very same
//! bytes travel through a BPF ring buffer, a recording file or a simulator channel.
#![no_std]

#[cfg(feature = "user")]
extern crate std;

#[cfg(feature = "user")]
pub mod activity;
#[cfg(feature = "user")]
pub mod files;
pub mod knobs;
pub mod maps;
#[cfg(feature = "user")]
pub mod text;

mod access;
mod counters;
mod decode;
mod event;
mod layout;
mod probe_spec;

pub use access::*;
pub use counters::*;
pub use decode::*;
pub use event::*;
pub use layout::*;
pub use probe_spec::*;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are #[repr(C)], Copy, contain only integers and byte arrays, and
    // have explicit padding fields, so every bit pattern is a valid value.
    unsafe impl aya::Pod for super::Event {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TaskKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TaskCounts {}
    // SAFETY: as above (CountSlot's fields are all 8-byte aligned, no implicit padding).
    unsafe impl aya::Pod for super::CountSlot {}
    // SAFETY: as above: four u32 then 8-byte aligned slots, no implicit padding.
    unsafe impl aya::Pod for super::SlotTable {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TracepointLayout {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::ProbeSpec {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AccessLayout {}
    // SAFETY: as above: u32, u32, u64, u32, u32, u64, u64, then records of 8-byte aligned integers, no implicit
    // padding.
    unsafe impl aya::Pod for super::AccessBatch {}
    unsafe impl aya::Pod for super::MetaAreas {}
    // SAFETY: as above: u32s, an i32, then bytes with explicit padding.
    unsafe impl aya::Pod for super::FootprintLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_is_64_bytes_without_implicit_padding() {
        assert_eq!(core::mem::size_of::<Event>(), 64);
        assert_eq!(core::mem::align_of::<Event>(), 8);
    }

    #[test]
    fn an_access_batch_fits_a_per_cpu_value_and_is_never_taken_for_an_event() {
        assert_eq!(core::mem::size_of::<AccessRecord>(), 40);
        assert_eq!(
            core::mem::size_of::<AccessBatch>(),
            40 + ACCESS_BATCH_RECORDS * core::mem::size_of::<AccessRecord>()
        );
        assert!(core::mem::size_of::<AccessBatch>() <= 32 * 1024);
        assert_ne!(
            core::mem::size_of::<AccessBatch>(),
            core::mem::size_of::<Event>()
        );
        let mut batch = AccessBatch {
            magic: ACCESS_BATCH_MAGIC,
            len: 2,
            first_ts_ns: 5,
            busy: 0,
            last_tgid: 0,
            tick_jiffies: 0,
            tick_ts_ns: 0,
            records: [AccessRecord::default(); ACCESS_BATCH_RECORDS],
        };
        batch.records[0] = AccessRecord {
            ts_ns: 5,
            pid: 7,
            tgid: 6,
            dev: 9,
            nid: 100,
            ..AccessRecord::default()
        };
        batch.records[1] = AccessRecord {
            ts_ns: 8,
            pid: 7,
            tgid: 6,
            dev: 9,
            nid: 101,
            latency_ns: 4_000,
            outcome: RETRIEVAL_DISK_READ,
            reads: 1,
            _pad: [0; 2],
            device_ns: 3_000,
            _pad2: 0,
        };
        // SAFETY: AccessBatch is plain old data; the slice borrows it.
        let bytes = unsafe {
            core::slice::from_raw_parts(
                (&batch as *const AccessBatch).cast::<u8>(),
                core::mem::size_of::<AccessBatch>(),
            )
        };
        let read = AccessBatch::from_bytes(bytes).expect("a batch");
        let nids: [u32; 2] = [100, 101];
        for (event, nid) in read.events().zip(nids) {
            assert_eq!(event.kind(), Some(EventKind::NodeAccess));
            assert_eq!(
                (event.dev, event.nid, event.pid, event.tgid),
                (9, nid, 7, 6)
            );
        }
        assert_eq!(read.events().count(), 2);
        let mut decoded = read.events().map(|e| e.decode());
        let (first, second) = (decoded.next().unwrap(), decoded.next().unwrap());
        assert!(matches!(
            first,
            Decoded::NodeAccess {
                retrieval: None,
                ..
            }
        ));
        assert_eq!(
            second,
            Decoded::NodeAccess {
                nid: 101,
                access: Access::Lookup,
                retrieval: Some(Retrieval {
                    outcome: Outcome::DiskRead,
                    latency_ns: 4_000,
                    reads: 1,
                    device_ns: 3_000,
                }),
            }
        );
        assert!(AccessBatch::from_bytes(&bytes[..64]).is_none());
        let mut wrong = [0u8; core::mem::size_of::<AccessBatch>()];
        wrong.copy_from_slice(bytes);
        wrong[0] ^= 1;
        assert!(AccessBatch::from_bytes(&wrong).is_none());
        batch.len = 1000;
        assert_eq!(batch.records().len(), ACCESS_BATCH_RECORDS);
    }

    #[test]
    fn slot_table_fits_a_per_cpu_value_without_implicit_padding() {
        assert_eq!(core::mem::size_of::<CountSlot>(), 8 + 16 + 64);
        assert_eq!(
            core::mem::size_of::<SlotTable>(),
            8 + COUNT_SLOTS * core::mem::size_of::<CountSlot>()
        );
        // The kernel refuses per-CPU values above PCPU_MIN_UNIT_SIZE (32 KiB).
        assert!(core::mem::size_of::<SlotTable>() <= 32 * 1024);
        assert!(COUNT_SLOTS.is_power_of_two());
    }

    #[test]
    fn the_mainline_page_bio_layout_is_recognised_by_its_five_fields() {
        let mut layout = TracepointLayout::MAINLINE_PAGE_BIO;
        layout.rahead_bit = 19;
        assert!(layout.is_mainline_page_bio());
        layout.type_ = 56;
        assert!(!layout.is_mainline_page_bio());
    }

    #[test]
    fn journal_argument_positions_survive_the_config_word() {
        for args in [JournalArgs::WITHOUT_SBI, JournalArgs::WITH_SBI] {
            assert_ne!(args.pack(), 0);
            assert_eq!(JournalArgs::unpack(args.pack()), args);
        }
        // A CONFIG slot userspace never wrote reads 0: the pre-6.18.13 positions.
        assert_eq!(JournalArgs::unpack(0), JournalArgs::WITHOUT_SBI);
    }

    #[test]
    fn kinds_round_trip_through_u8() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(EventKind::from_u8(0), None);
        assert_eq!(EventKind::from_u8(200), None);
    }

    #[test]
    fn meta_areas_sort_blocks_by_layout() {
        let areas = MetaAreas::MKFS_1GIB;
        assert_eq!(areas.area_of(0), META_AREA_OTHER);
        assert_eq!(areas.area_of(512), META_AREA_CP);
        assert_eq!(areas.area_of(1535), META_AREA_CP);
        assert_eq!(areas.area_of(1536), META_AREA_SIT);
        assert_eq!(areas.area_of(2560), META_AREA_NAT);
        assert_eq!(areas.area_of(4607), META_AREA_NAT);
        assert_eq!(areas.area_of(4608), META_AREA_SSA);
        assert_eq!(areas.area_of(5119), META_AREA_SSA);
        assert_eq!(areas.area_of(5120), META_AREA_OTHER);
        assert_eq!(META_AREA_NAMES[META_AREA_NAT as usize], "nat");
    }

    #[test]
    fn value_transforms() {
        let spec = |transform| ValueSpec {
            transform,
            ..ValueSpec::default()
        };
        assert_eq!(spec(XFORM_SLOT_QUEUE).apply(512), QUEUE_512 as u64);
        assert_eq!(spec(XFORM_SLOT_QUEUE).apply(4096), QUEUE_RAW as u64);
        assert_eq!(spec(XFORM_NEG).apply((-4i64) as u64), 4);
        assert_eq!(spec(XFORM_BOOL).apply(7), 1);
        assert_eq!(spec(XFORM_NONE).apply(7), 7);
        // A kernel enum numbered 0, 1, 2 onto codes 1, 2, 3; 7 onto 15; the rest unknown.
        let codes = ValueSpec {
            transform: XFORM_CODES,
            codes: 0x1 | 0x2 << 4 | 0x3 << 8 | 0xf << 28,
            ..ValueSpec::default()
        };
        let mapped: [u64; 10] = core::array::from_fn(|raw| codes.apply(raw as u64));
        assert_eq!(mapped, [1, 2, 3, 0, 0, 0, 0, 15, 0, 0]);
        assert_eq!(codes.apply(u64::MAX), 0);
    }

    #[test]
    fn ret_filters() {
        let filter = |ret_filter, ret_filter_value| ProbeSpec {
            ret_filter,
            ret_filter_value,
            ..ProbeSpec::default()
        };
        assert!(filter(RET_FILTER_EQ, 0).accepts_ret(0));
        assert!(!filter(RET_FILTER_EQ, 0).accepts_ret(-5));
        assert!(filter(RET_FILTER_LT, 0).accepts_ret(-5));
        assert!(!filter(RET_FILTER_GE, 0).accepts_ret(-1));
        assert!(filter(RET_FILTER_NONE, 0).accepts_ret(-1));
        assert!(filter(RET_FILTER_TRUE, 0).accepts_ret(1));
        assert!(
            !filter(RET_FILTER_TRUE, 0).accepts_ret(0x100),
            "only the low byte is the bool"
        );
    }
}
