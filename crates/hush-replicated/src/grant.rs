//! Function grants of stored inputs: which circuits a data owner lets
//! others compute on its input, and at which input position.
//!
//! ## Why a grant names the function (and the position)
//! The access lists of a stored input say *who* may submit jobs reading it
//! (`users`) and *who* may receive results (`recipients`). Without a bound
//! on the function, a user may submit the identity circuit (a Bristol file
//! that copies its input wires to its outputs) and a recipient then holds
//! the input itself: "X may compute AES with my key" would in fact publish
//! the key. So a grant also names the functions, and a job is admitted
//! only if its circuit is one of them.
//!
//! The function alone is not enough either: with `aes128` granted, a
//! submitter could feed the key into the *plaintext* position under a key
//! of its own choice and decrypt the result. An entry therefore names the
//! input value the stored input may feed, `FUNC@N` (1-based, in the
//! circuit's input order). An entry without `@N` matches only a circuit
//! with a single input value; for a built-in circuit with several, `hush
//! share` asks for the position up front.
//!
//! What a grant still allows: the submitter chooses the job's other
//! inputs. A granted function must be safe for *every* choice of them —
//! `aes128@1` (an encryption oracle under the key) is; `mult64@1` is not
//! (multiplying by 1 reveals the input), nor is `adder64` (adding 0).
//!
//! ## Entries
//! * a built-in circuit name, as `hush circuit list` prints it (aliases
//!   are resolved to the canonical name): matches a job naming that
//!   built-in;
//! * `sha256:<64 hex>`: the SHA-256 of a Bristol Fashion file, byte for
//!   byte (`sha256sum FILE`, or `hush circuit info`): matches a job whose
//!   circuit text has that digest, and a built-in whose text has it;
//! * `any`: every function — which includes the identity, so every
//!   recipient may learn the input. It must be written out, and `hush
//!   share` warns.
//!
//! No entry at all (the default) allows no function to anyone but the
//! owner. The owner's own jobs are not bound by its grant: it knows the
//! input, and where its result goes is its own choice.

use crate::bristol::Circuit;
use crate::error::{Error, Result};

/// One entry of a function grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuncGrant {
    /// Every function (and so, for every recipient, the input itself).
    Any,
    /// One function, optionally at one input position (0-based here).
    Func { id: FuncId, pos: Option<usize> },
}

/// How a grant names a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuncId {
    /// A built-in circuit by canonical name.
    Builtin(String),
    /// SHA-256 of the Bristol Fashion text.
    Digest([u8; 32]),
}

/// What a job's circuit is, for matching against grants.
#[derive(Clone, Debug)]
pub struct CircuitId {
    /// Canonical built-in name, when the job named a built-in.
    pub builtin: Option<String>,
    /// SHA-256 of the circuit's Bristol Fashion text (a built-in's bundled
    /// or generated text).
    pub digest: [u8; 32],
    /// Number of input values.
    pub n_values: usize,
}

