//! A signal a `signal:NAME:PROCESS` reload target sends, as a value: the signals Linux has on the
//! architectures confgate runs on (amd64, arm64), by name. The edge turns it into the OS's signal
//! number at the moment it sends (`confgate`'s `reload`); a test there holds the two lists together.

use std::fmt;
use std::str::FromStr;

/// A Linux signal, by name. `Debug` and `Display` both write its full name, `SIGHUP`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    Hup,
    Int,
    Quit,
    Ill,
    Trap,
    Abrt,
    Bus,
    Fpe,
    Kill,
    Usr1,
    Segv,
    Usr2,
    Pipe,
    Alrm,
    Term,
    Stkflt,
    Chld,
    Cont,
    Stop,
    Tstp,
    Ttin,
    Ttou,
    Urg,
    Xcpu,
    Xfsz,
    Vtalrm,
    Prof,
    Winch,
    Io,
    Pwr,
    Sys,
}

impl Signal {
    /// Every signal, in the order of their numbers.
    pub const ALL: [Signal; 31] = [
        Signal::Hup,
        Signal::Int,
        Signal::Quit,
        Signal::Ill,
        Signal::Trap,
        Signal::Abrt,
        Signal::Bus,
        Signal::Fpe,
        Signal::Kill,
        Signal::Usr1,
        Signal::Segv,
        Signal::Usr2,
        Signal::Pipe,
        Signal::Alrm,
        Signal::Term,
        Signal::Stkflt,
        Signal::Chld,
        Signal::Cont,
        Signal::Stop,
        Signal::Tstp,
        Signal::Ttin,
        Signal::Ttou,
        Signal::Urg,
        Signal::Xcpu,
        Signal::Xfsz,
        Signal::Vtalrm,
        Signal::Prof,
        Signal::Winch,
        Signal::Io,
        Signal::Pwr,
        Signal::Sys,
    ];

    /// Its name with the `SIG` prefix, as the OS's headers write it: `SIGHUP`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Signal::Hup => "SIGHUP",
            Signal::Int => "SIGINT",
            Signal::Quit => "SIGQUIT",
            Signal::Ill => "SIGILL",
            Signal::Trap => "SIGTRAP",
            Signal::Abrt => "SIGABRT",
            Signal::Bus => "SIGBUS",
            Signal::Fpe => "SIGFPE",
            Signal::Kill => "SIGKILL",
            Signal::Usr1 => "SIGUSR1",
            Signal::Segv => "SIGSEGV",
            Signal::Usr2 => "SIGUSR2",
            Signal::Pipe => "SIGPIPE",
            Signal::Alrm => "SIGALRM",
            Signal::Term => "SIGTERM",
            Signal::Stkflt => "SIGSTKFLT",
            Signal::Chld => "SIGCHLD",
            Signal::Cont => "SIGCONT",
            Signal::Stop => "SIGSTOP",
            Signal::Tstp => "SIGTSTP",
            Signal::Ttin => "SIGTTIN",
            Signal::Ttou => "SIGTTOU",
            Signal::Urg => "SIGURG",
            Signal::Xcpu => "SIGXCPU",
            Signal::Xfsz => "SIGXFSZ",
            Signal::Vtalrm => "SIGVTALRM",
            Signal::Prof => "SIGPROF",
            Signal::Winch => "SIGWINCH",
            Signal::Io => "SIGIO",
            Signal::Pwr => "SIGPWR",
            Signal::Sys => "SIGSYS",
        }
    }

    /// Its name without the prefix, as a reload target writes it: `HUP`.
    pub fn short(self) -> &'static str {
        &self.as_str()[3..]
    }
}

/// A text that names no signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotASignal;

impl FromStr for Signal {
    type Err = NotASignal;
    /// A name in any case, with or without its `SIG` prefix: `HUP`, `sighup`, `SIGHUP`.
    fn from_str(s: &str) -> Result<Signal, NotASignal> {
        let upper = s.to_ascii_uppercase();
        let short = upper.strip_prefix("SIG").unwrap_or(&upper);
        Signal::ALL
            .into_iter()
            .find(|signal| signal.short() == short)
            .ok_or(NotASignal)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_read_in_any_case_with_or_without_its_prefix() {
        for name in ["HUP", "hup", "SIGHUP", "sigHup", "SiGhUp"] {
            assert_eq!(name.parse::<Signal>(), Ok(Signal::Hup), "{name}");
        }
        assert_eq!("usr1".parse::<Signal>(), Ok(Signal::Usr1));
        // Aliases the OS has (IOT, POLL, CLD, UNUSED) name no signal here, nor a number, nor
        // an empty name, nor the prefix alone, nor a prefix twice.
        for bad in [
            "IOT",
            "POLL",
            "CLD",
            "UNUSED",
            "1",
            "",
            "SIG",
            "SIGSIGHUP",
            "HUP ",
        ] {
            assert_eq!(bad.parse::<Signal>(), Err(NotASignal), "{bad}");
        }
        for signal in Signal::ALL {
            assert_eq!(format!("{signal:?}"), signal.as_str());
            assert_eq!(signal.short().parse::<Signal>(), Ok(signal));
            assert_eq!(signal.to_string().parse::<Signal>(), Ok(signal));
        }
    }
}
