//! The control law on scripted signal sequences: exact decisions, with the default config.
use controller::{
    law::{step, urgent, Action, Config, Decision, Regime, State},
    signals::Signals,
};
use tracer_common::knobs::Knobs;

fn knobs(threshold: u32, interval_ms: u32) -> Knobs {
    Knobs {
        threshold,
        interval_ms,
    }
}

/// PSI `some avg10` only (the default goal is 5 %: pressure 5.0 scores 1.0).
fn pressure(psi: f64) -> Signals {
    Signals {
        trailing_s: 5.0,
        memory_pressure: Some(psi),
        ..Signals::default()
    }
}

/// Pressure plus 100 conversions/s of which `eager` and `wasted` per cent were wasted.
fn pressure_and_waste(psi: f64, eager_percent: f64, wasted_percent: f64) -> Signals {
    Signals {
        conversions_per_s: 100.0,
        eager_restores_per_s: eager_percent,
        wasted_per_s: wasted_percent,
        ..pressure(psi)
    }
}

/// Run the law over `sequence` from `start`; every (state after, decision) in order.
fn run(start: Knobs, sequence: &[Signals]) -> Vec<(State, Decision)> {
    run_with(&Config::default(), start, sequence)
}

/// Each decision that moved the knobs: its index and the interval it left.
fn interval_moves(steps: &[(State, Decision)]) -> Vec<(usize, u32)> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, (_, d))| d.action != Action::Hold)
        .map(|(i, (s, _))| (i, s.knobs.interval_ms))
        .collect()
}

fn run_with(cfg: &Config, start: Knobs, sequence: &[Signals]) -> Vec<(State, Decision)> {
    let mut state = State::new(start);
    sequence
        .iter()
        .map(|signals| {
            let (next, decision) = step(&state, signals, cfg);
            state = next.clone();
            (next, decision)
        })
        .collect()
}

fn trajectory(steps: &[(State, Decision)]) -> Vec<(u32, u32)> {
    steps
        .iter()
        .map(|(state, _)| (state.knobs.threshold, state.knobs.interval_ms))
        .collect()
}

#[test]
fn dead_band_holds_still() {
    // Scores between tight_exit (0.8) and tight_enter (1.1), waste near its goals: nothing moves.
    let wobble = [4.1, 5.4, 4.5, 5.0, 5.49, 4.01];
    let sequence: Vec<Signals> = (0..120)
        .map(|i| pressure_and_waste(wobble[i % wobble.len()], 10.0, 25.0))
        .collect();
    let steps = run(knobs(12, 1000), &sequence);
    for (state, decision) in &steps {
        assert_eq!(decision.action, Action::Hold, "{}", decision.reason);
        assert_eq!(state.knobs, knobs(12, 1000));
        assert_eq!(state.regime, Regime::Calm);
    }
    assert!(
        steps[0].1.reason.contains("dead band"),
        "{}",
        steps[0].1.reason
    );

    // Comfortable memory and waste inside its band: still nothing.
    let steps = run(
        knobs(12, 1000),
        &vec![pressure_and_waste(0.0, 11.0, 27.0); 60],
    );
    assert!(steps.iter().all(|(_, d)| d.action == Action::Hold));
    assert!(
        steps[59].1.reason.contains("not wasted"),
        "{}",
        steps[59].1.reason
    );
}

