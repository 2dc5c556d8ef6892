//! Runs: the calls held, sorted by start and written to a temporary file
//! (in the directory `TMPDIR` names, removed when closed), and their merge
//! back into one order.
//!
//! A run is written only when the budget is reached; runs are merged
//! FAN_IN at a time as they come (the last FAN_IN when they are of one
//! level), so that few files are open and each call is copied about
//! log_FAN_IN(runs) times. Runs only ever merge with their neighbours, and
//! ties in the merge go to the earlier run: calls of equal start keep the
//! order read, as in memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use super::write::{Call, Calls};
use crate::error::{Error, Result};
use crate::record::Record;

/// Runs merged at once.
const FAN_IN: usize = 16;

/// How errors name the files.
const NAME: &str = "temporary file in TMPDIR (records beyond --memory)";

fn io_error(err: std::io::Error) -> Error {
    Error::io(NAME, err)
}

/// The runs written so far, in the order of their calls' reading, each with
/// its level (how many merges made it).
#[derive(Default)]
pub(super) struct Runs {
    files: Vec<(u32, File)>,
}

/// A run being written.
pub(super) struct Run {
    out: BufWriter<File>,
    /// One record passed through, as JSON.
    record: Vec<u8>,
}

impl Runs {
    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub(super) fn create(&mut self) -> Result<Run> {
        Ok(Run {
            out: BufWriter::with_capacity(1 << 16, tempfile::tempfile().map_err(io_error)?),
            record: Vec::new(),
        })
    }

    /// Keep a run written; merge the last FAN_IN while they are of one
    /// level.
    pub(super) fn finish(&mut self, run: Run) -> Result<()> {
        let file = run.out.into_inner().map_err(|e| io_error(e.into_error()))?;
        self.files.push((0, file));
        loop {
            let n = self.files.len();
            if n < FAN_IN {
                return Ok(());
            }
            let level = self.files[n - 1].0;
            if self.files[n - FAN_IN..].iter().any(|(l, _)| *l != level) {
                return Ok(());
            }
            let last: Vec<File> = self.files.drain(n - FAN_IN..).map(|(_, f)| f).collect();
            let mut merged = Merged::open(last)?;
            let mut run = self.create()?;
            merged.sorted(&mut |c| run.put(&c))?;
            let file = run.out.into_inner().map_err(|e| io_error(e.into_error()))?;
            self.files.push((level + 1, file));
        }
    }

    /// Every run, to be read in one order.
    pub(super) fn merged(self) -> Result<Merged> {
        Merged::open(self.files.into_iter().map(|(_, f)| f).collect())
    }
}

/// Present parts of an entry: one bit each.
const END: u8 = 1 << 0;
const SESSION: u8 = 1 << 1;
const GROUP: u8 = 1 << 2;
const TRACE: u8 = 1 << 3;
const HASHES: u8 = 1 << 4;
const PASSTHROUGH: u8 = 1 << 5;
const IF_REPEATED: u8 = 1 << 6;

impl Run {
    /// Write a call: its start, what it has, then each part with its
    /// length (native byte order: the file lives as long as the process).
    pub(super) fn put(&mut self, c: &Call) -> Result<()> {
        let mut flags = 0;
        for (has, flag) in [
            (c.end_ns.is_some(), END),
            (c.session.is_some(), SESSION),
            (c.group.is_some(), GROUP),
            (c.trace.is_some(), TRACE),
            (c.hashes.is_some(), HASHES),
            (c.passthrough.is_some(), PASSTHROUGH),
            (c.session_if_repeated, IF_REPEATED),
        ] {
            if has {
                flags |= flag;
            }
        }
        let out = &mut self.out;
        let mut put = |bytes: &[u8]| out.write_all(bytes).map_err(io_error);
        put(&c.start_ns.to_ne_bytes())?;
        put(&[flags])?;
        if let Some(end) = c.end_ns {
            put(&end.to_ne_bytes())?;
        }
        let mut part = |bytes: &[u8]| {
            put(&(bytes.len() as u64).to_ne_bytes())?;
            put(bytes)
        };
        for name in [c.session, c.group, c.trace].into_iter().flatten() {
            part(name.as_bytes())?;
        }
        part(c.head)?;
        part(c.tail)?;
        part(c.id)?;
        if let Some(hashes) = c.hashes {
            let bytes: Vec<u8> = hashes.iter().flat_map(|h| h.to_ne_bytes()).collect();
            part(&bytes)?;
        }
        if let Some(rec) = &c.passthrough {
            self.record.clear();
            rec.write_json(&mut self.record);
            let len = self.record.len() as u64;
            self.out.write_all(&len.to_ne_bytes()).map_err(io_error)?;
            self.out.write_all(&self.record).map_err(io_error)?;
        }
        Ok(())
    }
}

/// One call read back: its parts in one buffer.
#[derive(Default)]
struct Entry {
    start_ns: i64,
    end_ns: Option<i64>,
    flags: u8,
    bytes: Vec<u8>,
    hashes: Vec<u64>,
    /// Where each part is in `bytes`: session, group, trace, head, tail,
    /// id, passed-through record.
    parts: [(usize, usize); 7],
}

