//! A table cell, as CSV, the per-request table and spreadsheets write it:
//! numbers stay numbers.

/// One cell: numbers stay numbers, so that a spreadsheet can sum and
/// chart them.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// A number (a non-finite one is written empty).
    Number(f64),
    /// Text.
    Text(String),
    /// Nothing.
    Empty,
}

impl Cell {
    /// A number, or an empty cell for none.
    pub fn num(v: Option<f64>) -> Cell {
        v.map_or(Cell::Empty, Cell::Number)
    }

    /// A count, or an empty cell for none.
    pub fn count(v: Option<u64>) -> Cell {
        v.map_or(Cell::Empty, |n| Cell::Number(n as f64))
    }

    /// Text, or an empty cell for none.
    pub fn text(v: Option<&str>) -> Cell {
        v.map_or(Cell::Empty, |s| Cell::Text(s.to_string()))
    }

    /// The cell as CSV writes it: numbers in Rust's shortest form, nothing
    /// for an empty cell.
    pub fn to_csv(&self) -> String {
        match self {
            Cell::Number(x) => x.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Empty => String::new(),
        }
    }

    /// A value of a JSON report as a cell: a number stays one.
    pub fn from_json(v: &serde_json::Value) -> Cell {
        match v {
            serde_json::Value::Null => Cell::Empty,
            serde_json::Value::Number(n) => n.as_f64().map_or(Cell::Empty, Cell::Number),
            serde_json::Value::String(s) => Cell::Text(s.clone()),
            other => Cell::Text(other.to_string()),
        }
    }
}
