//! A token file, read again at every request off the loop's thread.

use super::*;

/// A token file read as kubectl reads it: trimmed, and at every request, so a rotated token is in use
/// at once. A read that fails or finds no token keeps the last token (as kube does: a file may be
/// removed once read).
///
/// The re-read runs on the blocking pool, never on the loop's thread (which answers `/livez`'s
/// ping), bounded in size (a FIFO or device in its place is refused, not waited on): a request
/// waits for it at most [`TOKEN_READ_WAIT`], then sends the last token, and one read at a time is
/// in flight.
pub(crate) struct TokenFile {
    path: Arc<PathBuf>,
    last: Arc<Mutex<HeaderValue>>,
    reading: Arc<std::sync::atomic::AtomicBool>,
}

impl TokenFile {
    /// The file, which must hold a token now: one it cannot read is named.
    pub(crate) fn open(path: PathBuf) -> Result<TokenFile, Problem> {
        let what = "the token file";
        let text = read_bounded(&path, TOKEN_MAX).map_err(|e| Problem::File {
            what,
            path: path.clone(),
            why: if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist".to_owned()
            } else {
                e.to_string()
            },
        })?;
        let header = Self::parse(&text).ok_or_else(|| Problem::File {
            what,
            path: path.clone(),
            why: "holds no token".to_owned(),
        })?;
        Ok(TokenFile {
            path: Arc::new(path),
            last: Arc::new(Mutex::new(header)),
            reading: Arc::default(),
        })
    }

    fn parse(text: &[u8]) -> Option<HeaderValue> {
        let token = std::str::from_utf8(text).ok()?.trim();
        if token.is_empty() {
            return None;
        }
        bearer(token)
    }

    /// The header to send: the file's token now, else the last one read.
    pub(crate) async fn header(&self) -> HeaderValue {
        use std::sync::atomic::Ordering;
        if !self.reading.swap(true, Ordering::AcqRel) {
            let (path, last, reading) =
                (self.path.clone(), self.last.clone(), self.reading.clone());
            let read = tokio::task::spawn_blocking(move || {
                let fresh = read_bounded(&path, TOKEN_MAX)
                    .ok()
                    .and_then(|t| Self::parse(&t));
                if let Some(fresh) = fresh {
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
                }
                reading.store(false, Ordering::Release);
            });
            // A read still running past the wait finishes on its own and updates the last token.
            let _ = tokio::time::timeout(TOKEN_READ_WAIT, read).await;
        }
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
