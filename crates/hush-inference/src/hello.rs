//! The settings both parties of a session must share, checked at the hello
//! (see the session protocol in [`crate::runtime`]).
//!
//! The trust mode must be the same on both sides (refused by the server,
//! naming both). The nonlinear **family** is negotiated visibly: a party
//! that gave `--proto auto` (the default) takes its peer's; when both
//! named one ([`Expect::proto`]) and they differ, the server refuses,
//! naming both. The ring and fraction bits and the chunk are the
//! server's; a client that names them (`hush infer --bits/--frac/--chunk`,
//! [`Expect`]) refuses a server with others, naming both, and so it does
//! for the **model digest** ([`architecture_digest`], printed by `hush
//! serve`) with `--model-digest`.

use crate::runtime::Options;
use crate::{Error, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a party insists on; the rest it takes from its peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// The family (`Options::proto`) was given explicitly, not `auto`.
    pub proto: bool,
    /// Client: the ring bits it requires of the server.
    pub bits: Option<u32>,
    /// Client: the fraction bits it requires of the server.
    pub frac: Option<u32>,
    /// Client: the chunk it requires of the server.
    pub chunk: Option<usize>,
    /// Client: the model it requires: `sha256:<hex>` of the public architecture.
    pub model_digest: Option<String>,
    /// Client (`--plan auto`): runs the per-layer family plan the server
    /// chose, whatever it is (a client without it expects the preset's one
    /// family, or its own `Options::family_plan`, and is refused otherwise).
    pub any_family_plan: bool,
}

/// The digest of a model's public architecture (its `.hushm` JSON header),
/// `sha256:<64 hex>`: what a client can pin with `--model-digest`. It names
/// the architecture and the file's layout, not the weights (which the
/// client never sees).
pub fn architecture_digest(header_json: &str) -> String {
    let d = Sha256::digest(header_json.as_bytes());
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Server side: the session's family from the client's hello and the
/// server's options, or the refusal naming both.
pub fn negotiate_family(hello: &Value, opts: &Options) -> std::result::Result<String, String> {
    let ours = opts.proto.as_str();
    let Some(theirs) = hello.get("proto").and_then(Value::as_str) else { return Ok(ours.to_string()) };
    if theirs == ours {
        return Ok(ours.to_string());
    }
    if !opts.mode.families().contains(&theirs) {
        return Err(format!(
            "protocol family '{theirs}' is not offered (this server runs --mode {} with {})",
            opts.mode.name(),
            opts.mode.families().join(", ")
        ));
    }
    // a client that does not say is one of before this field: it named its family
    let their_explicit = hello.get("proto_explicit").and_then(Value::as_bool).unwrap_or(true);
    match (opts.expect.proto, their_explicit) {
        (true, true) => Err(format!(
            "protocol family mismatch: the client asks for --proto {theirs}, this server runs --proto {ours} \
             (both parties must use the same family, or one of them --proto auto)"
        )),
        (true, false) => Ok(ours.to_string()),
        (false, _) => Ok(theirs.to_string()),
    }
}

/// Client side: checks the server's hello reply against what this client
/// insists on ([`Expect`]); the refusal names both settings.
pub fn check_reply(opts: &Options, reply: &Value) -> Result<()> {
    let e = &opts.expect;
    let proto = reply.get("proto").and_then(Value::as_str).unwrap_or("");
    if e.proto && proto != opts.proto {
        return Err(Error::Peer(format!("protocol family mismatch: this client runs --proto {}, the server chose --proto {proto}", opts.proto)));
    }
    let num = |k: &str| reply.get(k).and_then(Value::as_u64);
    let checks: [(&str, &str, Option<u64>); 3] =
        [("ring bits", "bits", e.bits.map(u64::from)), ("fraction bits", "frac", e.frac.map(u64::from)), ("chunk", "chunk", e.chunk.map(|c| c as u64))];
    for (what, flag, want) in checks {
        if let Some(w) = want {
            let got = num(flag);
            if got != Some(w) {
                let got = got.map(|g| g.to_string()).unwrap_or_else(|| "none".into());
                return Err(Error::Peer(format!("{what} mismatch: this client expects --{flag} {w}, the server runs --{flag} {got}")));
            }
        }
    }
    if let Some(want) = &e.model_digest {
        let got = reply.get("architecture").and_then(Value::as_str).map(architecture_digest).unwrap_or_default();
        if !got.eq_ignore_ascii_case(want.trim()) {
            return Err(Error::Peer(format!("model digest mismatch: this client expects --model-digest {want}, the server's model is {got}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(proto: &str, explicit: bool) -> Options {
        Options { proto: proto.into(), expect: Expect { proto: explicit, ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn family_negotiation() {
        let hello = |p: &str, e: bool| json!({"proto": p, "proto_explicit": e});
        // both named, different: refused naming both
        let e = negotiate_family(&hello("tami", true), &opts("fss", true)).unwrap_err();
        assert!(e.contains("--proto tami") && e.contains("--proto fss"), "{e}");
        // one side auto: the other side's family
        assert_eq!(negotiate_family(&hello("fss", false), &opts("tami", true)).unwrap(), "tami");
        assert_eq!(negotiate_family(&hello("tami", true), &opts("fss", false)).unwrap(), "tami");
        assert_eq!(negotiate_family(&hello("fss", true), &opts("fss", true)).unwrap(), "fss");
        // a family the mode does not run
        assert!(negotiate_family(&hello("cf2", true), &opts("fss", false)).unwrap_err().contains("not offered"));
    }

    #[test]
    fn client_refuses_other_settings_naming_both() {
        let arch = "{\"x\":1}";
        let reply = json!({"proto": "fss", "bits": 37, "frac": 12, "chunk": 65536, "architecture": arch});
        let mut o = opts("fss", true);
        check_reply(&o, &reply).unwrap();
        o.expect.bits = Some(40);
        let e = check_reply(&o, &reply).unwrap_err().to_string();
        assert!(e.contains("ring bits mismatch") && e.contains("--bits 40") && e.contains("--bits 37"), "{e}");
        o.expect.bits = Some(37);
        o.expect.frac = Some(16);
        assert!(check_reply(&o, &reply).unwrap_err().to_string().contains("--frac 16, the server runs --frac 12"));
        o.expect.frac = None;
        o.expect.chunk = Some(1000);
        assert!(check_reply(&o, &reply).unwrap_err().to_string().contains("chunk mismatch"));
        o.expect.chunk = None;
        o.expect.model_digest = Some(architecture_digest(arch));
        check_reply(&o, &reply).unwrap();
        o.expect.model_digest = Some(architecture_digest("other"));
        let e = check_reply(&o, &reply).unwrap_err().to_string();
        assert!(e.contains("model digest mismatch") && e.contains(&architecture_digest(arch)), "{e}");
        let o = opts("tami", true);
        assert!(check_reply(&o, &reply).unwrap_err().to_string().contains("this client runs --proto tami, the server chose --proto fss"));
        // auto: takes the server's
        check_reply(&opts("tami", false), &reply).unwrap();
    }
}
