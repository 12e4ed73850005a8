//! What a command gives `main`: its [`Outcome`] when it did not fail, else an [`Error`] that says
//! which exit code it maps to.

use crate::gate;
use crate::settings::{self, container};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad flag or environment value (exit 64).
    #[error(transparent)]
    Settings(#[from] settings::Error),
    #[error("cannot listen on {addr}: {source} (choose another with --{} or {})", container::LISTEN.flag, container::LISTEN.env)]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Gate(#[from] gate::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(
        "cannot start the HTTP server's thread: {0} (the process is out of threads or file descriptors: raise the container's limits)"
    )]
    Server(#[source] std::io::Error),
    #[error("cannot read /dev/urandom for the key that seals a Secret's hashes: {0}")]
    Random(#[source] std::io::Error),
    #[error("the decision loop ended unexpectedly")]
    LoopDied,
    #[cfg(feature = "api")]
    #[error(transparent)]
    Api(#[from] crate::api::Error),
    #[cfg(feature = "api")]
    #[error(transparent)]
    Status(#[from] crate::api::status_cmd::Error),
}

impl Error {
    /// Errors the user fixes by changing how confgate is started (a port in use, no kubeconfig): exit 64.
    pub fn is_usage(&self) -> bool {
        match self {
            // The promoted dir cannot be made (a path under /proc, a read-only mount): fixed by
            // choosing another, as a bad flag is.
            Error::Settings(_)
            | Error::Listen { .. }
            | Error::Gate(gate::Error::PromoteTo { .. }) => true,
            #[cfg(feature = "api")]
            Error::Api(crate::api::Error::Client(_))
            | Error::Status(
                crate::api::status_cmd::Error::Client(_)
                | crate::api::status_cmd::Error::WaitWithoutConfigMap,
            ) => true,
            _ => false,
        }
    }

    /// `confgate status` could not read the fleet from the API server (exit 69).
    pub fn is_unavailable(&self) -> bool {
        #[cfg(feature = "api")]
        if let Error::Status(e) = self {
            return e.is_unavailable();
        }
        false
    }

    /// `confgate status` selected no pods (exit 66).
    pub fn is_nothing_selected(&self) -> bool {
        #[cfg(feature = "api")]
        if let Error::Status(crate::api::status_cmd::Error::NoPods { .. }) = self {
            return true;
        }
        false
    }
}

/// A command's outcome when it did not fail: success, or "not accepted / not ready / timed out".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    No(String),
}