#[test]
fn memory_pressure_moves_to_more_compression_at_once_and_fast() {
    // Score 4: threshold +10 (capped), interval divided by the score (at most by
    // max_backoff_factor, 10) every window.
    let steps = run(knobs(10, 1000), &vec![pressure(20.0); 6]);
    assert_eq!(
        trajectory(&steps),
        [
            (20, 250),
            (25, 100),
            (25, 100),
            (25, 100),
            (25, 100),
            (25, 100)
        ]
    );
    assert!(steps[..2]
        .iter()
        .all(|(_, d)| d.action == Action::CompressMore));
    assert_eq!(steps[0].0.regime, Regime::Tight);
    assert_eq!(
        steps[0].1.reason,
        "memory score 4.00 (pressure 20.00 % vs goal 5.00 %), tight: compress more, \
         threshold 10 -> 20, interval 1000 -> 250 ms"
    );
    assert_eq!(steps[2].1.action, Action::Hold);
    assert!(steps[2]
        .1
        .reason
        .contains("already at the most compression"));

    // A score above max_backoff_factor moves by that factor: 1000 ms to 100 ms at once.
    let steps = run(knobs(25, 1000), &[pressure(100.0)]);
    assert_eq!(trajectory(&steps), [(25, 100)]);
    let steps = run(knobs(25, 5000), &[pressure(100.0)]);
    assert_eq!(trajectory(&steps), [(25, 500)]);

    // The step grows with the distance to the goal (DAMOS): score 1.2 moves less.
    let steps = run(knobs(10, 1000), &[pressure(6.0)]);
    assert_eq!(trajectory(&steps), [(12, 833)]);

    // Compression off: memory need switches it back on at threshold_restart (12).
    let steps = run(knobs(0, 30_000), &vec![pressure(20.0); 6]);
    assert_eq!(
        trajectory(&steps),
        [
            (12, 7500),
            (22, 1875),
            (25, 469),
            (25, 117),
            (25, 100),
            (25, 100)
        ]
    );
}

#[test]
fn compressing_less_is_slow_bounded_and_waits_between_steps() {
    // Comfortable memory, half the conversions wasted both ways, for 400 windows.
    let steps = run(
        knobs(25, 100),
        &vec![pressure_and_waste(0.0, 50.0, 50.0); 400],
    );
    let moves: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].1.action != Action::Hold)
        .collect();
    assert!(steps.iter().all(|(_, d)| d.action != Action::CompressMore));
    // One slow step every relax_after_periods (6) quiet windows, never sooner.
    assert_eq!(moves[0], 5, "the first step waits 6 windows");
    assert!(moves.windows(2).all(|pair| pair[1] - pair[0] == 6));
    assert_eq!(trajectory(&steps)[5], (25, 125));
    assert!(steps[5]
        .1
        .reason
        .contains("for 6 quiet windows: compress less"));

    let mut previous = knobs(25, 100);
    for (state, _) in &steps {
        let now = state.knobs;
        // Bounded: interval x1.25 at most (1 ms of rounding), one threshold point at most.
        assert!(f64::from(now.interval_ms) <= f64::from(previous.interval_ms) * 1.25 + 1.0);
        assert!(previous.threshold - now.threshold <= 1);
        // The threshold moves only once the interval is as long as allowed.
        if now.threshold < 25 {
            assert_eq!(now.interval_ms, 30_000);
        }
        previous = now;
    }
    // 26 interval steps and 25 threshold steps, 6 windows each: about 300 windows from the
    // most to the least compression, where memory need takes 5 windows the other way.
    assert_eq!(steps[399].0.knobs, knobs(0, 30_000));
    assert_eq!(moves.len(), 26 + 25);
    assert!(steps[399]
        .1
        .reason
        .contains("already at the least compression"));
}

#[test]
fn conversions_that_all_come_back_at_once_relax_quickly() {
    // Comfortable, and every conversion restored within the eager span (a service rereading
    // what the worker just compressed): the second such window steps by eager / goal (10x),
    // from 100 to 1000 ms. Once: the rates still show the old interval's churn for a while, so
    // while the waste goes on the next steps take the slow pace (6 windows, x1.25).
    let steps = run(
        knobs(25, 100),
        &vec![pressure_and_waste(0.0, 100.0, 0.0); 14],
    );
    assert_eq!(steps[0].1.action, Action::Hold);
    assert!(steps[0].1.reason.contains("quiet window 1 of 2"));
    assert_eq!(steps[1].1.action, Action::CompressLess);
    assert_eq!(interval_moves(&steps), [(1, 1000), (7, 1250), (13, 1563)]);
    // Useful conversions after it do not take the interval back (it would churn again), and
    // eager waste after them still takes the slow pace; memory need compresses more (1000 /
    // a score of 4) and makes the next quick step possible.
    let eager = pressure_and_waste(0.0, 100.0, 0.0);
    let mut sequence = vec![eager.clone(); 2];
    sequence.push(pressure_and_waste(0.0, 0.0, 0.0));
    sequence.extend(vec![eager.clone(); 2]);
    let steps = run(knobs(25, 100), &sequence);
    assert_eq!(interval_moves(&steps), [(1, 1000)]);
    assert!(steps[2].1.reason.contains("only memory need shortens it"));
    sequence.push(pressure(20.0));
    sequence.extend(vec![eager; 3]);
    let steps = run(knobs(25, 100), &sequence);
    assert_eq!(interval_moves(&steps), [(1, 1000), (5, 250), (7, 2500)]);
    // 80 % eager: a step of 8x, still quick.
    let steps = run(knobs(25, 100), &vec![pressure_and_waste(0.0, 80.0, 0.0); 2]);
    assert_eq!(trajectory(&steps)[1], (25, 800));
    // Below eager_relax_fraction (75 %) the slow pace holds: 6 windows, x1.25.
    let steps = run(knobs(25, 100), &vec![pressure_and_waste(0.0, 70.0, 0.0); 6]);
    assert_eq!(interval_moves(&steps), [(5, 125)]);
    // Memory tight: no step away from compression, however eager.
    let steps = run(
        knobs(25, 100),
        &vec![pressure_and_waste(20.0, 100.0, 0.0); 4],
    );
    assert!(steps.iter().all(|(_, d)| d.action != Action::CompressLess));
}

