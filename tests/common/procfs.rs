//! Readings of a process from /proc: memory, context switches, CPU time, descriptors and threads.

/// A `kB` field of /proc/PID/status, e.g. `VmRSS` or `VmHWM`.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Context switches summed over every thread: (voluntary, involuntary). A voluntary switch is a thread
/// going to sleep, so each wake-up adds one.
pub fn ctxt_switches(pid: u32) -> (u64, u64) {
    let mut vol = 0;
    let mut invol = 0;
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            let text = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for l in text.lines() {
                if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                    vol += v.trim().parse::<u64>().unwrap_or(0);
                } else if let Some(v) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                    invol += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    (vol, invol)
}

/// utime + stime of the process, in clock ticks (USER_HZ, 100 per second on Linux).
pub fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; fields are counted after its closing parenthesis.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, utime field 14, stime field 15.
    let get = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

/// Time on a CPU summed over every thread, in nanoseconds (the scheduler's own count, first field of
/// each thread's `schedstat`): fine enough to divide by a few hundred updates.
pub fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// Open file descriptors.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

/// Threads.
pub fn thread_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

/// The names of the threads (`comm`, cut to 15 bytes), sorted.
pub fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
