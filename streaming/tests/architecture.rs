//! Structure rules of the `streaming` crate, checked on its source text.
//!
//! Run with `cargo test -p streaming --test architecture`. Every test lists all its
//! violations (file, line, what) in its failure message.
//!
//! 1. **Layers** (`layer_rule`): an edge between two top-level modules must be allowed by
//!    [`ALLOWED`]. Bottom to top:
//!    - `operator_id` and `sealed`: leaves every module may use (operator ids name
//!      operators in errors and state; `sealed` holds the private supertrait that seals the
//!      plan and engine traits);
//!    - `error`: over `operator_id` only. Its doc links to `crate::ops`,
//!      `crate::mq` and `crate::redis` are comments, not dependencies, and its
//!      `redis::RedisError` is the external `redis` crate, not the `redis` module (a path
//!      counts as a module of this crate only when it starts with `crate`, `$crate`, `self`,
//!      `super` or a name declared in scope);
//!    - `options`: the options tables' macro and the single-option checks, over `error`
//!      (feature `redis`: the queue's and the Redis engine's options use it);
//!    - `time`, `mq`: leaves over `error` (crate-root names such as `crate::Error` and
//!      `crate::BoxError` resolve to `error`), `mq` also over `options`;
//!    - `api` → `time`; `ops` → `api`, `time`; `dataflow` → `ops`, `api`, `time`;
//!    - `memory` and `redis`: the two engines, over everything below (`dataflow`, `ops`,
//!      `api`, `time`, `mq`; `redis` also `options`), never each other;
//!    - `dsl` (the `pipeline!` expansion helpers): `dataflow`, `api`, `ops`, `time`, and —
//!      **exception** — `redis` and `mq` for the Redis source helper of the expansion;
//!      nothing but the crate root may use `dsl`;
//!    - the crate root (`lib.rs`) may name anything: it declares the modules and re-exports
//!      their public items; anyone may name what `lib.rs` itself defines (a name it only
//!      re-exports counts as the module defining it: `crate::MemoryEnv` is `memory`).
//!
//!    A new top-level module must be added to [`ALLOWED`]: until then all its edges fail.
//!
//!    Inside the Redis engine, its modules (`redis/<module>`: `config`, `metrics`,
//!    `state`, `outbox`, `sinks`, `two_phase`, `job`, `partition`, `subtask`, `env`) are
//!    layered the same way (`redis_layer_rule`, [`REDIS_ALLOWED`]): each lists only
//!    modules before it, so they form no cycle; the engine's root (`redis/mod.rs`) may
//!    be used by all.
//! 2. **No cycles** (`no_module_cycle`, `no_file_cycle`): the dependency graph between
//!    top-level modules and between files is acyclic. Every cycle is printed as
//!    `a → b → … → a`, each edge with the place that creates it.
//! 3. **Sizes** (`file_sizes`, `function_sizes`): no file over [`MAX_FILE_LINES`] lines, no
//!    function over [`MAX_FN_LINES`] lines (from the line of `fn name` to its closing
//!    brace; `const`/`static` tables are not functions; test functions count too).
//!
//! How the dependency graph is built (file = module):
//! - edges come from `use` declarations (absolute `crate::`/`$crate::`, relative `super::`,
//!   `self::` and child-module paths, grouped trees `use a::{b, c::d}`, renames, globs) and
//!   from paths written in code (`crate::x::Y`, `super::m::f(..)`, `m::f` after
//!   `use super::m`); comments, doc comments (so doc links), strings and chars are removed by
//!   the tokenizer first; `mod x;` declarations are not edges;
//! - a name imported through a module that re-exports it (`pub use child::Name`) counts as
//!   the file that defines it; a name defined in `mod.rs` itself counts as `mod.rs`;
//! - a `pub`/`pub(crate)`/`pub(super)` re-export of the module's own descendants is a
//!   pass-through, not an edge of the re-exporting file, unless that file's own code uses the
//!   name; a re-export of anything outside the module's subtree is an edge (the module's API
//!   names the other module);
//! - importing a module itself (`use super::runner::{self, ..}`) is not an edge; the paths
//!   through it (`runner::spawn(..)`) are;
//! - a glob (`use super::stages::*`) is an edge to each file defining a name the importing
//!   code uses;
//! - **exception**: `#[cfg(test)]` items (unit-test modules) are left out of the graph: they
//!   are not part of the library the layers describe.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Longest allowed source file, in lines.
const MAX_FILE_LINES: usize = 600;
/// Longest allowed function, in lines (from `fn name` to its closing brace).
const MAX_FN_LINES: usize = 80;
/// Most cycles printed per graph; a last line says when more were left out.
const MAX_CYCLES_SHOWN: usize = 200;

/// The crate root's node name in the module graph.
const ROOT: &str = "crate";

/// Which top-level modules each top-level module may use (besides itself). See the module
/// documentation for the reasons.
const ALLOWED: &[(&str, &[&str])] = &[
    // The foundation every layer may name: operator ids (errors name operators by them)
    // and the private supertrait that seals the plan and engine traits.
    ("operator_id", &[]),
    ("sealed", &[]),
    ("error", &["operator_id"]),
    // The options tables' macro (one declaration per options struct).
    ("options", &["error"]),
    ("time", &["error", "operator_id", "sealed"]),
    ("mq", &["options", "error", "operator_id", "sealed"]),
    ("api", &["time", "error", "operator_id", "sealed"]),
    ("ops", &["api", "time", "error", "operator_id", "sealed"]),
    (
        "dataflow",
        &["ops", "api", "time", "error", "operator_id", "sealed"],
    ),
    (
        "memory",
        &[
            "dataflow",
            "ops",
            "api",
            "time",
            "mq",
            "error",
            "operator_id",
            "sealed",
        ],
    ),
    (
        "redis",
        &[
            "dataflow",
            "ops",
            "api",
            "time",
            "mq",
            "options",
            "error",
            "operator_id",
            "sealed",
        ],
    ),
    // Fragments run on every engine, so they name every engine's runtime.
    (
        "fragment",
        &[
            "dataflow",
            "memory",
            "redis",
            "ops",
            "api",
            "time",
            "error",
            "operator_id",
            "sealed",
        ],
    ),
    // The test driver runs fragments on the memory engine's operators.
    (
        "testing",
        &[
            "fragment",
            "dataflow",
            "memory",
            "ops",
            "api",
            "time",
            "mq",
            "error",
            "operator_id",
            "sealed",
        ],
    ),
    // Exception: `redis` and `mq` for the Redis source helper of the `pipeline!` expansion.
    (
        "dsl",
        &[
            "dataflow",
            "api",
            "ops",
            "time",
            "redis",
            "mq",
            "error",
            "operator_id",
            "sealed",
        ],
    ),
];

