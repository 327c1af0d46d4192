//! Declared artifacts: files an execution names when it declares its outcome, kept by the host after
//! the attempt's working directory is gone. The names are checked here, when they are declared; the
//! files are copied (or refused) when the host observes the segment end.

use crate::{Refusal, Timestamp};

/// How many files one outcome may declare.
pub const MAX_DECLARED: usize = 32;
/// The longest declared path, in bytes.
pub const MAX_PATH_BYTES: usize = 255;
/// The largest file kept; a larger one is refused whole, never truncated.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// What one execution's declared files may add up to.
pub const MAX_TOTAL_BYTES: u64 = 128 * 1024 * 1024;

/// Where an agent attempt's transcript (its CLI's machine-readable output) is kept among the
/// execution's files: past every declared index.
pub const TRANSCRIPT_INDEX: u32 = 1000;
/// The name a transcript is listed under.
pub const TRANSCRIPT_NAME: &str = "transcript.jsonl";

/// The wire id prefix of a declared artifact: `file:<execution id>:<index>`.
pub const FILE_PREFIX: &str = "file:";

/// Checks declared paths: each relative to the working directory, made of plain names (no empty,
/// `.` or `..` component, no NUL), at most [`MAX_PATH_BYTES`] long, each named once.
pub fn check_declared(paths: &[String]) -> Result<(), Refusal> {
    if paths.len() > MAX_DECLARED {
        return Err(Refusal::invalid_input(format!(
            "`artifacts` names at most {MAX_DECLARED} files"
        )));
    }
    for (i, path) in paths.iter().enumerate() {
        if !is_plain_relative(path) {
            return Err(Refusal::invalid_input(format!(
                "`artifacts/{i}` is a relative path of plain names inside the working directory (no `..`, `.`, empty or absolute parts)"
            )));
        }
        if paths[..i].contains(path) {
            return Err(Refusal::invalid_input(format!("`artifacts/{i}` names a file twice")));
        }
    }
    Ok(())
}

fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_PATH_BYTES
        && !path.contains('\0')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Why a declared file was not kept. The codes are stable; the file's content is never described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactRefusal {
    /// Nothing is at the path.
    Missing,
    /// The path is, or passes through, a symbolic link, or ends at a directory.
    NotRegularFile,
    /// The file, or the execution's total, is over the limit.
    TooLarge,
    /// The file could not be read or kept.
    Unreadable,
    /// Not a file the execution made alone: one with other hard links (a way to name a file it
    /// could never read, such as the operator's token), one owned by another user, or a device,
    /// FIFO or socket (which name something other than content of its own).
    Refused,
}

impl ArtifactRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactRefusal::Missing => "artifact_missing",
            ArtifactRefusal::NotRegularFile => "artifact_not_regular_file",
            ArtifactRefusal::TooLarge => "artifact_too_large",
            ArtifactRefusal::Unreadable => "artifact_unreadable",
            ArtifactRefusal::Refused => "artifact_refused",
        }
    }

    pub fn parse(code: &str) -> Option<ArtifactRefusal> {
        [
            ArtifactRefusal::Missing,
            ArtifactRefusal::NotRegularFile,
            ArtifactRefusal::TooLarge,
            ArtifactRefusal::Unreadable,
            ArtifactRefusal::Refused,
        ]
        .into_iter()
        .find(|r| r.as_str() == code)
    }
}

/// One declared file, kept or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRecord {
    pub execution_id: String,
    /// Its position in the declaration.
    pub index: u32,
    /// The path as declared, relative to the working directory.
    pub name: String,
    /// What was kept: size and SHA-256 (hex), or why nothing was.
    pub kept: Result<(u64, String), ArtifactRefusal>,
    pub created_at: Timestamp,
}

impl ArtifactRecord {
    /// The id operators read it by.
    pub fn id(&self) -> String {
        format!("{FILE_PREFIX}{}:{}", self.execution_id, self.index)
    }
}

/// The execution and index an artifact id names, if it names a declared file.
pub fn parse_file_id(id: &str) -> Option<(&str, u32)> {
    let (execution, index) = id.strip_prefix(FILE_PREFIX)?.rsplit_once(':')?;
    Some((execution, index.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(paths: &[&str]) -> Result<(), Refusal> {
        check_declared(&paths.iter().map(|p| p.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn plain_relative_paths_are_declared() {
        assert!(declared(&[]).is_ok());
        assert!(declared(&["report.md", "out/coverage.json", ".hidden", "a..b"]).is_ok());
    }

    #[test]
    fn paths_that_could_leave_the_working_directory_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "../secret",
            "out/../../x",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "nul\0",
        ] {
            assert!(declared(&[bad]).is_err(), "{bad:?} must be refused");
        }
        assert!(declared(&[&"a".repeat(MAX_PATH_BYTES + 1)]).is_err());
    }

    #[test]
    fn duplicates_and_too_many_are_refused() {
        assert!(declared(&["a", "a"]).is_err());
        let many: Vec<String> = (0..=MAX_DECLARED).map(|i| format!("f{i}")).collect();
        assert!(check_declared(&many).is_err());
    }

    #[test]
    fn ids_round_trip() {
        let record = ArtifactRecord {
            execution_id: "0190-ab".into(),
            index: 3,
            name: "x".into(),
            kept: Err(ArtifactRefusal::Missing),
            created_at: Timestamp(0),
        };
        assert_eq!(parse_file_id(&record.id()), Some(("0190-ab", 3)));
        assert_eq!(parse_file_id("log:0190"), None);
        assert_eq!(parse_file_id("file:0190:x"), None);
        for r in [
            "artifact_missing",
            "artifact_not_regular_file",
            "artifact_too_large",
            "artifact_unreadable",
        ] {
            assert_eq!(ArtifactRefusal::parse(r).map(|r| r.as_str()), Some(r));
        }
    }
}