#[test]
fn only_a_run_of_wasteful_windows_earns_a_slow_step() {
    // Long calm without waste, then waste in runs of 5 broken by a clean window: never 6 in a
    // row, so nothing moves.
    let clean = pressure_and_waste(0.0, 0.0, 0.0);
    let wasteful = pressure_and_waste(0.0, 50.0, 50.0);
    let mut sequence = vec![clean.clone(); 30];
    for _ in 0..20 {
        sequence.extend(vec![wasteful.clone(); 5]);
        sequence.push(clean.clone());
    }
    let steps = run(knobs(25, 100), &sequence);
    assert!(steps.iter().all(|(_, d)| d.action == Action::Hold));
    // The sixth wasteful window in a row does.
    sequence.extend(vec![wasteful; 6]);
    let steps = run(knobs(25, 100), &sequence);
    assert_eq!(steps.last().unwrap().1.action, Action::CompressLess);
}

#[test]
fn hysteresis_enters_at_1_1_and_leaves_at_0_8() {
    // 5.25 scores 1.05: above the goal but below tight_enter, so a calm law holds.
    let calm = run(knobs(12, 1000), &vec![pressure(5.25); 5]);
    assert!(calm.iter().all(|(_, d)| d.action == Action::Hold));

    // Enter at 1.2; then 0.9 is inside the band: stay tight and hold; 1.05 while tight still
    // compresses more (above the goal); 0.8 leaves; 1.05 once calm holds again.
    let steps = run(
        knobs(12, 1000),
        &[
            pressure(6.0),
            pressure(4.5),
            pressure(5.25),
            pressure(4.0),
            pressure(5.25),
        ],
    );
    let seen: Vec<(Regime, Action)> = steps.iter().map(|(s, d)| (s.regime, d.action)).collect();
    assert_eq!(
        seen,
        [
            (Regime::Tight, Action::CompressMore),
            (Regime::Tight, Action::Hold),
            (Regime::Tight, Action::CompressMore),
            (Regime::Calm, Action::Hold),
            (Regime::Calm, Action::Hold),
        ]
    );
}

#[test]
fn hysteresis_prevents_flapping() {
    // Pressure jumping across both thresholds every window, with waste that would justify
    // compressing less: the law only ever moves one way.
    let sequence: Vec<Signals> = (0..300)
        .map(|i| {
            let psi = if i % 2 == 0 { 6.0 } else { 3.0 };
            pressure_and_waste(psi, 50.0, 50.0)
        })
        .collect();
    let steps = run(knobs(10, 1000), &sequence);
    assert_eq!(reversals(&steps), 0);
    // The same sequence with the hysteresis and the grace windows switched off flaps.
    let no_hysteresis = Config {
        tight_enter: 1.01,
        tight_exit: 0.99,
        relax_after_periods: 1,
        ..Config::default()
    };
    let steps = run_with(&no_hysteresis, knobs(10, 1000), &sequence);
    assert!(reversals(&steps) > 100, "{} reversals", reversals(&steps));

    // Noise around the goal (scores 0.7..1.3, pseudo-random): no reversals either.
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let sequence: Vec<Signals> = (0..2000)
        .map(|_| pressure_and_waste(5.0 * (0.7 + 0.6 * rng.unit()), 50.0, 50.0))
        .collect();
    let steps = run(knobs(10, 1000), &sequence);
    assert_eq!(reversals(&steps), 0);
}

