//! Where the module runs, and what crossing its boundary costs.
//!
//! Every [`TrustedModule::call`] is one *boundary crossing* (an ECALL in SGX
//! terms: request in, response out); [`ModuleStats`] counts crossings and the
//! encoded bytes each way. Both backends move encoded bytes, so the codec is
//! exercised and the byte counts are the same in tests and deployments.

use crate::module::{Module, Request, Response};
use crate::{Error, Result, SIMULATED_NOTE};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Largest module message accepted (checked before allocating).
pub const MAX_MODULE_FRAME: usize = 1 << 28;

/// Boundary-crossing accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    pub crossings: u64,
    pub bytes_to_module: u64,
    pub bytes_from_module: u64,
}

impl std::ops::Sub for ModuleStats {
    type Output = ModuleStats;
    fn sub(self, o: ModuleStats) -> ModuleStats {
        ModuleStats {
            crossings: self.crossings - o.crossings,
            bytes_to_module: self.bytes_to_module - o.bytes_to_module,
            bytes_from_module: self.bytes_from_module - o.bytes_from_module,
        }
    }
}

/// A handle on a trusted module, whatever its backend.
pub trait TrustedModule: Send {
    /// One boundary crossing. A [`Response::Error`] from the module is
    /// returned as [`Error::Refused`].
    fn call(&mut self, req: &Request) -> Result<Response>;
    fn stats(&self) -> ModuleStats;
    /// A [`Request::Deal`] whose share the module writes straight into
    /// `sink`, a host structure of a type the dealing kind fills (see
    /// `hush_deal::Description::deal_into`), with no bytes across the
    /// boundary: `Some(b)` when done (b: the bytes the share would have
    /// taken), `None` when this backend or kind cannot (the default: a
    /// module in another process has no access to the host's memory) —
    /// then the host sends the request and decodes the bytes. Counted as
    /// one crossing when done.
    fn deal_into(&mut self, req: &crate::deal::DealRequest, sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
        let _ = (req, sink);
        Ok(None)
    }
    /// Backend and attestation, e.g. "in-process module, attestation simulated — gives no hardware protection".
    fn describe(&self) -> String;
}

fn check(resp: Response) -> Result<Response> {
    if let Response::Error(e) = &resp {
        return Err(Error::Refused(e.clone()));
    }
    Ok(resp)
}

/// The module in this process (tests, single-binary runs). The boundary is
/// only an API boundary here.
pub struct InProcessModule {
    module: Module,
    stats: ModuleStats,
}

impl InProcessModule {
    pub fn new(module: Module) -> Self {
        InProcessModule { module, stats: ModuleStats::default() }
    }
}

impl TrustedModule for InProcessModule {
    fn call(&mut self, req: &Request) -> Result<Response> {
        let q = req.encode();
        self.stats.crossings += 1;
        self.stats.bytes_to_module += q.len() as u64;
        // The request crosses encoded, as over a pipe. A dealt share (the
        // bulk of what a module releases) is handed back as the buffer the
        // dealing wrote, counted at its encoded size (5-byte head): its
        // encoding would be a copy and its decoding a second one
        // (`Response::decode_owned` drains the head), ~10 % of an FSS
        // dealing (issue 35). Every other response crosses encoded.
        let resp = match Request::decode(&q) {
            Ok(r) => self.module.handle(&r).unwrap_or_else(|e| Response::Error(e.to_string())),
            Err(e) => Response::Error(e.to_string()),
        };
        if let Response::Dealt(b) = &resp {
            self.stats.bytes_from_module += 5 + b.len() as u64;
            return check(resp);
        }
        let r = resp.encode();
        drop(resp);
        self.stats.bytes_from_module += r.len() as u64;
        check(Response::decode_owned(r)?)
    }
    fn stats(&self) -> ModuleStats {
        self.stats
    }
    /// The direct path (issue 35): the module and the host share this
    /// process, so the share is built in the host's evaluation layout —
    /// no encoding, no decoding, no buffer of key bytes. The request is
    /// still encoded and decoded as over a pipe (it is small and untrusted
    /// input to the module); the share is exactly this party's, as on the
    /// byte path (`hush_tee::deal::handle_into`).
    fn deal_into(&mut self, req: &crate::deal::DealRequest, sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
        let q = Request::Deal(req.clone()).encode();
        let Request::Deal(req) = Request::decode(&q)? else {
            return Err(Error::Malformed("dealing request changed in encoding".into()));
        };
        let r = self.module.deal_into(&req, sink)?;
        if let Some(b) = r {
            self.stats.crossings += 1;
            self.stats.bytes_to_module += q.len() as u64;
            self.stats.bytes_from_module += 5 + b as u64;
        }
        Ok(r)
    }
    fn describe(&self) -> String {
        format!("in-process module, attestation {SIMULATED_NOTE}")
    }
}

