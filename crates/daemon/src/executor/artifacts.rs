//! Keeping declared artifacts: when a segment that declared its outcome ends, each file it named is
//! copied out of the attempt's working directory into `<state>/artifacts/<execution>/<index>` before
//! the run directory is removed.
//!
//! Every path component is opened relative to its parent with `O_NOFOLLOW`, so a symbolic link
//! anywhere on the path is refused rather than followed out of the working directory (the daemon
//! would otherwise copy, say, the owner's SSH key into something a `view` operator can read).

use std::fs::{self, File};
use std::io::{self, BufRead, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use conduit_core::artifact::{MAX_FILE_BYTES, MAX_TOTAL_BYTES, TRANSCRIPT_INDEX, TRANSCRIPT_NAME};
use conduit_core::{ArtifactRecord, ArtifactRefusal, Timestamp};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use conduit_server::ArtifactFiles;

use crate::state::create_private_dir;

/// Keeps each declared file, in declaration order, until the execution's total budget is spent.
pub fn keep(
    workdir: &Path,
    hidden: &[PathBuf],
    files: &ArtifactFiles,
    execution_id: &str,
    names: &[String],
    at: Timestamp,
) -> Vec<ArtifactRecord> {
    let mut budget = MAX_TOTAL_BYTES;
    names
        .iter()
        .zip(0u32..)
        .map(|(name, index)| ArtifactRecord {
            execution_id: execution_id.to_owned(),
            index,
            name: name.clone(),
            kept: keep_one(
                (workdir, hidden),
                &files.declared_file(execution_id, index),
                name,
                &mut budget,
            ),
            created_at: at,
        })
        .collect()
}

/// Whether the open `file` is (or, unknown, may be) in one of the `hidden` trees (canonical
/// paths), but for a working directory inside that tree (an attempt's own): a
/// working directory that reaches the state directory or a private file by plain names must not
/// make the daemon copy the operator's token into an artifact.
fn lies_in(file: &File, hidden: &[PathBuf], workdir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(path) = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
        return true;
    };
    let Ok(workdir) = workdir.canonicalize() else {
        return true;
    };
    let own = |h: &PathBuf| workdir.starts_with(h) && path.starts_with(&workdir);
    hidden.iter().any(|h| path.starts_with(h) && !own(h))
}

/// Longest transcript line handed to `on_line` (a longer one is kept, not read).
const MAX_TRANSCRIPT_LINE: usize = 1024 * 1024;

/// An agent attempt's transcript, which its CLI wrote straight to where it is kept: its record
/// (size and digest, synced), read a line at a time into `on_line`, when there is one.
pub fn transcript(
    files: &ArtifactFiles,
    execution_id: &str,
    at: Timestamp,
    mut on_line: impl FnMut(&str),
) -> Option<ArtifactRecord> {
    let file = File::open(files.declared_file(execution_id, TRANSCRIPT_INDEX)).ok()?;
    file.sync_all().ok()?;
    let mut reader = io::BufReader::new(file);
    let (mut hasher, mut size, mut line) = (Sha256::new(), 0u64, Vec::new());
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_TRANSCRIPT_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&line);
        size += n as u64;
        if n <= MAX_TRANSCRIPT_LINE {
            on_line(&String::from_utf8_lossy(&line));
        }
    }
    Some(ArtifactRecord {
        execution_id: execution_id.to_owned(),
        index: TRANSCRIPT_INDEX,
        name: TRANSCRIPT_NAME.to_owned(),
        kept: Ok((size, hex::encode(hasher.finalize()))),
        created_at: at,
    })
}

fn keep_one(
    (workdir, hidden): (&Path, &[PathBuf]),
    target: &Path,
    name: &str,
    budget: &mut u64,
) -> Result<(u64, String), ArtifactRefusal> {
    let mut file = open_beneath(workdir, name)?;
    if lies_in(&file, hidden, workdir) {
        return Err(ArtifactRefusal::Refused);
    }
    let meta = file.metadata().map_err(|_| ArtifactRefusal::Unreadable)?;
    if meta.is_dir() {
        return Err(ArtifactRefusal::NotRegularFile);
    }
    if !meta.is_file() || meta.nlink() > 1 || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(ArtifactRefusal::Refused);
    }
    let limit = MAX_FILE_BYTES.min(*budget);
    if meta.len() > limit {
        return Err(ArtifactRefusal::TooLarge);
    }
    let dir = target.parent().ok_or(ArtifactRefusal::Unreadable)?;
    create_private_dir(dir).map_err(|_| ArtifactRefusal::Unreadable)?;
    let (size, sha256) = copy_bounded(&mut file, target, limit)?;
    *budget -= size;
    Ok((size, sha256))
}

