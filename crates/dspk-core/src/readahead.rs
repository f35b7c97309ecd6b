//! Read-ahead hints for files read window by window (`posix_fadvise`), for readers in crates
//! that do not use `unsafe` themselves.
//!
//! Hints change no result: failures are ignored, and on systems without `posix_fadvise`
//! (macOS, Windows) the functions do nothing.

use std::fs::File;

/// Advises the system that `file` will be read mostly in order, so it reads further ahead
/// (`posix_fadvise(POSIX_FADV_SEQUENTIAL)` over the whole file).
pub fn advise_sequential(file: &File) {
    advise(file, 0, 0, Advice::Sequential);
}

/// Advises the system that the `len` bytes of `file` at `offset` will be read soon, so it
/// starts reading them into the page cache without waiting for them
/// (`posix_fadvise(POSIX_FADV_WILLNEED)`). Nothing for `len == 0`.
pub fn advise_will_need(file: &File, offset: u64, len: u64) {
    if len > 0 {
        advise(file, offset, len, Advice::WillNeed);
    }
}

/// Advises the system that the `len` bytes of `file` at `offset` (0: to the end) will not be
/// needed, so it drops their clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`). Dirty pages stay until written back (sync the file
/// first), and pages another process has mapped stay; benchmarks use it to read from the disk.
pub fn advise_dont_need(file: &File, offset: u64, len: u64) {
    advise(file, offset, len, Advice::DontNeed);
}

/// The hints given.
#[derive(Debug, Clone, Copy)]
enum Advice {
    Sequential,
    WillNeed,
    DontNeed,
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    let advice = match advice {
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
    };
    // SAFETY: `posix_fadvise` takes integers only; the descriptor stays open while `file` is
    // borrowed. A hint's result is ignored.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, advice) };
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn advise(_file: &File, _offset: u64, _len: u64, _advice: Advice) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};

    #[test]
    fn hints_leave_the_file_and_its_contents_alone() {
        let path = std::env::temp_dir().join(format!("dspk-readahead-{}.bin", std::process::id()));
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut file = File::options().read(true).write(true).open(&path).unwrap();
        advise_sequential(&file);
        advise_will_need(&file, 4_096, 8_192);
        advise_will_need(&file, u64::MAX, u64::MAX); // out of range: ignored
        file.write_all(b"x").unwrap(); // a dirty page: must survive DONTNEED
        advise_dont_need(&file, 0, 0);
        let mut read = Vec::new();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut read).unwrap();
        drop(file);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read[0], b'x');
        assert_eq!(read[1..], bytes[1..]);
    }
}