impl CircuitId {
    /// How the circuit is named in messages: `aes128 (sha256:…)`.
    pub fn describe(&self) -> String {
        match &self.builtin {
            Some(n) => format!("{n} (sha256:{})", hex(&self.digest)),
            None => format!("sha256:{}", hex(&self.digest)),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// SHA-256 of a circuit text.
pub fn text_digest(text: &str) -> [u8; 32] {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref().try_into().expect("32 bytes")
}

/// The Bristol text whose digest stands for a built-in circuit: the bundled
/// file, or the generated circuit written out.
pub fn builtin_digest(c: &Circuit, name: &str) -> [u8; 32] {
    match Circuit::builtin_text(name) {
        Some(t) => text_digest(t),
        None => text_digest(&crate::gen::to_bristol(c)),
    }
}

impl FuncGrant {
    /// Parses `any`, `NAME[@N]` or `sha256:HEX[@N]`; built-in names are
    /// resolved to their canonical name and, for a built-in with several
    /// input values, a position is required and checked.
    pub fn parse(s: &str) -> Result<FuncGrant> {
        Self::parse_inner(s, true)
    }

    /// Parses an entry as stored in a record (already canonical: built-in
    /// names are not looked up again).
    pub fn from_canonical(s: &str) -> Result<FuncGrant> {
        Self::parse_inner(s, false)
    }

    fn parse_inner(s: &str, validate: bool) -> Result<FuncGrant> {
        let s = s.trim();
        if s == "any" {
            return Ok(FuncGrant::Any);
        }
        let (f, pos) = match s.rsplit_once('@') {
            Some((f, p)) => {
                let n: usize = p.parse().map_err(|_| Error::Input(format!("--allow-circuit {s:?}: the position after @ is a number from 1")))?;
                if n == 0 {
                    return Err(Error::Input(format!("--allow-circuit {s:?}: positions count from 1")));
                }
                (f, Some(n - 1))
            }
            None => (s, None),
        };
        if let Some(h) = f.strip_prefix("sha256:") {
            let h = h.to_ascii_lowercase();
            let mut d = [0u8; 32];
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::Input(format!("--allow-circuit {s:?}: sha256: takes 64 hex digits (sha256sum of the Bristol file)")));
            }
            for (i, b) in d.iter_mut().enumerate() {
                *b = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("checked");
            }
            return Ok(FuncGrant::Func { id: FuncId::Digest(d), pos });
        }
        if !validate {
            return Ok(FuncGrant::Func { id: FuncId::Builtin(f.to_string()), pos });
        }
        let (cname, inputs) = Circuit::builtin_signature(f).ok_or_else(|| {
            Error::Input(format!(
                "--allow-circuit {s:?}: not a built-in circuit (hush circuit list) nor sha256:<hex of a Bristol file>, nor `any`"
            ))
        })?;
        let n = inputs.len();
        match pos {
            Some(p) if p >= n => {
                return Err(Error::Input(format!("--allow-circuit {s:?}: {cname} has {n} input values (positions 1..={n})")));
            }
            None if n > 1 => {
                return Err(Error::Input(format!(
                    "--allow-circuit {s:?}: {cname} takes {n} input values (widths {inputs:?}); name the one this input feeds, e.g. {cname}@1"
                )));
            }
            _ => {}
        }
        Ok(FuncGrant::Func { id: FuncId::Builtin(cname), pos })
    }

    /// The canonical text of the entry (stored in the record).
    pub fn canonical(&self) -> String {
        match self {
            FuncGrant::Any => "any".into(),
            FuncGrant::Func { id, pos } => {
                let f = match id {
                    FuncId::Builtin(n) => n.clone(),
                    FuncId::Digest(d) => format!("sha256:{}", hex(d)),
                };
                match pos {
                    Some(p) => format!("{f}@{}", p + 1),
                    None => f,
                }
            }
        }
    }

    /// Whether this entry allows circuit `c` with the stored input at
    /// input value `pos` (0-based).
    pub fn allows(&self, c: &CircuitId, pos: usize) -> bool {
        match self {
            FuncGrant::Any => true,
            FuncGrant::Func { id, pos: p } => {
                let same = match id {
                    FuncId::Builtin(n) => c.builtin.as_deref() == Some(n.as_str()),
                    FuncId::Digest(d) => *d == c.digest,
                };
                same && match p {
                    Some(p) => *p == pos,
                    None => c.n_values == 1,
                }
            }
        }
    }
}

/// Parses and canonicalises a list of entries (sorted, without
/// duplicates).
pub fn parse_list(entries: &[String]) -> Result<Vec<String>> {
    let mut v = entries.iter().filter(|e| !e.trim().is_empty()).map(|e| FuncGrant::parse(e).map(|g| g.canonical())).collect::<Result<Vec<_>>>()?;
    v.sort();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(builtin: Option<&str>, text: &str, n: usize) -> CircuitId {
        CircuitId { builtin: builtin.map(String::from), digest: text_digest(text), n_values: n }
    }

    #[test]
    fn entries_parse_canonically_and_match_function_and_position() {
        let aes = Circuit::builtin("aes128").unwrap();
        let aes_id = CircuitId { builtin: Some("aes128".into()), digest: builtin_digest(&aes, "aes128"), n_values: 2 };
        // aliases resolve; a position is required for a two-input built-in
        assert_eq!(FuncGrant::parse("aes-128@1").unwrap().canonical(), "aes128@1");
        let e = FuncGrant::parse("aes128").unwrap_err().to_string();
        assert!(e.contains("aes128@1"), "{e}");
        assert!(FuncGrant::parse("aes128@3").is_err());
        assert!(FuncGrant::parse("aes128@0").is_err());
        assert!(FuncGrant::parse("nosuch").is_err());
        assert!(FuncGrant::parse("sha256:abcd").is_err());
        let g = FuncGrant::parse("aes128@1").unwrap();
        assert!(g.allows(&aes_id, 0));
        assert!(!g.allows(&aes_id, 1), "the key must not feed the plaintext position");
        // the same function by digest matches the built-in too
        let d = FuncGrant::parse(&format!("sha256:{}@1", hex(&aes_id.digest))).unwrap();
        assert!(d.allows(&aes_id, 0) && !d.allows(&aes_id, 1));
        // an identity circuit is none of these
        let ident = id(None, "1 2\n1 1\n1 1\n\n1 1 0 1 EQW\n", 1);
        assert!(!g.allows(&ident, 0) && !d.allows(&ident, 0));
        assert!(FuncGrant::Any.allows(&ident, 0));
        // a digest entry without a position: single-input circuits only
        let nd = FuncGrant::parse(&format!("sha256:{}", hex(&ident.digest))).unwrap();
        assert!(nd.allows(&ident, 0));
        let two = CircuitId { n_values: 2, ..ident.clone() };
        assert!(!nd.allows(&two, 0));
        assert_eq!(parse_list(&["aes128@1".into(), "aes-128@1".into(), "any".into()]).unwrap(), vec!["aes128@1", "any"]);
        // generated built-ins and aliases; the header-only signature agrees with the parsed circuit
        assert_eq!(FuncGrant::parse("aes128_expanded@1").unwrap().canonical(), "aes128-expanded@1");
        assert_eq!(FuncGrant::parse("neg64").unwrap().canonical(), "neg64");
        for n in Circuit::builtin_names() {
            let c = Circuit::builtin(n).unwrap();
            assert_eq!(Circuit::builtin_signature(n), Some((c.name.clone(), c.inputs.clone())), "{n}");
        }
    }
}
