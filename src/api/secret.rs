//! The Secret source: one Secret watched through the API like the ConfigMap source, its `data` keys
//! given to the gate as the bytes the kubelet would write into a Secret volume.
//!
//! A Secret's `data` is base64 in the API and bytes here (every key may be binary); `stringData` is
//! write-only and never comes back. Each event is handed to the ConfigMap source's tracker as a
//! ConfigMap whose `binaryData` is the Secret's `data`, so both sources settle snapshots, identity and
//! health the same way. Hashes of the content are printed sealed (`snapshot::seal`, set at start-up for
//! a `secret:` source), never as the plain `sha256:`, and content never leaves the process.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::watcher;

/// The Secret as the tracker reads objects: metadata kept, `data` as `binaryData`.
pub(crate) fn as_configmap(secret: Secret) -> ConfigMap {
    ConfigMap {
        metadata: secret.metadata,
        binary_data: secret.data,
        ..ConfigMap::default()
    }
}

/// A Secret watch's event as the tracker reads it.
pub(crate) fn event(ev: watcher::Event<Secret>) -> watcher::Event<ConfigMap> {
    match ev {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(s) => watcher::Event::InitApply(as_configmap(s)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(s) => watcher::Event::Apply(as_configmap(s)),
        watcher::Event::Delete(s) => watcher::Event::Delete(as_configmap(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Target;
    use crate::api::source::{self, Kind, Tracker};
    use crate::snapshot::Observed;
    use k8s_openapi::ByteString;

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            string_data: Some([("ignored".to_owned(), "write-only".to_owned())].into()),
            ..Secret::default()
        }
    }

    #[test]
    fn data_is_bytes_and_string_data_is_never_read() {
        let obs = source::observe(&as_configmap(secret(&[
            ("token", b"1234"),
            ("blob", &[0, 255]),
        ])));
        let Observed::Config(s) = obs else {
            panic!("{obs:?}")
        };
        assert_eq!(s.files().keys().collect::<Vec<_>>(), ["blob", "token"]);
        assert_eq!(s.files()["blob"], [0, 255]);
        assert_eq!(s.files()["token"], b"1234");
    }

    #[test]
    fn a_deleted_secret_is_named_as_a_secret() {
        let target = Target {
            namespace: "ns".into(),
            name: "tokens".into(),
        };
        let mut t = Tracker::of_kind(Kind::Secret, target, source::STUCK_AFTER);
        assert_eq!(t.view().kind, "secret");
        t.event(event(watcher::Event::Init));
        let obs = t.event(event(watcher::Event::InitDone));
        assert_eq!(
            obs,
            Some(Observed::Missing("Secret ns/tokens does not exist".into()))
        );
        let forbidden = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        let why = t.describe(&watcher::Error::InitialListFailed(kube::Error::Api(
            forbidden.boxed(),
        )));
        assert!(
            why.contains("on secrets (apiGroups [\"\"]) with resourceNames [\"tokens\"]"),
            "{why}"
        );
    }
}
