//! The kubeconfig: its files found and merged as kubectl merges them, and the current context
//! resolved into a connection. Only the fields confgate uses are read; an error names the file and
//! what is wrong, never what it holds.

use super::*;

/// A kubeconfig as confgate reads it: only the fields it uses; the rest is ignored.
#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct Kubeconfig {
    #[serde(default)]
    clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
    #[serde(default)]
    contexts: Option<Vec<NamedContext>>,
    #[serde(default)]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default)]
    cluster: Option<Cluster>,
    #[serde(skip)]
    dir: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: Option<User>,
    #[serde(skip)]
    dir: PathBuf,
}

/// A kubeconfig user; never printed (it may hold a token or a key).
#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    password: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    auth_provider: Option<AuthProvider>,
    exec: Option<ExecConfig>,
}

#[derive(Deserialize)]
pub(super) struct AuthProvider {
    name: String,
}

/// An exec plugin, as client-go runs it.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExecConfig {
    pub(super) command: String,
    #[serde(default)]
    pub(super) args: Option<Vec<String>>,
    #[serde(default)]
    pub(super) env: Option<Vec<ExecEnv>>,
    #[serde(default)]
    pub(super) api_version: Option<String>,
}

#[derive(Clone, Deserialize)]
pub(super) struct ExecEnv {
    pub(super) name: String,
    pub(super) value: String,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Option<Context>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
}

/// The kubeconfig's paths: `KUBECONFIG` (a list, as kubectl reads it), else `~/.kube/config`.
fn kubeconfig_paths() -> Result<Vec<PathBuf>, KubeconfigError> {
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            return Ok(paths);
        }
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(KubeconfigError::NotFound)?;
    Ok(vec![Path::new(&home).join(".kube").join("config")])
}

/// The kubeconfig's names, as the operator gave them, for messages about its content.
fn kubeconfig_named(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// One kubeconfig file's text, read. An error says what and where, never what the file holds (a
/// serde message can quote the value it found, and a kubeconfig holds credentials).
pub(super) fn parse(path: &Path, text: &str) -> Result<Kubeconfig, KubeconfigError> {
    serde_saphyr::from_str(text).map_err(|e| KubeconfigError::Yaml {
        path: path.to_path_buf(),
        why: crate::extract::yaml_error(&e).to_string(),
    })
}

pub(super) fn from_kubeconfig() -> Result<Connection, KubeconfigError> {
    let paths = kubeconfig_paths()?;
    let mut merged = Kubeconfig::default();
    let mut found = false;
    for path in &paths {
        let text = match read_bounded(path, FILE_MAX).and_then(|b| {
            String::from_utf8(b).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8 text")
            })
        }) {
            Ok(t) => t,
            // kubectl skips a listed file that is not there, as long as one is.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && paths.len() > 1 => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(KubeconfigError::Missing(path.clone()));
            }
            Err(why) => {
                return Err(KubeconfigError::Read {
                    path: path.clone(),
                    why,
                });
            }
        };
        found = true;
        let one = parse(path, &text)?;
        merge(&mut merged, one, path.parent().unwrap_or(Path::new(".")));
    }
    if !found {
        return Err(KubeconfigError::Missing(paths[0].clone()));
    }
    resolve(merged).map_err(|problem| KubeconfigError::Content {
        named: kubeconfig_named(&paths),
        problem,
    })
}

/// Merges `one` into `into` as kubectl does: the first file to name a thing, or the current
/// context, wins. Relative paths stay relative to the file that holds them.
pub(super) fn merge(into: &mut Kubeconfig, one: Kubeconfig, dir: &Path) {
    if into.current_context.as_deref().is_none_or(str::is_empty) {
        into.current_context = one.current_context;
    }
    let clusters = into.clusters.get_or_insert_default();
    for mut c in one.clusters.unwrap_or_default() {
        if !clusters.iter().any(|k| k.name == c.name) {
            c.dir = dir.to_owned();
            clusters.push(c);
        }
    }
    let users = into.users.get_or_insert_default();
    for mut u in one.users.unwrap_or_default() {
        if !users.iter().any(|k| k.name == u.name) {
            u.dir = dir.to_owned();
            users.push(u);
        }
    }
    let contexts = into.contexts.get_or_insert_default();
    for c in one.contexts.unwrap_or_default() {
        if !contexts.iter().any(|k| k.name == c.name) {
            contexts.push(c);
        }
    }
}

