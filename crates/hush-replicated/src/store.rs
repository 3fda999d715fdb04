//! A node's store: input shares uploaded by data owners and result shares
//! waiting for their output party, encrypted at rest, versioned, and
//! listed in an authenticated manifest so that a rolled-back, deleted or
//! swapped record is refused.
//!
//! ## Layout of `--store DIR`
//! * `node.key` — 32 random bytes, made on first start with mode 0600 (a
//!   node refuses to start if it is readable by group or others);
//! * `manifest` — the authenticated list of every record (below);
//! * `inputs/NAME.share` — one stored input;
//! * `results/JOBID.share` — this node's share of one job's outputs.
//!
//! ## Format of a record file
//! `HUSHSTR2` (8 bytes) ‖ version (u64 LE) ‖ grant digest (32 bytes) ‖
//! nonce (12 random bytes) ‖ AES-256-GCM(key, nonce, aad, record) with its
//! 16-byte tag, where aad = `HUSHSTR2` ‖ kind ‖ 0 ‖ name ‖ 0 ‖ version ‖
//! grant digest. The associated data binds a record to its file name (no
//! swapping between names), to its version (monotonic per record: a write
//! must name a higher version than the one the manifest lists) and to the
//! digest of its owner's grant (the access lists, [`crate::service`]).
//!
//! ## The manifest
//! `HUSHMAN1` ‖ HMAC-SHA256(mac key, `HUSHMAN1` ‖ body) ‖ body, where the
//! body is JSON: a counter (incremented by every write of the manifest) and,
//! per record `kind/name`, its version and the SHA-256 of its file. The
//! mac key is derived from `node.key`. The node holds the manifest in
//! memory while it runs and checks every record it reads against it:
//! * a record file whose digest differs from the manifest's is refused —
//!   with "rolled back" when it carries an older version, "replaced or
//!   tampered" otherwise (a swap from another name also fails its aad);
//! * a record the manifest lists but whose file is gone is refused as
//!   deleted (never read as absent);
//! * a record file the manifest does not list (planted, or restored from a
//!   backup after its deletion) is refused.
//!
//! Writes are crash-safe: the manifest first records the new file's digest
//! as *pending*, then the record is written to a temporary file (created
//! 0600, any stale one removed first), synced and renamed, then the
//! manifest makes the pending digest current. After a crash in between,
//! either the old or the new file is accepted (a pending digest is promoted
//! when seen). Stale temporary files are removed at start.
//!
//! What the manifest cannot see on its own: the whole store of a node
//! (manifest and records together) restored from an older backup is
//! consistent in itself. The anchor for that case is the other two nodes:
//! at every job's admission the nodes compare the version, upload id and
//! grant digest of every stored input the job reads, and a node that is
//! behind fails the job, named ([`crate::service`]). A coordinated restore
//! of all three nodes from backups of one moment is not detected (nothing
//! outside the three stores remembers a later version); see
//! `docs/security-3pc.md`.
//!
//! What is protected at rest: a stolen disk (or backup) of one node
//! reveals neither shares nor access lists without `node.key`. A node's
//! shares are in any case only one of three replicated shares: one node's
//! store, decrypted, reveals nothing about an input or a result (Araki et
//! al., §2.1). `node.key` is not protected from the node's own operator.
//! The raw key and every decrypted record are zeroized when dropped (the
//! AES and HMAC key schedules inside `ring` are not: ring does not offer
//! it).
//!
//! ## Stores made before versions (`HUSHSTR1`)
//! A store without a manifest whose records are all of the first format
//! is adopted once at start: each record is re-encrypted as version 1 with
//! the all-zero grant digest ([`LEGACY_GRANT`]) and the manifest is made.
//! A store without a manifest but with second-format records is refused
//! (the manifest was deleted).

use crate::error::{Error, Result};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use ring::hmac;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use zeroize::{Zeroize, Zeroizing};

const MAGIC_V1: &[u8; 8] = b"HUSHSTR1";
const MAGIC: &[u8; 8] = b"HUSHSTR2";
const MAN_MAGIC: &[u8; 8] = b"HUSHMAN1";
/// Header of a record file: magic, version, grant digest, nonce.
const HEADER: usize = 8 + 8 + 32 + 12;
/// The grant digest of records adopted from a first-format store.
pub const LEGACY_GRANT: [u8; 32] = [0u8; 32];
/// Record kinds a store keeps.
pub const KINDS: [&str; 2] = ["inputs", "results"];