impl Entry {
    fn part(&self, i: usize) -> &[u8] {
        let (from, to) = self.parts[i];
        &self.bytes[from..to]
    }

    fn name(&self, i: usize, flag: u8) -> Result<Option<&str>> {
        if self.flags & flag == 0 {
            return Ok(None);
        }
        std::str::from_utf8(self.part(i))
            .map(Some)
            .map_err(|e| Error::msg(format!("{NAME}: {e}")))
    }

    /// The call, with its passed-through record if `record`.
    fn call(&self, record: bool) -> Result<Call<'_>> {
        let passthrough = if record && self.flags & PASSTHROUGH != 0 {
            let text = std::str::from_utf8(self.part(6))
                .map_err(|e| Error::msg(format!("{NAME}: {e}")))?;
            let rec = Record::parse(text)
                .map_err(|e| Error::msg(format!("{NAME}: {}", e.msg)))?
                .into_owned();
            Some(Box::new(rec))
        } else {
            None
        };
        Ok(Call {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            session: self.name(0, SESSION)?,
            group: self.name(1, GROUP)?,
            trace: self.name(2, TRACE)?,
            head: self.part(3),
            hashes: (self.flags & HASHES != 0).then_some(&self.hashes[..]),
            tail: self.part(4),
            id: self.part(5),
            session_if_repeated: self.flags & IF_REPEATED != 0,
            passthrough,
        })
    }
}

/// A run being read.
struct Reader {
    input: BufReader<File>,
}

impl Reader {
    fn open(file: &File) -> Result<Reader> {
        let mut file = file.try_clone().map_err(io_error)?;
        file.seek(SeekFrom::Start(0)).map_err(io_error)?;
        Ok(Reader {
            input: BufReader::with_capacity(1 << 16, file),
        })
    }

    fn u64(&mut self) -> Result<u64> {
        let mut b = [0; 8];
        self.input.read_exact(&mut b).map_err(io_error)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// The next call into `e`; false at the end of the run.
    fn next(&mut self, e: &mut Entry) -> Result<bool> {
        if self.input.fill_buf().map_err(io_error)?.is_empty() {
            return Ok(false);
        }
        e.start_ns = self.u64()? as i64;
        let mut flags = [0];
        self.input.read_exact(&mut flags).map_err(io_error)?;
        e.flags = flags[0];
        e.end_ns = if e.flags & END != 0 {
            Some(self.u64()? as i64)
        } else {
            None
        };
        e.bytes.clear();
        for (i, flag) in [(0, SESSION), (1, GROUP), (2, TRACE)] {
            e.parts[i] = (0, 0);
            if e.flags & flag != 0 {
                e.parts[i] = self.part(&mut e.bytes)?;
            }
        }
        for part in &mut e.parts[3..6] {
            *part = self.part(&mut e.bytes)?;
        }
        e.hashes.clear();
        if e.flags & HASHES != 0 {
            let (from, to) = self.part(&mut e.bytes)?;
            e.hashes.extend(
                e.bytes[from..to]
                    .chunks_exact(8)
                    .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes"))),
            );
            e.bytes.truncate(from);
        }
        e.parts[6] = (0, 0);
        if e.flags & PASSTHROUGH != 0 {
            e.parts[6] = self.part(&mut e.bytes)?;
        }
        Ok(true)
    }

    /// One part, appended to `bytes`: where it is.
    fn part(&mut self, bytes: &mut Vec<u8>) -> Result<(usize, usize)> {
        let len = self.u64()? as usize;
        let from = bytes.len();
        bytes.resize(from + len, 0);
        self.input
            .read_exact(&mut bytes[from..])
            .map_err(io_error)?;
        Ok((from, from + len))
    }
}

/// Runs read together.
pub(super) struct Merged {
    files: Vec<File>,
}

impl Merged {
    fn open(files: Vec<File>) -> Result<Merged> {
        Ok(Merged { files })
    }
}

impl Calls for Merged {
    fn each(&mut self, f: &mut dyn FnMut(&Call)) -> Result<()> {
        let mut e = Entry::default();
        for file in &self.files {
            let mut reader = Reader::open(file)?;
            while reader.next(&mut e)? {
                f(&e.call(false)?);
            }
        }
        Ok(())
    }

    fn sorted(&mut self, f: &mut dyn FnMut(Call) -> Result<()>) -> Result<()> {
        let mut heads = Vec::with_capacity(self.files.len());
        // The next call of each run, by (start, run).
        let mut next = BinaryHeap::new();
        for (i, file) in self.files.iter().enumerate() {
            let mut reader = Reader::open(file)?;
            let mut e = Entry::default();
            if reader.next(&mut e)? {
                next.push(Reverse((e.start_ns, i)));
            }
            heads.push((reader, e));
        }
        while let Some(Reverse((_, i))) = next.pop() {
            let (reader, e) = &mut heads[i];
            f(e.call(true)?)?;
            if reader.next(e)? {
                next.push(Reverse((e.start_ns, i)));
            }
        }
        Ok(())
    }
}
