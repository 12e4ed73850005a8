//! A list and then a watch of one named ConfigMap or Secret, over kube's client alone: each answer
//! read through [`object`] as it arrives, within [`MAX_ANSWER`] bytes.
//!
//! The list gives the object and the resourceVersion the watch starts from; a watch the server ends
//! (its `timeoutSeconds`, or a connection cut at a chunk boundary) is made again from the last
//! resourceVersion seen, a bookmark's included, with no new list. Any error ends the `ListWatch`: the
//! source makes a new one (which lists first) after its backoff, so recovery lives in one place
//! (`source::drive`, `backoff`).
//!
//! `get` is the one read of the object for `confgate status`. kube's `runtime` is not used.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use http_body_util::BodyExt as _;
use kube::Client;
use kube::api::{ListParams, WatchParams};
use kube::client::Body;

use super::explain::explain;
use super::object::Kind;
use super::object::{self, EventType, Object, StatusFields, Unreadable};
use super::spec::Target;

/// The most one answer (a list, or one watch event's line) may hold. A ConfigMap is at most 1 MiB of
/// keys; its JSON, with escapes, base64 and metadata (managedFields name every key again), stays
/// well within this. The bytes of one answer are held until it is read, so this bounds the memory too.
pub const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// The longest an error answer's body is read, for its `Status`.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The server ends each watch after this many seconds (kube's default).
const WATCH_TIMEOUT_SECS: u32 = 290;

/// A watch that says nothing for this long is taken as a dropped connection and made again.
const IDLE: Duration = Duration::from_secs(WATCH_TIMEOUT_SECS as u64 + 5);

/// How long a list (its whole answer), a get, or a watch's start may take. kube sets no read
/// timeout, so an API server that takes the connection and never answers would hold the source
/// forever, saying nothing; past this, the request fails, is logged and shown, and is retried.
/// The API server answers a list of one object in milliseconds, and its own request timeout is 60 s.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

/// What the list and the watch tell.
#[derive(Debug)]
pub enum Event {
    /// The list's answer: the object, or none.
    Listed(Option<Object>),
    /// The object was added or modified.
    Apply(Object),
    /// The object was deleted.
    Delete(Object),
}