/// What a record carries beside its contents (authenticated, readable
/// without decryption).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    /// Monotonic per record: every write names a higher one.
    pub version: u64,
    /// SHA-256 of the owner's grant (access lists and functions).
    pub grant: [u8; 32],
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    version: u64,
    digest: [u8; 32],
    /// Who owns the record (an opaque label the caller gives; empty for
    /// adopted first-format records).
    owner: String,
    /// A write in progress: its version and file digest.
    pending: Option<(u64, [u8; 32])>,
}

#[derive(Default)]
struct Manifest {
    counter: u64,
    records: BTreeMap<String, Entry>,
}

/// The encrypted store of one node.
pub struct Store {
    dir: PathBuf,
    key: LessSafeKey,
    mac: hmac::Key,
    man: Mutex<Manifest>,
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

fn sha256(b: &[u8]) -> [u8; 32] {
    ring::digest::digest(&ring::digest::SHA256, b).as_ref().try_into().expect("32 bytes")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut o = [0u8; 32];
    for (i, b) in o.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(o)
}

/// Writes `bytes` to `path` atomically: a temporary file next to it
/// (any stale one removed first, created 0600 and chmod-ed 0600
/// explicitly), synced, renamed, and the folder synced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut tmpname = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    tmpname.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmpname);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::File { what: format!("removing stale {}", tmp.display()), err: e }),
    }
    {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let mut f = o.open(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io(format!("chmod 600 {}", tmp.display())))?;
        }
        f.write_all(bytes).and_then(|_| f.sync_all()).map_err(io(format!("writing {}", tmp.display())))?;
    }
    std::fs::rename(&tmp, path).map_err(io(format!("renaming {}", path.display())))?;
    #[cfg(unix)]
    if let Some(d) = path.parent() {
        if let Ok(d) = std::fs::File::open(d) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Removes `*.tmp<N>` files left by a crash in `dir`; returns how many.
fn sweep_temps(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_tmp = name.rsplit_once(".tmp").is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if is_tmp && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

fn aad(kind: &str, name: &str, meta: &RecordMeta) -> Vec<u8> {
    let mut a = MAGIC.to_vec();
    a.extend_from_slice(kind.as_bytes());
    a.push(0);
    a.extend_from_slice(name.as_bytes());
    a.push(0);
    a.extend_from_slice(&meta.version.to_le_bytes());
    a.extend_from_slice(&meta.grant);
    a
}

fn aad_v1(kind: &str, name: &str) -> Vec<u8> {
    let mut a = kind.as_bytes().to_vec();
    a.push(0);
    a.extend_from_slice(name.as_bytes());
    a
}

fn rand_nonce() -> Result<[u8; 12]> {
    let mut nonce = [0u8; 12];
    getrandom::getrandom(&mut nonce).map_err(|e| Error::Local(format!("OS randomness unavailable: {e}")))?;
    Ok(nonce)
}

/// Reads `node.key` (or makes it on first start), checking its mode.
fn load_key(kp: &Path) -> Result<Zeroizing<Vec<u8>>> {
    match std::fs::read(kp) {
        Ok(k) => {
            let k = Zeroizing::new(k);
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(kp).map_err(io(format!("reading {}", kp.display())))?.permissions().mode();
                if mode & 0o077 != 0 {
                    return Err(Error::Local(format!("{} is readable by others (mode {:o}): chmod 600 it", kp.display(), mode & 0o777)));
                }
            }
            if k.len() != 32 {
                return Err(Error::Local(format!("{}: expected 32 bytes, found {}", kp.display(), k.len())));
            }
            Ok(k)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut k = Zeroizing::new(vec![0u8; 32]);
            getrandom::getrandom(&mut k).map_err(|e| Error::Local(format!("OS randomness unavailable: {e}")))?;
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            use std::io::Write;
            let mut f = o.open(kp).map_err(io(format!("creating {}", kp.display())))?;
            f.write_all(&k).and_then(|_| f.sync_all()).map_err(io(format!("writing {}", kp.display())))?;
            Ok(k)
        }
        Err(e) => Err(Error::File { what: format!("reading {}", kp.display()), err: e }),
    }
}

impl Store {
    /// Opens (creating on first use) the store in `dir`: checks the
    /// manifest's MAC, removes stale temporary files, and adopts a
    /// first-format store once (see the module doc).
    pub fn open(dir: &Path) -> Result<Store> {
        for sub in ["", KINDS[0], KINDS[1]] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(io(format!("creating store folder {}", d.display())))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let raw = load_key(&dir.join("node.key"))?;
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &raw).map_err(|_| Error::Local("bad store key".into()))?);
        let mut mk = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &raw), b"hush store manifest key v1").as_ref().to_vec();
        let mac = hmac::Key::new(hmac::HMAC_SHA256, &mk);
        mk.zeroize();
        drop(raw);
        for d in [dir.to_path_buf(), dir.join(KINDS[0]), dir.join(KINDS[1])] {
            sweep_temps(&d);
        }
        let s = Store { dir: dir.to_path_buf(), key, mac, man: Mutex::new(Manifest::default()) };
        let mp = dir.join("manifest");
        match std::fs::read(&mp) {
            Ok(b) => *s.man.lock().unwrap_or_else(|e| e.into_inner()) = s.parse_manifest(&b)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => s.adopt()?,
            Err(e) => return Err(Error::File { what: format!("reading {}", mp.display()), err: e }),
        }
        Ok(s)
    }

    fn parse_manifest(&self, b: &[u8]) -> Result<Manifest> {
        let p = self.dir.join("manifest");
        if b.len() < 8 + 32 || &b[..8] != MAN_MAGIC {
            return Err(Error::Local(format!("{}: not a hush store manifest", p.display())));
        }
        let mut signed = MAN_MAGIC.to_vec();
        signed.extend_from_slice(&b[40..]);
        hmac::verify(&self.mac, &signed, &b[8..40])
            .map_err(|_| Error::Local(format!("{}: authentication failed (tampered, or made under another node.key)", p.display())))?;
        let bad = |m: &str| Error::Local(format!("{}: {m}", p.display()));
        let v: serde_json::Value = serde_json::from_slice(&b[40..]).map_err(|e| bad(&e.to_string()))?;
        let counter = v.get("counter").and_then(|x| x.as_u64()).ok_or_else(|| bad("no counter"))?;
        let mut records = BTreeMap::new();
        for (k, e) in v.get("records").and_then(|x| x.as_object()).ok_or_else(|| bad("no records"))? {
            let version = e.get("v").and_then(|x| x.as_u64()).ok_or_else(|| bad("bad entry"))?;
            let digest = e.get("d").and_then(|x| x.as_str()).and_then(unhex32).ok_or_else(|| bad("bad entry"))?;
            let pending = match e.get("p").and_then(|x| x.as_array()) {
                Some(a) if a.len() == 2 => Some((
                    a[0].as_u64().ok_or_else(|| bad("bad entry"))?,
                    a[1].as_str().and_then(unhex32).ok_or_else(|| bad("bad entry"))?,
                )),
                _ => None,
            };
            let owner = e.get("o").and_then(|x| x.as_str()).unwrap_or("").to_string();
            records.insert(k.clone(), Entry { version, digest, owner, pending });
        }
        Ok(Manifest { counter, records })
    }

    /// Writes the manifest (the caller holds the lock), bumping its counter.
    fn write_manifest(&self, m: &mut Manifest) -> Result<()> {
        m.counter += 1;
        let mut recs = serde_json::Map::new();
        for (k, e) in &m.records {
            let mut o = serde_json::json!({ "v": e.version, "d": hex(&e.digest), "o": e.owner });
            if let Some((pv, pd)) = e.pending {
                o["p"] = serde_json::json!([pv, hex(&pd)]);
            }
            recs.insert(k.clone(), o);
        }
        let body = serde_json::json!({ "counter": m.counter, "records": recs }).to_string();
        let mut signed = MAN_MAGIC.to_vec();
        signed.extend_from_slice(body.as_bytes());
        let tag = hmac::sign(&self.mac, &signed);
        let mut file = MAN_MAGIC.to_vec();
        file.extend_from_slice(tag.as_ref());
        file.extend_from_slice(body.as_bytes());
        write_atomic(&self.dir.join("manifest"), &file)
    }

    /// No manifest: a new store, or a first-format store to adopt.
    fn adopt(&self) -> Result<()> {
        let mut m = self.man.lock().unwrap_or_else(|e| e.into_inner());
        for kind in KINDS {
            for name in Self::files(&self.dir, kind) {
                let p = self.path(kind, &name);
                let file = std::fs::read(&p).map_err(io(format!("reading {}", p.display())))?;
                if file.len() < 8 || &file[..8] != MAGIC_V1 {
                    return Err(Error::Local(format!(
                        "{}: the store has records but no manifest (deleted, or a partial restore): it cannot be trusted; move {} aside and have the owners share their inputs again",
                        self.dir.join("manifest").display(),
                        self.dir.display()
                    )));
                }
                if file.len() < 8 + 12 + 16 {
                    return Err(Error::Local(format!("{}: not a hush store record", p.display())));
                }
                let nonce: [u8; 12] = file[8..20].try_into().expect("length checked");
                let mut buf = Zeroizing::new(file[20..].to_vec());
                let plain = self
                    .key
                    .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad_v1(kind, &name)), &mut buf)
                    .map_err(|_| Error::Local(format!("{}: authentication failed (tampered, or made under another node.key)", p.display())))?;
                let meta = RecordMeta { version: 1, grant: LEGACY_GRANT };
                let f = self.seal(kind, &name, &meta, plain)?;
                write_atomic(&p, &f)?;
                m.records.insert(format!("{kind}/{name}"), Entry { version: 1, digest: sha256(&f), owner: String::new(), pending: None });
            }
        }
        self.write_manifest(&mut m)
    }

    fn files(dir: &Path, kind: &str) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(dir.join(kind)) else { return Vec::new() };
        let mut v: Vec<String> =
            rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".share")).map(|s| s.to_string())).collect();
        v.sort();
        v
    }

    fn path(&self, kind: &str, name: &str) -> PathBuf {
        self.dir.join(kind).join(format!("{name}.share"))
    }

    fn seal(&self, kind: &str, name: &str, meta: &RecordMeta, record: &[u8]) -> Result<Vec<u8>> {
        let nonce = rand_nonce()?;
        let mut buf = record.to_vec();
        let r = self.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(kind, name, meta)), &mut buf);
        if r.is_err() {
            buf.zeroize();
            return Err(Error::Local("store encryption failed".into()));
        }
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&meta.version.to_le_bytes());
        file.extend_from_slice(&meta.grant);
        file.extend_from_slice(&nonce);
        file.extend_from_slice(&buf);
        Ok(file)
    }

    /// The version the manifest lists for a record (`None`: no record).
    pub fn version(&self, kind: &str, name: &str) -> Option<u64> {
        self.man.lock().unwrap_or_else(|e| e.into_inner()).records.get(&format!("{kind}/{name}")).map(|e| e.version)
    }

    /// The owner label the manifest lists for a record (`None`: no
    /// record; empty: an adopted first-format record).
    pub fn owner(&self, kind: &str, name: &str) -> Option<String> {
        self.man.lock().unwrap_or_else(|e| e.into_inner()).records.get(&format!("{kind}/{name}")).map(|e| e.owner.clone())
    }

    /// Encrypts and writes a record (atomically), as `meta.version`, which
    /// must be higher than the record's current version, with an owner
    /// label kept in the manifest (so that the owner of a record whose
    /// file was damaged is still known).
    pub fn put(&self, kind: &str, name: &str, meta: RecordMeta, owner: &str, record: &[u8]) -> Result<()> {
        let key = format!("{kind}/{name}");
        let mut m = self.man.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = m.records.get(&key) {
            if meta.version <= e.version {
                return Err(Error::Local(format!("record {key}: version {} is not newer than the stored version {}", meta.version, e.version)));
            }
        }
        let file = self.seal(kind, name, &meta, record)?;
        let digest = sha256(&file);
        let old = m.records.get(&key).cloned();
        let mut pend = old.clone().unwrap_or(Entry { version: 0, digest: [0; 32], owner: owner.to_string(), pending: None });
        pend.pending = Some((meta.version, digest));
        m.records.insert(key.clone(), pend);
        if let Err(e) = self.write_manifest(&mut m) {
            restore(&mut m, &key, old);
            return Err(e);
        }
        if let Err(e) = write_atomic(&self.path(kind, name), &file) {
            restore(&mut m, &key, old);
            let _ = self.write_manifest(&mut m);
            return Err(e);
        }
        m.records.insert(key, Entry { version: meta.version, digest, owner: owner.to_string(), pending: None });
        self.write_manifest(&mut m)
    }

    /// Reads, checks against the manifest and decrypts a record; `None` if
    /// there is none. Refuses a deleted, rolled-back, swapped, planted or
    /// tampered record with an error naming it.
    pub fn get(&self, kind: &str, name: &str) -> Result<Option<(RecordMeta, Zeroizing<Vec<u8>>)>> {
        let key = format!("{kind}/{name}");
        let p = self.path(kind, name);
        let mut m = self.man.lock().unwrap_or_else(|e| e.into_inner());
        let entry = m.records.get(&key).cloned();
        let file = match std::fs::read(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match entry {
                    None => Ok(None),
                    Some(e) => Err(Error::Local(format!(
                        "store record {key} was deleted: the manifest lists version {}, the file {} is gone",
                        e.version,
                        p.display()
                    ))),
                };
            }
            Err(e) => return Err(Error::File { what: format!("reading {}", p.display()), err: e }),
        };
        let Some(entry) = entry else {
            return Err(Error::Local(format!(
                "store record {key} is not in the node's manifest (planted, or restored from a backup after it was deleted): refused"
            )));
        };
        if file.len() < HEADER + 16 || &file[..8] != MAGIC {
            return Err(Error::Local(format!("{}: not a hush store record", p.display())));
        }
        let meta = RecordMeta { version: u64::from_le_bytes(file[8..16].try_into().expect("8")), grant: file[16..48].try_into().expect("32") };
        let digest = sha256(&file);
        if digest != entry.digest {
            match entry.pending {
                Some((pv, pd)) if pd == digest && pv == meta.version => {
                    // a write that crashed after its rename: make it current
                    let owner = entry.owner.clone();
                    m.records.insert(key.clone(), Entry { version: pv, digest: pd, owner, pending: None });
                    self.write_manifest(&mut m)?;
                }
                _ if meta.version < entry.version => {
                    return Err(Error::Local(format!(
                        "store record {key} was rolled back: its file is version {}, the manifest lists version {}",
                        meta.version, entry.version
                    )))
                }
                _ => {
                    return Err(Error::Local(format!(
                        "store record {key} does not match the manifest (version {} in the file, {} listed): replaced or tampered",
                        meta.version, entry.version
                    )))
                }
            }
        }
        drop(m);
        let nonce: [u8; 12] = file[48..60].try_into().expect("length checked");
        let mut buf = Zeroizing::new(file[60..].to_vec());
        let n = self
            .key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad(kind, name, &meta)), &mut buf)
            .map_err(|_| Error::Local(format!("{}: authentication failed (tampered, moved from another name, or made under another node.key)", p.display())))?
            .len();
        buf.truncate(n);
        Ok(Some((meta, buf)))
    }

    /// Names of the records of `kind` the manifest lists.
    pub fn list(&self, kind: &str) -> Vec<String> {
        let pre = format!("{kind}/");
        let m = self.man.lock().unwrap_or_else(|e| e.into_inner());
        m.records.keys().filter_map(|k| k.strip_prefix(&pre)).map(String::from).collect()
    }

    /// Whether the manifest lists a record.
    pub fn contains(&self, kind: &str, name: &str) -> bool {
        self.version(kind, name).is_some()
    }

    /// The manifest's counter (how many times it was written).
    pub fn counter(&self) -> u64 {
        self.man.lock().unwrap_or_else(|e| e.into_inner()).counter
    }
}

