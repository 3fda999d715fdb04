//! The crate's one error type.

/// Errors of hush-replicated. Every way a circuit file, a peer or a client
/// can be wrong maps to one of these; none of them panics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A malformed or inconsistent Bristol Fashion file.
    #[error("circuit {source_name}, line {line}: {msg}")]
    Circuit { source_name: String, line: usize, msg: String },
    /// Reading a circuit or other local file failed.
    #[error("{what}: {err}")]
    File { what: String, err: std::io::Error },
    /// The transport failed during a named protocol step.
    #[error("{step}: {err}")]
    Transport { step: &'static str, err: hush_transport::Error },
    /// A peer or client sent something well-framed but wrong (bad length,
    /// bad tag, inconsistent job), named by the protocol step.
    #[error("{step}: {msg}")]
    Protocol { step: &'static str, msg: String },
    /// Invalid user input (hex strings, widths, options).
    #[error("invalid input: {0}")]
    Input(String),
    /// A local resource problem (OS randomness, spawning processes, sockets).
    #[error("{0}")]
    Local(String),
}

impl Error {
    pub(crate) fn transport(step: &'static str) -> impl FnOnce(hush_transport::Error) -> Error {
        move |err| Error::Transport { step, err }
    }
    pub(crate) fn protocol(step: &'static str, msg: impl Into<String>) -> Error {
        Error::Protocol { step, msg: msg.into() }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