/// Why the list or the watch failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("list: {0}")]
    List(#[source] kube::Error),
    #[error("watch: {0}")]
    WatchStart(#[source] kube::Error),
    #[error("watch: {0}")]
    Watch(#[source] kube::Error),
    /// An `ERROR` event in the watch (a `410 Gone` among them).
    #[error("watch: {} ({})", .0.message, .0.code)]
    Event(StatusFields),
    /// An answer that could not be read.
    #[error("{request}: {why}")]
    Unreadable {
        request: &'static str,
        why: Unreadable,
    },
    #[error("{request}: the answer is over {MAX_ANSWER} bytes")]
    TooLarge { request: &'static str },
    #[error("{request}: the answer has no resourceVersion")]
    NoResourceVersion { request: &'static str },
    /// The API server took the request and did not answer in time.
    #[error("{request}: no answer from the API server within {}s", .after.as_secs_f64())]
    NoAnswer {
        request: &'static str,
        after: Duration,
    },
}

impl Error {
    /// The error as a user can act on it; a 403 names `rule`, the Role rule that is missing.
    pub fn describe(&self, rule: &str) -> String {
        match self {
            Error::List(k) => format!("list: {}", explain(k, rule)),
            Error::WatchStart(k) | Error::Watch(k) => format!("watch: {}", explain(k, rule)),
            Error::Event(s) => format!(
                "watch: {}",
                explain(&kube::Error::Api(s.clone().into_status().boxed()), rule)
            ),
            other => other.to_string(),
        }
    }
}

/// Reads the `kind` object `target` (a `get`); `None` when there is none.
pub async fn get(client: Client, kind: Kind, target: &Target) -> Result<Option<Object>, Error> {
    get_within(client, kind, target, ANSWER_DEADLINE).await
}

async fn get_within(
    client: Client,
    kind: Kind,
    target: &Target,
    deadline: Duration,
) -> Result<Option<Object>, Error> {
    let mut lw = ListWatch::new(client, kind, target);
    lw.deadline = deadline;
    let req = kube::core::Request::new(&lw.path)
        .get(&target.name, &kube::api::GetParams::default())
        .map_err(|e| Error::List(kube::Error::BuildRequest(e)))?;
    let answer = answered(lw.deadline, "get", async {
        let body = match lw.send(req).await {
            Ok(body) => body,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(Error::List(e)),
        };
        Lines::new(body, "get").whole().await.map(Some)
    })
    .await?;
    let Some(answer) = answer else {
        return Ok(None);
    };
    object::object(kind, answer)
        .map(Some)
        .map_err(|why| Error::Unreadable {
            request: "get",
            why,
        })
}

/// `work` (a request of kind `request`), failed with [`Error::NoAnswer`] past `deadline`.
async fn answered<T>(
    deadline: Duration,
    request: &'static str,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or(Err(Error::NoAnswer {
            request,
            after: deadline,
        }))
}

/// Where the list and watch are.
enum State {
    /// Nothing listed yet.
    Empty,
    /// Listed, or a watch ended: watch from this resourceVersion.
    Listed(String),
    Watching {
        version: String,
        lines: Lines,
    },
}

/// One list and the watches that follow it.
pub struct ListWatch {
    client: Client,
    kind: Kind,
    path: String,
    fields: String,
    state: State,
    /// [`ANSWER_DEADLINE`], shorter in tests.
    deadline: Duration,
}

impl ListWatch {
    pub fn new(client: Client, kind: Kind, target: &Target) -> ListWatch {
        let plural = match kind {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
        };
        ListWatch {
            client,
            kind,
            path: format!("/api/v1/namespaces/{}/{plural}", target.namespace),
            fields: format!("metadata.name={}", target.name),
            state: State::Empty,
            deadline: ANSWER_DEADLINE,
        }
    }

    /// The same, with `deadline` for each answer instead of [`ANSWER_DEADLINE`].
    #[cfg(test)]
    fn with_deadline(mut self, deadline: Duration) -> ListWatch {
        self.deadline = deadline;
        self
    }

    /// The next event. After an error the `ListWatch` is spent: make a new one, which lists again.
    pub async fn next(&mut self) -> Result<Event, Error> {
        loop {
            match std::mem::replace(&mut self.state, State::Empty) {
                State::Empty => {
                    let list = self.list().await?;
                    let version = list
                        .resource_version
                        .filter(|v| !v.is_empty())
                        .ok_or(Error::NoResourceVersion { request: "list" })?;
                    self.state = State::Listed(version);
                    return Ok(Event::Listed(list.item));
                }
                State::Listed(version) => {
                    let lines = self.watch(&version).await?;
                    self.state = State::Watching { version, lines };
                }
                State::Watching { version, mut lines } => {
                    let line = match tokio::time::timeout(IDLE, lines.next()).await {
                        Ok(line) => line?,
                        Err(_) => None,
                    };
                    let Some(line) = line else {
                        // The server ended the watch, or it went silent: watch again from here.
                        self.state = State::Listed(version);
                        continue;
                    };
                    let ev =
                        object::watch_event(self.kind, line).map_err(|why| Error::Unreadable {
                            request: "watch",
                            why,
                        })?;
                    let seen = ev.object.resource_version.clone().filter(|v| !v.is_empty());
                    let event = match ev.kind {
                        EventType::Error => {
                            return Err(Error::Event(ev.object.status.unwrap_or_default()));
                        }
                        EventType::Bookmark => None,
                        EventType::Added | EventType::Modified => Some(Event::Apply(ev.object)),
                        EventType::Deleted => Some(Event::Delete(ev.object)),
                    };
                    let version = seen.ok_or(Error::NoResourceVersion { request: "watch" })?;
                    self.state = State::Watching { version, lines };
                    if let Some(event) = event {
                        return Ok(event);
                    }
                }
            }
        }
    }

    async fn list(&mut self) -> Result<object::List, Error> {
        let lp = ListParams::default().fields(&self.fields);
        let req = kube::core::Request::new(&self.path)
            .list(&lp)
            .map_err(|e| Error::List(kube::Error::BuildRequest(e)))?;
        let answer = answered(self.deadline, "list", async {
            let body = self.send(req).await.map_err(Error::List)?;
            Lines::new(body, "list").whole().await
        })
        .await?;
        object::list(self.kind, answer).map_err(|why| Error::Unreadable {
            request: "list",
            why,
        })
    }

    async fn watch(&mut self, version: &str) -> Result<Lines, Error> {
        let wp = WatchParams {
            field_selector: Some(self.fields.clone()),
            timeout: Some(WATCH_TIMEOUT_SECS),
            bookmarks: true,
            ..WatchParams::default()
        };
        let mut req = kube::core::Request::new(&self.path)
            .watch(&wp, version)
            .map_err(|e| Error::WatchStart(kube::Error::BuildRequest(e)))?;
        // One event per line, as written: no compression of the stream.
        req.headers_mut().insert(
            hyper::header::ACCEPT_ENCODING,
            hyper::header::HeaderValue::from_static("identity"),
        );
        let body = answered(self.deadline, "watch", async {
            self.send(req).await.map_err(Error::WatchStart)
        })
        .await?;
        Ok(Lines::new(body, "watch"))
    }

    /// Sends `req`; an answer other than 2xx is the API error its `Status` says.
    async fn send(&mut self, req: hyper::Request<Vec<u8>>) -> Result<Body, kube::Error> {
        let res = self.client.send(req.map(Body::from)).await?;
        let code = res.status();
        if code.is_success() {
            return Ok(res.into_body());
        }
        let mut body = res.into_body();
        let mut text = Vec::new();
        while text.len() < MAX_ERROR_BODY {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        text.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        let status = match serde_json::from_slice::<kube::core::Status>(&text) {
            Ok(status) => status,
            Err(_) => {
                let text = String::from_utf8_lossy(&text);
                let first = text.trim().lines().next().unwrap_or_default();
                let first: String = first.chars().take(200).collect();
                kube::core::Status::failure(&first, "Failed to parse error data")
                    .with_code(code.as_u16())
            }
        };
        Err(kube::Error::Api(status.boxed()))
    }
}

/// An answer's body split into lines (a watch) or read whole (a list), each held as the chunks that
/// came, never copied into one buffer, and never more than [`MAX_ANSWER`] bytes.
struct Lines {
    body: Body,
    request: &'static str,
    /// Chunks of the line not yet ended (none holds a newline).
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// What came after the last newline read, in the chunk that held it.
    rest: Option<Bytes>,
    done: bool,
}

impl Lines {
    fn new(body: Body, request: &'static str) -> Lines {
        Lines {
            body,
            request,
            pending: VecDeque::new(),
            pending_len: 0,
            rest: None,
            done: false,
        }
    }

    /// The next chunk of the body; `None` at its end, or at a connection cut that ends a watch.
    async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
                Some(Err(e)) if self.request == "watch" && ends_a_watch(&e) => return Ok(None),
                Some(Err(e)) if self.request == "watch" => return Err(Error::Watch(e)),
                Some(Err(e)) => return Err(Error::List(e)),
            }
        }
    }

    fn hold(&mut self, chunk: Bytes) -> Result<(), Error> {
        self.pending_len += chunk.len();
        if self.pending_len > MAX_ANSWER {
            return Err(Error::TooLarge {
                request: self.request,
            });
        }
        if !chunk.is_empty() {
            self.pending.push_back(chunk);
        }
        Ok(())
    }

    fn take(&mut self) -> Chunks {
        self.pending_len = 0;
        Chunks(std::mem::take(&mut self.pending))
    }

    /// The whole body.
    async fn whole(&mut self) -> Result<Chunks, Error> {
        while let Some(chunk) = self.chunk().await? {
            self.hold(chunk)?;
        }
        Ok(self.take())
    }

    /// The next line that is not blank; `None` when the body ends (a last line without its newline
    /// is still a line).
    async fn next(&mut self) -> Result<Option<Chunks>, Error> {
        while !self.done {
            let chunk = match self.rest.take() {
                Some(rest) => rest,
                None => match self.chunk().await? {
                    Some(chunk) => chunk,
                    None => {
                        self.done = true;
                        let line = self.take();
                        return Ok((!line.is_blank()).then_some(line));
                    }
                },
            };
            let Some(at) = chunk.iter().position(|&b| b == b'\n') else {
                self.hold(chunk)?;
                continue;
            };
            let mut rest = chunk;
            let head = rest.split_to(at + 1);
            self.hold(head)?;
            if !rest.is_empty() {
                self.rest = Some(rest);
            }
            let line = self.take();
            if !line.is_blank() {
                return Ok(Some(line));
            }
        }
        Ok(None)
    }
}

