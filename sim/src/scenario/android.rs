//! `android-launch`: the RFC's phone trial. After boot: a seed pass launching 18 apps, a
//! normalisation pause, 1 GiB of memory pressure held for 30 s, release, then two measured
//! passes launching the same 18 apps (cold: their processes were killed under pressure). The
//! final snapshot is taken after the policy is restored (nothing is flushed).
//!
//! Each launch is an app process (uid 10000 + app index, comm = the package's last 15 bytes,
//! as Android names app threads) that maps its code (APK, native libraries, odex/vdex/art: every
//! node of those files), opens its databases, lists and reads its shared preferences (the
//! listing reads their inodes ahead), and reads a stable hot subset of its files plus a random
//! part of its cache; then it runs for a few seconds, reading cache files and updating its
//! databases (dirty inodes, written back every 10 s). `system_server` (uid 1000) reads and
//! updates `data/system/` throughout, with a skewed popularity.
//!
//! Memory pressure is modelled as reclaim priorities (see `engine::Pressure::Reclaim`): while
//! the 1 GiB is being allocated (2 s), kswapd runs every 100 ms at priority 5; while it is
//! held, every second at priority 9. These priorities are modelling choices (the phone's memory
//! size is not given); the comparison off vs on uses the same ones.
use std::sync::Arc;

use anyhow::{Context as _, Result};

use super::{Phases, RunTotals, ScenarioName, Totals};
use crate::{
    engine::{Engine, EngineOptions, Pressure, SlotCounts},
    events::Task,
    f2fs::node::RequestedType,
    fileset::android::{
        app_code_dir, app_data_dir, app_uid, AndroidFileSet, APP_PACKAGES, SYSTEM_DIR,
    },
    fileset::fbe::AndroidImage,
    knobs::KnobSource,
    nodes::NodeSet,
    rng::Rng,
};
use tracer_common::knobs::Knobs;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct AndroidParams {
    pub fileset: AndroidFileSet,
    /// The image the file set is read from; None: [`AndroidImage::choose`].
    pub image: Option<AndroidImage>,
    /// Seconds an app stays in the foreground after its launch.
    pub foreground_s: u64,
    pub normalise_s: u64,
    pub pressure_ramp: Pressure,
    pub pressure_ramp_ns: u64,
    pub pressure_hold: Pressure,
    pub pressure_hold_ns: u64,
    pub writeback_every_ns: u64,
    /// The light background reclaim a phone is always under (kswapd keeping free memory
    /// above its watermark as apps come and go).
    pub ambient: Pressure,
}

impl Default for AndroidParams {
    fn default() -> AndroidParams {
        AndroidParams {
            fileset: AndroidFileSet::default(),
            image: None,
            foreground_s: 4,
            normalise_s: 20,
            pressure_ramp: Pressure::Reclaim {
                priority: 5,
                every_ms: 100,
            },
            pressure_ramp_ns: 2 * SECOND,
            pressure_hold: Pressure::Reclaim {
                priority: 9,
                every_ms: 1000,
            },
            pressure_hold_ns: 28 * SECOND,
            writeback_every_ns: 10 * SECOND,
            ambient: Pressure::Reclaim {
                priority: 9,
                every_ms: 1000,
            },
        }
    }
}

/// One app's node working set, resolved in the image.
pub struct App {
    pub package: &'static str,
    pub uid: u32,
    code: Vec<u32>,
    databases: Vec<u32>,
    prefs: Vec<u32>,
    hot_files: Vec<u32>,
    cold_files: Vec<u32>,
    cache: Vec<u32>,
}

/// The image the trial reads: `params.image`, else [`AndroidImage::choose`]'s.
pub fn image(params: &AndroidParams) -> Result<AndroidImage> {
    match params.image {
        Some(image) => Ok(image),
        None => AndroidImage::choose(&params.fileset),
    }
}

/// The trial's image and its node set.
pub fn nodes(params: &AndroidParams) -> Result<(AndroidImage, Arc<NodeSet>)> {
    let image = image(params)?;
    Ok((image, NodeSet::for_android(&params.fileset, image)?))
}

