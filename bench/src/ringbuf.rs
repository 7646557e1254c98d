//! `nodescope-bench ringbuf [--json]` (`cargo xtask bench ringbuf`, root): the ring buffer's
//! ceiling on this machine's kernel. Our `bench_burst` tracepoint program (tracer-ebpf's
//! bench.rs, in the bench's own build of tracer-ebpf: bench/build.rs) emits a burst of 64-byte Events per getpid of this process through the same
//! reserve/submit path and EVENTS ring buffer (live's size) as the real programs; the project's
//! own EventReader consumes them. Paced producer threads (one per CPU) offer a rate for one
//! second; the
//! highest rate delivered with zero drops is found by doubling then bisecting, and the drop
//! fraction is measured at 2x and 4x that rate. Figures, never pass/fail.
use nodescope::source::bpf::ObjectMaps as _;
use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};
use tracer_common::maps;

use anyhow::{bail, ensure, Context as _, Result};
use aya::{maps::Array, programs::TracePoint, Ebpf};
use nodescope::source::bpf::{dropped, load_object, EventReader, RING_BYTES};
use serde::Serialize;
use tracer_common::{Event, EventKind};

/// tracer-ebpf built with its `bench` feature (bench/build.rs): the product's object has no
/// `bench_burst`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// Events per trigger (the program's BENCH_BURST_MAX).
const BURST: u32 = 256;
const TRIAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, Serialize)]
struct Trial {
    target_events_per_s: f64,
    /// What the producer managed to offer (below the target when it is the bottleneck).
    offered_events_per_s: f64,
    delivered: u64,
    dropped: u64,
    drop_fraction: f64,
}

#[derive(Serialize)]
struct Report {
    event_bytes: usize,
    ring_bytes: u32,
    burst: u32,
    producer_threads: usize,
    /// /proc/loadavg when the bench ended: on a shared machine a consumer starved of its CPU
    /// for ~0.1 s loses events at any rate, so the ceiling moves with the load.
    loadavg: String,
    zero_drop_events_per_s: f64,
    drop_fraction_2x: f64,
    drop_fraction_4x: f64,
    trials: Vec<Trial>,
}