#[test]
fn bounds_are_never_exceeded_and_every_step_is_bounded() {
    let cfg = Config::default();
    let mut rng = XorShift(42);
    let starts = [
        knobs(0, 100),
        knobs(25, 30_000),
        knobs(12, 1000),
        knobs(60, 5000),
    ];
    for start in starts {
        let mut state = State::new(start);
        for _ in 0..20_000 {
            let signals = random_signals(&mut rng);
            let (next, decision) = step(&state, &signals, &cfg);
            let (old, new) = (state.knobs, next.knobs);
            assert_eq!(decision.knobs, new);
            assert!(new.check().is_ok(), "{new:?} from {old:?}");
            assert!((100..=30_000).contains(&new.interval_ms));
            assert!(new.threshold <= 100);
            if start.threshold <= cfg.threshold_max {
                assert!(new.threshold <= cfg.threshold_max);
            }
            assert!(
                f64::from(new.interval_ms) * cfg.max_backoff_factor + 1.0
                    >= f64::from(old.interval_ms),
                "{old:?} -> {new:?}"
            );
            // Growing: x1.25 at most, or the eager factor when the conversions were eager.
            let growth = match decision.eager_fraction {
                Some(eager) if eager >= cfg.eager_relax_fraction => cfg.max_eager_relax_factor,
                _ => cfg.relax_interval_factor,
            };
            assert!(f64::from(new.interval_ms) <= f64::from(old.interval_ms) * growth + 1.0);
            let up_limit = cfg.max_threshold_step_up.max(cfg.threshold_restart);
            assert!(new.threshold <= old.threshold + up_limit);
            assert!(old.threshold <= new.threshold + cfg.relax_threshold_step);
            state = next;
        }
    }
}

#[test]
fn budget_scores_like_pressure_and_the_worse_of_the_two_counts() {
    let over_budget = Signals {
        attributed_bytes: Some(2_000_000),
        budget_bytes: Some(1_000_000),
        ..Signals::default()
    };
    let steps = run(knobs(10, 1000), std::slice::from_ref(&over_budget));
    assert_eq!(steps[0].1.action, Action::CompressMore);
    assert!(steps[0]
        .1
        .reason
        .contains("memory 2000000 B vs goal 950000 B"));

    // Low PSI does not hide an overrun budget.
    let both = Signals {
        memory_pressure: Some(0.0),
        ..over_budget
    };
    assert_eq!(
        run(knobs(10, 1000), &[both])[0].1.action,
        Action::CompressMore
    );

    let under_budget = Signals {
        attributed_bytes: Some(500_000),
        budget_bytes: Some(1_000_000),
        ..Signals::default()
    };
    assert_eq!(
        run(knobs(10, 1000), &[under_budget])[0].1.action,
        Action::Hold
    );
}

#[test]
fn without_a_memory_signal_the_law_holds() {
    let signals = Signals {
        conversions_per_s: 100.0,
        wasted_per_s: 90.0,
        ..Signals::default()
    };
    let steps = run(knobs(10, 1000), &vec![signals; 20]);
    assert!(steps.iter().all(|(_, d)| d.action == Action::Hold));
    assert!(steps[0].1.reason.starts_with("no memory signal"));
}

#[test]
fn eager_conversions_keep_the_interval_when_memory_is_tight_only_if_configured() {
    // By default memory need wins: under reclaim the eager restores are copies that survived.
    let eager_and_tight = [pressure_and_waste(20.0, 50.0, 0.0)];
    let steps = run(knobs(10, 1000), &eager_and_tight);
    assert_eq!(trajectory(&steps), [(20, 250)]);
    // With eager_keeps_interval_when_tight only the threshold rises.
    let keep = Config {
        eager_keeps_interval_when_tight: true,
        ..Config::default()
    };
    let steps = run_with(&keep, knobs(10, 1000), &eager_and_tight);
    assert_eq!(trajectory(&steps), [(20, 1000)]);
    assert!(steps[0].1.reason.contains("interval kept: eager 50 %"));
}

