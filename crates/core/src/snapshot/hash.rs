//! The content hash: `sha256:` over the documented encoding, printed sealed (`hmac-sha256:` under a
//! per-process key) once [`seal`] was called.
//!
//! The HMAC is RustCrypto's `hmac`, under a random per-process key, for a Secret: the plain
//! `sha256:` of a Secret is printed nowhere (`ContentHash::plain` is for the reload-owed marker
//! only, beside the content in the promoted dir). `PrintedHash` is a hash as printed, which output
//! holds and reads back (`ContentHash::printed`).

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` over the documented encoding; `hmac-sha256:<hex>` once `seal` was called.
///
/// The bytes are always the plain digest, so comparisons, de-duplication and the reload-owed marker
/// (in the promoted dir, beside the content itself) work alike; only the text form is sealed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash([u8; 32]);

/// The process's key for sealed hashes, set once at start-up when the content is a Secret.
static SEAL: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();

/// From now on every hash this process prints is `hmac-sha256:` under `key`, never the plain
/// `sha256:` of the content: a Secret's plain hash can be brute-forced when its value is short.
/// Returns false when another key was already set (the first one stays).
pub fn seal(key: [u8; 32]) -> bool {
    SEAL.set(key).is_ok() || SEAL.get() == Some(&key)
}

/// Whether printed hashes are sealed.
pub fn sealed() -> bool {
    SEAL.get().is_some()
}

/// HMAC-SHA256 (RFC 2104) of `msg` under a 32-byte key.
pub(crate) fn hmac_sha256(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    // A 32-byte key fits any HMAC key length: `new_from_slice` cannot refuse it.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// Lower-case hex of `bytes` (at most 32) in one write: a hash is printed several times per change
/// (log lines, the status, the reload-owed marker), and a formatter call per byte cost more than
/// everything else the loop does between a config's read and its reload request.
fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let mut buf = [0u8; 64];
    f.write_str(hex(bytes, &mut buf))
}

/// `bytes` as lower-case hex in `buf`, which must be twice as long.
fn hex<'a>(bytes: &[u8], buf: &'a mut [u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let out = &mut buf[..bytes.len() * 2];
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    std::str::from_utf8(out).expect("hex digits are ASCII")
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SEAL.get() {
            Some(key) => {
                f.write_str("hmac-sha256:")?;
                write_hex(f, &hmac_sha256(key, &self.0))
            }
            None => fmt::Display::fmt(&self.plain(), f),
        }
    }
}

/// The plain `sha256:` text of a hash, for files beside the content (never for output).
pub struct Plain<'a>(&'a ContentHash);

impl fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        write_hex(f, &self.0.0)
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl ContentHash {
    /// The first 12 hex digits of the printed form, for log lines.
    pub fn short(&self) -> String {
        self.printed().short()
    }

    /// The plain `sha256:` form even when sealed: only for the promoted dir, which holds the
    /// content itself.
    pub fn plain(&self) -> Plain<'_> {
        Plain(self)
    }

    /// Reads back the plain form ([`ContentHash::plain`]) that the promoted dir's markers hold.
    pub fn parse_plain(text: &str) -> Result<ContentHash, HashTextError> {
        let hex = text.strip_prefix("sha256:").ok_or(HashTextError::Prefix)?;
        digest_of_hex(hex).map(ContentHash)
    }

    /// Hashes keys and values in the documented encoding; the order they come in does not matter.
    ///
    /// ```
    /// use confgate_core::snapshot::ContentHash;
    /// let a = ContentHash::of([("a", b"1".as_slice()), ("b", b"2".as_slice())]);
    /// let b = ContentHash::of([("b", b"2".as_slice()), ("a", b"1".as_slice())]);
    /// assert_eq!(a, b);
    /// assert!(a.to_string().starts_with("sha256:"));
    /// ```
    pub fn of<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ContentHash {
        let mut sorted: Vec<(&str, &[u8])> = files.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut h = Sha256::new();
        for (k, v) in sorted {
            h.update((k.len() as u64).to_be_bytes());
            h.update(k.as_bytes());
            h.update((v.len() as u64).to_be_bytes());
            h.update(v);
        }
        ContentHash(h.finalize().into())
    }
}

/// A hash as this process printed it (`sha256:` or, sealed, `hmac-sha256:`), so `/status` and
/// whoever reads it back (`probe`, the tests) hold a hash, not text. It cannot be turned back into a
/// [`ContentHash`]: a sealed one hides the content's digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum PrintedHash {
    Sha256([u8; 32]),
    HmacSha256([u8; 32]),
}

impl ContentHash {
    /// The hash as it is printed now (sealed once `seal` was called).
    pub fn printed(&self) -> PrintedHash {
        match SEAL.get() {
            Some(key) => PrintedHash::HmacSha256(hmac_sha256(key, &self.0)),
            None => PrintedHash::Sha256(self.0),
        }
    }
}

impl PrintedHash {
    /// The first 12 hex digits, for log lines and tables.
    pub fn short(&self) -> String {
        let (PrintedHash::Sha256(b) | PrintedHash::HmacSha256(b)) = self;
        let mut buf = [0u8; 12];
        hex(&b[..6], &mut buf).to_owned()
    }
}

