//! Reading a file the operator named (a trap template, a corpus file), bounded: regular files
//! only, opened without blocking, at most a stated number of bytes. `/dev/zero` would read
//! without end, a FIFO would hang `check` and startup on its open, and a 10 MB template would make
//! every trap page 10 MB: each is refused with an error that says which file and why.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The contents of the regular file at `path`, if it holds at most `max_bytes`.
pub(crate) fn read(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
    let file: File = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if metadata.len() > max_bytes {
        return Err(too_large(max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    // The file may grow while it is read: never past the bound.
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(max_bytes));
    }
    Ok(bytes)
}

fn too_large(max_bytes: u64) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("larger than {max_bytes} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_bound_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.txt");
        std::fs::write(&small, "hello").unwrap();
        assert_eq!(read(&small, 5).unwrap(), b"hello");
        assert!(read(&small, 4).unwrap_err().to_string().contains("larger than 4 bytes"));
        assert!(
            read(Path::new("/dev/zero"), 1 << 20).unwrap_err().to_string().contains("not a regular file")
        );
        assert!(read(dir.path(), 1 << 20).unwrap_err().to_string().contains("not a regular file"));
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = dir.path().join("fifo.html");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(read(&fifo, 1 << 20).unwrap_err().to_string().contains("not a regular file"));
    }
}