/// Whether a read error is the server's end of a long watch: a cut at a chunk boundary, or an EOF.
fn ends_a_watch(e: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::UnexpectedEof
        {
            return true;
        }
        if let Some(h) = s.downcast_ref::<hyper::Error>()
            && h.is_incomplete_message()
        {
            return true;
        }
        source = s.source();
    }
    e.to_string().contains("unexpected EOF during chunk")
}

/// The chunks of one answer, read in order; each is dropped once read.
pub(crate) struct Chunks(VecDeque<Bytes>);

impl Chunks {
    fn is_blank(&self) -> bool {
        self.0.iter().all(|c| c.iter().all(u8::is_ascii_whitespace))
    }
}

impl std::io::Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(front) = self.0.front_mut() {
            if front.is_empty() {
                self.0.pop_front();
                continue;
            }
            let n = front.len().min(buf.len());
            buf[..n].copy_from_slice(&front[..n]);
            front.advance(n);
            return Ok(n);
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead as _, BufReader, Write as _};

    /// An API server on loopback that takes every connection and answers a list of nothing, but
    /// never answers a watch (or, with `answer_lists` false, anything at all). Connections are
    /// held open until the test ends.
    fn silent_server(answer_lists: bool) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                // The rest of the head.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                if answer_lists && !first.contains("watch=") {
                    let body = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}"#;
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
                held.push(conn);
            }
        });
        url
    }

    fn listwatch(url: &str) -> ListWatch {
        let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let target = Target {
            namespace: "prod".into(),
            name: "app".into(),
        };
        ListWatch::new(client, Kind::ConfigMap, &target).with_deadline(Duration::from_millis(200))
    }

    #[tokio::test]
    async fn a_list_the_api_server_never_answers_fails_and_says_so() {
        let url = silent_server(false);
        let e = listwatch(&url).next().await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::NoAnswer {
                    request: "list",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "list: no answer from the API server within 0.2s"
        );
    }

    #[tokio::test]
    async fn a_watch_the_api_server_never_starts_fails_and_says_so() {
        let url = silent_server(true);
        let mut lw = listwatch(&url);
        assert!(matches!(lw.next().await, Ok(Event::Listed(None))));
        let e = lw.next().await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::NoAnswer {
                    request: "watch",
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_get_the_api_server_never_answers_fails_and_says_so() {
        let url = silent_server(false);
        let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let target = Target {
            namespace: "prod".into(),
            name: "app".into(),
        };
        let e = get_within(client, Kind::ConfigMap, &target, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NoAnswer { request: "get", .. }), "{e:?}");
    }
}
