//! What kind of source the watched config comes from, so that a reason's fix says what to change: a
//! ConfigMap or a Secret (mounted as a volume, or read through the API), or plain files on the node (a
//! hostPath, as a static pod's config is, or any directory without the kubelet's `..data`).

/// The kind of the watched config's source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// A ConfigMap volume: the kubelet's layout (`..data`) without `--content secret`.
    #[default]
    ConfigMapVolume,
    /// A Secret volume (`--content secret`).
    SecretVolume,
    /// A plain directory (a hostPath; no `..data`): files on the node, which no object fills.
    PlainDir,
    /// A ConfigMap read through the API (`--source configmap:...`).
    ApiConfigMap,
    /// A Secret read through the API (`--source secret:...`).
    ApiSecret,
}

impl Source {
    /// What holds the version and keys, as a fix names it: `the ConfigMap`, `the Secret`, or the
    /// config file on the node.
    pub(crate) fn object(self) -> &'static str {
        match self {
            Source::ConfigMapVolume | Source::ApiConfigMap => "the ConfigMap",
            Source::SecretVolume | Source::ApiSecret => "the Secret",
            Source::PlainDir => "the config file on the node (in the watched directory)",
        }
    }

    /// Where a key is added or removed: the object, or the watched directory on the node.
    pub(crate) fn holder(self) -> &'static str {
        match self {
            Source::PlainDir => "the watched directory on the node",
            _ => self.object(),
        }
    }

    /// What a key is called: a key of an object, a file of a plain directory.
    pub(crate) fn key_word(self) -> &'static str {
        match self {
            Source::PlainDir => "file",
            _ => "key",
        }
    }

    /// Whether it is a Secret's content.
    pub(crate) fn is_secret(self) -> bool {
        matches!(self, Source::SecretVolume | Source::ApiSecret)
    }
}