/// Which modules of the Redis engine (`redis/<module>`) each may use besides itself and the
/// engine's root (`redis/mod.rs`: it declares them, re-exports their public items and holds
/// the options types). Bottom to top; see `redis_layer_rule`.
const REDIS_ALLOWED: &[(&str, &[&str])] = &[
    // Options, metric handles, keyed state and its key layout.
    ("config", &[]),
    ("metrics", &["config"]),
    ("state", &["config", "metrics"]),
    // Sinks that commit with a batch (and job-to-job topics over the outbox), sinks outside
    // Redis.
    ("outbox", &[]),
    ("sinks", &["outbox", "state", "config", "metrics"]),
    ("two_phase", &["sinks", "state", "config"]),
    // The running job: its client, what its subtasks share, its background tasks
    // (registry, checkpoints and leader, topic forwarders).
    ("job", &["sinks", "outbox", "state", "config", "metrics"]),
    // A partition a subtask holds and its steps, over everything below.
    (
        "partition",
        &[
            "job",
            "two_phase",
            "sinks",
            "outbox",
            "state",
            "config",
            "metrics",
        ],
    ),
    (
        "subtask",
        &["partition", "job", "sinks", "state", "config", "metrics"],
    ),
    (
        "env",
        &[
            "subtask",
            "partition",
            "job",
            "two_phase",
            "sinks",
            "outbox",
            "state",
            "config",
            "metrics",
        ],
    ),
];

// ---------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------

/// A token of Rust source with comments, strings and chars removed (literals become `Lit`).
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// An identifier or keyword; `$crate` is kept as one identifier.
    Ident(String),
    /// `::`
    PathSep,
    /// Any other single punctuation character.
    Punct(char),
    /// A string, char or number literal.
    Lit,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

impl Token {
    fn new(tok: Tok, line: usize) -> Token {
        Token { tok, line }
    }
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Splits `src` into tokens, dropping whitespace, comments (line, nested block, doc),
/// string literals (plain, byte, C, raw with any number of `#`), chars and lifetimes.
fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            out.push(Token::new(Tok::Lit, line));
            i = skip_string(&c, i, &mut line);
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                // An escaped char: '\n', '\'', '\u{1F600}'.
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(Token::new(Tok::Lit, line));
            } else if at(i + 2) == '\'' {
                i += 3;
                out.push(Token::new(Tok::Lit, line));
            } else {
                // A lifetime or a label.
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if is_ident_start(ch) {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let next = at(i);
            let raw_string_follows = || {
                let mut j = i;
                while at(j) == '#' {
                    j += 1;
                }
                at(j) == '"'
            };
            if matches!(word.as_str(), "r" | "br" | "cr") && raw_string_follows() {
                out.push(Token::new(Tok::Lit, line));
                i = skip_raw_string(&c, i, &mut line);
            } else if matches!(word.as_str(), "b" | "c") && next == '"' {
                out.push(Token::new(Tok::Lit, line));
                i = skip_string(&c, i, &mut line);
            } else if word == "b" && next == '\'' {
                // A byte char: b'a', b'\n'.
                i += if at(i + 1) == '\\' { 3 } else { 2 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(Token::new(Tok::Lit, line));
            } else if word == "r" && next == '#' && is_ident_start(at(i + 1)) {
                // A raw identifier: r#type.
                let start = i + 1;
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
                let word = c[start..i].iter().collect();
                out.push(Token::new(Tok::Ident(word), line));
            } else {
                out.push(Token::new(Tok::Ident(word), line));
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
                if at(i) == '.' && at(i + 1).is_ascii_digit() {
                    i += 1;
                }
            }
            out.push(Token::new(Tok::Lit, line));
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token::new(Tok::PathSep, line));
            i += 2;
        } else if ch == '$' && is_ident_start(at(i + 1)) {
            let start = i;
            i += 1;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            let word = c[start..i].iter().collect();
            out.push(Token::new(Tok::Ident(word), line));
        } else {
            out.push(Token::new(Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Skips a `"…"` string whose opening quote is at or after `i`; returns the index after it.
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while c[i] != '"' {
        i += 1;
    }
    i += 1;
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' {
            i += 1;
        }
        if c.get(i) == Some(&'\n') {
            *line += 1;
        }
        i += 1;
    }
    i + 1
}

/// Skips a raw string `#…#"…"#…#` starting at `i` (just after the `r`).
fn skip_raw_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while c[i] == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if c[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token {
            tok: Tok::Ident(s), ..
        }) => Some(s),
        _ => None,
    }
}

fn is_path_sep(t: Option<&Token>) -> bool {
    matches!(
        t,
        Some(Token {
            tok: Tok::PathSep,
            ..
        })
    )
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(c), .. }) if *c == p)
}

