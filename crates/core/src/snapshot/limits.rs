//! The bounds a config is read within, and the names and modes of a kubelet volume.

/// The ConfigMap size limit (`core.MaxSecretSize`): the sum of all values.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// The most keys a config may have. The API server bounds a ConfigMap's values (1 MiB) but not how many
/// keys share them; each key costs memory of its own (its name, its entry, its file and link in the
/// promoted dir), so this bound is what keeps a config of empty keys within the sidecar's memory limit.
/// Real ConfigMaps hold a few hundred at most.
pub const MAX_KEYS: usize = 8192;
pub const DATA_LINK: &str = "..data";

/// The mode a key file has when nothing else is known: the kubelet's `defaultMode` default.
pub const DEFAULT_MODE: u32 = 0o644;

/// Whether `name` (one path component) is an editor's leftover beside a file it edits, never a key of
/// a plain directory: vim's swap files (`.NAME.swp`, `.swo`, `.swx`) and its write probe (`4913`),
/// backups (`NAME~`) and Emacs' lock links (`.#NAME`). A ConfigMap cannot write such names into a
/// kubelet volume's `..data`, where they are read as keys like any other.
pub fn is_editor_leftover(name: &[u8]) -> bool {
    name == b"4913"
        || name.ends_with(b"~")
        || name.starts_with(b".#")
        || (name.starts_with(b".")
            && [&b".swp"[..], b".swo", b".swx"]
                .iter()
                .any(|s| name.ends_with(s)))
}
