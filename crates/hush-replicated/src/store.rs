//! A node's store: input shares uploaded by data owners and result shares
//! waiting for their output party, encrypted at rest.
//!
//! ## Layout of `--store DIR`
//! * `node.key` — 32 random bytes, made on first start with mode 0600 (a
//!   node refuses to start if it is readable by group or others);
//! * `inputs/NAME.share` — one stored input;
//! * `results/JOBID.share` — this node's share of one job's outputs.
//!
//! ## Format of a record file
//! `HUSHSTR1` (8 bytes) ‖ nonce (12 random bytes) ‖ AES-256-GCM(key,
//! nonce, aad = kind ‖ 0 ‖ file name, JSON record) with its 16-byte tag.
//! The associated data binds a record to its file name, so records cannot
//! be swapped between names undetected; a tampered or foreign file is a
//! clear error. Files are written to a temporary name, synced, then
//! renamed: a crash leaves the old record or the new one, never a torn one.
//!
//! What is protected: a stolen disk (or backup) of one node reveals
//! neither shares nor access lists without `node.key`. A node's shares are
//! in any case only one of three replicated shares: one node's store,
//! decrypted, reveals nothing about an input or a result (Araki et al.,
//! §2.1). `node.key` is not protected from the node's own operator.

use crate::error::{Error, Result};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"HUSHSTR1";

/// The encrypted store of one node.
pub struct Store {
    dir: PathBuf,
    key: LessSafeKey,
}

/// Valid names of stored inputs: 1–64 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Input(format!("input name {name:?}: use 1-64 of A-Z a-z 0-9 . _ - (not starting with .)")))
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |err| Error::File { what, err }
}

impl Store {
    /// Opens (creating on first use) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Store> {
        for sub in ["", "inputs", "results"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(io(format!("creating store folder {}", d.display())))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let kp = dir.join("node.key");
        let key = match std::fs::read(&kp) {
            Ok(k) => {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::metadata(&kp).map_err(io(format!("reading {}", kp.display())))?.permissions().mode();
                    if mode & 0o077 != 0 {
                        return Err(Error::Local(format!("{} is readable by others (mode {:o}): chmod 600 it", kp.display(), mode & 0o777)));
                    }
                }
                if k.len() != 32 {
                    return Err(Error::Local(format!("{}: expected 32 bytes, found {}", kp.display(), k.len())));
                }
                k
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut k = vec![0u8; 32];
                getrandom::getrandom(&mut k).map_err(|e| Error::Local(format!("OS randomness unavailable: {e}")))?;
                let mut o = std::fs::OpenOptions::new();
                o.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    o.mode(0o600);
                }
                use std::io::Write;
                let mut f = o.open(&kp).map_err(io(format!("creating {}", kp.display())))?;
                f.write_all(&k).and_then(|_| f.sync_all()).map_err(io(format!("writing {}", kp.display())))?;
                k
            }
            Err(e) => return Err(Error::File { what: format!("reading {}", kp.display()), err: e }),
        };
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).map_err(|_| Error::Local("bad store key".into()))?);
        Ok(Store { dir: dir.to_path_buf(), key })
    }

    fn path(&self, kind: &str, name: &str) -> PathBuf {
        self.dir.join(kind).join(format!("{name}.share"))
    }

    fn aad(kind: &str, name: &str) -> Vec<u8> {
        let mut a = kind.as_bytes().to_vec();
        a.push(0);
        a.extend_from_slice(name.as_bytes());
        a
    }

    /// Encrypts and writes a record (atomically).
    pub fn put(&self, kind: &str, name: &str, record: &[u8]) -> Result<()> {
        let mut nonce = [0u8; 12];
        getrandom::getrandom(&mut nonce).map_err(|e| Error::Local(format!("OS randomness unavailable: {e}")))?;
        let mut buf = record.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(Self::aad(kind, name)), &mut buf)
            .map_err(|_| Error::Local("store encryption failed".into()))?;
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&nonce);
        file.extend_from_slice(&buf);
        let p = self.path(kind, name);
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        {
            use std::io::Write;
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let mut f = o.open(&tmp).map_err(io(format!("writing {}", tmp.display())))?;
            f.write_all(&file).and_then(|_| f.sync_all()).map_err(io(format!("writing {}", tmp.display())))?;
        }
        std::fs::rename(&tmp, &p).map_err(io(format!("renaming {}", p.display())))
    }

    /// Reads and decrypts a record; `None` if there is none.
    pub fn get(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
        let p = self.path(kind, name);
        let file = match std::fs::read(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::File { what: format!("reading {}", p.display()), err: e }),
        };
        if file.len() < 8 + 12 + 16 || &file[..8] != MAGIC {
            return Err(Error::Local(format!("{}: not a hush store record", p.display())));
        }
        let nonce: [u8; 12] = file[8..20].try_into().expect("length checked");
        let mut buf = file[20..].to_vec();
        let plain = self
            .key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(Self::aad(kind, name)), &mut buf)
            .map_err(|_| Error::Local(format!("{}: authentication failed (tampered, or made under another node.key)", p.display())))?;
        Ok(Some(plain.to_vec()))
    }

    /// Names of the records of `kind`.
    pub fn list(&self, kind: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.dir.join(kind)) else { return Vec::new() };
        let mut v: Vec<String> =
            rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".share")).map(|s| s.to_string())).collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip_and_are_bound_to_names() {
        let dir = std::env::temp_dir().join(format!("hush-store-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "a", b"secret shares").unwrap();
        assert_eq!(s.get("inputs", "a").unwrap().unwrap(), b"secret shares");
        assert!(s.get("inputs", "b").unwrap().is_none());
        let raw = std::fs::read(dir.join("inputs/a.share")).unwrap();
        assert!(!raw.windows(6).any(|w| w == b"secret"), "encrypted at rest");
        // Moved under another name: refused.
        std::fs::write(dir.join("inputs/b.share"), &raw).unwrap();
        assert!(s.get("inputs", "b").is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(dir.join("node.key")).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // Reopened (a restarted node): same key, same records.
        drop(s);
        let s = Store::open(&dir).unwrap();
        assert_eq!(s.get("inputs", "a").unwrap().unwrap(), b"secret shares");
        assert_eq!(s.list("inputs"), vec!["a", "b"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
