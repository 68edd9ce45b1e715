//! Reading a CSV file by column name, with errors that name the file and the line.
//!
//! The catalog loader and the openb importer both read user-supplied CSVs whose column order
//! is not fixed; one reader keeps their error messages and column lookup the same.

use std::fs::File;
use std::path::{Path, PathBuf};

use csv::StringRecord;

use crate::error::{Result, SimError};

/// An open CSV file with its header row.
pub struct CsvTable {
    path: PathBuf,
    reader: csv::Reader<File>,
    headers: StringRecord,
}

impl std::fmt::Debug for CsvTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvTable")
            .field("path", &self.path)
            .finish()
    }
}

impl CsvTable {
    pub fn open(path: &Path) -> Result<CsvTable> {
        let mut reader = csv::Reader::from_path(path).map_err(|e| csv_error(path, 0, e))?;
        let headers = reader.headers().map_err(|e| csv_error(path, 1, e))?.clone();
        Ok(CsvTable {
            path: path.to_path_buf(),
            reader,
            headers,
        })
    }

    /// Index of a column the file must have.
    pub fn column(&self, name: &str) -> Result<usize> {
        self.optional_column(name).ok_or_else(|| SimError::Csv {
            path: self.path.clone(),
            line: 1,
            message: format!("missing column `{name}`"),
        })
    }

    /// Index of a column the file may have.
    pub fn optional_column(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h.trim() == name)
    }

    /// The data rows, each with its line number for errors.
    pub fn rows(self) -> impl Iterator<Item = Result<Row>> {
        let path = self.path;
        self.reader.into_records().map(move |rec| {
            let record = rec.map_err(|e| {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                csv_error(&path, line, e)
            })?;
            let line = record.position().map(|p| p.line()).unwrap_or(0);
            Ok(Row {
                path: path.clone(),
                record,
                line,
            })
        })
    }
}

/// One data row.
#[derive(Debug)]
pub struct Row {
    path: PathBuf,
    record: StringRecord,
    line: u64,
}

impl Row {
    /// The trimmed cell, or an empty string when the row is short.
    pub fn text(&self, i: usize) -> &str {
        self.record.get(i).map(str::trim).unwrap_or("")
    }

    /// The trimmed cell; a short row is an error naming `what`.
    pub fn required(&self, i: usize, what: &str) -> Result<&str> {
        self.record
            .get(i)
            .map(str::trim)
            .ok_or_else(|| self.error(format!("missing `{what}`")))
    }

    /// A required decimal cell.
    pub fn number(&self, i: usize, what: &str) -> Result<f64> {
        let s = self.required(i, what)?;
        s.parse::<f64>()
            .map_err(|_| self.error(format!("`{what}` is not a number: `{s}`")))
    }

    /// An integer cell (an empty or missing cell is not an integer).
    pub fn integer(&self, i: usize, what: &str) -> Result<i64> {
        let s = self.text(i);
        s.parse::<i64>()
            .map_err(|_| self.error(format!("`{what}` is not an integer: `{s}`")))
    }

    pub fn error(&self, message: String) -> SimError {
        SimError::Csv {
            path: self.path.clone(),
            line: self.line,
            message,
        }
    }
}

fn csv_error(path: &Path, line: u64, e: csv::Error) -> SimError {
    SimError::Csv {
        path: path.to_path_buf(),
        line,
        message: e.to_string(),
    }
}
