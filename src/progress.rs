//! Where progress goes: plain lines on stderr (a log, a CI job, `--progress plain`), or, when
//! stderr is a terminal, the same lines scrolling above a live bar with jobs done of all, the
//! jobs running, the failures so far and an ETA.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::fmt::Write;
use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `--progress`: how progress is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// A live bar when stderr is a terminal, plain lines otherwise.
    #[default]
    Auto,
    /// Plain lines only, one per finished job, as in a log.
    Plain,
}

/// The terminal's progress area, shared by every event of one command.
pub struct Terminal {
    quiet: bool,
    bar: Option<ProgressBar>,
    slots: usize,
    failed: AtomicUsize,
    /// The noun the bar counts ("jobs", "cases", "mutants").
    unit: &'static str,
    /// The run's own ETA text, once [`Terminal::update_with_eta`] gave one (`own_eta`).
    run_eta: Arc<Mutex<String>>,
    own_eta: AtomicBool,
}

/// `1m50s`, `59s`: a remaining time as the progress lines and the bar show it.
pub fn clock(duration: Duration) -> String {
    let secs = duration.as_secs_f64().round() as u64;
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

impl Terminal {
    /// Progress for a command running `slots` jobs at once; `quiet` prints nothing.
    pub fn new(mode: ProgressMode, quiet: bool, slots: usize, unit: &'static str) -> Self {
        let live = !quiet
            && mode == ProgressMode::Auto
            && std::io::stderr().is_terminal()
            && std::env::var("TERM").map_or(true, |term| term != "dumb");
        let bar = live.then(|| {
            // Hidden until the first count, so nothing is drawn before the plan is known.
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
            let style = ProgressStyle::with_template(
                "{spinner} [{bar:30}] {pos}/{len} {prefix} · {msg} · {elapsed} elapsed, ETA {eta}",
            )
            .map(|style| style.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(unit);
            bar
        });
        Self {
            quiet,
            bar,
            slots: slots.max(1),
            failed: AtomicUsize::new(0),
            unit,
            run_eta: Arc::default(),
            own_eta: AtomicBool::new(false),
        }
    }

    /// One line of progress: above the bar when live, on stderr otherwise.
    pub fn line(&self, text: &str) {
        if !self.quiet {
            self.urgent(text);
        }
    }

    /// A line shown even with `--quiet` (why a proof waits): above the bar when live.
    pub fn urgent(&self, text: &str) {
        match &self.bar {
            // A bar not drawn yet (before the first count) would drop the line.
            Some(bar) if !bar.is_hidden() => bar.println(text),
            _ => errln!("{text}"),
        }
    }

    /// Counts one more failure (a failing case, a job in the infrastructure lane, a survivor).
    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// `done` of `total` finished: moves the bar; the jobs running are those the slots can hold
    /// of what is left, and the failures are those counted so far.
    pub fn update(&self, done: usize, total: usize) {
        let failed = self.failed.load(Ordering::Relaxed);
        self.update_with(done, total, self.unit, format!("{failed} failed"));
    }

    /// As [`Terminal::update`], counting `unit` with the run's own tally (`3 killed · 1 survived`).
    pub fn update_with(&self, done: usize, total: usize, unit: &'static str, tally: String) {
        let Some(bar) = &self.bar else {
            return;
        };
        if bar.length() != Some(total as u64) {
            bar.set_length(total as u64);
        }
        bar.set_prefix(unit);
        bar.set_position(done as u64);
        let running = self.slots.min(total.saturating_sub(done));
        bar.set_message(format!("{running} running · {tally}"));
        if bar.is_hidden() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(200));
        }
    }

    /// As [`Terminal::update_with`], with the run's own ETA (`None` before it has one) in place
    /// of the bar's: a mutation run settles the mutants with no coverage or a cached verdict at
    /// once and runs the costliest first, which the bar's own rate misreads.
    pub fn update_with_eta(
        &self,
        done: usize,
        total: usize,
        unit: &'static str,
        tally: String,
        eta: Option<Duration>,
    ) {
        let Some(bar) = &self.bar else {
            return;
        };
        let text = eta.map_or_else(String::new, |eta| format!(", ETA {}", clock(eta)));
        if let Ok(mut shown) = self.run_eta.lock() {
            *shown = text;
        }
        if !self.own_eta.swap(true, Ordering::Relaxed) {
            let run_eta = self.run_eta.clone();
            let style = ProgressStyle::with_template(
                "{spinner} [{bar:30}] {pos}/{len} {prefix} · {msg} · {elapsed} elapsed{run_eta}",
            )
            .map(|style| {
                style.progress_chars("=> ").with_key(
                    "run_eta",
                    move |_: &ProgressState, out: &mut dyn Write| {
                        if let Ok(text) = run_eta.lock() {
                            let _ = out.write_str(&text);
                        }
                    },
                )
            })
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
        }
        self.update_with(done, total, unit, tally);
    }

    /// Clears the bar before the summary prints; the lines above it stay.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.finish();
    }
}
