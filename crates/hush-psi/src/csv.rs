//! A small CSV reader for ID files (RFC 4180: comma separated, fields may be
//! double-quoted with `""` for a quote, `\n` or `\r\n` line ends; a quoted
//! field may not contain a line break). The first record is the header.
//! Records keep their raw text so that an aligned file reproduces each row
//! byte for byte.

use crate::{Error, Result};
use std::path::Path;

/// Largest CSV file read (checked before reading).
pub const MAX_FILE: u64 = 8 << 30;

/// A parsed CSV file.
#[derive(Clone, Debug)]
pub struct Table {
    /// The header's raw line and its field names.
    pub header_line: String,
    pub columns: Vec<String>,
    /// Each record's raw line (without the line end) and its fields.
    pub lines: Vec<String>,
    pub fields: Vec<Vec<String>>,
    /// 1-based line number of each record in the file.
    pub line_no: Vec<usize>,
}

fn split_record(line: &str, name: &str, ln: usize) -> Result<Vec<String>> {
    let bad = |m: &str| Error::Input(format!("{name}:{ln}: {m}"));
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut started = true; // at the start of a field
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                    match chars.peek() {
                        None | Some(',') => {}
                        Some(_) => return Err(bad("text after a closing quote")),
                    }
                }
            } else {
                cur.push(c);
            }
            continue;
        }
        match c {
            ',' => {
                out.push(std::mem::take(&mut cur));
                started = true;
                continue;
            }
            '"' if started && cur.trim().is_empty() => {
                cur.clear();
                quoted = true;
            }
            '"' => return Err(bad("a quote inside an unquoted field")),
            _ => cur.push(c),
        }
        started = false;
    }
    if quoted {
        return Err(bad("unterminated quoted field (line breaks inside fields are not supported)"));
    }
    out.push(cur);
    Ok(out)
}

impl Table {
    /// Parses CSV text; every record must have as many fields as the header.
    pub fn parse(text: &str, name: &str) -> Result<Table> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut it = text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
        let (hl, header_line) = loop {
            match it.next() {
                Some((_, l)) if l.trim().is_empty() => continue,
                Some(x) => break x,
                None => return Err(Error::Input(format!("{name}: empty file (no header)"))),
            }
        };
        let columns: Vec<String> = split_record(header_line, name, hl)?.into_iter().map(|s| s.trim().to_string()).collect();
        let mut t = Table { header_line: header_line.to_string(), columns, lines: Vec::new(), fields: Vec::new(), line_no: Vec::new() };
        for (ln, l) in it {
            if l.trim().is_empty() {
                continue;
            }
            let f = split_record(l, name, ln)?;
            if f.len() != t.columns.len() {
                return Err(Error::Input(format!("{name}:{ln}: {} fields, the header has {}", f.len(), t.columns.len())));
            }
            t.lines.push(l.to_string());
            t.fields.push(f);
            t.line_no.push(ln);
        }
        Ok(t)
    }

    /// Reads a CSV file (size checked first).
    pub fn load(path: &Path) -> Result<Table> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::Input(format!("{name}: {e}")))?;
        if meta.len() > MAX_FILE {
            return Err(Error::Input(format!("{name}: {} bytes exceeds the limit of {MAX_FILE}", meta.len())));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::Input(format!("{name}: {e}")))?;
        Self::parse(&text, &name)
    }

    /// Index of a named column.
    pub fn column(&self, col: &str, name: &str) -> Result<usize> {
        self.columns.iter().position(|c| c == col).ok_or_else(|| {
            Error::Input(format!("{name}: no column {col:?} (the header has: {})", self.columns.join(", ")))
        })
    }

    /// The IDs of a column (surrounding spaces trimmed), refusing empty and
    /// duplicate IDs with their line numbers.
    pub fn ids(&self, col: &str, name: &str) -> Result<Vec<String>> {
        let c = self.column(col, name)?;
        let ids: Vec<String> = self.fields.iter().map(|f| f[c].trim().to_string()).collect();
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() {
                return Err(Error::Input(format!("{name}:{}: empty ID in column {col:?}", self.line_no[i])));
            }
        }
        crate::check_distinct(&ids).map_err(|e| match e {
            Error::DuplicateId { id, first, second } => Error::Input(format!(
                "{name}: duplicate ID {id:?} in column {col:?} (lines {} and {}); IDs must be unique",
                self.line_no[first], self.line_no[second]
            )),
            e => e,
        })?;
        Ok(ids)
    }

    /// The header and the given rows, in that order, as CSV text.
    pub fn select(&self, rows: &[usize]) -> String {
        let mut s = String::with_capacity(self.header_line.len() + 1 + rows.iter().map(|&r| self.lines[r].len() + 1).sum::<usize>());
        s.push_str(&self.header_line);
        s.push('\n');
        for &r in rows {
            s.push_str(&self.lines[r]);
            s.push('\n');
        }
        s
    }
}

/// Writes a file atomically (a temporary file beside it, then a rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp{}", path.file_name().and_then(|f| f.to_str()).unwrap_or("out"), std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| Error::Input(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Input(format!("{}: {e}", path.display()))
    })
}