/// The index just after the item starting at `i`: its `;` or its `{…}` body, whichever
/// comes first outside parentheses and brackets.
fn item_end(t: &[Token], mut i: usize) -> usize {
    let mut nest = 0i32;
    while i < t.len() {
        match t[i].tok {
            Tok::Punct('(' | '[') => nest += 1,
            Tok::Punct(')' | ']') => nest -= 1,
            Tok::Punct(';') if nest == 0 => return i + 1,
            Tok::Punct('{') if nest == 0 => return matching_brace(t, i) + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index of the `}` matching the `{` at `open` (or the last token).
fn matching_brace(t: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (k, token) in t.iter().enumerate().skip(open) {
        match token.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len() - 1
}

/// The index after the attribute `#[…]` or `#![…]` starting at `i`, if one starts there.
fn attribute_end(t: &[Token], i: usize) -> Option<usize> {
    if !is_punct(t.get(i), '#') {
        return None;
    }
    let open = if is_punct(t.get(i + 1), '!') {
        i + 2
    } else {
        i + 1
    };
    if !is_punct(t.get(open), '[') {
        return None;
    }
    let mut depth = 0;
    for (k, token) in t.iter().enumerate().skip(open) {
        match token.tok {
            Tok::Punct('[') => depth += 1,
            Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Removes every `#[cfg(test)]` item (with its other attributes); returns the kept tokens
/// and the line ranges removed.
fn strip_cfg_test(t: &[Token]) -> (Vec<Token>, Vec<(usize, usize)>) {
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some(end) = attribute_end(t, i) {
            let inner: Vec<&Tok> = t[i..end].iter().map(|x| &x.tok).collect();
            let cfg_test = [
                Tok::Punct('#'),
                Tok::Punct('['),
                Tok::Ident("cfg".into()),
                Tok::Punct('('),
                Tok::Ident("test".into()),
                Tok::Punct(')'),
                Tok::Punct(']'),
            ];
            if inner.len() == cfg_test.len() && inner.iter().zip(&cfg_test).all(|(a, b)| *a == b) {
                let mut j = end;
                while let Some(next) = attribute_end(t, j) {
                    j = next;
                }
                let j = item_end(t, j);
                removed.push((t[i].line, t[j.min(t.len()) - 1].line));
                i = j;
                continue;
            }
        }
        kept.push(t[i].clone());
        i += 1;
    }
    (kept, removed)
}

// ---------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------

/// A function with a body: its name and the lines of `fn name` and of its closing brace.
#[derive(Debug, PartialEq)]
struct FnSpan {
    name: String,
    start: usize,
    end: usize,
}

impl FnSpan {
    fn lines(&self) -> usize {
        self.end - self.start + 1
    }
}

/// Every `fn name … { … }` (nested ones too); declarations without a body and `fn(..)`
/// pointer types are skipped.
fn function_spans(t: &[Token]) -> Vec<FnSpan> {
    let mut spans = Vec::new();
    for i in 0..t.len() {
        if ident(t.get(i)) != Some("fn") {
            continue;
        }
        let Some(name) = ident(t.get(i + 1)) else {
            continue;
        };
        let mut nest = 0i32;
        let mut j = i + 2;
        while j < t.len() {
            match t[j].tok {
                Tok::Punct('(' | '[') => nest += 1,
                Tok::Punct(')' | ']') => nest -= 1,
                Tok::Punct(';') if nest == 0 => break,
                Tok::Punct('{') if nest == 0 => {
                    let close = matching_brace(t, j);
                    spans.push(FnSpan {
                        name: name.to_string(),
                        start: t[i].line,
                        end: t[close].line,
                    });
                    break;
                }
                _ => {}
            }
            j += 1;
        }
    }
    spans
}

// ---------------------------------------------------------------------------------------
// Modules, uses and paths
// ---------------------------------------------------------------------------------------

type ModPath = Vec<String>;

/// What a module scope (a file, or an inline `mod x { … }` in it) declares.
#[derive(Debug, Default)]
struct Module {
    file: String,
    /// Child modules, from `mod x;` and `mod x { … }`.
    children: BTreeSet<String>,
    /// Items defined at module level: fns, types, traits, consts, statics, macros.
    defs: BTreeSet<String>,
    /// Names bound by `use` (the last segment or the `as` name) → the paths they import.
    bindings: BTreeMap<String, Vec<ModPath>>,
    /// Glob imports `use path::*`.
    globs: Vec<ModPath>,
}

/// One imported name or glob of a `use` declaration.
#[derive(Debug)]
struct Use {
    scope: ModPath,
    path: ModPath,
    /// The bound name; `None` for a glob or `as _`.
    binding: Option<String>,
    glob: bool,
    public: bool,
    line: usize,
}

/// A path of two or more segments written in code (`crate::x::Y`, `super::f`, `m::g`).
#[derive(Debug)]
struct CodePath {
    scope: ModPath,
    segs: ModPath,
    line: usize,
}

/// An identifier used in code outside paths' later segments, fields and method names.
#[derive(Debug)]
struct NameUse {
    scope: ModPath,
    name: String,
    line: usize,
}

/// One source file.
#[derive(Debug)]
struct SourceFile {
    /// Path relative to `src`, with `/`.
    rel: String,
    lines: usize,
    fns: Vec<FnSpan>,
    /// Line ranges of `#[cfg(test)]` items.
    test_lines: Vec<(usize, usize)>,
    uses: Vec<Use>,
    paths: Vec<CodePath>,
    names: Vec<NameUse>,
}

/// The module path of a file: `lib.rs` → `[]`, `a/mod.rs` and `a.rs` → `[a]`,
/// `a/b.rs` → `[a, b]`.
fn module_of(rel: &str) -> ModPath {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The top-level module a file belongs to (`ROOT` for `lib.rs`).
fn top_of(rel: &str) -> String {
    module_of(rel)
        .first()
        .cloned()
        .unwrap_or_else(|| ROOT.to_string())
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Parses the `use` tree starting at `j` under `prefix`, pushing `(path, binding, glob)`.
fn parse_use_tree(
    t: &[Token],
    j: &mut usize,
    prefix: ModPath,
    out: &mut Vec<(ModPath, Option<String>, bool)>,
) {
    let mut path = prefix;
    if is_path_sep(t.get(*j)) {
        path.push("::".into());
        *j += 1;
    }
    loop {
        match t.get(*j).map(|x| &x.tok) {
            Some(Tok::Ident(s)) if s != "as" => {
                path.push(s.clone());
                *j += 1;
                if is_path_sep(t.get(*j)) {
                    *j += 1;
                } else {
                    break;
                }
            }
            Some(Tok::Punct('*')) => {
                *j += 1;
                out.push((path, None, true));
                return;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                while *j < t.len() && !is_punct(t.get(*j), '}') {
                    parse_use_tree(t, j, path.clone(), out);
                    if is_punct(t.get(*j), ',') {
                        *j += 1;
                    } else if !is_punct(t.get(*j), '}') {
                        *j += 1; // malformed: do not loop forever
                    }
                }
                *j += 1;
                return;
            }
            _ => break,
        }
    }
    if path.last().map(String::as_str) == Some("self") {
        path.pop();
    }
    let binding = if ident(t.get(*j)) == Some("as") {
        let name = ident(t.get(*j + 1)).map(String::from);
        *j += 2;
        name.filter(|n| n != "_")
    } else {
        path.last().cloned()
    };
    if !path.is_empty() {
        out.push((path, binding, false));
    }
}

/// Whether the `use` keyword at `i` is preceded by `pub` or `pub(…)`.
fn is_public_use(t: &[Token], i: usize) -> bool {
    if i == 0 {
        return false;
    }
    if ident(t.get(i - 1)) == Some("pub") {
        return true;
    }
    if is_punct(t.get(i - 1), ')') {
        let mut k = i - 1;
        while k > 0 && !is_punct(t.get(k), '(') {
            k -= 1;
        }
        return k > 0 && ident(t.get(k - 1)) == Some("pub");
    }
    false
}

/// Everything the crate's source says about its modules.
#[derive(Debug, Default)]
struct Crate {
    files: BTreeMap<String, SourceFile>,
    modules: BTreeMap<ModPath, Module>,
}

/// A path resolved to a module, to the file defining an item, or to something outside the
/// crate (std, a dependency, a prelude name, a local variable).
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Module(ModPath),
    Item(String),
    External,
}

/// How deep re-exports and globs are followed.
const MAX_RESOLVE_DEPTH: usize = 24;

impl Crate {
    /// Parses the files, given as (path relative to `src`, text).
    fn from_sources<S: AsRef<str>>(sources: &[(S, S)]) -> Crate {
        let mut krate = Crate::default();
        for (rel, text) in sources {
            krate.add_file(rel.as_ref(), text.as_ref());
        }
        krate
    }

    /// Reads every `.rs` file under `dir`.
    fn from_dir(dir: &Path) -> Crate {
        let mut sources = Vec::new();
        collect_rs(dir, dir, &mut sources);
        Crate::from_sources(&sources)
    }

    fn add_file(&mut self, rel: &str, text: &str) {
        let all = tokenize(text);
        let fns = function_spans(&all);
        let (t, test_lines) = strip_cfg_test(&all);
        let module = module_of(rel);
        let mut file = SourceFile {
            rel: rel.to_string(),
            lines: text.lines().count(),
            fns,
            test_lines,
            uses: Vec::new(),
            paths: Vec::new(),
            names: Vec::new(),
        };
        self.modules.entry(module.clone()).or_default().file = rel.to_string();
        // The module scopes open at this point, with the brace depth of their bodies.
        let mut stack: Vec<(ModPath, usize)> = vec![(module, 0)];
        let mut depth = 0usize;
        let mut i = 0;
        while i < t.len() {
            let scope = stack.last().expect("the file's scope").0.clone();
            let at_module_level = depth == stack.last().expect("the file's scope").1;
            match &t[i].tok {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth = depth.saturating_sub(1);
                    if stack.len() > 1 && depth < stack.last().expect("a scope").1 {
                        stack.pop();
                    }
                }
                Tok::Ident(kw) if kw == "mod" => {
                    if let Some(name) = ident(t.get(i + 1)) {
                        self.modules
                            .entry(scope.clone())
                            .or_default()
                            .children
                            .insert(name.into());
                        if is_punct(t.get(i + 2), '{') {
                            let mut inner = scope.clone();
                            inner.push(name.into());
                            self.modules.entry(inner.clone()).or_default().file = rel.to_string();
                            depth += 1;
                            stack.push((inner, depth));
                            i += 3;
                            continue;
                        }
                    }
                }
                Tok::Ident(kw) if kw == "use" => {
                    let public = is_public_use(&t, i);
                    let line = t[i].line;
                    let mut j = i + 1;
                    let mut trees = Vec::new();
                    parse_use_tree(&t, &mut j, Vec::new(), &mut trees);
                    let m = self.modules.entry(scope.clone()).or_default();
                    for (path, binding, glob) in trees {
                        if glob {
                            m.globs.push(path.clone());
                        } else if let Some(b) = &binding {
                            m.bindings.entry(b.clone()).or_default().push(path.clone());
                        }
                        file.uses.push(Use {
                            scope: scope.clone(),
                            path,
                            binding,
                            glob,
                            public,
                            line,
                        });
                    }
                    while j < t.len() && !is_punct(t.get(j), ';') {
                        j += 1;
                    }
                    i = j + 1;
                    continue;
                }
                Tok::Ident(kw) if kw == "macro_rules" && is_punct(t.get(i + 1), '!') => {
                    if let Some(name) = ident(t.get(i + 2)) {
                        self.modules
                            .entry(scope.clone())
                            .or_default()
                            .defs
                            .insert(name.into());
                    }
                }
                Tok::Ident(kw) if at_module_level && ITEM_KEYWORDS.contains(&kw.as_str()) => {
                    if let Some(name) = ident(t.get(i + 1)).filter(|n| *n != "_") {
                        self.modules
                            .entry(scope.clone())
                            .or_default()
                            .defs
                            .insert(name.into());
                    }
                }
                Tok::Ident(name) => {
                    let after_sep = is_path_sep(t.get(i.wrapping_sub(1)));
                    let after_dot = i > 0 && is_punct(t.get(i - 1), '.');
                    if !after_sep && !after_dot {
                        let line = t[i].line;
                        file.names.push(NameUse {
                            scope: scope.clone(),
                            name: name.clone(),
                            line,
                        });
                        let mut segs = vec![name.clone()];
                        let mut j = i + 1;
                        while is_path_sep(t.get(j)) {
                            match ident(t.get(j + 1)) {
                                Some(s) => segs.push(s.to_string()),
                                None => break,
                            }
                            j += 2;
                        }
                        if segs.len() > 1 {
                            file.paths.push(CodePath { scope, segs, line });
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.files.insert(rel.to_string(), file);
    }

    /// Resolves `segs`, written in module `scope`.
    fn resolve(&self, scope: &[String], segs: &[String], depth: usize) -> Target {
        if depth > MAX_RESOLVE_DEPTH || segs.is_empty() {
            return Target::External;
        }
        let (mut cur, rest): (ModPath, &[String]) = match segs[0].as_str() {
            "crate" | "$crate" => (Vec::new(), &segs[1..]),
            "self" => (scope.to_vec(), &segs[1..]),
            "super" => {
                let mut m = scope.to_vec();
                let mut k = 0;
                while segs.get(k).map(String::as_str) == Some("super") {
                    m.pop();
                    k += 1;
                }
                (m, &segs[k..])
            }
            "::" => return Target::External,
            first => match self.lookup(scope, first, depth + 1) {
                Some(Target::Module(m)) => (m, &segs[1..]),
                Some(other) => return other,
                None => return Target::External,
            },
        };
        for seg in rest {
            match self.lookup(&cur, seg, depth + 1) {
                Some(Target::Module(m)) => cur = m,
                Some(other) => return other,
                // Not found (an enum variant, a macro-generated item): count the module.
                None => return self.module_file(&cur),
            }
        }
        Target::Module(cur)
    }

    fn module_file(&self, m: &[String]) -> Target {
        match self.modules.get(m) {
            Some(module) if !module.file.is_empty() => Target::Item(module.file.clone()),
            _ => Target::External,
        }
    }

    /// What `name` means inside module `module`; `None` if it is not declared there.
    fn lookup(&self, module: &[String], name: &str, depth: usize) -> Option<Target> {
        if depth > MAX_RESOLVE_DEPTH {
            return None;
        }
        let m = self.modules.get(module)?;
        if m.children.contains(name) {
            let mut child = module.to_vec();
            child.push(name.to_string());
            return Some(Target::Module(child));
        }
        // Before bindings: `pub(crate) use name;` re-exports the `macro_rules! name` defined here.
        if m.defs.contains(name) {
            return Some(Target::Item(m.file.clone()));
        }
        if let Some(paths) = m.bindings.get(name) {
            let targets: Vec<Target> = paths
                .iter()
                .map(|p| self.resolve(module, p, depth + 1))
                .collect();
            let found = targets.iter().find(|t| **t != Target::External);
            return Some(found.cloned().unwrap_or(Target::External));
        }
        for glob in &m.globs {
            if let Target::Module(g) = self.resolve(module, glob, depth + 1) {
                if g.as_slice() != module {
                    if let Some(t) = self
                        .lookup(&g, name, depth + 1)
                        .filter(|t| *t != Target::External)
                    {
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// Every file-level dependency: (from, to) → the places creating it.
    fn edges(&self) -> Graph {
        let mut edges = Graph::new();
        for file in self.files.values() {
            let mut add = |to: &str, line: usize, what: String| {
                if to != file.rel {
                    edges
                        .entry((file.rel.clone(), to.to_string()))
                        .or_default()
                        .push((file.rel.clone(), line, what));
                }
            };
            let used_names: BTreeSet<(&[String], &str)> = file
                .names
                .iter()
                .map(|n| (n.scope.as_slice(), n.name.as_str()))
                .collect();
            for u in &file.uses {
                let Target::Item(to) = self.resolve(&u.scope, &u.path, 0) else {
                    continue;
                };
                let what = format!(
                    "use {}{}",
                    u.path.join("::"),
                    if u.glob { "::*" } else { "" }
                );
                let own_descendant = module_of(&to).starts_with(&u.scope);
                let pass_through = u.public && own_descendant;
                let used = u
                    .binding
                    .as_deref()
                    .is_some_and(|b| used_names.contains(&(u.scope.as_slice(), b)));
                if !pass_through || used {
                    add(&to, u.line, what);
                }
            }
            for p in &file.paths {
                if let Target::Item(to) = self.resolve(&p.scope, &p.segs, 0) {
                    add(&to, p.line, format!("path {}", p.segs.join("::")));
                }
            }
            for n in &file.names {
                let Some(m) = self.modules.get(&n.scope) else {
                    continue;
                };
                if m.globs.is_empty()
                    || m.defs.contains(&n.name)
                    || m.children.contains(&n.name)
                    || m.bindings.contains_key(&n.name)
                {
                    continue;
                }
                for glob in &m.globs {
                    if let Target::Module(g) = self.resolve(&n.scope, glob, 0) {
                        if let Some(Target::Item(to)) = self.lookup(&g, &n.name, 0) {
                            add(
                                &to,
                                n.line,
                                format!("{} via use {}::*", n.name, glob.join("::")),
                            );
                        }
                    }
                }
            }
        }
        edges
    }
}

fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            out.push((rel, text));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Graphs
// ---------------------------------------------------------------------------------------

/// Where an edge comes from: file, line, what (`use …`, `path …`, `Name via use …::*`).
type Place = (String, usize, String);

/// Edges (from, to), each with the places creating it.
type Graph = BTreeMap<(String, String), Vec<Place>>;

/// Every elementary cycle of the graph, each starting at its smallest node, shortest first,
/// at most `limit` of them (plus whether some were left out).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>, limit: usize) -> (Vec<Vec<String>>, bool) {
    let nodes: Vec<&String> = graph
        .keys()
        .chain(graph.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut found = Vec::new();
    let mut truncated = false;
    for start in &nodes {
        let mut path = vec![(*start).clone()];
        let mut on_path = BTreeSet::from([(*start).clone()]);
        cycles_from(
            graph,
            start,
            start,
            &mut path,
            &mut on_path,
            &mut found,
            limit,
            &mut truncated,
        );
    }
    found.sort_by(|a: &Vec<String>, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    (found, truncated)
}

#[allow(clippy::too_many_arguments)]
fn cycles_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    node: &str,
    path: &mut Vec<String>,
    on_path: &mut BTreeSet<String>,
    found: &mut Vec<Vec<String>>,
    limit: usize,
    truncated: &mut bool,
) {
    let Some(next) = graph.get(node) else {
        return;
    };
    for n in next {
        // Only nodes after `start`, so each cycle is found once, from its smallest node.
        if n.as_str() == start {
            if found.len() >= limit {
                *truncated = true;
                return;
            }
            let mut cycle = path.clone();
            cycle.push(start.to_string());
            found.push(cycle);
        } else if n.as_str() > start && !on_path.contains(n) {
            path.push(n.clone());
            on_path.insert(n.clone());
            cycles_from(graph, start, n, path, on_path, found, limit, truncated);
            on_path.remove(n);
            path.pop();
        }
    }
}

/// `what (file:line)` for the first few places creating an edge.
fn evidence(places: &[Place]) -> String {
    let mut s = String::new();
    for (k, (file, line, what)) in places.iter().enumerate() {
        if k == 3 {
            let _ = write!(s, "; +{} more", places.len() - 3);
            break;
        }
        if k > 0 {
            s.push_str("; ");
        }
        let _ = write!(s, "{file}:{line} `{what}`");
    }
    s
}

/// The cycle report of `graph`, whose edges carry their places.
fn cycle_report(graph: &Graph) -> Vec<String> {
    let mut adjacency: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph.keys() {
        adjacency
            .entry(from.clone())
            .or_default()
            .insert(to.clone());
    }
    let (found, truncated) = cycles(&adjacency, MAX_CYCLES_SHOWN);
    let mut report: Vec<String> = found
        .iter()
        .map(|cycle| {
            let mut s = cycle.join(" → ");
            for pair in cycle.windows(2) {
                let places = &graph[&(pair[0].clone(), pair[1].clone())];
                let _ = write!(s, "\n      {} → {}: {}", pair[0], pair[1], evidence(places));
            }
            s
        })
        .collect();
    if truncated {
        report.push(format!(
            "… more cycles not shown (limit {MAX_CYCLES_SHOWN})"
        ));
    }
    report
}

fn file_graph(krate: &Crate) -> Graph {
    krate.edges()
}

fn module_graph(krate: &Crate) -> Graph {
    let mut graph: Graph = BTreeMap::new();
    for ((from, to), places) in file_graph(krate) {
        let (a, b) = (top_of(&from), top_of(&to));
        if a != b {
            graph.entry((a, b)).or_default().extend(places);
        }
    }
    graph
}

fn allowed(from: &str, to: &str) -> bool {
    from == to
        || from == ROOT
        || to == ROOT
        || ALLOWED
            .iter()
            .any(|(m, deps)| *m == from && deps.contains(&to))
}

/// Every edge between top-level modules that [`ALLOWED`] does not list, one line each.
fn layer_violations(krate: &Crate) -> Vec<String> {
    let mut out = Vec::new();
    for ((from, to), places) in file_graph(krate) {
        let (a, b) = (top_of(&from), top_of(&to));
        if allowed(&a, &b) {
            continue;
        }
        for (file, line, what) in places {
            out.push(format!(
                "{file}:{line}: `{a}` must not use `{b}`: `{what}` (→ {to})"
            ));
        }
    }
    out
}

/// The module of the Redis engine a file belongs to (`redis/partition/batch.rs` →
/// `partition`, `redis/metrics.rs` → `metrics`); `None` for the engine's root and for files
/// outside the engine.
fn redis_module_of(rel: &str) -> Option<String> {
    let m = module_of(rel);
    (m.len() >= 2 && m[0] == "redis").then(|| m[1].clone())
}

/// Whether `rel` is a unit-test file (`tests.rs`, `*_tests.rs`): like `#[cfg(test)]`
/// items, not part of the library the layers describe.
fn is_test_file(rel: &str) -> bool {
    rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs")
}

/// Every edge between two modules of the Redis engine that [`REDIS_ALLOWED`] does not list.
fn redis_layer_violations(krate: &Crate) -> Vec<String> {
    let mut out = Vec::new();
    for ((from, to), places) in file_graph(krate) {
        let (Some(a), Some(b)) = (redis_module_of(&from), redis_module_of(&to)) else {
            continue;
        };
        if is_test_file(&from) {
            continue;
        }
        let ok =
            a == b || (REDIS_ALLOWED.iter()).any(|(m, deps)| *m == a && deps.contains(&b.as_str()));
        if ok {
            continue;
        }
        for (file, line, what) in places {
            out.push(format!(
                "{file}:{line}: `redis::{a}` must not use `redis::{b}`: `{what}` (→ {to})"
            ));
        }
    }
    out
}

fn src_crate() -> Crate {
    Crate::from_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn report(title: &str, items: &[String]) -> String {
    let mut s = format!("{} {title}:\n", items.len());
    for item in items {
        let _ = writeln!(s, "  - {item}");
    }
    s
}

// ---------------------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------------------

#[test]
fn layer_rule() {
    let violations = layer_violations(&src_crate());
    assert!(
        violations.is_empty(),
        "{}",
        report("layer violations", &violations)
    );
}

/// The Redis engine's modules are layered too: each uses only those below it in
/// [`REDIS_ALLOWED`] (a new module must be added there).
#[test]
fn redis_layer_rule() {
    let violations = redis_layer_violations(&src_crate());
    assert!(
        violations.is_empty(),
        "{}",
        report("layer violations inside the Redis engine", &violations)
    );
}

/// [`REDIS_ALLOWED`] is bottom to top: a module lists only modules before it.
#[test]
fn the_redis_layers_are_ordered() {
    for (i, (m, deps)) in REDIS_ALLOWED.iter().enumerate() {
        for d in *deps {
            let below = REDIS_ALLOWED[..i].iter().any(|(x, _)| x == d);
            assert!(
                below,
                "`redis::{m}` lists `redis::{d}`, which is not below it"
            );
        }
    }
}

#[test]
fn no_module_cycle() {
    let cycles = cycle_report(&module_graph(&src_crate()));
    assert!(
        cycles.is_empty(),
        "{}",
        report("cycles between top-level modules", &cycles)
    );
}

#[test]
fn no_file_cycle() {
    let cycles = cycle_report(&file_graph(&src_crate()));
    assert!(
        cycles.is_empty(),
        "{}",
        report("cycles between files", &cycles)
    );
}

#[test]
fn file_sizes() {
    let krate = src_crate();
    let mut big: Vec<&SourceFile> = krate
        .files
        .values()
        .filter(|f| f.lines > MAX_FILE_LINES)
        .collect();
    big.sort_by_key(|f| std::cmp::Reverse(f.lines));
    let items: Vec<String> = big
        .iter()
        .map(|f| format!("{}: {} lines", f.rel, f.lines))
        .collect();
    assert!(
        items.is_empty(),
        "{}",
        report(&format!("files over {MAX_FILE_LINES} lines"), &items)
    );
}

#[test]
fn function_sizes() {
    let krate = src_crate();
    let mut long: Vec<(&SourceFile, &FnSpan)> = krate
        .files
        .values()
        .flat_map(|f| f.fns.iter().map(move |s| (f, s)))
        .filter(|(_, s)| s.lines() > MAX_FN_LINES)
        .collect();
    long.sort_by_key(|(_, s)| std::cmp::Reverse(s.lines()));
    let items: Vec<String> = long
        .iter()
        .map(|(f, s)| {
            let test = f
                .test_lines
                .iter()
                .any(|(a, b)| (*a..=*b).contains(&s.start));
            let note = if test { " [test code]" } else { "" };
            format!(
                "{}:{}: fn {}: {} lines{note}",
                f.rel,
                s.start,
                s.name,
                s.lines()
            )
        })
        .collect();
    assert!(
        items.is_empty(),
        "{}",
        report(&format!("functions over {MAX_FN_LINES} lines"), &items)
    );
}

/// Guards against a parser that silently finds nothing. With `STREAMING_PRINT_GRAPH` set
/// it also prints the module and file graphs, each edge with its places:
/// `STREAMING_PRINT_GRAPH=1 cargo test -p streaming --test architecture parser -- --nocapture`.
#[test]
fn the_parser_sees_the_crate() {
    let krate = src_crate();
    if std::env::var_os("STREAMING_PRINT_GRAPH").is_some() {
        for (title, graph) in [
            ("modules", module_graph(&krate)),
            ("files", file_graph(&krate)),
        ] {
            println!("# {title}");
            for ((from, to), places) in &graph {
                println!("{from} → {to}: {}", evidence(places));
            }
        }
    }
    assert!(krate.files.contains_key("lib.rs") && krate.files.contains_key("error/mod.rs"));
    let graph = module_graph(&krate);
    for (from, to) in [
        ("ops", "api"),
        ("dataflow", "ops"),
        ("memory", "dataflow"),
        ("redis", "mq"),
    ] {
        assert!(
            graph.contains_key(&(from.into(), to.into())),
            "no edge {from} → {to} found"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Tests of the helpers, on small in-memory crates
// ---------------------------------------------------------------------------------------

mod helpers {
    use super::*;

    fn edge_set(krate: &Crate) -> BTreeSet<(String, String)> {
        krate.edges().into_keys().collect()
    }

    fn e(a: &str, b: &str) -> (String, String) {
        (a.into(), b.into())
    }

    #[test]
    fn tokenizer_drops_comments_strings_and_chars() {
        let src = r##"
            // crate::a::X in a comment
            /// [`Y`](crate::b::Y) in a doc link
            /* nested /* crate::c::Z */ still a comment */
            fn f() -> &'static str { let _c = '{'; let _q = '\''; let _b = b'}'; r#"{ crate::d "#; "}\"{" }
        "##;
        let idents: Vec<String> = tokenize(src)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(
            idents,
            ["fn", "f", "str", "let", "_c", "let", "_q", "let", "_b"]
        );
        let t = tokenize(src);
        assert_eq!(t.iter().filter(|t| t.tok == Tok::Punct('{')).count(), 1);
        assert_eq!(t.iter().filter(|t| t.tok == Tok::Punct('}')).count(), 1);
        assert_eq!(t[0].line, 5);
    }

    #[test]
    fn function_lengths_count_to_the_matching_brace() {
        let src = "const TABLE: [u8; 3] = [\n1,\n2,\n3];\nfn a() {\n let s = \"}\";\n if true {\n }\n}\ntrait T { fn decl(&self); }\nfn b(f: fn(u8) -> u8) -> [u8; 2] { [f(1), 2] }\n";
        let spans = function_spans(&tokenize(src));
        assert_eq!(
            spans,
            [
                FnSpan {
                    name: "a".into(),
                    start: 5,
                    end: 9
                },
                FnSpan {
                    name: "b".into(),
                    start: 11,
                    end: 11
                }
            ]
        );
        assert_eq!(spans[0].lines(), 5);
    }

    #[test]
    fn grouped_use_resolves_through_reexports() {
        let krate = Crate::from_sources(&[
            ("lib.rs", "pub mod a; pub mod b; pub use a::Thing;"),
            (
                "a/mod.rs",
                "mod x; mod y; pub use x::Thing; pub(crate) use y::*; pub fn here() {}",
            ),
            ("a/x.rs", "pub struct Thing;"),
            ("a/y.rs", "pub struct Other;"),
            (
                "b.rs",
                "use crate::a::{Thing, Other as O, here, self as aa};\nfn f() { aa::x::Thing; }",
            ),
        ]);
        let edges = edge_set(&krate);
        assert!(edges.contains(&e("b.rs", "a/x.rs")), "{edges:?}");
        assert!(edges.contains(&e("b.rs", "a/y.rs")), "{edges:?}");
        assert!(edges.contains(&e("b.rs", "a/mod.rs")), "{edges:?}");
        // Re-exports of descendants are pass-throughs; `mod x;` is not an edge.
        assert!(
            !edges
                .iter()
                .any(|(from, _)| from == "lib.rs" || from == "a/mod.rs"),
            "{edges:?}"
        );
    }

    #[test]
    fn relative_paths_code_paths_and_globs() {
        let krate = Crate::from_sources(&[
            ("lib.rs", "mod m; mod n;"),
            (
                "m/mod.rs",
                "mod p; mod q; mod r; mod s; pub(crate) fn helper() {} pub struct Cfg;",
            ),
            (
                "m/p.rs",
                "use super::q::{self};\nfn f() { q::run(); super::helper(); }",
            ),
            ("m/q.rs", "pub fn run() { let _ = crate::n::N; }"),
            (
                "m/r.rs",
                "use self::inner::I; mod inner { pub struct I; } use super::s::*; fn g(_: Tool) {}",
            ),
            ("m/s.rs", "pub struct Tool; pub struct Unused;"),
            (
                "n.rs",
                "pub struct N; fn f() { let x = super_thing(); std::mem::drop(x); }",
            ),
        ]);
        let edges = edge_set(&krate);
        let expected = BTreeSet::from([
            e("m/p.rs", "m/q.rs"),
            e("m/p.rs", "m/mod.rs"),
            e("m/q.rs", "n.rs"),
            e("m/r.rs", "m/s.rs"),
        ]);
        assert_eq!(edges, expected);
    }

    #[test]
    fn cfg_test_items_and_comments_are_not_edges() {
        let krate = Crate::from_sources(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "//! See [`B`](crate::b::B).\n#[cfg(test)]\nmod tests { use crate::b::B; }\n// crate::b::B"),
            ("b.rs", "pub struct B;"),
        ]);
        assert!(edge_set(&krate).is_empty());
        assert_eq!(krate.files["a.rs"].test_lines, [(2, 3)]);
    }

    #[test]
    fn external_crates_are_not_modules_of_the_same_name() {
        let krate = Crate::from_sources(&[
            ("lib.rs", "pub mod mq; pub mod redis; mod error;"),
            ("error.rs", "pub enum Error { Redis(redis::RedisError) }"),
            (
                "mq/mod.rs",
                "use redis::aio::ConnectionManager; fn f() { redis::cmd(); }",
            ),
            ("redis/mod.rs", "pub struct R; use redis::Value;"),
        ]);
        assert!(edge_set(&krate).is_empty(), "{:?}", edge_set(&krate));
    }

    #[test]
    fn a_cycle_is_found_and_printed_as_a_path() {
        let krate = Crate::from_sources(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::B; pub struct A;"),
            ("b.rs", "pub struct B; fn f() -> crate::c::C { todo!() }"),
            ("c.rs", "pub struct C; use super::a::A;"),
        ]);
        let report = cycle_report(&file_graph(&krate));
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(
            report[0].starts_with("a.rs → b.rs → c.rs → a.rs\n"),
            "{}",
            report[0]
        );
        assert!(
            report[0].contains("b.rs:1 `path crate::c::C`"),
            "{}",
            report[0]
        );
        let modules = cycle_report(&module_graph(&krate));
        assert_eq!(modules.len(), 1);
    }

    #[test]
    fn acyclic_graph_has_no_cycles_and_layers_are_checked() {
        let krate = Crate::from_sources(&[
            (
                "lib.rs",
                "pub mod time; pub mod api; pub mod redis; mod error; pub use error::Error;",
            ),
            ("error.rs", "pub enum Error {}"),
            ("time/mod.rs", "use crate::Error;"),
            (
                "api/mod.rs",
                "use crate::time; fn f() { time::X; crate::redis::R; }",
            ),
            ("redis/mod.rs", "pub struct R; use crate::api::*;"),
        ]);
        assert!(cycle_report(&file_graph(&krate)).is_empty());
        let violations = layer_violations(&krate);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].starts_with("api/mod.rs:1: `api` must not use `redis`"),
            "{violations:?}"
        );
    }
}