/// Copies at most `limit` bytes (a file that grew past it is refused whole) into an owner-only file,
/// synced before the record that names it is committed.
fn copy_bounded(file: &mut File, target: &Path, limit: u64) -> Result<(u64, String), ArtifactRefusal> {
    let tmp = target.with_extension("tmp");
    let mut copy = || -> io::Result<(u64, String)> {
        let mut out = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; 64 * 1024];
        let mut reader = file.take(limit + 1);
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            size += n as u64;
        }
        out.sync_all()?;
        Ok((size, hex::encode(hasher.finalize())))
    };
    match copy() {
        Ok((size, sha256)) if size <= limit => {
            fs::rename(&tmp, target).map_err(|_| ArtifactRefusal::Unreadable)?;
            Ok((size, sha256))
        }
        outcome => {
            let _ = fs::remove_file(&tmp);
            Err(match outcome {
                Ok(_) => ArtifactRefusal::TooLarge,
                Err(_) => ArtifactRefusal::Unreadable,
            })
        }
    }
}

/// Opens `name` (plain components, checked when it was declared) beneath `root`, refusing a symbolic
/// link at any component. `O_NONBLOCK` keeps a FIFO from stalling the open; it is refused after.
fn open_beneath(root: &Path, name: &str) -> Result<File, ArtifactRefusal> {
    let dir_flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    let mut dir: OwnedFd = rustix::fs::open(root, dir_flags, Mode::empty()).map_err(refusal)?;
    let mut parts = name.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            return Ok(File::from(
                rustix::fs::openat(&dir, part, flags, Mode::empty()).map_err(refusal)?,
            ));
        }
        dir = rustix::fs::openat(&dir, part, dir_flags, Mode::empty()).map_err(refusal)?;
    }
    Err(ArtifactRefusal::Missing)
}

fn refusal(e: Errno) -> ArtifactRefusal {
    match e {
        Errno::NOENT => ArtifactRefusal::Missing,
        Errno::LOOP | Errno::NOTDIR => ArtifactRefusal::NotRegularFile,
        _ => ArtifactRefusal::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn kept(workdir: &Path, names: &[&str]) -> Vec<Result<(u64, String), ArtifactRefusal>> {
        let files = ArtifactFiles {
            logs: workdir.parent().unwrap().join("logs"),
            declared: workdir.parent().unwrap().join("artifacts"),
        };
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        fs::create_dir_all(workdir.join("state")).unwrap();
        let hidden = [workdir.join("state").canonicalize().unwrap()];
        keep(workdir, &hidden, &files, "x1", &names, Timestamp(0))
            .into_iter()
            .map(|r| r.kept)
            .collect()
    }

    #[test]
    fn a_file_in_a_hidden_tree_is_refused_though_named_by_plain_names() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        fs::create_dir_all(work.join("state/private")).unwrap();
        fs::write(work.join("state/private/operator.token"), b"secret").unwrap();
        fs::write(work.join("public.txt"), b"ok").unwrap();
        let got = kept(&work, &["state/private/operator.token", "public.txt"]);
        assert_eq!(got[0], Err(ArtifactRefusal::Refused));
        assert!(got[1].is_ok());
    }

    #[test]
    fn regular_files_are_copied_with_their_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        fs::create_dir_all(work.join("out")).unwrap();
        fs::write(work.join("out/report.md"), b"abc").unwrap();
        let got = kept(&work, &["out/report.md"]);
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".to_owned();
        assert_eq!(got, vec![Ok((3, sha))]);
        assert_eq!(fs::read(tmp.path().join("artifacts/x1/0")).unwrap(), b"abc");
    }

    #[test]
    fn links_directories_and_absent_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        fs::create_dir_all(work.join("dir")).unwrap();
        fs::write(tmp.path().join("secret"), b"s").unwrap();
        symlink(tmp.path().join("secret"), work.join("link")).unwrap();
        symlink(tmp.path(), work.join("up")).unwrap();
        let got = kept(&work, &["link", "up/secret", "dir", "absent"]);
        use ArtifactRefusal::*;
        assert_eq!(
            got,
            vec![
                Err(NotRegularFile),
                Err(NotRegularFile),
                Err(NotRegularFile),
                Err(Missing)
            ]
        );
        assert!(!tmp.path().join("artifacts/x1/0").exists());
    }

    #[test]
    fn a_hard_link_is_refused_and_a_lone_file_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        fs::create_dir_all(&work).unwrap();
        fs::write(tmp.path().join("operator.token"), b"admin").unwrap();
        fs::hard_link(tmp.path().join("operator.token"), work.join("linked")).unwrap();
        fs::write(work.join("lone"), b"mine").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            work.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let got = kept(&work, &["linked", "lone", "fifo"]);
        assert_eq!(got[0], Err(ArtifactRefusal::Refused));
        assert_eq!(
            got[2],
            Err(ArtifactRefusal::Refused),
            "a FIFO names no content of its own"
        );
        assert!(got[1].is_ok(), "control: the same kind of file with one link is kept");
        assert_eq!(ArtifactRefusal::Refused.as_str(), "artifact_refused");
        assert!(!tmp.path().join("artifacts/x1/0").exists());
    }

    #[test]
    fn a_file_over_the_limit_is_refused_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        fs::create_dir_all(&work).unwrap();
        File::create(work.join("big"))
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        fs::write(work.join("small"), b"ok").unwrap();
        let got = kept(&work, &["big", "small"]);
        assert_eq!(got[0], Err(ArtifactRefusal::TooLarge));
        assert!(got[1].is_ok(), "a refusal does not stop the files after it");
    }
}
