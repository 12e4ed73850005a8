//! The credential files read: each bounded, never waited on (a FIFO or device in its place is
//! refused), and the PEM and base64 they hold decoded; an `Authorization` value marked sensitive.

use super::*;

/// Reads `path` whole when it is a regular file of at most `max` bytes. The open never blocks (a
/// FIFO or device in its place is refused, not waited on) and a larger file is refused, not read.
pub(super) fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "is not a regular file (a FIFO, device or directory is not read)",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "holds more than {max} bytes; not read"
        )));
    }
    Ok(bytes)
}

pub(super) fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, Problem> {
    read_bounded(path, FILE_MAX).map_err(|e| Problem::File {
        what,
        path: path.to_owned(),
        why: if e.kind() == std::io::ErrorKind::NotFound {
            "does not exist".to_owned()
        } else {
            e.to_string()
        },
    })
}

pub(super) fn decode(what: &'static str, data: &str) -> Result<Vec<u8>, Problem> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| Problem::Base64 {
            what,
            why: e.to_string(),
        })
}

pub(super) fn certs(
    pem: &[u8],
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, Problem> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| Problem::Pem {
            what,
            kind: "certificate",
        })?;
    if certs.is_empty() {
        return Err(Problem::Pem {
            what,
            kind: "certificate",
        });
    }
    Ok(certs)
}

pub(super) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

pub(super) fn identity(
    cert: &[u8],
    key: &[u8],
    cert_what: &'static str,
    key_what: &'static str,
) -> Result<Identity, Problem> {
    let certs = certs(cert, cert_what)?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| Problem::Pem {
        what: key_what,
        kind: "private key",
    })?;
    Ok((certs, key))
}

/// An `Authorization` value, marked sensitive so that no debug output shows it.
pub(super) fn header(value: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::try_from(value).ok()?;
    v.set_sensitive(true);
    Some(v)
}

pub(super) fn bearer(token: &str) -> Option<HeaderValue> {
    header(&format!("Bearer {token}"))
}