impl fmt::Display for PrintedHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (prefix, bytes) = match self {
            PrintedHash::Sha256(b) => ("sha256:", b),
            PrintedHash::HmacSha256(b) => ("hmac-sha256:", b),
        };
        f.write_str(prefix)?;
        write_hex(f, bytes)
    }
}

impl fmt::Debug for PrintedHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a text is not a printed hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HashTextError {
    #[error("a hash starts with sha256: or hmac-sha256:")]
    Prefix,
    #[error("a hash has 64 hex digits after its prefix")]
    Digits,
}

/// The 32 bytes of 64 hex digits.
fn digest_of_hex(hex: &str) -> Result<[u8; 32], HashTextError> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HashTextError::Digits);
    }
    let mut bytes = [0u8; 32];
    for (i, b) in bytes.iter_mut().enumerate() {
        // Checked above: two ASCII hex digits always parse.
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| HashTextError::Digits)?;
    }
    Ok(bytes)
}

impl std::str::FromStr for PrintedHash {
    type Err = HashTextError;
    fn from_str(s: &str) -> Result<PrintedHash, HashTextError> {
        if let Some(h) = s.strip_prefix("sha256:") {
            digest_of_hex(h).map(PrintedHash::Sha256)
        } else if let Some(h) = s.strip_prefix("hmac-sha256:") {
            digest_of_hex(h).map(PrintedHash::HmacSha256)
        } else {
            Err(HashTextError::Prefix)
        }
    }
}

impl From<PrintedHash> for String {
    fn from(h: PrintedHash) -> String {
        h.to_string()
    }
}

impl TryFrom<String> for PrintedHash {
    type Error = HashTextError;
    fn try_from(s: String) -> Result<PrintedHash, HashTextError> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hash_is_documented_encoding() {
        // Computed independently: printf '\0\0\0\0\0\0\0\x01a\0\0\0\0\0\0\0\x01b' | sha256sum
        let h = ContentHash::of([("a", b"b".as_slice())]);
        let mut manual = Sha256::new();
        manual.update([0, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 1, b'b']);
        assert_eq!(h.0, <[u8; 32]>::from(manual.finalize()));
        assert!(h.to_string().starts_with("sha256:") && h.to_string().len() == 71);
    }

    #[test]
    fn hmac_is_rfc_2104() {
        // python3 -c "import hmac,hashlib;print(hmac.new(bytes([0x0b]*32),b'Hi There',hashlib.sha256).hexdigest())"
        let mac = hmac_sha256(&[0x0b; 32], b"Hi There");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }

    #[test]
    fn hex_is_the_formatters_for_every_byte() {
        let bytes: Vec<u8> = (0..=255).collect();
        for chunk in bytes.chunks(32) {
            let want: String = chunk.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex(chunk, &mut [0u8; 64]), want);
        }
    }

    #[test]
    fn hash_separates_keys_from_values() {
        let a = ContentHash::of([("ab", b"c".as_slice())]);
        let b = ContentHash::of([("a", b"bc".as_slice())]);
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn hash_ignores_order(mut pairs in proptest::collection::vec(("[a-z.]{1,6}", proptest::collection::vec(any::<u8>(), 0..16)), 0..8)) {
            pairs.sort();
            pairs.dedup_by(|a, b| a.0 == b.0);
            let fwd = ContentHash::of(pairs.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
            let rev = ContentHash::of(pairs.iter().rev().map(|(k, v)| (k.as_str(), v.as_slice())));
            prop_assert_eq!(fwd, rev);
        }
    }

    #[test]
    fn printed_hash_reads_back_what_it_prints() {
        let h = ContentHash::of([("a", b"b".as_slice())]);
        let printed = PrintedHash::Sha256(h.0);
        assert_eq!(printed.to_string(), h.plain().to_string());
        assert_eq!(printed.to_string().parse::<PrintedHash>(), Ok(printed));
        assert_eq!(printed.short(), h.plain().to_string()[7..19]);
        let sealed = PrintedHash::HmacSha256([0xab; 32]);
        let json = serde_json::to_string(&sealed).unwrap();
        assert_eq!(json, format!("\"hmac-sha256:{}\"", "ab".repeat(32)));
        assert_eq!(serde_json::from_str::<PrintedHash>(&json).unwrap(), sealed);
        for bad in [
            "sha256:ab",
            "md5:00",
            "sha256:",
            &format!("sha256:{}", "g".repeat(64)),
        ] {
            assert!(bad.parse::<PrintedHash>().is_err(), "{bad}");
        }
        assert_eq!("md5:00".parse::<PrintedHash>(), Err(HashTextError::Prefix));
        assert_eq!(
            "sha256:ab".parse::<PrintedHash>(),
            Err(HashTextError::Digits)
        );
        assert_eq!(ContentHash::parse_plain(&h.plain().to_string()), Ok(h));
        assert_eq!(
            ContentHash::parse_plain(&sealed.to_string()),
            Err(HashTextError::Prefix)
        );
    }
}
