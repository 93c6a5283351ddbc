//! Human tables and `--json` documents.

use serde_json::Value;

/// How a command prints its result.
pub(crate) struct Output {
    /// One JSON document instead of a table.
    pub(crate) json: bool,
}

impl Output {
    /// Prints `table` for a human, or `json` with `--json`.
    pub(crate) fn print(&self, table: &Table, json: &Value) {
        if self.json {
            write_out(&format!("{json:#}\n"));
        } else {
            write_out(&table.render());
        }
    }

    /// Prints one line for a human, or `json` with `--json`.
    pub(crate) fn print_line(&self, line: &str, json: &Value) {
        if self.json {
            write_out(&format!("{json:#}\n"));
        } else {
            write_out(&format!("{line}\n"));
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`streaming-admin … | head`) ends the
/// process quietly with status 0, as `cat` or `ls` would, instead of panicking like
/// `println!`; another write error ends it with status 1 and a line on stderr.
pub(crate) fn write_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            std::process::exit(1);
        }
    }
}

/// A table with a header row; columns are as wide as their widest cell.
pub(crate) struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&'static str]) -> Self {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// The header and rows, two spaces between columns, no trailing blanks.
    pub(crate) fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: Vec<String> = self.header.iter().map(|h| h.to_string()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(&format!("{cell:<w$}"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A cell for an optional value: the value, or `-`.
pub(crate) fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut t = Table::new(&["topic", "n"]);
        t.row(vec!["orders".into(), "12".into()]);
        t.row(vec!["a".into(), "3".into()]);
        assert_eq!(t.render(), "topic   n\norders  12\na       3\n");
    }
}