/// Android names an app's main thread after the end of its package name.
pub fn app_comm(package: &str) -> &str {
    &package[package.len().saturating_sub(15)..]
}

fn nids_under(nodes: &NodeSet, paths: &[String], prefix: &str, with_children: bool) -> Vec<u32> {
    paths
        .iter()
        .filter(|p| p.starts_with(prefix))
        .flat_map(|p| {
            if with_children {
                nodes.nodes_of(p)
            } else {
                nodes.nid_of(p).into_iter().collect()
            }
        })
        .collect()
}

impl App {
    fn resolve(nodes: &NodeSet, files: &[String], index: usize, rng: &mut Rng) -> App {
        let package = APP_PACKAGES[index];
        let (code_dir, data_dir) = (app_code_dir(package), app_data_dir(package));
        let mut all_files = nids_under(nodes, files, &format!("{data_dir}files/"), false);
        // A stable hot subset (40 %), the rest read now and then.
        let split = all_files.len() * 2 / 5;
        for i in (1..all_files.len()).rev() {
            all_files.swap(i, rng.range(0, i as u64 + 1) as usize);
        }
        let cold_files = all_files.split_off(split);
        App {
            package,
            uid: app_uid(index),
            code: nids_under(nodes, files, &code_dir, true),
            databases: nids_under(nodes, files, &format!("{data_dir}databases/"), true),
            prefs: nids_under(nodes, files, &format!("{data_dir}shared_prefs/"), false),
            hot_files: all_files,
            cold_files,
            cache: nids_under(nodes, files, &format!("{data_dir}cache/"), false),
        }
    }
}

/// The running trial: engine, apps, processes.
pub struct Trial {
    pub engine: Engine,
    apps: Vec<App>,
    system_files: Vec<u32>,
    system_server: Task,
    next_pid: u32,
    next_writeback: u64,
    params: AndroidParams,
    rng: Rng,
}

impl Trial {
    pub fn new(
        params: &AndroidParams,
        knobs: KnobSource,
        options: EngineOptions,
        seed: u64,
    ) -> Result<Trial> {
        let (_, nodes) = nodes(params)?;
        Trial::from_engine(params, Engine::new(nodes, knobs, options), seed)
    }

    /// A trial on an engine made elsewhere (live mode) over the android image's nodes.
    pub fn from_engine(params: &AndroidParams, engine: Engine, seed: u64) -> Result<Trial> {
        let manifest = params.fileset.manifest();
        let nodes = engine.nodes().clone();
        let files: Vec<String> = manifest.files_under("").map(|e| e.path.clone()).collect();
        let rng = Rng::new(seed);
        let mut app_rng = rng.fork(1);
        let apps = (0..APP_PACKAGES.len())
            .map(|i| App::resolve(&nodes, &files, i, &mut app_rng))
            .collect();
        let system_files = nids_under(&nodes, &files, SYSTEM_DIR, false);
        anyhow::ensure!(
            !system_files.is_empty(),
            "the android image has no {SYSTEM_DIR} files"
        );
        Ok(Trial {
            engine,
            apps,
            system_files,
            system_server: Task::process(1100, 1000, "system_server"),
            next_pid: 3000,
            next_writeback: params.writeback_every_ns,
            params: params.clone(),
            rng: rng.fork(2),
        })
    }

    fn spawn(&mut self, uid: u32, comm: &str) -> Task {
        self.next_pid += 1 + self.rng.range(0, 8) as u32;
        Task::process(self.next_pid, uid, comm)
    }

    /// One access followed by `think` ns of the task's own work; writeback when due.
    fn touch(&mut self, task: &Task, nid: u32, think: u64) -> Result<()> {
        let (_, cost) = self.engine.access(task, nid, RequestedType::Any)?;
        self.engine.advance_by(cost + think)?;
        self.writeback_if_due();
        Ok(())
    }

    fn writeback_if_due(&mut self) {
        if self.engine.now() >= self.next_writeback {
            self.engine.checkpoint();
            self.next_writeback = self.engine.now() + self.params.writeback_every_ns;
        }
    }

