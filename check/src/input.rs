//! Reading user files within bounds, and checking output paths before any work is done.
//!
//! A file a user names can be anything: `/dev/zero`, a 10 GB file without a newline, a
//! directory. Every reader of a user file (histories, results, scenarios, matrices) reads a
//! line of at most [`LINE_BYTES_MAX`] and a whole file of at most [`FILE_BYTES_MAX`], so a
//! bad file is an error naming it, never a memory blow-up. An output path must be a regular
//! file or creatable as one: `/dev/full` or a directory is refused before a run starts, and
//! so is an output that is one of the command's inputs.

use std::io::{BufRead, Read};
use std::path::Path;

/// The longest line a line-structured file (history, results) may have, in bytes. A
/// simulated event or a result line is under a kilobyte; a megabyte leaves room for long
/// `detail` texts from real systems.
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// The largest file read whole (a scenario or a matrix), in bytes.
pub const FILE_BYTES_MAX: u64 = 16 << 20;

/// One read of [`read_line_bounded`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line of this many bytes (its newline included) is in the buffer.
    Complete(usize),
    /// The file ended after this many bytes without a newline (0: the file ended).
    Last(usize),
    /// The line is longer than the bound: nothing useful is in the buffer.
    TooLong,
}

/// Reads one line (up to and including `\n`) into `buf`, reading at most `max_bytes` of it:
/// a file without newlines costs `max_bytes` of memory, not its size.
pub fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max_bytes: usize,
) -> std::io::Result<Line> {
    buf.clear();
    // One byte over the bound tells a line of exactly `max_bytes` from a longer one.
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let read = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if buf.last() == Some(&b'\n') {
        assert!(read <= max_bytes + 1);
        return Ok(if read > max_bytes {
            Line::TooLong
        } else {
            Line::Complete(read)
        });
    }
    Ok(if read > max_bytes {
        Line::TooLong
    } else {
        Line::Last(read)
    })
}

/// The text of a file read whole, refusing one larger than `max_bytes` (or not UTF-8)
/// with an error in words (the caller adds the file's name).
pub fn read_to_string_bounded(path: &Path, max_bytes: u64) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if meta.is_dir() {
        return Err("is a directory, not a file".into());
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "larger than {max_bytes} bytes: not a file to read whole"
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))
}

/// Whether `path` can be written as a regular file: it is one, or it does not exist and its
/// directory does. Anything else (a device such as `/dev/full`, a directory, a FIFO) is
/// refused with the reason, before any work is done.
pub fn check_output_file(path: &Path) -> Result<(), String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) if meta.is_dir() => Err(format!("{shown}: is a directory, not a file")),
        Ok(_) => Err(format!(
            "{shown}: not a regular file (a device, FIFO or socket): write to a file"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if dir.is_dir() {
                Ok(())
            } else {
                Err(format!(
                    "{shown}: its directory {} does not exist",
                    dir.display()
                ))
            }
        }
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

/// Whether writing `output` would leave every one of `inputs` as it was: it is refused when
/// it is the same file as one of them, by device and inode, so another name for the file
/// (`./x.toml`, a link) is caught too (`run x.toml --history x.toml` would overwrite the
/// scenario). An output that does not exist yet is no input.
pub fn check_not_an_input(output: &Path, inputs: &[&Path]) -> Result<(), String> {
    let Some(out) = file_id(output) else {
        return Ok(());
    };
    match inputs.iter().find(|i| file_id(i).as_ref() == Some(&out)) {
        Some(input) => Err(format!(
            "{}: is the input file {}: writing it would overwrite that input",
            output.display(),
            input.display()
        )),
        None => Ok(()),
    }
}

/// What names a file whatever path leads to it: device and inode (the canonical path where
/// there are none); `None` if it does not exist.
fn file_id(path: &Path) -> Option<(u64, u64, std::path::PathBuf)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.dev(), meta.ino(), std::path::PathBuf::new()))
    }
    #[cfg(not(unix))]
    {
        Some((0, 0, std::fs::canonicalize(path).ok()?))
    }
}

/// Whether `path` can be an output directory: it is one, or it does not exist (it is then
/// created). A file or a device is refused before any work is done.
pub fn check_output_dir(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("{}: exists and is not a directory", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}
