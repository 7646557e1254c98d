//! `nodescope-bench controller [--json] [OPTIONS]` (`cargo xtask bench controller`): the
//! control law against the default and the best static setting on simulator workloads. Each
//! workload runs under the default static setting, under every setting of a grid (the best of
//! them is the best static setting in hindsight), and with the controller in the loop; every
//! run is scored by one cost (docs/CONTROLLER.md explains the weights). Prints figures; never
//! fails on speed. Exits non-zero only when a run fails.
//!
//! Options: `--json`; `--seed N`; `--threads N` (default: the machine's cores);
//! `--scenario NAME` (repeatable; default: all); `--window S` (decision period, virtual
//! seconds); `--poll S` (gauge polls between decisions, virtual seconds; 0: none);
//! `--min-write-gap S`; `--rate-period S`; `--eager-floor S`; `--trace` (every audit record in
//! the JSON); `--law JSON` (fields of `law::Config` to override, for exploring the law's
//! constants).
use anyhow::{bail, Context as _, Result};
use controller::law::Config;

pub mod cost;
pub mod grid;
pub mod jobs;
pub mod report;
pub mod run;
pub mod signals;

use run::ControllerSetup;

struct Args {
    json: bool,
    seed: u64,
    threads: usize,
    scenarios: Vec<String>,
    setup: ControllerSetup,
}

fn parse_args(words: &[String]) -> Result<Args> {
    let mut args = Args {
        json: false,
        seed: 1,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        scenarios: Vec::new(),
        setup: ControllerSetup::default(),
    };
    let mut words = words.iter().cloned();
    while let Some(word) = words.next() {
        let mut value = |name: &str| {
            words
                .next()
                .with_context(|| format!("{name} needs a value"))
        };
        match word.as_str() {
            "--json" => args.json = true,
            "--seed" => args.seed = value("--seed")?.parse().context("--seed")?,
            "--threads" => args.threads = value("--threads")?.parse().context("--threads")?,
            "--scenario" => args.scenarios.push(value("--scenario")?),
            "--window" => args.setup.window_s = value("--window")?.parse().context("--window")?,
            "--poll" => args.setup.poll_s = value("--poll")?.parse().context("--poll")?,
            "--min-write-gap" => {
                args.setup.min_write_gap_s = value("--min-write-gap")?
                    .parse()
                    .context("--min-write-gap")?
            }
            "--rate-period" => {
                args.setup.rate_period_s =
                    value("--rate-period")?.parse().context("--rate-period")?
            }
            "--eager-floor" => {
                args.setup.eager_floor_s =
                    value("--eager-floor")?.parse().context("--eager-floor")?
            }
            "--trace" => args.setup.keep_records = true,
            "--law" => args.setup.config = law_config(&value("--law")?)?,
            other => {
                bail!("unknown argument {other:?} (see the top of bench/src/controller/mod.rs)")
            }
        }
    }
    Ok(args)
}

/// `Config::default()` with the fields of a JSON object replaced.
fn law_config(overrides: &str) -> Result<Config> {
    let overrides: serde_json::Value =
        serde_json::from_str(overrides).context("--law takes a JSON object")?;
    let mut config = serde_json::to_value(Config::default())?;
    let (Some(config_fields), Some(new_fields)) = (config.as_object_mut(), overrides.as_object())
    else {
        bail!("--law takes a JSON object");
    };
    for (key, value) in new_fields {
        if !config_fields.contains_key(key) {
            bail!("--law: law::Config has no field {key:?}");
        }
        config_fields.insert(key.clone(), value.clone());
    }
    let config: Config = serde_json::from_value(config).context("--law")?;
    config.validate()?;
    Ok(config)
}

pub fn main(words: &[String]) -> Result<()> {
    let args = parse_args(words)?;
    let mut workloads = grid::workloads();
    if !args.scenarios.is_empty() {
        workloads.retain(|w| args.scenarios.contains(&w.name()));
        if workloads.is_empty() {
            let known: Vec<String> = grid::workloads().iter().map(|w| w.name()).collect();
            bail!("no such scenario; known: {}", known.join(", "));
        }
    }
    let report = jobs::run(
        &workloads,
        &grid::full_grid(),
        &args.setup,
        args.seed,
        args.threads,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::table(&report));
        println!("weights (node reads): {:?}", report.weights);
        println!(
            "wall time: {:.1} s on {} threads",
            report.wall_s, args.threads
        );
    }
    let violations = report::violations(&report);
    if violations.is_empty() {
        eprintln!("acceptance: every scenario within 1.05 x best static, mixed below default");
    } else {
        for violation in violations {
            eprintln!("acceptance NOT met: {violation}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sim::scenario::controlled::Workload;

    use super::*;

    /// The benchmark in reduced form: three workloads (the VM run at the RFC's budget and at
    /// 6 MiB, and `mixed`, where the controller must also beat the default), a grid of
    /// compression off, the default and the full grid's best setting on the VM runs (25 %,
    /// 100 ms), the controller as `cargo xtask bench controller` runs it. About 20 s of CPU in
    /// a debug build, most of it the controlled `mixed` run (it records every event).
    #[test]
    fn reduced_bench_meets_the_acceptance() {
        // 6 MiB: nearly all its cost is the cold start, where a slow first reaction shows.
        let workloads = [
            Workload::VmReplay {
                budget_bytes: 3 << 20,
            },
            Workload::VmReplay {
                budget_bytes: 6 << 20,
            },
            Workload::Mixed,
        ];
        let settings = grid::grid(&[25], &[100]);
        let report = jobs::run(&workloads, &settings, &ControllerSetup::default(), 1, 2).unwrap();
        eprintln!("{}", report::table(&report));
        assert_eq!(report::violations(&report), Vec::<String>::new());
        for scenario in &report.scenarios {
            assert!(scenario.controller_cost <= 1.05 * scenario.best_static_cost);
            assert!(scenario.controller_trace.moves > 0, "{}", scenario.name);
        }
        let mixed = &report.scenarios[2];
        assert_eq!(mixed.name, "mixed");
        assert!(mixed.controller_cost < mixed.default_cost);
    }
}