pub fn main(args: &[String]) -> Result<()> {
    let json = match args {
        [] => false,
        [flag] if flag == "--json" => true,
        _ => bail!("nodescope-bench ringbuf takes only --json, not {args:?}"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    let report = runtime.block_on(run())?;
    print_report(&report);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

async fn run() -> Result<Report> {
    let mut ebpf =
        load_object(OBJECT, RING_BYTES).context("ringbuf bench needs root and the eBPF object")?;
    attach(&mut ebpf)?;
    let mut reader = EventReader::new(&mut ebpf)?;
    let mut trials = Vec::new();
    // Double until drops appear (or the producer cannot offer more), then bisect.
    let (mut good, mut bad) = (0.0f64, None::<f64>);
    let mut rate = 250_000.0;
    while bad.is_none() && rate <= 64e6 {
        let t = trial(&ebpf, &mut reader, rate, &mut trials).await?;
        if t.dropped > 0 {
            bad = Some(rate);
        } else {
            good = good.max(t.offered_events_per_s.min(rate));
            if t.offered_events_per_s < 0.75 * rate {
                break; // producer-bound: no higher rate can be offered
            }
            rate *= 2.0;
        }
    }
    if let Some(mut high) = bad {
        for _ in 0..4 {
            let mid = (good + high) / 2.0;
            let t = trial(&ebpf, &mut reader, mid, &mut trials).await?;
            if t.dropped == 0 {
                good = good.max(t.offered_events_per_s.min(mid));
            } else {
                high = mid;
            }
        }
    }
    ensure!(good > 0.0, "drops even at the lowest rate");
    let at_2x = trial(&ebpf, &mut reader, 2.0 * good, &mut trials)
        .await?
        .drop_fraction;
    let at_4x = trial(&ebpf, &mut reader, 4.0 * good, &mut trials)
        .await?
        .drop_fraction;
    Ok(Report {
        event_bytes: std::mem::size_of::<Event>(),
        ring_bytes: RING_BYTES,
        burst: BURST,
        producer_threads: producer_threads(),
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        zero_drop_events_per_s: good,
        drop_fraction_2x: at_2x,
        drop_fraction_4x: at_4x,
        trials,
    })
}

/// One trial, kept in `trials`.
async fn trial(
    ebpf: &Ebpf,
    reader: &mut EventReader,
    rate: f64,
    trials: &mut Vec<Trial>,
) -> Result<Trial> {
    let t = run_trial(ebpf, reader, rate).await?;
    trials.push(t);
    Ok(t)
}

fn attach(ebpf: &mut Ebpf) -> Result<()> {
    let mut settings: Array<_, u32> = Array::try_from(ebpf.named_map_mut(maps::BENCH_SETTINGS)?)?;
    settings.set(0, std::process::id(), 0)?;
    settings.set(1, BURST, 0)?;
    // Attaching a tracepoint needs tracefs, which a fresh machine may not have mounted.
    nodescope::system::ensure_tracefs().context("tracefs is needed for the tracepoint")?;
    let program: &mut TracePoint = ebpf
        .program_mut("bench_burst")
        .context("program bench_burst missing")?
        .try_into()?;
    program.load().context("verifier rejected bench_burst")?;
    program
        .attach("syscalls", "sys_enter_getpid")
        .context("attaching to syscalls:sys_enter_getpid")?;
    Ok(())
}

/// Offer `rate` events/s for one TRIAL from a paced thread while this task consumes.
async fn run_trial(ebpf: &Ebpf, reader: &mut EventReader, rate: f64) -> Result<Trial> {
    let drops_before = dropped(ebpf)?;
    let done = Arc::new(AtomicBool::new(false));
    let threads = producer_threads();
    let producers: Vec<_> = (0..threads)
        .map(|_| {
            let done = done.clone();
            std::thread::spawn(move || {
                let triggers = produce(rate / threads as f64);
                done.store(true, Ordering::Release);
                triggers
            })
        })
        .collect();
    let mut delivered = 0u64;
    let count = |event: Event| {
        if event.kind() == Some(EventKind::Hello) {
            delivered += 1;
        }
    };
    let mut count = count;
    while !done.load(Ordering::Acquire) {
        let batch = tokio::time::timeout(Duration::from_millis(20), reader.read_batch(&mut count));
        if let Ok(result) = batch.await {
            result?;
        }
    }
    let (mut triggers, mut seconds) = (0, 0.0f64);
    for producer in producers {
        let (t, s) = producer.join().expect("a producer thread does not panic");
        triggers += t;
        seconds = seconds.max(s);
    }
    // Drain what is still in flight.
    while let Ok(result) =
        tokio::time::timeout(Duration::from_millis(100), reader.read_batch(&mut count)).await
    {
        if result? == 0 {
            break;
        }
    }
    let drops = dropped(ebpf)? - drops_before;
    let offered = triggers * u64::from(BURST);
    ensure!(
        delivered + drops == offered,
        "{offered} events offered but {delivered} delivered + {drops} dropped"
    );
    Ok(Trial {
        target_events_per_s: rate,
        offered_events_per_s: offered as f64 / seconds,
        delivered,
        dropped: drops,
        drop_fraction: drops as f64 / offered.max(1) as f64,
    })
}

/// One producer per CPU: one alone cannot fill the ring faster than the consumer drains it.
fn producer_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Issue getpid triggers paced to `rate` events/s for TRIAL: (triggers, seconds taken).
fn produce(rate: f64) -> (u64, f64) {
    let started = Instant::now();
    let mut triggers = 0u64;
    loop {
        let elapsed = started.elapsed();
        if elapsed >= TRIAL {
            return (triggers, elapsed.as_secs_f64());
        }
        let due = (elapsed.as_secs_f64() * rate / f64::from(BURST)) as u64;
        if triggers < due {
            // SAFETY: a raw getpid syscall has no preconditions (it triggers bench_burst).
            unsafe { libc::syscall(libc::SYS_getpid) };
            triggers += 1;
        } else {
            // Sleep, not spin: a spinning producer would take the consumer's CPU on a small
            // machine and measure itself instead of the ring buffer.
            let next = (triggers + 1) as f64 * f64::from(BURST) / rate;
            std::thread::sleep(Duration::from_secs_f64(next - elapsed.as_secs_f64()));
        }
    }
}

fn print_report(r: &Report) {
    println!(
        "ring buffer: {}-byte events, {} KiB ring, bursts of {} per trigger, {} producer threads",
        r.event_bytes,
        r.ring_bytes / 1024,
        r.burst,
        r.producer_threads
    );
    for t in &r.trials {
        println!(
            "  target {:>6.2} M/s  offered {:>6.2} M/s  delivered {:>9}  dropped {:>9} ({:.3})",
            t.target_events_per_s / 1e6,
            t.offered_events_per_s / 1e6,
            t.delivered,
            t.dropped,
            t.drop_fraction
        );
    }
    println!(
        "zero-drop ceiling: {:.2} M events/s; drop fraction at 2x: {:.3}, at 4x: {:.3} \
         (loadavg {})",
        r.zero_drop_events_per_s / 1e6,
        r.drop_fraction_2x,
        r.drop_fraction_4x,
        r.loadavg
    );
}