/// The current context's connection.
pub(super) fn resolve(config: Kubeconfig) -> Result<Connection, Problem> {
    let current = config
        .current_context
        .filter(|c| !c.is_empty())
        .ok_or(Problem::NoContext)?;
    let context = config
        .contexts
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == current)
        .ok_or_else(|| Problem::Context(current.clone()))?
        .context
        .unwrap_or_default();
    let cluster_name = context.cluster.unwrap_or_default();
    let named = config
        .clusters
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| Problem::Cluster(cluster_name.clone()))?;
    let dir = named.dir;
    let cluster = named.cluster.unwrap_or_default();
    if cluster.insecure_skip_tls_verify {
        return Err(Problem::Insecure(cluster_name));
    }
    if cluster.proxy_url.is_some_and(|p| !p.is_empty()) {
        return Err(Problem::Proxy(cluster_name));
    }
    let server = cluster
        .server
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Problem::NoServer(cluster_name.clone()))?;
    let server = server.parse::<hyper::Uri>().map_err(|e| Problem::Server {
        server: crate::values::redact(&server),
        why: crate::values::redact(&e.to_string()),
    })?;
    let roots = match (
        cluster.certificate_authority_data,
        cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(certs(
            &decode("certificate-authority-data", &data)?,
            "certificate-authority-data",
        )?),
        (None, Some(file)) => {
            let what = "certificate-authority";
            Some(certs(&read(what, &dir.join(file))?, what)?)
        }
        (None, None) => None,
    };
    let (user_name, user, user_dir) = match context.user.filter(|u| !u.is_empty()) {
        None => (String::new(), User::default(), dir.clone()),
        Some(name) => {
            let u = config
                .users
                .unwrap_or_default()
                .into_iter()
                .find(|u| u.name == name)
                .ok_or_else(|| Problem::User(name.clone()))?;
            (name, u.user.unwrap_or_default(), u.dir)
        }
    };
    if let Some(p) = &user.auth_provider {
        return Err(Problem::AuthProvider {
            user: user_name,
            provider: p.name.clone(),
        });
    }
    let cert = match (user.client_certificate_data, user.client_certificate) {
        (Some(data), _) => Some(decode("client-certificate-data", &data)?),
        (None, Some(file)) => Some(read("client-certificate", &user_dir.join(file))?),
        (None, None) => None,
    };
    let key = match (user.client_key_data, user.client_key) {
        (Some(data), _) => Some(decode("client-key-data", &data)?),
        (None, Some(file)) => Some(read("client-key", &user_dir.join(file))?),
        (None, None) => None,
    };
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some(identity(&cert, &key, "client-certificate", "client-key")?),
        (None, None) => None,
        _ => return Err(Problem::HalfIdentity(user_name)),
    };
    // kube's order: user and password, a token, a token file, an exec plugin.
    let auth = if let (Some(u), Some(p)) = (&user.username, &user.password) {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        Auth::Header(header(&format!("Basic {basic}")).ok_or(Problem::Tls(
            "the user's name or password is not valid in a header".into(),
        ))?)
    } else if let Some(token) = user.token.filter(|t| !t.is_empty()) {
        Auth::Header(bearer(&token).ok_or(Problem::Tls(
            "the user's token is not valid in a header".into(),
        ))?)
    } else if let Some(file) = user.token_file.filter(|f| !f.is_empty()) {
        Auth::TokenFile(TokenFile::open(user_dir.join(file))?)
    } else if let Some(exec) = user.exec {
        Auth::Exec(Exec::new(exec, &user_dir))
    } else {
        Auth::None
    };
    Ok(Connection {
        server,
        roots,
        tls_server_name: cluster.tls_server_name.filter(|s| !s.is_empty()),
        identity,
        auth,
        namespace: context
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
    })
}
