//! Processes seen from a test: whether one has ended, and waiting for a condition. Shared by
//! the tests that kill `lab` and check that its worker does not outlive it.

/// Whether process `pid` has ended (gone, or a zombie waiting to be reaped: it holds nothing).
pub fn has_ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name's closing parenthesis.
        Ok(stat) => matches!(
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
    }
}

/// Waits up to `seconds` for `check` to hold (a deadline against hanging, not a speed test).
pub fn eventually(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..seconds * 20 {
        if check() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    check()
}

/// Waits for the worker to write its pid (a line) into `pid_file`, kills `lab` with SIGKILL
/// (which it cannot catch), and asserts that the worker ends too (the parent-death signal).
/// `what` names the command in the failure messages.
pub fn kill_lab_and_expect_worker_gone(
    lab: &mut std::process::Child,
    pid_file: &std::path::Path,
    what: &str,
) {
    assert!(
        eventually(20, || std::fs::read_to_string(pid_file)
            .is_ok_and(|t| t.ends_with('\n'))),
        "{what}: the worker never started"
    );
    let pid: u32 = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!has_ended(pid), "{what}: the worker should be running");
    lab.kill().unwrap();
    lab.wait().unwrap();
    assert!(
        eventually(20, || has_ended(pid)),
        "worker {pid} outlived {what}"
    );
}