/// The module as a child process (`hush-tee-module`) over a pipe:
/// frames are `u32 little-endian length ‖ body` in both directions.
pub struct OutOfProcessModule {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stats: ModuleStats,
}

/// Where the module binary is: `$HUSH_TEE_MODULE`, else next to the current
/// executable (or its parent directory, for test binaries in `deps/`).
pub fn module_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HUSH_TEE_MODULE") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| Error::Process(format!("current executable: {e}")))?;
    let mut dir = exe.parent().map(|p| p.to_path_buf());
    for _ in 0..2 {
        if let Some(d) = dir {
            let c = d.join(format!("hush-tee-module{}", std::env::consts::EXE_SUFFIX));
            if c.is_file() {
                return Ok(c);
            }
            dir = d.parent().map(|p| p.to_path_buf());
        }
    }
    Err(Error::Process("hush-tee-module binary not found (set HUSH_TEE_MODULE)".into()))
}

impl OutOfProcessModule {
    /// Spawns the module binary found by [`module_binary`].
    pub fn spawn() -> Result<Self> {
        Self::spawn_path(&module_binary()?)
    }

    /// **INSECURE, tests only**: the module binary started with
    /// `--insecure-test-seed`, so that it honours
    /// [`Request::InsecureTestSeed`].
    pub fn spawn_insecure_test() -> Result<Self> {
        Self::spawn_with_args(&module_binary()?, &["--insecure-test-seed"])
    }

    pub fn spawn_path(path: &std::path::Path) -> Result<Self> {
        Self::spawn_with_args(path, &[])
    }

    fn spawn_with_args(path: &std::path::Path, args: &[&str]) -> Result<Self> {
        let mut child = Command::new(path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::Process(format!("spawning {}: {e}", path.display())))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| Error::Process("no stdout pipe".into()))?;
        Ok(OutOfProcessModule { child, stdin, stdout, stats: ModuleStats::default() })
    }
}

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    w.write_all(&(body.len() as u32).to_le_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// Reads one frame (None on a clean end of stream); the length is checked
/// before allocating.
pub fn read_frame(r: &mut impl Read) -> Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::Process(format!("reading frame: {e}"))),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_MODULE_FRAME {
        return Err(Error::Malformed(format!("module frame of {n} bytes exceeds {MAX_MODULE_FRAME}")));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(|e| Error::Process(format!("reading frame body: {e}")))?;
    Ok(Some(body))
}

impl TrustedModule for OutOfProcessModule {
    fn call(&mut self, req: &Request) -> Result<Response> {
        let q = req.encode();
        let stdin = self.stdin.as_mut().ok_or_else(|| Error::Process("module pipe closed".into()))?;
        write_frame(stdin, &q).map_err(|e| Error::Process(format!("writing to module: {e}")))?;
        let r = read_frame(&mut self.stdout)?.ok_or_else(|| Error::Process("module exited".into()))?;
        self.stats.crossings += 1;
        self.stats.bytes_to_module += 4 + q.len() as u64;
        self.stats.bytes_from_module += 4 + r.len() as u64;
        check(Response::decode_owned(r)?)
    }
    fn stats(&self) -> ModuleStats {
        self.stats
    }
    fn describe(&self) -> String {
        format!("out-of-process module (pid {}), attestation {SIMULATED_NOTE}", self.child.id())
    }
}

impl Drop for OutOfProcessModule {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the module erases its state and exits
        let _ = self.child.wait();
    }
}
