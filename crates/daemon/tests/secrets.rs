//! The secrets resolver against real files, real processes and an injected keyring backend.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_daemon::secrets::{
    EnvSource, KeyringBackend, KeyringUnavailable, Resolver, Secret, SecretError, CMD_OUTPUT_LIMIT, CMD_PATH,
};

/// A keyring holding fixed entries, or one that cannot be reached.
struct FakeKeyring {
    entries: HashMap<(String, String), String>,
    reachable: bool,
}

impl FakeKeyring {
    fn with(service: &str, account: &str, value: &str) -> Arc<FakeKeyring> {
        let entries = HashMap::from([((service.to_owned(), account.to_owned()), value.to_owned())]);
        Arc::new(FakeKeyring {
            entries,
            reachable: true,
        })
    }

    fn unreachable() -> Arc<FakeKeyring> {
        Arc::new(FakeKeyring {
            entries: HashMap::new(),
            reachable: false,
        })
    }
}

impl KeyringBackend for FakeKeyring {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, KeyringUnavailable> {
        if !self.reachable {
            return Err(KeyringUnavailable);
        }
        Ok(self.entries.get(&(service.to_owned(), account.to_owned())).cloned())
    }
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn secrets_file(&self) -> PathBuf {
        self.dir.path().join("secrets.json")
    }

    fn write_secrets(&self, json: &str, mode: u32) -> PathBuf {
        let path = self.secrets_file();
        fs::write(&path, json).expect("write secrets.json");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod secrets.json");
        path
    }