fn restore(m: &mut Manifest, key: &str, old: Option<Entry>) {
    match old {
        Some(e) => {
            m.records.insert(key.to_string(), e);
        }
        None => {
            m.records.remove(key);
        }
    }
}

/// Writes a record in the first (`HUSHSTR1`) format, as stores made
/// before record versions did: for migration tests only.
#[doc(hidden)]
pub fn write_legacy_record(dir: &Path, kind: &str, name: &str, record: &[u8]) -> Result<()> {
    for sub in ["", KINDS[0], KINDS[1]] {
        std::fs::create_dir_all(dir.join(sub)).map_err(io(format!("creating {}", dir.display())))?;
    }
    let raw = load_key(&dir.join("node.key"))?;
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &raw).map_err(|_| Error::Local("bad store key".into()))?);
    let nonce = rand_nonce()?;
    let mut buf = record.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad_v1(kind, name)), &mut buf)
        .map_err(|_| Error::Local("store encryption failed".into()))?;
    let mut file = MAGIC_V1.to_vec();
    file.extend_from_slice(&nonce);
    file.extend_from_slice(&buf);
    std::fs::write(dir.join(kind).join(format!("{name}.share")), file).map_err(io(format!("writing {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hush-store-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }
    fn meta(version: u64, g: u8) -> RecordMeta {
        RecordMeta { version, grant: [g; 32] }
    }
    fn plain(r: Option<(RecordMeta, Zeroizing<Vec<u8>>)>) -> Vec<u8> {
        r.unwrap().1.to_vec()
    }

    #[test]
    fn records_roundtrip_and_are_bound_to_names() {
        let dir = fresh("names");
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "a", meta(1, 7), "o", b"secret shares").unwrap();
        let (m, p) = s.get("inputs", "a").unwrap().unwrap();
        assert_eq!((m, p.as_slice()), (meta(1, 7), &b"secret shares"[..]));
        assert!(s.get("inputs", "b").unwrap().is_none());
        let raw = std::fs::read(dir.join("inputs/a.share")).unwrap();
        assert!(!raw.windows(6).any(|w| w == b"secret"), "encrypted at rest");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(dir.join("node.key")).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(dir.join("inputs/a.share")).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // Versions only go up.
        let e = s.put("inputs", "a", meta(1, 7), "o", b"x").unwrap_err().to_string();
        assert!(e.contains("not newer"), "{e}");
        // Reopened (a restarted node): same key, same records.
        drop(s);
        let s = Store::open(&dir).unwrap();
        assert_eq!(plain(s.get("inputs", "a").unwrap()), b"secret shares");
        assert_eq!(s.list("inputs"), vec!["a"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A saved older version put back in place is refused as rolled back,
    /// while the node runs and after a restart.
    #[test]
    fn rolled_back_record_is_refused() {
        let dir = fresh("rollback");
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "k", meta(1, 1), "o", b"old grant").unwrap();
        let old = std::fs::read(dir.join("inputs/k.share")).unwrap();
        s.put("inputs", "k", meta(2, 2), "o", b"new grant").unwrap();
        std::fs::write(dir.join("inputs/k.share"), &old).unwrap();
        let e = s.get("inputs", "k").unwrap_err().to_string();
        assert!(e.contains("inputs/k") && e.contains("rolled back") && e.contains("version 1") && e.contains("version 2"), "{e}");
        drop(s);
        let s = Store::open(&dir).unwrap();
        let e = s.get("inputs", "k").unwrap_err().to_string();
        assert!(e.contains("rolled back"), "{e}");
        // the right file back: accepted again
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A deleted record is an error, not an absent one; a record the
    /// manifest does not list is refused.
    #[test]
    fn deleted_and_planted_records_are_refused() {
        let dir = fresh("delete");
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "k", meta(1, 1), "o", b"v").unwrap();
        s.put("results", "00000000000000aa", meta(1, 0), "o", b"r").unwrap();
        let saved = std::fs::read(dir.join("inputs/k.share")).unwrap();
        std::fs::remove_file(dir.join("inputs/k.share")).unwrap();
        let e = s.get("inputs", "k").unwrap_err().to_string();
        assert!(e.contains("inputs/k") && e.contains("deleted"), "{e}");
        std::fs::remove_file(dir.join("results/00000000000000aa.share")).unwrap();
        let e = s.get("results", "00000000000000aa").unwrap_err().to_string();
        assert!(e.contains("deleted"), "{e}");
        // planted under a name the manifest does not know
        std::fs::write(dir.join("inputs/other.share"), &saved).unwrap();
        let e = s.get("inputs", "other").unwrap_err().to_string();
        assert!(e.contains("not in the node's manifest"), "{e}");
        // a deleted manifest: the node refuses to start
        drop(s);
        std::fs::remove_file(dir.join("manifest")).unwrap();
        let e = Store::open(&dir).err().expect("refused").to_string();
        assert!(e.contains("no manifest"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Records swapped between names are refused (manifest digest and aad);
    /// a manifest edited by hand fails its MAC.
    #[test]
    fn swapped_records_and_forged_manifest_are_refused() {
        let dir = fresh("swap");
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "a", meta(1, 1), "o", b"A").unwrap();
        s.put("inputs", "b", meta(1, 1), "o", b"B").unwrap();
        let (fa, fb) = (std::fs::read(dir.join("inputs/a.share")).unwrap(), std::fs::read(dir.join("inputs/b.share")).unwrap());
        std::fs::write(dir.join("inputs/a.share"), &fb).unwrap();
        std::fs::write(dir.join("inputs/b.share"), &fa).unwrap();
        for n in ["a", "b"] {
            let e = s.get("inputs", n).unwrap_err().to_string();
            assert!(e.contains(&format!("inputs/{n}")) && e.contains("replaced or tampered"), "{e}");
        }
        drop(s);
        let mut man = std::fs::read(dir.join("manifest")).unwrap();
        let last = man.len() - 2;
        man[last] ^= 1;
        std::fs::write(dir.join("manifest"), &man).unwrap();
        let e = Store::open(&dir).err().expect("refused").to_string();
        assert!(e.contains("manifest") && e.contains("authentication failed"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stale temporary file (mode 0644, with content) is removed at start
    /// and never inherited by a record: records are 0600.
    #[cfg(unix)]
    #[test]
    fn stale_temp_files_are_removed_and_records_are_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = fresh("tmp");
        let s = Store::open(&dir).unwrap();
        let stale = dir.join(format!("inputs/k.share.tmp{}", std::process::id()));
        std::fs::write(&stale, b"stale").unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();
        s.put("inputs", "k", meta(1, 1), "o", b"v").unwrap();
        assert!(!stale.exists());
        assert_eq!(std::fs::metadata(dir.join("inputs/k.share")).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(dir.join("manifest")).unwrap().permissions().mode() & 0o777, 0o600);
        // a crash leftover from another process: swept at start
        let other = dir.join("inputs/j.share.tmp4242");
        std::fs::write(&other, b"stale").unwrap();
        drop(s);
        let s = Store::open(&dir).unwrap();
        assert!(!other.exists());
        assert_eq!(plain(s.get("inputs", "k").unwrap()), b"v");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A write that crashed after renaming the record but before the
    /// manifest was made current: the new record is accepted (pending).
    #[test]
    fn crash_between_record_and_manifest_is_recovered() {
        let dir = fresh("crash");
        let s = Store::open(&dir).unwrap();
        s.put("inputs", "k", meta(1, 1), "o", b"one").unwrap();
        let man1 = std::fs::read(dir.join("manifest")).unwrap();
        s.put("inputs", "k", meta(2, 1), "o", b"two").unwrap();
        // simulate: the manifest as it was with "two" pending
        drop(s);
        let s = Store::open(&dir).unwrap();
        let mut m = s.parse_manifest(&man1).unwrap();
        let d2 = sha256(&std::fs::read(dir.join("inputs/k.share")).unwrap());
        m.records.get_mut("inputs/k").unwrap().pending = Some((2, d2));
        s.write_manifest(&mut m).unwrap();
        drop(s);
        let s = Store::open(&dir).unwrap();
        assert_eq!(plain(s.get("inputs", "k").unwrap()), b"two");
        assert_eq!(s.version("inputs", "k"), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A first-format store is adopted once: version 1, legacy grant.
    #[test]
    fn first_format_store_is_adopted() {
        let dir = fresh("legacy");
        write_legacy_record(&dir, "inputs", "old", b"legacy record").unwrap();
        let s = Store::open(&dir).unwrap();
        let (m, p) = s.get("inputs", "old").unwrap().unwrap();
        assert_eq!((m, p.as_slice()), (RecordMeta { version: 1, grant: LEGACY_GRANT }, &b"legacy record"[..]));
        let raw = std::fs::read(dir.join("inputs/old.share")).unwrap();
        assert_eq!(&raw[..8], MAGIC);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
