//! Progress for long verify steps: a heartbeat thread that says, at least every
//! [`PERIOD`], which step is running, what it is doing now and for how long, so that a
//! newcomer on a slow machine never waits in silence (a cold `cargo build` of one large crate
//! or a pip download can run for minutes without a line of its own).
//!
//! What is "being done" is whatever was last announced with [`doing`] (the command line of
//! [`crate::run_echoed`] and of the worker's commands, a background download...).

use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest silence between two heartbeat lines: 25 s, under the 30 s the project promises.
pub const PERIOD: Duration = Duration::from_secs(25);
const _: () = assert!(PERIOD.as_secs() < 30);

/// What the main thread is doing now, with when it started.
static DOING: Mutex<Option<(String, Instant)>> = Mutex::new(None);

/// What the background installs ([`crate::prefetch`]) are doing now; `None` when idle.
static BACKGROUND: Mutex<Option<(String, Instant)>> = Mutex::new(None);

/// Announces what the current step does from now on (shown by the heartbeat).
pub fn doing(what: &str) {
    if let Ok(mut slot) = DOING.lock() {
        *slot = Some((what.to_string(), Instant::now()));
    }
}

/// Announces what the background installs do from now on; `None` once they are done.
pub fn background(what: Option<&str>) {
    if let Ok(mut slot) = BACKGROUND.lock() {
        *slot = what.map(|w| (w.to_string(), Instant::now()));
    }
}

/// Runs `command` with its output shown line by line, each line after `prefix` (so that a
/// background install reads apart from the step in front), and returns its status. The
/// command is announced first as `prefix$ command`.
///
/// # Errors
/// The command cannot be started.
pub fn run_prefixed(
    mut command: std::process::Command,
    prefix: &str,
) -> std::io::Result<std::process::ExitStatus> {
    use std::io::BufRead;
    use std::process::Stdio;
    lab::errln!("{prefix}$ {command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pipes: Vec<Box<dyn std::io::Read + Send>> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    let readers: Vec<JoinHandle<()>> = pipes
        .into_iter()
        .map(|pipe| {
            let prefix = prefix.to_string();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    if !line.trim().is_empty() {
                        lab::errln!("{prefix}{}", lab::text::one_line(&line));
                    }
                }
            })
        })
        .collect();
    let status = child.wait();
    for reader in readers {
        let _ = reader.join();
    }
    status
}

/// A running heartbeat; stops (and joins its thread) when dropped.
pub struct Heartbeat {
    stop: std::sync::Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// Starts a heartbeat for the step `step`: every [`PERIOD`] one line
/// `... STEP: still running after 50 s (now: WHAT, for 20 s)` on stderr.
pub fn start(step: &str) -> Heartbeat {
    doing(step);
    let stop = std::sync::Arc::new((Mutex::new(false), Condvar::new()));
    let signal = stop.clone();
    let step = step.to_string();
    let started = Instant::now();
    let thread = std::thread::spawn(move || {
        let (lock, condvar) = &*signal;
        let Ok(mut stopped) = lock.lock() else { return };
        loop {
            // A step shorter than the spawn may stop the heartbeat before this thread holds
            // the lock: its notification is gone, so look before waiting (without this a
            // quick step waited out a whole period, 25 s, in its drop).
            if *stopped {
                return;
            }
            let Ok((guard, _)) = condvar.wait_timeout(stopped, PERIOD) else {
                return;
            };
            stopped = guard;
            if *stopped {
                return;
            }
            let mut text = line(&step, started.elapsed(), current(&DOING));
            if let Some((what, since)) = current(&BACKGROUND) {
                text.push_str(&format!(
                    "; in the background: {}, for {} s",
                    lab::text::excerpt(&what),
                    since.as_secs()
                ));
            }
            lab::errln!("{text}");
        }
    });
    Heartbeat {
        stop,
        thread: Some(thread),
    }
}

fn current(slot: &Mutex<Option<(String, Instant)>>) -> Option<(String, Duration)> {
    slot.lock()
        .ok()?
        .as_ref()
        .map(|(what, since)| (what.clone(), since.elapsed()))
}

/// One heartbeat line (whole seconds, rounded down).
pub fn line(step: &str, elapsed: Duration, doing: Option<(String, Duration)>) -> String {
    let mut text = format!("... {step}: still running after {} s", elapsed.as_secs());
    if let Some((what, since)) = doing.filter(|(what, _)| what != step) {
        let what = lab::text::excerpt(&what);
        text.push_str(&format!(" (now: {what}, for {} s)", since.as_secs()));
    }
    text
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        let (lock, condvar) = &*self.stop;
        if let Ok(mut stopped) = lock.lock() {
            *stopped = true;
            condvar.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_the_step_what_it_does_and_for_how_long() {
        let s = |n| Duration::from_millis(n);
        assert_eq!(
            line("rust tests", s(50_900), None),
            "... rust tests: still running after 50 s"
        );
        assert_eq!(
            line(
                "rust tests",
                s(75_000),
                Some(("cargo test --workspace".into(), s(30_400)))
            ),
            "... rust tests: still running after 75 s (now: cargo test --workspace, for 30 s)"
        );
        // The step itself is not repeated as what it does.
        assert_eq!(
            line("fmt", s(26_000), Some(("fmt".into(), s(26_000)))),
            "... fmt: still running after 26 s"
        );
    }
}

#[cfg(test)]
mod stop_tests {
    /// A heartbeat stopped at once (before its thread ever waits) ends at once, not after a
    /// period: quick steps no longer take 25 s. Repeated so the race of the spawn is met.
    #[test]
    fn a_heartbeat_stopped_at_once_ends_at_once() {
        let started = std::time::Instant::now();
        for _ in 0..50 {
            drop(super::start("quick step"));
        }
        assert!(
            started.elapsed() < super::PERIOD,
            "{:?} for 50 stops",
            started.elapsed()
        );
    }
}