#[test]
fn waste_below_the_noise_floor_is_ignored() {
    // 0.5 conversions/s is under min_conversions_per_s: no waste verdict, no slow steps.
    let signals = Signals {
        conversions_per_s: 0.5,
        eager_restores_per_s: 0.5,
        wasted_per_s: 0.5,
        ..pressure(0.0)
    };
    let steps = run(knobs(25, 100), &vec![signals; 50]);
    assert!(steps.iter().all(|(_, d)| d.action == Action::Hold));
    assert_eq!(steps[0].1.eager_fraction, None);
}

#[test]
fn the_law_is_a_pure_function() {
    let state = State::new(knobs(10, 1000));
    let signals = pressure_and_waste(7.0, 20.0, 30.0);
    let cfg = Config::default();
    assert_eq!(step(&state, &signals, &cfg), step(&state, &signals, &cfg));
}

/// Changes of direction: CompressMore after CompressLess or the other way round.
fn reversals(steps: &[(State, Decision)]) -> usize {
    let moves: Vec<Action> = steps
        .iter()
        .map(|(_, d)| d.action)
        .filter(|&a| a != Action::Hold)
        .collect();
    moves.windows(2).filter(|pair| pair[0] != pair[1]).count()
}

fn random_signals(rng: &mut XorShift) -> Signals {
    let maybe = |rng: &mut XorShift, scale: f64| {
        let value = rng.unit() * scale;
        (rng.unit() < 0.8).then_some(value)
    };
    let conversions = rng.unit() * 1000.0;
    Signals {
        trailing_s: 5.0,
        node_reads_per_s: rng.unit() * 5000.0,
        restores_per_s: rng.unit() * 5000.0,
        conversions_per_s: if rng.unit() < 0.02 {
            f64::NAN
        } else {
            conversions
        },
        eager_restores_per_s: rng.unit() * conversions,
        wasted_per_s: rng.unit() * conversions,
        memory_pressure: maybe(rng, 40.0),
        attributed_bytes: maybe(rng, 8e6).map(|b| b as u64),
        budget_bytes: maybe(rng, 1.0).map(|_| 4_000_000),
    }
}

/// A tiny deterministic generator, so the sequences are the same on every run.
struct XorShift(u64);