    /// system_server reads (and sometimes updates) a skewed choice of `data/system/` files.
    fn system_activity(&mut self, count: u32) -> Result<()> {
        let task = self.system_server;
        for _ in 0..count {
            let skew = self.rng.unit().powi(3);
            let nid = self.system_files[(skew * self.system_files.len() as f64) as usize];
            if self.rng.chance(0.1) {
                let cost = self.engine.modify(&task, nid)?;
                self.engine.advance_by(cost + 200_000)?;
            } else {
                self.touch(&task, nid, 200_000)?;
            }
        }
        Ok(())
    }

    /// Launch app `index` (a new process) and use it for `foreground_s` seconds.
    pub fn launch(&mut self, index: usize) -> Result<()> {
        let (package, uid) = (self.apps[index].package, self.apps[index].uid);
        let task = self.spawn(uid, app_comm(package));
        let zygote_fork = 30 * MS;
        self.engine.advance_by(zygote_fork)?;
        let code = self.apps[index].code.clone();
        for nid in code {
            self.touch(&task, nid, 300_000)?;
        }
        let databases = self.apps[index].databases.clone();
        for nid in &databases {
            self.touch(&task, *nid, 500_000)?;
        }
        let prefs = self.apps[index].prefs.clone();
        let cost = self.engine.readahead(&task, &prefs)?;
        self.engine.advance_by(cost)?;
        for nid in prefs {
            self.touch(&task, nid, 100_000)?;
        }
        let hot = self.apps[index].hot_files.clone();
        for nid in hot {
            self.touch(&task, nid, 150_000)?;
        }
        self.system_activity(20)?;
        self.foreground(index, &task, &databases)
    }

    /// The app in use: cache reads, some cold files, database updates, system activity.
    fn foreground(&mut self, index: usize, task: &Task, databases: &[u32]) -> Result<()> {
        let until = self.engine.now() + self.params.foreground_s * SECOND;
        while self.engine.now() < until {
            let app = &self.apps[index];
            let roll = self.rng.unit();
            if roll < 0.6 && !app.cache.is_empty() {
                let nid = app.cache[self.rng.range(0, app.cache.len() as u64) as usize];
                self.touch(task, nid, 20 * MS)?;
            } else if roll < 0.75 && !app.cold_files.is_empty() {
                let nid = app.cold_files[self.rng.range(0, app.cold_files.len() as u64) as usize];
                self.touch(task, nid, 20 * MS)?;
            } else if roll < 0.9 && !databases.is_empty() {
                let nid = databases[self.rng.range(0, databases.len() as u64) as usize];
                let cost = self.engine.modify(task, nid)?;
                self.engine.advance_by(cost + 20 * MS)?;
            } else {
                self.system_activity(3)?;
            }
        }
        Ok(())
    }

    /// Launch all 18 apps once.
    pub fn launch_pass(&mut self) -> Result<()> {
        for index in 0..self.apps.len() {
            self.launch(index)?;
        }
        Ok(())
    }

    /// Idle with background system activity.
    pub fn idle(&mut self, ns: u64) -> Result<()> {
        let until = self.engine.now() + ns;
        while self.engine.now() < until {
            self.system_activity(1)?;
            self.engine.advance_by(100 * MS)?;
        }
        Ok(())
    }

    /// Allocate and hold 1 GiB (reclaim at the configured priorities), then release.
    pub fn pressure(&mut self) -> Result<()> {
        self.engine.set_pressure(self.params.pressure_ramp);
        self.idle(self.params.pressure_ramp_ns)?;
        self.engine.set_pressure(self.params.pressure_hold);
        self.idle(self.params.pressure_hold_ns)?;
        self.engine.set_pressure(self.params.ambient);
        Ok(())
    }

    /// Boot: mount reads the root inode.
    pub fn boot(&mut self) -> Result<()> {
        let root = self.engine.nodes().root_ino;
        let init = Task::process(1, 0, "init");
        self.engine.set_pressure(self.params.ambient);
        self.touch(&init, root, 0)
    }
}

