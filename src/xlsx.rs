//! Spreadsheets (.xlsx): tables of typed cells, one sheet each, for the
//! reports a manager opens in Excel. trace-summarize writes its summary,
//! per-request and window tables through this; a sweep adds its own.

use std::path::{Path, PathBuf};

use rust_xlsxwriter::{Format, XlsxError};

use crate::error::{Error, Result};

pub use crate::cell::Cell;

/// The most rows a sheet holds (Excel's limit), the header included.
pub const MAX_ROWS: usize = 1_048_576;

/// A workbook being written to `path`; nothing is on disk before
/// [`Workbook::close`].
pub struct Workbook {
    book: rust_xlsxwriter::Workbook,
    path: PathBuf,
}

fn xlsx_error(path: &Path, e: XlsxError) -> Error {
    Error::msg(format!(
        "{}: cannot write the spreadsheet: {e}",
        path.display()
    ))
}

impl Workbook {
    /// A new, empty workbook to be saved as `path`.
    pub fn new(path: &Path) -> Workbook {
        Workbook {
            book: rust_xlsxwriter::Workbook::new(),
            path: path.to_path_buf(),
        }
    }

    /// Add a sheet named `name` (at most 31 characters, none of
    /// `[]:*?/\`): a bold header row, kept in view when scrolling, then
    /// `rows`. Rows beyond Excel's limit are refused, not cut.
    pub fn add_table(&mut self, name: &str, headers: &[String], rows: &[Vec<Cell>]) -> Result<()> {
        if rows.len() >= MAX_ROWS {
            return Err(Error::msg(format!(
                "{}: sheet `{name}` would have {} rows, more than a spreadsheet holds ({})",
                self.path.display(),
                rows.len() + 1,
                MAX_ROWS
            )));
        }
        let path = self.path.clone();
        let err = |e| xlsx_error(&path, e);
        let bold = Format::new().set_bold();
        let sheet = self.book.add_worksheet();
        sheet.set_name(name).map_err(err)?;
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for (c, h) in headers.iter().enumerate() {
            sheet
                .write_string_with_format(0, c as u16, h, &bold)
                .map_err(err)?;
        }
        for (r, row) in rows.iter().enumerate() {
            let at = r as u32 + 1;
            for (c, cell) in row.iter().enumerate() {
                let col = c as u16;
                let shown = match cell {
                    Cell::Number(x) if x.is_finite() => {
                        sheet.write_number(at, col, *x).map_err(err)?;
                        x.to_string().len()
                    }
                    Cell::Text(s) if !s.is_empty() => {
                        sheet.write_string(at, col, s).map_err(err)?;
                        s.chars().count()
                    }
                    _ => 0,
                };
                if c >= widths.len() {
                    widths.resize(c + 1, 0);
                }
                widths[c] = widths[c].max(shown);
            }
        }
        for (c, w) in widths.iter().enumerate() {
            // Wide enough to read, narrow enough that an error text does
            // not push the other columns away.
            let w = (*w).clamp(8, 60) as f64 + 1.0;
            sheet.set_column_width(c as u16, w).map_err(err)?;
        }
        sheet.set_freeze_panes(1, 0).map_err(err)?;
        Ok(())
    }

    /// Write the workbook to its path.
    pub fn close(mut self) -> Result<()> {
        self.book
            .save(&self.path)
            .map_err(|e| xlsx_error(&self.path, e))
    }
}
