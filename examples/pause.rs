//! The node suite's pod sandbox: the process that holds a pod's namespaces, as the kubelet's `pause`
//! image does. It waits for SIGTERM or SIGINT and exits 0 (as PID 1 a signal without a handler is
//! ignored, so it waits for them explicitly). Built static into the sandbox image by
//! `scripts/build-images.sh`: no registry is needed for the kubelet's `--pod-infra-container-image`.

use nix::sys::signal::{SigSet, Signal};

fn main() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    // Blocked first, so a signal that arrives before the wait is kept pending rather than lost.
    if let Err(e) = set.thread_block() {
        eprintln!("pause: cannot block signals: {e}");
        std::process::exit(1);
    }
    match set.wait() {
        Ok(_) => {}
        Err(e) => {
            eprintln!("pause: sigwait failed: {e}");
            std::process::exit(1);
        }
    }
}