    fn resolver(&self) -> Resolver {
        Resolver::new(
            self.secrets_file(),
            FakeKeyring::with("open-conduit", "zqgithub", "kr-zqvalue"),
        )
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn value(resolver: &Resolver, reference: &str) -> String {
    match resolver.resolve(reference) {
        Ok(secret) => secret.expose().to_owned(),
        Err(e) => panic!("{reference:?} refused with {}", e.code()),
    }
}

/// Asserts the refusal's code, and that neither its `Display` nor its `Debug` carries the reference's
/// text after the scheme or any of `values`.
fn refused(resolver: &Resolver, reference: &str, code: &str, values: &[&str]) -> SecretError {
    let error = match resolver.resolve(reference) {
        Ok(_) => panic!("{reference:?} resolved; expected {code}"),
        Err(e) => e,
    };
    assert_eq!(error.code(), code, "{reference:?}");
    let tail = reference.split_once(':').map_or(reference, |(_, tail)| tail);
    for shown in [error.to_string(), format!("{error:?}"), error.remedy().to_owned()] {
        if !tail.trim().is_empty() {
            assert!(!shown.contains(tail), "{shown:?} echoes the reference {reference:?}");
        }
        for v in values {
            assert!(!shown.contains(v), "{shown:?} echoes the value {v:?}");
        }
    }
    error
}

fn env_of(vars: &[(&str, &str)]) -> Arc<dyn EnvSource> {
    let vars: HashMap<String, OsString> = vars.iter().map(|(k, v)| ((*k).to_owned(), OsString::from(v))).collect();
    Arc::new(move |name: &str| vars.get(name).cloned())
}

#[test]
fn keyring_found_missing_and_unavailable() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    assert_eq!(value(&resolver, "keyring:open-conduit/zqgithub"), "kr-zqvalue");
    refused(&resolver, "keyring:open-conduit/zqmissing", "not_found", &[]);
    refused(&resolver, "keyring:zqnoslash", "invalid_reference", &[]);
    refused(&resolver, "keyring:/zqaccount", "invalid_reference", &[]);

    let account_with_slash = Resolver::new(fx.secrets_file(), FakeKeyring::with("svc", "a/zqb", "slashed"));
    assert_eq!(value(&account_with_slash, "keyring:svc/a/zqb"), "slashed");

    let empty = Resolver::new(fx.secrets_file(), FakeKeyring::with("svc", "zqempty", ""));
    refused(&empty, "keyring:svc/zqempty", "empty_value", &[]);

    let down = Resolver::new(fx.secrets_file(), FakeKeyring::unreachable());
    refused(&down, "keyring:open-conduit/zqgithub", "keyring_unavailable", &[]);
}

#[test]
fn file_reads_a_key_of_an_owner_only_file() {
    let fx = Fixture::new();
    fx.write_secrets(r#"{"zqgithub": "file-zqvalue", "zqblank": ""}"#, 0o600);
    let resolver = fx.resolver();
    assert_eq!(value(&resolver, "file:zqgithub"), "file-zqvalue");
    refused(&resolver, "file:zqmissing", "not_found", &["file-zqvalue"]);
    refused(&resolver, "file:zqblank", "empty_value", &[]);
    refused(&resolver, "file:", "invalid_reference", &[]);
}

#[test]
fn file_with_group_or_other_bits_is_refused() {
    let fx = Fixture::new();
    for mode in [0o644, 0o640, 0o604, 0o660, 0o610, 0o601] {
        fx.write_secrets(r#"{"zqgithub": "file-zqvalue"}"#, mode);
        let error = refused(&fx.resolver(), "file:zqgithub", "file_unsafe", &["file-zqvalue"]);
        assert_eq!(error, SecretError::FileUnsafe, "mode {mode:o}");
    }
    fx.write_secrets(r#"{"zqgithub": "file-zqvalue"}"#, 0o400);
    assert_eq!(value(&fx.resolver(), "file:zqgithub"), "file-zqvalue");
}

#[test]
fn file_that_is_not_a_regular_file_is_refused() {
    let fx = Fixture::new();
    let real = fx.path("real.json");
    fs::write(&real, r#"{"zqgithub": "file-zqvalue"}"#).expect("write");
    fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink(&real, fx.secrets_file()).expect("symlink");
    refused(&fx.resolver(), "file:zqgithub", "file_unsafe", &["file-zqvalue"]);

    fs::remove_file(fx.secrets_file()).expect("unlink");
    fs::create_dir(fx.secrets_file()).expect("mkdir");
    fs::set_permissions(fx.secrets_file(), fs::Permissions::from_mode(0o700)).expect("chmod");
    refused(&fx.resolver(), "file:zqgithub", "file_unsafe", &[]);

    fs::remove_dir(fx.secrets_file()).expect("rmdir");
    let fifo = std::process::Command::new("mkfifo")
        .arg(fx.secrets_file())
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    fs::set_permissions(fx.secrets_file(), fs::Permissions::from_mode(0o600)).expect("chmod");
    refused(&fx.resolver(), "file:zqgithub", "file_unsafe", &[]);
}

#[test]
fn file_owned_by_another_user_is_refused() {
    let fx = Fixture::new();
    let path = fx.write_secrets(r#"{"zqgithub": "file-zqvalue"}"#, 0o600);
    if std::os::unix::fs::chown(&path, Some(65534), None).is_err() {
        return; // Not privileged here: no foreign-owned file can be made.
    }
    refused(&fx.resolver(), "file:zqgithub", "file_unsafe", &["file-zqvalue"]);
}

#[test]
fn file_missing_or_malformed() {
    let fx = Fixture::new();
    refused(&fx.resolver(), "file:zqgithub", "not_found", &[]);
    let malformed = [
        r#"{"zqgithub": "file-zqvalue""#,
        r#"{"zqgithub": "file-zqvalue", "n": 1}"#,
        r#"{"zqgithub": "file-zqvalue", "zqgithub": "other-zqvalue"}"#,
        r#"{"zqgithub": {"nested": "file-zqvalue"}}"#,
        r#"["file-zqvalue"]"#,
    ];
    for json in malformed {
        fx.write_secrets(json, 0o600);
        refused(
            &fx.resolver(),
            "file:zqgithub",
            "file_invalid",
            &["file-zqvalue", "other-zqvalue"],
        );
    }
}

#[test]
fn nothing_is_cached() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    fx.write_secrets(r#"{"zqgithub": "first"}"#, 0o600);
    assert_eq!(value(&resolver, "file:zqgithub"), "first");
    fx.write_secrets(r#"{"zqgithub": "second"}"#, 0o600);
    assert_eq!(value(&resolver, "file:zqgithub"), "second");

    let counter = fx.path("count");
    let reference = format!("cmd:echo x >> {}; wc -l < {}", counter.display(), counter.display());
    assert_eq!(value(&resolver, &reference).trim(), "1");
    assert_eq!(value(&resolver, &reference).trim(), "2");
}

#[test]
fn env_reads_the_injected_source() {
    let fx = Fixture::new();
    let resolver = fx
        .resolver()
        .with_env(env_of(&[("ZQ_TOKEN", "env-zqvalue"), ("ZQ_BLANK", "")]));
    assert_eq!(value(&resolver, "env:ZQ_TOKEN"), "env-zqvalue");
    refused(&resolver, "env:ZQ_UNSET", "env_unset", &[]);
    refused(&resolver, "env:ZQ_BLANK", "empty_value", &[]);
    refused(&resolver, "env:ZQ-BAD", "invalid_reference", &[]);
    refused(&resolver, "env:", "invalid_reference", &[]);

    let non_utf8: Arc<dyn EnvSource> = Arc::new(|_: &str| {
        use std::os::unix::ffi::OsStringExt;
        Some(OsString::from_vec(vec![0xff, 0xfe]))
    });
    refused(&fx.resolver().with_env(non_utf8), "env:ZQ_TOKEN", "invalid_value", &[]);
}

#[test]
fn env_reads_the_process_environment_by_default() {
    let fx = Fixture::new();
    std::env::set_var("OPEN_CONDUIT_ZQ_SECRET_TEST", "process-zqvalue");
    assert_eq!(
        value(&fx.resolver(), "env:OPEN_CONDUIT_ZQ_SECRET_TEST"),
        "process-zqvalue"
    );
}

#[test]
fn cmd_prints_the_secret_with_one_line_ending_trimmed() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    assert_eq!(value(&resolver, "cmd:printf 'cmd-zqvalue'"), "cmd-zqvalue");
    assert_eq!(value(&resolver, "cmd:echo cmd-zqvalue"), "cmd-zqvalue");
    assert_eq!(value(&resolver, r"cmd:printf 'a\n\n'"), "a\n");
    assert_eq!(value(&resolver, r"cmd:printf 'a\r\n'"), "a");
    assert_eq!(value(&resolver, r"cmd:printf 'a\r\n\r\n'"), "a\r\n");
    assert_eq!(value(&resolver, r"cmd:printf ' a \r'"), " a \r");
    assert_eq!(value(&resolver, "cmd:echo zqnoise >&2; printf ok"), "ok");
}

#[test]
fn cmd_refuses_empty_output() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    refused(&resolver, "cmd:true", "empty_value", &[]);
    refused(&resolver, r"cmd:printf '\n'", "empty_value", &[]);
    refused(&resolver, "cmd:cat", "empty_value", &[]); // stdin is empty
    refused(&resolver, "cmd:", "invalid_reference", &[]);
    refused(&resolver, r"cmd:printf '\377'", "invalid_value", &[]);
}

#[test]
fn cmd_exit_status_must_be_zero() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    refused(
        &resolver,
        "cmd:printf cmd-zqvalue; exit 1",
        "cmd_failed",
        &["cmd-zqvalue"],
    );
    refused(&resolver, "cmd:zq-no-such-program-zq", "cmd_failed", &[]);
    refused(&resolver, "cmd:kill -9 $$", "cmd_failed", &[]);
}

#[test]
fn cmd_output_is_bounded() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    refused(
        &resolver,
        "cmd:yes cmd-zqvalue",
        "cmd_output_too_large",
        &["cmd-zqvalue"],
    );
    let exactly = format!("cmd:head -c {CMD_OUTPUT_LIMIT} /dev/zero | tr '\\0' a");
    assert_eq!(value(&resolver, &exactly).len(), CMD_OUTPUT_LIMIT);
    let over = format!("cmd:head -c {} /dev/zero | tr '\\0' a", CMD_OUTPUT_LIMIT + 1);
    refused(&resolver, &over, "cmd_output_too_large", &[]);
}

/// A command past its deadline is refused and its whole process group is gone: one that keeps
/// stdout open, and one that closes it early but keeps running.
#[test]
fn cmd_timeout_kills_the_whole_process_group() {
    let fx = Fixture::new();
    let resolver = fx.resolver().with_cmd_deadline(Duration::from_millis(300));
    let pids = fx.path("pids");
    let p = pids.display();
    for reference in [
        format!("cmd:echo $$ > {p}; sleep 30 & echo $! >> {p}; wait"),
        format!("cmd:printf x; exec >&-; echo $$ > {p}; sleep 30"),
    ] {
        let started = Instant::now();
        refused(&resolver, &reference, "cmd_timeout", &[]);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the resolver waited for the command"
        );
        for pid in read_pids(&pids) {
            assert!(gone(pid), "process {pid} outlived the timeout");
        }
    }
}

#[test]
fn cmd_leaves_nothing_running_after_success() {
    let fx = Fixture::new();
    let pids = fx.path("pids");
    let reference = format!("cmd:sleep 30 >/dev/null & echo $! > {}; printf ok", pids.display());
    assert_eq!(value(&fx.resolver(), &reference), "ok");
    for pid in read_pids(&pids) {
        assert!(gone(pid), "process {pid} outlived the resolution");
    }
}

#[test]
fn cmd_sees_a_minimal_environment() {
    let fx = Fixture::new();
    std::env::set_var("OS_TOKEN_FILE", "leak");
    std::env::set_var("OPEN_CONDUIT_X", "leak");
    let resolver = fx.resolver();
    assert_eq!(value(&resolver, r#"cmd:printf '%s' "${OS_TOKEN_FILE:-none}""#), "none");
    assert_eq!(value(&resolver, r#"cmd:printf '%s' "${OPEN_CONDUIT_X:-none}""#), "none");
    assert_eq!(value(&resolver, r#"cmd:printf '%s' "$PATH""#), CMD_PATH);

    let names = value(&resolver, "cmd:env | cut -d= -f1 | sort | tr '\\n' ' '");
    let allowed = ["HOME", "PATH", "PWD", "OLDPWD", "SHLVL", "_"];
    for name in names.split_whitespace() {
        assert!(allowed.contains(&name), "the command saw {name}");
    }

    let with_home = resolver
        .clone()
        .with_env(env_of(&[("HOME", "/zq/home"), ("OS_TOKEN_FILE", "leak")]));
    assert_eq!(value(&with_home, r#"cmd:printf '%s' "$HOME""#), "/zq/home");
    assert_eq!(value(&with_home, r#"cmd:printf '%s' "${OS_TOKEN_FILE:-none}""#), "none");
    let without_home = resolver.with_env(env_of(&[]));
    assert_eq!(value(&without_home, r#"cmd:printf '%s' "${HOME-unset}""#), "unset");
}

#[test]
fn unknown_schemes_are_unsupported() {
    let fx = Fixture::new();
    let resolver = fx.resolver();
    for reference in [
        "vault:zqpath",
        "KEYRING:open-conduit/zqgithub",
        "https://zq.example.test/x",
        ":zq",
    ] {
        refused(&resolver, reference, "unsupported_scheme", &[]);
    }
    refused(&resolver, "zq-plain-value", "invalid_reference", &[]);
}

#[test]
fn secrets_never_print_their_value() {
    let fx = Fixture::new();
    let secret = fx
        .resolver()
        .resolve("keyring:open-conduit/zqgithub")
        .expect("resolves");
    assert_eq!(format!("{secret:?}"), "Secret(***)");
    assert_eq!(format!("{secret}"), "***");
    assert_eq!(format!("{:?}", Ok::<Secret, SecretError>(secret)), "Ok(Secret(***))");
}

fn read_pids(path: &Path) -> Vec<i32> {
    let text = fs::read_to_string(path).expect("the command recorded its pids");
    let pids: Vec<i32> = text.lines().map(|l| l.trim().parse().expect("a pid")).collect();
    assert!(!pids.is_empty());
    pids
}

/// Whether `pid` no longer runs: absent, or a zombie waiting for a reaper. SIGKILL is delivered
/// asynchronously, so this allows the kernel a moment to finish.
fn gone(pid: i32) -> bool {
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let state = fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        });
        if matches!(state, None | Some('Z') | Some('X')) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `config check` accepts `reference` as a secret's reference.
fn validation_accepts(reference: &str) -> bool {
    let config = serde_json::json!({
        "version": 1,
        "secrets": {"k": reference},
        "scopes": {"s": {"authorization": {"operations": ["emit"]}}}
    });
    match conduit_config::parse(config.to_string().as_bytes()) {
        Ok(_) => true,
        Err(diagnostics) => !diagnostics.iter().any(|d| d.code == "invalid_reference"),
    }
}

/// Whether the resolver takes `reference` for a well-formed one (it may still find nothing there).
fn resolver_accepts(resolver: &Resolver, reference: &str) -> bool {
    !matches!(
        resolver.resolve(reference),
        Err(SecretError::InvalidReference | SecretError::UnsupportedScheme)
    )
}

/// Validation and the resolver give every reference the same verdict: a configuration that
/// passes `config check` never fails at attempt start for a malformed reference. `keyring:svc` and
/// `env:1BAD` once passed the one and failed the other.
#[test]
fn validation_and_the_resolver_judge_every_reference_alike() {
    let fixture = Fixture::new();
    fixture.write_secrets(r#"{"present": "v"}"#, 0o600);
    let resolver = fixture.resolver().with_env(Arc::new(|_: &str| None::<OsString>));
    let rows = [
        ("keyring:open-conduit/zqgithub", true),
        ("keyring:svc/a/b", true),
        ("keyring:svc", false),
        ("keyring:/acct", false),
        ("keyring:svc/", false),
        ("file:present", true),
        ("file:absent", true),
        ("file:", false),
        ("env:GITHUB_TOKEN", true),
        ("env:_x", true),
        ("env:1BAD", false),
        ("env:A-B", false),
        ("env:", false),
        ("cmd:true", true),
        ("cmd:  ", false),
        ("vault:x", false),
        ("KEYRING:a/b", false),
        ("plain", false),
        ("", false),
    ];
    for (reference, well_formed) in rows {
        assert_eq!(
            validation_accepts(reference),
            well_formed,
            "config check on {reference:?}"
        );
        assert_eq!(
            resolver_accepts(&resolver, reference),
            well_formed,
            "the resolver on {reference:?}"
        );
    }
}

#[test]
fn a_sealed_reference_resolves_only_through_a_reference_this_daemon_was_given() {
    let fx = Fixture::new();
    fx.write_secrets(r#"{"deploy": "zq-sealed-value"}"#, 0o600);
    let given = "file:deploy";
    let sealed = conduit_config::seal(given);
    assert_eq!(
        fx.resolver().resolve(&sealed),
        Err(SecretError::ReferenceUnknown),
        "no book yet"
    );
    let snapshot = conduit_config::parse(format!(r#"{{"version":1,"secrets":{{"d":"{given}"}}}}"#).as_bytes()).unwrap();
    conduit_daemon::secrets::learn(fx.dir.path(), &snapshot).unwrap();
    let book = fx.path(conduit_daemon::secrets::BOOK_FILE);
    assert_eq!(fs::metadata(&book).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(fx.resolver().resolve(&sealed).unwrap().expose(), "zq-sealed-value");
    // A book entry that is itself sealed resolves nothing (no chains, no loops), and neither does
    // one whose text is not the reference its key seals.
    let loop_back = conduit_config::seal("file:other");
    fs::write(&book, format!(r#"{{"{loop_back}": "{loop_back}"}}"#)).unwrap();
    assert_eq!(fx.resolver().resolve(&loop_back), Err(SecretError::InvalidReference));
    fs::write(&book, format!(r#"{{"{sealed}": "file:other"}}"#)).unwrap();
    assert_eq!(
        fx.resolver().resolve(&sealed),
        Err(SecretError::InvalidReference),
        "a swapped entry"
    );
    fs::write(&book, "{}").unwrap();
    assert_eq!(
        fx.resolver().resolve(&sealed),
        Err(SecretError::ReferenceUnknown),
        "the book was emptied"
    );
}