/// One trial with fixed knobs. Phases: "seed", "normalise", "pressure", "pass1", "pass2".
pub fn run_static(params: &AndroidParams, knobs: Knobs, seed: u64) -> Result<RunTotals> {
    let mut trial = Trial::new(
        params,
        KnobSource::Static(knobs),
        EngineOptions::default(),
        seed,
    )?;
    let first = trial.engine.snapshot();
    let mut phases = Phases::new(&trial.engine);
    trial.boot()?;
    trial.launch_pass().context("seed pass")?;
    phases.mark(&trial.engine, "seed");
    trial.idle(params.normalise_s * SECOND)?;
    phases.mark(&trial.engine, "normalise");
    trial.pressure()?;
    phases.mark(&trial.engine, "pressure");
    trial.launch_pass().context("measured pass 1")?;
    phases.mark(&trial.engine, "pass1");
    trial.launch_pass().context("measured pass 2")?;
    phases.mark(&trial.engine, "pass2");
    Ok(RunTotals::new(
        ScenarioName::AndroidLaunch,
        knobs,
        seed,
        &first,
        &trial.engine,
        phases,
    ))
}

/// The final-snapshot figures the RFC reports per trial.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AndroidSide {
    pub attached_entries: u64,
    pub compressed_entries: u64,
    pub raw_bytes: u64,
    pub slot_bytes: u64,
    pub logical_bytes: u64,
    /// FS_NODE_READ_IO over the whole trial.
    pub node_reads: u64,
    pub conversions: u64,
    pub restores: u64,
    pub slots: SlotCounts,
    pub pass1: Totals,
    pub pass2: Totals,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AndroidChanges {
    pub retained_entries: f64,
    pub raw_bytes: f64,
    pub logical_bytes: f64,
    pub node_reads: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AndroidReport {
    /// The image the trial read its nodes from: `fbe` (as a phone writes /data) or `plain`.
    pub image: &'static str,
    pub off: AndroidSide,
    pub on: AndroidSide,
    /// Relative changes on vs off (fractions; negative = lower with compression on).
    pub changes: AndroidChanges,
}

fn side(run: &RunTotals) -> AndroidSide {
    let end = &run.final_snapshot;
    let pass = |name| run.phase(name).expect("phase recorded").totals;
    AndroidSide {
        attached_entries: end.memory.entries,
        compressed_entries: end.memory.compressed_entries,
        raw_bytes: end.memory.raw_bytes,
        slot_bytes: end.memory.slot_bytes,
        logical_bytes: end.memory.attributed_bytes,
        node_reads: run.whole.node_reads,
        conversions: run.whole.events().conversions,
        restores: run.whole.events().restores,
        slots: end.slots,
        pass1: pass("pass1"),
        pass2: pass("pass2"),
    }
}

pub fn compare(params: &AndroidParams, seed: u64) -> Result<AndroidReport> {
    // Both sides on one image, whatever the cache gains meanwhile.
    let image = image(params)?;
    let params = &AndroidParams {
        image: Some(image),
        ..params.clone()
    };
    let on_knobs = Knobs::default();
    let off = side(&run_static(
        params,
        Knobs {
            threshold: 0,
            ..on_knobs
        },
        seed,
    )?);
    let on = side(&run_static(params, on_knobs, seed)?);
    let change = |on: u64, off: u64| on as f64 / off.max(1) as f64 - 1.0;
    Ok(AndroidReport {
        image: image.name(),
        changes: AndroidChanges {
            retained_entries: change(on.attached_entries, off.attached_entries),
            raw_bytes: change(on.raw_bytes, off.raw_bytes),
            logical_bytes: change(on.logical_bytes, off.logical_bytes),
            node_reads: change(on.node_reads, off.node_reads),
        },
        off,
        on,
    })
}

/// The simulated phone's /data/system/packages.list: the apps' packages and uids, so views
/// name them as they would on a phone.
pub fn packages_list() -> String {
    APP_PACKAGES
        .iter()
        .enumerate()
        .map(|(index, package)| {
            let uid = app_uid(index);
            format!(
                "{package} {uid} 0 /data/user/0/{package} default:targetSdkVersion=34 3003 0 1\n"
            )
        })
        .collect()
}