impl XorShift {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn polls_act_only_on_the_crossing_and_on_escalation_and_only_compress_more() {
    let cfg = Config::default();
    let calm = State::new(knobs(12, 1000));
    // Calm, below tight_enter (1.1 = 5.5 % PSI): nothing urgent, whatever the waste.
    for psi in [0.0, 3.0, 5.49] {
        assert_eq!(
            urgent(&calm, &pressure_and_waste(psi, 90.0, 90.0), &cfg),
            None
        );
    }
    // No memory signal at all: nothing urgent.
    assert_eq!(urgent(&calm, &Signals::default(), &cfg), None);
    // The crossing: the same step the window would take, and the reason says it was a poll.
    let crossing = pressure(10.0);
    let (state, decision) = urgent(&calm, &crossing, &cfg).expect("the crossing is urgent");
    let (window_state, window_decision) = step(&calm, &crossing, &cfg);
    assert_eq!(state, window_state);
    assert_eq!(decision.knobs, window_decision.knobs);
    assert_eq!(decision.knobs, knobs(22, 500));
    assert_eq!(decision.action, Action::CompressMore);
    assert_eq!(state.regime, Regime::Tight);
    assert_eq!(state.answered_score, Some(2.0));
    assert_eq!(
        decision.reason,
        format!("urgent (between windows): {}", window_decision.reason)
    );
    // Tight: only a score of at least 1.1 x the answered 2.0 (PSI 11 %) acts again.
    for psi in [10.0, 10.99, 6.0, 0.0] {
        assert_eq!(urgent(&state, &pressure(psi), &cfg), None, "PSI {psi}");
    }
    let (state, decision) = urgent(&state, &pressure(11.0), &cfg).expect("escalation");
    assert_eq!(decision.knobs, knobs(25, 227));
    assert_eq!(state.answered_score, Some(2.2));
    // At the most compression allowed there is nothing left to do: no step, nothing to log.
    let most = State {
        knobs: knobs(25, 100),
        ..state
    };
    assert_eq!(urgent(&most, &pressure(50.0), &cfg), None);
}

#[test]
fn a_window_hold_keeps_the_answered_score_and_leaving_tight_forgets_it() {
    let cfg = Config::default();
    let (tight, _) = step(&State::new(knobs(12, 1000)), &pressure(10.0), &cfg);
    assert_eq!(tight.answered_score, Some(2.0));
    // Tight dead band (0.8 < score <= 1.0): the window holds, the answer stands.
    let (held, decision) = step(&tight, &pressure(4.5), &cfg);
    assert_eq!(decision.action, Action::Hold);
    assert_eq!(held.answered_score, Some(2.0));
    // Calm again (score 0.8 or less): forgotten; the next crossing is urgent from scratch.
    let (calm, _) = step(&held, &pressure(4.0), &cfg);
    assert_eq!(calm.regime, Regime::Calm);
    assert_eq!(calm.answered_score, None);
    assert!(urgent(&calm, &pressure(5.5), &cfg).is_some());
}

#[test]
fn conversions_that_pay_are_made_sooner() {
    // Calm, 100 conversions/s, none restored soon nor reclaimed unrestored: after one such
    // period the interval shrinks tenfold (1000 -> 100 ms), its shortest, and stays.
    let useful = pressure_and_waste(0.0, 0.0, 0.0);
    let steps = run(knobs(25, 1000), &vec![useful.clone(); 20]);
    let moves = interval_moves(&steps);
    assert_eq!(moves, [(0, 100)]);
    assert!(steps.iter().all(|(s, _)| s.knobs.threshold == 25));
    assert!(steps[19]
        .1
        .reason
        .contains("interval already at its shortest"));
    // Slower settings walk: every second period the interval halves, down to 100 ms.
    let halving = Config {
        sooner_after_periods: 2,
        sooner_interval_factor: 2.0,
        ..Config::default()
    };
    let steps = run_with(&halving, knobs(25, 1000), &vec![useful.clone(); 20]);
    let moves = interval_moves(&steps);
    assert_eq!(moves, [(1, 500), (3, 250), (5, 125), (7, 100)]);
    // Compression off stays off; a wasteful window in between starts the count again.
    let off = run(knobs(0, 1000), &vec![useful.clone(); 30]);
    assert!(off.iter().all(|(_, d)| d.action == Action::Hold));
    let mut broken = Vec::new();
    for _ in 0..5 {
        broken.push(useful.clone());
        broken.push(pressure_and_waste(0.0, 50.0, 50.0));
    }
    let steps = run_with(&halving, knobs(25, 1000), &broken);
    assert!(steps.iter().all(|(_, d)| d.action == Action::Hold));
    // Switched off, the law holds as before.
    let cfg = Config {
        convert_sooner_when_useful: false,
        ..Config::default()
    };
    let held = run_with(
        &cfg,
        knobs(25, 1000),
        &vec![pressure_and_waste(0.0, 0.0, 0.0); 30],
    );
    assert!(held.iter().all(|(_, d)| d.action == Action::Hold));
}

/// `value`'s JSON with each key `new` renamed `old`.
fn with_old_names<T: serde::Serialize>(value: &T, names: &[(&str, &str)]) -> serde_json::Value {
    let mut json = serde_json::to_value(value).unwrap();
    let object = json.as_object_mut().unwrap();
    for (new, old) in names {
        let field = object.remove(*new).unwrap();
        object.insert((*old).into(), field);
    }
    json
}

/// The law's counts of decision periods were named `*_windows` before issue 53: a state file
/// or a law configuration written then still reads, into the same values.
#[test]
fn the_old_window_names_still_read() {
    let state = State {
        quiet_periods: 3,
        useful_periods: 2,
        ..State::new(knobs(25, 1000))
    };
    let old = with_old_names(
        &state,
        &[
            ("quiet_periods", "quiet_windows"),
            ("useful_periods", "useful_windows"),
        ],
    );
    assert_eq!(serde_json::from_value::<State>(old).unwrap(), state);
    let cfg = Config {
        relax_after_periods: 4,
        sooner_after_periods: 3,
        ..Config::default()
    };
    let old = with_old_names(
        &cfg,
        &[
            ("relax_after_periods", "relax_after_windows"),
            ("sooner_after_periods", "sooner_after_windows"),
        ],
    );
    assert_eq!(serde_json::from_value::<Config>(old).unwrap(), cfg);
}
