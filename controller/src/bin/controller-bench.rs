//! `cargo xtask bench controller [--json] [OPTIONS]`: the control law against the default and
//! the best static setting on simulator workloads (see `controller::bench`). Prints figures;
//! never fails on speed. Exits non-zero only when a run fails.
//!
//! Options: `--json`; `--seed N`; `--threads N` (default: the machine's cores);
//! `--scenario NAME` (repeatable; default: all); `--window S` (decision period, virtual
//! seconds); `--poll S` (gauge polls between decisions, virtual seconds; 0: none);
//! `--min-write-gap S`; `--rate-period S`; `--eager-floor S`; `--trace` (every audit record in
//! the JSON); `--law JSON` (fields of `law::Config` to override, for exploring the law's
//! constants).
use anyhow::{bail, Context as _, Result};
use controller::{
    bench::{self, ControllerSetup},
    law::Config,
};

struct Args {
    json: bool,
    seed: u64,
    threads: usize,
    scenarios: Vec<String>,
    setup: ControllerSetup,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        json: false,
        seed: 1,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        scenarios: Vec::new(),
        setup: ControllerSetup::default(),
    };
    let mut words = std::env::args().skip(1);
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
            other => bail!("unknown argument {other:?} (see the top of controller-bench.rs)"),
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

fn main() -> Result<()> {
    let args = parse_args()?;
    let mut workloads = bench::workloads();
    if !args.scenarios.is_empty() {
        workloads.retain(|w| args.scenarios.contains(&w.name()));
        if workloads.is_empty() {
            let known: Vec<String> = bench::workloads().iter().map(|w| w.name()).collect();
            bail!("no such scenario; known: {}", known.join(", "));
        }
    }
    let report = bench::run(
        &workloads,
        &bench::full_grid(),
        &args.setup,
        args.seed,
        args.threads,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", bench::table(&report));
        println!("weights (node reads): {:?}", report.weights);
        println!(
            "wall time: {:.1} s on {} threads",
            report.wall_s, args.threads
        );
    }
    let violations = bench::violations(&report);
    if violations.is_empty() {
        eprintln!("acceptance: every scenario within 1.05 x best static, mixed below default");
    } else {
        for violation in violations {
            eprintln!("acceptance NOT met: {violation}");
        }
    }
    Ok(())
}
