//! The API server's certificate checked against the kubeconfig's CA, with real certificates made by
//! `openssl`.

use super::tests::kubeconfig_at;
use super::*;
use crate::api::explain::{explain, tls_error};

/// Two CAs made with `openssl` in `dir` (`ca` and `other-ca`, each `.crt` and `.key`), and a
/// serving certificate for 127.0.0.1 that `ca` signed (`server.crt`, `server.key`).
fn certificates(dir: &Path) {
    let made = std::process::Command::new("sh")
        .current_dir(dir)
        .arg("-ec")
        .arg(
            "for ca in ca other-ca; do\n\
             openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=confgate-test-$ca \
               -keyout $ca.key -out $ca.crt\n\
             done\n\
             openssl req -newkey rsa:2048 -nodes -subj /CN=confgate-test-server \
               -keyout server.key -out server.csr\n\
             printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext\n\
             openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
               -extfile ext -out server.crt",
        )
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl must be installed");
    assert!(made.success());
}

/// An HTTPS server on loopback with `dir`'s `server.crt`: every request whose handshake succeeds
/// is answered 200.
fn tls_server(dir: &Path) -> u16 {
    use std::io::{Read as _, Write as _};
    let certs = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            // A client gone silent cannot hold the thread.
            let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let Ok(tls) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            let mut stream = rustls::StreamOwned::new(tls, tcp);
            let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
            // A refused handshake ends the read with an error; an accepted one reads the request.
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                head.extend_from_slice(&buf[..n]);
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                    let _ = stream.flush();
                    break;
                }
            }
        }
    });
    port
}

/// An API server whose certificate a CA other than the kubeconfig's signed is refused: the
/// request fails with rustls' `InvalidCertificate(UnknownIssuer)`, said as such, and the message
/// holds neither the token nor anything of the certificates. The same server with its own CA in
/// the kubeconfig answers, so it is the trust that failed.
#[tokio::test]
async fn a_server_whose_certificate_another_ca_signed_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    certificates(tmp.path());
    let server = format!("https://127.0.0.1:{}", tls_server(tmp.path()));
    let user = "    token: secret-token-4711\n";
    let request = || hyper::Request::get("/version").body(Vec::new()).unwrap();

    let wrong = kubeconfig_at(
        tmp.path(),
        &server,
        user,
        "    certificate-authority: other-ca.crt\n",
    )
    .unwrap()
    .client()
    .await
    .unwrap();
    let e = wrong.request_text(request()).await.unwrap_err();
    assert!(
        matches!(
            tls_error(&e),
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
        ),
        "{e:?}"
    );
    let said = explain(&e, "get on /version");
    assert!(
        said.contains("invalid peer certificate: UnknownIssuer")
            && said.contains("the API server's certificate is not trusted")
            && said.contains("certificate-authority"),
        "{said}"
    );
    let pems: Vec<String> = ["ca.crt", "other-ca.crt", "server.crt"]
        .iter()
        .map(|f| std::fs::read_to_string(tmp.path().join(f)).unwrap())
        .collect();
    for secret in ["secret-token-4711", "confgate-test-", "BEGIN"] {
        assert!(!said.contains(secret), "{said}");
    }
    for pem in &pems {
        let body = pem.lines().nth(1).unwrap();
        assert!(!said.contains(body), "{said}");
    }

    let right = kubeconfig_at(
        tmp.path(),
        &server,
        user,
        "    certificate-authority: ca.crt\n",
    )
    .unwrap()
    .client()
    .await
    .unwrap();
    assert_eq!(right.request_text(request()).await.unwrap(), "ok");
}
