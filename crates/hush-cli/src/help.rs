//! `hush --help`: the subcommands in groups (inference, 3-party service,
//! training, tools) instead of one flat list, and every help text wrapped
//! at the terminal's width (at most 100 columns; 80 when stdout is not a
//! terminal and `COLUMNS` is unset).

use clap::Command;

/// The groups of `hush --help`, in order. A subcommand in no group (a new
/// one) is listed under "Other commands", so none is ever hidden.
pub(crate) const GROUPS: &[(&str, &[&str])] = &[
    ("Private inference (a client and a model server)", &["demo", "run", "serve", "infer", "dealer", "embed", "plan", "import"]),
    ("Three-party circuit service (Araki et al.)", &["node", "job", "share", "fetch", "circuit"]),
    ("Training (vertical logistic regression)", &["psi", "train", "predict"]),
    ("Tools", &["keygen", "config", "bench", "report", "demo-cot", "attest"]),
];

/// Widest help text, in columns.
const MAX_WIDTH: usize = 100;

/// The width help is wrapped at: the terminal's (stdout), else `COLUMNS`,
/// else 80; never more than [`MAX_WIDTH`] nor less than 40.
pub(crate) fn width() -> usize {
    let w = terminal_size::terminal_size()
        .map(|(w, _)| w.0 as usize)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()))
        .unwrap_or(80);
    w.clamp(40, MAX_WIDTH)
}

/// The first sentence of a help text (what a one-line listing shows).
fn first_sentence(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.find(". ") {
        Some(i) => s[..=i].to_string(),
        None => s,
    }
}

/// `text` wrapped greedily at `width`, every line after the first indented by `indent` spaces.
pub(crate) fn wrap(text: &str, first_col: usize, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut col = first_col;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if col > indent && col + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        } else if col > first_col || (col > indent && !out.is_empty()) {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
    }
    out
}

/// The grouped listing of `cmd`'s subcommands, wrapped at `width`.
pub(crate) fn grouped_subcommands(cmd: &Command, width: usize) -> String {
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    let name_w = subs.iter().map(|s| s.get_name().len()).max().unwrap_or(0);
    let indent = 2 + name_w + 2;
    let line = |s: &Command| {
        let about = s.get_about().map(|a| first_sentence(&a.to_string())).unwrap_or_default();
        format!("  {:<name_w$}  {}\n", s.get_name(), wrap(&about, indent, indent, width))
    };
    let mut out = String::new();
    let mut listed: Vec<&str> = Vec::new();
    for (title, names) in GROUPS {
        let members: Vec<&&Command> = names.iter().filter_map(|n| subs.iter().find(|s| s.get_name() == *n)).collect();
        if members.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n"));
        for s in members {
            out.push_str(&line(s));
            listed.push(s.get_name());
        }
        out.push('\n');
    }
    let rest: Vec<&&Command> = subs.iter().filter(|s| !listed.contains(&s.get_name()) && s.get_name() != "help").collect();
    if !rest.is_empty() {
        out.push_str("Other commands:\n");
        for s in rest {
            out.push_str(&line(s));
        }
        out.push('\n');
    }
    out
}

/// `cmd` (the top-level `hush` command) with help wrapped at the terminal
/// width and the top-level help listing the subcommands in groups.
pub(crate) fn grouped(cmd: Command) -> Command {
    let width = width();
    let cmd = cmd.term_width(width);
    // clap's template reads `{tag}`: keep braces of help texts out of it
    let groups = grouped_subcommands(&cmd, width).replace('{', "(").replace('}', ")");
    cmd.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Options:\n{{options}}{{after-help}}"
    ))
}
