//! An exec plugin, as client-go runs it: its token or client certificate, run again once the token
//! expires, killed with its process group past its time or output bound.

use super::kubeconfig::ExecConfig;
use super::*;

/// What an exec plugin returned.
pub(super) enum Credential {
    Token(HeaderValue, Option<jiff::Timestamp>),
    Identity(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
}

/// An exec plugin's token and when it expires, if it said.
type Cached = Option<(HeaderValue, Option<jiff::Timestamp>)>;

/// An exec plugin and the token it last gave, until that expires.
#[derive(Clone)]
pub(super) struct Exec {
    config: ExecConfig,
    command: PathBuf,
    pub(super) cached: Arc<Mutex<Cached>>,
    /// How long it may run ([`EXEC_TIMEOUT`]).
    pub(super) timeout: std::time::Duration,
}

#[derive(Deserialize)]
pub(super) struct ExecCredential {
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    expiration_timestamp: Option<jiff::Timestamp>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

impl Exec {
    pub(super) fn new(config: ExecConfig, dir: &Path) -> Exec {
        // client-go: a relative path with a separator is relative to the kubeconfig; a bare name is
        // looked up on PATH.
        let command = if config.command.contains('/') && Path::new(&config.command).is_relative() {
            dir.join(&config.command)
        } else {
            PathBuf::from(&config.command)
        };
        Exec {
            config,
            command,
            cached: Arc::new(Mutex::new(None)),
            timeout: EXEC_TIMEOUT,
        }
    }

    /// The plugin's token, run again when there is none or it is about to expire.
    pub(super) async fn header(&self) -> Result<HeaderValue, ExecError> {
        {
            let cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((value, until)) = &*cached
                && until.is_none_or(|u| jiff::Timestamp::now() + EXPIRY_MARGIN < u)
            {
                return Ok(value.clone());
            }
        }
        match self.run().await? {
            Credential::Token(value, until) => {
                *self.cached.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((value.clone(), until));
                Ok(value)
            }
            // The client's TLS identity was fixed when it was built: a plugin that switched to
            // certificates is a token it no longer gives.
            Credential::Identity(..) => Err(ExecError::Empty {
                command: self.config.command.clone(),
            }),
        }
    }

    /// Runs the plugin off the runtime's thread (it may take seconds), its stderr shown as kubectl
    /// shows it, its stdout (the credential) read and never shown.
    pub(super) async fn run(&self) -> Result<Credential, ExecError> {
        let this = self.clone();
        let command = self.config.command.clone();
        tokio::task::spawn_blocking(move || this.run_blocking())
            .await
            .map_err(|_| ExecError::Interrupted { command })?
    }

    fn run_blocking(&self) -> Result<Credential, ExecError> {
        let command = || self.config.command.clone();
        let api_version = self
            .config
            .api_version
            .clone()
            .unwrap_or_else(|| "client.authentication.k8s.io/v1".to_owned());
        let info = serde_json::json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": false},
        });
        let mut cmd = std::process::Command::new(&self.command);
        cmd.stdout(std::process::Stdio::piped());
        // Its own process group, so the kill at the time bound reaches what it started too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.args(self.config.args.iter().flatten())
            .envs(
                self.config
                    .env
                    .iter()
                    .flatten()
                    .map(|e| (&e.name, &e.value)),
            )
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit());
        let stdout = self.output(cmd)?;
        // serde_json's error names a line and column, never the text.
        let cred: ExecCredential =
            serde_json::from_slice(&stdout).map_err(|e| ExecError::Output {
                command: command(),
                why: e.to_string(),
            })?;
        let status = cred
            .status
            .ok_or_else(|| ExecError::Empty { command: command() })?;
        if let Some(token) = status.token.filter(|t| !t.is_empty()) {
            let value = bearer(&token).ok_or_else(|| ExecError::Output {
                command: command(),
                why: "its token is not valid in a header".to_owned(),
            })?;
            return Ok(Credential::Token(value, status.expiration_timestamp));
        }
        if let (Some(cert), Some(key)) = (status.client_certificate_data, status.client_key_data) {
            let (certs, key) = identity(
                cert.as_bytes(),
                key.as_bytes(),
                "the exec plugin's clientCertificateData",
                "the exec plugin's clientKeyData",
            )
            .map_err(|e| ExecError::Output {
                command: command(),
                why: e.to_string(),
            })?;
            return Ok(Credential::Identity(certs, key));
        }
        Err(ExecError::Empty { command: command() })
    }
}

impl Exec {
    /// Runs `cmd` (its stdout piped) within [`Exec::timeout`], keeping at most [`EXEC_OUTPUT_MAX`]
    /// bytes of its standard output; past either bound its process group is killed.
    fn output(&self, mut cmd: std::process::Command) -> Result<Vec<u8>, ExecError> {
        use std::io::Read as _;
        let command = || self.config.command.clone();
        let mut child = cmd.spawn().map_err(|why| ExecError::Spawn {
            command: command(),
            why,
        })?;
        drop(cmd);
        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
        let kill = move || {
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        };
        let Some(mut stdout) = child.stdout.take() else {
            kill();
            let _ = child.wait();
            return Err(ExecError::Interrupted { command: command() });
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            let mut over = false;
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) if kept.len() + n > EXEC_OUTPUT_MAX => {
                        // Stopped at once: a plugin printing without end is not waited for.
                        over = true;
                        kill();
                        break;
                    }
                    Ok(n) => kept.extend_from_slice(&buf[..n]),
                }
            }
            let status = child.wait();
            let _ = tx.send((status, kept, over));
        });
        let (status, out, over) = match rx.recv_timeout(self.timeout) {
            Ok(done) => done,
            Err(_) => {
                kill();
                tracing::warn!(
                    plugin = %self.config.command,
                    timeout_s = self.timeout.as_secs(),
                    "exec plugin killed at its time bound"
                );
                return Err(ExecError::TimedOut {
                    command: command(),
                    after: self.timeout,
                });
            }
        };
        if over {
            return Err(ExecError::TooMuch {
                command: command(),
                max: EXEC_OUTPUT_MAX,
            });
        }
        let status = status.map_err(|why| ExecError::Spawn {
            command: command(),
            why,
        })?;
        if !status.success() {
            return Err(ExecError::Failed {
                command: command(),
                status: status.to_string(),
            });
        }
        Ok(out)
    }
}
